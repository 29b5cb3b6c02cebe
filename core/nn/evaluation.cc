#include "cohort/core/nn/evaluation.h"

#include <string>

#include "cohort/core/base/error.h"

namespace cohort {

StepMetrics evaluate_dataset(Model& model, const data::Dataset& data, std::int64_t batch_size,
                             const data::ImageOptions& image) {
  check_dataset(model, data);
  auto batches = data::BatchIterator::in_order(data, batch_size, image);
  data::Batch batch;
  double loss = 0;
  std::vector<std::vector<double>> counts;  // each metric's (Metric::counts), over the batches
  std::int64_t seen = 0;
  auto* before = model.count_metrics(&counts);  // a caller's own totals, set again after
  try {
    while (batches.next(batch)) {
      const StepMetrics m = model.evaluate(batch.features, batch.view());
      loss += m.loss * static_cast<double>(batch.size());
      seen += batch.size();
    }
  } catch (...) {
    model.count_metrics(before);
    throw;
  }
  model.count_metrics(before);
  StepMetrics total;
  if (seen == 0) return total;
  total.loss = static_cast<float>(loss / static_cast<double>(seen));
  for (std::size_t i = 0; i < counts.size(); ++i)
    total.metrics[i] = static_cast<float>(model.metric_from_counts(i, counts[i]));
  const auto& names = model.metric_names();
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == "accuracy") total.accuracy = total.metrics[i];
  return total;
}

void check_dataset(const Model& model, const data::Dataset& data) {
  try {
    model.check_data(data.example_shape(), data.target_spec());
  } catch (const InvalidArgument& e) {
    std::string where;
    // Too many classes for the logits: name where the largest label is, a value to look for.
    const int logits = model.num_classes();
    if (data.has_labels() && logits > 0 && data.num_classes() > logits)
      for (std::int64_t i = 0; i < data.size(); ++i)
        if (data.label(i) == data.num_classes() - 1) {
          where = " (the largest label, " + std::to_string(data.label(i)) + ", first at example " +
                  std::to_string(i) + " of the examples this process holds)";
          break;
        }
    throw InvalidArgument(data.name() + ": " + e.what() + where);
  }
}

}  // namespace cohort
