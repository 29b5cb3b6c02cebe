#pragma once
// Layers that join several inputs (MergeLayer): Add, Multiply, Subtract, Average, Maximum,
// Minimum and Concatenate; and Slice, which takes one apart.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cohort/core/nn/layer.h"
#include "cohort/core/nn/tensor.h"

namespace cohort {

/// The base of the element-wise merges below: two or more inputs of one shape, an output of it.
class ElementwiseMerge : public MergeLayer {
 public:
  const std::string& name() const override { return name_; }
  Shape build_node(Graph& graph, std::span<const Shape> inputs) override;

 protected:
  ElementwiseMerge(std::string name, const char* kind) : name_(std::move(name)), kind_(kind) {}
  /// InvalidArgument unless a forward's inputs are as many as built for, of one shape.
  void check_inputs(std::span<const Tensor* const> inputs) const;

  std::string name_;
  const char* kind_;  // the class's name, for messages
  std::int64_t size_ = 0;
  std::int64_t inputs_ = 0;
};

/// The element-wise sum of two or more inputs of one shape (a residual connection), then the
/// activation (kRelu: the ReLU that ends a residual block, in the same pass).
class Add : public ElementwiseMerge {
 public:
  explicit Add(std::string name, Activation activation = Activation::kNone)
      : ElementwiseMerge(std::move(name), "Add"), activation_(activation) {}

  void forward_node(std::span<const Tensor* const> inputs, Tensor& output,
                    const OpContext& context) override;
  void backward_node(std::span<const Tensor* const> inputs, const Tensor& output,
                     const Tensor& grad_output, std::span<Tensor* const> grad_inputs,
                     std::span<float> grads) override;
  double flops_per_example() const override;

 private:
  Activation activation_;
};

/// The element-wise product of two or more inputs of one shape (Keras's Multiply: a gate, as in
/// squeeze-and-excitation or a gated unit).
class Multiply : public ElementwiseMerge {
 public:
  explicit Multiply(std::string name) : ElementwiseMerge(std::move(name), "Multiply") {}

  void forward_node(std::span<const Tensor* const> inputs, Tensor& output,
                    const OpContext& context) override;
  void backward_node(std::span<const Tensor* const> inputs, const Tensor& output,
                     const Tensor& grad_output, std::span<Tensor* const> grad_inputs,
                     std::span<float> grads) override;
  double flops_per_example() const override;
};

/// The first input less the second (Keras's Subtract): exactly two inputs of one shape.
class Subtract : public ElementwiseMerge {
 public:
  explicit Subtract(std::string name) : ElementwiseMerge(std::move(name), "Subtract") {}

  Shape build_node(Graph& graph, std::span<const Shape> inputs) override;
  void forward_node(std::span<const Tensor* const> inputs, Tensor& output,
                    const OpContext& context) override;
  void backward_node(std::span<const Tensor* const> inputs, const Tensor& output,
                     const Tensor& grad_output, std::span<Tensor* const> grad_inputs,
                     std::span<float> grads) override;
};

/// The element-wise mean of two or more inputs of one shape (Keras's Average: an ensemble of
/// branches).
class Average : public ElementwiseMerge {
 public:
  explicit Average(std::string name) : ElementwiseMerge(std::move(name), "Average") {}

  void forward_node(std::span<const Tensor* const> inputs, Tensor& output,
                    const OpContext& context) override;
  void backward_node(std::span<const Tensor* const> inputs, const Tensor& output,
                     const Tensor& grad_output, std::span<Tensor* const> grad_inputs,
                     std::span<float> grads) override;
  double flops_per_example() const override;
};

/// The element-wise largest (Keras's Maximum) or smallest (Minimum) of two or more inputs of one
/// shape; each element's gradient goes to the first input that holds the value, as TensorFlow's
/// maximum of two gives it to the first on a tie (a NaN in the output: to the first NaN input).
class Extremum : public ElementwiseMerge {
 public:
  Extremum(std::string name, bool largest)
      : ElementwiseMerge(std::move(name), largest ? "Maximum" : "Minimum"), largest_(largest) {}

  void forward_node(std::span<const Tensor* const> inputs, Tensor& output,
                    const OpContext& context) override;
  void backward_node(std::span<const Tensor* const> inputs, const Tensor& output,
                     const Tensor& grad_output, std::span<Tensor* const> grad_inputs,
                     std::span<float> grads) override;

 private:
  bool largest_;
};

/// Two or more inputs joined along one axis of the example shape (`axis` counts from 0; a
/// negative one from the end: -1, the default, is the channels); the other dimensions must agree.
class Concatenate : public MergeLayer {
 public:
  explicit Concatenate(std::string name, int axis = -1) : name_(std::move(name)), axis_(axis) {}

  const std::string& name() const override { return name_; }
  Shape build_node(Graph& graph, std::span<const Shape> inputs) override;
  void forward_node(std::span<const Tensor* const> inputs, Tensor& output,
                    const OpContext& context) override;
  void backward_node(std::span<const Tensor* const> inputs, const Tensor& output,
                     const Tensor& grad_output, std::span<Tensor* const> grad_inputs,
                     std::span<float> grads) override;

 private:
  std::string name_;
  int axis_;
  std::int64_t outer_ = 0;              // product of the example dimensions before the axis
  std::vector<std::int64_t> widths_;    // per input: its axis length times the inner size
  std::int64_t total_width_ = 0;
  Shape output_;        // one example's
  Shape batch_output_;  // [n, output_...], its batch size set by each forward
};

/// One part of each example along an axis: [begin, begin + size) of axis `axis` (of the example;
/// negative counts from the last), the other axes whole; Concatenate's inverse. What takes apart
/// an example that holds several inputs side by side (a CSV row of token ids and numbers, for the
/// Trainer, which feeds one input per example), as Keras's `x[..., begin:begin + size]`.
class Slice : public Layer {
 public:
  Slice(std::string name, std::int64_t begin, std::int64_t size, int axis = -1);

  const std::string& name() const override { return name_; }
  Shape build(Graph& graph, const Shape& input) override;
  void forward(const Tensor& input, Tensor& output, const OpContext& context) override;
  void backward(const Tensor& input, const Tensor& output, const Tensor& grad_output,
                Tensor* grad_input, std::span<float> grads) override;

 private:
  std::string name_;
  std::int64_t begin_, size_;
  int axis_;
  std::int64_t outer_ = 0;  // product of the example dimensions before the axis
  std::int64_t in_width_ = 0, out_width_ = 0, offset_ = 0;  // the axis times the inner size
  Shape output_;            // one example's
  Shape batch_output_;      // [n, output_...], its batch size set by each forward
};

}  // namespace cohort
