#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/ops/ops.h"
#include "cohort/core/nn/threads.h"
#include "core/nn/gradient_check.h"

using namespace cohort;
using cohort::testing::expect_layer_gradients;
using cohort::testing::GradientCheckOptions;
using cohort::testing::random_tensor;

namespace {

void set(Graph& graph, const std::string& name, std::vector<float> values) {
  const Variable* v = graph.find(name);
  REQUIRE(v != nullptr);
  REQUIRE(v->size == static_cast<std::int64_t>(values.size()));
  std::copy(values.begin(), values.end(), graph.values(*v).begin());
}

}  // namespace

TEST_CASE("Dense creates [in, units] kernel and [units] bias, flattening its input") {
  Graph graph;
  Dense layer("fc", 7);
  CHECK(layer.build(graph, {2, 3, 4}) == Shape{7});
  const Variable* kernel = graph.find("fc/kernel");
  const Variable* bias = graph.find("fc/bias");
  REQUIRE(kernel != nullptr);
  REQUIRE(bias != nullptr);
  CHECK(kernel->shape == Shape{24, 7});
  CHECK(kernel->initializer == Initializer::glorot_uniform());
  CHECK(bias->shape == Shape{7});
  CHECK(bias->initializer == Initializer::zeros());
  CHECK(layer.flops_per_example() == doctest::Approx(3 * 2 * 24 * 7 + 2 * 7));
  CHECK_THROWS_AS(Dense("bad", 0), InvalidArgument);
}

TEST_CASE("Dense forward matches a hand computation, with and without ReLU") {
  Graph graph;
  Dense linear("fc", 2);
  Dense rectified("fc", 2, Activation::kRelu);  // shares fc's variables
  linear.build(graph, {3});
  rectified.build(graph, {3});
  CHECK(graph.num_parameters() == 8);
  set(graph, "fc/kernel", {1, -1,   //
                           2, 0,    //
                           -1, 3});
  set(graph, "fc/bias", {0.5f, -4});
  Tensor x({2, 3}, std::vector<float>{1, 2, 3, -1, 0, 1});
  Tensor y;
  linear.forward(x, y, {});
  REQUIRE(y.shape() == Shape{2, 2});
  // Row 0: [1 + 4 - 3 + 0.5, -1 + 0 + 9 - 4]; row 1: [-1 + 0 - 1 + 0.5, 1 + 0 + 3 - 4].
  CHECK(y[0] == doctest::Approx(2.5));
  CHECK(y[1] == doctest::Approx(4));
  CHECK(y[2] == doctest::Approx(-1.5));
  CHECK(y[3] == doctest::Approx(0));
  rectified.forward(x, y, {});
  CHECK(y[0] == doctest::Approx(2.5));
  CHECK(y[2] == 0.0f);
}

TEST_CASE("Dense gradients match finite differences") {
  for (Activation activation : {Activation::kNone, Activation::kRelu}) {
    CAPTURE(static_cast<int>(activation));
    Graph graph;
    Dense layer("fc", 5, activation);
    layer.build(graph, {2, 3});
    graph.initialize(3);
    // Non-zero biases, so the bias gradient is tested away from a zero pre-activation too.
    for (float& b : graph.values(*graph.find("fc/bias"))) b = 0.3f;
    Tensor x = random_tensor({4, 2, 3}, 11);
    GradientCheckOptions options;
    options.step = 1e-3;
    expect_layer_gradients(layer, graph, x, {}, options);
  }
}

TEST_CASE("Dense over the last axis: one kernel at every position, as Keras's Dense on a sequence") {
  Graph graph;
  Dense layer("fc", 2, Activation::kNone, Initializer::glorot_uniform(), /*flatten=*/false);
  CHECK(layer.build(graph, {4, 3}) == Shape{4, 2});
  CHECK(graph.find("fc/kernel")->shape == Shape{3, 2});
  CHECK(layer.flops_per_example() == doctest::Approx(4 * (3 * 2 * 3 * 2 + 2 * 2)));
  set(graph, "fc/kernel", {1, -1,   //
                           2, 0,    //
                           -1, 3});
  set(graph, "fc/bias", {0.5f, -4});
  // Two examples of 4 steps; every step's 3 values go through the same kernel.
  const Tensor x = random_tensor({2, 4, 3}, 5);
  Tensor y;
  layer.forward(x, y, {});
  REQUIRE(y.shape() == Shape{2, 4, 2});
  for (std::int64_t row = 0; row < 8; ++row) {
    const float* v = x.data() + row * 3;
    CHECK(y[row * 2] == doctest::Approx(v[0] + 2 * v[1] - v[2] + 0.5f));
    CHECK(y[row * 2 + 1] == doctest::Approx(-v[0] + 3 * v[2] - 4));
  }
  for (Activation activation : {Activation::kNone, Activation::kRelu}) {
    CAPTURE(static_cast<int>(activation));
    Graph g;
    Dense per_step("fc", 5, activation, Initializer::glorot_uniform(), false);
    per_step.build(g, {6, 2, 3});  // any rank: the last axis
    g.initialize(3);
    for (float& b : g.values(*g.find("fc/bias"))) b = 0.3f;
    Tensor input = random_tensor({2, 6, 2, 3}, 11);
    GradientCheckOptions options;
    options.step = 1e-3;
    expect_layer_gradients(per_step, g, input, {}, options);
  }
}

TEST_CASE("Dense gradients for wide, narrow and larger-than-cache kernels match finite differences") {
  // Each size takes another orientation of the products (see dense.cc).
  struct Case {
    std::int64_t in, units;
  };
  // 40 and 61 units also leave the column sums of the bias gradient 1 to 3 vectors and a tail
  // after the passes of four vectors (bias_grad.h), at either vector width.
  for (const Case& c : {Case{40, 64}, Case{300, 7}, Case{2100, 256}, Case{30, 40}, Case{30, 61}}) {
    CAPTURE(c.in);
    CAPTURE(c.units);
    Graph graph;
    Dense layer("fc", c.units, Activation::kRelu);
    layer.build(graph, {c.in});
    graph.initialize(7);
    for (float& b : graph.values(*graph.find("fc/bias"))) b = 0.3f;
    Tensor x = random_tensor({3, c.in}, 12);
    GradientCheckOptions options;
    options.step = 1e-3;
    options.max_per_tensor = 60;
    expect_layer_gradients(layer, graph, x, {}, options);
  }
}

TEST_CASE("Dense on two threads computes what it does on one") {
  struct Case {
    std::int64_t batch, in, units;
  };
  for (const Case& c : {Case{64, 784, 256}, Case{5, 300, 7}, Case{9, 2100, 270}, Case{1, 40, 33}}) {
    CAPTURE(c.in);
    CAPTURE(c.units);
    Graph graph;
    Dense layer("fc", c.units, Activation::kRelu);
    layer.build(graph, {c.in});
    graph.initialize(3);
    for (float& b : graph.values(*graph.find("fc/bias"))) b = 0.1f;
    const Tensor x = random_tensor({c.batch, c.in}, 4);
    Tensor y1, y2, dx1, dx2;
    std::vector<float> g1(static_cast<std::size_t>(graph.num_parameters()));
    std::vector<float> g2(g1.size(), 5.0f);
    set_intra_op_threads(1);
    layer.forward(x, y1, {});
    const Tensor dy = random_tensor(y1.shape(), 5);
    layer.backward(x, y1, dy, &dx1, g1);
    set_intra_op_threads(2);
    layer.forward(x, y2, {});
    layer.backward(x, y2, dy, &dx2, g2);
    set_intra_op_threads(1);
    auto same = [](std::span<const float> a, std::span<const float> b) {
      REQUIRE(a.size() == b.size());
      float worst = 0.0f, largest = 0.0f;
      for (std::size_t i = 0; i < a.size(); ++i) {
        worst = std::max(worst, std::abs(a[i] - b[i]));
        largest = std::max(largest, std::abs(a[i]));
      }
      CHECK(largest > 0.0f);
      CHECK(worst <= 1e-5f * largest);
    };
    same(y1.span(), y2.span());
    same(dx1.span(), dx2.span());
    same(g1, g2);
  }
}

TEST_CASE("Dense backward overwrites its gradient slices and can skip the input gradient") {
  Graph graph;
  Dense layer("fc", 3);
  layer.build(graph, {4});
  graph.initialize(1);
  Tensor x = random_tensor({2, 4}, 5), y, dy = random_tensor({2, 3}, 6);
  layer.forward(x, y, {});
  std::vector<float> first(static_cast<std::size_t>(graph.num_parameters()), 0.0f);
  std::vector<float> garbage(first.size(), 123.0f);
  Tensor dx;
  layer.backward(x, y, dy, &dx, first);
  layer.backward(x, y, dy, nullptr, garbage);
  CHECK(first == garbage);
  CHECK(dx.shape() == Shape{2, 4});
}
