#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/ops/bias_grad.h"
#include "cohort/core/nn/ops/direct_conv.h"
#include "cohort/core/nn/ops/gemm.h"
#include "cohort/core/nn/ops/ops.h"
#include "cohort/core/nn/tensor_eigen.h"
#include "cohort/core/nn/threads.h"

namespace cohort {
namespace {

using ops_detail::gemm;

using UnalignedMap = Eigen::Map<Matrix>;
using ConstUnalignedMap = Eigen::Map<const Matrix>;
using ConstRowMap = Eigen::Map<const Eigen::RowVectorXf>;
using RowMap = Eigen::Map<Eigen::RowVectorXf>;

}  // namespace

Conv2D::Conv2D(std::string name, Options options)
    : name_(std::move(name)), options_(options) {
  const Options& o = options_;
  if (o.filters < 1 || o.kernel_h < 1 || o.kernel_w < 1 || o.stride_h < 1 || o.stride_w < 1)
    throw InvalidArgument("Conv2D \"" + name_ + "\": filters " + std::to_string(o.filters) +
                          ", kernel " + std::to_string(o.kernel_h) + "x" +
                          std::to_string(o.kernel_w) + ", stride " + std::to_string(o.stride_h) +
                          "x" + std::to_string(o.stride_w) + ": each must be >= 1");
  if (o.dilation_h < 1 || o.dilation_w < 1)
    throw InvalidArgument("Conv2D \"" + name_ + "\": dilation " + std::to_string(o.dilation_h) +
                          "x" + std::to_string(o.dilation_w) + ": each must be >= 1");
}

Shape Conv2D::build(Graph& graph, const Shape& input) {
  if (input.size() != 3 || input[2] < 1)
    throw InvalidArgument("Conv2D \"" + name_ + "\": input " + to_string(input) +
                          " is not [height, width, channels]");
  if (options_.padding == Padding::kCausal && options_.kernel_h != 1)
    throw InvalidArgument("Conv2D \"" + name_ + "\": causal padding is for sequences (Conv1D, or a "
                          "filter one row high); this filter is " +
                          std::to_string(options_.kernel_h) + "x" +
                          std::to_string(options_.kernel_w));
  geometry_ = conv_geometry("Conv2D", name_, input, options_.kernel_h, options_.kernel_w,
                            options_.stride_h, options_.stride_w, options_.padding,
                            options_.dilation_h, options_.dilation_w);
  const im2col::Geometry& g = geometry_;
  pointwise_ = g.kernel_h == 1 && g.kernel_w == 1 && g.stride_h == 1 && g.stride_w == 1;
  // Patch rows copy kw * in contiguous floats at a time (in at a time when dilated); below a
  // 16-float vector that is mostly loop overhead, and the tap-major layout copies whole output
  // rows instead.
  const std::int64_t row_copy = g.dilation_w == 1 ? g.kernel_w * g.in_c : g.in_c;
  patch_columns_ = !pointwise_ && row_copy < 16;
  direct_ = !pointwise_ && options_.algorithm != Options::Algorithm::kIm2col &&
            direct_conv::suitable(g, options_.filters);
  winograd_.reset();
  // Winograd's transforms assume adjacent taps.
  const bool winograd_fits = g.dilation_h == 1 && g.dilation_w == 1 &&
                             winograd::Convolution::suitable(g, options_.filters);
  if (options_.algorithm == Options::Algorithm::kWinograd && !winograd_fits)
    throw InvalidArgument("Conv2D \"" + name_ + "\": Winograd needs stride 1, no dilation, a 3x3 "
                          "or 5x5 filter and >= 8 channels in and out; input " + to_string(input));
  if (options_.algorithm != Options::Algorithm::kIm2col && winograd_fits)
    winograd_.emplace(g, options_.filters);
  graph_ = &graph;
  kernel_offset_ =
      graph.get_variable(name_ + "/kernel", {g.kernel_h, g.kernel_w, g.in_c, options_.filters},
                         options_.kernel_initializer, VariableOptions{.decay = true})
          .offset;
  if (options_.use_bias) {
    bias_offset_ = graph.get_variable(name_ + "/bias", {options_.filters}, Initializer::zeros()).offset;
  } else {
    no_bias_.assign(static_cast<std::size_t>(options_.filters), 0.0f);
    bias_sink_.assign(static_cast<std::size_t>(options_.filters), 0.0f);
  }
  return {g.out_h, g.out_w, options_.filters};
}

Conv2D::Plan Conv2D::plan(std::int64_t n) const {
  // One chunk's column buffer should stay in L2; with several threads each takes a share of the
  // chunks (and the products in them run single-threaded), so the chunk count is a multiple of
  // the thread count where the batch allows.
  std::int64_t largest = n;
  if (!pointwise_) {
    const std::int64_t bytes_per_image = geometry_.rows_per_image() *
                                         std::max(geometry_.patch(), options_.filters) *
                                         std::int64_t{sizeof(float)};
    largest = std::max<std::int64_t>(1, im2col::kChunkBytes / bytes_per_image);
  }
  const std::int64_t threads = std::max<std::int64_t>(1, intra_op_threads());
  const std::int64_t per_thread = (n + threads - 1) / threads;
  const std::int64_t chunks_per_thread = (per_thread + largest - 1) / largest;
  Plan p;
  p.chunk = std::max<std::int64_t>(1, (per_thread + chunks_per_thread - 1) / chunks_per_thread);
  p.chunks = (n + p.chunk - 1) / p.chunk;
  p.threads = static_cast<int>(std::min(threads, p.chunks));
  return p;
}

void Conv2D::forward(const Tensor& input, Tensor& output, const OpContext&) {
  const im2col::Geometry& g = geometry_;
  const std::int64_t n = input.dim(0), f = options_.filters, patch = g.patch();
  const float* values = graph_->values().data();
  const float* kernel = values + kernel_offset_;
  ConstRowMap bias_row(bias(values), f);
  output.resize({n, g.out_h, g.out_w, f});
  if (winograd_) {
    winograd_->forward(input.data(), n, values + kernel_offset_, bias(values),
                       options_.activation == Activation::kRelu, output.data(),
                       std::max(1, intra_op_threads()));
    return;
  }
  const Plan p = plan(n);
  const std::int64_t column_size =
      pointwise_ || direct_ ? 0 : p.chunk * g.rows_per_image() * patch;
  const std::int64_t padded_size = direct_ ? direct_conv::scratch_size(g) : 0;
  columns_.resize({p.threads * column_size});
  padded_.resize({p.threads * padded_size});

#pragma omp parallel for num_threads(p.threads) schedule(static) if (p.threads > 1)
  for (std::int64_t i = 0; i < p.chunks; ++i) {
    const std::int64_t b0 = i * p.chunk;
    const std::int64_t count = std::min(p.chunk, n - b0);
    const std::int64_t rows = count * g.rows_per_image();
    const float* images = input.data() + b0 * g.image_size();
    float* columns = columns_.data() + intra_op_thread_index() * column_size;
    float* out = output.data() + b0 * g.rows_per_image() * f;
    if (direct_) {
      direct_conv::forward(g, f, images, count, kernel, bias(values),
                           options_.activation == Activation::kRelu, out,
                           padded_.data() + intra_op_thread_index() * padded_size);
      continue;
    }
    UnalignedMap y(out, rows, f);
    // The product accumulates onto the broadcast bias; the activation then runs over a block
    // that is still in cache.
    y.rowwise() = bias_row;
    if (pointwise_) {
      gemm(false, false, rows, f, patch, images, kernel, 1.0f, out);
    } else if (patch_columns_) {
      im2col::to_columns(g, images, count, columns);
      gemm(true, false, rows, f, patch, columns, kernel, 1.0f, out);
    } else {
      im2col::to_rows(g, images, count, columns);
      gemm(false, false, rows, f, patch, columns, kernel, 1.0f, out);
    }
    if (options_.activation == Activation::kRelu) y = y.cwiseMax(0.0f);
  }
}

void Conv2D::backward(const Tensor& input, const Tensor& output, const Tensor& grad_output,
                      Tensor* grad_input, std::span<float> grads) {
  const im2col::Geometry& g = geometry_;
  const std::int64_t n = input.dim(0), f = options_.filters, patch = g.patch();
  const float* kernel = graph_->values().data() + kernel_offset_;
  const bool relu = options_.activation == Activation::kRelu;
  if (grad_input != nullptr) grad_input->resize(input.shape());
  if (winograd_) {
    winograd_->backward(input.data(), n, graph_->values().data() + kernel_offset_, output.data(),
                        grad_output.data(), relu,
                        grad_input != nullptr ? grad_input->data() : nullptr,
                        grads.data() + kernel_offset_, bias_grad(grads.data()),
                        std::max(1, intra_op_threads()));
    return;
  }
  const Plan p = plan(n);
  // The direct kernels give the filter gradient; an input gradient takes im2col's columns.
  const bool direct = direct_ && grad_input == nullptr;
  const std::int64_t column_size =
      pointwise_ || direct ? 0 : p.chunk * g.rows_per_image() * patch;
  const std::int64_t padded_size = direct ? p.chunk * direct_conv::scratch_size(g) : 0;
  const std::int64_t grad_pre_size = relu ? p.chunk * g.rows_per_image() * f : 0;
  columns_.resize({p.threads * column_size});
  padded_.resize({p.threads * padded_size});
  grad_pre_.resize({p.threads * grad_pre_size});
  // Threads after the first accumulate their filter and bias gradients apart, summed at the end.
  const std::int64_t partial_size = patch * f + f;
  partials_.resize({(p.threads - 1) * partial_size});

#pragma omp parallel num_threads(p.threads) if (p.threads > 1)
  {
    const std::int64_t t = intra_op_thread_index();
    float* grad_kernel = t == 0 ? grads.data() + kernel_offset_ : partials_.data() + (t - 1) * partial_size;
    float* grad_bias = t == 0 ? bias_grad(grads.data()) : grad_kernel + patch * f;
    float* columns_data = columns_.data() + t * column_size;
    float* grad_pre = grad_pre_.data() + t * grad_pre_size;
    bool first = true;
    // Chunk by chunk, while its columns are in cache: the bias and filter gradients accumulate,
    // then the column gradient overwrites the columns and is folded back onto the input
    // gradient.
#pragma omp for schedule(static)
    for (std::int64_t i = 0; i < p.chunks; ++i) {
      const std::int64_t b0 = i * p.chunk;
      const std::int64_t count = std::min(p.chunk, n - b0);
      const std::int64_t rows = count * g.rows_per_image();
      const std::int64_t out_offset = b0 * g.rows_per_image() * f;
      ops_detail::relu_and_bias_grad(grad_output.data() + out_offset, output.data() + out_offset,
                                     grad_pre, rows, f, relu, grad_bias, !first);
      const float* dz = relu ? grad_pre : grad_output.data() + out_offset;
      const float* images = input.data() + b0 * g.image_size();
      float* dx = grad_input != nullptr ? grad_input->data() + b0 * g.image_size() : nullptr;
      const float beta = first ? 0.0f : 1.0f;
      if (direct) {
        if (first) std::fill_n(grad_kernel, patch * f, 0.0f);
        direct_conv::add_kernel_grad(g, f, images, count, dz, grad_kernel,
                                     padded_.data() + t * padded_size);
      } else if (pointwise_) {
        gemm(true, false, patch, f, rows, images, dz, beta, grad_kernel);
        if (dx != nullptr) gemm(false, true, rows, patch, f, dz, kernel, 0.0f, dx);
      } else if (patch_columns_) {
        im2col::to_columns(g, images, count, columns_data);
        gemm(false, false, patch, f, rows, columns_data, dz, beta, grad_kernel);
        if (dx != nullptr) {
          gemm(false, true, patch, rows, f, kernel, dz, 0.0f, columns_data);
          std::memset(dx, 0, static_cast<std::size_t>(count * g.image_size()) * sizeof(float));
          im2col::add_columns(g, columns_data, count, dx);
        }
      } else {
        im2col::to_rows(g, images, count, columns_data);
        gemm(true, false, patch, f, rows, columns_data, dz, beta, grad_kernel);
        if (dx != nullptr) {
          gemm(false, true, rows, patch, f, dz, kernel, 0.0f, columns_data);
          std::memset(dx, 0, static_cast<std::size_t>(count * g.image_size()) * sizeof(float));
          im2col::add_rows(g, columns_data, count, dx);
        }
      }
      first = false;
    }
    if (first) {  // no chunk came this thread's way
      std::fill_n(grad_kernel, patch * f, 0.0f);
      std::fill_n(grad_bias, f, 0.0f);
    }
  }
  if (p.threads > 1) {
    UnalignedMap grad_kernel(grads.data() + kernel_offset_, patch, f);
    RowMap grad_bias(bias_grad(grads.data()), f);
    for (int t = 1; t < p.threads; ++t) {
      const float* partial = partials_.data() + (t - 1) * partial_size;
      grad_kernel += ConstUnalignedMap(partial, patch, f);
      grad_bias += ConstRowMap(partial + patch * f, f);
    }
  }
}

double Conv2D::flops_per_example() const {
  const double outputs = static_cast<double>(geometry_.rows_per_image() * options_.filters);
  const double gemm = 2.0 * outputs * static_cast<double>(geometry_.patch());
  return 3.0 * gemm + 2.0 * outputs;  // + bias and its gradient
}

double Conv2D::input_grad_flops_per_example() const {
  return 2.0 * static_cast<double>(geometry_.rows_per_image() * options_.filters) *
         static_cast<double>(geometry_.patch());
}

}  // namespace cohort
