#include "cohort/core/nn/ops/merge.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/ops/ops.h"
#include "cohort/core/nn/tensor_eigen.h"

namespace cohort {
namespace {

// "[2, 3], [2, 4]", for messages.
std::string list_shapes(std::span<const Shape> shapes) {
  std::string text;
  for (const Shape& s : shapes) text += (text.empty() ? "" : ", ") + to_string(s);
  return text;
}

std::string list_shapes(std::span<const Tensor* const> tensors) {
  std::string text;
  for (const Tensor* t : tensors) text += (text.empty() ? "" : ", ") + to_string(t->shape());
  return text;
}

// An axis of examples of `shape` (negative counts from the last) as Concatenate and Slice view
// it: its index, and the products of the dimensions before it and after it. InvalidArgument,
// naming `kind` and `name`, for an axis outside the shape.
struct AxisView {
  std::size_t axis;
  std::int64_t outer, inner;
};
AxisView view_axis(const char* kind, const std::string& name, int axis, const Shape& shape) {
  const auto rank = static_cast<int>(shape.size());
  const int a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    throw InvalidArgument(std::string(kind) + " \"" + name + "\": axis " + std::to_string(axis) +
                          " is outside examples of shape " + to_string(shape));
  AxisView view{static_cast<std::size_t>(a), 1, 1};
  for (std::size_t d = 0; d < view.axis; ++d) view.outer *= shape[d];
  for (std::size_t d = view.axis + 1; d < shape.size(); ++d) view.inner *= shape[d];
  return view;
}

}  // namespace

Shape ElementwiseMerge::build_node(Graph&, std::span<const Shape> inputs) {
  if (inputs.size() < 2)
    throw InvalidArgument(std::string(kind_) + " \"" + name_ + "\": needs two or more inputs, given " +
                          std::to_string(inputs.size()));
  for (const Shape& s : inputs)
    if (s != inputs[0])
      throw InvalidArgument(std::string(kind_) + " \"" + name_ + "\": inputs of different shapes " +
                            list_shapes(inputs));
  size_ = num_elements(inputs[0]);
  inputs_ = static_cast<std::int64_t>(inputs.size());
  return inputs[0];
}

void ElementwiseMerge::check_inputs(std::span<const Tensor* const> inputs) const {
  if (static_cast<std::int64_t>(inputs.size()) != inputs_ ||
      std::any_of(inputs.begin(), inputs.end(),
                  [&](const Tensor* t) { return t->shape() != inputs[0]->shape(); }))
    throw InvalidArgument(std::string(kind_) + " \"" + name_ + "\": built for " + std::to_string(inputs_) +
                          " inputs of one shape, given " + list_shapes(inputs));
}

void Add::forward_node(std::span<const Tensor* const> inputs, Tensor& output, const OpContext&) {
  check_inputs(inputs);
  output.resize(inputs[0]->shape());
  if (inputs.size() == 2 && activation_ == Activation::kRelu) {
    flat(output) = (flat(*inputs[0]) + flat(*inputs[1])).cwiseMax(0.0f);
    return;
  }
  flat(output) = flat(*inputs[0]) + flat(*inputs[1]);
  for (std::size_t i = 2; i < inputs.size(); ++i) flat(output) += flat(*inputs[i]);
  if (activation_ == Activation::kRelu) flat(output) = flat(output).cwiseMax(0.0f);
}

void Add::backward_node(std::span<const Tensor* const>, const Tensor& output,
                        const Tensor& grad_output, std::span<Tensor* const> grad_inputs,
                        std::span<float>) {
  // Each input's gradient is the sum's: grad_output, where the output is positive with a ReLU.
  const Tensor* first = nullptr;
  for (Tensor* g : grad_inputs) {
    if (g == nullptr) continue;
    g->resize(grad_output.shape());
    if (first != nullptr)
      flat(*g) = flat(*first);
    else if (activation_ == Activation::kRelu)
      flat(*g) = (flat(output).array() > 0.0f).select(flat(grad_output), 0.0f);
    else
      flat(*g) = flat(grad_output);
    first = g;
  }
}

double Add::flops_per_example() const {
  return static_cast<double>((inputs_ - 1) * size_);
}

void Multiply::forward_node(std::span<const Tensor* const> inputs, Tensor& output, const OpContext&) {
  check_inputs(inputs);
  output.resize(inputs[0]->shape());
  flat(output) = flat(*inputs[0]).cwiseProduct(flat(*inputs[1]));
  for (std::size_t i = 2; i < inputs.size(); ++i) flat(output) = flat(output).cwiseProduct(flat(*inputs[i]));
}

void Multiply::backward_node(std::span<const Tensor* const> inputs, const Tensor&,
                             const Tensor& grad_output, std::span<Tensor* const> grad_inputs,
                             std::span<float>) {
  // Input i's gradient: the output's times the product of the other inputs (not the output
  // divided by input i, which a zero would break).
  for (std::size_t i = 0; i < grad_inputs.size(); ++i) {
    Tensor* g = grad_inputs[i];
    if (g == nullptr) continue;
    g->resize(grad_output.shape());
    flat(*g) = flat(grad_output);
    for (std::size_t j = 0; j < inputs.size(); ++j)
      if (j != i) flat(*g) = flat(*g).cwiseProduct(flat(*inputs[j]));
  }
}

double Multiply::flops_per_example() const {
  return static_cast<double>(inputs_ * inputs_ * size_);  // forward, and each input's gradient
}

Shape Subtract::build_node(Graph& graph, std::span<const Shape> inputs) {
  if (inputs.size() != 2)
    throw InvalidArgument("Subtract \"" + name_ + "\": takes two inputs (the first less the second), given " +
                          std::to_string(inputs.size()));
  return ElementwiseMerge::build_node(graph, inputs);
}

void Subtract::forward_node(std::span<const Tensor* const> inputs, Tensor& output, const OpContext&) {
  check_inputs(inputs);
  output.resize(inputs[0]->shape());
  flat(output) = flat(*inputs[0]) - flat(*inputs[1]);
}

void Subtract::backward_node(std::span<const Tensor* const>, const Tensor&, const Tensor& grad_output,
                             std::span<Tensor* const> grad_inputs, std::span<float>) {
  for (std::size_t i = 0; i < grad_inputs.size(); ++i) {
    if (grad_inputs[i] == nullptr) continue;
    grad_inputs[i]->resize(grad_output.shape());
    if (i == 0) flat(*grad_inputs[i]) = flat(grad_output);
    else flat(*grad_inputs[i]) = -flat(grad_output);
  }
}

void Average::forward_node(std::span<const Tensor* const> inputs, Tensor& output, const OpContext&) {
  check_inputs(inputs);
  output.resize(inputs[0]->shape());
  flat(output) = flat(*inputs[0]);
  for (std::size_t i = 1; i < inputs.size(); ++i) flat(output) += flat(*inputs[i]);
  flat(output) *= 1.0f / static_cast<float>(inputs.size());
}

void Average::backward_node(std::span<const Tensor* const> inputs, const Tensor&,
                            const Tensor& grad_output, std::span<Tensor* const> grad_inputs,
                            std::span<float>) {
  const float share = 1.0f / static_cast<float>(inputs.size());
  for (Tensor* g : grad_inputs) {
    if (g == nullptr) continue;
    g->resize(grad_output.shape());
    flat(*g) = flat(grad_output) * share;
  }
}

double Average::flops_per_example() const {
  return static_cast<double>((inputs_ + 1) * size_);
}

void Extremum::forward_node(std::span<const Tensor* const> inputs, Tensor& output, const OpContext&) {
  check_inputs(inputs);
  output.resize(inputs[0]->shape());
  flat(output) = flat(*inputs[0]);
  for (std::size_t i = 1; i < inputs.size(); ++i) {
    if (largest_) flat(output) = flat(output).cwiseMax(flat(*inputs[i]));
    else flat(output) = flat(output).cwiseMin(flat(*inputs[i]));
  }
}

void Extremum::backward_node(std::span<const Tensor* const> inputs, const Tensor& output,
                             const Tensor& grad_output, std::span<Tensor* const> grad_inputs,
                             std::span<float>) {
  for (Tensor* g : grad_inputs)
    if (g != nullptr) {
      g->resize(grad_output.shape());
      g->set_zero();
    }
  for (std::int64_t e = 0; e < output.size(); ++e)
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const float x = (*inputs[i])[e];
      // The first input holding the value (a NaN the output has: the first NaN input).
      if (x == output[e] || (std::isnan(x) && std::isnan(output[e]))) {
        if (grad_inputs[i] != nullptr) (*grad_inputs[i])[e] = grad_output[e];
        break;
      }
    }
}

Shape Concatenate::build_node(Graph&, std::span<const Shape> inputs) {
  if (inputs.size() < 2)
    throw InvalidArgument("Concatenate \"" + name_ + "\": needs two or more inputs, given " +
                          std::to_string(inputs.size()));
  const AxisView view = view_axis("Concatenate", name_, axis_, inputs[0]);
  const std::size_t a = view.axis;
  for (const Shape& s : inputs) {
    bool agree = s.size() == inputs[0].size();
    for (std::size_t d = 0; agree && d < s.size(); ++d) agree = d == a || s[d] == inputs[0][d];
    // Images joined on their channels with other rows or cols: most often a skip connection
    // across a size that pooling halved down (an odd one) and upsampling doubled back.
    const bool images = s.size() == 3 && a == 2 && s.size() == inputs[0].size();
    if (!agree)
      throw InvalidArgument("Concatenate \"" + name_ + "\": inputs " + list_shapes(inputs) +
                            " differ outside axis " + std::to_string(axis_) +
                            (images ? " (images of other sizes: crop the larger with cropping2d, or give "
                                      "conv2d_transpose the output_padding that restores the size)"
                                    : ""));
  }
  outer_ = view.outer;
  const std::int64_t inner = view.inner;
  widths_.clear();
  total_width_ = 0;
  output_ = inputs[0];
  output_[a] = 0;
  for (const Shape& s : inputs) {
    widths_.push_back(s[a] * inner);
    total_width_ += s[a] * inner;
    output_[a] += s[a];
  }
  batch_output_.assign(output_.size() + 1, 0);
  std::copy(output_.begin(), output_.end(), batch_output_.begin() + 1);
  return output_;
}

// Viewed as [n * outer, width] row-major matrices, each input fills a band of columns of the
// output: one contiguous copy per (row, input).
void Concatenate::forward_node(std::span<const Tensor* const> inputs, Tensor& output,
                               const OpContext&) {
  const std::int64_t n = inputs[0]->dim(0);
  bool fits = inputs.size() == widths_.size();
  for (std::size_t i = 0; fits && i < inputs.size(); ++i)
    fits = inputs[i]->rank() == static_cast<int>(batch_output_.size()) &&
           inputs[i]->size() == n * outer_ * widths_[i];
  if (!fits)
    throw InvalidArgument("Concatenate \"" + name_ + "\": inputs " + list_shapes(inputs) +
                          " do not match those it was built for");
  batch_output_[0] = n;
  output.resize(batch_output_);
  const std::int64_t rows = n * outer_;
  std::int64_t column = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const std::int64_t width = widths_[i];
    const float* src = inputs[i]->data();
    float* dst = output.data() + column;
    for (std::int64_t r = 0; r < rows; ++r)
      std::memcpy(dst + r * total_width_, src + r * width,
                  static_cast<std::size_t>(width) * sizeof(float));
    column += width;
  }
}

void Concatenate::backward_node(std::span<const Tensor* const> inputs, const Tensor&,
                                const Tensor& grad_output, std::span<Tensor* const> grad_inputs,
                                std::span<float>) {
  const std::int64_t rows = grad_output.dim(0) * outer_;
  std::int64_t column = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const std::int64_t width = widths_[i];
    if (Tensor* g = grad_inputs[i]; g != nullptr) {
      g->resize(inputs[i]->shape());
      const float* src = grad_output.data() + column;
      for (std::int64_t r = 0; r < rows; ++r)
        std::memcpy(g->data() + r * width, src + r * total_width_,
                    static_cast<std::size_t>(width) * sizeof(float));
    }
    column += width;
  }
}

Slice::Slice(std::string name, std::int64_t begin, std::int64_t size, int axis)
    : name_(std::move(name)), begin_(begin), size_(size), axis_(axis) {}

Shape Slice::build(Graph&, const Shape& input) {
  const AxisView view = view_axis("Slice", name_, axis_, input);
  const std::size_t a = view.axis;
  if (begin_ < 0 || size_ < 1 || begin_ + size_ > input[a])
    throw InvalidArgument("Slice \"" + name_ + "\": [" + std::to_string(begin_) + ", " +
                          std::to_string(begin_ + size_) + ") is not within axis " +
                          std::to_string(axis_) + " of examples of shape " + to_string(input));
  outer_ = view.outer;
  in_width_ = input[a] * view.inner;
  out_width_ = size_ * view.inner;
  offset_ = begin_ * view.inner;
  output_ = input;
  output_[a] = size_;
  batch_output_.assign(output_.size() + 1, 0);
  std::copy(output_.begin(), output_.end(), batch_output_.begin() + 1);
  return output_;
}

// Viewed as [n * outer, width] row-major matrices, the output is a band of the input's columns.
void Slice::forward(const Tensor& input, Tensor& output, const OpContext&) {
  batch_output_[0] = input.dim(0);
  output.resize(batch_output_);
  const std::int64_t rows = input.dim(0) * outer_;
  for (std::int64_t r = 0; r < rows; ++r)
    std::memcpy(output.data() + r * out_width_, input.data() + r * in_width_ + offset_,
                static_cast<std::size_t>(out_width_) * sizeof(float));
}

void Slice::backward(const Tensor& input, const Tensor&, const Tensor& grad_output,
                     Tensor* grad_input, std::span<float>) {
  if (grad_input == nullptr) return;
  grad_input->resize(input.shape());
  grad_input->set_zero();
  const std::int64_t rows = input.dim(0) * outer_;
  for (std::int64_t r = 0; r < rows; ++r)
    std::memcpy(grad_input->data() + r * in_width_ + offset_, grad_output.data() + r * out_width_,
                static_cast<std::size_t>(out_width_) * sizeof(float));
}

std::unique_ptr<Layer> add(std::string name, Activation activation) {
  return std::make_unique<Add>(std::move(name), activation);
}

std::unique_ptr<Layer> multiply(std::string name) { return std::make_unique<Multiply>(std::move(name)); }
std::unique_ptr<Layer> subtract(std::string name) { return std::make_unique<Subtract>(std::move(name)); }
std::unique_ptr<Layer> average(std::string name) { return std::make_unique<Average>(std::move(name)); }
std::unique_ptr<Layer> maximum(std::string name) { return std::make_unique<Extremum>(std::move(name), true); }
std::unique_ptr<Layer> minimum(std::string name) { return std::make_unique<Extremum>(std::move(name), false); }

std::unique_ptr<Layer> concatenate(std::string name, int axis) {
  return std::make_unique<Concatenate>(std::move(name), axis);
}

std::unique_ptr<Layer> slice(std::string name, std::int64_t begin, std::int64_t size, int axis) {
  return std::make_unique<Slice>(std::move(name), begin, size, axis);
}

}  // namespace cohort
