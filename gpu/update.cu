// The optimizer update kernels of gpu/ops.h, one thread per parameter, in the CPU's operation order
// (core/optimizer.cc), so the two differ only where nvcc contracts a multiply and an add into one
// rounding.
#include <algorithm>
#include <string>

#include "cohort/gpu/error.h"
#include "cohort/gpu/launch.cuh"
#include "cohort/gpu/ops.h"

namespace cohort::gpu {
namespace {

using detail::blocks_for;
using detail::kBlock;

__global__ void sgd_kernel(std::size_t n, float step, const float* g, float* out,
                           bool accumulate) {
  COHORT_GRID_STRIDE(i, n) out[i] = accumulate ? out[i] + step * g[i] : step * g[i];
}

__global__ void momentum_kernel(std::size_t n, float rate, float momentum, bool nesterov,
                                float scale, const float* g, float* accum, float* out,
                                bool accumulate) {
  COHORT_GRID_STRIDE(i, n) {
    const float gi = g[i] * scale;
    const float a = momentum * accum[i] + gi;
    accum[i] = a;
    const float d = -rate * (nesterov ? gi + momentum * a : a);
    out[i] = accumulate ? out[i] + d : d;
  }
}

__global__ void adam_kernel(std::size_t n, float lr_t, float b1, float b2, float eps, float scale,
                            const float* g, float* m, float* v, float* out, bool accumulate) {
  COHORT_GRID_STRIDE(i, n) {
    const float gi = g[i] * scale;
    const float mi = b1 * m[i] + (1.0f - b1) * gi;
    const float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const float d = -lr_t * mi / (sqrtf(vi) + eps);
    out[i] = accumulate ? out[i] + d : d;
  }
}

}  // namespace

void sgd_update(std::size_t n, float lr, float grad_scale, const float* g, float* out,
                bool accumulate, const Stream& stream) {
  if (n == 0) return;
  require_device_pointer(g, "sgd_update", "g");
  require_device_pointer(out, "sgd_update", "out");
  sgd_kernel<<<blocks_for(n), kBlock, 0, stream.get()>>>(n, -lr * grad_scale, g, out, accumulate);
  COHORT_CUDA_CHECK_LAUNCH();
}

void momentum_update(std::size_t n, float lr, float momentum, bool nesterov, float grad_scale,
                     const float* g, float* accum, float* out, bool accumulate,
                     const Stream& stream) {
  if (n == 0) return;
  require_device_pointer(g, "momentum_update", "g");
  require_device_pointer(accum, "momentum_update", "accum");
  require_device_pointer(out, "momentum_update", "out");
  momentum_kernel<<<blocks_for(n), kBlock, 0, stream.get()>>>(n, lr, momentum, nesterov,
                                                              grad_scale, g, accum, out,
                                                              accumulate);
  COHORT_CUDA_CHECK_LAUNCH();
}

void adam_update(std::size_t n, float lr_t, float beta1, float beta2, float epsilon,
                 float grad_scale, const float* g, float* m, float* v, float* out,
                 bool accumulate, const Stream& stream) {
  if (n == 0) return;
  require_device_pointer(g, "adam_update", "g");
  require_device_pointer(m, "adam_update", "m");
  require_device_pointer(v, "adam_update", "v");
  require_device_pointer(out, "adam_update", "out");
  adam_kernel<<<blocks_for(n), kBlock, 0, stream.get()>>>(n, lr_t, beta1, beta2, epsilon,
                                                          grad_scale, g, m, v, out, accumulate);
  COHORT_CUDA_CHECK_LAUNCH();
}

}  // namespace cohort::gpu
