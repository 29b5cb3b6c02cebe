#include "cohort/core/nn/ops/embedding.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/ops/ops.h"

namespace cohort {

Embedding::Embedding(std::string name, std::int64_t vocabulary, std::int64_t dim)
    : name_(std::move(name)), vocabulary_(vocabulary), dim_(dim) {
  if (vocabulary < 1 || dim < 1)
    throw InvalidArgument("Embedding \"" + name_ + "\": vocabulary " + std::to_string(vocabulary) +
                          ", dim " + std::to_string(dim) + ": each must be >= 1");
  // Ids arrive as floats, which hold every integer only up to 2^24: past it, two ids would
  // share a row.
  if (vocabulary > (std::int64_t{1} << 24))
    throw InvalidArgument("Embedding \"" + name_ + "\": vocabulary " + std::to_string(vocabulary) +
                          ", more than the 16777216 ids a float32 input tells apart");
}

Shape Embedding::build(Graph& graph, const Shape& input) {
  graph_ = &graph;
  // Keras's default is uniform in [-0.05, 0.05); the initializers have no uniform of a given
  // range, and a normal of the same scale serves as well.
  offset_ = graph.get_variable(name_ + "/embeddings", {vocabulary_, dim_},
                               Initializer::normal(0.05f), VariableOptions{.decay = true})
                .offset;
  output_ = input;
  output_.push_back(dim_);
  batch_output_.assign(output_.size() + 1, 0);
  std::copy(output_.begin(), output_.end(), batch_output_.begin() + 1);
  return output_;
}

std::int64_t Embedding::row(float id) const {
  // The comparisons fail for NaN too; the range test before the cast keeps it defined.
  if (!(id >= 0.0f && id < static_cast<float>(vocabulary_)) || std::floor(id) != id) {
    // The shortest text that reads back as the id: 16777218 must not read as 1.67772e+07, nor
    // 2.1 as 2.0999999.
    char digits[32];
    const auto written = std::to_chars(digits, digits + sizeof digits, id);
    throw InvalidArgument("Embedding \"" + name_ + "\": id " + std::string(digits, written.ptr) +
                          " is not an integer in [0, " + std::to_string(vocabulary_) + ")");
  }
  return static_cast<std::int64_t>(id);
}

void Embedding::forward(const Tensor& input, Tensor& output, const OpContext&) {
  batch_output_[0] = input.dim(0);
  output.resize(batch_output_);
  if (output.size() != input.size() * dim_)
    throw InvalidArgument("Embedding \"" + name_ + "\": input " + to_string(input.shape()) +
                          " is not a batch of the examples it was built for");
  const float* table = graph_->values().data() + offset_;
  for (std::int64_t j = 0; j < input.size(); ++j)
    std::memcpy(output.data() + j * dim_, table + row(input[j]) * dim_,
                static_cast<std::size_t>(dim_) * sizeof(float));
}

void Embedding::backward(const Tensor& input, const Tensor&, const Tensor& grad_output,
                         Tensor* grad_input, std::span<float> grads) {
  float* table = grads.data() + offset_;
  std::fill_n(table, vocabulary_ * dim_, 0.0f);
  // += : an id that occurs several times in the batch collects every occurrence's gradient.
  for (std::int64_t j = 0; j < input.size(); ++j) {
    float* __restrict dst = table + row(input[j]) * dim_;
    const float* __restrict src = grad_output.data() + j * dim_;
    for (std::int64_t k = 0; k < dim_; ++k) dst[k] += src[k];
  }
  if (grad_input != nullptr) {
    grad_input->resize(input.shape());
    grad_input->set_zero();
  }
}

std::unique_ptr<Layer> embedding(std::string name, std::int64_t vocabulary, std::int64_t dim) {
  return std::make_unique<Embedding>(std::move(name), vocabulary, dim);
}

}  // namespace cohort
