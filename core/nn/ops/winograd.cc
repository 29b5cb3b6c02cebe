#include "cohort/core/nn/ops/winograd.h"

#include <Eigen/Core>
#include <Eigen/LU>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "cohort/core/nn/ops/bias_grad.h"
#include "cohort/core/nn/ops/simd.h"

namespace cohort::winograd {
namespace {

using MatrixMap = Eigen::Map<Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
using ConstMatrixMap =
    Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;

// The transformed input and products of one chunk of images should stay in L2 between the
// transforms and the matrix products (2 MB per core on the machines this was tuned on).
constexpr std::int64_t kChunkBytes = 1536 * 1024;
constexpr int kOutputTile = 2;  // m: F(2 x 2, r x r)

std::int64_t thread_index() {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

// dst[0, n) += coef * src[0, n): the filter transforms, over whole [in, filters] slices.
inline void axpy(float* __restrict dst, float coef, const float* __restrict src, std::int64_t n) {
  for (std::int64_t c = 0; c < n; ++c) dst[c] += coef * src[c];
}
inline void zero(float* dst, std::int64_t n) {
  std::memset(dst, 0, static_cast<std::size_t>(n) * sizeof(float));
}

}  // namespace

Transform Transform::make(int m, int r) {
  Transform t;
  t.m = m;
  t.r = r;
  t.alpha = m + r - 1;
  const int a = t.alpha;
  std::vector<double> points = {0.0};
  for (int i = 1; static_cast<int>(points.size()) < a - 1; ++i) {
    points.push_back(i);
    if (static_cast<int>(points.size()) < a - 1) points.push_back(-i);
  }
  // Evaluation at the points (and the leading coefficient, "infinity") of a polynomial with
  // `cols` coefficients. The correlation y = g * d is then y = V_m^T [(V_r g) . (V_a^-T d)]:
  // A^T = V_m^T, G = V_r, B^T = V_a^-T.
  auto vandermonde = [&](int cols) {
    Eigen::MatrixXd v = Eigen::MatrixXd::Zero(a, cols);
    for (int j = 0; j < a - 1; ++j)
      for (int k = 0; k < cols; ++k) v(j, k) = std::pow(points[static_cast<std::size_t>(j)], k);
    v(a - 1, cols - 1) = 1.0;
    return v;
  };
  auto store = [](const Eigen::MatrixXd& x, std::vector<float>& out) {
    out.resize(static_cast<std::size_t>(x.size()));
    for (Eigen::Index i = 0; i < x.rows(); ++i)
      for (Eigen::Index j = 0; j < x.cols(); ++j)
        out[static_cast<std::size_t>(i * x.cols() + j)] = static_cast<float>(x(i, j));
  };
  store(vandermonde(m).transpose(), t.at);
  store(vandermonde(r), t.g);
  store(vandermonde(a).inverse().transpose(), t.bt);
  return t;
}

bool Convolution::suitable(const im2col::Geometry& g, std::int64_t filters) {
  return g.stride_h == 1 && g.stride_w == 1 && g.kernel_h == g.kernel_w &&
         (g.kernel_h == 3 || g.kernel_h == 5) && g.in_c >= 8 && filters >= 8 &&
         g.out_h >= kOutputTile && g.out_w >= kOutputTile;
}

Convolution::Convolution(const im2col::Geometry& geometry, std::int64_t filters)
    : g_(geometry),
      filters_(filters),
      t_(Transform::make(kOutputTile, static_cast<int>(geometry.kernel_h))),
      tiles_h_((geometry.out_h + kOutputTile - 1) / kOutputTile),
      tiles_w_((geometry.out_w + kOutputTile - 1) / kOutputTile) {
  const int a = t_.alpha, m = t_.m;
  at_ = t_.at;
  bt_ = t_.bt;
  a_.resize(t_.at.size());
  b_.resize(t_.bt.size());
  for (int i = 0; i < a; ++i) {
    for (int x = 0; x < m; ++x) a_[static_cast<std::size_t>(i * m + x)] = t_.at[static_cast<std::size_t>(x * a + i)];
    for (int k = 0; k < a; ++k) b_[static_cast<std::size_t>(i * a + k)] = t_.bt[static_cast<std::size_t>(k * a + i)];
  }
}

Convolution::Plan Convolution::plan(std::int64_t n, int threads) const {
  const std::int64_t positions = t_.alpha * t_.alpha;
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

// U[(i, j)] = sum over (p, q) of G[i][p] G[j][q] kernel[p][q], each a whole [in, filters] slice.
void Convolution::transform_filter(const float* kernel) {
  const int a = t_.alpha, r = t_.r;
  const std::int64_t slice = g_.in_c * filters_;
  u_.resize({a * a * slice});
  u_.set_zero();
  for (int i = 0; i < a; ++i)
    for (int j = 0; j < a; ++j)
      for (int p = 0; p < r; ++p)
        for (int q = 0; q < r; ++q) {
          const float coef = t_.g[i * r + p] * t_.g[j * r + q];
          if (coef != 0.0f) axpy(u_.data() + (i * a + j) * slice, coef, kernel + (p * r + q) * slice, slice);
        }
}

namespace {

using simd::Floats;
constexpr int kLanes = simd::kLanes;

// The first n (<= 16) channels at p, the rest 0; and their store. Whole vectors are plain
// unaligned moves; only a channel count that is not a multiple of 16 takes the copies.
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

// acc = sum over k < N of row[k] * x[k * stride + offset]: one row of a transform matrix against
// a column of vectors. N is a compile-time constant, so the loop unrolls and the coefficients
// become broadcast operands of the multiply-adds.
template <int N>
inline void dot(Floats& acc, const float* row, const Floats* x, int stride, int offset) {
  acc = row[0] * x[offset];
  for (int k = 1; k < N; ++k) acc += row[k] * x[k * stride + offset];
}

}  // namespace

// V[(i, j)][tile] = (B^T d B)[i][j] for each tile's alpha x alpha input patch d (zero outside the
// image), 16 channels at a time with the patch in registers.
template <int A>
void Convolution::transform_input(const float* images, std::int64_t count, float* v) const {
  constexpr int a = A, m = kOutputTile;
  const std::int64_t c = g_.in_c, tiles = count * tiles_per_image();
  Floats d[a * a], rows[a * a];
  for (std::int64_t b = 0; b < count; ++b) {
    const float* image = images + b * g_.image_size();
    for (std::int64_t th = 0; th < tiles_h_; ++th) {
      for (std::int64_t tw = 0; tw < tiles_w_; ++tw) {
        const std::int64_t tile = (b * tiles_h_ + th) * tiles_w_ + tw;
        const std::int64_t ih0 = th * m - g_.pad_top, iw0 = tw * m - g_.pad_left;
        for (std::int64_t c0 = 0; c0 < c; c0 += kLanes) {
          const int n = static_cast<int>(std::min<std::int64_t>(kLanes, c - c0));
          for (int k = 0; k < a; ++k) {
            const std::int64_t ih = ih0 + k;
            for (int l = 0; l < a; ++l) {
              const std::int64_t iw = iw0 + l;
              if (ih < 0 || ih >= g_.in_h || iw < 0 || iw >= g_.in_w)
                d[k * a + l] = Floats{};
              else
                load(d[k * a + l], image + (ih * g_.in_w + iw) * c + c0, n);
            }
          }
          for (int i = 0; i < a; ++i)
            for (int l = 0; l < a; ++l) dot<a>(rows[i * a + l], bt_.data() + i * a, d, a, l);
          for (int i = 0; i < a; ++i)
            for (int j = 0; j < a; ++j) {
              Floats acc;
              dot<a>(acc, bt_.data() + j * a, rows, 1, i * a);
              store(v + ((i * a + j) * tiles + tile) * c + c0, acc, n);
            }
        }
      }
    }
  }
}

// Each tile's m x m outputs (A^T M A)[x][y] + bias, then the activation; outputs past the edge
// of a partial tile are dropped.
template <int A>
void Convolution::transform_output(const float* mm, std::int64_t count, const float* bias,
                                   bool relu, float* output) const {
  constexpr int a = A, m = kOutputTile;
  const std::int64_t f = filters_, tiles = count * tiles_per_image();
  Floats x_in[a * a], rows[a * a];
  for (std::int64_t b = 0; b < count; ++b) {
    for (std::int64_t th = 0; th < tiles_h_; ++th) {
      for (std::int64_t tw = 0; tw < tiles_w_; ++tw) {
        const std::int64_t tile = (b * tiles_h_ + th) * tiles_w_ + tw;
        for (std::int64_t f0 = 0; f0 < f; f0 += kLanes) {
          const int n = static_cast<int>(std::min<std::int64_t>(kLanes, f - f0));
          for (int xi = 0; xi < a * a; ++xi) load(x_in[xi], mm + (xi * tiles + tile) * f + f0, n);
          for (int x = 0; x < m; ++x)
            for (int j = 0; j < a; ++j) dot<a>(rows[x * a + j], at_.data() + x * a, x_in, a, j);
          Floats bias_block;
          load(bias_block, bias + f0, n);
          for (int x = 0; x < m; ++x) {
            const std::int64_t oh = th * m + x;
            if (oh >= g_.out_h) break;
            for (int y = 0; y < m; ++y) {
              const std::int64_t ow = tw * m + y;
              if (ow >= g_.out_w) break;
              Floats acc;
              dot<a>(acc, at_.data() + y * a, rows, 1, x * a);
              acc += bias_block;
              if (relu) acc = acc > 0.0f ? acc : Floats{};
              store(output + ((b * g_.out_h + oh) * g_.out_w + ow) * f + f0, acc, n);
            }
          }
        }
      }
    }
  }
}

// The adjoint of transform_output: dM[(i, j)][tile] = (A dY A^T)[i][j], dY being the tile's
// output gradient (0 past the edge).
template <int A>
void Convolution::transform_output_grad(const float* grad, std::int64_t count, float* dm) const {
  constexpr int a = A, m = kOutputTile;
  const std::int64_t f = filters_, tiles = count * tiles_per_image();
  Floats dy[m * m], cols[a * m];
  for (std::int64_t b = 0; b < count; ++b) {
    for (std::int64_t th = 0; th < tiles_h_; ++th) {
      for (std::int64_t tw = 0; tw < tiles_w_; ++tw) {
        const std::int64_t tile = (b * tiles_h_ + th) * tiles_w_ + tw;
        for (std::int64_t f0 = 0; f0 < f; f0 += kLanes) {
          const int n = static_cast<int>(std::min<std::int64_t>(kLanes, f - f0));
          for (int x = 0; x < m; ++x) {
            const std::int64_t oh = th * m + x;
            for (int y = 0; y < m; ++y) {
              const std::int64_t ow = tw * m + y;
              if (oh >= g_.out_h || ow >= g_.out_w)
                dy[x * m + y] = Floats{};
              else
                load(dy[x * m + y], grad + ((b * g_.out_h + oh) * g_.out_w + ow) * f + f0, n);
            }
          }
          for (int i = 0; i < a; ++i)
            for (int y = 0; y < m; ++y) dot<m>(cols[i * m + y], a_.data() + i * m, dy, m, y);
          for (int i = 0; i < a; ++i)
            for (int j = 0; j < a; ++j) {
              Floats acc;
              dot<m>(acc, a_.data() + j * m, cols, 1, i * m);
              store(dm + ((i * a + j) * tiles + tile) * f + f0, acc, n);
            }
        }
      }
    }
  }
}

// The adjoint of transform_input: each tile's (B dV B^T) is added onto the input pixels it was
// read from (tiles overlap, so pixels collect several); padding positions are dropped.
template <int A>
void Convolution::add_input_grad(const float* dv, std::int64_t count, float* grad_images) const {
  constexpr int a = A, m = kOutputTile;
  const std::int64_t c = g_.in_c, tiles = count * tiles_per_image();
  Floats x_in[a * a], rows[a * a];
  for (std::int64_t b = 0; b < count; ++b) {
    float* image = grad_images + b * g_.image_size();
    for (std::int64_t th = 0; th < tiles_h_; ++th) {
      for (std::int64_t tw = 0; tw < tiles_w_; ++tw) {
        const std::int64_t tile = (b * tiles_h_ + th) * tiles_w_ + tw;
        const std::int64_t ih0 = th * m - g_.pad_top, iw0 = tw * m - g_.pad_left;
        for (std::int64_t c0 = 0; c0 < c; c0 += kLanes) {
          const int n = static_cast<int>(std::min<std::int64_t>(kLanes, c - c0));
          for (int xi = 0; xi < a * a; ++xi) load(x_in[xi], dv + (xi * tiles + tile) * c + c0, n);
          for (int k = 0; k < a; ++k)
            for (int j = 0; j < a; ++j) dot<a>(rows[k * a + j], b_.data() + k * a, x_in, a, j);
          for (int k = 0; k < a; ++k) {
            const std::int64_t ih = ih0 + k;
            if (ih < 0 || ih >= g_.in_h) continue;
            for (int l = 0; l < a; ++l) {
              const std::int64_t iw = iw0 + l;
              if (iw < 0 || iw >= g_.in_w) continue;
              float* dst = image + (ih * g_.in_w + iw) * c + c0;
              Floats acc, old;
              dot<a>(acc, b_.data() + l * a, rows, 1, k * a);
              load(old, dst, n);
              acc += old;
              store(dst, acc, n);
            }
          }
        }
      }
    }
  }
}

// Calls f with the tile size alpha as a compile-time constant (4 for 3x3 filters, 6 for 5x5).
template <typename F>
void Convolution::dispatch(F&& f) const {
  if (t_.alpha == 4)
    f(std::integral_constant<int, 4>());
  else
    f(std::integral_constant<int, 6>());
}

void Convolution::forward(const float* images, std::int64_t n, const float* kernel,
                          const float* bias, bool relu, float* output, int threads) {
  const std::int64_t positions = t_.alpha * t_.alpha, c = g_.in_c, f = filters_;
  transform_filter(kernel);
  const Plan p = plan(n, threads);
  const std::int64_t tiles = p.chunk * tiles_per_image();
  const std::int64_t v_size = positions * tiles * c, m_size = positions * tiles * f;
  v_.resize({p.threads * v_size});
  m_.resize({p.threads * m_size});

#pragma omp parallel for num_threads(p.threads) schedule(static) if (p.threads > 1)
  for (std::int64_t i = 0; i < p.chunks; ++i) {
    const std::int64_t t = thread_index();
    const std::int64_t b0 = i * p.chunk, count = std::min(p.chunk, n - b0);
    const std::int64_t rows = count * tiles_per_image();
    float* v = v_.data() + t * v_size;
    float* mm = m_.data() + t * m_size;
    dispatch([&](auto alpha) { transform_input<alpha>(images + b0 * g_.image_size(), count, v); });
    for (std::int64_t xi = 0; xi < positions; ++xi)
      MatrixMap(mm + xi * rows * f, rows, f).noalias() =
          ConstMatrixMap(v + xi * rows * c, rows, c) * ConstMatrixMap(u_.data() + xi * c * f, c, f);
    dispatch([&](auto alpha) { transform_output<alpha>(mm, count, bias, relu, output + b0 * g_.rows_per_image() * f); });
  }
}

void Convolution::backward(const float* images, std::int64_t n, const float* kernel,
                           const float* output, const float* grad_output, bool relu,
                           float* grad_images, float* grad_kernel, float* grad_bias, int threads) {
  const int a = t_.alpha, r = t_.r;
  const std::int64_t positions = a * a, c = g_.in_c, f = filters_, slice = c * f;
  transform_filter(kernel);
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
    const std::int64_t t = thread_index();
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
      dispatch([&](auto alpha) { transform_output_grad<alpha>(relu ? pre : grad_output + out_offset, count, dm); });
      dispatch([&](auto alpha) { transform_input<alpha>(images + b0 * g_.image_size(), count, v); });
      for (std::int64_t xi = 0; xi < positions; ++xi)
        MatrixMap(du + xi * slice, c, f).noalias() +=
            ConstMatrixMap(v + xi * rows * c, rows, c).transpose() * ConstMatrixMap(dm + xi * rows * f, rows, f);
      if (grad_images == nullptr) continue;
      for (std::int64_t xi = 0; xi < positions; ++xi)  // dV overwrites V
        MatrixMap(v + xi * rows * c, rows, c).noalias() =
            ConstMatrixMap(dm + xi * rows * f, rows, f) * ConstMatrixMap(u_.data() + xi * slice, c, f).transpose();
      float* dx = grad_images + b0 * g_.image_size();
      zero(dx, count * g_.image_size());
      dispatch([&](auto alpha) { add_input_grad<alpha>(v, count, dx); });
    }
  }
  float* du = du_.data();
  for (int t = 1; t < p.threads; ++t) axpy(du, 1.0f, du_.data() + t * du_size, du_size);
  std::memcpy(grad_bias, du + positions * slice, static_cast<std::size_t>(f) * sizeof(float));
  // dLoss/dkernel[p][q] = sum over (i, j) of G[i][p] G[j][q] dU[(i, j)], the adjoint of
  // transform_filter.
  zero(grad_kernel, r * r * slice);
  for (int pp = 0; pp < r; ++pp)
    for (int q = 0; q < r; ++q)
      for (int i = 0; i < a; ++i)
        for (int j = 0; j < a; ++j) {
          const float coef = t_.g[i * r + pp] * t_.g[j * r + q];
          if (coef != 0.0f) axpy(grad_kernel + (pp * r + q) * slice, coef, du + (i * a + j) * slice, slice);
        }
}

}  // namespace cohort::winograd
