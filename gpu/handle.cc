#include "cohort/gpu/handle.h"

namespace cohort::gpu {

void destroy(cudaStream_t stream) noexcept { cudaStreamDestroy(stream); }
void destroy(cudaEvent_t event) noexcept { cudaEventDestroy(event); }
void destroy(cublasHandle_t handle) noexcept { cublasDestroy(handle); }
void destroy(cudnnHandle_t handle) noexcept { cudnnDestroy(handle); }
void destroy(cudnnTensorDescriptor_t descriptor) noexcept {
  cudnnDestroyTensorDescriptor(descriptor);
}
void destroy(cudnnFilterDescriptor_t descriptor) noexcept {
  cudnnDestroyFilterDescriptor(descriptor);
}
void destroy(cudnnConvolutionDescriptor_t descriptor) noexcept {
  cudnnDestroyConvolutionDescriptor(descriptor);
}
void destroy(cudnnPoolingDescriptor_t descriptor) noexcept {
  cudnnDestroyPoolingDescriptor(descriptor);
}

}  // namespace cohort::gpu
