// Tests of core/nn/ops/pooling.h: AvgPool2D and GlobalAveragePooling2D.
#include "cohort/core/nn/ops/pooling.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/ops/ops.h"
#include "cohort/core/nn/threads.h"
#include "core/nn/gradient_check.h"

using namespace cohort;
using cohort::testing::expect_layer_gradients;
using cohort::testing::random_tensor;

namespace {

std::vector<float> values(const Tensor& t) { return {t.span().begin(), t.span().end()}; }

// TensorFlow's average pooling in double, written out from its definition: SAME gives
// ceil(in / stride) outputs with the padding split evenly (the extra one after), and a window's
// mean is over the input pixels it covers.
Tensor reference_avg_pool(const Tensor& in, std::int64_t wh, std::int64_t ww, std::int64_t sh,
                          std::int64_t sw, bool same) {
  const std::int64_t n = in.dim(0), h = in.dim(1), w = in.dim(2), c = in.dim(3);
  auto out_and_pad = [&](std::int64_t size, std::int64_t window, std::int64_t stride) {
    if (!same) return std::pair<std::int64_t, std::int64_t>{(size - window) / stride + 1, 0};
    const std::int64_t out = (size + stride - 1) / stride;
    const std::int64_t pad = std::max<std::int64_t>(0, (out - 1) * stride + window - size);
    return std::pair<std::int64_t, std::int64_t>{out, pad / 2};
  };
  const auto [oh_count, pad_h] = out_and_pad(h, wh, sh);
  const auto [ow_count, pad_w] = out_and_pad(w, ww, sw);
  Tensor out({n, oh_count, ow_count, c});
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t oh = 0; oh < oh_count; ++oh)
      for (std::int64_t ow = 0; ow < ow_count; ++ow)
        for (std::int64_t k = 0; k < c; ++k) {
          double sum = 0.0;
          int count = 0;
          for (std::int64_t i = 0; i < wh; ++i)
            for (std::int64_t j = 0; j < ww; ++j) {
              const std::int64_t ih = oh * sh - pad_h + i, iw = ow * sw - pad_w + j;
              if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
              sum += in[((b * h + ih) * w + iw) * c + k];
              ++count;
            }
          out[((b * oh_count + oh) * ow_count + ow) * c + k] = static_cast<float>(sum / count);
        }
  return out;
}

}  // namespace

TEST_CASE("AvgPool2D 2x2 VALID on a 4x4 image, forward and backward by hand") {
  Graph graph;
  AvgPool2D pool("pool", 2, 2, 2, 2, Padding::kValid);
  CHECK(pool.build(graph, {4, 4, 1}) == Shape{2, 2, 1});
  CHECK(graph.num_parameters() == 0);
  Tensor x({1, 4, 4, 1}, std::vector<float>{1, 5, 2, 0,    //
                                            3, 4, 8, 1,    //
                                            -1, -2, 0, 0,  //
                                            -3, -4, 7, 9});
  Tensor y;
  pool.forward(x, y, {});
  CHECK(values(y) == std::vector<float>{13.0f / 4, 11.0f / 4, -10.0f / 4, 16.0f / 4});
  Tensor dy({1, 2, 2, 1}, std::vector<float>{4, 8, 12, 16}), dx;
  pool.backward(x, y, dy, &dx, {});
  CHECK(values(dx) == std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
}

TEST_CASE("AvgPool2D SAME averages only the pixels a border window covers") {
  // 3x3, window 2, stride 2: one row and column of padding, all of it after.
  Graph graph;
  AvgPool2D pool("pool", 2, 2, 2, 2, Padding::kSame);
  CHECK(pool.build(graph, {3, 3, 1}) == Shape{2, 2, 1});
  Tensor x({1, 3, 3, 1}, std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor y;
  pool.forward(x, y, {});
  CHECK(y[0] == doctest::Approx((1 + 2 + 4 + 5) / 4.0));
  CHECK(y[1] == doctest::Approx((3 + 6) / 2.0));  // not (3 + 6) / 4: padding is not counted
  CHECK(y[2] == doctest::Approx((7 + 8) / 2.0));
  CHECK(y[3] == doctest::Approx(9.0));
  Tensor dy({1, 2, 2, 1}, std::vector<float>{4, 2, 2, 1}), dx;
  pool.backward(x, y, dy, &dx, {});
  CHECK(values(dx) == std::vector<float>{1, 1, 1, 1, 1, 1, 1, 1, 1});
}

TEST_CASE("AvgPool2D matches a direct average, VALID and SAME") {
  struct Case {
    std::int64_t wh, ww, sh, sw;
    Padding padding;
    Shape input;
  };
  const std::vector<Case> cases = {
      {2, 2, 2, 2, Padding::kValid, {2, 6, 6, 3}},
      {3, 3, 2, 2, Padding::kValid, {2, 7, 8, 5}},  // overlapping, a remainder column
      {3, 2, 1, 2, Padding::kValid, {1, 5, 6, 2}},
      {3, 3, 1, 1, Padding::kSame, {2, 5, 5, 3}},   // even padding, 1 each side
      {2, 2, 2, 2, Padding::kSame, {2, 5, 5, 4}},   // uneven: 0 before, 1 after
      {3, 3, 2, 2, Padding::kSame, {2, 6, 5, 20}},  // rows: 0 before, 1 after; columns: 1 and 1
      {4, 3, 2, 3, Padding::kSame, {1, 7, 7, 17}},  // 4-window: 1 before, 2 after
      {2, 2, 3, 3, Padding::kValid, {1, 7, 7, 2}},  // stride > window: pixels left out
  };
  for (const Case& c : cases) {
    CAPTURE(to_string(c.input));
    CAPTURE(c.wh);
    CAPTURE(c.sh);
    CAPTURE(c.padding == Padding::kSame);
    Graph graph;
    AvgPool2D pool("pool", c.wh, c.ww, c.sh, c.sw, c.padding);
    pool.build(graph, {c.input[1], c.input[2], c.input[3]});
    const Tensor x = random_tensor(c.input, 7);
    Tensor y;
    pool.forward(x, y, {});
    const Tensor expected =
        reference_avg_pool(x, c.wh, c.ww, c.sh, c.sw, c.padding == Padding::kSame);
    REQUIRE(y.shape() == expected.shape());
    for (std::int64_t i = 0; i < y.size(); ++i) {
      INFO("output ", i);
      REQUIRE(y[i] == doctest::Approx(expected[i]).epsilon(1e-5));
    }
  }
}

TEST_CASE("AvgPool2D gradients match finite differences") {
  struct Case {
    std::int64_t window, stride;
    Padding padding;
    Shape input;
  };
  const std::vector<Case> cases = {
      {2, 2, Padding::kValid, {2, 4, 4, 3}},
      {2, 2, Padding::kSame, {2, 5, 5, 3}},
      {3, 2, Padding::kValid, {2, 7, 7, 2}},
      {3, 2, Padding::kSame, {2, 6, 5, 2}},
      {3, 1, Padding::kSame, {1, 4, 4, 2}},
      {2, 3, Padding::kValid, {1, 7, 7, 2}},
      {3, 2, Padding::kSame, {1, 5, 5, 33}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.window);
    CAPTURE(c.stride);
    CAPTURE(c.padding == Padding::kSame);
    Graph graph;
    AvgPool2D pool("pool", c.window, c.window, c.stride, c.stride, c.padding);
    pool.build(graph, {c.input[1], c.input[2], c.input[3]});
    Tensor x = random_tensor(c.input, 21);
    expect_layer_gradients(pool, graph, x);
  }
}

TEST_CASE("AvgPool2D on two threads computes what it does on one") {
  Graph graph;
  AvgPool2D pool("pool", 3, 3, 2, 2, Padding::kSame);
  pool.build(graph, {9, 9, 20});
  const Tensor x = random_tensor({5, 9, 9, 20}, 3);
  Tensor y1, y2, dx1, dx2;
  set_intra_op_threads(1);
  pool.forward(x, y1, {});
  const Tensor dy = random_tensor(y1.shape(), 4);
  pool.backward(x, y1, dy, &dx1, {});
  set_intra_op_threads(2);
  pool.forward(x, y2, {});
  pool.backward(x, y2, dy, &dx2, {});
  set_intra_op_threads(1);
  CHECK(values(y1) == values(y2));
  CHECK(values(dx1) == values(dx2));
}

TEST_CASE("avg_pool2d: stride 0 means the window") {
  Graph graph;
  CHECK(avg_pool2d("a", 2)->build(graph, {4, 6, 3}) == Shape{2, 3, 3});
  CHECK(avg_pool2d("b", 3, 1)->build(graph, {4, 6, 3}) == Shape{2, 4, 3});
  CHECK(avg_pool2d("c", 3, 2, Padding::kSame)->build(graph, {5, 6, 3}) == Shape{3, 3, 3});
  CHECK(avg_pool2d("d", 3)->name() == "d");
}

TEST_CASE("AvgPool2D rejects bad windows and inputs") {
  CHECK_THROWS_AS(AvgPool2D("p", 0, 2, 1, 1, Padding::kValid), InvalidArgument);
  CHECK_THROWS_AS(AvgPool2D("p", 2, 2, 1, 0, Padding::kValid), InvalidArgument);
  Graph graph;
  AvgPool2D pool("p", 3, 3, 3, 3, Padding::kValid);
  CHECK_THROWS_AS(pool.build(graph, {2, 2, 1}), InvalidArgument);  // the window does not fit
  CHECK_THROWS_AS(pool.build(graph, {4, 4}), InvalidArgument);
  CHECK_THROWS_WITH_AS(pool.build(graph, {4, 4, 2, 1}), doctest::Contains("\"p\""),
                       InvalidArgument);
}

TEST_CASE("GlobalAveragePooling2D: per-channel means, by hand") {
  Graph graph;
  GlobalAveragePooling2D pool("gap");
  CHECK(pool.build(graph, {2, 2, 2}) == Shape{2});
  // Channel 0: 1, 3, 5, 7; channel 1: 2, 4, 6, 12. Two examples, the second negated.
  Tensor x({2, 2, 2, 2}, std::vector<float>{1, 2, 3, 4, 5, 6, 7, 12,  //
                                            -1, -2, -3, -4, -5, -6, -7, -12});
  Tensor y;
  pool.forward(x, y, {});
  CHECK(y.shape() == Shape{2, 2});
  CHECK(values(y) == std::vector<float>{4, 6, -4, -6});
  Tensor dy({2, 2}, std::vector<float>{4, 8, -2, 2}), dx;
  pool.backward(x, y, dy, &dx, {});
  CHECK(values(dx) == std::vector<float>{1, 2, 1, 2, 1, 2, 1, 2,  //
                                         -0.5f, 0.5f, -0.5f, 0.5f, -0.5f, 0.5f, -0.5f, 0.5f});
}

TEST_CASE("GlobalAveragePooling2D matches a direct mean, and its gradients finite differences") {
  Graph graph;
  auto pool = global_avg_pool2d("gap");
  CHECK(pool->build(graph, {5, 3, 19}) == Shape{19});
  Tensor x = random_tensor({3, 5, 3, 19}, 5);
  Tensor y;
  pool->forward(x, y, {});
  REQUIRE(y.shape() == Shape{3, 19});
  for (std::int64_t b = 0; b < 3; ++b)
    for (std::int64_t k = 0; k < 19; ++k) {
      double sum = 0.0;
      for (std::int64_t p = 0; p < 15; ++p) sum += x[(b * 15 + p) * 19 + k];
      CHECK(y[b * 19 + k] == doctest::Approx(sum / 15).epsilon(1e-5));
    }
  expect_layer_gradients(*pool, graph, x);
}

TEST_CASE("GlobalMaxPooling2D: per-channel maxima, the gradient shared by the positions that hold one") {
  Graph graph;
  auto pool = global_max_pool2d("gmp");
  CHECK(pool->build(graph, {2, 2, 2}) == Shape{2});
  // Channel 0: 1, 7, 5, 7 (the max twice); channel 1: 2, 4, 6, -12.
  Tensor x({1, 2, 2, 2}, std::vector<float>{1, 2, 7, 4, 5, 6, 7, -12});
  Tensor y;
  pool->forward(x, y, {});
  CHECK(values(y) == std::vector<float>{7, 6});
  Tensor dy({1, 2}, std::vector<float>{3, -1}), dx;
  pool->backward(x, y, dy, &dx, {});
  // As TensorFlow's reduce_max: the two 7s take half of 3 each.
  CHECK(values(dx) == std::vector<float>{0, 0, 1.5f, 0, 0, -1, 1.5f, 0});
  // Distinct values, 0.05 or more apart, against finite differences of a smaller step (which
  // never moves one past another).
  Graph g2;
  auto spaced_pool = global_max_pool2d("gmp");
  spaced_pool->build(g2, {4, 3, 5});
  Tensor r = cohort::testing::spaced_tensor({2, 4, 3, 5}, 8, 0.05f);
  cohort::testing::GradientCheckOptions options;
  options.step = 1e-3;
  expect_layer_gradients(*spaced_pool, g2, r, {}, options);
  CHECK_THROWS_AS(pool->build(graph, {16}), InvalidArgument);
}

TEST_CASE("GlobalAveragePooling2D rejects inputs that are neither images nor sequences") {
  Graph graph;
  GlobalAveragePooling2D pool("gap");
  CHECK_THROWS_AS(pool.build(graph, {16}), InvalidArgument);
  CHECK_THROWS_AS(pool.build(graph, {2, 4, 4, 3}), InvalidArgument);
  CHECK_THROWS_AS(pool.build(graph, {4, 0, 3}), InvalidArgument);
  CHECK(pool.build(graph, {4, 4}) == Shape{4});  // a sequence of 4 steps of 4 channels
}
