#include <algorithm>
#include <string>
#include <utility>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/ops/bias_grad.h"
#include "cohort/core/nn/ops/gemm.h"
#include "cohort/core/nn/ops/ops.h"
#include "cohort/core/nn/ops/parallel.h"
#include "cohort/core/nn/optimizer.h"
#include "cohort/core/nn/tensor_eigen.h"
#include "cohort/core/nn/threads.h"

namespace cohort {
namespace {

using ops_detail::gemm;
using ops_detail::in_ranges;  // in multiples of 16 columns or rows: a vector of floats

}  // namespace

Dense::Dense(std::string name, std::int64_t units, Activation activation,
             Initializer kernel_initializer, bool flatten)
    : name_(std::move(name)),
      units_(units),
      activation_(activation),
      kernel_initializer_(kernel_initializer),
      flatten_(flatten) {
  if (units_ < 1)
    throw InvalidArgument("Dense \"" + name_ + "\": units = " + std::to_string(units_) +
                          ", must be >= 1");
}

Shape Dense::build(Graph& graph, const Shape& input) {
  if (input.empty() || num_elements(input) < 1)
    throw InvalidArgument("Dense \"" + name_ + "\": bad input shape " + to_string(input));
  in_ = flatten_ ? num_elements(input) : input.back();
  positions_ = num_elements(input) / in_;
  graph_ = &graph;
  kernel_offset_ = graph.get_variable(name_ + "/kernel", {in_, units_}, kernel_initializer_,
                                      VariableOptions{.decay = true})
                       .offset;
  bias_offset_ = graph.get_variable(name_ + "/bias", {units_}, Initializer::zeros()).offset;
  if (flatten_) return {units_};
  Shape output = input;
  output.back() = units_;
  return output;
}

Shape Dense::output_shape(const Shape& input) const {
  if (flatten_) return {input[0], units_};
  Shape output = input;
  output.back() = units_;
  return output;
}

// The products below take the input as rows of in_ values: one per example, or, over the last
// axis, one per position of every example.
void Dense::forward(const Tensor& input, Tensor& output, const OpContext& context) {
  update_in_place_ = context.update_in_place;
  const std::int64_t n = input.size() / in_;
  const float* kernel = graph_->values().data() + kernel_offset_;
  const float* bias = graph_->values().data() + bias_offset_;
  output.resize(output_shape(input.shape()));
  auto y = matrix(output, n, units_);
  // Threads take column ranges of the output, so each reads only its share of the kernel. The
  // product accumulates onto the broadcast bias, so the bias costs no pass of its own; the
  // activation then runs over an output block that is still in cache.
  in_ranges(units_, [&](std::int64_t c0, std::int64_t cols) {
    auto block = y.middleCols(c0, cols);
    block.rowwise() = Eigen::Map<const Eigen::RowVectorXf>(bias + c0, cols);
    gemm(false, false, n, cols, in_, 1.0f, input.data(), in_, kernel + c0, units_, 1.0f,
         output.data() + c0, units_);
    if (activation_ == Activation::kRelu) block = block.cwiseMax(0.0f);
  });
}

void Dense::backward(const Tensor& input, const Tensor& output, const Tensor& grad_output,
                     Tensor* grad_input, std::span<float> grads) {
  const std::int64_t n = input.size() / in_;
  const bool relu = activation_ == Activation::kRelu;
  if (relu) grad_pre_.resize(grad_output.shape());
  ops_detail::relu_and_bias_grad(grad_output.data(), output.data(), grad_pre_.data(), n, units_,
                                 relu, grads.data() + bias_offset_, false);
  const float* x = input.data();
  const float* dz = (relu ? grad_pre_ : grad_output).data();
  float* kernel = graph_->values().data() + kernel_offset_;
  // Threads take ranges of kernel rows (of the input dimension), for the input gradient
  // (dz kernel^T) and the kernel gradient (x^T dz) alike. The input gradient comes first: it
  // needs the kernel the forward pass used, which an update in place then changes.
  if (grad_input != nullptr) {
    grad_input->resize(input.shape());
    in_ranges(in_, [&](std::int64_t c0, std::int64_t cols) {
      gemm(false, true, n, cols, units_, 1.0f, dz, units_, kernel + c0 * units_, units_, 0.0f,
           grad_input->data() + c0, in_);
    });
  }
  // In place: kernel := kernel + rate * x^T dz, the same product added onto the kernel.
  const std::int64_t kernel_end = kernel_offset_ + in_ * units_;
  const auto rate = update_in_place_ != nullptr
                        ? update_in_place_->rate(kernel_offset_, kernel_end)
                        : std::nullopt;
  float* target = rate ? kernel : grads.data() + kernel_offset_;
  in_ranges(in_, [&](std::int64_t r0, std::int64_t rows) {
    gemm(true, false, rows, units_, n, rate.value_or(1.0f), x + r0, in_, dz, units_,
         rate ? 1.0f : 0.0f, target + r0 * units_, units_);
  });
  if (rate) update_in_place_->applied(kernel_offset_, kernel_end);
}

double Dense::flops_per_example() const {
  const double gemm = 2.0 * static_cast<double>(in_) * static_cast<double>(units_);
  // + bias, bias gradient; per position over the last axis.
  return static_cast<double>(positions_) * (3.0 * gemm + 2.0 * static_cast<double>(units_));
}

double Dense::input_grad_flops_per_example() const {
  return static_cast<double>(positions_) * 2.0 * static_cast<double>(in_) *
         static_cast<double>(units_);
}

}  // namespace cohort
