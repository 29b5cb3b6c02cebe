#include "cohort/mpi/environment.h"

#include <mpi.h>

#include <cstdlib>
#include <string>

#include "cohort/core/base/stall_watch.h"
#include "cohort/mpi/error.h"

namespace cohort::mpi {
namespace {

std::string& left_behind_note() {
  static std::string note;
  return note;
}

}  // namespace

Environment::Environment(int& argc, char**& argv) {
  if (active()) return;  // someone else (a test harness) owns the library
  int provided = 0;
  COHORT_MPI_CALL(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided));
  owns_ = true;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (process_label().empty()) set_process_label("rank " + std::to_string(rank));
  if (provided < MPI_THREAD_FUNNELED)
    throw Error("MPI_Init_thread granted thread level " + std::to_string(provided) +
                ", Cohort needs MPI_THREAD_FUNNELED");
}

Environment::~Environment() {
  if (!owns_ || !active()) return;
  // MPI_Finalize waits for every process of the job: one that stalled (an evaluator, say) would
  // hold the others here for good once training is over.
  const StallWatch watch("MPI_Finalize, which waits for every process of the job");
  MPI_Finalize();
}

bool Environment::active() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

void Environment::note_left_behind(const std::string& what) {
  if (left_behind_note().empty()) left_behind_note() = what;
}

std::string Environment::left_behind() { return left_behind_note(); }

void Environment::abort(int code) {
  if (active()) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace cohort::mpi
