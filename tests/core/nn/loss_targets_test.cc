// What the losses and metrics tell beyond their values: which way a metric is better
// (Metric::higher_is_better, as the hooks' kAuto mode asks it).
#include <doctest/doctest.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cohort/core/nn/heads.h"
#include "cohort/core/nn/loss.h"

using namespace cohort;

TEST_CASE("a metric says which way is better; of a name that tells nothing, nothing") {
  for (const char* higher :
       {"accuracy", "top5_accuracy", "categorical_accuracy", "sparse_categorical_accuracy",
        "binary_accuracy", "precision", "recall@3", "f1", "auc"})
    CHECK(make_metric(higher)->higher_is_better() == std::optional<bool>(true));
  for (const char* lower : {"mse", "mae", "perplexity"})
    CHECK(make_metric(lower)->higher_is_better() == std::optional<bool>(false));
  // By the name alone, for a user's metric that does not say.
  CHECK(Metric::direction_by_name("pixel_accuracy") == std::optional<bool>(true));
  CHECK(Metric::direction_by_name("dice_loss") == std::optional<bool>(false));
  CHECK(Metric::direction_by_name("rms_error") == std::optional<bool>(false));
  CHECK(Metric::direction_by_name("mean_iou") == std::nullopt);
  CHECK(Metric::direction_by_name("class/recall@2") == std::optional<bool>(true));
  // A head's metric is its metric's.
  std::vector<Head> one;
  one.push_back({.name = "class", .outputs = 3, .targets = 1,
                 .loss = std::make_unique<SoftmaxCrossEntropyLoss>(), .labels = true});
  HeadsLoss heads(std::move(one));
  CHECK(heads.metric("class", make_metric("perplexity"))->higher_is_better() ==
        std::optional<bool>(false));
  // The name-only rule of old stands: lower for any other name.
  CHECK_FALSE(higher_is_better("mean_iou"));
}
