#include "cohort/core/nn/ops/ops.h"

#include "cohort/core/nn/tensor_eigen.h"

namespace cohort {

Shape ReLU::build(Graph&, const Shape& input) {
  size_ = num_elements(input);
  return input;
}

void ReLU::forward(const Tensor& input, Tensor& output, const OpContext&) {
  output.resize(input.shape());
  flat(output) = flat(input).cwiseMax(0.0f);
}

void ReLU::backward(const Tensor&, const Tensor& output, const Tensor& grad_output,
                    Tensor* grad_input, std::span<float>) {
  if (grad_input == nullptr) return;
  grad_input->resize(grad_output.shape());
  // The output is positive exactly where the input is, so the input itself is not needed.
  flat(*grad_input) = (flat(output).array() > 0.0f).select(flat(grad_output), 0.0f);
}

}  // namespace cohort
