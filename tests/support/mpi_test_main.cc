#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdlib>

#include "cohort/mpi/comm.h"
#include "cohort/mpi/environment.h"
#include "support/mpi_test.h"

namespace cohort::test {

void run_on_ranks(int nranks, void (*body)(const mpi::Comm&)) {
  const mpi::Comm world = mpi::Comm::world();
  // A program runs at several sizes (its NP list, e.g. 1 2 3 4): a case for more ranks than this
  // run has applies to the program's larger runs, and runs there (ctest lists them), not here;
  // one for more than its largest run would run nowhere.
  if (const char* largest = std::getenv("COHORT_TEST_LARGEST_NP");
      largest != nullptr && nranks > std::atoi(largest))
    FAIL("needs " << nranks << " ranks, and this program's largest run has " << largest
                  << ": add " << nranks << " to its NP list");
  if (world.size() < nranks) {
    MESSAGE("not at this size: needs " << nranks << " ranks, the world has " << world.size());
    return;
  }
  const int rank = world.rank();
  const mpi::Comm comm = world.split(rank < nranks ? 0 : MPI_UNDEFINED, rank);
  if (!comm.is_null()) body(comm);
}

void on_every_size(void (*body)(const mpi::Comm&)) {
  for (int n = 1; n <= mpi::Comm::world().size(); ++n) run_on_ranks(n, body);
}

}  // namespace cohort::test

int main(int argc, char** argv) {
  cohort::mpi::Environment environment(argc, argv);
  const cohort::mpi::Comm world = cohort::mpi::Comm::world();
  doctest::Context context(argc, argv);
  // Rank 0 reports in full; the others speak only of failures.
  if (world.rank() != 0) context.setOption("minimal", true);
  const int failed = context.run() != 0 ? 1 : 0;
  const int any_failed = world.allreduce(failed, cohort::mpi::Op::kMax);
  return any_failed;
}
