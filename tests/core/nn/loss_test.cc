// Losses as objects (core/nn/loss.h): values against their formulas, gradients against finite
// differences, and the checks of a loss against the data. The metrics: metrics_test.cc.
#include "cohort/core/nn/loss.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "cohort/core/base/error.h"
#include "core/nn/gradient_check.h"

using namespace cohort;

namespace {

// dLoss/dPrediction of `loss` at `x` by central differences, entry by entry.
std::vector<double> numeric_gradient(Loss& loss, Tensor& x, const Targets& targets) {
  std::vector<double> g;
  for (std::int64_t i = 0; i < x.size(); ++i)
    g.push_back(central_difference(x[i], 1e-2, [&] { return double(loss.forward(x, targets)); }));
  return g;
}

void check_gradient(Loss& loss, Tensor& x, const Targets& targets) {
  loss.forward(x, targets);
  Tensor grad;
  loss.backward(grad);
  REQUIRE(grad.shape() == x.shape());
  const std::vector<double> numeric = numeric_gradient(loss, x, targets);
  for (std::int64_t i = 0; i < x.size(); ++i)
    CHECK(grad[i] == doctest::Approx(numeric[static_cast<std::size_t>(i)]).epsilon(1e-2).scale(0.1));
}

}  // namespace

TEST_CASE("softmax cross-entropy with label smoothing: the smoothed target's cross-entropy") {
  Tensor x = random_tensor({3, 4}, 5, -2.0f, 2.0f);
  const std::vector<std::int32_t> labels = {0, 3, 1};
  SoftmaxCrossEntropyLoss plain, smooth(0.2f);
  const Targets t{labels, nullptr};
  double expected_plain = 0, expected_smooth = 0;
  for (int r = 0; r < 3; ++r) {
    double sum = 0;
    for (int c = 0; c < 4; ++c) sum += std::exp(double(x[r * 4 + c]));
    for (int c = 0; c < 4; ++c) {
      const double log_p = double(x[r * 4 + c]) - std::log(sum);
      const double target = (c == labels[static_cast<std::size_t>(r)] ? 0.8 : 0.0) + 0.2 / 4;
      expected_smooth -= target * log_p / 3;
      if (c == labels[static_cast<std::size_t>(r)]) expected_plain -= log_p / 3;
    }
  }
  CHECK(plain.forward(x, t) == doctest::Approx(expected_plain).epsilon(1e-5));
  CHECK(smooth.forward(x, t) == doctest::Approx(expected_smooth).epsilon(1e-5));
  check_gradient(smooth, x, t);
  CHECK_THROWS_AS(SoftmaxCrossEntropyLoss(1.0f), InvalidArgument);
}

TEST_CASE("softmax cross-entropy with class weights: each example's loss times its class's weight") {
  Tensor x = random_tensor({4, 3}, 8, -2.0f, 2.0f);
  const std::vector<std::int32_t> labels = {0, 2, 1, 2};
  const std::vector<float> weights = {0.5f, 3.0f, 2.0f};
  SoftmaxCrossEntropyLoss weighted(0.0f, weights), smooth_weighted(0.1f, weights), plain;
  const Targets t{labels, nullptr};
  double expected = 0;
  for (int r = 0; r < 4; ++r) {
    double sum = 0;
    for (int c = 0; c < 3; ++c) sum += std::exp(double(x[r * 3 + c]));
    const auto label = static_cast<std::size_t>(labels[static_cast<std::size_t>(r)]);
    expected -= weights[label] * (double(x[r * 3 + static_cast<int>(label)]) - std::log(sum)) / 4;
  }
  CHECK(weighted.forward(x, t) == doctest::Approx(expected).epsilon(1e-5));
  check_gradient(weighted, x, t);
  check_gradient(smooth_weighted, x, t);
  // Weights of 1 are no weights.
  SoftmaxCrossEntropyLoss ones(0.0f, {1.0f, 1.0f, 1.0f});
  CHECK(ones.forward(x, t) == plain.forward(x, t));
  Tensor g1, g2;
  ones.backward(g1);
  plain.backward(g2);
  CHECK(std::vector<float>(g1.span().begin(), g1.span().end()) ==
        std::vector<float>(g2.span().begin(), g2.span().end()));
  // A weight per class, each finite and >= 0.
  CHECK_THROWS_WITH_AS(SoftmaxCrossEntropyLoss(0.0f, {1.0f, -1.0f}),
                       "SoftmaxCrossEntropy: the weight of class 1, -1.000000, is not a finite number >= 0",
                       InvalidArgument);
  SoftmaxCrossEntropyLoss two(0.0f, {1.0f, 2.0f});
  CHECK_THROWS_WITH_AS(two.check({3}, TargetSpec::classes(3)),
                       "loss softmax_cross_entropy: 2 class weights for a model of 3 classes",
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(two.forward(x, t), "SoftmaxCrossEntropy: 2 class weights for 3 classes",
                       InvalidArgument);
}

TEST_CASE("sigmoid cross-entropy with positive weights: TensorFlow's weighted_cross_entropy_with_logits") {
  Tensor x = random_tensor({4, 3}, 9, -4.0f, 4.0f);
  Tensor y({4, 3});
  for (std::int64_t i = 0; i < y.size(); ++i) y[i] = (i % 3 == 0 || i == 4) ? 1.0f : 0.0f;
  y[5] = 0.25f;  // a soft target
  const Targets t{{}, &y};
  const std::vector<float> pos = {3.0f, 0.5f, 2.0f};
  SigmoidCrossEntropyLoss weighted(pos), one_for_all({4.0f}), plain, ones({1.0f, 1.0f, 1.0f});
  // -(pw t log(sigmoid(x)) + (1 - t) log(1 - sigmoid(x))), averaged.
  const auto expected = [&](auto weight) {
    double sum = 0;
    for (std::int64_t i = 0; i < x.size(); ++i) {
      const double s = 1 / (1 + std::exp(-double(x[i])));
      sum -= weight(i) * y[i] * std::log(s) + (1 - y[i]) * std::log(1 - s);
    }
    return sum / double(x.size());
  };
  CHECK(weighted.forward(x, t) == doctest::Approx(expected([&](std::int64_t i) { return pos[i % 3]; })).epsilon(1e-5));
  CHECK(one_for_all.forward(x, t) == doctest::Approx(expected([](std::int64_t) { return 4.0; })).epsilon(1e-5));
  CHECK(ones.forward(x, t) == doctest::Approx(plain.forward(x, t)).epsilon(1e-6));
  check_gradient(weighted, x, t);
  check_gradient(one_for_all, x, t);
  CHECK_THROWS_WITH_AS(SigmoidCrossEntropyLoss({1.0f, -2.0f}),
                       "loss sigmoid_cross_entropy: positive weight 1, -2.000000, is not a finite number >= 0",
                       InvalidArgument);
  SigmoidCrossEntropyLoss two({1.0f, 2.0f});
  CHECK_THROWS_WITH_AS(two.check({3}, TargetSpec::values({3})),
                       "loss sigmoid_cross_entropy: 2 positive weights for a model of 3 outputs (give one "
                       "for each, or one for all)",
                       InvalidArgument);
  CHECK_THROWS_AS(two.forward(x, t), InvalidArgument);
}

TEST_CASE("Focal loss: sigmoid cross-entropy at gamma 0, its formula, its gradient by finite differences") {
  Tensor x = random_tensor({4, 3}, 9, -4.0f, 4.0f);
  Tensor y({4, 3}, std::vector<float>{1, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0.3f, 0});
  const Targets t{{}, &y};
  // gamma 0 without alpha: the plain loss and gradient.
  FocalLoss plain(0.0f, -1.0f);
  SigmoidCrossEntropyLoss bce;
  CHECK(plain.forward(x, t) == doctest::Approx(bce.forward(x, t)).epsilon(1e-6));
  Tensor g_plain, g_bce;
  plain.backward(g_plain);
  bce.backward(g_bce);
  for (std::int64_t i = 0; i < x.size(); ++i) CHECK(g_plain[i] == doctest::Approx(g_bce[i]).epsilon(1e-5));
  for (const auto& [gamma, alpha] : {std::pair{2.0f, 0.25f}, std::pair{0.5f, -1.0f}, std::pair{1.0f, 0.75f}}) {
    CAPTURE(gamma);
    CAPTURE(alpha);
    FocalLoss focal(gamma, alpha);
    double expected = 0;
    for (std::int64_t i = 0; i < x.size(); ++i) {
      const double p = 1 / (1 + std::exp(-double(x[i]))), target = y[i];
      const double ce = -(target * std::log(p) + (1 - target) * std::log(1 - p));
      const double p_t = p * target + (1 - p) * (1 - target);
      const double weight = alpha >= 0 ? alpha * target + (1 - alpha) * (1 - target) : 1.0;
      expected += weight * ce * std::pow(1 - p_t, gamma) / double(x.size());
    }
    CHECK(focal.forward(x, t) == doctest::Approx(expected).epsilon(1e-5));
    check_gradient(focal, x, t);
  }
  // An easy example weighs less than under cross-entropy: the point of it.
  Tensor easy({1, 1}, std::vector<float>{4.0f}), one({1, 1}, std::vector<float>{1.0f});
  CHECK(FocalLoss(2.0f, -1.0f).forward(easy, Targets{{}, &one}) <
        0.01f * SigmoidCrossEntropyLoss().forward(easy, Targets{{}, &one}));
  CHECK(make_loss("focal")->name() == "focal");
  CHECK_THROWS_WITH_AS(FocalLoss(-1.0f, 0.25f),
                       "loss focal: gamma -1.000000 and alpha 0.250000: gamma must be a finite number >= 0, alpha in "
                       "[0, 1] (or below 0: none)",
                       InvalidArgument);
  CHECK_THROWS_AS(FocalLoss(2.0f, 1.5f), InvalidArgument);
}

TEST_CASE("Dice loss against its formula, its gradient by finite differences") {
  // 3 examples of 2x2x1: overlapping, an empty mask, a full one.
  Tensor x = random_tensor({3, 2, 2, 1}, 8, -3.0f, 3.0f);
  Tensor y({3, 2, 2, 1}, std::vector<float>{1, 0, 1, 0, 0, 0, 0, 0, 1, 1, 1, 1});
  const Targets t{{}, &y};
  for (const float smooth : {1.0f, 0.1f}) {
    CAPTURE(smooth);
    DiceLoss dice(smooth);
    double expected = 0;
    for (int b = 0; b < 3; ++b) {
      double overlap = 0, total = 0;
      for (int i = 0; i < 4; ++i) {
        const double p = 1 / (1 + std::exp(-double(x[b * 4 + i])));
        overlap += p * y[b * 4 + i];
        total += p + y[b * 4 + i];
      }
      expected += (1 - (2 * overlap + smooth) / (total + smooth)) / 3;
    }
    CHECK(dice.forward(x, t) == doctest::Approx(expected).epsilon(1e-6));
    check_gradient(dice, x, t);
  }
  // A perfect prediction's loss nears 0, the opposite's nears 1.
  Tensor sure({3, 2, 2, 1}), wrong({3, 2, 2, 1});
  for (std::int64_t i = 0; i < 12; ++i) {
    sure[i] = y[i] > 0.5f ? 20.0f : -20.0f;
    wrong[i] = -sure[i];
  }
  DiceLoss dice;
  CHECK(dice.forward(sure, t) < 1e-6f);
  CHECK(dice.forward(wrong, t) > 0.6f);  // the empty mask's example scores 1 - 1 / 5
  CHECK(make_loss("dice")->name() == "dice");
  CHECK(dice.probabilities(sure)[0] == doctest::Approx(1.0f));
  CHECK_THROWS_WITH_AS(DiceLoss(0.0f), "loss dice: smooth 0.000000 is not a finite number > 0", InvalidArgument);
  Tensor bytes({3, 2, 2, 1}, std::vector<float>(12, 255.0f));
  CHECK_THROWS_WITH_AS(dice.forward(x, Targets{{}, &bytes}), doctest::Contains("loss dice: target 255 (value 0"),
                       InvalidArgument);
}

TEST_CASE("sigmoid cross-entropy (multi-label) and mean squared error against their formulas") {
  Tensor x = random_tensor({2, 3}, 6, -3.0f, 3.0f);
  Tensor y({2, 3}, std::vector<float>{1, 0, 1, 0, 0, 1});
  const Targets t{{}, &y};
  SigmoidCrossEntropyLoss bce;
  double expected = 0;
  for (int i = 0; i < 6; ++i) {
    const double p = 1 / (1 + std::exp(-double(x[i])));
    expected -= (y[i] * std::log(p) + (1 - y[i]) * std::log(1 - p)) / 6;
  }
  CHECK(bce.forward(x, t) == doctest::Approx(expected).epsilon(1e-5));
  check_gradient(bce, x, t);
  // A target that is not a probability (a mask of 0 and 255, a NaN) ends the step, named.
  Tensor bytes({2, 3}, std::vector<float>{255, 0, 255, 0, 0, 1});
  CHECK_THROWS_WITH_AS(bce.forward(x, Targets{{}, &bytes}),
                       "loss sigmoid_cross_entropy: target 255 (value 0 of example 0 of the batch) is not in "
                       "[0, 1], a probability per logit (bytes: divide by 255)",
                       InvalidArgument);
  Tensor nan({2, 3}, std::vector<float>{0, 1, 0, 1, std::nanf(""), 1});
  CHECK_THROWS_WITH_AS(bce.forward(x, Targets{{}, &nan}),
                       doctest::Contains("target nan (value 1 of example 1 of the batch)"), InvalidArgument);
  // One example's, as a dataset's are checked before training (check_dataset names the file).
  const std::vector<float> two = {0, 2, 1};
  CHECK_THROWS_WITH_AS(bce.check_target(two), doctest::Contains("target 2 (value 1 of the example) is not in [0, 1]"),
                       InvalidArgument);
  CHECK_THROWS_AS(FocalLoss().check_target(two), InvalidArgument);
  CHECK_THROWS_AS(DiceLoss().check_target(two), InvalidArgument);
  CHECK_NOTHROW(bce.check_target(std::vector<float>{0, 0.5f, 1}));
  CHECK_NOTHROW(MeanSquaredErrorLoss().check_target(two));
  Tensor huge({1, 2}, std::vector<float>{100.0f, -100.0f});
  Tensor ones({1, 2}, std::vector<float>{0.0f, 1.0f});
  CHECK(std::isfinite(bce.forward(huge, Targets{{}, &ones})));

  MeanSquaredErrorLoss mse;
  double squared = 0;
  for (int i = 0; i < 6; ++i) squared += (double(x[i]) - y[i]) * (double(x[i]) - y[i]) / 6;
  CHECK(mse.forward(x, t) == doctest::Approx(squared).epsilon(1e-5));
  check_gradient(mse, x, t);
}

TEST_CASE("mean absolute error and Huber against their formulas, on both sides of delta") {
  // Differences of -2.2 .. 2.3, none within the finite difference's step of 0 or of +-delta.
  Tensor x({2, 3}, std::vector<float>{-1.2f, 0.3f, 1.5f, 2.3f, -0.4f, 0.7f});
  Tensor y({2, 3}, std::vector<float>{1.0f, 0.0f, -0.1f, 0.2f, 0.5f, 1.0f});
  const Targets t{{}, &y};
  MeanAbsoluteErrorLoss mae;
  double absolute = 0;
  for (int i = 0; i < 6; ++i) absolute += std::abs(double(x[i]) - y[i]) / 6;
  CHECK(mae.forward(x, t) == doctest::Approx(absolute).epsilon(1e-6));
  check_gradient(mae, x, t);
  CHECK(MeanAbsoluteError().compute(x, t) == doctest::Approx(absolute).epsilon(1e-6));

  for (const float delta : {1.0f, 0.5f}) {
    CAPTURE(delta);
    HuberLoss huber(delta);
    double expected = 0;
    for (int i = 0; i < 6; ++i) {
      const double d = double(x[i]) - y[i];
      expected += (std::abs(d) <= delta ? 0.5 * d * d : delta * (std::abs(d) - 0.5 * delta)) / 6;
    }
    CHECK(huber.forward(x, t) == doctest::Approx(expected).epsilon(1e-6));
    check_gradient(huber, x, t);
  }
  CHECK_THROWS_WITH_AS(HuberLoss(0.0f), "HuberLoss: delta = 0, must be > 0", InvalidArgument);
  CHECK(make_loss("mae")->name() == "mean_absolute_error");
  CHECK(make_loss("huber")->name() == "huber");
  std::vector<std::string> names;
  for (const auto& metric : default_metrics(*make_loss("huber"))) names.push_back(metric->name());
  CHECK(names == std::vector<std::string>{"mse", "mae"});
}

TEST_CASE("regression losses and metrics of large targets: summed in double, a mean that fits is finite") {
  // 1000 errors of 1e18 (MSE) and 1e36 (MAE, Huber): their float sums overflow, their means fit.
  const Tensor zeros({1000, 1}, std::vector<float>(1000, 0.0f));
  const Tensor big({1000, 1}, std::vector<float>(1000, 1e18f));
  const Tensor huge({1000, 1}, std::vector<float>(1000, 1e36f));
  MeanSquaredErrorLoss mse;
  CHECK(mse.forward(zeros, Targets{{}, &big}) == doctest::Approx(1e36).epsilon(1e-6));
  CHECK(MeanSquaredError().compute(zeros, Targets{{}, &big}) == doctest::Approx(1e36).epsilon(1e-6));
  MeanAbsoluteErrorLoss mae;
  CHECK(mae.forward(zeros, Targets{{}, &huge}) == doctest::Approx(1e36).epsilon(1e-6));
  CHECK(MeanAbsoluteError().compute(zeros, Targets{{}, &huge}) == doctest::Approx(1e36).epsilon(1e-6));
  HuberLoss huber(1.0f);
  CHECK(huber.forward(zeros, Targets{{}, &huge}) == doctest::Approx(1e36).epsilon(1e-6));
  // The gradients stay the float ones: 2 d / n of MSE, sign(d) / n of MAE.
  Tensor grad;
  mse.backward(grad);
  CHECK(grad[0] == doctest::Approx(-2e15).epsilon(1e-6));
  mae.backward(grad);
  CHECK(grad[0] == doctest::Approx(-1e-3).epsilon(1e-6));
}

TEST_CASE("the probabilities an output stands for: softmax rows, sigmoids, none for a regression") {
  const Tensor logits({2, 3}, std::vector<float>{1, 2, 3, 1000, -1000, 0});
  const Tensor p = SoftmaxCrossEntropyLoss().probabilities(logits);
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  CHECK(p[0] == doctest::Approx(std::exp(1.0) / z));
  CHECK(p[2] == doctest::Approx(std::exp(3.0) / z));
  CHECK(p[3] == doctest::Approx(1.0));  // no overflow at 1000
  CHECK(p[4] == 0.0f);
  const Tensor s = SigmoidCrossEntropyLoss().probabilities(logits);
  CHECK(s[0] == doctest::Approx(1 / (1 + std::exp(-1.0))));
  CHECK(s[3] == doctest::Approx(1.0));
  CHECK(s[4] == 0.0f);
  CHECK(s[5] == doctest::Approx(0.5));
  CHECK_THROWS_WITH_AS(MeanSquaredErrorLoss().probabilities(logits),
                       "loss mean_squared_error gives values, not probabilities", InvalidArgument);
}

TEST_CASE("a loss that does not fit the data is refused in one line naming both") {
  SoftmaxCrossEntropyLoss ce;
  MeanSquaredErrorLoss mse;
  CHECK_NOTHROW(ce.check({10}, TargetSpec::classes(10)));
  CHECK_THROWS_WITH_AS(ce.check({10}, TargetSpec::values({1})),
                       "loss softmax_cross_entropy does not fit the data: predictions [10] per "
                       "example, float targets [1]; it needs class labels (integers: floats are "
                       "targets; save the labels as integers, as numpy's y.astype(np.int32) gives)",
                       InvalidArgument);
  // Several values per example are targets per output, integers too (one-hot or multi-hot
  // rows): saving them as integers would change nothing.
  CHECK_THROWS_WITH_AS(ce.check({5}, TargetSpec::values({5})),
                       "loss softmax_cross_entropy does not fit the data: predictions [5] per example, float "
                       "targets [5]; it needs class labels, an integer per example ([N] or [N, 1]); several "
                       "values per example, integers or floats, are read as a target per output (one-hot or "
                       "multi-hot rows): save one-hot rows' classes, as numpy's y.argmax(1).astype(np.int32) "
                       "gives, or take one-hot rows with categorical_cross_entropy (multi-hot ones with "
                       "sigmoid_cross_entropy; a class index per position, a mask's pixel or a "
                       "sequence's step, with sparse_categorical_cross_entropy)",
                       InvalidArgument);
  // An integer per example is a class label, 0/1 ones too: a sigmoid's loss says how to give targets.
  CHECK_THROWS_WITH_AS(SigmoidCrossEntropyLoss().check({2}, TargetSpec::classes(2)),
                       "loss sigmoid_cross_entropy does not fit the data: predictions [2] per example, class "
                       "labels in [0, 2); it needs float targets (an integer per example is read as a class "
                       "label: save 0/1 or other targets as floats, as numpy's y.astype(np.float32) gives; "
                       "class labels take a softmax loss)",
                       InvalidArgument);
  // Class labels for a categorical loss: one-hot rows, or the softmax loss that takes labels.
  CHECK_THROWS_WITH_AS(CategoricalCrossEntropyLoss().check({10}, TargetSpec::classes(10)),
                       "loss categorical_cross_entropy does not fit the data: predictions [10] per example, "
                       "class labels in [0, 10); it needs a row of class probabilities per example, not class "
                       "labels (one-hot rows: numpy's np.eye(classes, dtype=np.float32)[y]; class labels take "
                       "softmax_cross_entropy, which is the same loss)",
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(ce.check({5}, TargetSpec::classes(10)),
                       "loss softmax_cross_entropy does not fit the data: predictions [5] per "
                       "example, class labels in [0, 10); there are 10 classes but 5 logits",
                       InvalidArgument);
  CHECK_THROWS_AS(mse.check({3}, TargetSpec::classes(3)), InvalidArgument);
  CHECK_THROWS_AS(mse.check({3}, TargetSpec::values({4})), InvalidArgument);
  CHECK_NOTHROW(mse.check({3}, TargetSpec::values({3})));
  CHECK_THROWS_AS(TopKAccuracy(5).check({3}, TargetSpec::classes(3)), InvalidArgument);
  CHECK(make_loss("mse")->name() == "mean_squared_error");
  CHECK_THROWS_WITH_AS(make_loss("hinge"),
                       "unknown loss 'hinge' (known: softmax_cross_entropy, sigmoid_cross_entropy, "
                       "categorical_cross_entropy, sparse_categorical_cross_entropy, mean_squared_error, "
                       "mean_absolute_error, huber, dice, focal)",
                       InvalidArgument);
}

TEST_CASE("categorical cross-entropy: a class per row of the targets' last axis, soft or one-hot") {
  // Two examples of 3 steps of 4 classes: one-hot rows, and a soft row (a distribution).
  Tensor x = random_tensor({2, 3, 4}, 8, -3.0f, 3.0f);
  Tensor y({2, 3, 4});
  const int classes[6] = {0, 3, 1, 2, 2, 0};
  for (int r = 0; r < 6; ++r) y[r * 4 + classes[r]] = 1.0f;
  y[5 * 4 + 0] = 0.5f;  // the last row: half class 0, half class 1
  y[5 * 4 + 1] = 0.5f;
  const Targets t{{}, &y};
  CategoricalCrossEntropyLoss loss;
  double expected = 0;
  for (int r = 0; r < 6; ++r) {
    double total = 0;
    for (int c = 0; c < 4; ++c) total += std::exp(double(x[r * 4 + c]));
    for (int c = 0; c < 4; ++c) expected -= y[r * 4 + c] * (x[r * 4 + c] - std::log(total)) / 6;
  }
  CHECK(loss.forward(x, t) == doctest::Approx(expected).epsilon(1e-5));
  check_gradient(loss, x, t);
  // The same logits as one flat vector per example: the targets' rows still say the classes.
  Tensor flat_x({2, 12}, x.span());
  CHECK(loss.forward(flat_x, t) == doctest::Approx(expected).epsilon(1e-5));
  const Tensor p = loss.probabilities(x);
  double row = 0;
  for (int c = 0; c < 4; ++c) row += p[4 + c];
  CHECK(row == doctest::Approx(1.0));

  CategoricalAccuracy accuracy;
  double hits = 0;
  for (int r = 0; r < 6; ++r) {
    int best = 0;
    for (int c = 1; c < 4; ++c) best = x[r * 4 + c] > x[r * 4 + best] ? c : best;
    hits += best == (r == 5 ? 0 : classes[r]) ? 1 : 0;  // the soft row's first largest: 0
  }
  CHECK(accuracy.compute(x, t) == doctest::Approx(hits / 6));
  CHECK(make_loss("categorical_cross_entropy")->name() == "categorical_cross_entropy");
  CHECK(default_metrics(loss).front()->name() == "categorical_accuracy");
  CHECK(make_metric("categorical_accuracy")->name() == "categorical_accuracy");
  CHECK_THROWS_WITH_AS(
      loss.check({3}, TargetSpec::values({3, 1})),
      "loss categorical_cross_entropy does not fit the data: predictions [3] per example, float "
      "targets [3, 1]; it needs targets whose last axis holds the classes (one-hot rows, two or "
      "more classes)",
      InvalidArgument);

  // Rows of zeros are steps without a target (padding): the mean and the accuracy are over the
  // others, and the padded rows get no gradient.
  Tensor padded({2, 3, 4});
  for (int r : {0, 1, 3}) padded[r * 4 + classes[r]] = 1.0f;
  const Targets tp{{}, &padded};
  double over_three = 0;
  for (int r : {0, 1, 3}) {
    double total = 0;
    for (int c = 0; c < 4; ++c) total += std::exp(double(x[r * 4 + c]));
    over_three -= (x[r * 4 + classes[r]] - std::log(total)) / 3;
  }
  CHECK(loss.forward(x, tp) == doctest::Approx(over_three).epsilon(1e-5));
  Tensor grad;
  loss.backward(grad);
  for (int r : {2, 4, 5})
    for (int c = 0; c < 4; ++c) CHECK(grad[r * 4 + c] == 0.0f);
  check_gradient(loss, x, tp);
  double padded_hits = 0;
  for (int r : {0, 1, 3}) {
    int best = 0;
    for (int c = 1; c < 4; ++c) best = x[r * 4 + c] > x[r * 4 + best] ? c : best;
    padded_hits += best == classes[r] ? 1 : 0;
  }
  CHECK(accuracy.compute(x, tp) == doctest::Approx(padded_hits / 3));
  const std::vector<double> counted = accuracy.counts(x, tp, 0.0f);
  CHECK(counted == std::vector<double>{padded_hits, 3.0});
  Tensor none({2, 3, 4});
  const Targets tn{{}, &none};
  CHECK(loss.forward(x, tn) == 0.0f);
  CHECK(accuracy.compute(x, tn) == 0.0f);

  // A row that is neither (two ones, a -1 for "no class") is refused, naming it.
  Tensor two_ones = y;
  two_ones[4 + 1] = 1.0f;
  const Targets t2{{}, &two_ones};
  CHECK_THROWS_WITH_AS(loss.forward(x, t2),
                       "loss categorical_cross_entropy: the targets of example 0 of the batch, "
                       "position 1 of its 3 (1 at class 1, 1 at class 3, summing to 2) are not a "
                       "distribution over the classes (one-hot, or values in [0, 1] summing to 1) "
                       "nor a row of zeros (a position without a target)",
                       InvalidArgument);
  Tensor negative = padded;
  negative[2 * 4 + 0] = -1.0f;
  const Targets tneg{{}, &negative};
  CHECK_THROWS_WITH_AS(loss.forward(x, tneg),
                       "loss categorical_cross_entropy: the targets of example 0 of the batch, "
                       "position 2 of its 3 (-1 at class 0, summing to -1) are not a distribution "
                       "over the classes (one-hot, or values in [0, 1] summing to 1) nor a row of "
                       "zeros (a position without a target)",
                       InvalidArgument);
}

TEST_CASE("sparse categorical cross-entropy: a class index per row, as the one-hot rows give it") {
  // Two examples of 3 steps of 4 classes; a step without a target as -1 and as -100.
  Tensor x = random_tensor({2, 3, 4}, 9, -3.0f, 3.0f);
  Tensor sparse({2, 3}, std::vector<float>{2, 0, -1, 3, -100, 1});
  Tensor onehot({2, 3, 4});
  for (int r = 0; r < 6; ++r)
    if (sparse[r] >= 0) onehot[r * 4 + static_cast<int>(sparse[r])] = 1.0f;
  const Targets ts{{}, &sparse}, to{{}, &onehot};
  SparseCategoricalCrossEntropyLoss loss;
  CategoricalCrossEntropyLoss dense;
  loss.check({3, 4}, TargetSpec::values({3}));
  CHECK(loss.forward(x, ts) == doctest::Approx(dense.forward(x, to)).epsilon(1e-6));
  Tensor grad, dense_grad;
  loss.backward(grad);
  dense.backward(dense_grad);
  for (std::int64_t i = 0; i < x.size(); ++i) CHECK(grad[i] == doctest::Approx(dense_grad[i]).epsilon(1e-6));
  check_gradient(loss, x, ts);
  // The logits as one flat vector per example: the targets still say the rows.
  Tensor flat_x({2, 12}, x.span());
  CHECK(loss.forward(flat_x, ts) == doctest::Approx(dense.forward(x, to)).epsilon(1e-6));
  SparseCategoricalAccuracy accuracy;
  CategoricalAccuracy dense_accuracy;
  CHECK(accuracy.compute(x, ts) == doctest::Approx(dense_accuracy.compute(x, to)));
  CHECK(accuracy.counts(x, ts, 0.0f) == dense_accuracy.counts(x, to, 0.0f));
  const Tensor p = loss.probabilities(x);
  double row = 0;
  for (int c = 0; c < 4; ++c) row += p[8 + c];
  CHECK(row == doctest::Approx(1.0));
  CHECK(make_loss("sparse_categorical_cross_entropy")->name() == "sparse_categorical_cross_entropy");
  CHECK(default_metrics(loss).front()->name() == "sparse_categorical_accuracy");
  CHECK(make_metric("sparse_categorical_accuracy")->name() == "sparse_categorical_accuracy");
  CHECK(accuracy_metric(std::vector<std::string>{"mse", "sparse_categorical_accuracy"}) == 1);
  // Perplexity: the exponential of the loss, of either kind of target; counted over batches.
  Perplexity perplexity;
  perplexity.check({3, 4}, TargetSpec::values({3}));
  perplexity.check({3, 4}, TargetSpec::values({3, 4}));
  CHECK(perplexity.compute(x, ts) == doctest::Approx(std::exp(loss.forward(x, ts))).epsilon(1e-5));
  CHECK(perplexity.compute(x, to) == doctest::Approx(std::exp(loss.forward(x, ts))).epsilon(1e-5));
  CHECK(make_metric("perplexity")->name() == "perplexity");
  CHECK_FALSE(higher_is_better("perplexity"));
  // Every step padded: no mean, no gradient.
  Tensor none({2, 3}, std::vector<float>(6, -1.0f));
  const Targets tn{{}, &none};
  CHECK(loss.forward(x, tn) == 0.0f);
  loss.backward(grad);
  for (std::int64_t i = 0; i < x.size(); ++i) CHECK(grad[i] == 0.0f);
  CHECK(std::isnan(perplexity.compute(x, tn)));  // nothing measured: not 0, better than certain

  // What is not a class index is refused, naming it; so is data of another shape.
  Tensor outside({2, 3}, std::vector<float>{2, 0, 4, 3, 1, 1});
  CHECK_THROWS_WITH_AS(loss.forward(x, Targets{{}, &outside}),
                       "loss sparse_categorical_cross_entropy: target 4 (example 0 of the batch, "
                       "position 2 of its 3) is not a class index in [0, 4) nor negative (a "
                       "position without a target)",
                       InvalidArgument);
  Tensor fraction({2, 3}, std::vector<float>{2, 0.5f, 1, 3, 1, 1});
  CHECK_THROWS_WITH_AS(accuracy.compute(x, Targets{{}, &fraction}),
                       "metric sparse_categorical_accuracy: target 0.5 (example 0 of the batch, "
                       "position 1 of its 3) is not a class index in [0, 4) nor negative (a "
                       "position without a target)",
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(loss.check({3, 4}, TargetSpec::values({5})),
                       "loss sparse_categorical_cross_entropy does not fit the data: predictions [3, 4] per "
                       "example, float targets [5]; it needs a row of two or more logits per target (a class "
                       "index per step: predictions [steps, classes] for targets [steps])",
                       InvalidArgument);
  // Counts that divide are not enough: [4, 3] is 4 rows of 3 classes, not 3 of 4.
  CHECK_THROWS_AS(loss.check({4, 3}, TargetSpec::values({3})), InvalidArgument);
  loss.check({12}, TargetSpec::values({3}));  // one flat vector: 3 rows of 4
  CHECK_THROWS_WITH_AS(loss.check({3, 4}, TargetSpec::classes(4)),
                       "loss sparse_categorical_cross_entropy does not fit the data: predictions [3, 4] per "
                       "example, class labels in [0, 4); it needs float targets (a class index per step)",
                       InvalidArgument);
}

TEST_CASE("every loss refuses a batch of no examples, naming itself") {
  for (const std::string name : {"sigmoid_cross_entropy", "mse", "mae", "huber", "focal", "dice",
                                 "categorical_cross_entropy", "sparse_categorical_cross_entropy"}) {
    CAPTURE(name);
    const auto loss = make_loss(name);
    const Tensor predictions(Shape{0, 3});
    const Tensor values(Shape{0, 3});
    Targets targets;
    targets.values = &values;
    try {
      loss->forward(predictions, targets);
      FAIL("accepted");
    } catch (const InvalidArgument& e) {
      CHECK(std::string(e.what()) == "loss " + loss->name() + ": predictions [0, 3] have no batch");
    }
  }
  const auto softmax = make_loss("softmax_cross_entropy");
  Targets labels;
  CHECK_THROWS_AS(softmax->forward(Tensor(Shape{0, 3}), labels), InvalidArgument);
}
