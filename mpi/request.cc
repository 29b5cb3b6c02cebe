#include "cohort/mpi/request.h"

#include <utility>

#include "cohort/mpi/environment.h"
#include "cohort/mpi/error.h"

namespace cohort::mpi {
namespace {

MPI_Status empty_status() {
  MPI_Status status{};
  status.MPI_SOURCE = MPI_ANY_SOURCE;
  status.MPI_TAG = MPI_ANY_TAG;
  status.MPI_ERROR = MPI_SUCCESS;
  return status;
}

}  // namespace

Request::Request(Request&& other) noexcept
    : handle_(std::exchange(other.handle_, MPI_REQUEST_NULL)) {}

Request& Request::operator=(Request&& other) noexcept {
  if (this != &other) {
    // The old operation's buffer may still be in use: finish it before taking the new one.
    if (active() && Environment::active()) MPI_Wait(&handle_, MPI_STATUS_IGNORE);
    handle_ = std::exchange(other.handle_, MPI_REQUEST_NULL);
  }
  return *this;
}

Request::~Request() {
  if (active() && Environment::active()) MPI_Wait(&handle_, MPI_STATUS_IGNORE);
}

MPI_Status Request::wait() {
  MPI_Status status = empty_status();
  if (!active()) return status;
  COHORT_MPI_CALL(MPI_Wait(&handle_, &status));
  return status;
}

std::optional<MPI_Status> Request::test() {
  MPI_Status status = empty_status();
  if (!active()) return status;
  int flag = 0;
  COHORT_MPI_CALL(MPI_Test(&handle_, &flag, &status));
  if (!flag) return std::nullopt;
  return status;
}

std::optional<MPI_Status> Request::cancel() {
  if (!active()) return std::nullopt;
  COHORT_MPI_CALL(MPI_Cancel(&handle_));
  MPI_Status status = empty_status();
  COHORT_MPI_CALL(MPI_Wait(&handle_, &status));
  int cancelled = 0;
  COHORT_MPI_CALL(MPI_Test_cancelled(&status, &cancelled));
  if (cancelled) return std::nullopt;
  return status;
}

}  // namespace cohort::mpi
