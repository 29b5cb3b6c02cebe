#include "cohort/core/dist/node_sum.h"

#include <algorithm>
#include <vector>

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
    sum.reset(new NodeSum(std::move(node), std::move(across), count));
  } catch (const mpi::MpiError&) {
    made = 0;
  }
  if (ranks.allreduce(made, mpi::Op::kMin) == 0) return nullptr;
  return sum;
}

NodeSum::NodeSum(mpi::Comm node, mpi::Comm across, std::size_t count)
    : node_(std::move(node)),
      across_(std::move(across)),
      count_(count),
      memory_(node_, node_.rank() == 0 ? result_offset(count) + count : count) {}

std::span<const float> NodeSum::sum(std::int64_t fusion_bytes) {
  const auto ranks = static_cast<std::size_t>(node_.size());
  const auto me = static_cast<std::size_t>(node_.rank());
  const std::span<float> result = memory_.of(0).subspan(result_offset(count_), count_);
  // Every input is complete, and every rank is done reading the last result.
  memory_.barrier();
  const std::size_t first = count_ * me / ranks, last = count_ * (me + 1) / ranks;
  std::vector<const float*> in(ranks);
  for (std::size_t r = 0; r < ranks; ++r) in[r] = memory_.of(static_cast<int>(r)).data();
  float* out = result.data();
  for (std::size_t begin = first; begin < last; begin += kBlock) {
    const std::size_t end = std::min(last, begin + kBlock);
    const float* a = in[0];
    const float* b = in[1];
    for (std::size_t i = begin; i < end; ++i) out[i] = a[i] + b[i];
    for (std::size_t r = 2; r < ranks; ++r) {
      const float* c = in[r];
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
