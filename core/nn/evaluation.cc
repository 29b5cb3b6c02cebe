#include "cohort/core/nn/evaluation.h"

#include <string>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/loss.h"

namespace cohort {

namespace {

// What an evaluation adds up over its examples: the summed loss, the examples, and each
// metric's counts (Metric::counts).
struct Totals {
  double loss = 0;
  std::int64_t seen = 0;
  std::vector<std::vector<double>> counts;
};

Totals add_up(Model& model, const data::Dataset& data, std::int64_t batch_size,
              const data::ImageOptions& image) {
  check_dataset(model, data);
  auto batches = data::BatchIterator::in_order(data, model.inference_batch(batch_size), image);
  data::Batch batch;
  Totals totals;
  auto* before = model.count_metrics(&totals.counts);  // a caller's own totals, set again after
  try {
    while (batches.next(batch)) {
      const StepMetrics m = model.evaluate(batch.features, batch.view());
      totals.loss += m.loss * static_cast<double>(batch.size());
      totals.seen += batch.size();
    }
  } catch (...) {
    model.count_metrics(before);
    throw;
  }
  model.count_metrics(before);
  return totals;
}

StepMetrics metrics_of(const Model& model, const Totals& totals) {
  StepMetrics total;
  if (totals.seen == 0) return total;
  total.loss = static_cast<float>(totals.loss / static_cast<double>(totals.seen));
  for (std::size_t i = 0; i < totals.counts.size(); ++i)
    total.metrics[i] = static_cast<float>(model.metric_from_counts(i, totals.counts[i]));
  if (const int accuracy = accuracy_metric(model.metric_names()); accuracy >= 0)
    total.accuracy = total.metrics[static_cast<std::size_t>(accuracy)];
  return total;
}

}  // namespace

StepMetrics evaluate_dataset(Model& model, const data::Dataset& data, std::int64_t batch_size,
                             const data::ImageOptions& image) {
  return metrics_of(model, add_up(model, data, batch_size, image));
}

StepMetrics evaluate_dataset(Model& model, const data::Dataset& part, CrossReplicaSum& replicas,
                             std::int64_t batch_size, const data::ImageOptions& image) {
  Totals totals = add_up(model, part, batch_size, image);
  // First how many counts each metric has: a replica whose part is empty has none, and learns
  // them from the others (who agree, each metric's count being fixed by the model).
  const std::size_t metrics = model.metric_names().size();
  std::vector<double> sizes(metrics + 1, 0.0);
  if (totals.seen > 0) {
    sizes[0] = 1;
    for (std::size_t i = 0; i < metrics && i < totals.counts.size(); ++i)
      sizes[i + 1] = static_cast<double>(totals.counts[i].size());
  }
  replicas.sum(sizes);
  if (sizes[0] == 0) return {};  // no replica had an example
  totals.counts.resize(metrics);
  std::size_t flat = 2;
  for (std::size_t i = 0; i < metrics; ++i) {
    const double size = sizes[i + 1] / sizes[0];
    if (size != static_cast<double>(static_cast<std::size_t>(size)))
      throw Error("evaluate_dataset: the replicas' parts gave metric '" + model.metric_names()[i] +
                  "' counts of different sizes");
    totals.counts[i].resize(static_cast<std::size_t>(size), 0.0);
    flat += totals.counts[i].size();
  }
  // Then the sums themselves, in one reduction.
  std::vector<double> sums;
  sums.reserve(flat);
  sums.push_back(totals.loss);
  sums.push_back(static_cast<double>(totals.seen));
  for (const auto& counts : totals.counts) sums.insert(sums.end(), counts.begin(), counts.end());
  replicas.sum(sums);
  totals.loss = sums[0];
  totals.seen = static_cast<std::int64_t>(sums[1]);
  std::size_t at = 2;
  for (auto& counts : totals.counts)
    for (double& c : counts) c = sums[at++];
  return metrics_of(model, totals);
}

void check_dataset(const Model& model, const data::Dataset& data, bool whole) {
  if (whole && data.size() == 0) throw InvalidArgument(data.name() + ": no examples to evaluate on");
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
  // Every example's targets, now: a value the loss cannot take named with its file and example,
  // not as a value of some batch of training.
  if (!data.has_labels())
    for (std::int64_t i = 0; i < data.size(); ++i) try {
        model.loss().check_target(data.target(i));
      } catch (const InvalidArgument& e) {
        throw InvalidArgument(data.name() + ": example " + std::to_string(i) +
                              (whole ? "" : " of the examples this process holds") + ": " + e.what());
      }
}

}  // namespace cohort
