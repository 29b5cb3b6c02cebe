#pragma once
// Sums over the replicas through the memory each node's ranks share.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/mpi/comm.h"
#include "cohort/mpi/shared_memory.h"

namespace cohort {

/// The sum over every rank of a communicator of one float buffer per rank, identical on every
/// rank: allreduce mode's sum of the gradients. The ranks of a node share their buffers and one
/// result buffer. Each rank sums its slice of the buffers over the node's ranks into the result;
/// with several nodes it then sums that slice across them, with the rank that holds the same
/// slice on every other node (in-place MPI_Allreduce); every rank then reads the whole result.
/// Against one in-place MPI_Allreduce of the buffers, no rank copies its buffer to another rank
/// or the sum back into its own: on one node only the summing pass touches the data (docs/
/// BENCHMARKS.md). Summation order: the node's ranks in order, then MPI's across the nodes.
///
/// Not copyable or movable; collective construction and destruction over the communicator.
class NodeSum {
 public:
  /// Collective over `ranks`. Null on every rank where it cannot serve: the nodes hold different
  /// numbers of ranks (the slices would not match), every node holds one rank (nothing to
  /// share), or MPI makes no shared-memory window (Open MPI without its osc sm component).
  /// `nodes` splits `ranks` by node: Comm::split_shared() when absent (a test may group the
  /// ranks of one machine as if they were nodes).
  static std::unique_ptr<NodeSum> make(const mpi::Comm& ranks, std::size_t count,
                                       const mpi::Comm* nodes = nullptr);
  NodeSum(const NodeSum&) = delete;
  NodeSum& operator=(const NodeSum&) = delete;

  /// This rank's buffer: what it puts here before sum() is its part of the sum.
  std::span<float> input() { return memory_.local().first(count_); }
  /// Collective over the ranks, blocking: the sum of every rank's input(). The result stays as it
  /// is until this rank calls sum() again; input() may be rewritten as soon as sum() returns.
  /// Pieces of at most `fusion_bytes` cross the nodes.
  std::span<const float> sum(std::int64_t fusion_bytes);
  /// The same for the first `count` values of every input (at most input().size()) alone.
  std::span<const float> sum(std::int64_t fusion_bytes, std::size_t count);
  /// The same, where this rank's own values lie in `values` (spans that follow one another: a
  /// list of tensors, at most input().size() values in all): within its slice(count) they are
  /// read from there, not from input() (no other rank reads that part of input()), and the sum
  /// of the slice is written back there. So a caller that copies its tensors into input() and
  /// the sum out of the result copies only the values outside its slice.
  std::span<const float> sum(std::int64_t fusion_bytes, std::span<const std::span<float>> values);
  /// The values [first, second) of the first `count` that this rank adds up over the node.
  std::pair<std::size_t, std::size_t> slice(std::size_t count) const;
  /// Collective over the ranks, in place of a sum(): this rank leaves the sums (its training
  /// ends). Where every rank leaves alike, it returns. Where some rank calls sum() instead (it
  /// runs on past where this one stopped), the two sides learn it rather than wait for each
  /// other for good: that sum() throws Parted naming the ranks that left, and leave() throws
  /// Parted naming the ranks that sum on; both then leave the memory to the job's end
  /// (abandon()). Across nodes, the summing ranks of the node of a rank that leaves learn it,
  /// and their error ends the job (app::Run); a node whose ranks all leave at once is not seen
  /// by the other nodes, which wait in their sum until the stall timeout.
  void leave();
  /// After a leave() that every rank made alike, and once every rank is past it (a collective
  /// step of the caller's own between them): this rank sums again. Local.
  void rejoin();
  /// What sum() and leave() throw where the ranks part: `ranks` are the others' ranks in the
  /// communicator given to make().
  class Parted : public Error {
   public:
    Parted(const std::string& what, std::vector<int> ranks) : Error(what), ranks(std::move(ranks)) {}
    std::vector<int> ranks;
  };
  /// After an error: the destruction takes no collective step (mpi::SharedMemory::abandon).
  void abandon() noexcept {
    memory_.abandon();
    left_ = true;
  }
  /// Leaves (leave()) unless it has, or was abandoned; where it parts from a rank that sums on,
  /// it frees nothing (that rank's error ends the job).
  ~NodeSum();

 private:
  NodeSum(const mpi::Comm& node, mpi::Comm across, std::size_t count, std::vector<int> ranks);
  // This rank's word on whether it has left the sums (1) or sums (0), and each rank's.
  float& left_word();
  float left_word(int rank);
  // After the first of a sum's or leave()'s two barriers: the node ranks whose word differs from
  // this rank's, as ranks of make()'s communicator; empty where all agree.
  std::vector<int> parted();
  std::span<const float> sum(std::int64_t fusion_bytes, std::size_t count,
                             std::span<const std::span<float>> values);
  // out[i] := the sum over the node's ranks of their values i, for i in [begin, end); this
  // rank's values are read from `own` (its value `begin` first) where it is not null, and the
  // sums then written back there too when `write_back`.
  void add(std::size_t begin, std::size_t end, float* out, float* own, bool write_back);

  mpi::Comm across_;  // the ranks with this node rank, one per node
  std::size_t count_;
  std::vector<int> ranks_;  // each node rank's rank in make()'s communicator
  // Over this node's ranks: each rank's input, then on the next line its left_word(); on the
  // node's rank 0, on the line after that, the result.
  mpi::SharedMemory<float> memory_;
  bool left_ = false;  // leave() (or abandon()) since the last rejoin()
  int exceptions_at_start_ = std::uncaught_exceptions();
};

/// Calls fn(x, at, n) for each stretch of the values [begin, end) of `pieces` (spans that follow
/// one another; value 0 starts the first): x points at those n values, the first of them value
/// `at`.
template <typename F>
void for_each_within(std::span<const std::span<float>> pieces, std::size_t begin, std::size_t end,
                     F&& fn) {
  std::size_t at = 0;
  for (const std::span<float>& piece : pieces) {
    if (at >= end) break;
    const std::size_t b = std::max(begin, at), e = std::min(end, at + piece.size());
    if (b < e) fn(piece.data() + (b - at), b, e - b);
    at += piece.size();
  }
}

}  // namespace cohort
