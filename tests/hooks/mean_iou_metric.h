#pragma once
// A metric of a user's own, as a segmentation's mean IoU is written (Metric::counts and
// from_counts), for the hooks' tests of which way is better: its name tells neither.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cohort/core/nn/loss.h"
#include "hooks/hook_test_support.h"

namespace cohort::test {

/// The mean over the classes present of intersection over union (of the examples predicted a
/// class and those labelled it), counted over every batch. Says nothing of its direction.
class MeanIou : public Metric {
 public:
  std::string name() const override { return "mean_iou"; }
  void check(const Shape& prediction, const TargetSpec& targets) const override {
    Accuracy().check(prediction, targets);
  }
  float compute(const Tensor& predictions, const Targets& targets) override {
    return static_cast<float>(from_counts(counts(predictions, targets, 0.0f)));
  }
  std::vector<double> counts(const Tensor& predictions, const Targets& targets, float) override {
    const std::int64_t n = predictions.dim(0), classes = predictions.size() / n;
    std::vector<double> c(static_cast<std::size_t>(2 * classes));  // per class: intersection, union
    for (std::int64_t i = 0; i < n; ++i) {
      const float* row = predictions.data() + i * classes;
      const auto predicted = static_cast<std::size_t>(std::max_element(row, row + classes) - row);
      const auto label = static_cast<std::size_t>(targets.labels[static_cast<std::size_t>(i)]);
      c[2 * label + 1] += 1;
      if (predicted == label)
        c[2 * label] += 1;
      else
        c[2 * predicted + 1] += 1;
    }
    return c;
  }
  double from_counts(std::span<const double> c) const override {
    double sum = 0;
    int present = 0;
    for (std::size_t k = 0; k + 1 < c.size(); k += 2)
      if (c[k + 1] > 0) {
        sum += c[k] / c[k + 1];
        ++present;
      }
    return present > 0 ? sum / present : 0.0;
  }
};

/// The same, saying that higher is better.
class DirectedMeanIou final : public MeanIou {
 public:
  std::optional<bool> higher_is_better() const override { return true; }
};

/// LocalTraining's model with metric M beside its accuracy.
template <typename M>
struct LocalTrainingWith {
  Graph graph;
  Trainer trainer{nullptr,
                  graph,
                  [](Graph& g) {
                    Model model = mlp(g, {8});
                    model.add_metric(std::make_unique<M>());
                    return model;
                  },
                  data::synthetic(128, 5),
                  sgd(),
                  trainer_options()};
};

}  // namespace cohort::test
