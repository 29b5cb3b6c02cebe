#pragma once
// Element-wise activations and shape changes: LeakyReLU, Sigmoid, Tanh, GELU, Softmax (over the
// last axis), SiLU (swish), Softplus, ELU, Reshape. (ReLU, Flatten and Dropout are in ops.h.)

#include <cstdint>
#include <span>
#include <string>

#include "cohort/core/nn/layer.h"
#include "cohort/core/nn/tensor.h"

namespace cohort {

/// The element-wise activations of this header, one class for their shared plumbing.
class ElementwiseActivation : public Layer {
 public:
  enum class Kind { kLeakyRelu, kSigmoid, kTanh, kGelu, kSoftmax, kSilu, kSoftplus, kElu };
  /// `alpha`: LeakyReLU's slope for x < 0, ELU's alpha (x < 0: alpha (e^x - 1)).
  ElementwiseActivation(std::string name, Kind kind, float alpha = 0.2f);

  const std::string& name() const override { return name_; }
  Shape build(Graph& graph, const Shape& input) override;
  void forward(const Tensor& input, Tensor& output, const OpContext& context) override;
  void backward(const Tensor& input, const Tensor& output, const Tensor& grad_output,
                Tensor* grad_input, std::span<float> grads) override;
  double flops_per_example() const override;
  Kind kind() const { return kind_; }

 private:
  std::string name_;
  Kind kind_;
  float alpha_;
  std::int64_t size_ = 0;
  std::int64_t last_ = 0;  // softmax: the length of the last axis
};

/// Examples reshaped to `shape` (one dimension may be -1: whatever the element count leaves).
class Reshape : public Layer {
 public:
  Reshape(std::string name, Shape shape) : name_(std::move(name)), target_(std::move(shape)) {}

  const std::string& name() const override { return name_; }
  Shape build(Graph& graph, const Shape& input) override;
  void forward(const Tensor& input, Tensor& output, const OpContext& context) override;
  void backward(const Tensor& input, const Tensor& output, const Tensor& grad_output,
                Tensor* grad_input, std::span<float> grads) override;

 private:
  std::string name_;
  Shape target_;
  Shape output_;
  Shape batch_output_;  // [n, output_...], its batch size set by each forward
};

}  // namespace cohort
