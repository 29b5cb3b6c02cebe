#include "cohort/core/nn/ops/ops.h"

namespace cohort {

Shape ReLU::build(Graph&, const Shape& input) {
  size_ = num_elements(input);
  return input;
}

void ReLU::forward(const Tensor& input, Tensor& output, const OpContext&) {
  output.resize(input.shape());
  output.flat() = input.flat().cwiseMax(0.0f);
}

void ReLU::backward(const Tensor&, const Tensor& output, const Tensor& grad_output,
                    Tensor* grad_input, std::span<float>) {
  if (grad_input == nullptr) return;
  grad_input->resize(grad_output.shape());
  // The output is positive exactly where the input is, so the input itself is not needed.
  grad_input->flat() = (output.flat().array() > 0.0f).select(grad_output.flat(), 0.0f);
}

}  // namespace cohort
