#pragma once
// MPI test cases in the spirit of doctest's MPI extension (which Debian does not ship):
//
//   COHORT_MPI_TEST_CASE("accumulate from every rank", 3) {
//     // `comm` holds exactly 3 ranks; other ranks skip the body.
//     CHECK(comm.size() == 3);
//   }
//
// Every rank of the world enters every test case (the sub-communicator is made collectively);
// when the world has fewer ranks than asked, the case is skipped on every rank with a message.

#include <doctest/doctest.h>

#include "cohort/mpi/comm.h"

namespace cohort::test {

/// Collective over WORLD: runs `body` on the first `nranks` ranks with a communicator of them.
void run_on_ranks(int nranks, void (*body)(const mpi::Comm&));

/// Collective over WORLD: runs `body` on 1, 2, ... ranks, up to the size of the world.
void on_every_size(void (*body)(const mpi::Comm&));

}  // namespace cohort::test

#define COHORT_MPI_TEST_CASE_IMPL_(name, nranks, fn)                        \
  static void fn(const ::cohort::mpi::Comm& comm);                          \
  TEST_CASE(name) { ::cohort::test::run_on_ranks(nranks, fn); }             \
  static void fn([[maybe_unused]] const ::cohort::mpi::Comm& comm)

#define COHORT_MPI_TEST_CASE(name, nranks) \
  COHORT_MPI_TEST_CASE_IMPL_(name, nranks, DOCTEST_ANONYMOUS(cohort_mpi_test_))
