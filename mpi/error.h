#pragma once
// The exception hierarchy every Cohort library throws from, and the check that turns a failed MPI
// call into an exception. Library code never exits or aborts: it throws, and cohort::app::Run
// (core/app.h) reports the error and takes the job down.

#include <stdexcept>
#include <string>

namespace cohort {

/// Base of every error Cohort throws.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A caller passed something malformed or inconsistent (a bad device string, a bad spec).
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

namespace mpi {

/// A failed MPI call: what() names the call, MPI's error string, the rank (and task, once known)
/// and the source location.
class MpiError : public Error {
 public:
  MpiError(const std::string& call, int code, const char* file, int line);
  int code() const noexcept { return code_; }

 private:
  int code_;
};

/// Who this process is, for messages: "worker:1 rank 3" once the cluster is known, else "rank 3".
/// Set once by the cluster layer; safe to read from any thread after that.
const std::string& ProcessLabel();
void SetProcessLabel(std::string label);

}  // namespace mpi
}  // namespace cohort

/// Calls an MPI function and throws cohort::mpi::MpiError when it does not return MPI_SUCCESS.
/// Works because every communicator and window Cohort makes is set to MPI_ERRORS_RETURN.
#define COHORT_MPI_CALL(call)                                              \
  do {                                                                     \
    const int cohort_mpi_rc_ = (call);                                     \
    if (cohort_mpi_rc_ != MPI_SUCCESS)                                     \
      throw ::cohort::mpi::MpiError(#call, cohort_mpi_rc_, __FILE__, __LINE__); \
  } while (0)
