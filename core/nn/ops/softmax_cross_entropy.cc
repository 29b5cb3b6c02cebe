#include <cmath>
#include <string>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/ops/ops.h"
#include "cohort/core/nn/tensor_eigen.h"

namespace cohort {

SoftmaxCrossEntropy::SoftmaxCrossEntropy(float label_smoothing) : smoothing_(label_smoothing) {
  if (!(label_smoothing >= 0.0f && label_smoothing < 1.0f))
    throw InvalidArgument("SoftmaxCrossEntropy: label_smoothing = " +
                          std::to_string(label_smoothing) + ", must be in [0, 1)");
}

float SoftmaxCrossEntropy::forward(const Tensor& logits, std::span<const std::int32_t> labels) {
  if (logits.rank() < 1 || logits.dim(0) < 1)
    throw InvalidArgument("SoftmaxCrossEntropy: logits " + to_string(logits.shape()) +
                          " have no batch");
  const std::int64_t n = logits.dim(0);
  const std::int64_t classes = logits.size() / n;
  if (static_cast<std::int64_t>(labels.size()) != n)
    throw InvalidArgument("SoftmaxCrossEntropy: " + std::to_string(labels.size()) +
                          " labels for a batch of " + std::to_string(n));
  for (std::int64_t i = 0; i < n; ++i)
    if (labels[i] < 0 || labels[i] >= classes)
      throw InvalidArgument("SoftmaxCrossEntropy: label " + std::to_string(labels[i]) +
                            " of example " + std::to_string(i) + " is not in [0, " +
                            std::to_string(classes) + ")");
  labels_.assign(labels.begin(), labels.end());
  probabilities_.resize({n, classes});
  auto x = matrix(logits, n, classes);
  auto p = matrix(probabilities_, n, classes);
  double loss = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    // Shifting by the row max keeps exp() finite for any logits; log p = x - max - log(sum).
    const float max = x.row(i).maxCoeff();
    p.row(i) = (x.row(i).array() - max).exp();
    const float sum = p.row(i).sum();
    p.row(i) /= sum;
    const double log_sum = std::log(static_cast<double>(sum));
    const double label_term = static_cast<double>(x(i, labels[i]) - max) - log_sum;
    if (smoothing_ == 0.0f) {
      loss -= label_term;
    } else {
      // The mean log-probability over the classes, for the uniform part of the target.
      const double mean_term =
          static_cast<double>(x.row(i).mean() - max) - log_sum;
      loss -= (1.0 - smoothing_) * label_term + smoothing_ * mean_term;
    }
  }
  return static_cast<float>(loss / static_cast<double>(n));
}

void SoftmaxCrossEntropy::backward(Tensor& grad_logits) const {
  const std::int64_t n = probabilities_.dim(0);
  grad_logits.resize(probabilities_.shape());
  const std::int64_t classes = probabilities_.dim(1);
  const float inv_n = 1.0f / static_cast<float>(n);
  if (smoothing_ == 0.0f) {
    flat(grad_logits) = flat(probabilities_) * inv_n;
  } else {
    const float uniform = smoothing_ / static_cast<float>(classes) * inv_n;
    flat(grad_logits) = (flat(probabilities_) * inv_n).array() - uniform;
  }
  const float label_weight = (1.0f - smoothing_) * inv_n;
  for (std::int64_t i = 0; i < n; ++i)
    grad_logits[i * classes + labels_[static_cast<std::size_t>(i)]] -= label_weight;
}

}  // namespace cohort
