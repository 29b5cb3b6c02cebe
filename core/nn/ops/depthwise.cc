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

// Image `image` [pixels, c_in] with each channel's value repeated m_count times, [pixels, c_in
// m_count] into `out`: each output channel's input beside it, so that a depth multiplier above 1
// runs the same contiguous, vectorised loops as one filter per channel.
void expand_channels(const float* __restrict image, std::int64_t pixels, std::int64_t c_in,
                     std::int64_t m_count, float* __restrict out) {
  const std::int64_t values = pixels * c_in;
  if (m_count == 2) {  // the common multiplier, written so that it vectorises (interleaved stores)
    for (std::int64_t i = 0; i < values; ++i) out[2 * i] = out[2 * i + 1] = image[i];
    return;
  }
  for (std::int64_t i = 0; i < values; ++i)
    for (std::int64_t m = 0; m < m_count; ++m) out[i * m_count + m] = image[i];
}

// The reverse: out[i] = the sum of the m_count values of `expanded` at i, for `values` values.
void sum_filters(const float* __restrict expanded, std::int64_t values, std::int64_t m_count,
                 float* __restrict out) {
  if (m_count == 2) {
    for (std::int64_t i = 0; i < values; ++i) out[i] = expanded[2 * i] + expanded[2 * i + 1];
    return;
  }
  for (std::int64_t i = 0; i < values; ++i) {
    float sum = 0.0f;
    for (std::int64_t m = 0; m < m_count; ++m) sum += expanded[i * m_count + m];
    out[i] = sum;
  }
}

}  // namespace

float* DepthwiseConv2D::scratch(std::int64_t images, int parts) {
  if (options_.depth_multiplier == 1) return nullptr;
  const std::int64_t size = geometry_.in_h * geometry_.in_w * geometry_.in_c * options_.depth_multiplier;
  const auto need = static_cast<std::size_t>(ops_detail::range_threads(images, 1) * parts * size);
  if (scratch_.size() < need) scratch_.resize(need);
  return scratch_.data();
}

void DepthwiseConv2D::forward(const Tensor& input, Tensor& output, const OpContext&) {
  const im2col::Geometry& g = geometry_;
  const std::int64_t n = input.dim(0), c_in = g.in_c, m_count = options_.depth_multiplier;
  const std::int64_t channels = c_in * m_count;
  const float* values = graph_->values().data();
  const float* kernel = values + kernel_offset_;  // [taps, C, M]
  const float* bias = bias_offset_ >= 0 ? values + bias_offset_ : nullptr;
  const bool relu = options_.activation == Activation::kRelu;
  output.resize({n, g.out_h, g.out_w, channels});
  const std::int64_t in_pixels = g.in_h * g.in_w;
  float* expanded = scratch(n, 1);  // a thread's image, expanded (depth multiplier > 1)
  // The images shared out over the threads; each output channel's input at the same place in the
  // input (or in the expanded image), so the loops over channels are contiguous and vectorise.
  ops_detail::in_ranges(
      n,
      [&](std::int64_t first, std::int64_t images) {
        float* mine = m_count > 1 ? expanded + intra_op_thread_index() * in_pixels * channels : nullptr;
        for (std::int64_t b = first; b < first + images; ++b) {
          const float* image = input.data() + b * g.image_size();
          if (m_count > 1) {
            expand_channels(image, in_pixels, c_in, m_count, mine);
            image = mine;
          }
          for (std::int64_t oy = 0; oy < g.out_h; ++oy)
            for (std::int64_t ox = 0; ox < g.out_w; ++ox) {
              float* out = output.data() + ((b * g.out_h + oy) * g.out_w + ox) * channels;
              for (std::int64_t q = 0; q < channels; ++q) out[q] = bias != nullptr ? bias[q] : 0.0f;
              for_each_tap(g, oy, ox, [&](std::int64_t tap, std::int64_t pixel) {
                const float* x = image + pixel * channels;
                const float* k = kernel + tap * channels;
                for (std::int64_t q = 0; q < channels; ++q) out[q] += x[q] * k[q];
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
  // The images shared out over the threads, the kernel's gradient summed over them. With a
  // depth multiplier above 1, as in forward: the image expanded, and its gradient taken expanded
  // then summed over each channel's filters.
  const std::int64_t in_pixels = g.in_h * g.in_w;
  float* expanded = scratch(n, 2);  // a thread's image and its gradient, expanded
  ops_detail::summed_over_ranges(
      n, grads.data() + kernel_offset_, g.kernel_h * g.kernel_w * channels, partials_,
      [&](std::int64_t first, std::int64_t images, float* grad_kernel) {
        float* mine = m_count > 1 ? expanded + intra_op_thread_index() * 2 * in_pixels * channels : nullptr;
        for (std::int64_t b = first; b < first + images; ++b) {
          const float* image = input.data() + b * g.image_size();
          float* grad_image = grad_input != nullptr ? grad_input->data() + b * g.image_size() : nullptr;
          float* grad_expanded = grad_image;
          if (m_count > 1) {
            expand_channels(image, in_pixels, c_in, m_count, mine);
            image = mine;
            if (grad_image != nullptr) {
              grad_expanded = mine + in_pixels * channels;
              std::fill_n(grad_expanded, in_pixels * channels, 0.0f);
            }
          }
          for (std::int64_t oy = 0; oy < g.out_h; ++oy)
            for (std::int64_t ox = 0; ox < g.out_w; ++ox) {
              const float* d = dz + ((b * g.out_h + oy) * g.out_w + ox) * channels;
              for_each_tap(g, oy, ox, [&](std::int64_t tap, std::int64_t pixel) {
                const float* x = image + pixel * channels;
                float* dk = grad_kernel + tap * channels;
                for (std::int64_t q = 0; q < channels; ++q) dk[q] += x[q] * d[q];
                if (grad_expanded == nullptr) return;
                const float* k = kernel + tap * channels;
                float* dx = grad_expanded + pixel * channels;
                for (std::int64_t q = 0; q < channels; ++q) dx[q] += k[q] * d[q];
              });
            }
          if (m_count > 1 && grad_image != nullptr) sum_filters(grad_expanded, in_pixels * c_in, m_count, grad_image);
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
