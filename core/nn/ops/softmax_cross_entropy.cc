#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/ops/ops.h"
#include "cohort/core/nn/tensor_eigen.h"

namespace cohort {

SoftmaxCrossEntropy::SoftmaxCrossEntropy(float label_smoothing, std::vector<float> class_weights)
    : smoothing_(label_smoothing), weights_(std::move(class_weights)) {
  if (!(label_smoothing >= 0.0f && label_smoothing < 1.0f))
    throw InvalidArgument("SoftmaxCrossEntropy: label_smoothing = " +
                          std::to_string(label_smoothing) + ", must be in [0, 1)");
  for (std::size_t c = 0; c < weights_.size(); ++c)
    if (!(std::isfinite(weights_[c]) && weights_[c] >= 0.0f))
      throw InvalidArgument("SoftmaxCrossEntropy: the weight of class " + std::to_string(c) + ", " +
                            std::to_string(weights_[c]) + ", is not a finite number >= 0");
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
  if (!weights_.empty() && static_cast<std::int64_t>(weights_.size()) != classes)
    throw InvalidArgument("SoftmaxCrossEntropy: " + std::to_string(weights_.size()) +
                          " class weights for " + std::to_string(classes) + " classes");
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
    const double weight = weights_.empty() ? 1.0 : static_cast<double>(weights_[static_cast<std::size_t>(labels[i])]);
    if (smoothing_ == 0.0f) {
      loss -= weight * label_term;
    } else {
      // The mean log-probability over the classes, for the uniform part of the target.
      const double mean_term =
          static_cast<double>(x.row(i).mean() - max) - log_sum;
      loss -= weight * ((1.0 - smoothing_) * label_term + smoothing_ * mean_term);
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
  if (weights_.empty()) return;
  for (std::int64_t i = 0; i < n; ++i) {
    const float weight = weights_[static_cast<std::size_t>(labels_[static_cast<std::size_t>(i)])];
    float* row = grad_logits.data() + i * classes;
    for (std::int64_t c = 0; c < classes; ++c) row[c] *= weight;
  }
}

}  // namespace cohort
