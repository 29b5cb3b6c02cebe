#include "cohort/core/dist/node_sum.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "cohort/core/base/error.h"
#include "cohort/core/dist/fusion.h"
#include "cohort/mpi/environment.h"
#include "cohort/mpi/error.h"

namespace cohort {
namespace {

// Floats summed at a time: every node rank's block stays in L1 while it is added in.
constexpr std::size_t kBlock = 2048;

constexpr std::size_t kLine = mpi::SharedMemory<float>::kAlignment / sizeof(float);

// Where a rank's left_word() lies: on the line after its input.
std::size_t word_offset(std::size_t count) { return (count + kLine - 1) / kLine * kLine; }

// Where the result starts in the node's rank 0's part: on the line after its word.
std::size_t result_offset(std::size_t count) { return word_offset(count) + kLine; }

}  // namespace

std::unique_ptr<NodeSum> NodeSum::make(const mpi::Comm& ranks, std::size_t count,
                                       const mpi::Comm* nodes) {
  mpi::Comm node = nodes != nullptr ? nodes->dup() : ranks.split_shared();
  const int most = ranks.allreduce(node.size(), mpi::Op::kMax);
  if (most == 1 || most != ranks.allreduce(node.size(), mpi::Op::kMin)) return nullptr;
  mpi::Comm across = ranks.split(node.rank(), ranks.rank());
  std::vector<int> of_node = node.allgather(ranks.rank());
  // Where MPI has no shared-memory window (Open MPI without its osc sm component), none.
  std::unique_ptr<NodeSum> sum;
  if (!mpi::made_on_every_rank(ranks, [&] {
        sum.reset(new NodeSum(node, std::move(across), count, std::move(of_node)));
      }))
    return nullptr;
  return sum;
}

NodeSum::NodeSum(const mpi::Comm& node, mpi::Comm across, std::size_t count, std::vector<int> ranks)
    : across_(std::move(across)),
      count_(count),
      ranks_(std::move(ranks)),
      memory_(node, result_offset(count) + (node.rank() == 0 ? count : 0)) {}

NodeSum::~NodeSum() {
  if (left_ || std::uncaught_exceptions() > exceptions_at_start_ || !mpi::Environment::active()) return;
  try {
    leave();  // parted from a rank that sums on, it abandons the memory: that rank's error ends the job
  } catch (const std::exception&) {
  }
}

float& NodeSum::left_word() { return memory_.local()[word_offset(count_)]; }

float NodeSum::left_word(int rank) { return memory_.of(rank)[word_offset(count_)]; }

std::vector<int> NodeSum::parted() {
  std::vector<int> others;
  const float mine = left_word();
  for (int r = 0; r < memory_.comm().size(); ++r)
    if (left_word(r) != mine) others.push_back(ranks_[static_cast<std::size_t>(r)]);
  return others;
}

void NodeSum::leave() {
  if (left_) return;
  left_word() = 1;
  left_ = true;
  memory_.barrier();
  const std::vector<int> others = parted();
  // The second of the sum() that the others are in, or where all leave, the point from which
  // every rank has read the words (rejoin() may then write its own).
  memory_.barrier();
  if (others.empty()) return;
  memory_.abandon();  // those ranks fail: none frees the memory with this one
  throw Parted("left the sums while other ranks summed on", others);
}

void NodeSum::rejoin() {
  if (!left_ || !memory_.active()) return;
  left_word() = 0;
  left_ = false;
}

std::span<const float> NodeSum::sum(std::int64_t fusion_bytes) { return sum(fusion_bytes, count_); }

std::span<const float> NodeSum::sum(std::int64_t fusion_bytes, std::size_t count) {
  return sum(fusion_bytes, count, {});
}

std::span<const float> NodeSum::sum(std::int64_t fusion_bytes,
                                    std::span<const std::span<float>> values) {
  std::size_t count = 0;
  for (const std::span<float>& v : values) count += v.size();
  return sum(fusion_bytes, count, values);
}

std::pair<std::size_t, std::size_t> NodeSum::slice(std::size_t count) const {
  const auto me = static_cast<std::size_t>(memory_.comm().rank());
  const auto n = static_cast<std::size_t>(memory_.comm().size());
  return {count * me / n, count * (me + 1) / n};
}

std::span<const float> NodeSum::sum(std::int64_t fusion_bytes, std::size_t count,
                                    std::span<const std::span<float>> values) {
  if (count > count_)
    throw InvalidArgument("NodeSum::sum: " + std::to_string(count) + " values of a buffer of " +
                          std::to_string(count_));
  const std::span<float> result = memory_.of(0).subspan(result_offset(count_), count);
  const auto [first, last] = slice(count);
  const bool across = across_.size() > 1;
  if (left_) throw Error("NodeSum::sum after leave(), without rejoin()");
  // Every input is complete, and every rank is done reading the last result.
  memory_.barrier();
  if (const std::vector<int> others = parted(); !others.empty()) {
    memory_.barrier();  // the second of their leave()
    memory_.abandon();  // they fail, or this rank does: none frees the memory
    left_ = true;
    throw Parted("summed on while other ranks left the sums", others);
  }
  if (values.empty()) {
    add(first, last, result.data(), nullptr, false);
  } else {
    for_each_within(values, first, last, [&](float* own, std::size_t at, std::size_t n) {
      add(at, at + n, result.data(), own, !across);
    });
  }
  if (across) {
    allreduce_fused(across_, result.subspan(first, last - first), fusion_bytes);
    for_each_within(values, first, last, [&](float* own, std::size_t at, std::size_t n) {
      std::memcpy(own, result.data() + at, n * sizeof(float));
    });
  }
  // Every slice is summed: the whole result may be read.
  memory_.barrier();
  return result;
}

void NodeSum::add(std::size_t begin, std::size_t end, float* out, float* own, bool write_back) {
  const int ranks = memory_.comm().size(), me = memory_.comm().rank();
  for (std::size_t block = begin; block < end; block += kBlock) {
    const std::size_t n = std::min(end, block + kBlock) - block;
    // Rank r's values from `block` on.
    const auto of = [&](int r) -> const float* {
      return r == me && own != nullptr ? own + (block - begin) : memory_.of(r).data() + block;
    };
    float* o = out + block;
    const float* a = of(0);
    const float* b = of(1);
    for (std::size_t i = 0; i < n; ++i) o[i] = a[i] + b[i];
    for (int r = 2; r < ranks; ++r) {
      const float* c = of(r);
      for (std::size_t i = 0; i < n; ++i) o[i] += c[i];
    }
    if (write_back) std::memcpy(own + (block - begin), o, n * sizeof(float));
  }
}

}  // namespace cohort
