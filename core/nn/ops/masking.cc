#include "cohort/core/nn/ops/masking.h"

#include <algorithm>
#include <utility>

#include "cohort/core/base/error.h"

namespace cohort {

Shape MaskableLayer::build_node(Graph& graph, std::span<const Shape> inputs) {
  const auto count = static_cast<std::size_t>(num_inputs());
  masked_ = inputs.size() == count + 1;
  if (masked_) {
    const auto index = static_cast<std::size_t>(masked_input());
    const Shape& keys = inputs[index];  // the sequence the mask is of
    if (keys.size() != 2 || inputs[count] != Shape{keys[0]})
      throw InvalidArgument(
          "layer \"" + name() + "\": mask " + to_string(inputs[count]) + " does not fit its " +
          (count == 1 ? "input " : index + 1 == count ? "last input " : "first input ") + to_string(keys) +
          ": a mask is [steps] of a sequence [steps, features]" +
          (count == 1 && inputs[count].size() == 2
               ? " (a query and a value: cross_attention() takes them)"
               : ""));
  }
  return build_inputs(graph, inputs.first(count));
}

void MaskableLayer::forward_node(std::span<const Tensor* const> inputs, Tensor& output,
                                 const OpContext& context) {
  const auto count = static_cast<std::size_t>(num_inputs());
  const Tensor* mask = inputs.size() == count + 1 ? inputs[count] : nullptr;
  const ops_detail::ForCall<const Tensor> call(mask_, mask);
  forward_inputs(inputs.first(count), output, context);
}

void MaskableLayer::backward_node(std::span<const Tensor* const> inputs, const Tensor& output,
                                  const Tensor& grad_output, std::span<Tensor* const> grad_inputs,
                                  std::span<float> grads) {
  const auto count = static_cast<std::size_t>(num_inputs());
  {
    const Tensor* mask = inputs.size() == count + 1 ? inputs[count] : nullptr;
    const ops_detail::ForCall<const Tensor> call(mask_, mask);
    backward_inputs(inputs.first(count), output, grad_output, grad_inputs.first(count), grads);
  }
  if (inputs.size() == count + 1 && grad_inputs[count] != nullptr) {
    grad_inputs[count]->resize(inputs[count]->shape());
    grad_inputs[count]->set_zero();
  }
}

PaddingMask::PaddingMask(std::string name, float value) : name_(std::move(name)), value_(value) {}

Shape PaddingMask::build(Graph&, const Shape& input) {
  if (input.empty() || input.size() > 2 || input[0] < 1 || (input.size() == 2 && input[1] < 1))
    throw InvalidArgument("PaddingMask \"" + name_ + "\": input " + to_string(input) +
                          " is not [steps] of ids or [steps, features]");
  steps_ = input[0];
  features_ = input.size() == 2 ? input[1] : 1;
  return {steps_};
}

void PaddingMask::forward(const Tensor& input, Tensor& output, const OpContext&) {
  const std::int64_t n = input.dim(0), f = features_;
  output.resize({n, steps_});
  for (std::int64_t s = 0; s < n * steps_; ++s) {
    const float* step = input.data() + s * f;
    output[s] = std::all_of(step, step + f, [&](float v) { return v == value_; }) ? 0.0f : 1.0f;
  }
}

void PaddingMask::backward(const Tensor& input, const Tensor&, const Tensor&, Tensor* grad_input,
                           std::span<float>) {
  if (grad_input == nullptr) return;
  grad_input->resize(input.shape());
  grad_input->set_zero();
}

std::unique_ptr<Layer> padding_mask(std::string name, float value) {
  return std::make_unique<PaddingMask>(std::move(name), value);
}

}  // namespace cohort
