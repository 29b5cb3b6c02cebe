#pragma once
// Winograd's minimal filtering F(m x m, r x r) for stride-1 convolutions (Lavin & Gray, "Fast
// Algorithms for Convolutional Neural Networks", 2016): each m x m output tile is
// A^T [(G g G^T) . (B^T d B)] A for its (m + r - 1)^2 input tile d, so the products over the
// channels become (m + r - 1)^2 matrix products of [tiles, in] x [in, filters] per batch, with
// m^2 r^2 / (m + r - 1)^2 times fewer multiplications than direct convolution (2.8x for 5x5
// filters and m = 2). The transforms are elementwise work vectorised over channels; the matrix
// products are Eigen's. Forward, input gradient and filter gradient all take this form.
//
// Internal to Conv2D. Not thread-safe: one object per layer (per tower).

#include <cstdint>
#include <vector>

#include "cohort/core/nn/ops/im2col.h"
#include "cohort/core/nn/tensor.h"

namespace cohort::winograd {

/// The transform matrices of F(m, r) (row-major), from the Toom-Cook construction with the
/// interpolation points 0, 1, -1, 2, -2, ... and infinity.
struct Transform {
  int m = 0, r = 0, alpha = 0;  // alpha = m + r - 1
  std::vector<float> at;        // A^T, m x alpha
  std::vector<float> g;         // G, alpha x r
  std::vector<float> bt;        // B^T, alpha x alpha

  static Transform make(int m, int r);
};

/// Runs one Conv2D layer's convolutions by F(2 x 2, r x r).
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
  void transform_filter(const float* kernel);
  // The per-tile transforms, for tiles of A x A inputs.
  template <int A>
  void transform_input(const float* images, std::int64_t count, float* v) const;
  template <int A>
  void transform_output(const float* m, std::int64_t count, const float* bias, bool relu,
                        float* output) const;
  template <int A>
  void transform_output_grad(const float* grad, std::int64_t count, float* dm) const;
  template <int A>
  void add_input_grad(const float* dv, std::int64_t count, float* grad_images) const;

  im2col::Geometry g_;
  std::int64_t filters_;
  Transform t_;
  std::vector<float> at_, a_, bt_, b_;  // A^T, A, B^T, B, row-major
  std::int64_t tiles_h_ = 0, tiles_w_ = 0;
  Tensor u_;         // transformed filter, [alpha^2][in][filters]
  Tensor v_;         // per thread: transformed input tiles of a chunk, [alpha^2][tiles][in]
  Tensor m_;         // per thread: products of a chunk, [alpha^2][tiles][filters]
  Tensor grad_pre_;  // per thread: dLoss/d(pre-activation) of a chunk, NHWC
  Tensor du_;        // per thread: transformed filter gradient, [alpha^2][in][filters]
};

}  // namespace cohort::winograd
