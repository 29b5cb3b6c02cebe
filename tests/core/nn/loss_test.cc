// Losses and metrics as objects (core/nn/loss.h): values against their formulas, gradients
// against finite differences, and the checks of a loss against the data.
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

// Uniform draws in [0, 1) from a 64-bit linear congruential generator: the same on every
// standard library, unlike std's distributions.
struct Uniform {
  std::uint64_t state;
  double operator()() {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>(state >> 11) / 9007199254740992.0;
  }
};

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

TEST_CASE("precision and recall, of sigmoid outputs and of one class of a classifier") {
  // Decisions: logit > 0. Predicted positive: 0 (a positive) and 2 (not): precision 1/2. The
  // positives 0 and 1: one found, recall 1/2.
  Tensor logits({1, 4}, std::vector<float>{2, -1, 0.5f, -3});
  Tensor targets({1, 4}, std::vector<float>{1, 1, 0, 0});
  const Targets t{{}, &targets};
  CHECK(Precision().compute(logits, t) == doctest::Approx(0.5));
  CHECK(Recall().compute(logits, t) == doctest::Approx(0.5));
  // Class 1 against the rest: rows 0 and 2 choose class 1; labels 1 at rows 0, 1.
  Tensor rows({4, 3}, std::vector<float>{0, 5, 1, 3, 2, 1, 0, 1, 0.5f, 1, 0, 0});
  const std::vector<std::int32_t> labels = {1, 1, 2, 0};
  CHECK(Precision().compute(rows, Targets{labels, nullptr}) == doctest::Approx(0.5));
  CHECK(Recall().compute(rows, Targets{labels, nullptr}) == doctest::Approx(0.5));
  // Class 0: chosen by rows 1 and 3, the label of row 3 alone.
  CHECK(Precision(0).compute(rows, Targets{labels, nullptr}) == doctest::Approx(0.5));
  CHECK(Recall(0).compute(rows, Targets{labels, nullptr}) == doctest::Approx(1.0));
  CHECK(Recall(2).compute(rows, Targets{labels, nullptr}) == doctest::Approx(0.0));
  CHECK_THROWS_AS(Precision(3).check({3}, TargetSpec::classes(3)), InvalidArgument);
  CHECK_THROWS_AS(Recall(-1), InvalidArgument);
  // F1, their harmonic mean from the counts: sigmoid outputs tp 1, fp 1, fn 1: 2/4; class 0 of
  // the classifier tp 1, fp 1, fn 0: 2/3; no positive anywhere: 0.
  CHECK(F1Score().compute(logits, t) == doctest::Approx(0.5));
  CHECK(F1Score(0).compute(rows, Targets{labels, nullptr}) == doctest::Approx(2.0 / 3));
  Tensor negatives({1, 2}, std::vector<float>{-1, -2});
  Tensor zeros({1, 2}, std::vector<float>{0, 0});
  CHECK(F1Score().compute(negatives, Targets{{}, &zeros}) == 0.0f);
  // By name, of class 1 or of the class after '@'.
  CHECK(make_metric("f1")->name() == "f1");
  CHECK(make_metric("recall@1")->name() == "recall@1");  // fetched by the name asked for
  CHECK(make_metric("recall@0")->name() == "recall@0");
  CHECK(make_metric("recall@0")->compute(rows, Targets{labels, nullptr}) == doctest::Approx(1.0));
  CHECK(make_metric("precision@12")->name() == "precision@12");
  CHECK(make_metric("auc@2")->name() == "auc@2");
  for (const char* bad : {"recall@", "recall@-1", "recall@x", "accuracy@1", "f1@1.5"})
    CHECK_THROWS_WITH_AS(make_metric(bad), doctest::Contains("a class after '@' is for precision, recall, f1, auc and pr_auc"),
                         InvalidArgument);
  // Of 0/1 targets every output counts together: a class is refused, not ignored.
  CHECK_NOTHROW(make_metric("recall")->check({5}, TargetSpec::values({5})));
  CHECK_THROWS_WITH_AS(make_metric("recall@3")->check({5}, TargetSpec::values({5})),
                       doctest::Contains("metric recall@3 does not fit the data: predictions [5] per example"),
                       InvalidArgument);
  CHECK_THROWS_AS(make_metric("f1@1")->check({5}, TargetSpec::values({5})), InvalidArgument);
  CHECK(higher_is_better("f1@3"));
  CHECK(higher_is_better("precision@0"));
  CHECK_FALSE(higher_is_better("mse"));
}

TEST_CASE("decision metrics of named classes: by name, and named by the class they score") {
  // Names numbered in sorted order, as a CSV file's: "fraud" is 0, "legit" 1. Rows 0 and 2
  // choose fraud, the labels fraud at rows 0 and 1.
  const std::vector<std::string> classes = {"fraud", "legit"};
  Tensor rows({4, 2}, std::vector<float>{2, 0, 0, 1, 3, 1, -1, 1});
  const std::vector<std::int32_t> labels = {0, 0, 1, 1};
  const Targets t{labels, nullptr};
  const auto fraud = make_metric("precision@fraud", classes);
  CHECK(fraud->name() == "precision@fraud");
  CHECK(fraud->compute(rows, t) == doctest::Approx(0.5));
  CHECK(make_metric("recall@fraud", classes)->compute(rows, t) == doctest::Approx(0.5));
  CHECK(make_metric("f1@legit", classes)->name() == "f1@legit");
  CHECK(dynamic_cast<BinaryDecisionMetric&>(*make_metric("auc@fraud", classes)).positive_class() == 0);
  // Asked for without a class, class 1 is scored, and the name says which it is.
  const auto plain = make_metric("precision", classes);
  CHECK(plain->name() == "precision@legit");
  CHECK(plain->compute(rows, t) == doctest::Approx(Precision(1).compute(rows, t)));
  // A number still picks a class, and keeps the name it was asked by; a name comes first.
  CHECK(make_metric("recall@0", classes)->name() == "recall@0");
  CHECK(make_metric("recall@0", classes)->compute(rows, t) == doctest::Approx(0.5));
  const std::vector<std::string> digits = {"0", "1", "x"};
  CHECK(dynamic_cast<BinaryDecisionMetric&>(*make_metric("recall@1", digits)).positive_class() == 1);
  const std::vector<std::string> shifted = {"1", "x"};
  CHECK(dynamic_cast<BinaryDecisionMetric&>(*make_metric("recall@1", shifted)).positive_class() == 0);
  CHECK_THROWS_WITH_AS(make_metric("precision@frod", classes),
                       "metric 'precision@frod': no class named 'frod' (the classes: fraud, legit)", InvalidArgument);
  CHECK_THROWS_WITH_AS(make_metric("accuracy@fraud", classes), doctest::Contains("unknown metric 'accuracy@fraud'"),
                       InvalidArgument);
  CHECK(make_metric("accuracy", classes)->name() == "accuracy");
  CHECK(higher_is_better("precision@legit"));
}

TEST_CASE("AUC: bins of the log-odds, near the exact area, 1 for a perfect ranking") {
  // 400 scores; the positives' drawn a little higher: the exact area is the chance that a
  // positive outscores a negative.
  Tensor logits({400, 1}), targets({400, 1});
  Uniform uniform{12345};
  for (int i = 0; i < 400; ++i) {
    targets[i] = i % 3 == 0 ? 1.0f : 0.0f;
    logits[i] = static_cast<float>(4 * uniform() - 2 + (targets[i] > 0 ? 1.0 : 0.0));
  }
  double wins = 0, pairs = 0;
  for (int i = 0; i < 400; ++i)
    for (int j = 0; j < 400; ++j)
      if (targets[i] > 0 && targets[j] == 0) {
        pairs += 1;
        wins += logits[i] > logits[j] ? 1 : logits[i] == logits[j] ? 0.5 : 0;
      }
  Auc auc;
  const Targets t{{}, &targets};
  CHECK(auc.compute(logits, t) == doctest::Approx(wins / pairs).epsilon(0.01));
  // Counted in two halves and summed, the same as the whole (what an evaluation does).
  const Tensor first({200, 1}, std::vector<float>(logits.data(), logits.data() + 200));
  const Tensor second({200, 1}, std::vector<float>(logits.data() + 200, logits.data() + 400));
  const Tensor t1({200, 1}, std::vector<float>(targets.data(), targets.data() + 200));
  const Tensor t2({200, 1}, std::vector<float>(targets.data() + 200, targets.data() + 400));
  for (Metric* metric : std::initializer_list<Metric*>{new Auc(), new Precision(), new Recall(), new F1Score()}) {
    std::unique_ptr<Metric> owned(metric);
    CAPTURE(metric->name());
    std::vector<double> sum = metric->counts(first, Targets{{}, &t1}, 0);
    const std::vector<double> more = metric->counts(second, Targets{{}, &t2}, 0);
    for (std::size_t k = 0; k < sum.size(); ++k) sum[k] += more[k];
    CHECK(metric->from_counts(sum) == doctest::Approx(metric->compute(logits, t)));
  }
  // A diverged model's NaN scores are above no threshold, as Keras counts them: a positive that
  // has one is never found (here the only one, 0), and another half of the time (0.5).
  Tensor diverged({1, 3}, std::vector<float>{std::nanf(""), 2, -1});
  Tensor mixed({1, 3}, std::vector<float>{1, 0, 0});
  CHECK(auc.compute(diverged, Targets{{}, &mixed}) == 0.0f);
  Tensor half({1, 3}, std::vector<float>{std::nanf(""), 3, -3});
  Tensor two({1, 3}, std::vector<float>{1, 1, 0});
  CHECK(auc.compute(half, Targets{{}, &two}) == doctest::Approx(0.5));
  Tensor separated({2, 2}, std::vector<float>{3, -3, 5, -4});
  Tensor truth({2, 2}, std::vector<float>{1, 0, 1, 0});
  CHECK(auc.compute(separated, Targets{{}, &truth}) == doctest::Approx(1.0));
  // Very confident scores, beyond log-odds of 16, keep their order on either side: positives at
  // 30 and 40 above negatives at 17 and 20 (all ties in one end bin before), and the mirror.
  Tensor confident({1, 4}, std::vector<float>{30, 40, 17, 20});
  Tensor split({1, 4}, std::vector<float>{1, 1, 0, 0});
  CHECK(auc.compute(confident, Targets{{}, &split}) == doctest::Approx(1.0));
  Tensor unsure({1, 4}, std::vector<float>{-17, -20, -30, -40});
  CHECK(auc.compute(unsure, Targets{{}, &split}) == doctest::Approx(1.0));
  Tensor far({1, 4}, std::vector<float>{1e30f, std::numeric_limits<float>::infinity(), 1e20f, -1e30f});
  // Past 16 * 2^16, one bin: the negative at 1e20 ties with both positives.
  CHECK(auc.compute(far, Targets{{}, &split}) == doctest::Approx(0.75));
  Tensor one_class({1, 2}, std::vector<float>{3, 5});
  Tensor ones({1, 2}, std::vector<float>{1, 1});
  CHECK(auc.compute(one_class, Targets{{}, &ones}) == 0.0f);
  CHECK(make_metric("auc")->name() == "auc");
  CHECK(make_metric("top3_accuracy")->name() == "top3_accuracy");
  CHECK_THROWS_AS(make_metric("top0_accuracy"), InvalidArgument);
  CHECK_THROWS_WITH_AS(make_metric("f2"), doctest::Contains("unknown metric 'f2'"), InvalidArgument);
}

TEST_CASE("AUC of a rare class whose scores are all near 0: within 1e-3 of the exact area") {
  // 1% positives among 20000, every score between 1e-4 and 1e-2 (log-uniform), the positives'
  // a little higher: 200 thresholds evenly over [0, 1], as Keras's, had most of them below the
  // first (1/199) and the area far off.
  constexpr int n = 20000;
  Tensor logits({n, 1}), targets({n, 1});
  Uniform uniform{99};
  std::vector<float> positives, negatives;
  for (int i = 0; i < n; ++i) {
    const bool positive = i % 100 == 0;
    const double p = std::pow(10.0, positive ? -2.4 + 0.4 * uniform() : -4 + 2 * uniform());
    targets[i] = positive ? 1.0f : 0.0f;
    logits[i] = static_cast<float>(std::log(p / (1 - p)));
    (positive ? positives : negatives).push_back(logits[i]);
  }
  // The exact area: the chance that a positive outscores a negative (a tie: a half).
  std::sort(negatives.begin(), negatives.end());
  double wins = 0;
  for (const float s : positives) {
    const auto below = std::lower_bound(negatives.begin(), negatives.end(), s) - negatives.begin();
    const auto ties = std::upper_bound(negatives.begin(), negatives.end(), s) - negatives.begin() - below;
    wins += static_cast<double>(below) + 0.5 * static_cast<double>(ties);
  }
  const double exact = wins / (static_cast<double>(positives.size()) * static_cast<double>(negatives.size()));
  REQUIRE(exact > 0.85);
  REQUIRE(exact < 0.97);
  CHECK(std::abs(Auc().compute(logits, Targets{{}, &targets}) - exact) < 1e-3);
  // The same as a classifier's class 1 against class 0 (its softmax: the same probabilities).
  Tensor rows({n, 2});
  std::vector<std::int32_t> labels(n);
  for (int i = 0; i < n; ++i) {
    rows[2 * i] = 0;
    rows[2 * i + 1] = logits[i];
    labels[static_cast<std::size_t>(i)] = targets[i] > 0 ? 1 : 0;
  }
  CHECK(std::abs(Auc(1).compute(rows, Targets{labels, nullptr}) - exact) < 1e-3);
  // And the scores near 1 alike: class 0's, 1 - p, ranked the other way round by the other class.
  CHECK(std::abs(Auc(0).compute(rows, Targets{labels, nullptr}) - exact) < 1e-3);
  // Near 1 as a sigmoid's and as a class's: log-odds 11 to 15, where a float probability is
  // within 2e-5 of 1 and would have lost most bins; the logits keep them.
  Tensor high = logits;
  for (int i = 0; i < n; ++i) {
    high[i] += 20.0f;
    rows[2 * i + 1] = high[i];
  }
  CHECK(std::abs(Auc().compute(high, Targets{{}, &targets}) - exact) < 1e-3);
  CHECK(std::abs(Auc(1).compute(rows, Targets{labels, nullptr}) - exact) < 1e-3);
}

TEST_CASE("PR AUC: average precision of a rare class, near the exact value, counted over batches") {
  // 2% positives among 5000, scores drawn apart (distinct): average precision is the mean, over
  // the positives ranked from the top, of the precision at each.
  constexpr int n = 5000;
  Tensor logits({n, 1}), targets({n, 1});
  Uniform uniform{7};
  std::vector<std::pair<float, bool>> ranked;
  for (int i = 0; i < n; ++i) {
    const bool positive = i % 50 == 0;
    targets[i] = positive ? 1.0f : 0.0f;
    logits[i] = static_cast<float>(8 * uniform() - 6 + (positive ? 3.0 : 0.0));
    ranked.emplace_back(logits[i], positive);
  }
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  double found = 0, sum = 0;
  for (std::size_t k = 0; k < ranked.size(); ++k)
    if (ranked[k].second) sum += ++found / static_cast<double>(k + 1);
  const double exact = sum / found;
  REQUIRE(exact > 0.2);
  REQUIRE(exact < 0.8);
  PrAuc pr;
  const Targets t{{}, &targets};
  CHECK(pr.name() == "pr_auc");
  CHECK(std::abs(pr.compute(logits, t) - exact) < 2e-3);
  // Two halves counted and summed: the whole's value.
  const Tensor first({n / 2, 1}, std::vector<float>(logits.data(), logits.data() + n / 2));
  const Tensor second({n / 2, 1}, std::vector<float>(logits.data() + n / 2, logits.data() + n));
  const Tensor t1({n / 2, 1}, std::vector<float>(targets.data(), targets.data() + n / 2));
  const Tensor t2({n / 2, 1}, std::vector<float>(targets.data() + n / 2, targets.data() + n));
  std::vector<double> counts = pr.counts(first, Targets{{}, &t1}, 0);
  const std::vector<double> more = pr.counts(second, Targets{{}, &t2}, 0);
  for (std::size_t k = 0; k < counts.size(); ++k) counts[k] += more[k];
  CHECK(pr.from_counts(counts) == doctest::Approx(pr.compute(logits, t)));
  // A perfect ranking is 1; one that puts every positive last, their share at the bottom.
  Tensor separated({1, 4}, std::vector<float>{3, 2, -1, -2});
  Tensor truth({1, 4}, std::vector<float>{1, 1, 0, 0});
  CHECK(pr.compute(separated, Targets{{}, &truth}) == doctest::Approx(1.0));
  Tensor reversed({1, 4}, std::vector<float>{-3, -2, 1, 2});
  CHECK(pr.compute(reversed, Targets{{}, &truth}) == doctest::Approx((1.0 / 3 + 2.0 / 4) / 2));
  Tensor none({1, 4}, std::vector<float>{0, 0, 0, 0});
  CHECK(pr.compute(separated, Targets{{}, &none}) == 0.0f);
  CHECK(make_metric("pr_auc@3")->name() == "pr_auc@3");
  CHECK(Metric::direction_by_name("pr_auc@3") == true);
}

TEST_CASE("metrics: accuracy, top-k, binary accuracy, mse") {
  Tensor x({3, 4}, std::vector<float>{0.1f, 0.5f, 0.3f, 0.2f,   //
                                      0.9f, 0.0f, 0.8f, 0.7f,   //
                                      0.0f, 0.1f, 0.2f, 0.3f});
  const std::vector<std::int32_t> labels = {2, 3, 3};
  const Targets t{labels, nullptr};
  CHECK(Accuracy().compute(x, t) == doctest::Approx(1.0 / 3));
  CHECK(TopKAccuracy(2).compute(x, t) == doctest::Approx(2.0 / 3));  // 0.3 is 2nd, 0.7 is 3rd
  CHECK(TopKAccuracy(3).compute(x, t) == doctest::Approx(1.0));
  CHECK(TopKAccuracy(2).name() == "top2_accuracy");
  // As TensorFlow's in_top_k: classes tied at the boundary are all in the top k; a row with a
  // logit that is not finite is never a hit.
  Tensor ties({2, 3}, std::vector<float>{1, 1, 1,  //
                                         std::nanf(""), 0, 1});
  const std::vector<std::int32_t> last = {2, 2};
  CHECK(TopKAccuracy(1).compute(ties, Targets{last, nullptr}) == doctest::Approx(0.5));
  CHECK(TopKAccuracy(3).compute(ties, Targets{last, nullptr}) == doctest::Approx(0.5));
  // Nor does a row with an infinite logit predict a class for Accuracy, or a class decision.
  const float inf = std::numeric_limits<float>::infinity();
  Tensor diverged({2, 3}, std::vector<float>{inf, 0, 1,  //
                                             2, 0, 1});
  const std::vector<std::int32_t> first = {0, 0};
  CHECK(Accuracy().compute(diverged, Targets{first, nullptr}) == doctest::Approx(0.5));
  CHECK(Precision(0).compute(diverged, Targets{first, nullptr}) == doctest::Approx(1.0));
  CHECK(Recall(0).compute(diverged, Targets{first, nullptr}) == doctest::Approx(0.5));
  Tensor logits({1, 4}, std::vector<float>{2, -1, 0.5f, -3});
  Tensor targets({1, 4}, std::vector<float>{1, 1, 0, 0});
  CHECK(BinaryAccuracy().compute(logits, Targets{{}, &targets}) == doctest::Approx(0.5));
  // A NaN logit is right about neither target, an infinite one is a prediction.
  Tensor nan_logits({1, 4}, std::vector<float>{std::nanf(""), std::nanf(""), -INFINITY, INFINITY});
  Tensor mixed({1, 4}, std::vector<float>{0, 1, 0, 1});
  CHECK(BinaryAccuracy().compute(nan_logits, Targets{{}, &mixed}) == doctest::Approx(0.5));
  CHECK(MeanSquaredError().compute(logits, Targets{{}, &targets}) ==
        doctest::Approx((1 + 4 + 0.25 + 9) / 4.0));
  CHECK_THROWS_AS(TopKAccuracy(0), InvalidArgument);
  // StepMetrics::accuracy: "accuracy", else the categorical or binary one (never a top-k).
  using Names = std::vector<std::string>;
  CHECK(accuracy_metric(Names{"top5_accuracy", "accuracy"}) == 1);
  CHECK(accuracy_metric(Names{"top5_accuracy", "categorical_accuracy"}) == 1);
  CHECK(accuracy_metric(Names{"mse", "binary_accuracy", "categorical_accuracy"}) == 1);
  CHECK(accuracy_metric(Names{"top5_accuracy", "mse"}) == -1);
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
