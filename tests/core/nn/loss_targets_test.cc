// What the losses tell of targets that do not fit them, before training: the categorical
// cross-entropies' up-front check of every example (check_target, which check_dataset runs with
// the file's name), the hint a softmax loss gives for masks of class indices, and which way a
// metric is better (Metric::higher_is_better, as the hooks' kAuto mode asks it).
#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/data/dataset.h"
#include "cohort/core/nn/evaluation.h"
#include "cohort/core/nn/gradient_check.h"
#include "cohort/core/nn/heads.h"
#include "cohort/core/nn/loss.h"
#include "cohort/core/nn/model.h"
#include "cohort/core/nn/ops/ops.h"

using namespace cohort;

TEST_CASE("sparse categorical cross-entropy checks each example's class indices up front") {
  // Masks of 2 x 2 pixels, 3 classes: logits [2, 2, 3] per example.
  SparseCategoricalCrossEntropyLoss loss;
  loss.check({2, 2, 3}, TargetSpec::values({2, 2}));
  CHECK_NOTHROW(loss.check_target(std::vector<float>{0, 1, 2, -1}));  // -1: an ignored pixel
  CHECK_NOTHROW(loss.check_target(std::vector<float>{-100, 2, 2, 0}));
  CHECK_THROWS_WITH_AS(
      loss.check_target(std::vector<float>{0, 1, 3, 0}),
      "loss sparse_categorical_cross_entropy: target 3 (position 2 of the example's 4) is "
      "not a class index in [0, 3) nor negative (a position without a target)",
      InvalidArgument);
  CHECK_THROWS_AS(loss.check_target(std::vector<float>{0, 1.5f, 0, 0}), InvalidArgument);
  CHECK_THROWS_AS(loss.check_target(std::vector<float>{0, -0.5f, 0, 0}), InvalidArgument);
  CHECK_THROWS_AS(loss.check_target(std::vector<float>{0, std::nanf(""), 0, 0}), InvalidArgument);
  // One class index an example: no position to name.
  SparseCategoricalCrossEntropyLoss one;
  one.check({3}, TargetSpec::values({1}));
  CHECK_THROWS_WITH_AS(one.check_target(std::vector<float>{7}),
                       doctest::Contains("target 7 (the example) is not a class index in [0, 3)"),
                       InvalidArgument);
}

TEST_CASE("categorical cross-entropy checks each example's rows up front, as forward() does") {
  CategoricalCrossEntropyLoss loss;
  loss.check({2, 3}, TargetSpec::values({2, 3}));
  CHECK_NOTHROW(loss.check_target(std::vector<float>{0, 1, 0, 0.2f, 0.3f, 0.5f}));
  CHECK_NOTHROW(loss.check_target(std::vector<float>{0, 0, 0, 1, 0, 0}));  // a row without a target
  CHECK_THROWS_WITH_AS(
      loss.check_target(std::vector<float>{0, 1, 0, 1, 0, 1}),
      "loss categorical_cross_entropy: the targets of position 1 of the example's 2 (1 at "
      "class 0, 1 at class 2, summing to 2) are not a distribution over the classes "
      "(one-hot, or values in [0, 1] summing to 1) nor a row of zeros (a position without "
      "a target)",
      InvalidArgument);
  CHECK_THROWS_AS(loss.check_target(std::vector<float>{-1, 1, 1, 1, 0, 0}), InvalidArgument);
  CHECK_THROWS_AS(loss.check_target(std::vector<float>{0, 255, 0, 1, 0, 0}), InvalidArgument);
  // What the check lets through, forward() takes; what it refuses, forward() refuses.
  Tensor x({1, 2, 3}), good({1, 2, 3}, std::vector<float>{0, 1, 0, 0.2f, 0.3f, 0.5f});
  Tensor bad({1, 2, 3}, std::vector<float>{0, 1, 0, 0.5f, 0.6f, 0});
  CHECK_NOTHROW(loss.forward(x, Targets{{}, &good}));
  CHECK_THROWS_AS(loss.check_target(bad.span()), InvalidArgument);
  CHECK_THROWS_AS(loss.forward(x, Targets{{}, &bad}), InvalidArgument);
}

TEST_CASE("check_dataset names the file and the example of a mask's class out of range") {
  // A segmentation of 4 x 4 masks into 3 classes: logits [4, 4, 3], masks [4, 4].
  Graph graph;
  Model model(graph, {2});
  model.add(dense("to_pixels", 48));
  model.add(reshape("per_pixel", {4, 4, 3}));
  model.set_loss(std::make_unique<SparseCategoricalCrossEntropyLoss>());
  const Tensor features({3, 2});
  Tensor masks({3, 4, 4});
  masks[2 * 16 + 9] = 3;  // example 2, pixel 9
  masks[1 * 16 + 0] = -1;
  const auto data = data::Dataset::from_arrays(features, masks, "masks.npy");
  CHECK_THROWS_WITH_AS(
      check_dataset(model, data, /*whole=*/true),
      "masks.npy: example 2: loss sparse_categorical_cross_entropy: target 3 (position 9 "
      "of the example's 16) is not a class index in [0, 3) nor negative (a position "
      "without a target)",
      InvalidArgument);
  masks[2 * 16 + 9] = 2;
  CHECK_NOTHROW(check_dataset(model, data::Dataset::from_arrays(features, masks, "masks.npy")));
  // The same masks one-hot, a row of two ones in example 1.
  model.set_loss(std::make_unique<CategoricalCrossEntropyLoss>());
  Tensor one_hot({3, 4, 4, 3});
  for (int i = 0; i < 3 * 16; ++i) one_hot[i * 3] = 1;
  one_hot[(1 * 16 + 5) * 3 + 1] = 1;
  CHECK_THROWS_WITH_AS(
      check_dataset(model, data::Dataset::from_arrays(features, one_hot, "onehot.npy"), true),
      doctest::Contains(
          "onehot.npy: example 1: loss categorical_cross_entropy: the targets of position 5 of "
          "the example's 16 (1 at class 0, 1 at class 1, summing to 2)"),
      InvalidArgument);
}

TEST_CASE(
    "a softmax loss given masks of class indices points to sparse categorical cross-entropy") {
  CHECK_THROWS_WITH_AS(
      make_loss("softmax_cross_entropy")->check({64, 64, 3}, TargetSpec::values({64, 64})),
      "loss softmax_cross_entropy does not fit the data: predictions [64, 64, 3] per "
      "example, float targets [64, 64]; it needs class labels, an integer per example ([N] "
      "or [N, 1]); a class index per position, as these look (a mask's pixel, a sequence's "
      "step: 3 logits each), takes sparse_categorical_cross_entropy (a negative index: no "
      "target there), one-hot rows of classes categorical_cross_entropy",
      InvalidArgument);
  CHECK_NOTHROW(make_loss("sparse_categorical_cross_entropy")
                    ->check({64, 64, 3}, TargetSpec::values({64, 64})));
}

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

TEST_CASE("sparse categorical cross-entropy with class weights: each row's loss and gradient times its class's") {
  // Two examples of 3 pixels, 4 classes; a pixel without a target (-1) stays out of the mean.
  const Tensor x = random_tensor({2, 3, 4}, 11, -3.0f, 3.0f);
  Tensor sparse({2, 3}, std::vector<float>{2, 0, -1, 3, 1, 1});
  const Targets t{{}, &sparse};
  const std::vector<float> weights{0.5f, 2.0f, 1.0f, 4.0f};
  SparseCategoricalCrossEntropyLoss plain, weighted(weights);
  CHECK(weighted.class_weights() == weights);
  plain.check({3, 4}, TargetSpec::values({3}));
  weighted.check({3, 4}, TargetSpec::values({3}));
  double expected = 0;
  for (int r = 0; r < 6; ++r) {
    if (sparse[r] < 0) continue;
    double sum = 0;
    for (int c = 0; c < 4; ++c) sum += std::exp(double(x[r * 4 + c]));
    const auto y = static_cast<int>(sparse[r]);
    expected += weights[static_cast<std::size_t>(y)] * (std::log(sum) - double(x[r * 4 + y]));
  }
  CHECK(weighted.forward(x, t) == doctest::Approx(expected / 5).epsilon(1e-6));  // 5 pixels counted
  plain.forward(x, t);
  Tensor grad, plain_grad;
  weighted.backward(grad);
  plain.backward(plain_grad);
  for (std::int64_t i = 0; i < x.size(); ++i) {
    const float y = sparse[i / 4];
    const float w = y < 0 ? 0.0f : weights[static_cast<std::size_t>(y)];
    CHECK(grad[i] == doctest::Approx(w * plain_grad[i]).epsilon(1e-6));
  }
  // A weight for each class, each finite and >= 0.
  SparseCategoricalCrossEntropyLoss three(std::vector<float>{1, 1, 1});
  CHECK_THROWS_WITH_AS(three.check({3, 4}, TargetSpec::values({3})),
                       "loss sparse_categorical_cross_entropy: 3 class weights for 4 classes", InvalidArgument);
  CHECK_THROWS_WITH_AS(SparseCategoricalCrossEntropyLoss(std::vector<float>{1, -1}),
                       doctest::Contains("the weight of class 1, -1.000000, is not a finite number >= 0"),
                       InvalidArgument);
}
