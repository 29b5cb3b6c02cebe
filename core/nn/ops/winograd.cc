#include "cohort/core/nn/ops/winograd.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>

#include "cohort/core/nn/ops/bias_grad.h"
#include "cohort/core/nn/ops/gemm.h"
#include "cohort/core/nn/ops/simd.h"
#include "cohort/core/nn/threads.h"

namespace cohort::winograd {
namespace {

using ops_detail::gemm;

// The transformed input and products of one chunk of images should stay in L2 between the
// transforms and the matrix products (1 MB per core on the Zen 4 machines this was tuned on,
// 512 KB on Zen 2/3, 1-2 MB on recent Intel cores).
constexpr std::int64_t kChunkBytes = 768 * 1024;

// dst[0, n) += coef * src[0, n): the filter transforms, over whole [in, filters] slices.
inline void axpy(float* __restrict dst, float coef, const float* __restrict src, std::int64_t n) {
  for (std::int64_t c = 0; c < n; ++c) dst[c] += coef * src[c];
}
inline void zero(float* dst, std::int64_t n) {
  std::memset(dst, 0, static_cast<std::size_t>(n) * sizeof(float));
}

}  // namespace

bool Convolution::suitable(const im2col::Geometry& g, std::int64_t filters) {
  return g.stride_h == 1 && g.stride_w == 1 && g.kernel_h == g.kernel_w &&
         (g.kernel_h == 3 || g.kernel_h == 5) && g.in_c >= 8 && filters >= 8 && g.out_h >= 2 &&
         g.out_w >= 2;
}

// 3x3 filters take F(4 x 4, 3 x 3) where the output holds a 4 x 4 tile: 2.25 multiplications
// per output instead of F(2 x 2)'s 4, and transformed tiles 2.25 times the input's size instead of
// 4 times. 5x5 filters keep F(2 x 2, 5 x 5): F(4 x 4, 5 x 5) rounds too coarsely in float.
Convolution::Convolution(const im2col::Geometry& geometry, std::int64_t filters)
    : g_(geometry),
      filters_(filters),
      r_(static_cast<int>(geometry.kernel_h)),
      tile_(r_ == 3 && geometry.out_h >= 4 && geometry.out_w >= 4 ? 4 : 2),
      alpha_(tile_ + r_ - 1),
      tiles_h_((geometry.out_h + tile_ - 1) / tile_),
      tiles_w_((geometry.out_w + tile_ - 1) / tile_) {}

Convolution::Plan Convolution::plan(std::int64_t n, int threads) const {
  const std::int64_t positions = alpha_ * alpha_;
  const std::int64_t bytes_per_image =
      positions * tiles_per_image() * (g_.in_c + filters_) * std::int64_t{sizeof(float)};
  const std::int64_t largest = std::max<std::int64_t>(1, kChunkBytes / bytes_per_image);
  const std::int64_t per_thread = (n + threads - 1) / threads;
  const std::int64_t chunks_per_thread = (per_thread + largest - 1) / largest;
  Plan p;
  p.chunk = std::max<std::int64_t>(1, (per_thread + chunks_per_thread - 1) / chunks_per_thread);
  p.chunks = (n + p.chunk - 1) / p.chunk;
  p.threads = static_cast<int>(std::min<std::int64_t>(threads, p.chunks));
  return p;
}

// The transform matrices of F(M x M, R x R).
template <int M, int R>
constexpr Transform<M, R> kTransform = make_transform<M, R>();

// U[(i, j)] = sum over (p, q) of G[i][p] G[j][q] kernel[p][q], each a whole [in, filters] slice.
template <int M, int R>
void Convolution::transform_filter(const float* kernel) {
  constexpr int a = M + R - 1, r = R;
  constexpr auto& g = kTransform<M, R>.g;
  const std::int64_t slice = g_.in_c * filters_;
  u_.resize({a * a * slice});
  u_.set_zero();
  for (int i = 0; i < a; ++i)
    for (int j = 0; j < a; ++j)
      for (int p = 0; p < r; ++p)
        for (int q = 0; q < r; ++q) {
          const float coef = g[i * r + p] * g[j * r + q];
          if (coef != 0.0f) axpy(u_.data() + (i * a + j) * slice, coef, kernel + (p * r + q) * slice, slice);
        }
}

// dLoss/dkernel[p][q] = sum over (i, j) of G[i][p] G[j][q] dU[(i, j)], the adjoint of
// transform_filter.
template <int M, int R>
void Convolution::filter_grad(const float* du, float* grad_kernel) const {
  constexpr int a = M + R - 1, r = R;
  constexpr auto& g = kTransform<M, R>.g;
  const std::int64_t slice = g_.in_c * filters_;
  zero(grad_kernel, r * r * slice);
  for (int p = 0; p < r; ++p)
    for (int q = 0; q < r; ++q)
      for (int i = 0; i < a; ++i)
        for (int j = 0; j < a; ++j) {
          const float coef = g[i * r + p] * g[j * r + q];
          if (coef != 0.0f) axpy(grad_kernel + (p * r + q) * slice, coef, du + (i * a + j) * slice, slice);
        }
}

namespace {

using simd::Floats;
constexpr int kLanes = simd::kLanes;

// The first n (<= kLanes) channels at p, the rest 0; and their store. Whole vectors are plain
// unaligned moves; only a channel count that is not a multiple of kLanes takes the copies.
inline void load(Floats& v, const float* p, int n) {
  if (n == kLanes) {
    v = simd::at(p);
  } else {
    v = Floats{};
    std::memcpy(&v, p, static_cast<std::size_t>(n) * sizeof(float));
  }
}
inline void store(float* p, const Floats& v, int n) {
  if (n == kLanes)
    simd::at(p) = v;
  else
    std::memcpy(p, &v, static_cast<std::size_t>(n) * sizeof(float));
}

// Calls f(std::integral_constant<int, I>()) for I = 0, ..., N - 1, unrolled.
template <int N, typename F>
inline void unroll(F&& f) {
  [&]<int... I>(std::integer_sequence<int, I...>) {
    (f(std::integral_constant<int, I>()), ...);
  }(std::make_integer_sequence<int, N>());
}

// The transpose of the compile-time Rows x Cols matrix w (row-major).
template <int Rows, int Cols, std::size_t Size>
constexpr std::array<float, Size> transposed(const std::array<float, Size>& w) {
  std::array<float, Size> t{};
  for (int i = 0; i < Rows; ++i)
    for (int j = 0; j < Cols; ++j)
      t[static_cast<std::size_t>(j * Rows + i)] = w[static_cast<std::size_t>(i * Cols + j)];
  return t;
}

// The four transforms of F(M x M, R x R), each applied to a tile from both sides as
// Y = L X R^T: B^T d B (input), A^T M A (output), and their adjoints A dY A^T and B dV B^T.
template <int M, int R>
struct Sides {
  static constexpr int a = M + R - 1, m = M;
  static constexpr auto& t = kTransform<M, R>;
  static constexpr std::array<float, a * a> bt = t.bt, b = transposed<a, a>(t.bt);
  static constexpr std::array<float, m * a> at = t.at, a_ = transposed<m, a>(t.at);
};

// Row i of the compile-time matrix w with Cols columns.
template <int Cols, std::size_t Size>
constexpr std::array<float, Cols> row_of(const std::array<float, Size>& w, int i) {
  std::array<float, Cols> row{};
  for (int k = 0; k < Cols; ++k)
    row[static_cast<std::size_t>(k)] = w[static_cast<std::size_t>(i * Cols + k)];
  return row;
}

// acc = sum over k of Row[k] * x(k), the coefficients known at compile time: zero terms vanish
// and unit ones are plain adds or subtracts, which is most of the transforms' work saved.
template <auto Row, typename X>
inline void combine(Floats& acc, X&& x) {
  bool first = true;
  unroll<static_cast<int>(Row.size())>([&](auto k) {
    constexpr float c = Row[k];
    if constexpr (c != 0.0f) {
      const Floats& term = x(k);
      if (first)
        acc = c == 1.0f ? term : c == -1.0f ? -term : c * term;
      else if constexpr (c == 1.0f)
        acc += term;
      else if constexpr (c == -1.0f)
        acc -= term;
      else
        acc += c * term;
      first = false;
    }
  });
  if (first) acc = Floats{};
}

// Calls f(i) for i = 0, ..., N - 1: unrolled when N is small, a loop otherwise (unrolled 6 x 6
// tiles outgrow the registers and the inliner).
template <int N, typename F>
inline void repeat(F&& f) {
  if constexpr (N <= 4)
    unroll<N>(f);
  else
    for (int i = 0; i < N; ++i) f(i);
}

// out(i, j, Y[i][j]) for Y = L X R^T, with L (P x K1) and R (Q x K2) known at compile time and
// x(k1, k2) the K1 x K2 input tile. Column by column, then row by row: each pass holds one line
// of inputs and of outputs in registers.
template <auto L, int K1, auto R, int K2, typename X, typename Out>
inline void sandwich(X&& x, Out&& out) {
  constexpr int P = static_cast<int>(L.size()) / K1, Q = static_cast<int>(R.size()) / K2;
  Floats t[P * K2];
  repeat<K2>([&](int l) {
    Floats column[K1];
    for (int k = 0; k < K1; ++k) column[k] = x(k, l);
    unroll<P>([&](auto i) {
      constexpr auto row = row_of<K1>(L, i);
      combine<row>(t[i * K2 + l], [&](int k) -> const Floats& { return column[k]; });
    });
  });
  repeat<P>([&](int i) {
    const Floats* line = t + i * K2;
    unroll<Q>([&](auto j) {
      constexpr auto row = row_of<K2>(R, j);
      Floats y;
      combine<row>(y, [&](int k) -> const Floats& { return line[k]; });
      out(i, j, y);
    });
  });
}

}  // namespace

// V[(i, j)][tile] = (B^T d B)[i][j] for each tile's alpha x alpha input patch d (zero outside the
// image), kLanes channels at a time with the patch in registers.
template <int M, int R>
void Convolution::transform_input(const float* images, std::int64_t count, float* v) const {
  using S = Sides<M, R>;
  constexpr int a = M + R - 1, m = M;
  const std::int64_t c = g_.in_c, tiles = count * tiles_per_image(), row = g_.in_w * c;
  Floats d[a * a];
  for (std::int64_t b = 0; b < count; ++b) {
    const float* image = images + b * g_.image_size();
    for (std::int64_t th = 0; th < tiles_h_; ++th) {
      const std::int64_t ih0 = th * m - g_.pad_top;
      for (std::int64_t tw = 0; tw < tiles_w_; ++tw) {
        const std::int64_t tile = (b * tiles_h_ + th) * tiles_w_ + tw;
        const std::int64_t iw0 = tw * m - g_.pad_left;
        const bool inside = ih0 >= 0 && iw0 >= 0 && ih0 + a <= g_.in_h && iw0 + a <= g_.in_w;
        for (std::int64_t c0 = 0; c0 < c; c0 += kLanes) {
          const int n = static_cast<int>(std::min<std::int64_t>(kLanes, c - c0));
          // The patch's corner, as an offset: it lies outside the image for border tiles.
          const std::int64_t corner = (ih0 * g_.in_w + iw0) * c + c0;
          if (inside && n == kLanes) {  // most tiles: plain loads
            for (int k = 0; k < a; ++k)
              for (int l = 0; l < a; ++l) d[k * a + l] = simd::at(image + corner + k * row + l * c);
          } else {
            for (int k = 0; k < a; ++k)
              for (int l = 0; l < a; ++l) {
                const std::int64_t ih = ih0 + k, iw = iw0 + l;
                if (ih < 0 || ih >= g_.in_h || iw < 0 || iw >= g_.in_w)
                  d[k * a + l] = Floats{};
                else
                  load(d[k * a + l], image + corner + k * row + l * c, n);
              }
          }
          float* out = v + tile * c + c0;
          sandwich<S::bt, a, S::bt, a>([&](int k, int l) -> const Floats& { return d[k * a + l]; },
                                       [&](int i, int j, const Floats& y) { store(out + (i * a + j) * tiles * c, y, n); });
        }
      }
    }
  }
}

// Each tile's m x m outputs (A^T M A)[x][y] + bias, then the activation; outputs past the edge
// of a partial tile are dropped.
template <int M, int R>
void Convolution::transform_output(const float* mm, std::int64_t count, const float* bias,
                                   bool relu, float* output) const {
  using S = Sides<M, R>;
  constexpr int a = M + R - 1, m = M;
  const std::int64_t f = filters_, tiles = count * tiles_per_image();
  Floats x_in[a * a];
  for (std::int64_t b = 0; b < count; ++b) {
    for (std::int64_t th = 0; th < tiles_h_; ++th) {
      for (std::int64_t tw = 0; tw < tiles_w_; ++tw) {
        const std::int64_t tile = (b * tiles_h_ + th) * tiles_w_ + tw;
        const std::int64_t rows = std::min<std::int64_t>(m, g_.out_h - th * m);
        const std::int64_t cols = std::min<std::int64_t>(m, g_.out_w - tw * m);
        float* out = output + ((b * g_.out_h + th * m) * g_.out_w + tw * m) * f;
        for (std::int64_t f0 = 0; f0 < f; f0 += kLanes) {
          const int n = static_cast<int>(std::min<std::int64_t>(kLanes, f - f0));
          const float* in = mm + tile * f + f0;
          for (int xi = 0; xi < a * a; ++xi) load(x_in[xi], in + xi * tiles * f, n);
          Floats bias_block;
          load(bias_block, bias + f0, n);
          sandwich<S::at, a, S::at, a>(
              [&](int k, int l) -> const Floats& { return x_in[k * a + l]; },
              [&](int x, int y, Floats value) {
                if (x >= rows || y >= cols) return;
                value += bias_block;
                if (relu) value = value > 0.0f ? value : Floats{};
                store(out + (x * g_.out_w + y) * f + f0, value, n);
              });
        }
      }
    }
  }
}

// The adjoint of transform_output: dM[(i, j)][tile] = (A dY A^T)[i][j], dY being the tile's
// output gradient (0 past the edge).
template <int M, int R>
void Convolution::transform_output_grad(const float* grad, std::int64_t count, float* dm) const {
  using S = Sides<M, R>;
  constexpr int a = M + R - 1, m = M;
  const std::int64_t f = filters_, tiles = count * tiles_per_image();
  Floats dy[m * m];
  for (std::int64_t b = 0; b < count; ++b) {
    for (std::int64_t th = 0; th < tiles_h_; ++th) {
      for (std::int64_t tw = 0; tw < tiles_w_; ++tw) {
        const std::int64_t tile = (b * tiles_h_ + th) * tiles_w_ + tw;
        const std::int64_t rows = std::min<std::int64_t>(m, g_.out_h - th * m);
        const std::int64_t cols = std::min<std::int64_t>(m, g_.out_w - tw * m);
        const float* in = grad + ((b * g_.out_h + th * m) * g_.out_w + tw * m) * f;
        for (std::int64_t f0 = 0; f0 < f; f0 += kLanes) {
          const int n = static_cast<int>(std::min<std::int64_t>(kLanes, f - f0));
          for (int x = 0; x < m; ++x)
            for (int y = 0; y < m; ++y) {
              if (x < rows && y < cols)
                load(dy[x * m + y], in + (x * g_.out_w + y) * f + f0, n);
              else
                dy[x * m + y] = Floats{};
            }
          float* out = dm + tile * f + f0;
          sandwich<S::a_, m, S::a_, m>([&](int k, int l) -> const Floats& { return dy[k * m + l]; },
                                       [&](int i, int j, const Floats& y) { store(out + (i * a + j) * tiles * f, y, n); });
        }
      }
    }
  }
}

// The adjoint of transform_input: each tile's (B dV B^T) goes onto the input pixels it was read
// from; padding positions are dropped. Tiles overlap by a - m pixels, so a pixel that an earlier
// tile (above, or to the left) covered collects, and the others are written: every pixel of the
// images is covered, and none needs zeroing first.
template <int M, int R>
void Convolution::add_input_grad(const float* dv, std::int64_t count, float* grad_images) const {
  using S = Sides<M, R>;
  constexpr int a = M + R - 1, m = M;
  const std::int64_t c = g_.in_c, tiles = count * tiles_per_image(), row = g_.in_w * c;
  Floats x_in[a * a];
  for (std::int64_t b = 0; b < count; ++b) {
    float* image = grad_images + b * g_.image_size();
    for (std::int64_t th = 0; th < tiles_h_; ++th) {
      const std::int64_t ih0 = th * m - g_.pad_top;
      for (std::int64_t tw = 0; tw < tiles_w_; ++tw) {
        const std::int64_t tile = (b * tiles_h_ + th) * tiles_w_ + tw;
        const std::int64_t iw0 = tw * m - g_.pad_left;
        const bool inside = ih0 >= 0 && iw0 >= 0 && ih0 + a <= g_.in_h && iw0 + a <= g_.in_w;
        for (std::int64_t c0 = 0; c0 < c; c0 += kLanes) {
          const int n = static_cast<int>(std::min<std::int64_t>(kLanes, c - c0));
          const float* in = dv + tile * c + c0;
          for (int xi = 0; xi < a * a; ++xi) load(x_in[xi], in + xi * tiles * c, n);
          const std::int64_t corner = (ih0 * g_.in_w + iw0) * c + c0;
          sandwich<S::b, a, S::b, a>(
              [&](int k, int l) -> const Floats& { return x_in[k * a + l]; },
              [&](int k, int l, const Floats& y) {
                if (!inside && (ih0 + k < 0 || ih0 + k >= g_.in_h || iw0 + l < 0 || iw0 + l >= g_.in_w))
                  return;
                float* dst = image + corner + k * row + l * c;
                const bool covered = (th > 0 && k < a - m) || (tw > 0 && l < a - m);
                if (n == kLanes) {
                  simd::at(dst) = covered ? simd::at(dst) + y : y;
                } else {
                  Floats old{};
                  if (covered) load(old, dst, n);
                  store(dst, old + y, n);
                }
              });
        }
      }
    }
  }
}

// Calls f with the output tile and filter sizes as compile-time constants.
template <typename F>
void Convolution::dispatch(F&& f) const {
  using std::integral_constant;
  if (r_ == 5)
    f(integral_constant<int, 2>(), integral_constant<int, 5>());
  else if (tile_ == 4)
    f(integral_constant<int, 4>(), integral_constant<int, 3>());
  else
    f(integral_constant<int, 2>(), integral_constant<int, 3>());
}

void Convolution::forward(const float* images, std::int64_t n, const float* kernel,
                          const float* bias, bool relu, float* output, int threads) {
  const std::int64_t positions = alpha_ * alpha_, c = g_.in_c, f = filters_;
  dispatch([&](auto m, auto r) { transform_filter<m, r>(kernel); });
  const Plan p = plan(n, threads);
  const std::int64_t tiles = p.chunk * tiles_per_image();
  const std::int64_t v_size = positions * tiles * c, m_size = positions * tiles * f;
  v_.resize({p.threads * v_size});
  m_.resize({p.threads * m_size});

#pragma omp parallel for num_threads(p.threads) schedule(static) if (p.threads > 1)
  for (std::int64_t i = 0; i < p.chunks; ++i) {
    const std::int64_t t = intra_op_thread_index();
    const std::int64_t b0 = i * p.chunk, count = std::min(p.chunk, n - b0);
    const std::int64_t rows = count * tiles_per_image();
    float* v = v_.data() + t * v_size;
    float* mm = m_.data() + t * m_size;
    dispatch([&](auto m, auto r) { transform_input<m, r>(images + b0 * g_.image_size(), count, v); });
    for (std::int64_t xi = 0; xi < positions; ++xi)
      gemm(false, false, rows, f, c, v + xi * rows * c, u_.data() + xi * c * f, 0.0f, mm + xi * rows * f);
    dispatch([&](auto m, auto r) { transform_output<m, r>(mm, count, bias, relu, output + b0 * g_.rows_per_image() * f); });
  }
}

void Convolution::backward(const float* images, std::int64_t n, const float* kernel,
                           const float* output, const float* grad_output, bool relu,
                           float* grad_images, float* grad_kernel, float* grad_bias, int threads) {
  const std::int64_t positions = alpha_ * alpha_, c = g_.in_c, f = filters_, slice = c * f;
  dispatch([&](auto m, auto r) { transform_filter<m, r>(kernel); });
  const Plan p = plan(n, threads);
  const std::int64_t tiles = p.chunk * tiles_per_image();
  const std::int64_t v_size = positions * tiles * c, m_size = positions * tiles * f;
  const std::int64_t pre_size = relu ? p.chunk * g_.rows_per_image() * f : 0;
  const std::int64_t du_size = positions * slice + f;  // the filter gradient, then the bias's
  v_.resize({p.threads * v_size});
  m_.resize({p.threads * m_size});
  grad_pre_.resize({p.threads * pre_size});
  du_.resize({p.threads * du_size});

#pragma omp parallel num_threads(p.threads) if (p.threads > 1)
  {
    const std::int64_t t = intra_op_thread_index();
    float* v = v_.data() + t * v_size;
    float* dm = m_.data() + t * m_size;
    float* pre = grad_pre_.data() + t * pre_size;
    float* du = du_.data() + t * du_size;
    zero(du, du_size);
#pragma omp for schedule(static)
    for (std::int64_t i = 0; i < p.chunks; ++i) {
      const std::int64_t b0 = i * p.chunk, count = std::min(p.chunk, n - b0);
      const std::int64_t rows = count * tiles_per_image();
      const std::int64_t out_offset = b0 * g_.rows_per_image() * f;
      ops_detail::relu_and_bias_grad(grad_output + out_offset, output + out_offset, pre,
                                     count * g_.rows_per_image(), f, relu, du + positions * slice, true);
      dispatch([&](auto m, auto r) { transform_output_grad<m, r>(relu ? pre : grad_output + out_offset, count, dm); });
      dispatch([&](auto m, auto r) { transform_input<m, r>(images + b0 * g_.image_size(), count, v); });
      for (std::int64_t xi = 0; xi < positions; ++xi)
        gemm(true, false, c, f, rows, v + xi * rows * c, dm + xi * rows * f, 1.0f, du + xi * slice);
      if (grad_images == nullptr) continue;
      for (std::int64_t xi = 0; xi < positions; ++xi)  // dV overwrites V
        gemm(false, true, rows, c, f, dm + xi * rows * f, u_.data() + xi * slice, 0.0f, v + xi * rows * c);
      dispatch([&](auto m, auto r) { add_input_grad<m, r>(v, count, grad_images + b0 * g_.image_size()); });
    }
  }
  float* du = du_.data();
  for (int t = 1; t < p.threads; ++t) axpy(du, 1.0f, du_.data() + t * du_size, du_size);
  std::memcpy(grad_bias, du + positions * slice, static_cast<std::size_t>(f) * sizeof(float));
  dispatch([&](auto m, auto r) { filter_grad<m, r>(du, grad_kernel); });
}

}  // namespace cohort::winograd
