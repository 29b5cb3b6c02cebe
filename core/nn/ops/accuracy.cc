#include <string>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/ops/ops.h"
#include "cohort/core/nn/tensor_eigen.h"

namespace cohort {

float accuracy(const Tensor& logits, std::span<const std::int32_t> labels) {
  if (logits.rank() < 1 || logits.dim(0) < 1)
    throw InvalidArgument("accuracy: logits " + to_string(logits.shape()) + " have no batch");
  const std::int64_t n = logits.dim(0);
  if (static_cast<std::int64_t>(labels.size()) != n)
    throw InvalidArgument("accuracy: " + std::to_string(labels.size()) +
                          " labels for a batch of " + std::to_string(n));
  auto x = matrix(logits, n, logits.size() / n);
  std::int64_t correct = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    // A row with a logit that is not finite (a diverged model) predicts no class, as
    // TensorFlow's in_top_k and TopKAccuracy have it.
    if (!x.row(i).allFinite()) continue;
    Eigen::Index best = 0;
    x.row(i).maxCoeff(&best);
    if (best == labels[static_cast<std::size_t>(i)]) ++correct;
  }
  return static_cast<float>(correct) / static_cast<float>(n);
}

}  // namespace cohort
