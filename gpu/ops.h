#pragma once
// The GPU paths of the training ops, as free functions over raw device pointers: one per CPU op in
// core/nn/ops/ (Dense, Conv2D, MaxPool2D, ReLU, Dropout, SoftmaxCrossEntropy, accuracy) and the
// optimizer updates of core/nn/optimizer.h. Layouts are the CPU's: row-major matrices, NHWC images,
// HWIO filters, so a Layer's variables and gradients keep the graph's flat layout on either path.
//
// How a Layer's GPU path will call these (a later step): build() makes the plan objects (ConvPlan,
// PoolPlan) for its geometry once the batch size is known, and remakes them when it changes;
// forward() and backward() pass the device addresses of the input, the output and the layer's
// slices of the device copies of the parameter and gradient buffers (offsets as on the CPU), e.g.
//
//   Dense:   dense_forward(cublas, n, in_, units_, x, values + kernel_offset_,
//                          values + bias_offset_, y, allow_tf32);
//            if (relu) relu_forward(n * units_, y, y, stream);
//   Conv2D:  conv2d_forward(cudnn, plan_, x, values + kernel_offset_, values + bias_offset_, y);
//   Dropout: dropout_forward(size, rate_, Graph::variable_seed(context.seed, name_), x, y, mask,
//                            stream);   // the same mask as the CPU path, bit for bit
//
// Common rules. Every function is non-blocking: it queues its work on a stream and returns (the
// library functions on the stream their handle is bound to; the kernels on `stream`). Pointers
// are device addresses on the current device, valid until that work has run, and arrays of the
// sizes stated, not overlapping unless stated. Sizes of 0 queue nothing. Bad sizes or null
// pointers throw cohort::InvalidArgument; failed
// CUDA, cuBLAS or cuDNN calls throw CudaError. All arithmetic is float32; TF32 tensor cores are
// used only where an `allow_tf32` argument says so. Not thread-safe for one handle or plan;
// different threads may use different handles and plans.

#include <cublas_v2.h>
#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cohort/gpu/buffer.h"
#include "cohort/gpu/handle.h"
#include "cohort/gpu/handles.h"
#include "cohort/gpu/stream.h"

namespace cohort::gpu {

// ------------------------------------------------------------------------------------------------
// Dense (gpu/dense.cc)

/// y[n, out] = x[n, in] * w[in, out] + b[out] (b may be null: no bias), by cublasSgemm on the
/// handle's stream. With `allow_tf32` the product may use TF32 tensor cores (about 10 mantissa
/// bits); otherwise it is plain FP32. Sets the handle's math mode.
void dense_forward(const CublasHandle& cublas, std::int64_t n, std::int64_t in, std::int64_t out,
                   const float* x, const float* w, const float* b, float* y,
                   bool allow_tf32 = false);

/// Given dy[n, out] for y = x * w + b: writes dw[in, out] = x^T dy, db[out] = the column sums of
/// dy (skipped when db is null) and dx[n, in] = dy w^T (skipped when dx is null), on the handle's
/// stream. Same TF32 rule as dense_forward().
void dense_backward(const CublasHandle& cublas, std::int64_t n, std::int64_t in, std::int64_t out,
                    const float* x, const float* w, const float* dy, float* dw, float* db,
                    float* dx, bool allow_tf32 = false);

// ------------------------------------------------------------------------------------------------
// Conv2D (gpu/conv.cc)

/// The shape of one 2-D convolution over NHWC images: input [batch, height, width, channels],
/// filter HWIO [kernel_h, kernel_w, channels, filters], output [batch, out_height(),
/// out_width(), filters]. Padding is given per side, so TensorFlow's SAME padding (the odd extra
/// one after) is exact: pad_top = SpatialDim::pad_before, pad_bottom = total - pad_top.
struct ConvGeometry {
  int batch = 1, height = 1, width = 1, channels = 1;
  int filters = 1, kernel_h = 1, kernel_w = 1;
  int stride_h = 1, stride_w = 1;
  int pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;

  int out_height() const { return (height + pad_top + pad_bottom - kernel_h) / stride_h + 1; }
  int out_width() const { return (width + pad_left + pad_right - kernel_w) / stride_w + 1; }
};

/// One pass's algorithm (a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t), the math type it runs
/// with and the workspace bytes it needs.
struct ConvAlgorithm {
  int algo = 0;
  cudnnMathType_t math = CUDNN_FMA_MATH;
  std::size_t workspace = 0;
};

/// What cuDNN needs for one convolution geometry: tensor, filter and convolution descriptors, the
/// algorithms cuDNN's heuristics chose for the three passes (cudnnGet*Algorithm_v7: the first
/// result whose workspace query succeeds, deterministic ones preferred, and without TF32 only
/// plain FP32 math; where cuDNN refuses the chosen one when it runs, CUDNN_STATUS_NOT_SUPPORTED,
/// the next such result, with a note on stderr), and the scratch memory: one workspace for the
/// three passes (sized when the
/// plan is made), the filter in cuDNN's layout for NHWC (OHWI, converted
/// from and to HWIO on every call; filters are small), and, when padding is uneven (cuDNN pads
/// both sides alike), an explicitly padded copy of the input and of its gradient.
///
/// Made for one handle's device; usable with any handle of that device. Its scratch memory is
/// shared by the three passes, so queue a plan's calls on one stream (or order the streams).
/// Move-only RAII: a move leaves the source empty (using it then throws Error). Not
/// thread-safe.
class ConvPlan {
 public:
  /// Throws InvalidArgument for a geometry with a size < 1, a negative padding, or no
  /// output; CudaError when cuDNN rejects it.
  ConvPlan(const CudnnHandle& cudnn, const ConvGeometry& geometry, bool allow_tf32 = false);

  const ConvGeometry& geometry() const { return geometry_; }
  /// The algorithms chosen, for logs and tests.
  cudnnConvolutionFwdAlgo_t forward_algorithm() const {
    return static_cast<cudnnConvolutionFwdAlgo_t>(fwd_.algo);
  }
  cudnnConvolutionBwdDataAlgo_t backward_data_algorithm() const {
    return static_cast<cudnnConvolutionBwdDataAlgo_t>(bwd_data_.algo);
  }
  cudnnConvolutionBwdFilterAlgo_t backward_filter_algorithm() const {
    return static_cast<cudnnConvolutionBwdFilterAlgo_t>(bwd_filter_.algo);
  }

 private:
  friend void conv2d_forward(const CudnnHandle&, ConvPlan&, const float*, const float*,
                             const float*, float*);
  friend void conv2d_backward_data(const CudnnHandle&, ConvPlan&, const float*, const float*,
                                   float*);
  friend void conv2d_backward_filter(const CudnnHandle&, ConvPlan&, const float*, const float*,
                                     float*, float*);
  void check() const;
  void* prepare(const ConvAlgorithm& pass);
  // Runs one pass (0 forward, 1 backward data, 2 backward filter): `call(algorithm, workspace)`
  // returns cuDNN's status. An algorithm cuDNN refuses when run is replaced by the next that the
  // heuristic and the workspace query accept, and the call repeats. Throws CudaError naming
  // `what` for any other failure, or when no algorithm is left.
  template <typename Call>
  void run(const CudnnHandle& cudnn, int pass, const char* what, Call call);
  bool fall_back(const CudnnHandle& cudnn, int pass);
  ConvAlgorithm& chosen(int pass);
  void* workspace(std::size_t bytes);
  // The input as cuDNN sees it: `x` itself, or its padded copy.
  const float* padded_input(const float* x, cudaStream_t stream);
  bool uneven() const { return extra_top_ + extra_bottom_ + extra_left_ + extra_right_ > 0; }

  ConvGeometry geometry_;
  int extra_top_ = 0, extra_bottom_ = 0, extra_left_ = 0, extra_right_ = 0;
  Handle<cudnnTensorDescriptor_t> x_desc_;  // the (padded) input
  Handle<cudnnTensorDescriptor_t> y_desc_;
  Handle<cudnnFilterDescriptor_t> w_desc_;
  Handle<cudnnConvolutionDescriptor_t> conv_desc_;
  ConvAlgorithm fwd_, bwd_data_, bwd_filter_;
  bool allow_tf32_ = false;
  std::vector<int> refused_[3];  // per pass, the algorithms cuDNN refused when run
  DeviceBuffer<char> workspace_;
  DeviceBuffer<float> filter_;   // OHWI
  DeviceBuffer<float> padded_;   // padded input or input gradient
};

/// y = conv(x, w) + bias (bias [filters] may be null) for the plan's geometry, on the handle's
/// stream. x NHWC, w HWIO, y NHWC as in ConvGeometry.
void conv2d_forward(const CudnnHandle& cudnn, ConvPlan& plan, const float* x, const float* w,
                    const float* bias, float* y);
/// dx = the gradient of the input for dy (NHWC, the output's shape) and filter w (HWIO).
void conv2d_backward_data(const CudnnHandle& cudnn, ConvPlan& plan, const float* dy,
                          const float* w, float* dx);
/// dw (HWIO) = the filter gradient for input x and dy; db [filters] = the sums of dy over batch
/// and positions (skipped when db is null). Both are overwritten.
void conv2d_backward_filter(const CudnnHandle& cudnn, ConvPlan& plan, const float* x,
                            const float* dy, float* dw, float* db);

/// Filter layout conversions: HWIO [h, w, i, o] <-> OHWI [o, h, w, i] (cuDNN's KRSC, the filter
/// layout it takes with NHWC images). `from` and `to` must not overlap. On `stream`.
void hwio_to_ohwi(int h, int w, int i, int o, const float* from, float* to, const Stream& stream);
void ohwi_to_hwio(int h, int w, int i, int o, const float* from, float* to, const Stream& stream);

// ------------------------------------------------------------------------------------------------
// MaxPool2D (gpu/pool.cc)

/// The shape of one max pooling over NHWC images, with padding per side as in ConvGeometry
/// (padding never wins the max).
struct PoolGeometry {
  int batch = 1, height = 1, width = 1, channels = 1;
  int window_h = 2, window_w = 2;
  int stride_h = 2, stride_w = 2;
  int pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;

  int out_height() const { return (height + pad_top + pad_bottom - window_h) / stride_h + 1; }
  int out_width() const { return (width + pad_left + pad_right - window_w) / stride_w + 1; }
};

/// cuDNN's descriptors for one pooling geometry (CUDNN_POOLING_MAX_DETERMINISTIC), and, when
/// there is padding, the -inf padded copy of the input and its gradient: the padding is done
/// explicitly, so no padded position can win whatever cuDNN does at borders. Move-only RAII like
/// ConvPlan; not thread-safe.
class PoolPlan {
 public:
  /// Throws InvalidArgument for a bad geometry (as ConvPlan; also a window entirely in
  /// padding), CudaError when cuDNN rejects it.
  explicit PoolPlan(const PoolGeometry& geometry);

  const PoolGeometry& geometry() const { return geometry_; }

 private:
  friend void max_pool_forward(const CudnnHandle&, PoolPlan&, const float*, float*);
  friend void max_pool_backward(const CudnnHandle&, PoolPlan&, const float*, const float*,
                                const float*, float*);
  void check() const;
  bool padded() const;
  const float* padded_input(const float* x, cudaStream_t stream);

  PoolGeometry geometry_;
  Handle<cudnnTensorDescriptor_t> x_desc_;  // the (padded) input
  Handle<cudnnTensorDescriptor_t> y_desc_;
  Handle<cudnnPoolingDescriptor_t> pool_desc_;
  DeviceBuffer<float> padded_x_;
  DeviceBuffer<float> padded_dx_;
};

/// y = max pooling of x, on the handle's stream.
void max_pool_forward(const CudnnHandle& cudnn, PoolPlan& plan, const float* x, float* y);
/// dx = the input gradient for dy, given the x and y of the forward pass (the gradient goes to
/// each window's maximum; windows that overlap add up). dx is overwritten.
void max_pool_backward(const CudnnHandle& cudnn, PoolPlan& plan, const float* x, const float* y,
                       const float* dy, float* dx);

// ------------------------------------------------------------------------------------------------
// Element-wise ops, loss and metrics (gpu/elementwise.cu)

/// y[i] = max(x[i], 0). x and y may be the same array.
void relu_forward(std::size_t n, const float* x, float* y, const Stream& stream);
/// dx[i] = y[i] > 0 ? dy[i] : 0, from the forward pass's output y (positive exactly where x is).
/// dy and dx may be the same array.
void relu_backward(std::size_t n, const float* y, const float* dy, float* dx,
                   const Stream& stream);

/// y[r, c] += bias[c] for a row-major [rows, cols] y (NHWC images: rows = N*H*W, cols = C).
void bias_add(std::size_t rows, std::size_t cols, const float* bias, float* y,
              const Stream& stream);
/// db[c] = sum over r of dy[r, c] (overwritten), in a fixed order: deterministic.
void bias_grad(std::size_t rows, std::size_t cols, const float* dy, float* db,
               const Stream& stream);

/// Inverted dropout with the CPU path's mask, bit for bit: element i is kept, with mask[i] =
/// 1 / (1 - rate), when the top 24 bits of SplitMix64(key + i * 0x9e3779b97f4a7c15) are
/// >= floor(rate * 2^24), else mask[i] = 0; y = x * mask. `key` is Graph::variable_seed(step seed, layer name).
/// 0 <= rate < 1, else InvalidArgument. x and y may be the same array.
void dropout_forward(std::size_t n, float rate, std::uint64_t key, const float* x, float* y,
                     float* mask, const Stream& stream);
/// dx = dy * mask. dy and dx may be the same array.
void dropout_backward(std::size_t n, const float* mask, const float* dy, float* dx,
                      const Stream& stream);

/// Fused, numerically stable softmax cross-entropy of logits [n, classes] against labels [n]
/// (int32 on the device): writes loss[0] = the mean loss (log-sum-exp with the row max
/// subtracted, summed in double in a fixed order), and, unless grad is null, grad [n, classes] =
/// (softmax - onehot(labels)) / n. A label outside [0, classes) makes the loss NaN (the labels are
/// on the device, so they cannot be checked without a copy). grad must not overlap logits.
/// n and classes must be >= 1. One thread block: meant for a batch's logits, not bulk work.
void softmax_cross_entropy(std::size_t n, std::size_t classes, const float* logits,
                           const std::int32_t* labels, float* loss, float* grad,
                           const Stream& stream);

/// count[0] = the number of rows of logits [n, classes] whose largest value (the first, on ties)
/// is at the label; divide by n for the CPU's accuracy().
void accuracy_count(std::size_t n, std::size_t classes, const float* logits,
                    const std::int32_t* labels, std::int32_t* count, const Stream& stream);

// ------------------------------------------------------------------------------------------------
// Optimizer updates (gpu/update.cu): TensorFlow's formulas, as core/nn/optimizer.cc computes them.
// Each writes (accumulate false) or adds (accumulate true) the update for gradients g scaled by
// grad_scale (from clipping) into out: out = values with accumulate applies the step, out = a
// delta buffer computes what an async worker pushes. Slots (accum, m, v) are updated in place.

/// d = -lr * grad_scale * g.
void sgd_update(std::size_t n, float lr, float grad_scale, const float* g, float* out,
                bool accumulate, const Stream& stream);
/// accum = momentum * accum + g'; d = -lr * accum (Nesterov: -lr * (g' + momentum * accum)),
/// with g' = grad_scale * g.
void momentum_update(std::size_t n, float lr, float momentum, bool nesterov, float grad_scale,
                     const float* g, float* accum, float* out, bool accumulate,
                     const Stream& stream);
/// m = b1 m + (1 - b1) g'; v = b2 v + (1 - b2) g'^2; d = -lr_t * m / (sqrt(v) + epsilon), where
/// the caller computes lr_t = lr * sqrt(1 - b2^t) / (1 - b1^t) for update number t (from 1).
void adam_update(std::size_t n, float lr_t, float beta1, float beta2, float epsilon,
                 float grad_scale, const float* g, float* m, float* v, float* out,
                 bool accumulate, const Stream& stream);

namespace detail {
// Launchers on a raw stream, for the library wrappers above that get their stream from a handle.
void bias_add(cudaStream_t stream, std::size_t rows, std::size_t cols, const float* bias,
              float* y);
void bias_grad(cudaStream_t stream, std::size_t rows, std::size_t cols, const float* dy,
               float* db);
void transpose_filter(cudaStream_t stream, bool to_ohwi, int h, int w, int i, int o,
                      const float* from, float* to);
/// Copies x [n, h, w, c] into the middle of to [n, h + top + bottom, w + left + right, c],
/// filling the border with `value`.
void pad_nhwc(cudaStream_t stream, int n, int h, int w, int c, int top, int bottom, int left,
              int right, float value, const float* x, float* to);
/// The adjoint of pad_nhwc: copies the middle of from [n, h + top + bottom, w + left + right, c]
/// into x [n, h, w, c].
void crop_nhwc(cudaStream_t stream, int n, int h, int w, int c, int top, int bottom, int left,
               int right, const float* from, float* x);
}  // namespace detail

}  // namespace cohort::gpu
