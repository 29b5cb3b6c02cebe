// Tests of core/nn/ops/embedding.h.
#include "cohort/core/nn/ops/embedding.h"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
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

namespace {

std::vector<float> values(const Tensor& t) { return {t.span().begin(), t.span().end()}; }

std::string error_of(Embedding& layer, const Tensor& ids) {
  Tensor y;
  try {
    layer.forward(ids, y, {});
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  FAIL("no InvalidArgument");
  return "";
}

}  // namespace

TEST_CASE("Embedding creates a decayed [vocabulary, dim] table and appends dim to the shape") {
  Graph graph;
  Embedding layer("emb", 10, 3);
  CHECK(layer.build(graph, {4}) == Shape{4, 3});
  const Variable* table = graph.find("emb/embeddings");
  REQUIRE(table != nullptr);
  CHECK(table->shape == Shape{10, 3});
  CHECK(table->trainable);
  CHECK(table->decay);
  CHECK(table->initializer == Initializer::normal(0.05f));
  CHECK(graph.decay_ranges() ==
        std::vector<std::pair<std::int64_t, std::int64_t>>{{table->offset, table->offset + 30}});
  Graph other;
  CHECK(embedding("e", 5, 2)->build(other, {}) == Shape{2});        // one id per example
  CHECK(embedding("f", 5, 2)->build(other, {2, 3}) == Shape{2, 3, 2});
  // The initial values are small: a normal of standard deviation 0.05.
  Graph big;
  Embedding wide("wide", 100, 50);
  wide.build(big, {1});
  big.initialize(7);
  double sum = 0.0, squares = 0.0;
  for (float v : big.values(*big.find("wide/embeddings"))) {
    sum += v;
    squares += static_cast<double>(v) * v;
  }
  CHECK(std::abs(sum / 5000) < 0.005);
  CHECK(std::sqrt(squares / 5000) == doctest::Approx(0.05).epsilon(0.05));
}

TEST_CASE("Embedding looks up rows and scatter-adds their gradients") {
  Graph graph;
  Embedding layer("emb", 4, 3);
  layer.build(graph, {2});
  std::span<float> table = graph.values(*graph.find("emb/embeddings"));
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(i);  // row r: 3r..
  // Two examples: ids (2, 0) and (3, 2); id 2 appears twice, id 1 never.
  const Tensor ids({2, 2}, std::vector<float>{2, 0, 3, 2});
  Tensor y;
  layer.forward(ids, y, {});
  CHECK(y.shape() == Shape{2, 2, 3});
  CHECK(values(y) == std::vector<float>{6, 7, 8, 0, 1, 2, 9, 10, 11, 6, 7, 8});

  const Tensor dy({2, 2, 3}, std::vector<float>{1, 2, 3, 10, 20, 30, 100, 200, 300, 5, 5, 5});
  // The gradient buffer holds stale values: backward overwrites the table's slice.
  std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()), 42.0f);
  Tensor dx({7});
  layer.backward(ids, y, dy, &dx, grads);
  CHECK(grads == std::vector<float>{10, 20, 30,   // id 0
                                    0, 0, 0,      // id 1: unused
                                    6, 7, 8,      // id 2: (1, 2, 3) + (5, 5, 5)
                                    100, 200, 300});
  CHECK(dx.shape() == ids.shape());
  CHECK(values(dx) == std::vector<float>{0, 0, 0, 0});
  std::fill(grads.begin(), grads.end(), 42.0f);
  layer.backward(ids, y, dy, nullptr, grads);  // no input gradient: the table's all the same
  CHECK(grads[0] == 10.0f);
  CHECK(grads[3] == 0.0f);
}

TEST_CASE("Embedding gradients match finite differences") {
  Graph graph;
  Embedding layer("emb", 7, 5);
  layer.build(graph, {3});
  graph.initialize(2);
  Tensor ids({4, 3}, std::vector<float>{0, 6, 3, 3, 3, 1, 5, 0, 2, 6, 6, 6});
  GradientCheckOptions options;
  options.check_input = false;  // ids are not differentiable (a perturbed one is not an id)
  expect_layer_gradients(layer, graph, ids, {}, options);
}

TEST_CASE("Embedding rejects ids that are not integers in range, naming the layer and the id") {
  Graph graph;
  Embedding layer("words", 10, 2);
  layer.build(graph, {2});
  struct Case {
    float id;
    std::string shown;
  };
  const std::vector<Case> cases = {{2.5f, "2.5"}, {-1.0f, "-1"}, {10.0f, "10"}, {1e9f, "1e+09"}, {16777218.0f, "16777218"},
                                   {2.1f, "2.1"},
                                   {std::numeric_limits<float>::quiet_NaN(), "nan"}};
  for (const Case& c : cases) {
    CAPTURE(c.shown);
    const Tensor ids({1, 2}, std::vector<float>{1.0f, c.id});
    const std::string message = error_of(layer, ids);
    CHECK(message.find("\"words\"") != std::string::npos);
    CHECK(message.find("id " + c.shown + " is not") != std::string::npos);
  }
  CHECK_THROWS_AS(Embedding("e", 0, 4), InvalidArgument);
  CHECK_THROWS_AS(Embedding("e", 4, 0), InvalidArgument);
  CHECK_NOTHROW(Embedding("e", 1 << 24, 1));
  CHECK_THROWS_WITH_AS(Embedding("e", (1 << 24) + 1, 1),
                       "Embedding \"e\": vocabulary 16777217, more than the 16777216 ids a float32 input tells apart",
                       InvalidArgument);
}
