#pragma once
// The check that turns a failed MPI call into an exception of Cohort's one hierarchy
// (core/base/error.h).

#include <string>

#include "cohort/core/base/error.h"

namespace cohort::mpi {

/// A failed MPI call: what() names the call, MPI's error string, the rank (and task, once known)
/// and the source location.
class MpiError : public Error {
 public:
  MpiError(const std::string& call, int code, const char* file, int line);
  int code() const noexcept { return code_; }

 private:
  int code_;
};

}  // namespace cohort::mpi

/// Calls an MPI function and throws cohort::mpi::MpiError when it does not return MPI_SUCCESS.
/// Works because every communicator and window Cohort makes is set to MPI_ERRORS_RETURN.
#define COHORT_MPI_CALL(call)                                              \
  do {                                                                     \
    const int cohort_mpi_rc_ = (call);                                     \
    if (cohort_mpi_rc_ != MPI_SUCCESS)                                     \
      throw ::cohort::mpi::MpiError(#call, cohort_mpi_rc_, __FILE__, __LINE__); \
  } while (0)
