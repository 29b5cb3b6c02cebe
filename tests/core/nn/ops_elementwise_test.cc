// Tests of core/nn/ops/elementwise.h: the element-wise activations and Reshape.
#include "cohort/core/nn/ops/elementwise.h"

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/ops/ops.h"
#include "core/nn/gradient_check.h"

using namespace cohort;
using cohort::testing::expect_layer_gradients;
using cohort::testing::GradientCheckOptions;
using cohort::testing::random_tensor;
using cohort::testing::spaced_tensor;
using Kind = ElementwiseActivation::Kind;

namespace {

std::vector<float> values(const Tensor& t) { return {t.span().begin(), t.span().end()}; }

// The layer's forward on `x` after building it for x's example shape.
Tensor run_forward(Layer& layer, const Tensor& x) {
  Graph graph;
  layer.build(graph, Shape(x.shape().begin() + 1, x.shape().end()));
  Tensor y;
  layer.forward(x, y, {});
  return y;
}

// Every output within `tolerance` (absolute plus relative) of f(x) computed in double.
template <typename F>
void check_elementwise(Kind kind, F f, double tolerance, float alpha = 0.2f) {
  ElementwiseActivation layer("act", kind, alpha);
  const Tensor x = random_tensor({4, 5, 7}, 11, -6.0f, 6.0f);
  const Tensor y = run_forward(layer, x);
  REQUIRE(y.shape() == x.shape());
  for (std::int64_t i = 0; i < x.size(); ++i) {
    const double expected = f(static_cast<double>(x[i]));
    INFO("x = ", x[i]);
    REQUIRE(std::abs(y[i] - expected) <= tolerance * (1.0 + std::abs(expected)));
  }
}

void check_gradients(Kind kind, const Shape& shape, float alpha = 0.2f) {
  Graph graph;
  ElementwiseActivation layer("act", kind, alpha);
  layer.build(graph, Shape(shape.begin() + 1, shape.end()));
  // Spread over [-3, 3], 0.1 or more apart: LeakyReLU's kink is never within a step.
  Tensor x = spaced_tensor(shape, 3, 6.0f / static_cast<float>(num_elements(shape)));
  GradientCheckOptions options;
  options.step = 1e-3;
  expect_layer_gradients(layer, graph, x, {}, options);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  FAIL("no InvalidArgument");
  return "";
}

}  // namespace

TEST_CASE("LeakyReLU by hand: slope alpha below 0") {
  ElementwiseActivation layer("leaky", Kind::kLeakyRelu, 0.2f);
  Tensor x({1, 4}, std::vector<float>{-2.0f, -0.5f, 0.5f, 3.0f});
  Graph graph;
  CHECK(layer.build(graph, {4}) == Shape{4});
  Tensor y, dx;
  layer.forward(x, y, {});
  CHECK(y[0] == doctest::Approx(-0.4));
  CHECK(y[1] == doctest::Approx(-0.1));
  CHECK(y[2] == 0.5f);
  CHECK(y[3] == 3.0f);
  const Tensor dy({1, 4}, std::vector<float>{1, 2, 3, 4});
  layer.backward(x, y, dy, &dx, {});
  CHECK(dx[0] == doctest::Approx(0.2));
  CHECK(dx[1] == doctest::Approx(0.4));
  CHECK(dx[2] == 3.0f);
  CHECK(dx[3] == 4.0f);
  layer.backward(x, y, dy, nullptr, {});  // no input gradient asked: nothing to do
}

TEST_CASE("the activations match their formulas in double") {
  check_elementwise(Kind::kLeakyRelu, [](double x) { return x > 0 ? x : 0.1 * x; }, 1e-6, 0.1f);
  check_elementwise(Kind::kSigmoid, [](double x) { return 1.0 / (1.0 + std::exp(-x)); }, 1e-6);
  check_elementwise(Kind::kTanh, [](double x) { return std::tanh(x); }, 1e-6);
  check_elementwise(Kind::kGelu,
                    [](double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }, 1e-6);
  check_elementwise(Kind::kSilu, [](double x) { return x / (1.0 + std::exp(-x)); }, 1e-6);
  check_elementwise(Kind::kSoftplus, [](double x) { return std::log1p(std::exp(x)); }, 1e-6);
  check_elementwise(Kind::kElu, [](double x) { return x > 0 ? x : 0.7 * std::expm1(x); }, 1e-6, 0.7f);
}

TEST_CASE("softplus and SiLU stay finite and exact far from 0") {
  for (const Kind kind : {Kind::kSoftplus, Kind::kSilu}) {
    ElementwiseActivation layer("a", kind);
    Graph graph;
    layer.build(graph, {3});
    const Tensor x({1, 3}, std::vector<float>{-200.0f, 0.0f, 200.0f});
    const Tensor y = run_forward(layer, x);
    CHECK(y[0] == doctest::Approx(0.0));
    CHECK(y[1] == doctest::Approx(kind == Kind::kSoftplus ? std::log(2.0) : 0.0));
    CHECK(y[2] == doctest::Approx(200.0));
  }
}

TEST_CASE("GELU at a few points, from the erf formula") {
  ElementwiseActivation layer("gelu", Kind::kGelu);
  const Tensor x({1, 5}, std::vector<float>{-3.0f, -1.0f, 0.0f, 1.0f, 2.5f});
  const Tensor y = run_forward(layer, x);
  // 0.5 x (1 + erf(x / sqrt 2)), to 8 significant digits.
  CHECK(y[0] == doctest::Approx(-0.0040496941).epsilon(1e-5));
  CHECK(y[1] == doctest::Approx(-0.15865525).epsilon(1e-5));
  CHECK(y[2] == 0.0f);
  CHECK(y[3] == doctest::Approx(0.84134475).epsilon(1e-5));
  CHECK(y[4] == doctest::Approx(2.4844758).epsilon(1e-5));
  // The derivative Phi(x) + x phi(x).
  Graph graph;
  layer.build(graph, {5});
  const Tensor dy({1, 5}, std::vector<float>{1, 1, 1, 1, 1});
  Tensor dx;
  layer.backward(x, y, dy, &dx, {});
  for (std::int64_t i = 0; i < 5; ++i) {
    const double v = x[i];
    const double phi = std::exp(-0.5 * v * v) / std::sqrt(2.0 * M_PI);
    const double cdf = 0.5 * (1.0 + std::erf(v / std::sqrt(2.0)));
    CHECK(dx[i] == doctest::Approx(cdf + v * phi).epsilon(1e-5));
  }
  CHECK(dx[3] == doctest::Approx(1.0833155).epsilon(1e-5));
}

TEST_CASE("Sigmoid stays finite at +-100 and beyond") {
  ElementwiseActivation layer("sigmoid", Kind::kSigmoid);
  const Tensor x({1, 4}, std::vector<float>{-100.0f, 100.0f, -1000.0f, 1000.0f});
  Graph graph;
  layer.build(graph, {4});
  Tensor y, dx;
  layer.forward(x, y, {});
  for (float v : y.span()) CHECK(std::isfinite(v));
  // Far below zero the value is 0 or a denormal, as each CPU level's exp() rounds it (SSE4.2's
  // Eigen exp() stops at exp(-88.7) = 2.9e-39).
  for (int i : {0, 2}) {
    CHECK(y[i] >= 0.0f);
    CHECK(y[i] < 1e-30f);
  }
  CHECK(y[1] == 1.0f);
  CHECK(y[3] == 1.0f);
  const Tensor dy({1, 4}, std::vector<float>{1, 1, 1, 1});
  layer.backward(x, y, dy, &dx, {});
  for (float v : dx.span()) {
    CHECK(std::isfinite(v));
    CHECK(std::abs(v) < 1e-30f);
  }
}

TEST_CASE("Softmax over the last axis: a reference, rows summing to 1, large logits") {
  ElementwiseActivation layer("softmax", Kind::kSoftmax);
  Tensor x = random_tensor({2, 3, 5}, 4, -4.0f, 4.0f);
  // One row of huge logits: exp() of them would overflow without the max subtracted.
  const std::vector<float> huge = {1000.0f, 0.0f, -1000.0f, 999.0f, 1000.0f};
  for (int k = 0; k < 5; ++k) x[5 + k] = huge[static_cast<std::size_t>(k)];
  const Tensor y = run_forward(layer, x);
  REQUIRE(y.shape() == x.shape());
  for (std::int64_t r = 0; r < 6; ++r) {
    CAPTURE(r);
    double max = x[r * 5];
    for (int k = 1; k < 5; ++k) max = std::max<double>(max, x[r * 5 + k]);
    double sum = 0.0, total = 0.0;
    for (int k = 0; k < 5; ++k) sum += std::exp(x[r * 5 + k] - max);
    for (int k = 0; k < 5; ++k) {
      const float v = y[r * 5 + k];
      REQUIRE(std::isfinite(v));
      CHECK(v == doctest::Approx(std::exp(x[r * 5 + k] - max) / sum).epsilon(1e-5));
      total += v;
    }
    CHECK(total == doctest::Approx(1.0).epsilon(1e-6));
  }
  // The huge row: e^0, 0, 0, e^-1, e^0 over 2 + e^-1.
  const double z = 2.0 + std::exp(-1.0);
  CHECK(y[5] == doctest::Approx(1.0 / z));
  CHECK(y[6] == 0.0f);
  CHECK(y[7] == 0.0f);
  CHECK(y[8] == doctest::Approx(std::exp(-1.0) / z));
}

TEST_CASE("Softmax backward by hand: dx = y * (dy - sum(dy * y))") {
  Graph graph;
  ElementwiseActivation layer("softmax", Kind::kSoftmax);
  layer.build(graph, {2});
  const Tensor x({1, 2}, std::vector<float>{0.0f, 0.0f});
  Tensor y, dx;
  layer.forward(x, y, {});
  CHECK(values(y) == std::vector<float>{0.5f, 0.5f});
  const Tensor dy({1, 2}, std::vector<float>{1.0f, 3.0f});
  layer.backward(x, y, dy, &dx, {});
  // sum(dy * y) = 2: dx = 0.5 * (-1, 1).
  CHECK(values(dx) == std::vector<float>{-0.5f, 0.5f});
}

TEST_CASE("the activations' gradients match finite differences") {
  check_gradients(Kind::kLeakyRelu, {3, 4, 5});
  check_gradients(Kind::kLeakyRelu, {2, 7}, -0.5f);  // a negative slope: the input decides
  check_gradients(Kind::kSigmoid, {3, 4, 5});
  check_gradients(Kind::kTanh, {3, 4, 5});
  check_gradients(Kind::kGelu, {3, 4, 5});
  check_gradients(Kind::kSoftmax, {3, 4, 5});
  check_gradients(Kind::kSilu, {3, 4, 5});
  check_gradients(Kind::kSoftplus, {3, 4, 5});
  check_gradients(Kind::kElu, {3, 4, 5}, 1.0f);
}

TEST_CASE("activation() makes each kind and rejects unknown names") {
  auto kind_of = [](const std::string& function) {
    auto layer = activation("a", function, 0.3f);
    auto* act = dynamic_cast<ElementwiseActivation*>(layer.get());
    REQUIRE(act != nullptr);
    CHECK(act->name() == "a");
    return act->kind();
  };
  CHECK(kind_of("leaky_relu") == Kind::kLeakyRelu);
  CHECK(kind_of("sigmoid") == Kind::kSigmoid);
  CHECK(kind_of("tanh") == Kind::kTanh);
  CHECK(kind_of("gelu") == Kind::kGelu);
  CHECK(kind_of("softmax") == Kind::kSoftmax);
  CHECK(kind_of("silu") == Kind::kSilu);
  CHECK(kind_of("swish") == Kind::kSilu);
  CHECK(kind_of("softplus") == Kind::kSoftplus);
  CHECK(kind_of("elu") == Kind::kElu);
  // Each function's own alpha when none is given: LeakyReLU 0.2, ELU 1.
  const Tensor minus_two({1, 1}, std::vector<float>{-2.0f});
  CHECK(run_forward(*activation("l", "leaky_relu"), minus_two)[0] == doctest::Approx(-0.4));
  CHECK(run_forward(*activation("e", "elu"), minus_two)[0] == doctest::Approx(std::expm1(-2.0)));
  auto relu_layer = activation("r", "relu");
  CHECK(dynamic_cast<ReLU*>(relu_layer.get()) != nullptr);
  CHECK(relu_layer->name() == "r");
  // alpha reaches LeakyReLU.
  auto leaky = activation("l", "leaky_relu", 0.5f);
  const Tensor y = run_forward(*leaky, Tensor({1, 2}, std::vector<float>{-2.0f, 2.0f}));
  CHECK(values(y) == std::vector<float>{-1.0f, 2.0f});

  const std::string message = error_of([] { activation("act", "mish"); });
  CHECK(message.find("\"act\"") != std::string::npos);
  CHECK(message.find("mish") != std::string::npos);
  for (const char* known : {"relu", "leaky_relu", "sigmoid", "tanh", "gelu", "softmax", "silu", "softplus", "elu"})
    CHECK(message.find(known) != std::string::npos);
}

TEST_CASE("Softmax needs a last axis") {
  Graph graph;
  ElementwiseActivation layer("softmax", Kind::kSoftmax);
  CHECK_THROWS_AS(layer.build(graph, {}), InvalidArgument);
}

TEST_CASE("Reshape: examples take the target shape, -1 filled in; values in order") {
  Graph graph;
  Reshape layer("reshape", {4, -1});
  CHECK(layer.build(graph, {2, 3, 4}) == Shape{4, 6});
  Tensor x = random_tensor({3, 2, 3, 4}, 5);
  Tensor y;
  layer.forward(x, y, {});
  CHECK(y.shape() == Shape{3, 4, 6});
  CHECK(values(y) == values(x));
  expect_layer_gradients(layer, graph, x);
  Tensor dy = random_tensor(y.shape(), 6), dx;
  layer.backward(x, y, dy, &dx, {});
  CHECK(dx.shape() == x.shape());
  CHECK(values(dx) == values(dy));

  auto flat = reshape("flat", {-1});
  CHECK(flat->build(graph, {2, 3, 4}) == Shape{24});
  auto exact = reshape("exact", {3, 8});
  CHECK(exact->build(graph, {2, 3, 4}) == Shape{3, 8});
  CHECK(exact->name() == "exact");
}

TEST_CASE("Reshape rejects element counts that differ and more than one -1, naming the layer") {
  Graph graph;
  const std::vector<Shape> targets = {{5, 5}, {-1, 5}, {-1, -1}, {0, -1}, {-2, 12}};
  for (const Shape& target : targets) {
    CAPTURE(to_string(target));
    Reshape layer("bad", target);
    const std::string message = error_of([&] { layer.build(graph, {2, 3, 4}); });
    CHECK(message.find("\"bad\"") != std::string::npos);
  }
}
