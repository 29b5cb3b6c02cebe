// Tests of core/nn/ops/masking.h: each layer that takes a padding mask computes on a padded batch
// what it computes on each example's steps alone (outputs, input and parameter gradients), the
// mask's own layer and the graph's rules for it, and models that learn through masks.
#include "cohort/core/nn/ops/masking.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/loss.h"
#include "cohort/core/nn/model.h"
#include "cohort/core/nn/models.h"
#include "cohort/core/nn/ops/attention.h"
#include "cohort/core/nn/ops/embedding.h"
#include "cohort/core/nn/ops/ops.h"
#include "cohort/core/nn/ops/pooling.h"
#include "cohort/core/nn/ops/recurrent.h"
#include "cohort/core/nn/ops/sequence.h"
#include "cohort/core/nn/threads.h"
#include "core/nn/gradient_check.h"
#include "core/nn/train_loop.h"

using namespace cohort;
using cohort::testing::random_tensor;
using cohort::testing::train_with_adam;

namespace {

using Factory = std::function<std::unique_ptr<Layer>()>;

// A mask [n, steps]: example 0 reads every step; the others a random set of at least one step,
// with padding at the front, at the back and in between.
Tensor random_mask(std::int64_t n, std::int64_t steps, std::uint64_t seed) {
  Tensor mask({n, steps});
  std::uint64_t state = seed;
  for (std::int64_t b = 0; b < n; ++b) {
    bool any = false;
    for (std::int64_t t = 0; t < steps; ++t) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      const bool read = b == 0 || (state >> 40) % 3 != 0;
      mask[b * steps + t] = read ? 1.0f : 0.0f;
      any = any || read;
    }
    if (!any) mask[b * steps + steps / 2] = 1.0f;
  }
  return mask;
}

struct Pass {
  Tensor output, grad_input;
  std::vector<float> grads;
};

// One forward and backward pass of a built layer, with its mask where one is given.
Pass run(Layer& layer, const Graph& graph, const Tensor& x, const Tensor* mask,
         const Tensor& grad_output) {
  Pass pass;
  std::vector<const Tensor*> inputs = {&x};
  std::vector<Tensor*> grad_inputs = {&pass.grad_input};
  if (mask != nullptr) {
    inputs.push_back(mask);
    grad_inputs.push_back(nullptr);
  }
  layer.forward_node(inputs, pass.output, {});
  pass.grads.assign(static_cast<std::size_t>(graph.num_parameters()), 0.0f);
  layer.backward_node(inputs, pass.output, grad_output, grad_inputs, pass.grads);
  return pass;
}

double largest(std::span<const float> values) {
  double m = 0;
  for (float v : values) m = std::max(m, static_cast<double>(std::fabs(v)));
  return m;
}

// `make()` built on [steps, features] with a mask, on a padded batch, against the same layer
// (the same name: the same variables) built on each example's steps read and run on them alone:
// the outputs of those steps (or the one output) agree, the padded steps' outputs are zeros
// where `zero_padding` (else not compared, and given no gradient), the input gradients agree on
// the steps read and are zero on padding, and the parameter gradients are the examples' sum.
void expect_masked_is_each_example_alone(const Factory& make, std::int64_t steps,
                                         std::int64_t features, bool zero_padding) {
  const std::int64_t n = 5;
  Graph graph;
  std::unique_ptr<Layer> masked = make();
  const std::vector<Shape> shapes = {{steps, features}, {steps}};
  const Shape out = masked->build_node(graph, shapes);
  graph.initialize(3);
  const bool sequence = out.size() == 2;
  const std::int64_t units = out.back(), positions = sequence ? steps : 1;
  const Tensor x = random_tensor({n, steps, features}, 4);
  const Tensor mask = random_mask(n, steps, 5);
  Tensor g = random_tensor({n, positions, units}, 6);
  if (sequence && !zero_padding)  // the padded steps' outputs are not the model's concern
    for (std::int64_t b = 0; b < n; ++b)
      for (std::int64_t t = 0; t < steps; ++t)
        if (mask[b * steps + t] == 0.0f) std::fill_n(g.data() + (b * steps + t) * units, units, 0.0f);
  const Pass whole = run(*masked, graph, x, &mask, g);
  REQUIRE(whole.output.size() == n * positions * units);

  std::vector<double> grads(whole.grads.size(), 0.0);
  const double scale_out = largest(whole.output.span()) + 1e-3;
  const double scale_in = largest(whole.grad_input.span()) + 1e-3;
  for (std::int64_t b = 0; b < n; ++b) {
    CAPTURE(b);
    std::vector<std::int64_t> read;
    for (std::int64_t t = 0; t < steps; ++t)
      if (mask[b * steps + t] != 0.0f) read.push_back(t);
    const auto length = static_cast<std::int64_t>(read.size());
    Tensor xs({1, length, features});
    Tensor gs({1, sequence ? length : 1, units});
    for (std::int64_t k = 0; k < length; ++k) {
      std::copy_n(x.data() + (b * steps + read[static_cast<std::size_t>(k)]) * features, features,
                  xs.data() + k * features);
      if (sequence)
        std::copy_n(g.data() + (b * steps + read[static_cast<std::size_t>(k)]) * units, units,
                    gs.data() + k * units);
    }
    if (!sequence) std::copy_n(g.data() + b * units, units, gs.data());
    std::unique_ptr<Layer> alone = make();
    const std::vector<Shape> short_shape = {{length, features}};
    alone->build_node(graph, short_shape);
    const Pass part = run(*alone, graph, xs, nullptr, gs);
    for (std::size_t i = 0; i < grads.size(); ++i) grads[i] += part.grads[i];
    for (std::int64_t t = 0, k = 0; t < positions; ++t) {
      const bool is_read = !sequence || mask[b * steps + t] != 0.0f;
      for (std::int64_t j = 0; j < units; ++j) {
        const float y = whole.output[(b * positions + t) * units + j];
        if (is_read) {
          CHECK(std::fabs(y - part.output[k * units + j]) <= 1e-5 * scale_out);
        } else if (zero_padding) {
          CHECK(y == 0.0f);
        }
      }
      if (is_read) ++k;
    }
    for (std::int64_t t = 0, k = 0; t < steps; ++t) {
      const bool is_read = mask[b * steps + t] != 0.0f;
      for (std::int64_t i = 0; i < features; ++i) {
        const float d = whole.grad_input[(b * steps + t) * features + i];
        if (is_read) {
          CHECK(std::fabs(d - part.grad_input[k * features + i]) <= 1e-5 * scale_in);
        } else {
          CHECK(d == 0.0f);
        }
      }
      if (is_read) ++k;
    }
  }
  const double scale = largest(whole.grads) + 1e-3;
  CHECK((grads.empty() || scale > 1e-2));  // the comparison is not of zeros
  for (std::size_t i = 0; i < grads.size(); ++i) {
    CAPTURE(i);
    CHECK(std::fabs(whole.grads[i] - grads[i]) <= 1e-5 * scale);
  }
}

}  // namespace

TEST_CASE("LSTM and GRU with a mask compute each example's steps read alone, wherever its padding") {
  for (int threads : {1, 3})  // 3: the batch of 5 in slices of 2, 2 and 1
    for (bool sequences : {false, true}) {
      CAPTURE(threads);
      CAPTURE(sequences);
      set_intra_op_threads(threads);
      expect_masked_is_each_example_alone([&] { return lstm("rnn", 6, sequences); }, 9, 4, true);
      expect_masked_is_each_example_alone([&] { return gru("rnn", 5, sequences); }, 9, 4, true);
      set_intra_op_threads(1);
    }
}

TEST_CASE("Bidirectional with a mask: each direction starts at the example's own first step") {
  for (bool sequences : {false, true}) {
    CAPTURE(sequences);
    expect_masked_is_each_example_alone(
        [&] {
          return bidirectional("bi", lstm("bi/forward", 4, sequences),
                               gru("bi/backward", 3, sequences));
        },
        8, 3, true);
  }
}

TEST_CASE("Attention with a mask: no step attends to padding, plain or causal") {
  for (int threads : {1, 3})
    for (bool causal : {false, true}) {
      CAPTURE(threads);
      CAPTURE(causal);
      set_intra_op_threads(threads);
      expect_masked_is_each_example_alone(
          [&] { return multi_head_attention("attention", 2, 3, causal); }, 7, 6, false);
      set_intra_op_threads(1);
    }
}

TEST_CASE("The global pools of a sequence with a mask pool the steps read") {
  expect_masked_is_each_example_alone([] { return global_avg_pool1d("pool"); }, 7, 5, true);
  expect_masked_is_each_example_alone([] { return global_max_pool1d("pool"); }, 7, 5, true);
}

TEST_CASE("An example that is all padding: zeros from the recurrent layers and pools, no gradient") {
  const std::int64_t steps = 4, features = 3;
  Tensor mask({2, steps});
  std::fill_n(mask.data(), steps, 1.0f);  // example 0 reads all, example 1 nothing
  const Tensor x = random_tensor({2, steps, features}, 7);
  const std::vector<Shape> shapes = {{steps, features}, {steps}};
  for (const Factory& make : std::vector<Factory>{
           [] { return lstm("layer", 4); }, [] { return gru("layer", 4, true); },
           [] { return global_avg_pool1d("layer"); }, [] { return global_max_pool1d("layer"); },
           [] { return multi_head_attention("layer", 1, 3); }}) {
    Graph graph;
    std::unique_ptr<Layer> layer = make();
    CAPTURE(layer->name());
    const Shape out = layer->build_node(graph, shapes);
    graph.initialize(2);
    Tensor g = random_tensor({2, num_elements(out)}, 8);
    Shape batch = {2};
    batch.insert(batch.end(), out.begin(), out.end());
    g.reshape(batch);
    const Pass pass = run(*layer, graph, x, &mask, g);
    const std::int64_t size = num_elements(out);
    for (std::int64_t i = 0; i < size; ++i) {
      CHECK(std::isfinite(pass.output[size + i]));
      if (dynamic_cast<MultiHeadAttention*>(layer.get()) == nullptr)
        CHECK(pass.output[size + i] == 0.0f);
    }
    for (std::int64_t i = 0; i < steps * features; ++i)
      CHECK(pass.grad_input[steps * features + i] == 0.0f);
  }
}

TEST_CASE("PaddingMask: 0 where a step is padding, token ids or whole steps of features") {
  Graph graph;
  PaddingMask ids("mask", 0.0f);
  CHECK(ids.build(graph, {4}) == Shape{4});
  Tensor tokens({2, 4});
  const float values[] = {5, 3, 0, 0, 0, 2, 0, 7};
  std::copy_n(values, 8, tokens.data());
  Tensor mask;
  ids.forward(tokens, mask, {});
  const float expected[] = {1, 1, 0, 0, 0, 1, 0, 1};
  for (int i = 0; i < 8; ++i) CHECK(mask[i] == expected[i]);

  PaddingMask steps("steps", -1.0f);  // Keras's Masking(mask_value=-1)
  CHECK(steps.build(graph, {3, 2}) == Shape{3});
  Tensor series({1, 3, 2});
  const float rows[] = {-1, 4, -1, -1, 0, 0};  // a step is padding only where all are -1
  std::copy_n(rows, 6, series.data());
  steps.forward(series, mask, {});
  CHECK(mask[0] == 1.0f);
  CHECK(mask[1] == 0.0f);
  CHECK(mask[2] == 1.0f);
  CHECK_THROWS_WITH_AS(steps.build(graph, {2, 3, 4}),
                       doctest::Contains("PaddingMask \"steps\": input [2, 3, 4] is not [steps]"),
                       InvalidArgument);
}

TEST_CASE("The graph takes a mask beside the layers that take one, of the sequence's length") {
  Graph graph;
  Model model(graph);
  Node ids = model.input({6});
  Node mask = model.apply(padding_mask("mask"), ids);
  Node x = model.apply(embedding("embed", 10, 4), ids);
  CHECK_THROWS_WITH_AS(model.apply(dense("dense", 3, Activation::kNone, false), {x, mask}),
                       doctest::Contains("layer \"dense\" takes 1 input, given 2"),
                       InvalidArgument);
  Node other = model.input({5}, "other");
  CHECK_THROWS_WITH_AS(model.apply(lstm("lstm", 3), {x, other}),
                       doctest::Contains("layer \"lstm\": mask [5] does not fit its input [6, 4]"),
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(model.apply(lstm("lstm", 3), {x, mask, mask}),
                       doctest::Contains("takes 1 input (and optionally a mask), given 3"), InvalidArgument);
  CHECK_THROWS_WITH_AS(
      model.apply(bidirectional("bi", lstm("bi/forward", 3), conv1d("bi/backward", 3, 2)),
                  {x, mask}),
      doctest::Contains("Bidirectional \"bi\" has a mask, which its layer \"bi/backward\" does not take"), InvalidArgument);
  Node sequence = model.apply(embedding("embed2", 10, 4), other);
  CHECK_THROWS_WITH_AS(model.apply(multi_head_attention("mha", 2), {x, sequence}),
                       doctest::Contains("(a query and a value: cross_attention() takes them)"),
                       InvalidArgument);
  CHECK(model.shape(model.apply(lstm("lstm", 3), {x, mask})) == Shape{3});
}

TEST_CASE("Masked encoders learn the last token of texts of every length, padded at the back") {
  // 400 texts of 2 to 12 tokens from 1..7, padded at the back with id 0 to 12 steps; the class:
  // whether the last token is 4 or more. Then the same texts padded at the front: a masked
  // recurrent encoder reads the same steps, so it predicts the same.
  const std::int64_t n = 400, steps = 12;
  Tensor ids({n, steps}), front({n, steps});
  std::vector<std::int32_t> labels(static_cast<std::size_t>(n));
  std::uint64_t state = 41;
  const auto next = [&](std::uint64_t range) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % range;
  };
  for (std::int64_t b = 0; b < n; ++b) {
    const auto length = static_cast<std::int64_t>(2 + next(11));
    for (std::int64_t t = 0; t < length; ++t) {
      ids[b * steps + t] = static_cast<float>(1 + next(7));
      front[b * steps + steps - length + t] = ids[b * steps + t];
    }
    labels[static_cast<std::size_t>(b)] = ids[b * steps + length - 1] >= 4.0f ? 1 : 0;
  }
  const Targets targets{labels, nullptr};
  for (const char* kind : {"lstm", "gru", "bilstm"}) {
    CAPTURE(kind);
    Graph graph;
    Model model(graph);
    Node input = model.input({steps});
    Node mask = model.apply(padding_mask("mask"), input);
    Node x = model.apply(embedding("embed", 8, 8), input);
    x = sequence_encoder(model, x, kind, 16, mask);
    model.apply(dense("logits", 2), x);
    model.set_loss(std::make_unique<SoftmaxCrossEntropyLoss>());
    graph.initialize(1);
    train_with_adam(model, ids, targets, 150);
    CHECK(model.evaluate(ids, targets).metrics[0] > 0.95f);
    const Tensor back_logits = model.predict(ids);
    const Tensor front_logits = model.predict(front);
    const double scale = largest(back_logits.span());
    for (std::int64_t i = 0; i < back_logits.size(); ++i)
      CHECK(std::fabs(back_logits[i] - front_logits[i]) <= 1e-5 * scale);
  }
}

TEST_CASE("Tagging texts of every length: a masked LSTM, and targets of zeros on the padding") {
  // 300 texts of 4 to 16 tokens from 1..7 padded to 16; each step's class: the token 2 steps
  // back (0 for the first two). Padded steps have targets of zeros: no loss, no accuracy.
  const std::int64_t n = 300, steps = 16, classes = 8, lag = 2;
  Tensor ids({n, steps}), targets({n, steps, classes});
  std::uint64_t state = 17;
  std::int64_t real_steps = 0;
  for (std::int64_t b = 0; b < n; ++b) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    const auto length = static_cast<std::int64_t>(4 + (state >> 33) % 13);
    real_steps += length;
    for (std::int64_t t = 0; t < length; ++t) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      ids[b * steps + t] = static_cast<float>(1 + (state >> 33) % 7);
      const auto label = t >= lag ? static_cast<std::int64_t>(ids[b * steps + t - lag]) : 0;
      targets[(b * steps + t) * classes + label] = 1.0f;
    }
  }
  REQUIRE(real_steps < n * steps * 3 / 4);  // a quarter and more is padding
  const Targets per_step{{}, &targets};
  Graph graph;
  Model model(graph);
  Node input = model.input({steps});
  Node mask = model.apply(padding_mask("mask"), input);
  Node x = model.apply(embedding("embed", classes, 8), input);
  x = model.apply(lstm("rnn", 32, /*return_sequences=*/true), {x, mask});
  model.apply(dense("logits", classes, Activation::kNone, /*flatten=*/false), x);
  model.set_loss(std::make_unique<CategoricalCrossEntropyLoss>());
  model.check_data({steps}, TargetSpec::values({steps, classes}));
  graph.initialize(1);
  train_with_adam(model, ids, per_step, 200);
  CHECK(model.evaluate(ids, per_step).metrics[0] > 0.95f);
}

TEST_CASE("Cross-attention with the value's mask: each example's value steps read alone") {
  const std::int64_t n = 4, steps = 3, features = 4, value_steps = 6, value_features = 5;
  Graph graph;
  MultiHeadAttention masked("cross", 2, 2, false, 0.0f, /*cross=*/true);
  const std::vector<Shape> shapes = {{steps, features}, {value_steps, value_features}, {value_steps}};
  masked.build_node(graph, shapes);
  graph.initialize(4);
  const Tensor query = random_tensor({n, steps, features}, 1);
  const Tensor value = random_tensor({n, value_steps, value_features}, 2);
  const Tensor mask = random_mask(n, value_steps, 3);
  Tensor y;
  const Tensor* inputs[] = {&query, &value, &mask};
  masked.forward_node(inputs, y, {});
  const double scale = largest(y.span());
  for (std::int64_t b = 0; b < n; ++b) {
    CAPTURE(b);
    std::vector<std::int64_t> read;
    for (std::int64_t t = 0; t < value_steps; ++t)
      if (mask[b * value_steps + t] != 0.0f) read.push_back(t);
    const auto length = static_cast<std::int64_t>(read.size());
    Tensor q({1, steps, features}), v({1, length, value_features});
    std::copy_n(query.data() + b * steps * features, steps * features, q.data());
    for (std::int64_t k = 0; k < length; ++k)
      std::copy_n(value.data() + (b * value_steps + read[static_cast<std::size_t>(k)]) * value_features,
                  value_features, v.data() + k * value_features);
    MultiHeadAttention alone("cross", 2, 2, false, 0.0f, true);
    const std::vector<Shape> short_shapes = {{steps, features}, {length, value_features}};
    alone.build_node(graph, short_shapes);
    Tensor expected;
    const Tensor* short_inputs[] = {&q, &v};
    alone.forward_node(short_inputs, expected, {});
    for (std::int64_t i = 0; i < steps * features; ++i)
      CHECK(std::fabs(y[b * steps * features + i] - expected[i]) <= 1e-5 * scale);
  }
}

TEST_CASE("sequence_encoder under a name: the model keeps its own names, and two encoders fit") {
  // The transformer kind names a layer "embed", as a model's own token embedding often is.
  for (const char* kind : {"conv1d", "lstm", "gru", "bilstm", "transformer"}) {
    CAPTURE(kind);
    Graph graph;
    Model model(graph);
    Node ids = model.input({8});
    Node mask = model.apply(padding_mask("mask"), ids);
    Node x = model.apply(embedding("embed", 10, 8), ids);
    Node a = sequence_encoder(model, x, kind, 8, mask, "first");
    Node b = sequence_encoder(model, x, kind, 8, mask, "second");
    model.apply(concatenate("both"), {a, b});
    model.add(dense("logits", 2));
    graph.initialize(1);
    for (const Variable& v : graph.variables()) {
      CAPTURE(v.name);
      const bool own = v.name.rfind("embed/", 0) == 0 || v.name.rfind("logits/", 0) == 0;
      CHECK((own || v.name.rfind("first/", 0) == 0 || v.name.rfind("second/", 0) == 0));
    }
    CHECK(graph.matching("^first/").size() == graph.matching("^second/").size());
    CHECK_FALSE(graph.matching("^first/").empty());
    Tensor batch({3, 8});
    for (std::int64_t i = 0; i < batch.size(); ++i) batch[i] = static_cast<float>(i % 7);
    CHECK(model.predict(batch).shape() == Shape{3, 2});
  }
  // Without a name, the transformer's "embed" meets the model's: refused, naming it.
  Graph graph;
  Model model(graph);
  Node ids = model.input({8});
  Node x = model.apply(embedding("embed", 10, 8), ids);
  CHECK_THROWS_WITH_AS(sequence_encoder(model, x, "transformer", 8),
                       doctest::Contains("\"embed\" is already in the model"), InvalidArgument);
}
