#include "cohort/gpu/stream.h"

#include "cohort/gpu/error.h"

namespace cohort::gpu {
namespace {

// The answer of cudaStreamQuery or cudaEventQuery. "Not ready" is an answer, and the runtime
// does not record it as the thread's last error.
bool finished(cudaError_t rc, const char* call) {
  if (rc == cudaErrorNotReady) return false;
  if (rc != cudaSuccess)
    throw CudaError(Library::kRuntime, static_cast<int>(rc), call, __FILE__, __LINE__);
  return true;
}

}  // namespace

Stream::Stream() {
  COHORT_CUDA_CALL(cudaStreamCreateWithFlags(handle_.receive(), cudaStreamNonBlocking));
}

void Stream::synchronize() const { COHORT_CUDA_CALL(cudaStreamSynchronize(get())); }

void Stream::synchronize_quietly() const noexcept {
  cudaStreamSynchronize(get());
  cudaGetLastError();
}

void Stream::wait(const Event& event) const {
  COHORT_CUDA_CALL(cudaStreamWaitEvent(get(), event.get(), 0));
}

bool Stream::query() const { return finished(cudaStreamQuery(get()), "cudaStreamQuery"); }

Event::Event(bool timing) {
  COHORT_CUDA_CALL(cudaEventCreateWithFlags(handle_.receive(),
                                            timing ? cudaEventDefault : cudaEventDisableTiming));
}

void Event::record(const Stream& stream) {
  COHORT_CUDA_CALL(cudaEventRecord(get(), stream.get()));
}

void Event::synchronize() const { COHORT_CUDA_CALL(cudaEventSynchronize(get())); }

bool Event::query() const { return finished(cudaEventQuery(get()), "cudaEventQuery"); }

float Event::elapsed_ms(const Event& start) const {
  float ms = 0.0f;
  COHORT_CUDA_CALL(cudaEventElapsedTime(&ms, start.get(), get()));
  return ms;
}

}  // namespace cohort::gpu
