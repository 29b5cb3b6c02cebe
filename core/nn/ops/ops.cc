// What the ops share: output sizes, the terse constructors, FLOP accounting.
#include <algorithm>
#include <string>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/composite.h"
#include "cohort/core/nn/ops/ops.h"

namespace cohort {

SpatialDim spatial_dim(std::int64_t in, std::int64_t window, std::int64_t stride, Padding padding) {
  if (in < 1 || window < 1 || stride < 1)
    throw InvalidArgument("input " + std::to_string(in) + ", window " +
                          std::to_string(window) + ", stride " + std::to_string(stride) +
                          ": each must be >= 1");
  if (padding == Padding::kSame) {
    const std::int64_t out = (in + stride - 1) / stride;
    const std::int64_t pad = std::max<std::int64_t>(0, (out - 1) * stride + window - in);
    return {out, pad / 2, pad - pad / 2};
  }
  // Keras's causal padding: window - 1 before, then VALID; the last window ends at the input's
  // last element or (with a stride) before it.
  if (padding == Padding::kCausal) return {(in + stride - 1) / stride, window - 1, 0};
  if (window > in)
    throw InvalidArgument("VALID window " + std::to_string(window) +
                          " is larger than the input " + std::to_string(in));
  return {(in - window) / stride + 1, 0, 0};
}

im2col::Geometry conv_geometry(const char* kind, const std::string& name, const Shape& image,
                               std::int64_t kernel_h, std::int64_t kernel_w, std::int64_t stride_h,
                               std::int64_t stride_w, Padding padding, std::int64_t dilation_h,
                               std::int64_t dilation_w) {
  // A dilated filter spans (k - 1) * d + 1 pixels; padding and output size follow that extent.
  SpatialDim h, w;
  try {
    h = spatial_dim(image[0], (kernel_h - 1) * dilation_h + 1, stride_h, padding);
    w = spatial_dim(image[1], (kernel_w - 1) * dilation_w + 1, stride_w, padding);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(std::string(kind) + " \"" + name + "\": input " + to_string(image) + ": " +
                          e.what());
  }
  im2col::Geometry g;
  g.in_h = image[0];
  g.in_w = image[1];
  g.in_c = image[2];
  g.kernel_h = kernel_h;
  g.kernel_w = kernel_w;
  g.stride_h = stride_h;
  g.stride_w = stride_w;
  g.pad_top = h.pad_before;
  g.pad_left = w.pad_before;
  g.out_h = h.out;
  g.out_w = w.out;
  g.dilation_h = dilation_h;
  g.dilation_w = dilation_w;
  return g;
}

std::unique_ptr<Layer> dense(std::string name, std::int64_t units, Activation activation,
                             bool flatten) {
  return std::make_unique<Dense>(std::move(name), units, activation,
                                 Initializer::glorot_uniform(), flatten);
}

std::unique_ptr<Layer> conv2d(std::string name, std::int64_t filters, std::int64_t kernel,
                              Activation activation, std::int64_t stride, Padding padding) {
  Conv2D::Options options;
  options.filters = filters;
  options.kernel_h = options.kernel_w = kernel;
  options.stride_h = options.stride_w = stride;
  options.padding = padding;
  options.activation = activation;
  return std::make_unique<Conv2D>(std::move(name), options);
}

namespace {

// A layer, then the activation Keras would give it by name: the layer keeps its own name (and
// its variables theirs), the activation is "<name>/<function>".
class ActivatedLayer final : public CompositeLayer {
 public:
  ActivatedLayer(std::unique_ptr<Layer> layer, std::unique_ptr<Layer> activation)
      : CompositeLayer(layer->name()), layer_(std::move(layer)), activation_(std::move(activation)) {}

 protected:
  Node compose(Node input) override { return apply(std::move(activation_), apply(std::move(layer_), input)); }

 private:
  std::unique_ptr<Layer> layer_, activation_;
};

// `make(activation)` for an activation by name: fused ReLU, none, or the layer and then it.
template <typename Make>
std::unique_ptr<Layer> with_activation(const std::string& function, Make make) {
  if (function == "relu") return make(Activation::kRelu);
  return activated(make(Activation::kNone), function);
}

}  // namespace

std::unique_ptr<Layer> activated(std::unique_ptr<Layer> layer, const std::string& function) {
  if (!layer) throw InvalidArgument("activated: no layer");
  if (function.empty() || function == "linear") return layer;
  std::unique_ptr<Layer> after = activation(layer->name() + "/" + function, function);
  return std::make_unique<ActivatedLayer>(std::move(layer), std::move(after));
}

std::unique_ptr<Layer> dense(std::string name, std::int64_t units, const std::string& function, bool flatten) {
  return with_activation(function, [&](Activation a) { return dense(name, units, a, flatten); });
}

std::unique_ptr<Layer> conv2d(std::string name, std::int64_t filters, std::int64_t kernel,
                              const std::string& function, std::int64_t stride, Padding padding) {
  return with_activation(function,
                         [&](Activation a) { return conv2d(name, filters, kernel, a, stride, padding); });
}

std::unique_ptr<Layer> max_pool2d(std::string name, std::int64_t window, std::int64_t stride,
                                  Padding padding) {
  return std::make_unique<MaxPool2D>(std::move(name), window, stride == 0 ? window : stride,
                                     padding);
}

std::unique_ptr<Layer> relu(std::string name) { return std::make_unique<ReLU>(std::move(name)); }

std::unique_ptr<Layer> flatten(std::string name) {
  return std::make_unique<Flatten>(std::move(name));
}

std::unique_ptr<Layer> dropout(std::string name, float rate) {
  return std::make_unique<Dropout>(std::move(name), rate);
}

std::unique_ptr<Layer> gaussian_noise(std::string name, float stddev) {
  return std::make_unique<GaussianNoise>(std::move(name), stddev);
}

}  // namespace cohort
