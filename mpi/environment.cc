#include "cohort/mpi/environment.h"

#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "cohort/core/base/stall_watch.h"
#include "cohort/core/base/wait.h"
#include "cohort/mpi/error.h"

namespace cohort::mpi {
namespace {

std::string& left_behind_note() {
  static std::string note;
  return note;
}

struct FailureGroup {
  Comm group;
  std::string members;
};
FailureGroup& failure_group_of_process() {
  static FailureGroup group;
  return group;
}

}  // namespace

Environment::Environment(int& argc, char**& argv) {
  if (active()) return;  // someone else (a test harness) owns the library
  // Before MPI_Init, which takes no handle: a program run with another MPI's library (another
  // MPI module loaded, LD_LIBRARY_PATH) crashes at its first call that passes one.
  if (const std::string mismatch = library_mismatch(built_with(), loaded()); !mismatch.empty())
    throw Error(mismatch);
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
  ending_ = Comm::world().dup();
}

Environment::~Environment() {
  if (!owns_ || !active()) return;
  // MPI_Finalize waits for every process of the job: one that stalled (an evaluator, say) would
  // hold the others here for good once training is over.
  const StallWatch watch("MPI_Finalize, which waits for every process of the job");
  // The processes wait for each other first in a barrier of their own, sleeping between tests:
  // a peer that then fails and aborts the job ends them as it should, where Open MPI 4 may leave
  // a process waiting inside MPI_Finalize's own exchange, and the job with it, running.
  if (!ending_.is_null()) {
    try {
      Request barrier = ending_.ibarrier();
      wait_until([&] { return !barrier.active() || barrier.test().has_value(); },
                 std::chrono::milliseconds::zero(), [] { return std::string("the other processes"); });
      ending_ = Comm();
    } catch (const std::exception&) {
      // MPI_Finalize waits all the same.
    }
  }
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

void Environment::set_failure_group(Comm group, std::string members) {
  failure_group_of_process() = {std::move(group), std::move(members)};
}

const Comm* Environment::failure_group() {
  const Comm& group = failure_group_of_process().group;
  return group.is_null() ? nullptr : &group;
}

std::string Environment::failure_group_members() { return failure_group_of_process().members; }

std::string Environment::built_with() {
#if defined(OPEN_MPI)
  return "Open MPI " + std::to_string(OMPI_MAJOR_VERSION) + "." + std::to_string(OMPI_MINOR_VERSION) +
         "." + std::to_string(OMPI_RELEASE_VERSION);
#elif defined(MPICH_VERSION)
  return std::string("MPICH ") + MPICH_VERSION;
#else
  return "MPI " + std::to_string(MPI_VERSION) + "." + std::to_string(MPI_SUBVERSION);
#endif
}

std::string Environment::loaded() {
  // Sized for any implementation: the buffer's bound is the loaded library's, which may be
  // larger than this mpi.h's MPI_MAX_LIBRARY_VERSION_STRING (MPICH's is 8192).
  std::vector<char> text(1 << 16);
  int length = 0;
  if (MPI_Get_library_version(text.data(), &length) != MPI_SUCCESS) return "";
  std::string out(text.data(), static_cast<std::size_t>(std::max(0, std::min<int>(length, text.size()))));
  // One line: the first (MPICH and others add lines of configuration details).
  out = out.substr(0, out.find_first_of("\n\r"));
  while (!out.empty() && (out.back() == ' ' || out.back() == '\t')) out.pop_back();
  return out;
}

std::string Environment::library_mismatch(const std::string& built, const std::string& loaded) {
  const auto open_mpi = [](const std::string& text) { return text.rfind("Open MPI", 0) == 0; };
  const auto mpich = [](const std::string& text) { return text.rfind("MPICH", 0) == 0; };
  // Only the two families whose handles are known to differ; an unknown side passes.
  if (loaded.empty() || !(open_mpi(built) || mpich(built)) || open_mpi(built) == open_mpi(loaded))
    return "";
  return "Cohort was built with " + built + ", but the MPI library loaded is '" + loaded +
         "': load the MPI Cohort was built with (module help cohort names it), or rebuild "
         "Cohort with this one";
}

void Environment::abort(int code) {
  if (active()) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace cohort::mpi
