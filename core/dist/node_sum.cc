#include "cohort/core/dist/node_sum.h"

#include <algorithm>

#include "cohort/core/base/error.h"
#include "cohort/core/dist/fusion.h"
#include "cohort/mpi/error.h"

namespace cohort {
namespace {

// Floats summed at a time: every node rank's block stays in L1 while it is added in.
constexpr std::size_t kBlock = 2048;

// Where the result starts in the node's rank 0's part: on the line after its input.
std::size_t result_offset(std::size_t count) {
  constexpr std::size_t kLine = mpi::SharedMemory<float>::kAlignment / sizeof(float);
  return (count + kLine - 1) / kLine * kLine;
}

}  // namespace

std::unique_ptr<NodeSum> NodeSum::make(const mpi::Comm& ranks, std::size_t count,
                                       const mpi::Comm* nodes) {
  mpi::Comm node = nodes != nullptr ? nodes->dup() : ranks.split_shared();
  const int most = ranks.allreduce(node.size(), mpi::Op::kMax);
  if (most == 1 || most != ranks.allreduce(node.size(), mpi::Op::kMin)) return nullptr;
  mpi::Comm across = ranks.split(node.rank(), ranks.rank());
  // Where MPI has no shared-memory window (Open MPI without its osc sm component), none.
  std::unique_ptr<NodeSum> sum;
  int made = 1;
  try {
    sum.reset(new NodeSum(node, std::move(across), count));
  } catch (const mpi::MpiError&) {
    made = 0;
  }
  if (ranks.allreduce(made, mpi::Op::kMin) == 0) return nullptr;
  return sum;
}

NodeSum::NodeSum(const mpi::Comm& node, mpi::Comm across, std::size_t count)
    : across_(std::move(across)),
      count_(count),
      memory_(node, node.rank() == 0 ? result_offset(count) + count : count) {}

std::span<const float> NodeSum::sum(std::int64_t fusion_bytes) { return sum(fusion_bytes, count_); }

std::span<const float> NodeSum::sum(std::int64_t fusion_bytes, std::size_t count) {
  if (count > count_)
    throw InvalidArgument("NodeSum::sum: " + std::to_string(count) + " values of a buffer of " +
                          std::to_string(count_));
  const int ranks = memory_.comm().size();
  const auto me = static_cast<std::size_t>(memory_.comm().rank());
  const auto n = static_cast<std::size_t>(ranks);
  const std::span<float> result = memory_.of(0).subspan(result_offset(count_), count);
  // Every input is complete, and every rank is done reading the last result.
  memory_.barrier();
  const std::size_t first = count * me / n, last = count * (me + 1) / n;
  float* out = result.data();
  for (std::size_t begin = first; begin < last; begin += kBlock) {
    const std::size_t end = std::min(last, begin + kBlock);
    const float* a = memory_.of(0).data();
    const float* b = memory_.of(1).data();
    for (std::size_t i = begin; i < end; ++i) out[i] = a[i] + b[i];
    for (int r = 2; r < ranks; ++r) {
      const float* c = memory_.of(r).data();
      for (std::size_t i = begin; i < end; ++i) out[i] += c[i];
    }
  }
  if (across_.size() > 1)
    allreduce_fused(across_, result.subspan(first, last - first), fusion_bytes);
  // Every slice is summed: the whole result may be read.
  memory_.barrier();
  return result;
}

}  // namespace cohort
