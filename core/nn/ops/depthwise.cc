#include "cohort/core/nn/ops/depthwise.h"

#include <algorithm>
#include <string>
#include <utility>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/ops/bias_grad.h"
#include "cohort/core/nn/ops/parallel.h"
#include "cohort/core/nn/threads.h"

namespace cohort {

DepthwiseConv2D::DepthwiseConv2D(std::string name, Options options)
    : name_(std::move(name)), options_(options) {
  const Options& o = options_;
  const auto pair = [](std::int64_t h, std::int64_t w) {
    return std::to_string(h) + "x" + std::to_string(w);
  };
  if (o.kernel_h < 1 || o.kernel_w < 1 || o.stride_h < 1 || o.stride_w < 1 ||
      o.dilation_h < 1 || o.dilation_w < 1 || o.depth_multiplier < 1)
    throw InvalidArgument("DepthwiseConv2D \"" + name_ + "\": kernel " +
                          pair(o.kernel_h, o.kernel_w) + ", stride " + pair(o.stride_h, o.stride_w) +
                          ", dilation " + pair(o.dilation_h, o.dilation_w) + ", depth multiplier " +
                          std::to_string(o.depth_multiplier) + ": each must be >= 1");
  if (o.padding == Padding::kCausal)
    throw InvalidArgument("DepthwiseConv2D \"" + name_ + "\": padding is SAME or VALID, not causal");
}

Shape DepthwiseConv2D::build(Graph& graph, const Shape& input) {
  if (input.size() != 3 || input[0] < 1 || input[1] < 1 || input[2] < 1)
    throw InvalidArgument("DepthwiseConv2D \"" + name_ + "\": input " + to_string(input) +
                          " is not [height, width, channels]");
  geometry_ = conv_geometry("DepthwiseConv2D", name_, input, options_.kernel_h, options_.kernel_w,
                            options_.stride_h, options_.stride_w, options_.padding,
                            options_.dilation_h, options_.dilation_w);
  const im2col::Geometry& g = geometry_;
  const std::int64_t channels = g.in_c * options_.depth_multiplier;
  graph_ = &graph;
  kernel_offset_ =
      graph.get_variable(name_ + "/kernel", {g.kernel_h, g.kernel_w, g.in_c, options_.depth_multiplier},
                         options_.kernel_initializer, VariableOptions{.decay = true})
          .offset;
  bias_offset_ = options_.use_bias
                     ? graph.get_variable(name_ + "/bias", {channels}, Initializer::zeros()).offset
                     : -1;
  return {g.out_h, g.out_w, channels};
}

namespace {

// For each tap of the window of output pixel (oy, ox) that falls inside the image: f(tap, input
// pixel), both as flat indices (the tap i * kw + j; the pixel iy * in_w + ix of its image).
template <typename F>
void for_each_tap(const im2col::Geometry& g, std::int64_t oy, std::int64_t ox, F&& f) {
  for (std::int64_t i = 0; i < g.kernel_h; ++i) {
    const std::int64_t iy = oy * g.stride_h - g.pad_top + i * g.dilation_h;
    if (iy < 0 || iy >= g.in_h) continue;
    for (std::int64_t j = 0; j < g.kernel_w; ++j) {
      const std::int64_t ix = ox * g.stride_w - g.pad_left + j * g.dilation_w;
      if (ix < 0 || ix >= g.in_w) continue;
      f(i * g.kernel_w + j, iy * g.in_w + ix);
    }
  }
}

}  // namespace

void DepthwiseConv2D::forward(const Tensor& input, Tensor& output, const OpContext&) {
  const im2col::Geometry& g = geometry_;
  const std::int64_t n = input.dim(0), c_in = g.in_c, m_count = options_.depth_multiplier;
  const std::int64_t channels = c_in * m_count;
  const float* values = graph_->values().data();
  const float* kernel = values + kernel_offset_;  // [taps, C, M]
  const float* bias = bias_offset_ >= 0 ? values + bias_offset_ : nullptr;
  const bool relu = options_.activation == Activation::kRelu;
  output.resize({n, g.out_h, g.out_w, channels});
  // The images shared out over the threads.
  ops_detail::in_ranges(
      n,
      [&](std::int64_t first, std::int64_t images) {
        for (std::int64_t b = first; b < first + images; ++b) {
          const float* image = input.data() + b * g.image_size();
          for (std::int64_t oy = 0; oy < g.out_h; ++oy)
            for (std::int64_t ox = 0; ox < g.out_w; ++ox) {
              float* out = output.data() + ((b * g.out_h + oy) * g.out_w + ox) * channels;
              for (std::int64_t q = 0; q < channels; ++q) out[q] = bias != nullptr ? bias[q] : 0.0f;
              for_each_tap(g, oy, ox, [&](std::int64_t tap, std::int64_t pixel) {
                const float* x = image + pixel * c_in;
                const float* k = kernel + tap * channels;
                if (m_count == 1) {  // one filter per channel (MobileNet's): contiguous, vectorised
                  for (std::int64_t c = 0; c < c_in; ++c) out[c] += x[c] * k[c];
                  return;
                }
                for (std::int64_t c = 0; c < c_in; ++c)
                  for (std::int64_t m = 0; m < m_count; ++m) out[c * m_count + m] += x[c] * k[c * m_count + m];
              });
              if (relu)
                for (std::int64_t q = 0; q < channels; ++q) out[q] = std::max(out[q], 0.0f);
            }
        }
      },
      1);
}

void DepthwiseConv2D::backward(const Tensor& input, const Tensor& output,
                               const Tensor& grad_output, Tensor* grad_input,
                               std::span<float> grads) {
  const im2col::Geometry& g = geometry_;
  const std::int64_t n = input.dim(0), c_in = g.in_c, m_count = options_.depth_multiplier;
  const std::int64_t channels = c_in * m_count, pixels = n * g.out_h * g.out_w;
  const float* kernel = graph_->values().data() + kernel_offset_;
  const bool relu = options_.activation == Activation::kRelu;
  // The bias's gradient (into scratch without a bias), and the pre-activation gradient where a
  // ReLU is fused.
  if (relu) grad_pre_.resize({pixels * channels});
  if (bias_offset_ < 0) grad_bias_.resize({channels});
  float* grad_bias = bias_offset_ >= 0 ? grads.data() + bias_offset_ : grad_bias_.data();
  ops_detail::relu_and_bias_grad(grad_output.data(), output.data(), grad_pre_.data(), pixels,
                                 channels, relu, grad_bias, false);
  const float* dz = relu ? grad_pre_.data() : grad_output.data();
  if (grad_input != nullptr) {
    grad_input->resize(input.shape());
    grad_input->set_zero();
  }
  // The images shared out over the threads, the kernel's gradient summed over them.
  ops_detail::summed_over_ranges(
      n, grads.data() + kernel_offset_, g.kernel_h * g.kernel_w * channels, partials_,
      [&](std::int64_t first, std::int64_t images, float* grad_kernel) {
        for (std::int64_t b = first; b < first + images; ++b) {
          const float* image = input.data() + b * g.image_size();
          float* grad_image = grad_input != nullptr ? grad_input->data() + b * g.image_size() : nullptr;
          for (std::int64_t oy = 0; oy < g.out_h; ++oy)
            for (std::int64_t ox = 0; ox < g.out_w; ++ox) {
              const float* d = dz + ((b * g.out_h + oy) * g.out_w + ox) * channels;
              for_each_tap(g, oy, ox, [&](std::int64_t tap, std::int64_t pixel) {
                const float* x = image + pixel * c_in;
                float* dk = grad_kernel + tap * channels;
                const float* k = kernel + tap * channels;
                float* dx = grad_image != nullptr ? grad_image + pixel * c_in : nullptr;
                if (m_count == 1) {  // contiguous, vectorised
                  for (std::int64_t c = 0; c < c_in; ++c) dk[c] += x[c] * d[c];
                  if (dx != nullptr)
                    for (std::int64_t c = 0; c < c_in; ++c) dx[c] += k[c] * d[c];
                  return;
                }
                for (std::int64_t c = 0; c < c_in; ++c)
                  for (std::int64_t m = 0; m < m_count; ++m) dk[c * m_count + m] += x[c] * d[c * m_count + m];
                if (dx == nullptr) return;
                for (std::int64_t c = 0; c < c_in; ++c)
                  for (std::int64_t m = 0; m < m_count; ++m) dx[c] += k[c * m_count + m] * d[c * m_count + m];
              });
            }
        }
      });
}

double DepthwiseConv2D::flops_per_example() const {
  return 3.0 * input_grad_flops_per_example() +
         2.0 * static_cast<double>(geometry_.rows_per_image() * geometry_.in_c *
                                   options_.depth_multiplier);  // + bias and its gradient
}

double DepthwiseConv2D::input_grad_flops_per_example() const {
  return 2.0 * static_cast<double>(geometry_.rows_per_image() * geometry_.kernel_h *
                                   geometry_.kernel_w * geometry_.in_c * options_.depth_multiplier);
}

SeparableConv2D::SeparableConv2D(std::string name, std::int64_t filters,
                                 DepthwiseConv2D::Options depthwise)
    : CompositeLayer(std::move(name)), filters_(filters), depthwise_(depthwise) {
  if (filters < 1)
    throw InvalidArgument("SeparableConv2D \"" + this->name() + "\": filters " +
                          std::to_string(filters) + ": must be >= 1");
}

Node SeparableConv2D::compose(Node input) {
  DepthwiseConv2D::Options depthwise = depthwise_;
  depthwise.activation = Activation::kNone;
  depthwise.use_bias = false;
  const Node x = apply(std::make_unique<DepthwiseConv2D>(scoped("depthwise"), depthwise), input);
  Conv2D::Options pointwise;
  pointwise.filters = filters_;
  pointwise.kernel_h = pointwise.kernel_w = 1;
  pointwise.activation = depthwise_.activation;
  pointwise.kernel_initializer = Initializer::glorot_uniform();
  return apply(std::make_unique<Conv2D>(scoped("pointwise"), pointwise), x);
}

namespace {

DepthwiseConv2D::Options depthwise_options(std::int64_t kernel, Activation activation,
                                           std::int64_t stride, Padding padding,
                                           std::int64_t depth_multiplier) {
  DepthwiseConv2D::Options o;
  o.kernel_h = o.kernel_w = kernel;
  o.stride_h = o.stride_w = stride;
  o.padding = padding;
  o.depth_multiplier = depth_multiplier;
  o.activation = activation;
  return o;
}

}  // namespace

std::unique_ptr<Layer> depthwise_conv2d(std::string name, std::int64_t kernel,
                                        Activation activation, std::int64_t stride,
                                        Padding padding, std::int64_t depth_multiplier) {
  return std::make_unique<DepthwiseConv2D>(
      std::move(name), depthwise_options(kernel, activation, stride, padding, depth_multiplier));
}

std::unique_ptr<Layer> separable_conv2d(std::string name, std::int64_t filters, std::int64_t kernel,
                                        Activation activation, std::int64_t stride,
                                        Padding padding, std::int64_t depth_multiplier) {
  return std::make_unique<SeparableConv2D>(
      std::move(name), filters,
      depthwise_options(kernel, activation, stride, padding, depth_multiplier));
}

}  // namespace cohort
