#pragma once
// Tensor fusion for allreduce: many small tensors travel in a few large MPI_Allreduce calls.

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "cohort/mpi/comm.h"

namespace cohort {

class NodeSum;

/// Tensor fusion (Horovod's): sums lists of tensors element-wise over a communicator, in place,
/// packing consecutive tensors into a fusion buffer of at most `fusion_bytes` and summing the
/// buffer at once. Where the ranks of every node can share memory (NodeSum; on by default), the
/// buffer is that memory: each rank sums its slice of the node's buffers there (reading and
/// writing its own part of that slice in its tensors), and across nodes in-place
/// MPI_Allreduce; a tensor that does not fit is cut over several buffers. Elsewhere the
/// buffer is this rank's and goes through in-place MPI_Allreduce, and a tensor larger than it is
/// reduced where it lies. The buffers are kept between calls, no larger than the tensors need.
///
///   cohort::TensorFusion fusion(comm, 64 << 20);   // collective
///   fusion.allreduce(tensors);                     // collective: same sizes, same order
class TensorFusion {
 public:
  /// Collective over `comm` (a duplicate is kept). `shared_memory` false keeps to MPI_Allreduce.
  TensorFusion(const mpi::Comm& comm, std::int64_t fusion_bytes, bool shared_memory = true);
  ~TensorFusion();
  TensorFusion(const TensorFusion&) = delete;
  TensorFusion& operator=(const TensorFusion&) = delete;

  /// Collective and blocking: every tensor := its sum over the ranks.
  void allreduce(std::span<const std::span<float>> tensors);
  /// Whether the last allreduce() summed in the nodes' shared memory.
  bool in_shared_memory() const { return shared_ != nullptr; }

 private:
  void allreduce_shared(std::span<const std::span<float>> tensors, std::size_t total);
  void allreduce_with_mpi(std::span<const std::span<float>> tensors);

  mpi::Comm comm_;
  std::int64_t fusion_bytes_;
  bool try_shared_;
  std::unique_ptr<NodeSum> shared_;  // made, or made larger, when the tensors first need it
  std::vector<float> buffer_;        // without shared memory
  std::vector<std::span<float>> pieces_;  // the stretches of the tensors in one shared buffer
};

/// The same for one contiguous buffer (a graph's flat gradients): in-place reductions of at
/// most `fusion_bytes` each. Collective and blocking.
void allreduce_fused(const mpi::Comm& comm, std::span<float> data, std::int64_t fusion_bytes);

/// The sending half of allreduce_fused_bf16 (below) for callers that send pieces themselves:
/// wire[i] := the bfloat16 nearest data[i] + residual[i], residual[i] := what that rounding lost.
/// The spans have the same size.
void round_with_feedback(std::span<const float> data, std::span<float> residual,
                         std::span<std::uint16_t> wire);

/// allreduce_fused of one buffer with bfloat16 on the wire and error feedback: each piece of
/// data + residual is rounded to bfloat16 (in `wire`, at most `fusion_bytes` of it), what the
/// rounding lost stays in `residual` for the next call (so no part of a gradient is lost for
/// good, only delayed), and the ranks' bfloat16 sum (Comm::allreduce_bf16) comes back into
/// `data` as float. `residual` has data's size and starts at zeros; it and `wire` are the
/// caller's, kept between calls. Collective and blocking. Returns the bytes handed to MPI.
std::int64_t allreduce_fused_bf16(const mpi::Comm& comm, std::span<float> data,
                                  std::span<float> residual, std::vector<std::uint16_t>& wire,
                                  std::int64_t fusion_bytes);

}  // namespace cohort
