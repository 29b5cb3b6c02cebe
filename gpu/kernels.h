#pragma once
// Element-wise float kernels on device arrays (BLAS-1 style), for optimizer updates and tests.
//
// Every function is non-blocking: it queues one kernel on `stream` and returns. Pointers are
// device addresses (e.g. DeviceBuffer<float>::data()) of at least `n` elements on the current
// device. n == 0 queues nothing. Throws InvalidArgument for a null pointer with n > 0 and
// CudaError for a failed launch (see COHORT_CUDA_CHECK_LAUNCH for faults inside the kernel).
// Thread-safe in the sense of CUDA launches: different threads may queue on different streams.

#include <cstddef>

#include "cohort/gpu/stream.h"

namespace cohort::gpu {

/// x[i] = value.
void fill(std::size_t n, float value, float* x, const Stream& stream);

/// y[i] += a * x[i], as one fused multiply-add (fmaf), so a CPU oracle using std::fma agrees
/// bit for bit. x and y may be the same array.
void axpy(std::size_t n, float a, const float* x, float* y, const Stream& stream);

/// x[i] *= a.
void scale(std::size_t n, float a, float* x, const Stream& stream);

}  // namespace cohort::gpu
