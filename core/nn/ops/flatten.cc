#include "cohort/core/base/error.h"
#include "cohort/core/nn/ops/ops.h"
#include "cohort/core/nn/tensor_eigen.h"

namespace cohort {

Shape Flatten::build(Graph&, const Shape& input) {
  if (input.empty()) throw InvalidArgument("Flatten \"" + name_ + "\": input is a scalar");
  size_ = num_elements(input);
  return {size_};
}

// Tensors own their storage, so the reshape is a copy (one pass over a small activation).
void Flatten::forward(const Tensor& input, Tensor& output, const OpContext&) {
  output.resize({input.dim(0), size_});
  flat(output) = flat(input);
}

void Flatten::backward(const Tensor& input, const Tensor&, const Tensor& grad_output,
                       Tensor* grad_input, std::span<float>) {
  if (grad_input == nullptr) return;
  grad_input->resize(input.shape());
  flat(*grad_input) = flat(grad_output);
}

}  // namespace cohort
