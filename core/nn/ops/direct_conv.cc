#include "cohort/core/nn/ops/direct_conv.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "cohort/core/nn/ops/simd.h"

namespace cohort::direct_conv {
namespace {

using simd::Floats;
constexpr int kLanes = simd::kLanes;
// Larger patches have a long enough inner dimension for im2col's matrix product.
constexpr std::int64_t kMaxPatch = 32;
// The blocking below keeps up to 12 sums and 4 more vectors in registers: AVX's 16 registers
// hold them, one vector each. Without AVX a vector takes two SSE registers, the sums spilled, and
// small_cnn ran at 0.57x its im2col speed (x86-64-v2 kernels); there, and on other processors,
// im2col keeps these layers.
#if defined(__AVX__)
constexpr bool kVectorsInRegisters = true;
#else
constexpr bool kVectorsInRegisters = false;
#endif

// The padded image: rows and columns, every tap of every output inside.
struct Padded {
  std::int64_t h, w;
};
Padded padded(const im2col::Geometry& g) {
  return {(g.out_h - 1) * g.stride_h + (g.kernel_h - 1) * g.dilation_h + 1,
          (g.out_w - 1) * g.stride_w + (g.kernel_w - 1) * g.dilation_w + 1};
}

// Copies `image` into `pad` with pixel (ih, iw) at (ih + pad_top, iw + pad_left) and zeros
// around; input rows and columns that no output reaches (VALID's remainder) are left out.
void pad_image(const im2col::Geometry& g, Padded p, const float* image, float* pad) {
  const std::int64_t c = g.in_c;
  std::fill_n(pad, p.h * p.w * c, 0.0f);
  const std::int64_t rows = std::min(g.in_h, p.h - g.pad_top);
  const std::int64_t cols = std::min(g.in_w, p.w - g.pad_left);
  for (std::int64_t ih = 0; ih < rows; ++ih)
    std::memcpy(pad + ((ih + g.pad_top) * p.w + g.pad_left) * c, image + ih * g.in_w * c,
                static_cast<std::size_t>(cols * c) * sizeof(float));
}

// Where each tap of one kernel row reads, from the tap at (kh, 0, 0): kernel_w * in_c of them,
// fewer than 16 (suitable()); contiguous unless the filter is dilated.
struct RowTaps {
  std::int64_t count;
  std::int64_t offset[16];
};
RowTaps row_taps(const im2col::Geometry& g) {
  RowTaps taps{g.kernel_w * g.in_c, {}};
  for (std::int64_t j = 0; j < taps.count; ++j)
    taps.offset[j] = j / g.in_c * g.dilation_w * g.in_c + j % g.in_c;
  return taps;
}

// Output pixels [ow0, ow0 + P) of row oh, filters [f0, f0 + V * kLanes): P * V sums in registers,
// each tap's V filter vectors loaded once for the P pixels. `out` is the row's first pixel.
template <int V, int P>
inline void forward_pixels(const im2col::Geometry& g, Padded p, const RowTaps& taps,
                           std::int64_t f, const float* pad, std::int64_t oh, std::int64_t ow0,
                           std::int64_t f0, const float* kernel, const float* bias, bool relu,
                           float* out) {
  const std::int64_t c = g.in_c, step = g.stride_w * c;
  Floats acc[P][V];
  for (int v = 0; v < V; ++v) {
    const Floats b = simd::at(bias + f0 + v * kLanes);
    for (int i = 0; i < P; ++i) acc[i][v] = b;
  }
  for (std::int64_t kh = 0; kh < g.kernel_h; ++kh) {
    const float* row = pad + ((oh * g.stride_h + kh * g.dilation_h) * p.w + ow0 * g.stride_w) * c;
    const float* k = kernel + kh * taps.count * f + f0;
    for (std::int64_t j = 0; j < taps.count; ++j, k += f) {
      const float* x = row + taps.offset[j];
      Floats kv[V];
      for (int v = 0; v < V; ++v) kv[v] = simd::at(k + v * kLanes);
      for (int i = 0; i < P; ++i) {
        const float xi = x[i * step];
        for (int v = 0; v < V; ++v) acc[i][v] += xi * kv[v];
      }
    }
  }
  for (int i = 0; i < P; ++i)
    for (int v = 0; v < V; ++v) {
      Floats y = acc[i][v];
      if (relu) y = y > 0.0f ? y : Floats{};
      simd::at(out + (ow0 + i) * f + f0 + v * kLanes) = y;
    }
}

// A whole output row for filters [f0, f0 + V * kLanes), P pixels at a time, then one by one.
template <int V, int P>
void forward_row(const im2col::Geometry& g, Padded p, const RowTaps& taps, std::int64_t f,
                 const float* pad, std::int64_t oh, std::int64_t f0, const float* kernel,
                 const float* bias, bool relu, float* out) {
  std::int64_t ow = 0;
  for (; ow + P <= g.out_w; ow += P)
    forward_pixels<V, P>(g, p, taps, f, pad, oh, ow, f0, kernel, bias, relu, out);
  for (; ow < g.out_w; ++ow)
    forward_pixels<V, 1>(g, p, taps, f, pad, oh, ow, f0, kernel, bias, relu, out);
}

// Taps [t0, t0 + T) and filters [f0, f0 + V * kLanes) of the filter gradient, summed over every
// output pixel of `count` padded images: T * V sums in registers, each pixel's V gradient vectors
// loaded once for the T taps.
template <int V, int T>
void kernel_grad_taps(const im2col::Geometry& g, Padded p, std::int64_t f, const float* pads,
                      std::int64_t count, const float* dz, std::int64_t t0, std::int64_t f0,
                      float* grad_kernel) {
  const std::int64_t c = g.in_c, image = p.h * p.w * c;
  std::int64_t offset[T];  // of each tap's input from the receptive field's corner
  for (int t = 0; t < T; ++t) {
    const std::int64_t tap = t0 + t, kh = tap / (g.kernel_w * c), kw = tap / c % g.kernel_w;
    offset[t] = (kh * g.dilation_h * p.w + kw * g.dilation_w) * c + tap % c;
  }
  Floats acc[T][V] = {};
  for (std::int64_t b = 0; b < count; ++b) {
    const float* pad = pads + b * image;
    const float* d = dz + b * g.out_h * g.out_w * f + f0;
    for (std::int64_t oh = 0; oh < g.out_h; ++oh) {
      for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
        const float* x = pad + (oh * g.stride_h * p.w + ow * g.stride_w) * c;
        const float* dy = d + (oh * g.out_w + ow) * f;
        Floats dv[V];
        for (int v = 0; v < V; ++v) dv[v] = simd::at(dy + v * kLanes);
        for (int t = 0; t < T; ++t) {
          const float xt = x[offset[t]];
          for (int v = 0; v < V; ++v) acc[t][v] += xt * dv[v];
        }
      }
    }
  }
  for (int t = 0; t < T; ++t)
    for (int v = 0; v < V; ++v) simd::at(grad_kernel + (t0 + t) * f + f0 + v * kLanes) += acc[t][v];
}

// Calls f(std::integral_constant<int, N>()) for the N in [1, Max] equal to n.
template <int Max, typename F>
void with_count(std::int64_t n, F&& f) {
  [&]<int... I>(std::integer_sequence<int, I...>) {
    ((n == I + 1 ? f(std::integral_constant<int, I + 1>()) : void()), ...);
  }(std::make_integer_sequence<int, Max>());
}

// Every tap for filters [f0, f0 + V * kLanes), in as few passes over the pixels as groups of at
// most T taps allow, the groups as even as can be: a small group alone waits on the latency of
// its few sums (9 taps go 5 + 4, not 4 + 4 + 1).
template <int V, int T>
void kernel_grad_filters(const im2col::Geometry& g, Padded p, std::int64_t f, const float* pads,
                         std::int64_t count, const float* dz, std::int64_t f0, float* grad_kernel) {
  const std::int64_t patch = g.patch(), passes = (patch + T - 1) / T;
  const std::int64_t group = (patch + passes - 1) / passes;
  for (std::int64_t t0 = 0; t0 < patch; t0 += group) {
    with_count<T>(std::min(group, patch - t0), [&](auto taps) {
      kernel_grad_taps<V, taps>(g, p, f, pads, count, dz, t0, f0, grad_kernel);
    });
  }
}

// Calls f(f0, V, P) for each group of V filter vectors from filter f0: four vectors at a time,
// then the rest; P is the largest number of pixels (forward) or taps (filter gradient) to take at
// once, so that the P * V sums, the V vectors of filters or gradients and a broadcast value fit
// AVX2's 16 registers.
template <typename F>
void for_filter_groups(std::int64_t filters, F&& f) {
  using std::integral_constant;
  for (std::int64_t f0 = 0; f0 < filters;) {
    switch (std::min<std::int64_t>(4, (filters - f0) / kLanes)) {
      case 4: f(f0, integral_constant<int, 4>(), integral_constant<int, 2>()); f0 += 4 * kLanes; break;
      case 3: f(f0, integral_constant<int, 3>(), integral_constant<int, 3>()); f0 += 3 * kLanes; break;
      case 2: f(f0, integral_constant<int, 2>(), integral_constant<int, 6>()); f0 += 2 * kLanes; break;
      default: f(f0, integral_constant<int, 1>(), integral_constant<int, 12>()); f0 += kLanes; break;
    }
  }
}

}  // namespace

bool suitable(const im2col::Geometry& g, std::int64_t filters) {
  return kVectorsInRegisters && g.patch() <= kMaxPatch && g.kernel_w * g.in_c < 16 &&
         filters % kLanes == 0;
}

std::int64_t scratch_size(const im2col::Geometry& g) {
  const Padded p = padded(g);
  return p.h * p.w * g.in_c;
}

void forward(const im2col::Geometry& g, std::int64_t filters, const float* images,
             std::int64_t count, const float* kernel, const float* bias, bool relu, float* output,
             float* scratch) {
  const Padded p = padded(g);
  const RowTaps taps = row_taps(g);
  for (std::int64_t b = 0; b < count; ++b) {
    pad_image(g, p, images + b * g.image_size(), scratch);
    for (std::int64_t oh = 0; oh < g.out_h; ++oh) {
      float* out = output + (b * g.out_h + oh) * g.out_w * filters;
      for_filter_groups(filters, [&](std::int64_t f0, auto v, auto pixels) {
        forward_row<v, pixels>(g, p, taps, filters, scratch, oh, f0, kernel, bias, relu, out);
      });
    }
  }
}

void add_kernel_grad(const im2col::Geometry& g, std::int64_t filters, const float* images,
                     std::int64_t count, const float* dz, float* grad_kernel, float* scratch) {
  const Padded p = padded(g);
  const std::int64_t image = scratch_size(g);
  for (std::int64_t b = 0; b < count; ++b)
    pad_image(g, p, images + b * g.image_size(), scratch + b * image);
  for_filter_groups(filters, [&](std::int64_t f0, auto v, auto taps) {
    kernel_grad_filters<v, taps>(g, p, filters, scratch, count, dz, f0, grad_kernel);
  });
}

}  // namespace cohort::direct_conv
