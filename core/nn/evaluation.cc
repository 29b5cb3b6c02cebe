#include "cohort/core/nn/evaluation.h"

#include <vector>

#include "cohort/core/nn/data/batch_iterator.h"

namespace cohort {

StepMetrics evaluate_dataset(Model& model, const data::Dataset& data, std::int64_t batch_size) {
  auto batches = data::BatchIterator::in_order(data, batch_size);
  Tensor images;
  std::vector<std::int32_t> labels;
  double loss = 0, correct = 0;
  std::int64_t seen = 0;
  while (batches.next(images, labels)) {
    const StepMetrics m = model.evaluate(images, labels);
    const auto n = static_cast<double>(labels.size());
    loss += m.loss * n;
    correct += m.accuracy * n;
    seen += static_cast<std::int64_t>(labels.size());
  }
  if (seen == 0) return {};
  return {static_cast<float>(loss / static_cast<double>(seen)),
          static_cast<float>(correct / static_cast<double>(seen))};
}

}  // namespace cohort
