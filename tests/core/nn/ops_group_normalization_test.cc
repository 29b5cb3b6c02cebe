// GroupNormalization: the normalisation of each example's groups of channels, its gradients, its
// threads, and values whose float squares overflow (LayerNormalization's too).
#include "cohort/core/nn/ops/normalization.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/ops/ops.h"
#include "core/nn/gradient_check.h"

using namespace cohort;
using cohort::testing::expect_layer_gradients;
using cohort::testing::ramp;
using cohort::testing::random_tensor;
using cohort::testing::set_variable;
using cohort::testing::with_batch;

TEST_CASE("GroupNormalization normalises each example's groups of channels over every position") {
  // [4, 3, 6]: 6 channels in 3 groups of 2, each normalised over 4 x 3 positions x 2 channels.
  const Shape example{4, 3, 6};
  const std::int64_t n = 3, c = 6, groups = 3, width = 2, positions = 12;
  const float eps = 1e-3f;
  Graph graph;
  GroupNormalization layer("gn", groups, eps);
  CHECK(layer.build(graph, example) == example);
  CHECK(graph.find("gn/gamma")->shape == Shape{c});
  CHECK(graph.find("gn/beta")->shape == Shape{c});
  CHECK(graph.num_state() == 0);
  graph.initialize(1);
  const std::vector<float> gamma = ramp(c, 0.5f, 0.2f), beta = ramp(c, 0.4f, -0.15f);
  set_variable(graph, "gn/gamma", gamma);
  set_variable(graph, "gn/beta", beta);
  Tensor x = random_tensor(with_batch(n, example), 16, -1.0f, 3.0f);
  for (std::int64_t i = 0; i < x.size(); ++i) x[i] *= 1.0f + static_cast<float>(i % c);  // scales apart
  Tensor y;
  layer.forward(x, y, {});
  REQUIRE(y.shape() == x.shape());
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t g = 0; g < groups; ++g) {
      double mean = 0, variance = 0;
      auto at = [&](std::int64_t p, std::int64_t k) { return (b * positions + p) * c + g * width + k; };
      for (std::int64_t p = 0; p < positions; ++p)
        for (std::int64_t k = 0; k < width; ++k) mean += x[at(p, k)];
      mean /= positions * width;
      for (std::int64_t p = 0; p < positions; ++p)
        for (std::int64_t k = 0; k < width; ++k) variance += (x[at(p, k)] - mean) * (x[at(p, k)] - mean);
      variance /= positions * width;
      for (std::int64_t p = 0; p < positions; ++p)
        for (std::int64_t k = 0; k < width; ++k) {
          const std::int64_t ch = g * width + k;
          const double expected = gamma[ch] * (x[at(p, k)] - mean) / std::sqrt(variance + eps) + beta[ch];
          REQUIRE(y[at(p, k)] == doctest::Approx(expected).epsilon(1e-5));
        }
    }
  // One group of a flat example is LayerNormalization over it (gamma 1, beta 0 in both).
  Graph a, b;
  GroupNormalization whole("gn", 1);
  LayerNormalization ln("ln");
  whole.build(a, {10});
  ln.build(b, {10});
  a.initialize(1);
  b.initialize(1);
  const Tensor flat = random_tensor({3, 10}, 17);
  Tensor from_group, from_layer;
  whole.forward(flat, from_group, {});
  ln.forward(flat, from_layer, {});
  for (std::int64_t i = 0; i < flat.size(); ++i) CHECK(from_group[i] == doctest::Approx(from_layer[i]));
  auto made = group_norm("gn2", 2, 1e-5f);
  REQUIRE(dynamic_cast<const GroupNormalization*>(made.get()) != nullptr);
}

TEST_CASE("Layer and group normalisation of values whose float squares overflow equal those of the values scaled down") {
  // Normalisation does not depend on the scale: x * 1e20 normalises as x does (epsilon aside),
  // although (x * 1e20 - mean)^2 is past what a float holds.
  Graph a, b;
  LayerNormalization ln("ln", 1e-30f);
  GroupNormalization gn("gn", 2, 1e-30f);
  ln.build(a, {4, 6});
  gn.build(b, {4, 6});
  a.initialize(1);
  b.initialize(1);
  const Tensor x = random_tensor({3, 4, 6}, 21, -1.0f, 3.0f);
  Tensor huge = x;
  for (std::int64_t i = 0; i < huge.size(); ++i) huge[i] *= 1e20f;
  for (Layer* layer : {static_cast<Layer*>(&ln), static_cast<Layer*>(&gn)}) {
    CAPTURE(layer->name());
    Tensor plain, scaled;
    layer->forward(x, plain, {});
    layer->forward(huge, scaled, {});
    for (std::int64_t i = 0; i < x.size(); ++i) REQUIRE(scaled[i] == doctest::Approx(plain[i]).epsilon(1e-4));
  }
}

TEST_CASE("GroupNormalization gradients; two threads compute what one does") {
  for (const auto& [example, groups] : {std::pair{Shape{3, 2, 4}, std::int64_t{2}},
                                        std::pair{Shape{5, 6}, std::int64_t{6}},
                                        std::pair{Shape{8}, std::int64_t{1}}}) {
    CAPTURE(to_string(example));
    CAPTURE(groups);
    Graph graph;
    GroupNormalization layer("gn", groups);
    layer.build(graph, example);
    graph.initialize(1);
    const std::int64_t c = example.back();
    set_variable(graph, "gn/gamma", ramp(c, 0.5f, 0.2f));
    set_variable(graph, "gn/beta", ramp(c, 0.4f, -0.15f));
    Tensor x = random_tensor(with_batch(3, example), 18, -1.0f, 3.0f);
    expect_layer_gradients(layer, graph, x);
  }
  Graph graph;
  GroupNormalization layer("gn", 4);
  layer.build(graph, {16, 16, 32});
  graph.initialize(2);
  const Tensor x = random_tensor({6, 16, 16, 32}, 19);
  cohort::testing::expect_same_on_threads(layer, graph, x, 2);
}

TEST_CASE("GroupNormalization refuses channels that do not split into its groups, naming it") {
  Graph graph;
  CHECK_THROWS_WITH_AS(group_norm("gn", 4)->build(graph, {8, 8, 6}),
                       "GroupNormalization \"gn\": 6 channels (input [8, 8, 6]) do not split into 4 groups",
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(GroupNormalization("gn", 0), "GroupNormalization \"gn\": groups = 0, must be >= 1",
                       InvalidArgument);
  CHECK_THROWS_AS(GroupNormalization("gn", 2, 0.0f), InvalidArgument);
}
