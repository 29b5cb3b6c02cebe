#include "cohort/gpu/stream.h"

#include <utility>

#include "cohort/gpu/error.h"

namespace cohort::gpu {

Stream::Stream() { COHORT_CUDA_CALL(cudaStreamCreateWithFlags(&handle_, cudaStreamNonBlocking)); }

Stream::Stream(Stream&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    release();
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

Stream::~Stream() { release(); }

void Stream::release() noexcept {
  // A destructor cannot report a failure, and the only ones possible here (a sticky device fault,
  // a driver shutting down at process exit) have been or will be reported by a checked call.
  if (handle_ != nullptr) cudaStreamDestroy(handle_);
  handle_ = nullptr;
}

void Stream::synchronize() const { COHORT_CUDA_CALL(cudaStreamSynchronize(handle_)); }

void Stream::wait(const Event& event) const {
  COHORT_CUDA_CALL(cudaStreamWaitEvent(handle_, event.get(), 0));
}

bool Stream::query() const {
  const cudaError_t rc = cudaStreamQuery(handle_);
  // "Not ready" is an answer, and the runtime does not record it as the thread's last error.
  if (rc == cudaErrorNotReady) return false;
  if (rc != cudaSuccess)
    throw CudaError(Library::kRuntime, static_cast<int>(rc), "cudaStreamQuery(handle_)", __FILE__,
                    __LINE__);
  return true;
}

Event::Event(bool timing) {
  COHORT_CUDA_CALL(
      cudaEventCreateWithFlags(&handle_, timing ? cudaEventDefault : cudaEventDisableTiming));
}

Event::Event(Event&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    release();
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

Event::~Event() { release(); }

void Event::release() noexcept {
  if (handle_ != nullptr) cudaEventDestroy(handle_);
  handle_ = nullptr;
}

void Event::record(const Stream& stream) {
  COHORT_CUDA_CALL(cudaEventRecord(handle_, stream.get()));
}


void Event::synchronize() const { COHORT_CUDA_CALL(cudaEventSynchronize(handle_)); }

bool Event::query() const {
  const cudaError_t rc = cudaEventQuery(handle_);
  if (rc == cudaErrorNotReady) return false;
  if (rc != cudaSuccess)
    throw CudaError(Library::kRuntime, static_cast<int>(rc), "cudaEventQuery(handle_)", __FILE__,
                    __LINE__);
  return true;
}

float Event::elapsed_ms(const Event& start) const {
  float ms = 0.0f;
  COHORT_CUDA_CALL(cudaEventElapsedTime(&ms, start.handle_, handle_));
  return ms;
}

}  // namespace cohort::gpu
