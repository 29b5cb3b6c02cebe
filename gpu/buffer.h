#pragma once
// DeviceBuffer<T>: an owned array in device memory.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "cohort/gpu/error.h"
#include "cohort/gpu/stream.h"

namespace cohort::gpu {

/// `size()` elements of T in the memory of the device that was current when it was made
/// (cudaMalloc), freed on destruction. The contents start undefined; call zero() if that matters.
///
/// Move-only: a move leaves the source empty. Blocking copies complete before they return and are
/// ordered after work on the legacy default stream only, not after work queued on a Stream: call
/// Stream::synchronize() first, or use the *_async variant on that stream. Copies need host spans
/// of exactly size() elements and throw InvalidArgument otherwise, CudaError when CUDA fails.
/// Not thread-safe.
template <typename T>
class DeviceBuffer {
  static_assert(std::is_trivially_copyable_v<T>, "DeviceBuffer holds trivially copyable types");

 public:
  /// An empty buffer; allocates nothing.
  DeviceBuffer() = default;
  /// Allocates `size` elements (nothing for 0). Throws CudaError when the device is out of memory.
  explicit DeviceBuffer(std::size_t size) : size_(size) {
    if (size > std::numeric_limits<std::size_t>::max() / sizeof(T))
      throw InvalidArgument("DeviceBuffer: " + std::to_string(size) +
                            " elements overflow the byte count");
    if (size > 0) COHORT_CUDA_CALL(cudaMalloc(reinterpret_cast<void**>(&data_), size_bytes()));
  }
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      release();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { release(); }

  std::size_t size() const noexcept { return size_; }
  std::size_t size_bytes() const noexcept { return size_ * sizeof(T); }
  bool empty() const noexcept { return size_ == 0; }
  /// The device address; dereference it only in device code.
  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }

  /// Blocking: copies `host` into the buffer.
  void copy_from_host(std::span<const T> host) {
    check_size(host.size(), "copy_from_host");
    if (empty()) return;
    COHORT_CUDA_CALL(cudaMemcpy(data_, host.data(), size_bytes(), cudaMemcpyHostToDevice));
    // From pageable memory cudaMemcpy may return before the DMA into device memory is done;
    // work on a non-blocking Stream is not ordered after it, so wait here.
    COHORT_CUDA_CALL(cudaStreamSynchronize(nullptr));
  }
  /// Blocking: copies the buffer into `host`.
  void copy_to_host(std::span<T> host) const {
    check_size(host.size(), "copy_to_host");
    if (empty()) return;
    COHORT_CUDA_CALL(cudaMemcpy(host.data(), data_, size_bytes(), cudaMemcpyDeviceToHost));
  }
  /// Non-blocking: queues a copy of `host` into the buffer on `stream`. `host` must stay valid and
  /// unchanged until the stream has passed the copy. Truly asynchronous only from pinned host
  /// memory (cudaHostAlloc); from pageable memory the call may block until the data is staged.
  void copy_from_host_async(std::span<const T> host, const Stream& stream) {
    check_size(host.size(), "copy_from_host_async");
    if (empty()) return;
    COHORT_CUDA_CALL(cudaMemcpyAsync(data_, host.data(), size_bytes(), cudaMemcpyHostToDevice,
                                     stream.get()));
  }
  /// Non-blocking: queues a copy of the buffer into `host` on `stream`; read `host` only after
  /// the stream (or an event recorded after the copy) has been synchronised.
  void copy_to_host_async(std::span<T> host, const Stream& stream) const {
    check_size(host.size(), "copy_to_host_async");
    if (empty()) return;
    COHORT_CUDA_CALL(cudaMemcpyAsync(host.data(), data_, size_bytes(), cudaMemcpyDeviceToHost,
                                     stream.get()));
  }
  /// Blocking: sets every byte to zero.
  void zero() {
    if (empty()) return;
    COHORT_CUDA_CALL(cudaMemset(data_, 0, size_bytes()));
    COHORT_CUDA_CALL(cudaStreamSynchronize(nullptr));
  }
  /// Non-blocking: queues setting every byte to zero on `stream`.
  void zero_async(const Stream& stream) {
    if (empty()) return;
    COHORT_CUDA_CALL(cudaMemsetAsync(data_, 0, size_bytes(), stream.get()));
  }

 private:
  void check_size(std::size_t host_size, const char* what) const {
    if (host_size != size_)
      throw InvalidArgument("DeviceBuffer::" + std::string(what) + ": host span has " +
                            std::to_string(host_size) + " elements, the buffer " +
                            std::to_string(size_));
  }
  void release() noexcept {
    // Nothing to report from a destructor; a failure here means the context is already broken,
    // which a checked call has reported or will report.
    if (data_ != nullptr) cudaFree(data_);
    data_ = nullptr;
    size_ = 0;
  }

  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace cohort::gpu
