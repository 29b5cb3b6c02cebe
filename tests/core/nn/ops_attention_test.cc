// Tests of core/nn/ops/attention.h: MultiHeadAttention against a reference written out in double
// from its equations, its causal mask, finite differences; PositionEmbedding.
#include "cohort/core/nn/ops/attention.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/loss.h"
#include "cohort/core/nn/model.h"
#include "cohort/core/nn/models.h"
#include "cohort/core/nn/ops/embedding.h"
#include "cohort/core/nn/ops/merge.h"
#include "cohort/core/nn/ops/normalization.h"
#include "cohort/core/nn/ops/ops.h"
#include "cohort/core/nn/ops/recurrent.h"
#include "core/nn/gradient_check.h"
#include "core/nn/train_loop.h"

using namespace cohort;
using cohort::testing::expect_layer_gradients;
using cohort::testing::random_tensor;
using cohort::testing::train_with_adam;

namespace {

std::vector<float> values(const Tensor& t) { return {t.span().begin(), t.span().end()}; }

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

// One example's query [steps, features] and value [value_steps, value_features] (the key too)
// through the layer's equations.
std::vector<double> reference(const Graph& graph, const float* query, std::int64_t steps,
                              std::int64_t features, const float* value, std::int64_t value_steps,
                              std::int64_t value_features, std::int64_t heads,
                              std::int64_t key_dim, bool causal) {
  const std::int64_t width = heads * key_dim;
  std::vector<std::vector<double>> q, k, v;
  for (std::int64_t t = 0; t < steps; ++t) {
    std::vector<double> row(query + t * features, query + (t + 1) * features);
    q.push_back(project(graph, "query", row.data(), features));
  }
  for (std::int64_t t = 0; t < value_steps; ++t) {
    std::vector<double> row(value + t * value_features, value + (t + 1) * value_features);
    k.push_back(project(graph, "key", row.data(), value_features));
    v.push_back(project(graph, "value", row.data(), value_features));
  }
  std::vector<double> output;
  for (std::int64_t i = 0; i < steps; ++i) {
    std::vector<double> context(static_cast<std::size_t>(width), 0.0);
    for (std::int64_t h = 0; h < heads; ++h) {
      std::vector<double> scores;
      for (std::int64_t j = 0; j < (causal ? i + 1 : value_steps); ++j) {
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

// Self-attention: one example [steps, features] as query and value.
std::vector<double> reference(const Graph& graph, const float* example, std::int64_t steps,
                              std::int64_t features, std::int64_t heads, std::int64_t key_dim,
                              bool causal) {
  return reference(graph, example, steps, features, example, steps, features, heads, key_dim,
                   causal);
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

TEST_CASE("Cross-attention: the query's steps attend to the value's, of other lengths and widths") {
  const std::int64_t n = 3, steps = 4, features = 6, value_steps = 7, value_features = 5;
  const std::int64_t heads = 2, key_dim = 3;
  Graph graph;
  MultiHeadAttention layer("mha", heads, key_dim, false, 0.0f, /*cross=*/true);
  CHECK(layer.num_inputs() == 2);
  const std::vector<Shape> shapes = {{steps, features}, {value_steps, value_features}};
  CHECK(layer.build_node(graph, shapes) == Shape{steps, features});
  CHECK(graph.find("mha/query/kernel")->shape == Shape{features, heads * key_dim});
  CHECK(graph.find("mha/key/kernel")->shape == Shape{value_features, heads * key_dim});
  CHECK(graph.find("mha/value/kernel")->shape == Shape{value_features, heads * key_dim});
  CHECK(graph.find("mha/attention_output/kernel")->shape == Shape{heads * key_dim, features});
  graph.initialize(3);
  set_biases(graph);
  Tensor query = random_tensor({n, steps, features}, 7, -2.0f, 2.0f);
  Tensor value = random_tensor({n, value_steps, value_features}, 8, -2.0f, 2.0f);
  const Tensor* inputs[] = {&query, &value};
  Tensor y;
  layer.forward_node(inputs, y, {});
  REQUIRE(y.shape() == query.shape());
  for (std::int64_t b = 0; b < n; ++b) {
    const auto expected = reference(graph, query.data() + b * steps * features, steps, features,
                                    value.data() + b * value_steps * value_features, value_steps,
                                    value_features, heads, key_dim, false);
    for (std::int64_t i = 0; i < steps * features; ++i) {
      INFO("example ", b, " value ", i);
      REQUIRE(y[b * steps * features + i] ==
              doctest::Approx(expected[static_cast<std::size_t>(i)]).epsilon(1e-4));
    }
  }
  Tensor* both[] = {&query, &value};
  GradientCheckOptions check;
  check.step = 1e-3;
  cohort::testing::expect_layer_gradients(layer, graph, both, {}, check);
  CHECK_THROWS_WITH_AS(MultiHeadAttention("x", 2, 0, false, 0.0f, true).build(graph, {4, 6}),
                       doctest::Contains("cross-attention takes two inputs"), InvalidArgument);
  const std::vector<Shape> unequal = {{4, 6}, {5, 6}};
  CHECK_THROWS_WITH_AS(MultiHeadAttention("y", 2, 0, true, 0.0f, true).build_node(graph, unequal),
                       doctest::Contains("causal, but the query's 4 steps are not the value's 5"),
                       InvalidArgument);
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

TEST_CASE("An encoder-decoder Transformer learns to reverse sequences, the two held in one example; greedy decoding") {
  // Sources of 6 tokens from 1..8; the target their reverse. Each example holds the source, then
  // the decoder's input (9, a start token, then the target but its last token), side by side;
  // the targets are one-hot rows, one per decoder step (teacher forcing).
  // 512 examples to train on, 256 others to test on.
  const std::int64_t n = 512, held_out = 256, steps = 6, vocabulary = 10, start = 9;
  Tensor all_rows({n + held_out, 2 * steps}), all_targets({n + held_out, steps, vocabulary});
  std::uint64_t state = 3;
  for (std::int64_t b = 0; b < n + held_out; ++b) {
    float* row = all_rows.data() + b * 2 * steps;
    for (std::int64_t t = 0; t < steps; ++t) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      row[t] = static_cast<float>(1 + (state >> 33) % 8);
    }
    for (std::int64_t t = 0; t < steps; ++t) {
      const float token = row[steps - 1 - t];
      all_targets[(b * steps + t) * vocabulary + static_cast<std::int64_t>(token)] = 1.0f;
      row[steps + t] = t == 0 ? static_cast<float>(start) : row[steps - t];
    }
  }
  const auto part = [](const Tensor& t, std::int64_t from, std::int64_t count) {
    Shape shape = t.shape();
    shape[0] = count;
    const std::int64_t size = t.size() / t.dim(0);
    return Tensor(shape, t.span().subspan(static_cast<std::size_t>(from * size),
                                          static_cast<std::size_t>(count * size)));
  };
  const Tensor rows = part(all_rows, 0, n), targets = part(all_targets, 0, n);
  const Tensor test_rows = part(all_rows, n, held_out);
  const Tensor test_targets = part(all_targets, n, held_out);
  Graph graph;
  Model model(graph);
  Node input = model.input({2 * steps});
  Node source = model.apply(slice("source", 0, steps), input);
  Node target = model.apply(slice("target", steps, steps), input);
  Node memory = model.apply(embedding("source_embed", vocabulary, 32), source);
  memory = model.apply(position_embedding("source_position"), memory);
  memory = transformer_block(model, memory, "encoder", 4, 64);
  Node x = model.apply(embedding("target_embed", vocabulary, 32), target);
  x = model.apply(position_embedding("target_position"), x);
  x = transformer_decoder_block(model, x, memory, "decoder", 4, 64);
  x = model.apply(layer_norm("norm"), x);
  model.apply(dense("logits", vocabulary, Activation::kNone, /*flatten=*/false), x);
  model.set_loss(std::make_unique<CategoricalCrossEntropyLoss>());
  model.check_data({2 * steps}, TargetSpec::values({steps, vocabulary}));
  CHECK(graph.find("decoder/cross_attention/key/kernel") != nullptr);
  graph.initialize(1);
  const Targets per_step{{}, &targets};
  train_with_adam(model, rows, per_step, 300, 0.003);
  const Targets held_out_per_step{{}, &test_targets};
  const float accuracy = model.evaluate(test_rows, held_out_per_step).metrics[0];
  MESSAGE("held-out per-step accuracy ", accuracy);
  CHECK(accuracy > 0.95f);
  // Without the targets: decoded token by token from the start token alone, greedily and by a
  // beam of 4 (a beam of one is greedy decoding); each must reverse 90% of the sequences exactly.
  const auto reversed = [&](const Tensor& decoded) {
    REQUIRE(decoded.shape() == Shape{held_out, steps});
    std::int64_t exact = 0;
    for (std::int64_t b = 0; b < held_out; ++b) {
      bool same = true;
      for (std::int64_t t = 0; t < steps; ++t)
        same = same && decoded[b * steps + t] == test_rows[b * 2 * steps + steps - 1 - t];
      exact += same ? 1 : 0;
    }
    return exact;
  };
  const Tensor decoded = greedy_decode(model, test_rows, steps, steps, static_cast<float>(start));
  const std::int64_t exact = reversed(decoded);
  MESSAGE("held-out sequences decoded exactly ", exact, " of ", held_out);
  CHECK(exact * 10 >= held_out * 9);
  CHECK(values(beam_decode(model, test_rows, steps, steps, static_cast<float>(start), {.beam_width = 1})) ==
        values(decoded));
  const std::int64_t beam_exact =
      reversed(beam_decode(model, test_rows, steps, steps, static_cast<float>(start)));
  MESSAGE("held-out sequences decoded exactly by a beam of 4: ", beam_exact, " of ", held_out);
  CHECK(beam_exact * 10 >= held_out * 9);
}

TEST_CASE("Beam search as wide as every sequence finds the most probable one, by brute force") {
  // An untrained decoder (its outputs are what they are: the search must find their best, not
  // the right answer) over 3 classes, 3 steps, the start token 3: an LSTM started from an LSTM
  // encoder's state of a source of 2 tokens held before it in each row. Every sequence of 3
  // tokens is scored by one teacher-forced pass: the sum of its tokens' log-probabilities, up to
  // and with the end token where there is one (the tokens after it are the end token), then over
  // GNMT's length penalty where asked.
  const std::int64_t source = 2, steps = 3, classes = 3, n = 16;
  const float start = 3.0f;
  Graph graph;
  Model model(graph);
  const Node row = model.input({source + steps});
  const Node memory = model.apply(embedding("source_embed", 4, 8),
                                  model.apply(slice("source", 0, source), row));
  const Node state = model.apply(lstm("encoder", 8, {.return_state = true}), memory);
  Node x = model.apply(embedding("target_embed", 4, 8), model.apply(slice("target", source, steps), row));
  x = model.apply(lstm("decoder", 8, {.return_sequences = true, .initial_state = true}), {x, state});
  model.apply(dense("logits", classes, Activation::kNone, /*flatten=*/false), x);
  graph.initialize(4);
  // Weights three times their initial scale: outputs sure enough of themselves, and dependent
  // enough on the tokens before, that a token less likely now can lead to a likelier sequence.
  for (float& v : graph.values()) v *= 3.0f;
  Tensor rows({n, source + steps});
  for (std::int64_t b = 0; b < n; ++b) {
    rows[b * (source + steps)] = static_cast<float>(b % 3);
    rows[b * (source + steps) + 1] = static_cast<float>((b / 3) % 3);
  }
  // Each row's 27 sequences in one batch: row b's sequence q at b * 27 + q.
  const std::int64_t all = 27;
  Tensor forced({n * all, source + steps});
  for (std::int64_t i = 0; i < n * all; ++i) {
    const std::int64_t q = i % all;
    float* r = forced.data() + i * (source + steps);
    std::copy_n(rows.data() + (i / all) * (source + steps), source, r);
    r[source] = start;
    r[source + 1] = static_cast<float>(q / 9);
    r[source + 2] = static_cast<float>((q / 3) % 3);
  }
  const Tensor logits = model.predict(forced);
  const auto token = [](std::int64_t q, std::int64_t t) { return t == 0 ? q / 9 : t == 1 ? (q / 3) % 3 : q % 3; };
  for (const int end : {-1, 2})
    for (const double penalty : {0.0, 3.0}) {
      if (end < 0 && penalty > 0) continue;  // all of one length: the penalty changes nothing
      CAPTURE(end);
      CAPTURE(penalty);
      std::vector<double> found;  // a beam of every sequence of 2 tokens
      const Tensor best = beam_decode(model, rows, source, steps, start,
                                      {.beam_width = 9, .end_token = end, .length_penalty = penalty},
                                      &found);
      if (penalty > 0) {  // a penalty this strong changes which sequences win, here
        const Tensor unpenalised = beam_decode(model, rows, source, steps, start,
                                               {.beam_width = 9, .end_token = end});
        CHECK(values(best) != values(unpenalised));
      }
      for (std::int64_t b = 0; b < n; ++b) {
        CAPTURE(b);
        double best_value = -1e300, best_score = 0;
        std::int64_t best_q = -1;
        for (std::int64_t q = 0; q < all; ++q) {
          double score = 0;
          std::int64_t length = steps;
          bool canonical = true;  // after an end token, only end tokens
          for (std::int64_t t = 0; t < steps; ++t) {
            if (length < steps) {
              canonical = canonical && token(q, t) == end;
              continue;
            }
            const float* l = logits.data() + ((b * all + q) * steps + t) * classes;
            double sum = 0;
            for (std::int64_t c = 0; c < classes; ++c) sum += std::exp(double(l[c]));
            score += double(l[token(q, t)]) - std::log(sum);
            if (token(q, t) == end) length = t + 1;
          }
          if (!canonical) continue;
          const double value = score / std::pow((5.0 + static_cast<double>(length)) / 6.0, penalty);
          if (value > best_value) {
            best_value = value;
            best_score = score;
            best_q = q;
          }
        }
        CHECK(found[static_cast<std::size_t>(b)] == doctest::Approx(best_score).epsilon(1e-6));
        for (std::int64_t t = 0; t < steps; ++t) CHECK(best[b * steps + t] == static_cast<float>(token(best_q, t)));
      }
      // Without an end token a beam of one is greedy decoding, which never finds a likelier
      // sequence and here misses some rows' likeliest. (The scores of one sequence differ by the
      // rounding of batches of other sizes.)
      if (end >= 0) continue;
      std::vector<double> greedy;
      const Tensor one = beam_decode(model, rows, source, steps, start, {.beam_width = 1}, &greedy);
      CHECK(values(one) == values(greedy_decode(model, rows, source, steps, start)));
      std::int64_t missed = 0;
      for (std::int64_t b = 0; b < n; ++b) {
        const auto i = static_cast<std::size_t>(b);
        const double margin = 1e-5 * std::abs(found[i]);
        CHECK(greedy[i] <= found[i] + margin);
        missed += greedy[i] < found[i] - margin ? 1 : 0;
      }
      MESSAGE("greedy decoding missed the most probable sequence of ", missed, " rows of ", n);
      CHECK(missed > 0);  // the search was tested where it matters
    }
  CHECK_THROWS_WITH_AS(beam_decode(model, rows, source, steps, start, {.beam_width = 0}),
                       "beam_decode: beam_width 0: must be >= 1", InvalidArgument);
  CHECK_THROWS_WITH_AS(beam_decode(model, rows, source, steps, start, {.end_token = 3}),
                       "beam_decode: end_token 3 is not one of the output's 3 classes", InvalidArgument);
  CHECK_THROWS_WITH_AS(beam_decode(model, rows, 4, steps, start),
                       "beam_decode: the decoder's input [4, 7) is not within rows [16, 5]", InvalidArgument);
}

namespace {

// An untrained causal language model over rows of `width` tokens of `classes`: an LSTM over the
// whole row, a row of logits per position; weights three times their initial scale, so that its
// outputs depend on the tokens before.
Model causal_lstm(Graph& graph, std::int64_t width, std::int64_t classes) {
  Model model(graph);
  Node x = model.apply(embedding("embed", classes, 8), model.input({width}));
  x = model.apply(lstm("lm", 8, {.return_sequences = true}), x);
  model.apply(dense("logits", classes, Activation::kNone, /*flatten=*/false), x);
  graph.initialize(5);
  for (float& v : graph.values()) v *= 3.0f;
  return model;
}

}  // namespace

TEST_CASE("A decoder-only model continues each row's prompt: a row of logits per position") {
  // An untrained causal language model (an LSTM over the whole row), rows of 6 tokens whose
  // prompts are their first 3: decoding starts at the prompt's last token (begin 2, a negative
  // start token keeps each row's own), one output row per position of the row. Held to a loop
  // of predict() by hand; the 4th token decoded is past the row's end.
  const std::int64_t width = 6, prompt = 3, classes = 5, n = 8;
  Graph graph;
  Model model = causal_lstm(graph, width, classes);
  Tensor rows({n, width});
  for (std::int64_t i = 0; i < n * width; ++i) rows[i] = static_cast<float>((i * 7 + i / width) % classes);
  const std::int64_t begin = prompt - 1, steps = width - begin;
  Tensor by_hand({n, steps}), input = rows;
  for (std::int64_t b = 0; b < n; ++b) std::fill_n(input.data() + b * width + prompt, width - prompt, 0.0f);
  for (std::int64_t t = 0; t < steps; ++t) {
    const Tensor output = model.predict(input);
    REQUIRE(output.shape() == Shape{n, width, classes});
    for (std::int64_t b = 0; b < n; ++b) {
      const float* logits = output.data() + (b * width + begin + t) * classes;
      const auto token = static_cast<float>(std::max_element(logits, logits + classes) - logits);
      by_hand[b * steps + t] = token;
      if (begin + t + 1 < width) input[b * width + begin + t + 1] = token;
    }
  }
  const Tensor decoded = greedy_decode(model, rows, begin, steps, -1.0f);
  CHECK(values(decoded) == values(by_hand));
  CHECK(values(beam_decode(model, rows, begin, steps, -1.0f, {.beam_width = 1})) == values(by_hand));
  // An output of neither the decoder's steps nor the rows' positions is named as such.
  Graph other;
  Model classifier(other);
  classifier.apply(dense("head", classes), classifier.input({width}));
  other.initialize(1);
  CHECK_THROWS_WITH_AS(greedy_decode(classifier, rows, begin, steps, -1.0f),
                       "greedy_decode: output [8, 5] is not 4 rows of classes per example (the decoder's "
                       "steps) nor 6 (one per position of the rows)",
                       InvalidArgument);
}

TEST_CASE("A language model trains alike on a class index per step and on one-hot rows") {
  // Next-token prediction over rows of 6 tokens of 5 (each the last plus 1 or 2, mod 5), the last
  // step without a target (-1 there, a row of zeros in one-hot form). Two models from the same
  // initial values, 20 steps of Adam each: the same parameters.
  const std::int64_t width = 6, classes = 5, n = 16;
  Tensor rows({n, width}), sparse({n, width}), onehot({n, width, classes});
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t t = 0; t < width; ++t)
      rows[b * width + t] = static_cast<float>(t == 0 ? b % classes : (static_cast<std::int64_t>(rows[b * width + t - 1]) + 1 + (b + t) % 2) % classes);
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t t = 0; t < width; ++t) {
      const float next = t + 1 < width ? rows[b * width + t + 1] : -1.0f;
      sparse[b * width + t] = next;
      if (next >= 0) onehot[(b * width + t) * classes + static_cast<std::int64_t>(next)] = 1.0f;
    }
  const auto language_model = [&](Graph& graph, std::unique_ptr<Loss> loss) {
    Model model(graph);
    Node x = model.apply(embedding("embed", classes, 8), model.input({width}));
    x = model.apply(lstm("lm", 8, {.return_sequences = true}), x);
    model.apply(dense("logits", classes, Activation::kNone, /*flatten=*/false), x);
    model.set_loss(std::move(loss));
    graph.initialize(7);
    return model;
  };
  Graph g_sparse, g_onehot;
  Model by_index = language_model(g_sparse, std::make_unique<SparseCategoricalCrossEntropyLoss>());
  Model by_row = language_model(g_onehot, std::make_unique<CategoricalCrossEntropyLoss>());
  by_index.check_data({width}, TargetSpec::values({width}));
  const Targets index_targets{{}, &sparse}, row_targets{{}, &onehot};
  const float before = by_index.evaluate(rows, index_targets).loss;
  train_with_adam(by_index, rows, index_targets, 20, 0.02);
  train_with_adam(by_row, rows, row_targets, 20, 0.02);
  const std::vector<float> a(g_sparse.values().begin(), g_sparse.values().end());
  const std::vector<float> b(g_onehot.values().begin(), g_onehot.values().end());
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == doctest::Approx(b[i]).epsilon(1e-4).scale(1e-4));
  const StepMetrics after = by_index.evaluate(rows, index_targets);
  MESSAGE("loss ", before, " -> ", after.loss, ", next-token accuracy ", after.accuracy);
  CHECK(after.loss < before);
  CHECK(after.accuracy == doctest::Approx(by_row.evaluate(rows, row_targets).accuracy));
}

TEST_CASE("Sampling draws each step's token from the softmax, within top_k and top_p; top_k 1 is greedy") {
  const std::int64_t width = 6, classes = 5, n = 4000;
  Graph graph;
  Model model = causal_lstm(graph, width, classes);
  // Every row the same prompt of 2 tokens: the first step's draws follow one distribution.
  Tensor rows({n, width});
  for (std::int64_t b = 0; b < n; ++b) {
    rows[b * width] = 3;
    rows[b * width + 1] = 1;
  }
  const Tensor logits = model.predict(Tensor({1, width}, rows.span().subspan(0, width)));
  std::vector<double> p(classes);
  double total = 0;
  for (std::int64_t c = 0; c < classes; ++c) total += p[c] = std::exp(double(logits[classes + c]));
  for (double& v : p) v /= total;
  const auto first_step = [&](const SampleOptions& options) {
    const Tensor drawn = sample_decode(model, rows, 1, width - 1, -1.0f, options);
    std::vector<double> share(classes);
    for (std::int64_t b = 0; b < n; ++b) share[static_cast<std::size_t>(drawn[b * (width - 1)])] += 1.0 / n;
    return share;
  };
  // All tokens: each within 5 standard deviations of its probability.
  const std::vector<double> all = first_step({.seed = 1});
  for (std::int64_t c = 0; c < classes; ++c) {
    CAPTURE(c);
    CHECK(std::abs(all[c] - p[c]) < 5 * std::sqrt(p[c] * (1 - p[c]) / n) + 1e-9);
  }
  // The two likeliest alone, in their proportion; a nucleus of the likeliest alone.
  std::vector<std::int64_t> order(classes);
  for (std::int64_t c = 0; c < classes; ++c) order[c] = c;
  std::sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) { return p[a] > p[b]; });
  const std::vector<double> two = first_step({.top_k = 2, .seed = 2});
  const double q = p[order[0]] / (p[order[0]] + p[order[1]]);
  CHECK(std::abs(two[order[0]] - q) < 5 * std::sqrt(q * (1 - q) / n));
  CHECK(two[order[0]] + two[order[1]] == doctest::Approx(1.0));
  const std::vector<double> nucleus = first_step({.top_p = static_cast<float>(p[order[0]] * 0.99), .seed = 3});
  CHECK(nucleus[order[0]] == doctest::Approx(1.0));
  // Excluded tokens are never drawn; the rest keep their proportions.
  const std::vector<double> without = first_step({.seed = 4, .excluded = {static_cast<int>(order[0])}});
  CHECK(without[order[0]] == 0.0);
  const double r = p[order[1]] / (1 - p[order[0]]);
  CHECK(std::abs(without[order[1]] - r) < 5 * std::sqrt(r * (1 - r) / n));
  // Greedy at top_k 1 and at a temperature near 0; the same seed, the same tokens, also for a
  // row drawn among others; another seed, others.
  const Tensor few({8, width}, rows.span().subspan(0, 8 * width));
  CHECK(values(sample_decode(model, few, 1, 5, -1.0f, {.top_k = 1})) == values(greedy_decode(model, few, 1, 5, -1.0f)));
  CHECK(values(sample_decode(model, few, 1, 5, -1.0f, {.temperature = 1e-4f})) ==
        values(greedy_decode(model, few, 1, 5, -1.0f)));
  const Tensor once = sample_decode(model, few, 1, 5, -1.0f, {.seed = 9});
  CHECK(values(sample_decode(model, few, 1, 5, -1.0f, {.seed = 9})) == values(once));
  const Tensor alone = sample_decode(model, Tensor({1, width}, few.span().subspan(0, width)), 1, 5, -1.0f, {.seed = 9});
  CHECK(values(alone) == std::vector<float>(once.data(), once.data() + 5));
  CHECK(values(sample_decode(model, few, 1, 5, -1.0f, {.seed = 10})) != values(once));
  CHECK_THROWS_WITH_AS(sample_decode(model, few, 1, 5, -1.0f, {.temperature = 0}),
                       "sample_decode: temperature 0.000000, top_k 0, top_p 1.000000: the temperature must be "
                       "above 0, top_k 0 (all) or more, top_p in (0, 1]",
                       InvalidArgument);
}
