#include "cohort/core/nn/ops/upsampling.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/ops/bias_grad.h"
#include "cohort/core/nn/ops/gemm.h"
#include "cohort/core/nn/ops/parallel.h"
#include "cohort/core/nn/ops/resize.h"
#include "cohort/core/nn/threads.h"

namespace cohort {
namespace {

using ops_detail::gemm;

// "<kind> \"<name>\": input [..] is not [height, width, channels]" (or [steps, channels]).
std::string shape_error(const char* kind, const std::string& name, const Shape& input,
                        bool sequences = false) {
  return std::string(kind) + " \"" + name + "\": input " + to_string(input) + " is not " +
         (sequences ? "[steps, channels]" : "[height, width, channels]");
}

// The input of a layer's 2-D form (`sequences` false: an image [H, W, C]) or 1-D form (a sequence
// [T, C], seen as the image [T, 1, C]), as an image; InvalidArgument naming the layer otherwise.
Shape as_image(const char* kind, const std::string& name, const Shape& input, bool sequences) {
  const Shape image = sequences && input.size() == 2 ? Shape{input[0], 1, input[1]} : input;
  if ((sequences && input.size() != 2) || image.size() != 3 || image[0] < 1 || image[1] < 1 ||
      image[2] < 1)
    throw InvalidArgument(shape_error(kind, name, input, sequences));
  return image;
}

}  // namespace

Conv2DTranspose::Conv2DTranspose(std::string name, Options options)
    : name_(std::move(name)), options_(options) {
  const Options& o = options_;
  const auto pair = [](std::int64_t h, std::int64_t w) {
    return std::to_string(h) + "x" + std::to_string(w);
  };
  if (o.filters < 1 || o.kernel_h < 1 || o.kernel_w < 1 || o.stride_h < 1 || o.stride_w < 1 ||
      o.dilation_h < 1 || o.dilation_w < 1)
    throw InvalidArgument("Conv2DTranspose \"" + name_ + "\": filters " +
                          std::to_string(o.filters) + ", kernel " + pair(o.kernel_h, o.kernel_w) +
                          ", stride " + pair(o.stride_h, o.stride_w) + ", dilation " +
                          pair(o.dilation_h, o.dilation_w) + ": each must be >= 1");
  if (o.padding == Padding::kCausal)
    throw InvalidArgument("Conv2DTranspose \"" + name_ + "\": padding is SAME or VALID, not causal");
  if (o.output_padding_h.has_value() != o.output_padding_w.has_value())
    throw InvalidArgument("Conv2DTranspose \"" + name_ +
                          "\": output_padding is set for one axis only; set both or neither");
  if (o.output_padding_h &&
      (*o.output_padding_h < 0 || *o.output_padding_h >= o.stride_h || *o.output_padding_w < 0 ||
       *o.output_padding_w >= o.stride_w))
    throw InvalidArgument("Conv2DTranspose \"" + name_ + "\": output_padding " +
                          pair(*o.output_padding_h, *o.output_padding_w) +
                          ": each must be >= 0 and less than the stride " +
                          pair(o.stride_h, o.stride_w));
}

Shape Conv2DTranspose::build(Graph& graph, const Shape& input) {
  if (input.size() != 3 || input[0] < 1 || input[1] < 1 || input[2] < 1)
    throw InvalidArgument(shape_error("Conv2DTranspose", name_, input));
  const Options& o = options_;
  const bool same = o.padding == Padding::kSame;
  // Keras's output size. The convolution from it back to the input's size then has the input's
  // size exactly (SAME: ceil(out / stride) = in; VALID: (out - k') / stride + 1 = in), but for
  // an output_padding that Keras takes and TensorFlow then refuses (checked below).
  auto out_size = [&](std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t d,
                      std::optional<std::int64_t> output_padding) {
    const std::int64_t extent = (k - 1) * d + 1;
    if (output_padding) return (in - 1) * s + extent - 2 * (same ? extent / 2 : 0) + *output_padding;
    return same ? in * s : in * s + std::max<std::int64_t>(extent - s, 0);
  };
  const Shape out = {out_size(input[0], o.kernel_h, o.stride_h, o.dilation_h, o.output_padding_h),
                     out_size(input[1], o.kernel_w, o.stride_w, o.dilation_w, o.output_padding_w),
                     o.filters};
  const auto refused = [&](const std::string& why) {
    return InvalidArgument("Conv2DTranspose \"" + name_ + "\": output_padding " +
                           std::to_string(o.output_padding_h.value_or(-1)) + "x" +
                           std::to_string(o.output_padding_w.value_or(-1)) + " gives input " +
                           to_string(input) + " the output " + to_string(out) + ", " + why);
  };
  if (out[0] < 1 || out[1] < 1) throw refused("which has no pixels");
  geometry_ = conv_geometry("Conv2DTranspose", name_, out, o.kernel_h, o.kernel_w, o.stride_h,
                            o.stride_w, o.padding, o.dilation_h, o.dilation_w);
  const im2col::Geometry& g = geometry_;
  if (g.out_h != input[0] || g.out_w != input[1])
    throw refused("from which its convolution gives " + std::to_string(g.out_h) + "x" +
                  std::to_string(g.out_w) + ", not the input's " + std::to_string(input[0]) +
                  "x" + std::to_string(input[1]));
  in_c_ = input[2];
  const std::int64_t bytes_per_image =
      g.rows_per_image() * std::max(g.patch(), in_c_) * std::int64_t{sizeof(float)};
  chunk_ = std::max<std::int64_t>(1, im2col::kChunkBytes / bytes_per_image);
  graph_ = &graph;
  kernel_offset_ = graph.get_variable(name_ + "/kernel", {g.kernel_h, g.kernel_w, g.in_c, in_c_},
                                      options_.kernel_initializer, VariableOptions{.decay = true})
                       .offset;
  bias_offset_ = graph.get_variable(name_ + "/bias", {g.in_c}, Initializer::zeros()).offset;
  return {g.in_h, g.in_w, g.in_c};
}

void Conv2DTranspose::forward(const Tensor& input, Tensor& output, const OpContext&) {
  const im2col::Geometry& g = geometry_;
  const std::int64_t n = input.dim(0), in_c = input.dim(3), patch = g.patch();
  const float* values = graph_->values().data();
  const float* kernel = values + kernel_offset_;  // [patch, in_c]
  const float* bias = values + bias_offset_;
  output.resize({n, g.in_h, g.in_w, g.in_c});
  const std::int64_t column_size = chunk_ * g.rows_per_image() * patch;
  columns_.resize({ops_detail::range_threads(n, chunk_) * column_size});
  const bool relu = options_.activation == Activation::kRelu;
  // The images shared out over the threads, each thread's chunk by chunk.
  ops_detail::in_ranges(
      n,
      [&](std::int64_t first, std::int64_t images) {
        float* columns = columns_.data() + intra_op_thread_index() * column_size;
        for (std::int64_t b0 = first; b0 < first + images; b0 += chunk_) {
          const std::int64_t count = std::min(chunk_, first + images - b0);
          float* out = output.data() + b0 * g.image_size();
          // Each input pixel's contribution to every tap of its window, then the windows summed
          // onto the output (col2im): Conv2D's input gradient.
          gemm(false, true, count * g.rows_per_image(), patch, in_c,
               input.data() + b0 * g.rows_per_image() * in_c, kernel, 0.0f, columns);
          std::memset(out, 0, static_cast<std::size_t>(count * g.image_size()) * sizeof(float));
          im2col::add_rows(g, columns, count, out);
          for (std::int64_t p = 0; p < count * g.in_h * g.in_w; ++p) {
            float* pixel = out + p * g.in_c;
            for (std::int64_t c = 0; c < g.in_c; ++c) {
              const float v = pixel[c] + bias[c];
              pixel[c] = relu && v < 0.0f ? 0.0f : v;
            }
          }
        }
      },
      chunk_);
}

void Conv2DTranspose::backward(const Tensor& input, const Tensor& output,
                               const Tensor& grad_output, Tensor* grad_input,
                               std::span<float> grads) {
  const im2col::Geometry& g = geometry_;
  const std::int64_t n = input.dim(0), in_c = input.dim(3), patch = g.patch();
  const float* kernel = graph_->values().data() + kernel_offset_;
  float* grad_kernel = grads.data() + kernel_offset_;
  const bool relu = options_.activation == Activation::kRelu;
  // The bias's gradient, and the pre-activation gradient where a ReLU is fused.
  const std::int64_t pixels = n * g.in_h * g.in_w;
  if (relu) grad_pre_.resize({pixels * g.in_c});
  ops_detail::relu_and_bias_grad(grad_output.data(), output.data(), grad_pre_.data(), pixels,
                                 g.in_c, relu, grads.data() + bias_offset_, false);
  const float* dz = relu ? grad_pre_.data() : grad_output.data();
  if (grad_input != nullptr) grad_input->resize(input.shape());
  const std::int64_t column_size = chunk_ * g.rows_per_image() * patch;
  columns_.resize({ops_detail::range_threads(n, chunk_) * column_size});
  // The images shared out over the threads, each thread's chunk by chunk: the output gradient's
  // windows (im2col, Conv2D's forward), then the kernel's gradient (summed over the threads) and
  // the input's from the same columns.
  ops_detail::summed_over_ranges(
      n, grad_kernel, patch * in_c, partials_,
      [&](std::int64_t first, std::int64_t images, float* kernel_sum) {
        float* columns = columns_.data() + intra_op_thread_index() * column_size;
        for (std::int64_t b0 = first; b0 < first + images; b0 += chunk_) {
          const std::int64_t count = std::min(chunk_, first + images - b0);
          const std::int64_t rows = count * g.rows_per_image();
          im2col::to_rows(g, dz + b0 * g.image_size(), count, columns);
          const float* x = input.data() + b0 * g.rows_per_image() * in_c;
          gemm(true, false, patch, in_c, rows, columns, x, 1.0f, kernel_sum);
          if (grad_input != nullptr)
            gemm(false, false, rows, in_c, patch, columns, kernel, 0.0f,
                 grad_input->data() + b0 * g.rows_per_image() * in_c);
        }
      },
      chunk_);
}

double Conv2DTranspose::flops_per_example() const {
  return 3.0 * input_grad_flops_per_example() +
         2.0 * static_cast<double>(geometry_.image_size());  // + bias and its gradient
}

double Conv2DTranspose::input_grad_flops_per_example() const {
  return 2.0 * static_cast<double>(geometry_.rows_per_image() * geometry_.patch() * in_c_);
}

UpSampling2D::UpSampling2D(std::string name, std::int64_t size_h, std::int64_t size_w,
                           Interpolation interpolation, bool sequences)
    : name_(std::move(name)), size_h_(size_h), size_w_(size_w), interpolation_(interpolation),
      sequences_(sequences) {
  if (size_h < 1 || size_w < 1 || (sequences && size_w != 1))
    throw InvalidArgument(std::string(kind()) + " \"" + name_ + "\": size " +
                          (sequences ? std::to_string(size_h)
                                     : std::to_string(size_h) + "x" + std::to_string(size_w)) +
                          ": " + (size_h < 1 || size_w < 1 ? "must be >= 1" : "a sequence has no width"));
}

const char* UpSampling2D::kind() const { return sequences_ ? "UpSampling1D" : "UpSampling2D"; }

Shape UpSampling2D::build(Graph&, const Shape& input) {
  const Shape image = as_image(kind(), name_, input, sequences_);
  h_ = image[0];
  w_ = image[1];
  c_ = image[2];
  const auto taps = interpolation_ == Interpolation::kBilinear ? ops_detail::linear_taps
                                                               : ops_detail::nearest_taps;
  const ops_detail::ResizeTaps rows = taps(h_, h_ * size_h_), columns = taps(w_, w_ * size_w_);
  // Each output pixel's reads: the product of its row's taps and its column's.
  reads_.clear();
  for (std::int64_t y = 0; y < h_ * size_h_; ++y)
    for (std::int64_t x = 0; x < w_ * size_w_; ++x) {
      Reads r;
      const std::int64_t ys[2] = {rows.low[y], rows.high[y]};
      const std::int64_t xs[2] = {columns.low[x], columns.high[x]};
      const float wy[2] = {1.0f - rows.weight[y], rows.weight[y]};
      const float wx[2] = {1.0f - columns.weight[x], columns.weight[x]};
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j)
          if (wy[i] * wx[j] != 0.0f) {
            r.pixel[r.count] = ys[i] * w_ + xs[j];
            r.weight[r.count++] = wy[i] * wx[j];
          }
      reads_.push_back(r);
    }
  if (sequences_) return {h_ * size_h_, c_};
  return {h_ * size_h_, w_ * size_w_, c_};
}

void UpSampling2D::forward(const Tensor& input, Tensor& output, const OpContext&) {
  const std::int64_t n = input.dim(0), out_h = h_ * size_h_, out_w = w_ * size_w_;
  if (sequences_) output.resize({n, out_h, c_});
  else output.resize({n, out_h, out_w, c_});
  ops_detail::in_ranges(
      n,
      [&](std::int64_t first, std::int64_t images) {
        for (std::int64_t b = first; b < first + images; ++b) {
          const float* in = input.data() + b * h_ * w_ * c_;
          float* out = output.data() + b * out_h * out_w * c_;
          for (const Reads& r : reads_) {
            const float* p = in + r.pixel[0] * c_;
            for (std::int64_t c = 0; c < c_; ++c) out[c] = r.weight[0] * p[c];
            for (int t = 1; t < r.count; ++t) {
              p = in + r.pixel[t] * c_;
              for (std::int64_t c = 0; c < c_; ++c) out[c] += r.weight[t] * p[c];
            }
            out += c_;
          }
        }
      },
      1);
}

void UpSampling2D::backward(const Tensor& input, const Tensor&, const Tensor& grad_output,
                            Tensor* grad_input, std::span<float>) {
  if (grad_input == nullptr) return;
  const std::int64_t n = input.dim(0), out_h = h_ * size_h_, out_w = w_ * size_w_;
  grad_input->resize(input.shape());
  grad_input->set_zero();
  // Each image's outputs, in order, back onto the pixels they read.
  ops_detail::in_ranges(
      n,
      [&](std::int64_t first, std::int64_t images) {
        for (std::int64_t b = first; b < first + images; ++b) {
          const float* dy = grad_output.data() + b * out_h * out_w * c_;
          float* dx = grad_input->data() + b * h_ * w_ * c_;
          for (const Reads& r : reads_) {
            for (int t = 0; t < r.count; ++t) {
              float* d = dx + r.pixel[t] * c_;
              for (std::int64_t c = 0; c < c_; ++c) d[c] += r.weight[t] * dy[c];
            }
            dy += c_;
          }
        }
      },
      1);
}

Reframe2D::Reframe2D(std::string name, Border border, int sign, bool sequences)
    : name_(std::move(name)), border_(border), sign_(sign), sequences_(sequences) {
  if (border.top < 0 || border.bottom < 0 || border.left < 0 || border.right < 0)
    throw InvalidArgument(std::string(kind()) + " \"" + name_ + "\": " +
                          (sequences ? "before and after" : "top, bottom, left and right") +
                          " must be >= 0");
  if (sequences && (border.left != 0 || border.right != 0))
    throw InvalidArgument(std::string(kind()) + " \"" + name_ + "\": a sequence has no width to " +
                          (sign > 0 ? "pad" : "crop"));
}

const char* Reframe2D::kind() const {
  if (sign_ > 0) return sequences_ ? "ZeroPadding1D" : "ZeroPadding2D";
  return sequences_ ? "Cropping1D" : "Cropping2D";
}

Shape Reframe2D::build(Graph&, const Shape& input) {
  const Shape image = as_image(kind(), name_, input, sequences_);
  in_ = image;
  out_ = {image[0] + sign_ * (border_.top + border_.bottom),
          image[1] + sign_ * (border_.left + border_.right), image[2]};
  if (out_[0] < 1 || out_[1] < 1) {
    const std::string rows = std::to_string(border_.top) + "+" + std::to_string(border_.bottom);
    const std::string columns = std::to_string(border_.left) + "+" + std::to_string(border_.right);
    throw InvalidArgument(std::string(kind()) + " \"" + name_ + "\": cropping " +
                          (sequences_ ? rows + " steps" : rows + " rows and " + columns + " columns") +
                          " leaves nothing of input " + to_string(input));
  }
  if (sequences_) return {out_[0], out_[2]};
  return out_;
}

namespace {

// Copies each image of `from` [n, fh, fw, c] into `to` [n, th, tw, c] at row `top`, column `left`
// of the larger one: `to` larger when `into` (its frame zeroed first), else `from` larger and the
// window at (top, left) of it read.
void copy_window(const float* from, const Shape& from_shape, float* to, const Shape& to_shape,
                 std::int64_t n, std::int64_t top, std::int64_t left, bool into) {
  const Shape& small = into ? from_shape : to_shape;
  const Shape& large = into ? to_shape : from_shape;
  const std::int64_t c = small[2];
  const std::size_t row_bytes = static_cast<std::size_t>(small[1] * c) * sizeof(float);
  if (into)
    std::fill_n(to, n * large[0] * large[1] * c, 0.0f);
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t y = 0; y < small[0]; ++y) {
      const std::int64_t small_at = ((b * small[0]) + y) * small[1] * c;
      const std::int64_t large_at = ((b * large[0] + top + y) * large[1] + left) * c;
      if (into) std::memcpy(to + large_at, from + small_at, row_bytes);
      else std::memcpy(to + small_at, from + large_at, row_bytes);
    }
}

}  // namespace

void Reframe2D::forward(const Tensor& input, Tensor& output, const OpContext&) {
  const std::int64_t n = input.dim(0);
  if (sequences_) output.resize({n, out_[0], out_[2]});
  else output.resize({n, out_[0], out_[1], out_[2]});
  copy_window(input.data(), in_, output.data(), out_, n, border_.top, border_.left, sign_ > 0);
}

void Reframe2D::backward(const Tensor& input, const Tensor&, const Tensor& grad_output,
                         Tensor* grad_input, std::span<float>) {
  if (grad_input == nullptr) return;
  const std::int64_t n = input.dim(0);
  grad_input->resize(input.shape());
  copy_window(grad_output.data(), out_, grad_input->data(), in_, n, border_.top, border_.left,
              sign_ < 0);
}

std::unique_ptr<Layer> conv2d_transpose(std::string name, std::int64_t filters,
                                        std::int64_t kernel, Activation activation,
                                        std::int64_t stride, Padding padding) {
  Conv2DTranspose::Options options;
  options.filters = filters;
  options.kernel_h = options.kernel_w = kernel;
  options.stride_h = options.stride_w = stride;
  options.padding = padding;
  options.activation = activation;
  return std::make_unique<Conv2DTranspose>(std::move(name), options);
}

std::unique_ptr<Layer> upsampling2d(std::string name, std::int64_t size,
                                    Interpolation interpolation) {
  return std::make_unique<UpSampling2D>(std::move(name), size, size, interpolation);
}

std::unique_ptr<Layer> upsampling1d(std::string name, std::int64_t size,
                                    Interpolation interpolation) {
  return std::make_unique<UpSampling2D>(std::move(name), size, 1, interpolation,
                                        /*sequences=*/true);
}

std::unique_ptr<Layer> zero_padding1d(std::string name, std::int64_t before, std::int64_t after) {
  return std::make_unique<Reframe2D>(std::move(name), Border{before, after, 0, 0}, +1, /*sequences=*/true);
}

std::unique_ptr<Layer> cropping1d(std::string name, std::int64_t before, std::int64_t after) {
  return std::make_unique<Reframe2D>(std::move(name), Border{before, after, 0, 0}, -1, /*sequences=*/true);
}

std::unique_ptr<Layer> zero_padding2d(std::string name, Border border) {
  return std::make_unique<Reframe2D>(std::move(name), border, +1);
}

std::unique_ptr<Layer> cropping2d(std::string name, Border border) {
  return std::make_unique<Reframe2D>(std::move(name), border, -1);
}

}  // namespace cohort
