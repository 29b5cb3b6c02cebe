#include "cohort/gpu/handles.h"

#include <utility>

#include "cohort/gpu/error.h"

namespace cohort::gpu {

CublasHandle::CublasHandle(const Stream& stream) {
  COHORT_CUBLAS_CALL(cublasCreate(&handle_));
  try {
    set_stream(stream);
  } catch (...) {
    release();  // The constructor did not finish, so the destructor will not run.
    throw;
  }
}

CublasHandle::CublasHandle(CublasHandle&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)) {}

CublasHandle& CublasHandle::operator=(CublasHandle&& other) noexcept {
  if (this != &other) {
    release();
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

CublasHandle::~CublasHandle() { release(); }

void CublasHandle::release() noexcept {
  // Failures cannot be reported from here and only follow a context already broken.
  if (handle_ != nullptr) cublasDestroy(handle_);
  handle_ = nullptr;
}

void CublasHandle::set_stream(const Stream& stream) {
  COHORT_CUBLAS_CALL(cublasSetStream(handle_, stream.get()));
}

CudnnHandle::CudnnHandle(const Stream& stream) {
  COHORT_CUDNN_CALL(cudnnCreate(&handle_));
  try {
    set_stream(stream);
  } catch (...) {
    release();
    throw;
  }
}

CudnnHandle::CudnnHandle(CudnnHandle&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)) {}

CudnnHandle& CudnnHandle::operator=(CudnnHandle&& other) noexcept {
  if (this != &other) {
    release();
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

CudnnHandle::~CudnnHandle() { release(); }

void CudnnHandle::release() noexcept {
  if (handle_ != nullptr) cudnnDestroy(handle_);
  handle_ = nullptr;
}

void CudnnHandle::set_stream(const Stream& stream) {
  COHORT_CUDNN_CALL(cudnnSetStream(handle_, stream.get()));
}

}  // namespace cohort::gpu
