#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/ops/ops.h"
#include "core/nn/gradient_check.h"

using namespace cohort;
using cohort::testing::random_tensor;

TEST_CASE("SoftmaxCrossEntropy matches log-sum-exp by hand") {
  Tensor logits({2, 3}, std::vector<float>{1, 2, 3, 0, 0, 0});
  const std::vector<std::int32_t> labels = {2, 0};
  SoftmaxCrossEntropy loss;
  const double lse0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  const double expected = ((lse0 - 3.0) + std::log(3.0)) / 2.0;
  CHECK(loss.forward(logits, labels) == doctest::Approx(expected).epsilon(1e-6));
  Tensor grad;
  loss.backward(grad);
  REQUIRE(grad.shape() == Shape{2, 3});
  CHECK(grad[0] == doctest::Approx(std::exp(1.0 - lse0) / 2));
  CHECK(grad[2] == doctest::Approx((std::exp(3.0 - lse0) - 1) / 2));
  CHECK(grad[3] == doctest::Approx((1.0 / 3 - 1) / 2));
  CHECK(grad[4] == doctest::Approx(1.0 / 6));
}

TEST_CASE("SoftmaxCrossEntropy stays finite for extreme logits") {
  Tensor logits({2, 3}, std::vector<float>{1e4f, -1e4f, 0, -1e4f, -1e4f, -1e4f});
  const std::vector<std::int32_t> labels = {1, 0};
  SoftmaxCrossEntropy loss;
  const float value = loss.forward(logits, labels);
  CHECK(std::isfinite(value));
  CHECK(value == doctest::Approx((2e4 + std::log(3.0)) / 2).epsilon(1e-5));
  Tensor grad;
  loss.backward(grad);
  for (float g : grad.span()) CHECK(std::isfinite(g));
  CHECK(grad[0] == doctest::Approx(0.5));
  CHECK(grad[1] == doctest::Approx(-0.5));
}

TEST_CASE("SoftmaxCrossEntropy gradient matches finite differences") {
  Tensor logits = random_tensor({4, 5}, 3, -3.0f, 3.0f);
  const std::vector<std::int32_t> labels = {0, 4, 2, 2};
  SoftmaxCrossEntropy loss;
  loss.forward(logits, labels);
  Tensor grad;
  loss.backward(grad);
  for (std::int64_t i = 0; i < logits.size(); ++i) {
    const double numeric = cohort::central_difference(logits[i], 1e-2, [&] {
      SoftmaxCrossEntropy probe;
      return static_cast<double>(probe.forward(logits, labels));
    });
    CHECK(grad[i] == doctest::Approx(numeric).epsilon(1e-2).scale(0.1));
  }
}

TEST_CASE("SoftmaxCrossEntropy rejects bad labels") {
  Tensor logits({2, 3});
  SoftmaxCrossEntropy loss;
  CHECK_THROWS_AS(loss.forward(logits, std::vector<std::int32_t>{0}), InvalidArgument);
  CHECK_THROWS_AS(loss.forward(logits, std::vector<std::int32_t>{0, 3}), InvalidArgument);
  CHECK_THROWS_AS(loss.forward(logits, std::vector<std::int32_t>{-1, 0}), InvalidArgument);
}

TEST_CASE("accuracy counts rows whose top logit is the label") {
  Tensor logits({4, 3}, std::vector<float>{0, 1, 0,   //
                                           5, 1, 2,   //
                                           0, 0, 9,   //
                                           1, 1, 0});  // a tie goes to the first
  CHECK(accuracy(logits, std::vector<std::int32_t>{1, 0, 2, 0}) == 1.0f);
  CHECK(accuracy(logits, std::vector<std::int32_t>{1, 1, 1, 1}) == 0.25f);
  CHECK_THROWS_AS(accuracy(logits, std::vector<std::int32_t>{1}), InvalidArgument);
}
