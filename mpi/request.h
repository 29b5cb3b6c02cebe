#pragma once
// RAII over a non-blocking operation's MPI_Request.

#include <mpi.h>

#include <optional>

namespace cohort::mpi {

/// Owns one MPI_Request (from MPI_Isend, MPI_Irecv, ...), or none.
///
/// Move-only: a move leaves the source null. The destructor of a still-active request waits for
/// it (MPI_Wait), ignoring errors, because freeing a request whose buffer may still be in use
/// would be worse; it does nothing after MPI_Finalize. So cancel() a receive that may never be
/// matched before letting it go. Not thread-safe (MPI_THREAD_FUNNELED: main thread only).
///
///   std::int32_t value = 0;
///   mpi::Request request = comm.irecv(std::span(&value, 1), MPI_ANY_SOURCE, kTag);
///   while (!request.test()) do_something_else();
class Request {
 public:
  /// A null request: not active, wait() and test() return at once.
  Request() = default;
  /// Takes ownership of `handle` (MPI_REQUEST_NULL gives a null request).
  explicit Request(MPI_Request handle) noexcept : handle_(handle) {}

  Request(Request&& other) noexcept;
  Request& operator=(Request&& other) noexcept;
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  ~Request();

  /// True while the operation has not been completed by wait(), test() or cancel().
  bool active() const { return handle_ != MPI_REQUEST_NULL; }
  MPI_Request get() const { return handle_; }

  /// Blocking. Completes the operation and returns its status (an empty status for a null
  /// request). Throws MpiError if the operation failed.
  MPI_Status wait();
  /// Non-blocking. The status if the operation has completed (the request becomes null), else
  /// nothing. A null request counts as completed. Also drives MPI's progress engine.
  std::optional<MPI_Status> test();
  /// Blocking until the cancellation settles. Cancels the operation; returns nothing if it was
  /// cancelled, or its status if it had completed first (then the data arrived as usual). The
  /// request is null afterwards; a null request returns nothing.
  std::optional<MPI_Status> cancel();
  /// Forgets the operation without completing it: for a rank that leaves after an error while
  /// its peers may never take part (the job then ends with it, see app::Run). The request is
  /// null afterwards, and its destructor waits for nothing.
  void abandon() noexcept { handle_ = MPI_REQUEST_NULL; }

 private:
  MPI_Request handle_ = MPI_REQUEST_NULL;
};

}  // namespace cohort::mpi
