#include "cohort/gpu/stream.h"

#include "cohort/gpu/error.h"

namespace cohort::gpu {

Stream::Stream() {
  COHORT_CUDA_CALL(cudaStreamCreateWithFlags(handle_.receive(), cudaStreamNonBlocking));
}

void Stream::synchronize() const { COHORT_CUDA_CALL(cudaStreamSynchronize(get())); }

void Stream::wait(const Event& event) const {
  COHORT_CUDA_CALL(cudaStreamWaitEvent(get(), event.get(), 0));
}

bool Stream::query() const {
  const cudaError_t rc = cudaStreamQuery(get());
  // "Not ready" is an answer, and the runtime does not record it as the thread's last error.
  if (rc == cudaErrorNotReady) return false;
  if (rc != cudaSuccess)
    throw CudaError(Library::kRuntime, static_cast<int>(rc), "cudaStreamQuery(handle_)", __FILE__,
                    __LINE__);
  return true;
}

Event::Event(bool timing) {
  COHORT_CUDA_CALL(cudaEventCreateWithFlags(handle_.receive(),
                                            timing ? cudaEventDefault : cudaEventDisableTiming));
}

void Event::record(const Stream& stream) {
  COHORT_CUDA_CALL(cudaEventRecord(get(), stream.get()));
}

void Event::synchronize() const { COHORT_CUDA_CALL(cudaEventSynchronize(get())); }

bool Event::query() const {
  const cudaError_t rc = cudaEventQuery(get());
  if (rc == cudaErrorNotReady) return false;
  if (rc != cudaSuccess)
    throw CudaError(Library::kRuntime, static_cast<int>(rc), "cudaEventQuery(handle_)", __FILE__,
                    __LINE__);
  return true;
}

float Event::elapsed_ms(const Event& start) const {
  float ms = 0.0f;
  COHORT_CUDA_CALL(cudaEventElapsedTime(&ms, start.get(), get()));
  return ms;
}

}  // namespace cohort::gpu
