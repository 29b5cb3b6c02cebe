#pragma once
// RAII for the MPI library's lifetime.

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

 private:
  bool owns_ = false;
};

}  // namespace cohort::mpi
