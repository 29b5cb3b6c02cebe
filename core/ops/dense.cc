#include <algorithm>
#include <string>
#include <utility>

#include "cohort/core/ops/bias_grad.h"
#include "cohort/core/ops/ops.h"
#include "cohort/mpi/error.h"

namespace cohort {
namespace {

// Variable slices of the flat buffer are not aligned (variables are packed back to back).
using WeightMap = Eigen::Map<Matrix>;
using ConstWeightMap = Eigen::Map<const Matrix>;
using ConstRowMap = Eigen::Map<const Eigen::RowVectorXf>;
using ColumnMajorMap = Eigen::Map<Eigen::MatrixXf>;

constexpr std::int64_t kNarrow = 48;                 // Eigen's float register tile, AVX-512
constexpr std::int64_t kCacheBytes = 2 * 1024 * 1024;  // L2 per core on the machines tuned on
constexpr std::int64_t kRowBlock = 128;

}  // namespace

Dense::Dense(std::string name, std::int64_t units, Activation activation,
             Initializer kernel_initializer)
    : name_(std::move(name)),
      units_(units),
      activation_(activation),
      kernel_initializer_(kernel_initializer) {
  if (units_ < 1)
    throw InvalidArgument("Dense \"" + name_ + "\": units = " + std::to_string(units_) +
                          ", must be >= 1");
}

Shape Dense::build(Graph& graph, const Shape& input) {
  in_ = num_elements(input);
  if (input.empty() || in_ < 1)
    throw InvalidArgument("Dense \"" + name_ + "\": bad input shape " + to_string(input));
  graph_ = &graph;
  kernel_offset_ = graph.get_variable(name_ + "/kernel", {in_, units_}, kernel_initializer_).offset;
  bias_offset_ = graph.get_variable(name_ + "/bias", {units_}, Initializer::zeros()).offset;
  return {units_};
}

void Dense::forward(const Tensor& input, Tensor& output, const OpContext&) {
  const std::int64_t n = input.dim(0);
  const float* values = graph_->values().data();
  ConstWeightMap kernel(values + kernel_offset_, in_, units_);
  ConstRowMap bias(values + bias_offset_, units_);
  output.resize({n, units_});
  auto x = input.matrix(n, in_);
  auto y = output.matrix(n, units_);
  // The product accumulates onto the broadcast bias, so the bias costs no pass of its own; the
  // activation then runs over an output that is still in cache.
  y.rowwise() = bias;
  y.noalias() += x * kernel;
  if (activation_ == Activation::kRelu) y = y.cwiseMax(0.0f);
}

void Dense::backward(const Tensor& input, const Tensor& output, const Tensor& grad_output,
                     Tensor* grad_input, std::span<float> grads) {
  const std::int64_t n = input.dim(0);
  const bool relu = activation_ == Activation::kRelu;
  if (relu) grad_pre_.resize(grad_output.shape());
  ops_detail::relu_and_bias_grad(grad_output.data(), output.data(), grad_pre_.data(), n, units_,
                                 relu, grads.data() + bias_offset_, false);
  auto x = input.matrix(n, in_);
  auto dz = (relu ? grad_pre_ : grad_output).matrix(n, units_);
  WeightMap grad_kernel(grads.data() + kernel_offset_, in_, units_);

  // Eigen evaluates a row-major product as the column-major product of the transposes, with its
  // 48-row register tile along the result's columns. Orient each product so that the big operand
  // is packed along its storage order and the tile is filled, copying a result into place where
  // the better orientation produces it transposed.
  if (units_ < kNarrow) {
    // Few units (the logits): a column-major [in, units] kernel gradient, then transposed.
    transposed_.resize({in_ * units_});
    ColumnMajorMap column_major(transposed_.data(), in_, units_);
    column_major.noalias() = x.transpose() * dz;
    grad_kernel = column_major;
  } else if (in_ * units_ * std::int64_t{sizeof(float)} > kCacheBytes) {
    // A kernel gradient larger than L2: by row blocks, so that the product's zeroing pass and
    // its accumulation meet each block in cache and it goes to memory once.
    for (std::int64_t r = 0; r < in_; r += kRowBlock) {
      const std::int64_t rows = std::min(kRowBlock, in_ - r);
      grad_kernel.middleRows(r, rows).noalias() = x.middleCols(r, rows).transpose() * dz;
    }
  } else {
    grad_kernel.noalias() = x.transpose() * dz;
  }
  if (grad_input == nullptr) return;
  ConstWeightMap kernel(graph_->values().data() + kernel_offset_, in_, units_);
  grad_input->resize(input.shape());
  auto dx = grad_input->matrix(n, in_);
  if (in_ * units_ * std::int64_t{sizeof(float)} > kCacheBytes) {
    // A large kernel streams from memory once either way, but read as the right-hand side of a
    // column-major product it is packed along its rows; the [n, in] result is small to transpose.
    transposed_.resize({n * in_});
    ColumnMajorMap column_major(transposed_.data(), n, in_);
    column_major.noalias() = dz * kernel.transpose();
    dx = column_major;
  } else {
    dx.noalias() = dz * kernel.transpose();
  }
}

double Dense::flops_per_example() const {
  const double gemm = 2.0 * static_cast<double>(in_) * static_cast<double>(units_);
  return 3.0 * gemm + 2.0 * static_cast<double>(units_);  // + bias, bias gradient
}

double Dense::input_grad_flops_per_example() const {
  return 2.0 * static_cast<double>(in_) * static_cast<double>(units_);
}

}  // namespace cohort
