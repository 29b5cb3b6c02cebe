#pragma once
// Embedding: integer ids to dense vectors.

#include <cstdint>
#include <span>
#include <string>

#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/layer.h"
#include "cohort/core/nn/tensor.h"

namespace cohort {

/// Looks up rows of "<name>/embeddings" [vocabulary, dim] (Initializer::normal(0.05f): normal
/// with standard deviation 0.05, for want of a uniform initializer of a given range; weight decay
/// applies): examples of ids [...] (floats holding integers, as the data pipeline gives them)
/// become [..., dim]. An id that is not an integer in [0, vocabulary) is an InvalidArgument
/// naming the layer and the id. The ids get no gradient (a zero one if asked).
class Embedding : public Layer {
 public:
  Embedding(std::string name, std::int64_t vocabulary, std::int64_t dim);

  const std::string& name() const override { return name_; }
  Shape build(Graph& graph, const Shape& input) override;
  void forward(const Tensor& input, Tensor& output, const OpContext& context) override;
  void backward(const Tensor& input, const Tensor& output, const Tensor& grad_output,
                Tensor* grad_input, std::span<float> grads) override;

 private:
  std::string name_;
  std::int64_t vocabulary_, dim_;
  Graph* graph_ = nullptr;
  std::int64_t offset_ = 0;
  Shape output_;
  Shape batch_output_;  // [n, output_...], its batch size set by each forward
  // The row of `id`; InvalidArgument unless it is an integer in [0, vocabulary).
  std::int64_t row(float id) const;
};

}  // namespace cohort
