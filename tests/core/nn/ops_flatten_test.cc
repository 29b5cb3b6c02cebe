#include <doctest/doctest.h>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/ops/ops.h"
#include "core/nn/gradient_check.h"

using namespace cohort;
using cohort::testing::expect_layer_gradients;
using cohort::testing::random_tensor;

TEST_CASE("Flatten keeps the batch and the values, in order") {
  Graph graph;
  Flatten layer("flatten");
  CHECK(layer.build(graph, {2, 3, 4}) == Shape{24});
  CHECK_THROWS_AS(layer.build(graph, {}), InvalidArgument);
  Tensor x = random_tensor({2, 2, 3, 4}, 1), y;
  layer.forward(x, y, {});
  CHECK(y.shape() == Shape{2, 24});
  for (std::int64_t i = 0; i < x.size(); ++i) CHECK(y[i] == x[i]);
}

TEST_CASE("Flatten gradients match finite differences") {
  Graph graph;
  Flatten layer("flatten");
  layer.build(graph, {3, 2, 2});
  Tensor x = random_tensor({2, 3, 2, 2}, 2);
  expect_layer_gradients(layer, graph, x);
}
