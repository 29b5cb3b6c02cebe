#include "cohort/core/dist/node_sum.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "support/mpi_test.h"

using cohort::NodeSum;
using cohort::mpi::Comm;

namespace {

// A count that splits unevenly over 3 and 4 ranks and spans several summing blocks.
constexpr std::size_t kCount = 10007;

// Rank r's input in round k: small integers, so every order of summation gives the same floats.
float input(int rank, int round, std::size_t i) {
  return static_cast<float>((static_cast<int>(i % 97) + 3 * rank + 11 * round) % 50 - 25);
}

// The value every rank should find at i after round k.
float expected(const Comm& comm, int round, std::size_t i) {
  float want = 0;
  for (int r = 0; r < comm.size(); ++r) want += input(r, round, i);
  return want;
}

// Sums over `comm` through `sum` for 3 rounds, checking each result on every rank: the ranks'
// values in input(), then in this rank's own pieces (a list of tensors) within its slice.
void check_sums(const Comm& comm, NodeSum& sum) {
  for (int round = 0; round < 3; ++round) {
    const auto in = sum.input();
    REQUIRE(in.size() == kCount);
    for (std::size_t i = 0; i < kCount; ++i) in[i] = input(comm.rank(), round, i);
    const auto result = sum.sum(4096);  // pieces of 1024 floats across "nodes"
    REQUIRE(result.size() == kCount);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < kCount; ++i) wrong += result[i] != expected(comm, round, i);
    CHECK(wrong == 0);
  }
  // Pieces that cut the slices anywhere, an empty one among them; input() holds NaN within
  // this rank's slice, so a sum that read it there would show.
  std::vector<std::vector<float>> tensors;
  for (const std::size_t n : {std::size_t{700}, std::size_t{0}, std::size_t{4100}, kCount - 4800})
    tensors.emplace_back(n);
  const std::vector<std::span<float>> pieces(tensors.begin(), tensors.end());
  const auto [first, last] = sum.slice(kCount);
  for (int round = 3; round < 6; ++round) {
    std::size_t at = 0;
    for (auto& t : tensors)
      for (float& x : t) x = input(comm.rank(), round, at++);
    const auto in = sum.input();
    for (std::size_t i = 0; i < kCount; ++i)
      in[i] = i >= first && i < last ? std::numeric_limits<float>::quiet_NaN()
                                     : input(comm.rank(), round, i);
    const auto result = sum.sum(4096, pieces);
    REQUIRE(result.size() == kCount);
    std::size_t wrong = 0, wrong_own = 0;
    at = 0;
    for (const auto& t : tensors)
      for (const float x : t) {
        const float want = expected(comm, round, at);
        wrong += result[at] != want;
        wrong_own += at >= first && at < last && x != want;
        ++at;
      }
    CHECK(wrong == 0);
    CHECK(wrong_own == 0);
  }
}

}  // namespace

COHORT_MPI_TEST_CASE("node sums: the ranks of one node", 3) {
  auto sum = NodeSum::make(comm, kCount);
  REQUIRE(sum != nullptr);
  check_sums(comm, *sum);
}

COHORT_MPI_TEST_CASE("node sums: two nodes of two ranks, summed across with MPI", 4) {
  const Comm nodes = comm.split(comm.rank() / 2, comm.rank());  // as if ranks 0-1, 2-3 were nodes
  auto sum = NodeSum::make(comm, kCount, &nodes);
  REQUIRE(sum != nullptr);
  check_sums(comm, *sum);
}

COHORT_MPI_TEST_CASE("node sums: none for nodes of different sizes, or of one rank each", 4) {
  const Comm uneven = comm.split(comm.rank() == 3 ? 1 : 0, comm.rank());  // 3 + 1
  CHECK(NodeSum::make(comm, kCount, &uneven) == nullptr);
  const Comm alone = comm.split(comm.rank(), 0);  // a rank per node
  CHECK(NodeSum::make(comm, kCount, &alone) == nullptr);
}
