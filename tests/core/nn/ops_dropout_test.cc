#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/ops/ops.h"
#include "core/nn/gradient_check.h"

using namespace cohort;
using cohort::testing::expect_layer_gradients;
using cohort::testing::random_tensor;

namespace {

std::vector<float> values(const Tensor& t) { return {t.span().begin(), t.span().end()}; }

}  // namespace

TEST_CASE("Dropout is the identity when not training") {
  Graph graph;
  Dropout layer("drop", 0.5f);
  layer.build(graph, {100});
  Tensor x = random_tensor({4, 100}, 1), y, dx;
  OpContext eval;
  eval.training = false;
  layer.forward(x, y, eval);
  CHECK(values(y) == values(x));
  layer.backward(x, y, x, &dx, {});
  CHECK(values(dx) == values(x));
}

TEST_CASE("Dropout masks are a function of seed and layer name, scaled by 1/(1 - rate)") {
  Graph graph;
  Dropout a("drop", 0.25f), same_name("drop", 0.25f), other("other", 0.25f);
  for (Layer* l : {static_cast<Layer*>(&a), static_cast<Layer*>(&same_name), static_cast<Layer*>(&other)})
    l->build(graph, {1000});
  Tensor x({8, 1000});
  for (float& v : x.span()) v = 1.0f;
  OpContext step1;
  step1.seed = 1;
  OpContext step2;
  step2.seed = 2;
  Tensor y1, y1_again, y2, y_other;
  a.forward(x, y1, step1);
  same_name.forward(x, y1_again, step1);
  a.forward(x, y2, step2);
  other.forward(x, y_other, step1);
  CHECK(values(y1) == values(y1_again));
  CHECK(values(y1) != values(y2));
  CHECK(values(y1) != values(y_other));
  std::int64_t kept = 0;
  for (float v : y1.span()) {
    CHECK((v == 0.0f || v == doctest::Approx(1.0f / 0.75f)));
    kept += v != 0.0f;
  }
  // 8000 Bernoulli(0.75) draws: mean 6000, standard deviation ~39.
  CHECK(std::abs(kept - 6000) < 200);
}

TEST_CASE("Dropout gradients (fixed mask) match finite differences") {
  Graph graph;
  Dropout layer("drop", 0.4f);
  layer.build(graph, {3, 5});
  Tensor x = random_tensor({3, 3, 5}, 4);
  OpContext context;
  context.seed = 17;
  expect_layer_gradients(layer, graph, x, context);
  CHECK(values(layer.mask()) != std::vector<float>(45, 1.0f / 0.6f));
}

TEST_CASE("Dropout rejects rates outside [0, 1)") {
  CHECK_THROWS_AS(Dropout("d", 1.0f), InvalidArgument);
  CHECK_THROWS_AS(Dropout("d", -0.1f), InvalidArgument);
  CHECK_NOTHROW(Dropout("d", 0.0f));
}

TEST_CASE("normal_noise: standard normal draws, a function of the key alone") {
  std::vector<float> a(200000), again(200000), other(200000);
  normal_noise(5, a);
  normal_noise(5, again);
  normal_noise(6, other);
  CHECK(a == again);
  CHECK(a != other);
  double sum = 0, squares = 0, fourth = 0;
  std::int64_t beyond_two = 0, not_finite = 0;
  for (const float v : a) {
    not_finite += !std::isfinite(v);
    sum += v;
    squares += double(v) * v;
    fourth += double(v) * v * v * v;
    beyond_two += std::abs(v) > 2.0f;
  }
  CHECK(not_finite == 0);
  const double n = static_cast<double>(a.size());
  // Mean 0 (standard error 0.0022), variance 1 (0.0032), kurtosis 3 (0.011), P(|z| > 2) 0.0455.
  CHECK(std::abs(sum / n) < 0.01);
  CHECK(std::abs(squares / n - 1.0) < 0.015);
  CHECK(std::abs(fourth / n - 3.0) < 0.06);
  CHECK(std::abs(static_cast<double>(beyond_two) / n - 0.0455) < 0.003);
  // A prefix draws the same values: any batch size or split gives each element its own draw.
  std::vector<float> prefix(10);
  normal_noise(5, prefix);
  CHECK(std::vector<float>(a.begin(), a.begin() + 10) == prefix);
}

TEST_CASE("GaussianNoise adds N(0, stddev^2) in training, nothing in inference, and passes the gradient") {
  Graph graph;
  GaussianNoise layer("noise", 0.3f), other("other", 0.3f);
  layer.build(graph, {500});
  other.build(graph, {500});
  Tensor x = random_tensor({40, 500}, 1), y, y_again, y_other, y_next, dx;
  OpContext eval;
  eval.training = false;
  layer.forward(x, y, eval);
  CHECK(values(y) == values(x));
  OpContext step;
  step.seed = 9;
  layer.forward(x, y, step);
  layer.forward(x, y_again, step);
  other.forward(x, y_other, step);
  CHECK(values(y) == values(y_again));
  CHECK(values(y) != values(y_other));
  step.seed = 10;
  layer.forward(x, y_next, step);
  CHECK(values(y) != values(y_next));
  double sum = 0, squares = 0;
  for (std::int64_t i = 0; i < x.size(); ++i) {
    const double d = double(y[i]) - x[i];
    sum += d;
    squares += d * d;
  }
  const double n = static_cast<double>(x.size());
  CHECK(std::abs(sum / n) < 0.01);
  CHECK(std::sqrt(squares / n - (sum / n) * (sum / n)) == doctest::Approx(0.3).epsilon(0.02));
  layer.backward(x, y, x, &dx, {});
  CHECK(values(dx) == values(x));
  Tensor small = random_tensor({3, 500}, 4);
  expect_layer_gradients(layer, graph, small, step);
  CHECK_THROWS_AS(GaussianNoise("n", -0.1f), InvalidArgument);
  CHECK_THROWS_AS(GaussianNoise("n", std::nanf("")), InvalidArgument);
  CHECK(gaussian_noise("n", 0.1f)->name() == "n");
}
