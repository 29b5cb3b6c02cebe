#include <doctest/doctest.h>

#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/ops/ops.h"
#include "cohort/core/nn/threads.h"
#include "core/nn/gradient_check.h"

using namespace cohort;
using cohort::testing::expect_layer_gradients;
using cohort::testing::spaced_tensor;

TEST_CASE("MaxPool2D 2x2 on a 4x4 image, forward and backward by hand") {
  Graph graph;
  MaxPool2D pool("pool", 2, 2);
  CHECK(pool.build(graph, {4, 4, 1}) == Shape{2, 2, 1});
  CHECK(graph.num_parameters() == 0);
  Tensor x({1, 4, 4, 1}, std::vector<float>{1, 5, 2, 0,   //
                                            3, 4, 8, 1,   //
                                            -1, -2, 0, 0,  //
                                            -3, -4, 7, 9});
  Tensor y;
  pool.forward(x, y, {});
  CHECK(std::vector<float>(y.span().begin(), y.span().end()) == std::vector<float>{5, 8, -1, 9});
  Tensor dy({1, 2, 2, 1}, std::vector<float>{10, 20, 30, 40}), dx;
  pool.backward(x, y, dy, &dx, {});
  CHECK(std::vector<float>(dx.span().begin(), dx.span().end()) ==
        std::vector<float>{0, 10, 0, 0, 0, 0, 20, 0, 30, 0, 0, 0, 0, 0, 0, 40});
}

TEST_CASE("MaxPool2D SAME never picks padding, even when every pixel is negative") {
  Graph graph;
  MaxPool2D pool("pool", 2, 2, Padding::kSame);
  CHECK(pool.build(graph, {3, 3, 2}) == Shape{2, 2, 2});
  Tensor x({1, 3, 3, 2});
  for (std::int64_t i = 0; i < x.size(); ++i) x[i] = -100.0f - static_cast<float>(i);
  Tensor y;
  pool.forward(x, y, {});
  // Channel 0 pixels are -100, -102, ... (row-major, 2 channels); each window's max is its
  // top-left pixel, the smallest offset.
  CHECK(y[0] == -100.0f);  // (0,0)
  CHECK(y[1] == -101.0f);
  CHECK(y[2] == -104.0f);  // window (0,1): pixels (0,2) only in range, and (1,2)
  CHECK(y[4] == -112.0f);  // window (1,0): (2,0), (2,1)
  CHECK(y[6] == -116.0f);  // window (1,1): (2,2) alone
}

TEST_CASE("MaxPool2D gradients match finite differences") {
  struct Case {
    std::int64_t window, stride;
    Padding padding;
    Shape input;
  };
  const std::vector<Case> cases = {
      {2, 2, Padding::kValid, {2, 4, 4, 3}},
      {2, 2, Padding::kSame, {2, 5, 5, 3}},
      {3, 2, Padding::kValid, {2, 7, 7, 2}},  // overlapping windows share pixels
      {3, 2, Padding::kSame, {2, 6, 5, 2}},
      {3, 1, Padding::kSame, {1, 4, 4, 2}},
      // 16 channels at a time plus a remainder, with and without exactly tiling windows.
      {2, 2, Padding::kValid, {2, 4, 4, 20}},
      {2, 2, Padding::kValid, {1, 5, 4, 17}},
      {3, 2, Padding::kSame, {1, 5, 5, 33}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.window);
    CAPTURE(c.stride);
    CAPTURE(c.padding == Padding::kSame);
    Graph graph;
    MaxPool2D pool("pool", c.window, c.stride, c.padding);
    pool.build(graph, {c.input[1], c.input[2], c.input[3]});
    // Distinct values 0.05 apart: a 1e-2 step never changes which pixel wins.
    Tensor x = spaced_tensor(c.input, 21);
    expect_layer_gradients(pool, graph, x);
  }
}

TEST_CASE("MaxPool2D on two threads computes what it does on one") {
  for (Padding padding : {Padding::kValid, Padding::kSame}) {
    Graph graph;
    MaxPool2D pool("pool", 3, 2, padding);
    pool.build(graph, {9, 9, 20});
    const Tensor x = cohort::testing::random_tensor({5, 9, 9, 20}, 3);
    Tensor y1, y2, dx1, dx2;
    set_intra_op_threads(1);
    pool.forward(x, y1, {});
    const Tensor dy = cohort::testing::random_tensor(y1.shape(), 4);
    pool.backward(x, y1, dy, &dx1, {});
    set_intra_op_threads(2);
    pool.forward(x, y2, {});
    pool.backward(x, y2, dy, &dx2, {});
    set_intra_op_threads(1);
    CHECK(std::vector<float>(y1.span().begin(), y1.span().end()) ==
          std::vector<float>(y2.span().begin(), y2.span().end()));
    CHECK(std::vector<float>(dx1.span().begin(), dx1.span().end()) ==
          std::vector<float>(dx2.span().begin(), dx2.span().end()));
  }
}

TEST_CASE("MaxPool2D rejects bad windows") {
  CHECK_THROWS_AS(MaxPool2D("p", 0, 1), InvalidArgument);
  Graph graph;
  MaxPool2D pool("p", 3, 3);
  CHECK_THROWS_AS(pool.build(graph, {2, 2, 1}), InvalidArgument);
  CHECK_THROWS_AS(pool.build(graph, {4, 4}), InvalidArgument);
}
