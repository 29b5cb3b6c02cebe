// Tests of core/nn/ops/recurrent.h: LSTM and GRU against references written out in double from
// their equations, by finite differences through time, and as parts of a model that must learn
// to remember.
#include "cohort/core/nn/ops/recurrent.h"

#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/loss.h"
#include "cohort/core/nn/model.h"
#include "cohort/core/nn/ops/embedding.h"
#include "cohort/core/nn/ops/merge.h"
#include "cohort/core/nn/ops/ops.h"
#include "cohort/core/nn/ops/sequence.h"
#include "core/nn/gradient_check.h"
#include "core/nn/train_loop.h"

using namespace cohort;
using cohort::testing::expect_layer_gradients;
using cohort::testing::random_tensor;
using cohort::testing::train_with_adam;

namespace {

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

struct Weights {
  std::span<const float> kernel, recurrent, bias;
  std::int64_t features, units;
  // Column j of gate block g of the input's product with the kernel, and of h's with the
  // recurrent kernel.
  double input(const float* x, int g, std::int64_t j) const {
    const std::int64_t columns = static_cast<std::int64_t>(kernel.size()) / features;
    double sum = 0;
    for (std::int64_t i = 0; i < features; ++i)
      sum += static_cast<double>(x[i]) * kernel[static_cast<std::size_t>(i * columns + g * units + j)];
    return sum;
  }
  double recurrent_sum(const std::vector<double>& h, int g, std::int64_t j) const {
    const std::int64_t columns = static_cast<std::int64_t>(recurrent.size()) / units;
    double sum = 0;
    for (std::int64_t i = 0; i < units; ++i)
      sum += h[static_cast<std::size_t>(i)] * recurrent[static_cast<std::size_t>(i * columns + g * units + j)];
    return sum;
  }
};

Weights weights(const Graph& graph, std::int64_t features, std::int64_t units) {
  return {graph.values(*graph.find("rnn/kernel")), graph.values(*graph.find("rnn/recurrent_kernel")),
          graph.values(*graph.find("rnn/bias")), features, units};
}

// Every step's output of one example, [steps][units], by the equations in double. With the
// dropout's masks (of this example): the input times `input_mask` [features] at every step, and
// the last output times `state_mask` [units] where it enters the recurrent product.
std::vector<std::vector<double>> reference(const Weights& w, const float* example,
                                           std::int64_t steps, bool gru, double forget_bias,
                                           const float* input_mask = nullptr,
                                           const float* state_mask = nullptr) {
  const std::int64_t u = w.units;
  std::vector<double> h(static_cast<std::size_t>(u), 0.0), c(static_cast<std::size_t>(u), 0.0);
  std::vector<std::vector<double>> outputs;
  std::vector<float> dropped(static_cast<std::size_t>(w.features));
  for (std::int64_t t = 0; t < steps; ++t) {
    const float* x = example + t * w.features;
    if (input_mask != nullptr) {
      for (std::int64_t i = 0; i < w.features; ++i)
        dropped[static_cast<std::size_t>(i)] = x[i] * input_mask[i];
      x = dropped.data();
    }
    std::vector<double> h_in = h;  // the last output as it enters the recurrent product
    if (state_mask != nullptr)
      for (std::int64_t j = 0; j < u; ++j) h_in[static_cast<std::size_t>(j)] *= state_mask[j];
    std::vector<double> next(static_cast<std::size_t>(u));
    for (std::int64_t j = 0; j < u; ++j) {
      const auto k = static_cast<std::size_t>(j);
      if (gru) {
        const std::int64_t columns = 3 * u;
        auto in = [&](int g) { return w.input(x, g, j) + w.bias[static_cast<std::size_t>(g * u + j)]; };
        auto rec = [&](int g) {
          return w.recurrent_sum(h_in, g, j) + w.bias[static_cast<std::size_t>(columns + g * u + j)];
        };
        const double z = sigmoid(in(0) + rec(0));
        const double s = sigmoid(in(1) + rec(1));
        const double n = std::tanh(in(2) + s * rec(2));
        next[k] = z * h[k] + (1 - z) * n;
      } else {
        auto sum = [&](int g) {
          return w.input(x, g, j) + w.recurrent_sum(h_in, g, j) + w.bias[static_cast<std::size_t>(g * u + j)];
        };
        const double i = sigmoid(sum(0)), f = sigmoid(sum(1) + forget_bias);
        const double g = std::tanh(sum(2)), o = sigmoid(sum(3));
        c[k] = f * c[k] + i * g;
        next[k] = o * std::tanh(c[k]);
      }
    }
    h = next;
    outputs.push_back(h);
  }
  return outputs;
}

std::unique_ptr<Recurrent> make(bool gru, std::int64_t units, bool sequences) {
  if (gru) return std::make_unique<GRU>("rnn", units, sequences);
  return std::make_unique<LSTM>("rnn", units, sequences);
}

}  // namespace

TEST_CASE("LSTM and GRU match their equations, the last step's output or every step's") {
  const std::int64_t n = 3, steps = 5, features = 4, units = 6;
  for (bool gru : {false, true}) {
    for (bool sequences : {false, true}) {
      CAPTURE(gru);
      CAPTURE(sequences);
      Graph graph;
      auto layer = make(gru, units, sequences);
      const Shape out = layer->build(graph, {steps, features});
      CHECK(out == (sequences ? Shape{steps, units} : Shape{units}));
      graph.initialize(5);
      // A bias that is not zero, so that its place in each sum is tested too.
      auto bias = graph.values(*graph.find("rnn/bias"));
      for (std::size_t i = 0; i < bias.size(); ++i) bias[i] = 0.05f * static_cast<float>(i % 7) - 0.1f;
      CHECK(graph.find("rnn/kernel")->shape == Shape{features, (gru ? 3 : 4) * units});
      CHECK(graph.find("rnn/recurrent_kernel")->shape == Shape{units, (gru ? 3 : 4) * units});
      CHECK(graph.find("rnn/bias")->shape ==
            (gru ? Shape{2, 3 * units} : Shape{4 * units}));
      const Tensor x = random_tensor({n, steps, features}, 9, -2.0f, 2.0f);
      Tensor y;
      layer->forward(x, y, {});
      const Weights w = weights(graph, features, units);
      for (std::int64_t b = 0; b < n; ++b) {
        const auto expected = reference(w, x.data() + b * steps * features, steps, gru, 1.0);
        for (std::int64_t t = sequences ? 0 : steps - 1; t < steps; ++t)
          for (std::int64_t j = 0; j < units; ++j) {
            const std::int64_t at = sequences ? (b * steps + t) * units + j : b * units + j;
            INFO("example ", b, " step ", t, " unit ", j);
            REQUIRE(y[at] == doctest::Approx(expected[static_cast<std::size_t>(t)][static_cast<std::size_t>(j)]).epsilon(1e-4));
          }
      }
    }
  }
}

TEST_CASE("LSTM and GRU gradients through time match finite differences") {
  for (bool gru : {false, true}) {
    for (bool sequences : {false, true}) {
      CAPTURE(gru);
      CAPTURE(sequences);
      Graph graph;
      auto layer = make(gru, 5, sequences);
      layer->build(graph, {6, 3});
      graph.initialize(2);
      auto bias = graph.values(*graph.find("rnn/bias"));
      for (std::size_t i = 0; i < bias.size(); ++i) bias[i] = 0.1f * static_cast<float>(i % 5) - 0.2f;
      Tensor x = random_tensor({2, 6, 3}, 4);
      GradientCheckOptions check;
      check.step = 1e-3;
      expect_layer_gradients(*layer, graph, x, {}, check);
    }
  }
}

TEST_CASE("LSTM and GRU dropout: one mask of the input and one of the state for every step") {
  const std::int64_t n = 4, steps = 5, features = 6, units = 5;
  const std::uint64_t seed = 77;
  for (bool gru : {false, true}) {
    CAPTURE(gru);
    const RecurrentOptions options{.return_sequences = true, .dropout = 0.4f,
                                   .recurrent_dropout = 0.3f};
    Graph graph;
    std::unique_ptr<Layer> layer =
        gru ? cohort::gru("rnn", units, options) : cohort::lstm("rnn", units, options);
    layer->build(graph, {steps, features});
    graph.initialize(5);
    const Tensor x = random_tensor({n, steps, features}, 9, -2.0f, 2.0f);
    Tensor y;
    layer->forward(x, y, {.training = true, .seed = seed});
    // The masks as documented: Dropout's, keyed by the step's seed and "<name>/dropout" and
    // "<name>/recurrent_dropout".
    Tensor input_mask({n, features}), state_mask({n, units});
    dropout_mask(Graph::variable_seed(seed, "rnn/dropout"), 0.4f, input_mask.span());
    dropout_mask(Graph::variable_seed(seed, "rnn/recurrent_dropout"), 0.3f, state_mask.span());
    std::int64_t zeros = 0;
    for (float m : input_mask.span()) zeros += m == 0.0f;
    CHECK(zeros > 0);
    CHECK(zeros < n * features);
    const Weights w = weights(graph, features, units);
    for (std::int64_t b = 0; b < n; ++b) {
      const auto expected = reference(w, x.data() + b * steps * features, steps, gru, 1.0,
                                      input_mask.data() + b * features,
                                      state_mask.data() + b * units);
      for (std::int64_t t = 0; t < steps; ++t)
        for (std::int64_t j = 0; j < units; ++j) {
          INFO("example ", b, " step ", t, " unit ", j);
          REQUIRE(y[(b * steps + t) * units + j] ==
                  doctest::Approx(expected[static_cast<std::size_t>(t)][static_cast<std::size_t>(j)]).epsilon(1e-4));
        }
    }
    // Outside training, no dropout: the plain layer's output.
    Tensor inference, plain;
    layer->forward(x, inference, {.training = false});
    auto same = make(gru, units, true);
    same->build(graph, {steps, features});
    same->forward(x, plain, {.training = false});
    for (std::int64_t i = 0; i < plain.size(); ++i) CHECK(inference[i] == plain[i]);
    // The gradients of the dropped pass (its masks fixed by the seed).
    Tensor input = random_tensor({2, steps, features}, 4);
    GradientCheckOptions check;
    check.step = 1e-3;
    expect_layer_gradients(*layer, graph, input, {.training = true, .seed = seed}, check);
  }
  CHECK_THROWS_WITH_AS(LSTM("rnn", 4, RecurrentOptions{.recurrent_dropout = 1.0f}),
                       "LSTM \"rnn\": recurrent_dropout = 1.000000, must be in [0, 1)",
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(GRU("rnn", 4, RecurrentOptions{.forget_bias = 0.0f}),
                       "GRU \"rnn\": forget_bias is an LSTM's; a GRU has no forget gate",
                       InvalidArgument);
}

TEST_CASE("A recurrent layer refuses what is not a sequence, naming itself") {
  Graph graph;
  CHECK_THROWS_WITH_AS(LSTM("rnn", 8).build(graph, {28, 28, 1}),
                       "LSTM \"rnn\": input [28, 28, 1] is not [steps, features] (a Reshape makes "
                       "a sequence of an example)",
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(GRU("rnn", 0), "GRU \"rnn\": units = 0, must be >= 1", InvalidArgument);
}

namespace {

// Copies steps [begin, begin + count) of every sequence of x [n, steps, features].
Tensor steps_of(const Tensor& x, std::int64_t begin, std::int64_t count) {
  const std::int64_t n = x.dim(0), steps = x.dim(1), features = x.dim(2);
  Tensor part({n, count, features});
  for (std::int64_t b = 0; b < n; ++b)
    std::copy_n(x.data() + (b * steps + begin) * features, count * features,
                part.data() + b * count * features);
  return part;
}

}  // namespace

TEST_CASE("LSTM and GRU from a given state: a sequence read in two halves is read whole") {
  // The first layer reads steps 0-3 and returns its state; the second, of the same variables,
  // starts from it and reads steps 4-6. Its final state must be the whole sequence's, and the
  // gradients sent back through the state must add up to the whole's: the input's, by step, and
  // the variables' (summed over the two layers). Under a padding mask too, with an example whose
  // padding straddles the halves and one that reads nothing in the second; with both dropouts
  // (the same masks for the halves: one per sequence, for every step); on 1 and 3 threads.
  const std::int64_t n = 3, steps = 7, first = 4, features = 3, units = 5;
  for (int variant = 0; variant < 16; ++variant) {
    const bool gru = (variant & 1) != 0, masked = (variant & 2) != 0, dropout = (variant & 4) != 0;
    const int threads = (variant & 8) != 0 ? 3 : 1;
    CAPTURE(gru);
    CAPTURE(masked);
    CAPTURE(dropout);
    CAPTURE(threads);
    const OpContext context{.training = true, .seed = 7};
    auto make_layer = [&](bool initial) -> std::unique_ptr<Recurrent> {
      const float rate = dropout ? 0.3f : 0.0f;
      const RecurrentOptions o{.dropout = rate, .recurrent_dropout = rate,
                               .initial_state = initial, .return_state = true};
      if (gru) return std::make_unique<GRU>("rnn", units, o);
      return std::make_unique<LSTM>("rnn", units, o);
    };
    auto whole = make_layer(false), head = make_layer(false), tail = make_layer(true);
    const std::int64_t state = units * (gru ? 1 : 2);
    CHECK(whole->state_size() == state);
    Graph graph;
    const auto shapes = [&](std::int64_t count, bool with_state) {
      std::vector<Shape> s = {{count, features}};
      if (with_state) s.push_back({state});
      if (masked) s.push_back({count});
      return s;
    };
    CHECK(whole->build_node(graph, shapes(steps, false)) == Shape{state});
    head->build_node(graph, shapes(first, false));  // the same variables
    tail->build_node(graph, shapes(steps - first, true));
    graph.initialize(3);
    auto bias = graph.values(*graph.find("rnn/bias"));
    for (std::size_t i = 0; i < bias.size(); ++i) bias[i] = 0.1f * static_cast<float>(i % 5) - 0.2f;
    const Tensor x = random_tensor({n, steps, features}, 4, -2.0f, 2.0f);
    Tensor mask({n, steps}, std::vector<float>(n * steps, 1.0f));
    mask[0 * steps + 6] = 0.0f;                                           // the last step
    for (const std::int64_t t : {2, 3, 4}) mask[1 * steps + t] = 0.0f;  // across the halves
    for (std::int64_t t = first; t < steps; ++t) mask[2 * steps + t] = 0.0f;
    const Tensor x_head = steps_of(x, 0, first), x_tail = steps_of(x, first, steps - first);
    Tensor mask_head({n, first}), mask_tail({n, steps - first});
    for (std::int64_t b = 0; b < n; ++b)
      for (std::int64_t t = 0; t < steps; ++t)
        (t < first ? mask_head[b * first + t] : mask_tail[b * (steps - first) + t - first]) =
            mask[b * steps + t];
    const auto with_mask = [&](std::vector<const Tensor*> inputs, const Tensor& m) {
      if (masked) inputs.push_back(&m);
      return inputs;
    };
    set_intra_op_threads(threads);
    Tensor y_whole, y_head, y_tail;
    whole->forward_node(with_mask({&x}, mask), y_whole, context);
    head->forward_node(with_mask({&x_head}, mask_head), y_head, context);
    tail->forward_node(with_mask({&x_tail, &y_head}, mask_tail), y_tail, context);
    REQUIRE(y_tail.shape() == y_whole.shape());
    for (std::int64_t i = 0; i < y_whole.size(); ++i)
      REQUIRE(y_tail[i] == doctest::Approx(y_whole[i]).epsilon(1e-5));
    // Backward: the whole at once, and the tail then the head through the state between them.
    const Tensor dy = random_tensor(y_whole.shape(), 5);
    const auto parameters = static_cast<std::size_t>(graph.num_parameters());
    std::vector<float> g_whole(parameters), g_head(parameters), g_tail(parameters);
    Tensor dx_whole, dx_head, dx_tail, d_state, d_mask;
    const auto targets = [&](std::vector<Tensor*> grads) {
      if (masked) grads.push_back(&d_mask);
      return grads;
    };
    whole->backward_node(with_mask({&x}, mask), y_whole, dy, targets({&dx_whole}), g_whole);
    tail->backward_node(with_mask({&x_tail, &y_head}, mask_tail), y_tail, dy,
                        targets({&dx_tail, &d_state}), g_tail);
    REQUIRE(d_state.shape() == Shape{n, state});
    head->backward_node(with_mask({&x_head}, mask_head), y_head, d_state, targets({&dx_head}),
                        g_head);
    set_intra_op_threads(1);
    const Tensor dx_halves = [&] {
      Tensor joined({n, steps, features});
      for (std::int64_t b = 0; b < n; ++b) {
        std::copy_n(dx_head.data() + b * first * features, first * features,
                    joined.data() + b * steps * features);
        std::copy_n(dx_tail.data() + b * (steps - first) * features, (steps - first) * features,
                    joined.data() + (b * steps + first) * features);
      }
      return joined;
    }();
    for (std::int64_t i = 0; i < dx_whole.size(); ++i)
      REQUIRE(dx_halves[i] == doctest::Approx(dx_whole[i]).epsilon(1e-5).scale(1e-3));
    for (std::size_t i = 0; i < parameters; ++i)
      REQUIRE(g_head[i] + g_tail[i] == doctest::Approx(g_whole[i]).epsilon(1e-5).scale(1e-3));
  }
}

TEST_CASE("LSTM and GRU from and to a state: gradients match finite differences") {
  // With the dropouts too: the recurrent one applies to the initial state where it enters the
  // recurrent product.
  for (int variant = 0; variant < 8; ++variant) {
    const bool gru = (variant & 1) != 0, return_state = (variant & 2) != 0;
    const bool dropout = (variant & 4) != 0;
    CAPTURE(gru);
    CAPTURE(return_state);
    CAPTURE(dropout);
    const float rate = dropout ? 0.25f : 0.0f;
    const RecurrentOptions o{.return_sequences = !return_state, .dropout = rate,
                             .recurrent_dropout = rate, .initial_state = true,
                             .return_state = return_state};
    std::unique_ptr<Recurrent> layer;
    if (gru) layer = std::make_unique<GRU>("rnn", 4, o);
    else layer = std::make_unique<LSTM>("rnn", 4, o);
    Graph graph;
    layer->build_node(graph, std::vector<Shape>{{5, 3}, {layer->state_size()}});
    graph.initialize(2);
    Tensor x = random_tensor({2, 5, 3}, 4);
    Tensor state = random_tensor({2, layer->state_size()}, 7);
    Tensor* inputs[] = {&x, &state};
    GradientCheckOptions check;
    check.step = 1e-3;
    expect_layer_gradients(*layer, graph, inputs, {.training = true, .seed = 3}, check);
  }
}

TEST_CASE("Recurrent states: what does not fit is refused, naming the layer") {
  CHECK_THROWS_WITH_AS(LSTM("rnn", 4, {.return_sequences = true, .return_state = true}),
                       "LSTM \"rnn\": return_state and return_sequences: a layer gives one output "
                       "(a second layer over the same input gives the other)",
                       InvalidArgument);
  Graph graph;
  Model model(graph);
  const Node x = model.input({6, 3}, "x");
  const Node h = model.input({4}, "h");
  CHECK_THROWS_WITH_AS(model.apply(lstm("rnn", 4, {.initial_state = true}), {x, h}),
                       "LSTM \"rnn\": initial state [4] is not [8] (h and c side by side)",
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(model.apply(gru("gru", 5, {.initial_state = true}), {x, h}),
                       "GRU \"gru\": initial state [4] is not [5] (h)", InvalidArgument);
  GRU alone("gru", 4, {.initial_state = true});
  Graph other;
  alone.build(other, {6, 3});
  Tensor y;
  CHECK_THROWS_WITH_AS(alone.forward(random_tensor({2, 6, 3}, 1), y, {}),
                       "GRU \"gru\": built to start from a given state (initial_state): apply it "
                       "to {sequence, state}",
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(model.apply(gru("gru", 4, {.initial_state = true}), x),
                       doctest::Contains("layer \"gru\" takes 2 inputs (and optionally a mask), given 1"),
                       InvalidArgument);
  const Node mask = model.input({5}, "mask");
  CHECK_THROWS_WITH_AS(model.apply(gru("gru", 4, {.initial_state = true}), {x, h, mask}),
                       doctest::Contains("mask [5] does not fit its first input [6, 3]"),
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(bidirectional("bi", lstm("bi/forward", 4),
                                     lstm("bi/backward", 4, {.initial_state = true})),
                       "Bidirectional \"bi\": \"bi/backward\" takes an initial state and "
                       "\"bi/forward\" does not; both or neither",
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(model.apply(bidirectional("bi", lstm("bi/forward", 4, {.initial_state = true}),
                                                 gru("bi/backward", 3, {.initial_state = true})),
                                   {x, h}),
                       "Bidirectional \"bi\": initial state [4] is not [11] (the forward layer's state "
                       "[8], then the backward layer's [3])",
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(model.apply(bidirectional("bi", gru("bi/forward", 4, {.initial_state = true}),
                                                 gru("bi/backward", 4, {.initial_state = true})),
                                   x),
                       doctest::Contains("layer \"bi\" takes 2 inputs (and optionally a mask), given 1"),
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(bidirectional("bi", lstm("bi/forward", 4, {.return_state = true}),
                                     lstm("bi/backward", 4)),
                       "Bidirectional \"bi\": \"bi/forward\" returns its state and \"bi/backward\" "
                       "its output; both or neither",
                       InvalidArgument);
}

TEST_CASE("An encoder-decoder of LSTMs: the decoder, started from the encoder's state, reverses") {
  // Sources of 4 tokens from 1-8; the decoder reads the start token 0 and then the reversed
  // source shifted by one (teacher forcing), and must name the reversed source's token at each
  // step. Nothing but the encoder's final state tells it the tokens it has not read yet: started
  // from zeros, the same decoder scores near chance on held-out sources.
  const std::int64_t train = 512, held_out = 256, length = 4, vocabulary = 9;
  const auto data = [&](std::int64_t n, std::uint64_t seed) {
    Tensor rows({n, 2 * length}), targets({n, length, vocabulary});
    for (std::int64_t b = 0; b < n; ++b) {
      for (std::int64_t t = 0; t < length; ++t) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        rows[b * 2 * length + t] = static_cast<float>(1 + (seed >> 33) % 8);
      }
      for (std::int64_t k = 0; k < length; ++k) {
        const float token = rows[b * 2 * length + length - 1 - k];
        targets[(b * length + k) * vocabulary + static_cast<std::int64_t>(token)] = 1.0f;
        if (k + 1 < length) rows[b * 2 * length + length + k + 1] = token;  // the next step reads it
      }
    }
    return std::pair{rows, targets};
  };
  const auto [rows, targets] = data(train, 5);
  const auto [test_rows, test_targets] = data(held_out, 6);
  for (bool from_state : {true, false}) {
    CAPTURE(from_state);
    Graph graph;
    Model model(graph);
    const Node row = model.input({2 * length});
    const Node source = model.apply(embedding("source_embed", vocabulary, 16),
                                    model.apply(slice("source", 0, length), row));
    const Node state = model.apply(lstm("encoder", 64, {.return_state = true}), source);
    const Node target = model.apply(embedding("target_embed", vocabulary, 16),
                                    model.apply(slice("target", length, length), row));
    const Node y = from_state
                       ? model.apply(lstm("decoder", 64, {.return_sequences = true, .initial_state = true}),
                                     {target, state})
                       : model.apply(lstm("decoder", 64, {.return_sequences = true}), target);
    model.apply(dense("logits", vocabulary, Activation::kNone, /*flatten=*/false), y);
    model.set_loss(std::make_unique<CategoricalCrossEntropyLoss>());
    graph.initialize(1);
    train_with_adam(model, rows, Targets{{}, &targets}, 200);
    const float accuracy = model.evaluate(test_rows, Targets{{}, &test_targets}).metrics[0];
    MESSAGE(std::string(from_state ? "from the encoder's state" : "from zeros") << ": "
            << accuracy << " of the held-out steps");
    if (from_state) CHECK(accuracy > 0.95f);
    else CHECK(accuracy < 0.5f);
  }
}

TEST_CASE("Stacked LSTMs learn to remember a sequence's first sign over 12 noisy steps") {
  // The class is the sign of step 0's first feature; every later step is noise. A model that
  // does not carry step 0 to the end scores a half.
  const std::int64_t n = 256, steps = 12, features = 2;
  Tensor x = random_tensor({n, steps, features}, 11);
  std::vector<std::int32_t> labels(static_cast<std::size_t>(n));
  for (std::int64_t b = 0; b < n; ++b) labels[static_cast<std::size_t>(b)] = x[b * steps * features] > 0 ? 1 : 0;
  for (bool gru : {false, true}) {
    CAPTURE(gru);
    Graph graph;
    Model model(graph, {steps, features}, 2);
    model.add(gru ? cohort::gru("rnn1", 16, true) : lstm("rnn1", 16, true))
        .add(gru ? cohort::gru("rnn2", 16) : lstm("rnn2", 16))
        .add(dense("logits", 2));
    graph.initialize(1);
    train_with_adam(model, x, Targets{labels, nullptr}, 150);
    CHECK(model.evaluate(x, labels).accuracy > 0.95f);
  }
}

TEST_CASE("Bidirectional: the forward layer on the sequence, the backward one on it reversed") {
  // Each layer's last output, every step's, or (return_state) its final state: an LSTM's [h, c],
  // 8 floats, beside a GRU's h, 3.
  const std::int64_t n = 2, steps = 5, features = 3;
  for (const char* mode : {"last", "sequences", "states"}) {
    CAPTURE(mode);
    const bool sequences = std::string(mode) == "sequences";
    const RecurrentOptions o{.return_sequences = sequences, .return_state = std::string(mode) == "states"};
    const std::int64_t wf = o.return_state ? 8 : 4, wb = 3, width = wf + wb;
    Graph graph;
    Bidirectional layer("bi", std::make_unique<LSTM>("bi/forward", 4, o),
                        std::make_unique<GRU>("bi/backward", 3, o));
    CHECK(layer.build(graph, {steps, features}) == (sequences ? Shape{steps, width} : Shape{width}));
    graph.initialize(8);
    const Tensor x = random_tensor({n, steps, features}, 3);
    Tensor y;
    layer.forward(x, y, {});
    // The same variables through layers of their own, the reversed input made by hand.
    LSTM forward("bi/forward", 4, o);
    GRU backward("bi/backward", 3, o);
    forward.build(graph, {steps, features});
    backward.build(graph, {steps, features});
    Tensor reversed({n, steps, features});
    for (std::int64_t b = 0; b < n; ++b)
      for (std::int64_t t = 0; t < steps; ++t)
        for (std::int64_t i = 0; i < features; ++i)
          reversed[(b * steps + steps - 1 - t) * features + i] = x[(b * steps + t) * features + i];
    Tensor yf, yb;
    forward.forward(x, yf, {});
    backward.forward(reversed, yb, {});
    const std::int64_t positions = sequences ? steps : 1;
    for (std::int64_t b = 0; b < n; ++b)
      for (std::int64_t t = 0; t < positions; ++t) {
        for (std::int64_t j = 0; j < wf; ++j)
          CHECK(y[(b * positions + t) * width + j] == yf[(b * positions + t) * wf + j]);
        for (std::int64_t j = 0; j < wb; ++j)
          CHECK(y[(b * positions + t) * width + wf + j] ==
                yb[(b * positions + positions - 1 - t) * wb + j]);
      }
    Tensor input = random_tensor({n, steps, features}, 6);
    GradientCheckOptions check;
    check.step = 1e-3;
    expect_layer_gradients(layer, graph, input, {}, check);
  }
}

TEST_CASE("Bidirectional from a given state: each layer starts from its part, the backward one at the end") {
  // An LSTM forward (state [h, c], 8) and a GRU backward (state h, 3) from a state [11]: the
  // outputs and every gradient are those of the two layers run alone on their parts, with and
  // without a padding mask; and the gradients match finite differences.
  const std::int64_t n = 3, steps = 5, features = 3, fs = 8, bs = 3;
  for (const char* mode : {"last", "sequences", "states"}) {
    for (const bool masked : {false, true}) {
      CAPTURE(mode);
      CAPTURE(masked);
      const bool sequences = std::string(mode) == "sequences";
      const RecurrentOptions o{.return_sequences = sequences, .initial_state = true,
                               .return_state = std::string(mode) == "states"};
      const std::int64_t wf = o.return_state ? fs : 4, wb = 3, width = wf + wb;
      Graph graph;
      Bidirectional layer("bi", std::make_unique<LSTM>("bi/forward", 4, o),
                          std::make_unique<GRU>("bi/backward", 3, o));
      CHECK(layer.num_inputs() == 2);
      const auto shapes = [&](std::int64_t state) {
        std::vector<Shape> s{{steps, features}, {state}};
        if (masked) s.push_back({steps});
        return s;
      };
      CHECK(layer.build_node(graph, shapes(fs + bs)) == (sequences ? Shape{steps, width} : Shape{width}));
      LSTM forward("bi/forward", 4, o);  // the same variables, through layers of their own
      GRU backward("bi/backward", 3, o);
      forward.build_node(graph, shapes(fs));
      backward.build_node(graph, shapes(bs));
      graph.initialize(8);
      const Tensor x = random_tensor({n, steps, features}, 3);
      const Tensor state = random_tensor({n, fs + bs}, 4);
      Tensor mask({n, steps}, std::vector<float>(n * steps, 1.0f));
      mask[0 * steps + 4] = 0.0f;  // padded at the back, at the front, and in the middle
      mask[1 * steps + 0] = mask[1 * steps + 1] = 0.0f;
      mask[2 * steps + 2] = 0.0f;
      const auto with_mask = [&](std::vector<const Tensor*> inputs, const Tensor& m) {
        if (masked) inputs.push_back(&m);
        return inputs;
      };
      Tensor y;
      layer.forward_node(with_mask({&x, &state}, mask), y, {});
      Tensor reversed({n, steps, features}), reversed_mask({n, steps}), sf({n, fs}), sb({n, bs});
      for (std::int64_t b = 0; b < n; ++b) {
        for (std::int64_t t = 0; t < steps; ++t) {
          reversed_mask[b * steps + steps - 1 - t] = mask[b * steps + t];
          for (std::int64_t i = 0; i < features; ++i)
            reversed[(b * steps + steps - 1 - t) * features + i] = x[(b * steps + t) * features + i];
        }
        for (std::int64_t i = 0; i < fs + bs; ++i) (i < fs ? sf[b * fs + i] : sb[b * bs + i - fs]) = state[b * (fs + bs) + i];
      }
      Tensor yf, yb;
      forward.forward_node(with_mask({&x, &sf}, mask), yf, {});
      backward.forward_node(with_mask({&reversed, &sb}, reversed_mask), yb, {});
      const std::int64_t positions = sequences ? steps : 1;
      for (std::int64_t b = 0; b < n; ++b)
        for (std::int64_t t = 0; t < positions; ++t) {
          for (std::int64_t j = 0; j < wf; ++j)
            REQUIRE(y[(b * positions + t) * width + j] == yf[(b * positions + t) * wf + j]);
          for (std::int64_t j = 0; j < wb; ++j)
            REQUIRE(y[(b * positions + t) * width + wf + j] == yb[(b * positions + positions - 1 - t) * wb + j]);
        }
      // Backward: the state's gradient is the two layers' side by side, the variables' their sum.
      const Tensor dy = random_tensor(y.shape(), 5);
      Tensor dyf(yf.shape()), dyb(yb.shape());
      for (std::int64_t b = 0; b < n; ++b)
        for (std::int64_t t = 0; t < positions; ++t) {
          std::copy_n(dy.data() + (b * positions + t) * width, wf, dyf.data() + (b * positions + t) * wf);
          std::copy_n(dy.data() + (b * positions + t) * width + wf, wb,
                      dyb.data() + (b * positions + positions - 1 - t) * wb);
        }
      const auto parameters = static_cast<std::size_t>(graph.num_parameters());
      std::vector<float> g(parameters), g_alone(parameters);
      Tensor dx, d_state, d_mask, dxf, dxb, dsf, dsb;
      const auto targets = [&](std::vector<Tensor*> grads) {
        if (masked) grads.push_back(&d_mask);
        return grads;
      };
      layer.backward_node(with_mask({&x, &state}, mask), y, dy, targets({&dx, &d_state}), g);
      forward.backward_node(with_mask({&x, &sf}, mask), yf, dyf, targets({&dxf, &dsf}), g_alone);
      backward.backward_node(with_mask({&reversed, &sb}, reversed_mask), yb, dyb, targets({&dxb, &dsb}), g_alone);
      REQUIRE(d_state.shape() == Shape{n, fs + bs});
      for (std::int64_t b = 0; b < n; ++b)
        for (std::int64_t i = 0; i < fs + bs; ++i)
          REQUIRE(d_state[b * (fs + bs) + i] == (i < fs ? dsf[b * fs + i] : dsb[b * bs + i - fs]));
      for (std::int64_t b = 0; b < n; ++b)
        for (std::int64_t t = 0; t < steps; ++t)
          for (std::int64_t i = 0; i < features; ++i)
            REQUIRE(dx[(b * steps + t) * features + i] ==
                    doctest::Approx(dxf[(b * steps + t) * features + i] +
                                    dxb[(b * steps + steps - 1 - t) * features + i]).epsilon(1e-6));
      for (std::size_t i = 0; i < parameters; ++i) REQUIRE(g[i] == doctest::Approx(g_alone[i]).epsilon(1e-6));
      // Asked for the state's gradient alone, or the sequence's alone: the same.
      std::vector<float> g_again(parameters);
      Tensor d_state_alone, dx_alone;
      layer.backward_node(with_mask({&x, &state}, mask), y, dy, targets({nullptr, &d_state_alone}), g_again);
      REQUIRE(std::vector<float>(d_state_alone.span().begin(), d_state_alone.span().end()) ==
              std::vector<float>(d_state.span().begin(), d_state.span().end()));
      layer.backward_node(with_mask({&x, &state}, mask), y, dy, targets({&dx_alone, nullptr}), g_again);
      REQUIRE(std::vector<float>(dx_alone.span().begin(), dx_alone.span().end()) ==
              std::vector<float>(dx.span().begin(), dx.span().end()));
      if (masked) continue;  // a mask has no gradient to check
      Tensor input = random_tensor({n, steps, features}, 6), given = random_tensor({n, fs + bs}, 7);
      Tensor* inputs[] = {&input, &given};
      GradientCheckOptions check;
      check.step = 1e-3;
      expect_layer_gradients(layer, graph, inputs, {}, check);
    }
  }
}

TEST_CASE("Bidirectional refuses layers that share a name or disagree on what they return") {
  Graph graph;
  CHECK_THROWS_WITH_AS(Bidirectional("bi", lstm("bi/rnn", 4), lstm("bi/rnn", 4)),
                       "Bidirectional \"bi\": its two layers are both named \"bi/rnn\" and would "
                       "share their variables",
                       InvalidArgument);
  Bidirectional mixed("bi", lstm("bi/forward", 4, true), lstm("bi/backward", 4, false));
  CHECK_THROWS_WITH_AS(mixed.build(graph, {6, 2}),
                       "Bidirectional \"bi\": input [6, 2]: its layers give [6, 4] and [4]; both "
                       "must give [units] or both [6, units]",
                       InvalidArgument);
}

TEST_CASE("Bidirectional's layers must be named under it: a layer owns the variables under its name") {
  CHECK_THROWS_WITH_AS(Bidirectional("bi", lstm("forward", 4), lstm("bi/backward", 4)),
                       "Bidirectional \"bi\": its layer \"forward\" must be named \"bi/...\" (as "
                       "\"bi/forward\"), so that its variables are the Bidirectional's",
                       InvalidArgument);
  // Named under it, a first layer's gradients are computed and its parameters counted.
  Graph graph;
  Model model(graph, {5, 3}, 2);
  model.add(bidirectional("bi", lstm("bi/forward", 4), gru("bi/backward", 4)))
      .add(dense("logits", 2));
  graph.initialize(3);
  const Tensor x = random_tensor({4, 5, 3}, 2);
  const std::vector<std::int32_t> labels = {0, 1, 1, 0};
  std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()), 0.0f);
  model.train_step(x, labels, grads, {});
  const Variable* kernel = graph.find("bi/backward/kernel");
  double norm = 0;
  for (std::int64_t i = 0; i < kernel->size; ++i) norm += std::abs(grads[static_cast<std::size_t>(kernel->offset + i)]);
  CHECK(norm > 0);
  CHECK(model.summary().find("bi (Bidirectional)") != std::string::npos);
}

TEST_CASE("A class per step: an LSTM and a causal convolution learn to repeat the token 3 steps back") {
  // 256 sequences of 16 tokens from 8; each step's class is the token 3 steps before it (0 for
  // the first 3 steps), one-hot targets [16, 8] under categorical cross-entropy. Chance: 1/8.
  const std::int64_t n = 256, steps = 16, vocabulary = 8, lag = 3;
  Tensor ids({n, steps});
  Tensor targets({n, steps, vocabulary});
  std::uint64_t state = 99;
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t t = 0; t < steps; ++t) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      ids[b * steps + t] = static_cast<float>((state >> 33) % vocabulary);
      const std::int64_t label = t >= lag ? static_cast<std::int64_t>(ids[b * steps + t - lag]) : 0;
      targets[(b * steps + t) * vocabulary + label] = 1.0f;
    }
  const Targets per_step{{}, &targets};
  for (bool recurrent : {true, false}) {
    CAPTURE(recurrent);
    Graph graph;
    Model model(graph);
    Node x = model.apply(embedding("embed", vocabulary, 8), model.input({steps}));
    x = model.apply(recurrent ? lstm("rnn", 32, /*return_sequences=*/true)
                              : conv1d("conv", 32, lag + 1, Activation::kRelu, 1, Padding::kCausal),
                    x);
    model.apply(dense("logits", vocabulary, Activation::kNone, /*flatten=*/false), x);
    model.set_loss(std::make_unique<CategoricalCrossEntropyLoss>());
    model.check_data({steps}, TargetSpec::values({steps, vocabulary}));
    graph.initialize(1);
    train_with_adam(model, ids, per_step, 200);
    const StepMetrics m = model.evaluate(ids, per_step);
    CHECK(model.metric_names().front() == "categorical_accuracy");
    CHECK(m.metrics[0] > 0.95f);
  }
}

TEST_CASE("LSTM and GRU on three threads compute what they do on one") {
  for (bool gru : {false, true}) {
    for (bool sequences : {false, true}) {
      CAPTURE(gru);
      CAPTURE(sequences);
      Graph graph;
      auto layer = make(gru, 6, sequences);
      layer->build(graph, {5, 4});
      graph.initialize(3);
      const Tensor x = random_tensor({7, 5, 4}, 2);  // 7 examples: slices of 3, 2 and 2
      Tensor y1, y3, dx1, dx3;
      std::vector<float> g1(static_cast<std::size_t>(graph.num_parameters()));
      std::vector<float> g3(g1.size(), 9.0f);
      layer->forward(x, y1, {});
      const Tensor dy = random_tensor(y1.shape(), 6);
      layer->backward(x, y1, dy, &dx1, g1);
      set_intra_op_threads(3);
      layer->forward(x, y3, {});
      layer->backward(x, y3, dy, &dx3, g3);
      set_intra_op_threads(1);
      for (std::int64_t i = 0; i < y1.size(); ++i) CHECK(y3[i] == doctest::Approx(y1[i]).epsilon(1e-5));
      for (std::int64_t i = 0; i < dx1.size(); ++i) CHECK(dx3[i] == doctest::Approx(dx1[i]).epsilon(1e-5));
      for (std::size_t i = 0; i < g1.size(); ++i)
        CHECK(g3[i] == doctest::Approx(g1[i]).epsilon(1e-5).scale(1e-3));
    }
  }
}
