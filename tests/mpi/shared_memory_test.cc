#include "cohort/mpi/shared_memory.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "support/mpi_test.h"

using cohort::mpi::Comm;
using cohort::mpi::SharedMemory;
using cohort::test::on_every_size;

TEST_CASE("every rank reads what every rank wrote to its part, after a barrier") {
  on_every_size([](const Comm& comm) {
    const Comm node = comm.split_shared();
    // Counts that differ between ranks, none a whole number of lines, one empty.
    const auto count = [](int rank) {
      return static_cast<std::size_t>(rank == 1 ? 0 : 1000 + 7 * rank);
    };
    SharedMemory<std::int64_t> memory(node, count(node.rank()));
    REQUIRE(memory.local().size() == count(node.rank()));
    for (std::int64_t value : memory.local()) CHECK(value == 0);  // zeroed
    for (int round = 0; round < 3; ++round) {
      for (std::size_t i = 0; i < memory.local().size(); ++i)
        memory.local()[i] = 1000000 * round + 1000 * node.rank() + static_cast<std::int64_t>(i);
      memory.barrier();
      for (int r = 0; r < node.size(); ++r) {
        const auto part = memory.of(r);
        CHECK(part.size() >= count(r));
        const auto address = reinterpret_cast<std::uintptr_t>(part.data());
        CHECK(address % SharedMemory<std::int64_t>::kAlignment == 0);
        bool same = true;
        for (std::size_t i = 0; i < count(r); ++i)
          same = same && part[i] == 1000000 * round + 1000 * r + static_cast<std::int64_t>(i);
        CHECK(same);
      }
      memory.barrier();  // everyone has read before the next round writes
    }
  });
}

TEST_CASE("shared memory moves: the moved-from object frees nothing") {
  on_every_size([](const Comm& comm) {
    SharedMemory<float> a(comm.split_shared(), 16);
    a.local()[0] = 1.0f + static_cast<float>(comm.rank());
    SharedMemory<float> b(std::move(a));
    b.barrier();
    CHECK(b.of(0)[0] == 1.0f);
    CHECK(b.local()[0] == 1.0f + static_cast<float>(comm.rank()));
  });
}
