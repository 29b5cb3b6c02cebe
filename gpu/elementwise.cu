// The element-wise ops, bias, dropout, loss and accuracy kernels of gpu/ops.h, and the layout
// kernels (filter transpose, NHWC pad and crop) the cuDNN wrappers use.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "cohort/gpu/error.h"
#include "cohort/gpu/launch.cuh"
#include "cohort/gpu/ops.h"

namespace cohort::gpu {
namespace {

using detail::blocks_for;
using detail::kBlock;

__global__ void relu_forward_kernel(std::size_t n, const float* x, float* y) {
  COHORT_GRID_STRIDE(i, n) y[i] = fmaxf(x[i], 0.0f);
}

__global__ void relu_backward_kernel(std::size_t n, const float* y, const float* dy, float* dx) {
  COHORT_GRID_STRIDE(i, n) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

__global__ void bias_add_kernel(std::size_t rows, std::size_t cols, const float* bias, float* y) {
  COHORT_GRID_STRIDE(i, rows * cols) y[i] += bias[i % cols];
}

// Block (32 columns) x (32 row lanes): lane ty sums rows ty, ty + 32, ... of its column, then the
// 32 partial sums are added in a fixed order, so the result does not depend on scheduling (no
// atomics). Adjacent threads read adjacent columns: coalesced.
constexpr unsigned kBiasCols = 32, kBiasLanes = 32;
__global__ void bias_grad_kernel(std::size_t rows, std::size_t cols, const float* dy, float* db) {
  __shared__ float partial[kBiasLanes][kBiasCols + 1];
  const std::size_t c = static_cast<std::size_t>(blockIdx.x) * kBiasCols + threadIdx.x;
  float sum = 0.0f;
  if (c < cols)
    for (std::size_t r = threadIdx.y; r < rows; r += kBiasLanes) sum += dy[r * cols + c];
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float total = 0.0f;
    for (unsigned lane = 0; lane < kBiasLanes; ++lane) total += partial[lane][threadIdx.x];
    db[c] = total;
  }
}

// SplitMix64's finaliser, as core/ops/dropout.cc.
__device__ inline std::uint64_t mix(std::uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

__global__ void dropout_forward_kernel(std::size_t n, std::uint64_t key, std::uint64_t threshold,
                                       float scale, const float* x, float* y, float* mask) {
  COHORT_GRID_STRIDE(i, n) {
    const std::uint64_t draw =
        mix(key + static_cast<std::uint64_t>(i) * 0x9e3779b97f4a7c15ull) >> 40;
    const float m = draw >= threshold ? scale : 0.0f;
    mask[i] = m;
    y[i] = x[i] * m;
  }
}

__global__ void multiply_kernel(std::size_t n, const float* a, const float* b, float* out) {
  COHORT_GRID_STRIDE(i, n) out[i] = a[i] * b[i];
}

// One block; warp w handles rows w, w + warps, ...: losses and per-row work are small next to the
// layers, and one block makes the final sum a fixed-order (deterministic) reduction.
constexpr unsigned kLossThreads = 1024, kWarps = kLossThreads / 32;

__device__ inline float warp_max(float v) {
  for (int offset = 16; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}
__device__ inline float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__global__ void softmax_cross_entropy_kernel(std::size_t n, std::size_t classes,
                                             const float* logits, const std::int32_t* labels,
                                             float* loss, float* grad) {
  __shared__ double warp_loss[kWarps];
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  double total = 0.0;
  const float inv_n = 1.0f / static_cast<float>(n);
  for (std::size_t row = warp; row < n; row += kWarps) {
    const float* x = logits + row * classes;
    float max = -INFINITY;
    for (std::size_t k = lane; k < classes; k += 32) max = fmaxf(max, x[k]);
    max = warp_max(max);
    float sum = 0.0f;
    for (std::size_t k = lane; k < classes; k += 32) sum += expf(x[k] - max);
    sum = warp_sum(sum);
    const std::int32_t label = labels[row];
    const bool valid = label >= 0 && static_cast<std::size_t>(label) < classes;
    if (lane == 0)
      total += valid ? -(static_cast<double>(x[label] - max) - log(static_cast<double>(sum)))
                     : static_cast<double>(NAN);
    if (grad != nullptr) {
      float* g = grad + row * classes;
      for (std::size_t k = lane; k < classes; k += 32) {
        const float p = expf(x[k] - max) / sum;
        g[k] = p * inv_n - (static_cast<std::int64_t>(k) == label ? inv_n : 0.0f);
      }
    }
  }
  if (lane == 0) warp_loss[warp] = total;
  __syncthreads();
  if (threadIdx.x == 0) {
    double all = 0.0;
    for (unsigned w = 0; w < kWarps; ++w) all += warp_loss[w];
    loss[0] = static_cast<float>(all / static_cast<double>(n));
  }
}

__global__ void accuracy_kernel(std::size_t n, std::size_t classes, const float* logits,
                                const std::int32_t* labels, std::int32_t* count) {
  __shared__ std::int32_t warp_count[kWarps];
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  std::int32_t correct = 0;
  for (std::size_t row = warp; row < n; row += kWarps) {
    const float* x = logits + row * classes;
    // Each lane's first maximum, then the lowest index among the lanes' equal maxima.
    float best = -INFINITY;
    std::int64_t at = -1;
    bool finite = true;  // a row with a logit that is not finite predicts no class (as on the host)
    for (std::size_t k = lane; k < classes; k += 32) {
      finite = finite && isfinite(x[k]);
      if (at < 0 || x[k] > best) best = x[k], at = static_cast<std::int64_t>(k);
    }
    finite = __all_sync(0xffffffffu, finite);
    for (int offset = 16; offset > 0; offset /= 2) {
      const float other = __shfl_xor_sync(0xffffffffu, best, offset);
      const std::int64_t other_at = __shfl_xor_sync(0xffffffffu, at, offset);
      if (other_at >= 0 && (at < 0 || other > best || (other == best && other_at < at)))
        best = other, at = other_at;
    }
    if (lane == 0 && finite && at == labels[row]) ++correct;
  }
  if (lane == 0) warp_count[warp] = correct;
  __syncthreads();
  if (threadIdx.x == 0) {
    std::int32_t all = 0;
    for (unsigned w = 0; w < kWarps; ++w) all += warp_count[w];
    count[0] = all;
  }
}

__global__ void transpose_filter_kernel(bool to_ohwi, int h, int w, int i, int o,
                                        const float* from, float* to) {
  const std::size_t total = static_cast<std::size_t>(h) * w * i * o;
  COHORT_GRID_STRIDE(index, total) {
    // index walks HWIO: ((y * w + x) * i + ci) * o + co.
    const int co = static_cast<int>(index % o);
    const std::size_t hwi = index / o;  // (y * w + x) * i + ci
    const std::size_t ohwi = static_cast<std::size_t>(co) * h * w * i + hwi;
    if (to_ohwi)
      to[ohwi] = from[index];
    else
      to[index] = from[ohwi];
  }
}

__global__ void pad_kernel(int n, int h, int w, int c, int top, int left, int ph, int pw,
                           float value, const float* x, float* to) {
  const std::size_t total = static_cast<std::size_t>(n) * ph * pw * c;
  COHORT_GRID_STRIDE(index, total) {
    const int ch = static_cast<int>(index % c);
    std::size_t rest = index / c;
    const int px = static_cast<int>(rest % pw);
    rest /= pw;
    const int py = static_cast<int>(rest % ph);
    const std::size_t b = rest / ph;
    const int y = py - top, xx = px - left;
    to[index] = y >= 0 && y < h && xx >= 0 && xx < w
                    ? x[((b * h + y) * w + xx) * c + ch]
                    : value;
  }
}

__global__ void crop_kernel(int n, int h, int w, int c, int top, int left, int ph, int pw,
                            const float* from, float* x) {
  const std::size_t total = static_cast<std::size_t>(n) * h * w * c;
  COHORT_GRID_STRIDE(index, total) {
    const int ch = static_cast<int>(index % c);
    std::size_t rest = index / c;
    const int xx = static_cast<int>(rest % w);
    rest /= w;
    const int y = static_cast<int>(rest % h);
    const std::size_t b = rest / h;
    x[index] = from[((b * ph + y + top) * pw + xx + left) * c + ch];
  }
}

}  // namespace

void relu_forward(std::size_t n, const float* x, float* y, const Stream& stream) {
  if (n == 0) return;
  require_device_pointer(x, "relu_forward", "x");
  require_device_pointer(y, "relu_forward", "y");
  relu_forward_kernel<<<blocks_for(n), kBlock, 0, stream.get()>>>(n, x, y);
  COHORT_CUDA_CHECK_LAUNCH();
}

void relu_backward(std::size_t n, const float* y, const float* dy, float* dx,
                   const Stream& stream) {
  if (n == 0) return;
  require_device_pointer(y, "relu_backward", "y");
  require_device_pointer(dy, "relu_backward", "dy");
  require_device_pointer(dx, "relu_backward", "dx");
  relu_backward_kernel<<<blocks_for(n), kBlock, 0, stream.get()>>>(n, y, dy, dx);
  COHORT_CUDA_CHECK_LAUNCH();
}

void bias_add(std::size_t rows, std::size_t cols, const float* bias, float* y,
              const Stream& stream) {
  detail::bias_add(stream.get(), rows, cols, bias, y);
}

void bias_grad(std::size_t rows, std::size_t cols, const float* dy, float* db,
               const Stream& stream) {
  detail::bias_grad(stream.get(), rows, cols, dy, db);
}

void dropout_forward(std::size_t n, float rate, std::uint64_t key, const float* x, float* y,
                     float* mask, const Stream& stream) {
  if (!(rate >= 0.0f && rate < 1.0f))
    throw InvalidArgument("dropout_forward: rate = " + std::to_string(rate) +
                          ", must be in [0, 1)");
  if (n == 0) return;
  require_device_pointer(x, "dropout_forward", "x");
  require_device_pointer(y, "dropout_forward", "y");
  require_device_pointer(mask, "dropout_forward", "mask");
  // The same host-side arithmetic as the CPU path, so the kernel sees identical constants.
  const auto threshold = static_cast<std::uint64_t>(static_cast<double>(rate) * (1 << 24));
  const float scale = 1.0f / (1.0f - rate);
  dropout_forward_kernel<<<blocks_for(n), kBlock, 0, stream.get()>>>(n, key, threshold, scale, x,
                                                                     y, mask);
  COHORT_CUDA_CHECK_LAUNCH();
}

void dropout_backward(std::size_t n, const float* mask, const float* dy, float* dx,
                      const Stream& stream) {
  if (n == 0) return;
  require_device_pointer(mask, "dropout_backward", "mask");
  require_device_pointer(dy, "dropout_backward", "dy");
  require_device_pointer(dx, "dropout_backward", "dx");
  multiply_kernel<<<blocks_for(n), kBlock, 0, stream.get()>>>(n, dy, mask, dx);
  COHORT_CUDA_CHECK_LAUNCH();
}

void softmax_cross_entropy(std::size_t n, std::size_t classes, const float* logits,
                           const std::int32_t* labels, float* loss, float* grad,
                           const Stream& stream) {
  if (n == 0 || classes == 0)
    throw InvalidArgument("softmax_cross_entropy: " + std::to_string(n) + " rows of " +
                          std::to_string(classes) + " classes, both must be >= 1");
  require_device_pointer(logits, "softmax_cross_entropy", "logits");
  require_device_pointer(labels, "softmax_cross_entropy", "labels");
  require_device_pointer(loss, "softmax_cross_entropy", "loss");
  softmax_cross_entropy_kernel<<<1, kLossThreads, 0, stream.get()>>>(n, classes, logits, labels,
                                                                     loss, grad);
  COHORT_CUDA_CHECK_LAUNCH();
}

void accuracy_count(std::size_t n, std::size_t classes, const float* logits,
                    const std::int32_t* labels, std::int32_t* count, const Stream& stream) {
  if (classes == 0)
    throw InvalidArgument("accuracy_count: classes = 0, must be >= 1");
  require_device_pointer(count, "accuracy_count", "count");
  if (n > 0) {
    require_device_pointer(logits, "accuracy_count", "logits");
    require_device_pointer(labels, "accuracy_count", "labels");
  }
  accuracy_kernel<<<1, kLossThreads, 0, stream.get()>>>(n, classes, logits, labels, count);
  COHORT_CUDA_CHECK_LAUNCH();
}

void hwio_to_ohwi(int h, int w, int i, int o, const float* from, float* to, const Stream& stream) {
  detail::transpose_filter(stream.get(), true, h, w, i, o, from, to);
}

void ohwi_to_hwio(int h, int w, int i, int o, const float* from, float* to, const Stream& stream) {
  detail::transpose_filter(stream.get(), false, h, w, i, o, from, to);
}

namespace detail {

void bias_add(cudaStream_t stream, std::size_t rows, std::size_t cols, const float* bias,
              float* y) {
  if (rows == 0 || cols == 0) return;
  require_device_pointer(bias, "bias_add", "bias");
  require_device_pointer(y, "bias_add", "y");
  bias_add_kernel<<<blocks_for(rows * cols), kBlock, 0, stream>>>(rows, cols, bias, y);
  COHORT_CUDA_CHECK_LAUNCH();
}

void bias_grad(cudaStream_t stream, std::size_t rows, std::size_t cols, const float* dy,
               float* db) {
  if (cols == 0) return;
  require_device_pointer(db, "bias_grad", "db");
  if (rows > 0) require_device_pointer(dy, "bias_grad", "dy");
  const auto blocks = static_cast<unsigned>((cols + kBiasCols - 1) / kBiasCols);
  bias_grad_kernel<<<blocks, dim3(kBiasCols, kBiasLanes), 0, stream>>>(rows, cols, dy, db);
  COHORT_CUDA_CHECK_LAUNCH();
}

void transpose_filter(cudaStream_t stream, bool to_ohwi, int h, int w, int i, int o,
                      const float* from, float* to) {
  if (h < 1 || w < 1 || i < 1 || o < 1)
    throw InvalidArgument("transpose_filter: filter " + std::to_string(h) + "x" +
                          std::to_string(w) + "x" + std::to_string(i) + "x" +
                          std::to_string(o) + " has a size < 1");
  require_device_pointer(from, "transpose_filter", "from");
  require_device_pointer(to, "transpose_filter", "to");
  const std::size_t total = static_cast<std::size_t>(h) * w * i * o;
  transpose_filter_kernel<<<blocks_for(total), kBlock, 0, stream>>>(to_ohwi, h, w, i, o, from,
                                                                    to);
  COHORT_CUDA_CHECK_LAUNCH();
}

void pad_nhwc(cudaStream_t stream, int n, int h, int w, int c, int top, int bottom, int left,
              int right, float value, const float* x, float* to) {
  const int ph = h + top + bottom, pw = w + left + right;
  const std::size_t total = static_cast<std::size_t>(n) * ph * pw * c;
  if (total == 0) return;
  require_device_pointer(x, "pad_nhwc", "x");
  require_device_pointer(to, "pad_nhwc", "to");
  pad_kernel<<<blocks_for(total), kBlock, 0, stream>>>(n, h, w, c, top, left, ph, pw, value, x,
                                                       to);
  COHORT_CUDA_CHECK_LAUNCH();
}

void crop_nhwc(cudaStream_t stream, int n, int h, int w, int c, int top, int bottom, int left,
               int right, const float* from, float* x) {
  const int ph = h + top + bottom, pw = w + left + right;
  const std::size_t total = static_cast<std::size_t>(n) * h * w * c;
  if (total == 0) return;
  require_device_pointer(from, "crop_nhwc", "from");
  require_device_pointer(x, "crop_nhwc", "x");
  crop_kernel<<<blocks_for(total), kBlock, 0, stream>>>(n, h, w, c, top, left, ph, pw, from, x);
  COHORT_CUDA_CHECK_LAUNCH();
}

}  // namespace detail
}  // namespace cohort::gpu
