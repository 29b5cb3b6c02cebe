#pragma once
// RAII for the MPI library's lifetime.

#include <string>

#include "cohort/mpi/comm.h"

namespace cohort::mpi {

/// Initialises MPI on construction and finalises it on destruction. One per process, made by
/// cohort::app::Run before anything else touches MPI.
///
/// Thread level: MPI_THREAD_FUNNELED is requested — every MPI call is made by the main thread
/// (towers and intra-op threads compute, they never call MPI). The level granted is checked.
/// Right after init the world communicator is set to MPI_ERRORS_RETURN, so failed calls come back
/// as MpiError instead of aborting inside MPI.
class Environment {
 public:
  Environment(int& argc, char**& argv);
  ~Environment();
  Environment(const Environment&) = delete;
  Environment& operator=(const Environment&) = delete;

  /// True between MPI_Init and MPI_Finalize (whoever called them).
  static bool active();
  /// Ends every rank of the job at once with `code`. Never returns. Use only from app::Run.
  [[noreturn]] static void abort(int code);

  /// Notes that this process left behind, after an error, something its peers can only free
  /// together with it (a window, a collective in flight): a clean exit would leave them waiting
  /// in that free for good, so the job must end by abort(). `what` names it.
  static void note_left_behind(const std::string& what);
  /// The first note_left_behind(), or "".
  static std::string left_behind();

  /// Where this process belongs to a group of peers that fail alike more often than the whole
  /// job does (the workers, whom a bad input they all read fails while the ps tasks serve on):
  /// the group, and its members' name in the plural, for app::Run to say such an error once for
  /// them all ("[all 7 workers] error: ..."). Server sets it on the computing tasks; a later
  /// call replaces it.
  static void set_failure_group(Comm group, std::string members);
  /// That group (null where none), and its members' name.
  static const Comm* failure_group();
  static std::string failure_group_members();

  /// The MPI whose mpi.h this library was compiled with: "Open MPI 4.1.4", "MPICH 4.0.2" (MPICH
  /// and the implementations that keep its ABI: Intel MPI, MVAPICH, Cray MPICH), or "MPI 3.1".
  static std::string built_with();
  /// What MPI_Get_library_version says of the MPI library loaded now (callable before init).
  static std::string loaded();
  /// Why a program of this library cannot run on the MPI library `loaded` (what
  /// MPI_Get_library_version says) when it was compiled with `built` (as built_with() says), or
  /// "" when it can: their handles differ between Open MPI and the MPICH family, so the first
  /// call would crash. The construction refuses such a library before MPI_Init, naming both.
  static std::string library_mismatch(const std::string& built, const std::string& loaded);

 private:
  bool owns_ = false;
  Comm ending_;  // the world's duplicate, for the barrier before MPI_Finalize
};

}  // namespace cohort::mpi
