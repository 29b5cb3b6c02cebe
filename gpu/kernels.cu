#include "cohort/gpu/kernels.h"

#include <algorithm>
#include <string>

#include "cohort/gpu/error.h"
#include "cohort/gpu/launch.cuh"

namespace cohort::gpu {
namespace {

using detail::blocks_for;
using detail::kBlock;

void require(const void* pointer, const char* what, std::size_t n) {
  if (pointer == nullptr)
    throw InvalidArgument(std::string(what) + ": null device pointer for " + std::to_string(n) +
                          " elements");
}

__global__ void fill_kernel(std::size_t n, float value, float* x) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    x[i] = value;
}

__global__ void axpy_kernel(std::size_t n, float a, const float* x, float* y) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    y[i] = fmaf(a, x[i], y[i]);
}

__global__ void scale_kernel(std::size_t n, float a, float* x) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    x[i] *= a;
}

}  // namespace

void fill(std::size_t n, float value, float* x, const Stream& stream) {
  if (n == 0) return;
  require(x, "fill", n);
  fill_kernel<<<blocks_for(n), kBlock, 0, stream.get()>>>(n, value, x);
  COHORT_CUDA_CHECK_LAUNCH();
}

void axpy(std::size_t n, float a, const float* x, float* y, const Stream& stream) {
  if (n == 0) return;
  require(x, "axpy", n);
  require(y, "axpy", n);
  axpy_kernel<<<blocks_for(n), kBlock, 0, stream.get()>>>(n, a, x, y);
  COHORT_CUDA_CHECK_LAUNCH();
}

void scale(std::size_t n, float a, float* x, const Stream& stream) {
  if (n == 0) return;
  require(x, "scale", n);
  scale_kernel<<<blocks_for(n), kBlock, 0, stream.get()>>>(n, a, x);
  COHORT_CUDA_CHECK_LAUNCH();
}

}  // namespace cohort::gpu
