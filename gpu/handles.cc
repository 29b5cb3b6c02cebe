#include "cohort/gpu/handles.h"

#include "cohort/gpu/error.h"

namespace cohort::gpu {

// A throw after the create call leaves the constructor unfinished; the member Handle, already
// constructed, still destroys the new object.
CublasHandle::CublasHandle(const Stream& stream) {
  COHORT_CUBLAS_CALL(cublasCreate(handle_.receive()));
  set_stream(stream);
}

void CublasHandle::set_stream(const Stream& stream) {
  COHORT_CUBLAS_CALL(cublasSetStream(get(), stream.get()));
}

CudnnHandle::CudnnHandle(const Stream& stream) {
  COHORT_CUDNN_CALL(cudnnCreate(handle_.receive()));
  set_stream(stream);
}

void CudnnHandle::set_stream(const Stream& stream) {
  COHORT_CUDNN_CALL(cudnnSetStream(get(), stream.get()));
}

cudaStream_t CudnnHandle::stream() const {
  cudaStream_t stream = nullptr;
  COHORT_CUDNN_CALL(cudnnGetStream(get(), &stream));
  return stream;
}

}  // namespace cohort::gpu
