// Tests of core/nn/ops/attention.h: MultiHeadAttention against a reference written out in double
// from its equations, its causal mask, finite differences; PositionEmbedding.
#include "cohort/core/nn/ops/attention.h"

#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/graph.h"
#include "core/nn/gradient_check.h"

using namespace cohort;
using cohort::testing::expect_layer_gradients;
using cohort::testing::random_tensor;

namespace {

// A projection of one row: bias + row x kernel [in, out], in double.
std::vector<double> project(const Graph& graph, const std::string& part, const double* row,
                            std::int64_t in) {
  const auto kernel = graph.values(*graph.find("mha/" + part + "/kernel"));
  const auto bias = graph.values(*graph.find("mha/" + part + "/bias"));
  const std::int64_t out = static_cast<std::int64_t>(bias.size());
  std::vector<double> result(bias.begin(), bias.end());
  for (std::int64_t i = 0; i < in; ++i)
    for (std::int64_t j = 0; j < out; ++j)
      result[static_cast<std::size_t>(j)] += row[i] * kernel[static_cast<std::size_t>(i * out + j)];
  return result;
}

// One example [steps, features] through the layer's equations.
std::vector<double> reference(const Graph& graph, const float* example, std::int64_t steps,
                              std::int64_t features, std::int64_t heads, std::int64_t key_dim,
                              bool causal) {
  const std::int64_t width = heads * key_dim;
  std::vector<std::vector<double>> q, k, v;
  for (std::int64_t t = 0; t < steps; ++t) {
    std::vector<double> row(example + t * features, example + (t + 1) * features);
    q.push_back(project(graph, "query", row.data(), features));
    k.push_back(project(graph, "key", row.data(), features));
    v.push_back(project(graph, "value", row.data(), features));
  }
  std::vector<double> output;
  for (std::int64_t i = 0; i < steps; ++i) {
    std::vector<double> context(static_cast<std::size_t>(width), 0.0);
    for (std::int64_t h = 0; h < heads; ++h) {
      std::vector<double> scores;
      for (std::int64_t j = 0; j < (causal ? i + 1 : steps); ++j) {
        double dot = 0;
        for (std::int64_t d = 0; d < key_dim; ++d)
          dot += q[i][h * key_dim + d] * k[j][h * key_dim + d];
        scores.push_back(std::exp(dot / std::sqrt(static_cast<double>(key_dim))));
      }
      double sum = 0;
      for (double s : scores) sum += s;
      for (std::size_t j = 0; j < scores.size(); ++j)
        for (std::int64_t d = 0; d < key_dim; ++d)
          context[h * key_dim + d] += scores[j] / sum * v[j][h * key_dim + d];
    }
    const auto out = project(graph, "attention_output", context.data(), width);
    output.insert(output.end(), out.begin(), out.end());
  }
  return output;
}

void set_biases(Graph& graph) {
  for (const char* part : {"query", "key", "value", "attention_output"}) {
    auto bias = graph.values(*graph.find(std::string("mha/") + part + "/bias"));
    for (std::size_t i = 0; i < bias.size(); ++i) bias[i] = 0.03f * static_cast<float>(i % 5) - 0.05f;
  }
}

}  // namespace

TEST_CASE("MultiHeadAttention matches its equations, with and without the causal mask") {
  const std::int64_t n = 2, steps = 5, features = 6, heads = 2, key_dim = 4;
  for (bool causal : {false, true}) {
    CAPTURE(causal);
    Graph graph;
    MultiHeadAttention layer("mha", heads, key_dim, causal);
    CHECK(layer.build(graph, {steps, features}) == Shape{steps, features});
    CHECK(graph.find("mha/query/kernel")->shape == Shape{features, heads * key_dim});
    CHECK(graph.find("mha/attention_output/kernel")->shape == Shape{heads * key_dim, features});
    graph.initialize(3);
    set_biases(graph);
    const Tensor x = random_tensor({n, steps, features}, 7, -2.0f, 2.0f);
    Tensor y;
    layer.forward(x, y, {});
    REQUIRE(y.shape() == x.shape());
    for (std::int64_t b = 0; b < n; ++b) {
      const auto expected =
          reference(graph, x.data() + b * steps * features, steps, features, heads, key_dim, causal);
      for (std::int64_t i = 0; i < steps * features; ++i) {
        INFO("example ", b, " value ", i);
        REQUIRE(y[b * steps * features + i] ==
                doctest::Approx(expected[static_cast<std::size_t>(i)]).epsilon(1e-4));
      }
    }
  }
}

TEST_CASE("MultiHeadAttention with the causal mask: no step sees a later one") {
  Graph graph;
  MultiHeadAttention layer("mha", 2, 0, /*causal=*/true);  // key_dim: 8 features / 2 heads
  layer.build(graph, {6, 8});
  CHECK(graph.find("mha/key/kernel")->shape == Shape{8, 8});
  graph.initialize(5);
  Tensor x = random_tensor({1, 6, 8}, 2);
  Tensor before, after;
  layer.forward(x, before, {});
  for (std::int64_t i = 4 * 8; i < x.size(); ++i) x[i] -= 0.5f;  // steps 4 and 5
  layer.forward(x, after, {});
  for (std::int64_t i = 0; i < 4 * 8; ++i) CHECK(after[i] == before[i]);
  CHECK(after[4 * 8] != before[4 * 8]);
}

TEST_CASE("MultiHeadAttention gradients match finite differences") {
  for (bool causal : {false, true}) {
    CAPTURE(causal);
    Graph graph;
    MultiHeadAttention layer("mha", 3, 2, causal);
    layer.build(graph, {4, 5});
    graph.initialize(4);
    set_biases(graph);
    Tensor x = random_tensor({2, 4, 5}, 6);
    GradientCheckOptions check;
    check.step = 1e-3;
    expect_layer_gradients(layer, graph, x, {}, check);
  }
}

TEST_CASE("PositionEmbedding adds one learned vector per step") {
  Graph graph;
  PositionEmbedding layer("position");
  CHECK(layer.build(graph, {3, 2}) == Shape{3, 2});
  graph.initialize(1);
  const auto table = graph.values(*graph.find("position/embeddings"));
  const Tensor x = random_tensor({2, 3, 2}, 3);
  Tensor y;
  layer.forward(x, y, {});
  for (std::int64_t i = 0; i < x.size(); ++i) CHECK(y[i] == x[i] + table[static_cast<std::size_t>(i % 6)]);
  Tensor input = random_tensor({4, 3, 2}, 5);
  expect_layer_gradients(layer, graph, input);
}

TEST_CASE("The attention layers refuse what does not fit, naming themselves") {
  Graph graph;
  CHECK_THROWS_WITH_AS(MultiHeadAttention("mha", 4).build(graph, {5, 6}),
                       "MultiHeadAttention \"mha\": input [5, 6]: 6 features do not split into 4 "
                       "heads; give key_dim",
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(MultiHeadAttention("mha", 2).build(graph, {784}),
                       "MultiHeadAttention \"mha\": input [784] is not [steps, features]",
                       InvalidArgument);
  CHECK_THROWS_AS(MultiHeadAttention("mha", 0), InvalidArgument);
  // key_dim 0 is features / heads at every build, not the first build's.
  MultiHeadAttention automatic("mha", 2);
  Graph wide, narrow;
  automatic.build(wide, {5, 8});
  automatic.build(narrow, {5, 4});
  CHECK(narrow.find("mha/query/kernel")->shape == Shape{4, 4});
  CHECK_THROWS_WITH_AS(PositionEmbedding("p").build(graph, {28, 28, 1}),
                       "PositionEmbedding \"p\": input [28, 28, 1] is not [steps, features]",
                       InvalidArgument);
}

TEST_CASE("MultiHeadAttention's dropout: in training only, a fixed mask per seed, exact gradients") {
  Graph graph;
  MultiHeadAttention plain("mha", 2, 3);
  MultiHeadAttention dropped("mha", 2, 3, false, 0.3f);  // the same variables
  plain.build(graph, {5, 4});
  dropped.build(graph, {5, 4});
  graph.initialize(2);
  set_biases(graph);
  const Tensor x = random_tensor({2, 5, 4}, 9);
  Tensor a, b, c;
  plain.forward(x, a, {.training = true, .seed = 4});
  dropped.forward(x, b, {.training = false, .seed = 4});
  for (std::int64_t i = 0; i < a.size(); ++i) CHECK(b[i] == a[i]);  // evaluation: no dropout
  dropped.forward(x, b, {.training = true, .seed = 4});
  dropped.forward(x, c, {.training = true, .seed = 4});
  int differ = 0;
  for (std::int64_t i = 0; i < a.size(); ++i) {
    CHECK(c[i] == b[i]);  // the same seed, the same mask
    differ += b[i] != a[i];
  }
  CHECK(differ > 0);
  Tensor input = random_tensor({2, 5, 4}, 6);
  GradientCheckOptions check;
  check.step = 1e-3;
  expect_layer_gradients(dropped, graph, input, {.training = true, .seed = 4}, check);
  CHECK_THROWS_AS(MultiHeadAttention("mha", 2, 0, false, 1.0f), InvalidArgument);
}

TEST_CASE("MultiHeadAttention on three threads computes what it does on one, dropout included") {
  Graph graph;
  MultiHeadAttention layer("mha", 4, 3, /*causal=*/true, /*dropout=*/0.2f);
  layer.build(graph, {7, 6});
  graph.initialize(5);
  set_biases(graph);
  const Tensor x = random_tensor({5, 7, 6}, 3);
  const OpContext context{.training = true, .seed = 11};
  Tensor y1, y3, dx1, dx3;
  std::vector<float> g1(static_cast<std::size_t>(graph.num_parameters()));
  std::vector<float> g3(g1.size(), 7.0f);
  layer.forward(x, y1, context);
  const Tensor dy = random_tensor(y1.shape(), 4);
  layer.backward(x, y1, dy, &dx1, g1);
  set_intra_op_threads(3);
  layer.forward(x, y3, context);
  layer.backward(x, y3, dy, &dx3, g3);
  set_intra_op_threads(1);
  for (std::int64_t i = 0; i < y1.size(); ++i) CHECK(y3[i] == doctest::Approx(y1[i]).epsilon(1e-5));
  for (std::int64_t i = 0; i < dx1.size(); ++i) CHECK(dx3[i] == doctest::Approx(dx1[i]).epsilon(1e-5));
  for (std::size_t i = 0; i < g1.size(); ++i) CHECK(g3[i] == doctest::Approx(g1[i]).epsilon(1e-5).scale(1e-3));
}
