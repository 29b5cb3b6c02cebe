#pragma once
// CUDA streams and events as move-only owners.

#include <cuda_runtime_api.h>

#include <exception>

#include "cohort/gpu/handle.h"

namespace cohort::gpu {

class Event;

/// Owns a CUDA stream on the device that was current when it was made.
///
/// Work queued on one stream runs in order; different streams may overlap. The stream is created
/// with cudaStreamNonBlocking, so it never waits for (or holds up) work on the legacy default
/// stream. Move-only: a move leaves the source null, which CUDA reads as the legacy default
/// stream; only assign to or destroy a moved-from Stream. Queuing work from several threads is
/// allowed (CUDA serialises it); moving or destroying while another thread uses it is not.
class Stream {
 public:
  /// Creates a stream. Throws CudaError (e.g. no device).
  Stream();
  // Destroying the stream lets work already queued complete.

  cudaStream_t get() const noexcept { return handle_.get(); }

  /// Blocks until everything queued so far has finished. Throws CudaError for a fault in that work.
  void synchronize() const;
  /// The same, ignoring any error (and clearing the thread's last one): for leaving a scope by an
  /// exception while copies into host memory may still be in flight.
  void synchronize_quietly() const noexcept;
  /// Non-blocking: whether everything queued so far has finished.
  bool query() const;
  /// Non-blocking: work queued on this stream after this call waits until `event` completes (an
  /// event recorded on another stream orders the two streams).
  void wait(const Event& event) const;

 private:
  Handle<cudaStream_t> handle_;
};

/// Waits for `stream` when the scope it guards is left by an exception (errors ignored), so
/// that no copy queued there lands in host memory after the scope has let it go.
class SyncOnUnwind {
 public:
  explicit SyncOnUnwind(const Stream& stream) : stream_(stream) {}
  SyncOnUnwind(const SyncOnUnwind&) = delete;
  SyncOnUnwind& operator=(const SyncOnUnwind&) = delete;
  ~SyncOnUnwind() {
    if (std::uncaught_exceptions() > exceptions_) stream_.synchronize_quietly();
  }

 private:
  const Stream& stream_;
  int exceptions_ = std::uncaught_exceptions();
};

/// Owns a CUDA event: a marker in a stream, for timing and for ordering work across streams.
/// Move-only: a move leaves the source null (any use of it then throws CudaError).
class Event {
 public:
  /// Creates an event. With `timing` false it cannot be used with elapsed_ms() but costs less to
  /// record and wait for. Throws CudaError.
  explicit Event(bool timing = true);

  cudaEvent_t get() const noexcept { return handle_.get(); }

  /// Non-blocking: marks the current end of `stream`'s queue. The event completes when the work
  /// queued before it does.
  void record(const Stream& stream);
  /// Blocks until the event has completed.
  void synchronize() const;
  /// Non-blocking: whether the event has completed.
  bool query() const;
  /// Milliseconds from `start` to this event; both must be recorded, completed and made with
  /// timing on. Throws CudaError otherwise.
  float elapsed_ms(const Event& start) const;

 private:
  Handle<cudaEvent_t> handle_;
};

}  // namespace cohort::gpu
