#include "cohort/core/dist/fusion.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <span>
#include <vector>

#include "support/mpi_test.h"

using cohort::TensorFusion;
using cohort::mpi::Comm;

namespace {

// Tensors of bias and weight sizes, an empty one, and one larger than the fusion buffers the
// tests use: they pack several to a buffer, end a buffer mid-tensor, and span several buffers.
const std::vector<std::size_t> kSizes = {64, 1, 0, 300, 5000, 17, 256, 1000, 3};

// Rank r's value at element i of tensor t in round k: small integers, so every order of
// summation gives the same floats.
float value(int rank, int round, std::size_t t, std::size_t i) {
  return static_cast<float>((static_cast<int>((i + 7 * t) % 89) + 5 * rank + 13 * round) % 40 - 20);
}

// Three rounds of allreduce through `fusion`, checked element by element on every rank.
void check_sums(const Comm& comm, TensorFusion& fusion) {
  std::vector<std::vector<float>> tensors;
  for (const std::size_t n : kSizes) tensors.emplace_back(n);
  std::vector<std::span<float>> spans(tensors.begin(), tensors.end());
  for (int round = 0; round < 3; ++round) {
    for (std::size_t t = 0; t < tensors.size(); ++t)
      for (std::size_t i = 0; i < tensors[t].size(); ++i)
        tensors[t][i] = value(comm.rank(), round, t, i);
    fusion.allreduce(std::span<const std::span<float>>(spans));
    std::size_t wrong = 0;
    for (std::size_t t = 0; t < tensors.size(); ++t)
      for (std::size_t i = 0; i < tensors[t].size(); ++i) {
        float want = 0;
        for (int r = 0; r < comm.size(); ++r) want += value(r, round, t, i);
        wrong += tensors[t][i] != want;
      }
    CHECK(wrong == 0);
  }
}

}  // namespace

TEST_CASE("tensor fusion sums lists of tensors exactly, in shared memory and with MPI_Allreduce") {
  cohort::test::on_every_size([](const Comm& comm) {
    // 4 KB buffers (1024 floats): the 5000-float tensor spans several, others share one.
    for (const std::int64_t fusion_bytes : {std::int64_t{4096}, std::int64_t{64} << 20}) {
      TensorFusion with_mpi(comm, fusion_bytes, /*shared_memory=*/false);
      check_sums(comm, with_mpi);
      CHECK_FALSE(with_mpi.in_shared_memory());
      TensorFusion shared(comm, fusion_bytes);
      check_sums(comm, shared);
      // One node here: shared memory wherever there is more than one rank to share it.
      CHECK(shared.in_shared_memory() == (comm.size() > 1));
    }
  });
}

TEST_CASE("tensor fusion refuses a buffer that holds no value") {
  cohort::test::on_every_size([](const Comm& comm) {
    CHECK_THROWS_AS(TensorFusion(comm, 3), cohort::InvalidArgument);
  });
}
