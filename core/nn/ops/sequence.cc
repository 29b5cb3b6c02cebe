#include "cohort/core/nn/ops/sequence.h"

#include <string>
#include <utility>

#include "cohort/core/base/error.h"

namespace cohort {
namespace {

// `Conv1D "name"`: the layer in messages.
std::string what(const char* kind, const std::string& name) {
  return std::string(kind) + " \"" + name + "\"";
}

// Checks a 1-D layer's window and stride (and, for a pool, its padding) before its 2-D base
// does, so that a message names the 1-D layer; returns the name for the base.
std::string checked(const char* kind, const std::string& name, std::int64_t window,
                    std::int64_t stride, Padding padding, bool pool) {
  if (window < 1 || stride < 1)
    throw InvalidArgument(what(kind, name) + ": window " + std::to_string(window) + ", stride " +
                          std::to_string(stride) + ": each must be >= 1");
  if (pool && padding == Padding::kCausal)
    throw InvalidArgument(what(kind, name) + ": causal padding is for convolutions; use SAME or "
                          "VALID");
  return name;
}

// The image [1, steps, channels] a sequence is, after checking that the input is a sequence and
// that a window spanning `extent` steps fits it.
Shape as_image(const char* kind, const std::string& name, const Shape& input, std::int64_t extent,
               Padding padding) {
  if (input.size() != 2 || input[0] < 1 || input[1] < 1)
    throw InvalidArgument(what(kind, name) + ": input " + to_string(input) +
                          " is not [steps, channels]");
  if (padding == Padding::kValid && extent > input[0])
    throw InvalidArgument(what(kind, name) + ": input " + to_string(input) +
                          ": a VALID window of " + std::to_string(extent) +
                          " steps is longer than the sequence");
  return {1, input[0], input[1]};
}

// An image output [1, steps, channels] as the sequence [steps, channels] it is.
Shape as_sequence(const Shape& image) { return {image[1], image[2]}; }

// The batch of images [N, 1, T, C] a 2-D forward pass wrote, as sequences [N, T, C].
void to_sequences(Tensor& output) {
  output.reshape({output.dim(0), output.dim(2), output.dim(3)});
}

Conv2D::Options image_options(const std::string& name, const Conv1D::Options& o) {
  static_cast<void>(checked("Conv1D", name, o.kernel, o.stride, o.padding, false));
  if (o.filters < 1 || o.dilation < 1)
    throw InvalidArgument(what("Conv1D", name) + ": filters " + std::to_string(o.filters) +
                          ", dilation " + std::to_string(o.dilation) + ": each must be >= 1");
  Conv2D::Options image;
  image.filters = o.filters;
  image.kernel_h = 1;
  image.kernel_w = o.kernel;
  image.stride_h = 1;
  image.stride_w = o.stride;
  image.padding = o.padding;
  image.activation = o.activation;
  image.kernel_initializer = o.kernel_initializer;
  image.dilation_w = o.dilation;
  return image;
}

}  // namespace

Conv1D::Conv1D(std::string name, Options options)
    : Conv2D(name, image_options(name, options)),
      extent_((options.kernel - 1) * options.dilation + 1),
      padding_(options.padding) {}

Shape Conv1D::build(Graph& graph, const Shape& input) {
  return as_sequence(Conv2D::build(
      graph, as_image("Conv1D", name(), input, extent_, padding_)));
}

void Conv1D::forward(const Tensor& input, Tensor& output, const OpContext& context) {
  Conv2D::forward(input, output, context);
  to_sequences(output);
}

template <typename Pool>
Pool1D<Pool>::Pool1D(const char* kind, std::string name, std::int64_t window, std::int64_t stride,
                     Padding padding)
    : Pool(checked(kind, name, window, stride, padding, true), 1, window, 1, stride, padding) {
  this->kind_ = kind;
}

template <typename Pool>
Shape Pool1D<Pool>::build(Graph& graph, const Shape& input) {
  return as_sequence(Pool::build(
      graph, as_image(this->kind_, this->name_, input, this->window_w_, this->padding_)));
}

template <typename Pool>
void Pool1D<Pool>::forward(const Tensor& input, Tensor& output, const OpContext& context) {
  Pool::forward(input, output, context);
  to_sequences(output);
}

template class Pool1D<MaxPool2D>;
template class Pool1D<AvgPool2D>;

std::unique_ptr<Layer> conv1d(std::string name, std::int64_t filters, std::int64_t kernel,
                              Activation activation, std::int64_t stride, Padding padding,
                              std::int64_t dilation) {
  return std::make_unique<Conv1D>(std::move(name), Conv1D::Options{.filters = filters,
                                                                   .kernel = kernel,
                                                                   .stride = stride,
                                                                   .padding = padding,
                                                                   .activation = activation,
                                                                   .dilation = dilation});
}

std::unique_ptr<Layer> max_pool1d(std::string name, std::int64_t window, std::int64_t stride,
                                  Padding padding) {
  return std::make_unique<MaxPool1D>(std::move(name), window, stride == 0 ? window : stride,
                                     padding);
}

std::unique_ptr<Layer> avg_pool1d(std::string name, std::int64_t window, std::int64_t stride,
                                  Padding padding) {
  return std::make_unique<AvgPool1D>(std::move(name), window, stride == 0 ? window : stride,
                                     padding);
}

std::unique_ptr<Layer> global_avg_pool1d(std::string name) {
  return global_avg_pool2d(std::move(name));
}

std::unique_ptr<Layer> global_max_pool1d(std::string name) {
  return global_max_pool2d(std::move(name));
}

}  // namespace cohort
