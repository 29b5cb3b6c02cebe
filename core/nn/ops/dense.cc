#include <algorithm>
#include <string>
#include <utility>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/ops/bias_grad.h"
#include "cohort/core/nn/ops/ops.h"
#include "cohort/core/nn/threads.h"

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

// Runs f(begin, count) over [0, total) cut into one contiguous range per intra-op thread (in
// multiples of 16, a vector of floats), on those threads; the products inside run
// single-threaded. With one thread, or a total too small to share, f takes it all here.
template <typename F>
void in_ranges(std::int64_t total, F&& f) {
  constexpr std::int64_t kGranule = 16;
  const std::int64_t granules = (total + kGranule - 1) / kGranule;
  const int threads = static_cast<int>(std::clamp<std::int64_t>(intra_op_threads(), 1, granules));
  if (threads == 1) {
    f(std::int64_t{0}, total);
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int t = 0; t < threads; ++t) {
    const std::int64_t begin = std::min(total, granules * t / threads * kGranule);
    const std::int64_t end = std::min(total, granules * (t + 1) / threads * kGranule);
    if (end > begin) f(begin, end - begin);
  }
}

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
  // Threads take column ranges of the output, so each packs only its share of the kernel. The
  // product accumulates onto the broadcast bias, so the bias costs no pass of its own; the
  // activation then runs over an output block that is still in cache.
  in_ranges(units_, [&](std::int64_t c0, std::int64_t cols) {
    auto block = y.middleCols(c0, cols);
    block.rowwise() = bias.segment(c0, cols);
    block.noalias() += x * kernel.middleCols(c0, cols);
    if (activation_ == Activation::kRelu) block = block.cwiseMax(0.0f);
  });
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
  // the better orientation produces it transposed. Threads take ranges of kernel rows (of the
  // input dimension), for the kernel gradient and the input gradient alike.
  const bool large = in_ * units_ * std::int64_t{sizeof(float)} > kCacheBytes;
  if (units_ < kNarrow) {
    // Few units (the logits): a column-major [in, units] kernel gradient, then transposed.
    transposed_.resize({in_ * units_});
    ColumnMajorMap column_major(transposed_.data(), in_, units_);
    in_ranges(in_, [&](std::int64_t r0, std::int64_t rows) {
      column_major.middleRows(r0, rows).noalias() = x.middleCols(r0, rows).transpose() * dz;
      grad_kernel.middleRows(r0, rows) = column_major.middleRows(r0, rows);
    });
  } else {
    // A kernel gradient larger than L2 goes by row blocks, so that the product's zeroing pass
    // and its accumulation meet each block in cache and it goes to memory once.
    const std::int64_t block = large ? kRowBlock : in_;
    in_ranges(in_, [&](std::int64_t r0, std::int64_t rows) {
      for (std::int64_t r = r0; r < r0 + rows; r += block) {
        const std::int64_t count = std::min(block, r0 + rows - r);
        grad_kernel.middleRows(r, count).noalias() = x.middleCols(r, count).transpose() * dz;
      }
    });
  }
  if (grad_input == nullptr) return;
  ConstWeightMap kernel(graph_->values().data() + kernel_offset_, in_, units_);
  grad_input->resize(input.shape());
  auto dx = grad_input->matrix(n, in_);
  if (large) {
    // A large kernel streams from memory once either way, but read as the right-hand side of a
    // column-major product it is packed along its rows; the [n, in] result is small to transpose.
    transposed_.resize({n * in_});
    ColumnMajorMap column_major(transposed_.data(), n, in_);
    in_ranges(in_, [&](std::int64_t c0, std::int64_t cols) {
      column_major.middleCols(c0, cols).noalias() = dz * kernel.middleRows(c0, cols).transpose();
      dx.middleCols(c0, cols) = column_major.middleCols(c0, cols);
    });
  } else {
    in_ranges(in_, [&](std::int64_t c0, std::int64_t cols) {
      dx.middleCols(c0, cols).noalias() = dz * kernel.middleRows(c0, cols).transpose();
    });
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
