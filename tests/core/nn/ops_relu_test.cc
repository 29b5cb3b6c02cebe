#include <doctest/doctest.h>

#include <vector>

#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/ops/ops.h"
#include "core/nn/gradient_check.h"

using namespace cohort;
using cohort::testing::expect_layer_gradients;
using cohort::testing::spaced_tensor;

TEST_CASE("ReLU forward and backward by hand") {
  Graph graph;
  ReLU layer("relu");
  CHECK(layer.build(graph, {2, 2}) == Shape{2, 2});
  Tensor x({1, 2, 2}, std::vector<float>{-1, 2, 0, 3}), y, dx;
  layer.forward(x, y, {});
  CHECK(std::vector<float>(y.span().begin(), y.span().end()) == std::vector<float>{0, 2, 0, 3});
  Tensor dy({1, 2, 2}, std::vector<float>{5, 6, 7, 8});
  layer.backward(x, y, dy, &dx, {});
  CHECK(std::vector<float>(dx.span().begin(), dx.span().end()) == std::vector<float>{0, 6, 0, 8});
}

TEST_CASE("ReLU gradients match finite differences") {
  Graph graph;
  ReLU layer("relu");
  layer.build(graph, {3, 4});
  Tensor x = spaced_tensor({2, 3, 4}, 5);  // no input within 0.025 of the kink
  expect_layer_gradients(layer, graph, x);
}
