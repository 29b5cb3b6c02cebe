// Losses and metrics as objects (core/nn/loss.h): values against their formulas, gradients
// against finite differences, and the checks of a loss against the data.
#include "cohort/core/nn/loss.h"

#include <doctest/doctest.h>

#include <cmath>
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
  Tensor logits({1, 4}, std::vector<float>{2, -1, 0.5f, -3});
  Tensor targets({1, 4}, std::vector<float>{1, 1, 0, 0});
  CHECK(BinaryAccuracy().compute(logits, Targets{{}, &targets}) == doctest::Approx(0.5));
  CHECK(MeanSquaredError().compute(logits, Targets{{}, &targets}) ==
        doctest::Approx((1 + 4 + 0.25 + 9) / 4.0));
  CHECK_THROWS_AS(TopKAccuracy(0), InvalidArgument);
}

TEST_CASE("a loss that does not fit the data is refused in one line naming both") {
  SoftmaxCrossEntropyLoss ce;
  MeanSquaredErrorLoss mse;
  CHECK_NOTHROW(ce.check({10}, TargetSpec::classes(10)));
  CHECK_THROWS_WITH_AS(ce.check({10}, TargetSpec::values({10})),
                       "loss softmax_cross_entropy does not fit the data: predictions [10] per "
                       "example, float targets [10]; it needs class labels (integers: floats are "
                       "targets; save the labels as integers, as numpy's y.astype(np.int32) gives)",
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
                       "mean_squared_error, mean_absolute_error, huber)",
                       InvalidArgument);
}
