#pragma once
// cuBLAS and cuDNN library handles, owned (Handle<T>) and bound to a Stream.

#include <cublas_v2.h>
#include <cudnn.h>

#include "cohort/gpu/handle.h"
#include "cohort/gpu/stream.h"

namespace cohort::gpu {

/// Owns a cuBLAS handle whose calls are queued on one stream.
///
/// Created for the device current at construction; use it only while that device is current.
/// The Stream it is bound to must outlive it (or be replaced with set_stream()). Move-only: a move
/// leaves the source null. One handle per thread: cuBLAS handles must not be shared by threads
/// calling concurrently.
class CublasHandle {
 public:
  /// Creates a handle bound to `stream`. Throws CudaError (e.g. no device).
  explicit CublasHandle(const Stream& stream);

  cublasHandle_t get() const noexcept { return handle_.get(); }
  /// Queues later calls on `stream` instead.
  void set_stream(const Stream& stream);

 private:
  Handle<cublasHandle_t> handle_;
};

/// Owns a cuDNN handle whose calls are queued on one stream. Same rules as CublasHandle.
class CudnnHandle {
 public:
  /// Creates a handle bound to `stream`. Throws CudaError (e.g. no device).
  explicit CudnnHandle(const Stream& stream);

  cudnnHandle_t get() const noexcept { return handle_.get(); }
  /// Queues later calls on `stream` instead.
  void set_stream(const Stream& stream);
  /// The stream calls are queued on.
  cudaStream_t stream() const;

 private:
  Handle<cudnnHandle_t> handle_;
};

}  // namespace cohort::gpu
