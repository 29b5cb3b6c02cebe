#pragma once
// Winograd's minimal filtering F(m x m, r x r) for stride-1 convolutions (Lavin & Gray, "Fast
// Algorithms for Convolutional Neural Networks", 2016): each m x m output tile is
// A^T [(G g G^T) . (B^T d B)] A for its (m + r - 1)^2 input tile d, so the products over the
// channels become (m + r - 1)^2 matrix products of [tiles, in] x [in, filters] per batch, with
// m^2 r^2 / (m + r - 1)^2 times fewer multiplications than direct convolution (2.8x for 5x5
// filters and m = 2, 4x for 3x3 filters and m = 4). The transforms are elementwise work vectorised
// over channels; the matrix products are OpenBLAS's (gemm.h). Forward, input gradient and filter gradient all take this form.
//
// Internal to Conv2D. Not thread-safe: one object per layer (per tower).

#include <array>
#include <cstdint>
#include <utility>

#include "cohort/core/nn/ops/im2col.h"
#include "cohort/core/nn/tensor.h"

namespace cohort::winograd {

/// The transform matrices of F(M, R) (row-major), from the Toom-Cook construction with the
/// interpolation points 0, 1, -1, 2, -2, ... and infinity. Built at compile time, so that the
/// transforms' zero coefficients vanish and their unit ones become plain adds.
template <int M, int R>
struct Transform {
  static constexpr int kAlpha = M + R - 1;
  std::array<float, M * kAlpha> at{};        // A^T, M x alpha
  std::array<float, kAlpha * R> g{};         // G, alpha x R
  std::array<float, kAlpha * kAlpha> bt{};   // B^T, alpha x alpha
};

template <int M, int R>
constexpr Transform<M, R> make_transform();

/// Runs one Conv2D layer's convolutions by F(m x m, r x r): F(4 x 4, 3 x 3) or F(2 x 2, 3 x 3)
/// for 3x3 filters, F(2 x 2, 5 x 5) for 5x5.
class Convolution {
 public:
  /// Whether the layer is one this path serves, and serves faster than im2col: stride 1, a
  /// square 3x3 or 5x5 filter, and enough channels in and out that the per-position products
  /// are not all overhead.
  static bool suitable(const im2col::Geometry& geometry, std::int64_t filters);

  Convolution(const im2col::Geometry& geometry, std::int64_t filters);

  /// output [n, out_h, out_w, filters] = activation(conv(images) + bias); kernel is HWIO.
  void forward(const float* images, std::int64_t n, const float* kernel, const float* bias,
               bool relu, float* output, int threads);

  /// Overwrites grad_kernel (HWIO) and grad_bias, and grad_images unless it is null, for the
  /// output gradient of the last forward with these images and output.
  void backward(const float* images, std::int64_t n, const float* kernel, const float* output,
                const float* grad_output, bool relu, float* grad_images, float* grad_kernel,
                float* grad_bias, int threads);

 private:
  struct Plan {
    std::int64_t chunk = 1, chunks = 1;
    int threads = 1;
  };
  Plan plan(std::int64_t n, int threads) const;
  std::int64_t tiles_per_image() const { return tiles_h_ * tiles_w_; }
  template <typename F>
  void dispatch(F&& f) const;
  template <int M, int R>
  void transform_filter(const float* kernel);
  template <int M, int R>
  void filter_grad(const float* du, float* grad_kernel) const;
  // The per-tile transforms of F(M x M, R x R).
  template <int M, int R>
  void transform_input(const float* images, std::int64_t count, float* v) const;
  template <int M, int R>
  void transform_output(const float* m, std::int64_t count, const float* bias, bool relu,
                        float* output) const;
  template <int M, int R>
  void transform_output_grad(const float* grad, std::int64_t count, float* dm) const;
  template <int M, int R>
  void add_input_grad(const float* dv, std::int64_t count, float* grad_images) const;

  im2col::Geometry g_;
  std::int64_t filters_;
  int r_;      // the filter's side
  int tile_;   // the output tile's side, m
  int alpha_;  // the input tile's side, m + r - 1
  std::int64_t tiles_h_ = 0, tiles_w_ = 0;
  Tensor u_;         // transformed filter, [alpha^2][in][filters]
  Tensor v_;         // per thread: transformed input tiles of a chunk, [alpha^2][tiles][in]
  Tensor m_;         // per thread: products of a chunk, [alpha^2][tiles][filters]
  Tensor grad_pre_;  // per thread: dLoss/d(pre-activation) of a chunk, NHWC
  Tensor du_;        // per thread: transformed filter gradient, [alpha^2][in][filters]
};

// ---- Implementation of make_transform.

namespace detail {

constexpr double abs(double x) { return x < 0 ? -x : x; }

// The inverse of the n x n row-major matrix m (invertible), by Gauss-Jordan elimination with
// partial pivoting.
template <int N>
constexpr std::array<double, N * N> inverse(std::array<double, N * N> m) {
  std::array<double, N * N> inv{};
  for (int i = 0; i < N; ++i) inv[i * N + i] = 1.0;
  for (int col = 0; col < N; ++col) {
    int pivot = col;
    for (int r = col + 1; r < N; ++r)
      if (abs(m[r * N + col]) > abs(m[pivot * N + col])) pivot = r;
    for (int k = 0; k < N; ++k) {
      std::swap(m[col * N + k], m[pivot * N + k]);
      std::swap(inv[col * N + k], inv[pivot * N + k]);
    }
    const double p = m[col * N + col];
    for (int k = 0; k < N; ++k) {
      m[col * N + k] /= p;
      inv[col * N + k] /= p;
    }
    for (int r = 0; r < N; ++r) {
      if (r == col) continue;
      const double factor = m[r * N + col];
      for (int k = 0; k < N; ++k) {
        m[r * N + k] -= factor * m[col * N + k];
        inv[r * N + k] -= factor * inv[col * N + k];
      }
    }
  }
  return inv;
}

// Evaluation at the points (and the leading coefficient, "infinity") of a polynomial with
// Cols coefficients: Alpha x Cols, row-major.
template <int Alpha, int Cols>
constexpr std::array<double, Alpha * Cols> vandermonde() {
  std::array<double, Alpha - 1> points{};
  for (int n = 1, i = 1; n < Alpha - 1; ++i) {
    points[n++] = i;
    if (n < Alpha - 1) points[n++] = -i;
  }
  std::array<double, Alpha * Cols> v{};
  for (int j = 0; j < Alpha - 1; ++j) {
    double power = 1.0;
    for (int k = 0; k < Cols; ++k, power *= points[j]) v[j * Cols + k] = power;
  }
  v[(Alpha - 1) * Cols + Cols - 1] = 1.0;
  return v;
}

// Rounding leaves exact zeros of the construction a few ulps off; they must be zeros.
constexpr float snap(double x) { return abs(x) < 1e-9 ? 0.0f : static_cast<float>(x); }

}  // namespace detail

// The correlation y = g * d is y = V_m^T [(V_r g) . (V_a^-T d)]: A^T = V_m^T, G = V_r,
// B^T = V_a^-T.
template <int M, int R>
constexpr Transform<M, R> make_transform() {
  constexpr int a = M + R - 1;
  Transform<M, R> t;
  const auto vm = detail::vandermonde<a, M>();
  const auto vr = detail::vandermonde<a, R>();
  const auto va_inv = detail::inverse<a>(detail::vandermonde<a, a>());
  for (int x = 0; x < M; ++x)
    for (int j = 0; j < a; ++j) t.at[x * a + j] = detail::snap(vm[j * M + x]);
  for (int j = 0; j < a * R; ++j) t.g[j] = detail::snap(vr[j]);
  // Row i of B^T and row i of G may trade a factor s (B^T_i s, G_i / s): the product is the
  // same. The filter transform runs once a step, the input transform on every tile, so each row
  // of B^T takes the s that makes the most of its coefficients +-1 (for 3x3 filters, all of them).
  for (int i = 0; i < a; ++i) {
    double best_scale = 1.0;
    int best_units = -1;
    for (int j = 0; j < a; ++j) {
      const double c = va_inv[j * a + i];
      if (detail::abs(c) < 1e-9) continue;
      int units = 0;
      for (int k = 0; k < a; ++k) units += detail::abs(detail::abs(va_inv[k * a + i] / c) - 1.0) < 1e-9;
      if (units > best_units) {
        best_units = units;
        best_scale = 1.0 / detail::abs(c);
      }
    }
    for (int k = 0; k < a; ++k) t.bt[i * a + k] = detail::snap(va_inv[k * a + i] * best_scale);
    for (int k = 0; k < R; ++k) t.g[i * R + k] = detail::snap(vr[i * R + k] / best_scale);
  }
  return t;
}

}  // namespace cohort::winograd
