// Tests of core/nn/ops/sequence.h (Conv1D, MaxPool1D, AvgPool1D), causal padding, and the global
// pools over sequences: each against a reference written out from Keras's definitions, and by
// finite differences.
#include "cohort/core/nn/ops/sequence.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/model.h"
#include "cohort/core/nn/ops/embedding.h"
#include "core/nn/gradient_check.h"
#include "core/nn/train_loop.h"

using namespace cohort;
using cohort::testing::expect_layer_gradients;
using cohort::testing::random_tensor;
using cohort::testing::spaced_tensor;
using cohort::testing::train_with_adam;

namespace {

// Keras's Conv1D in double: output t reads inputs t * stride - before + k * dilation, zeros
// outside; SAME splits the padding (the extra one after), CAUSAL puts extent - 1 before.
Tensor reference_conv1d(const Tensor& x, const Graph& graph, const Conv1D::Options& o) {
  const std::int64_t n = x.dim(0), steps = x.dim(1), c = x.dim(2), f = o.filters;
  const std::int64_t extent = (o.kernel - 1) * o.dilation + 1;
  std::int64_t out = 0, before = 0;
  if (o.padding == Padding::kValid) {
    out = (steps - extent) / o.stride + 1;
  } else {
    out = (steps + o.stride - 1) / o.stride;
    before = o.padding == Padding::kCausal
                 ? extent - 1
                 : std::max<std::int64_t>(0, (out - 1) * o.stride + extent - steps) / 2;
  }
  const auto kernel = graph.values(*graph.find("conv/kernel"));
  const auto bias = graph.values(*graph.find("conv/bias"));
  Tensor y({n, out, f});
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t t = 0; t < out; ++t)
      for (std::int64_t j = 0; j < f; ++j) {
        double sum = bias[j];
        for (std::int64_t k = 0; k < o.kernel; ++k) {
          const std::int64_t s = t * o.stride - before + k * o.dilation;
          if (s < 0 || s >= steps) continue;
          for (std::int64_t i = 0; i < c; ++i)
            sum += static_cast<double>(x[(b * steps + s) * c + i]) * kernel[(k * c + i) * f + j];
        }
        if (o.activation == Activation::kRelu) sum = std::max(sum, 0.0);
        y[(b * out + t) * f + j] = static_cast<float>(sum);
      }
  return y;
}

Conv1D::Options conv_options(std::int64_t filters, std::int64_t kernel, std::int64_t stride,
                             Padding padding, std::int64_t dilation = 1,
                             Activation activation = Activation::kNone) {
  return {.filters = filters,
          .kernel = kernel,
          .stride = stride,
          .padding = padding,
          .activation = activation,
          .dilation = dilation};
}

const std::vector<Conv1D::Options> kConvCases = {
    conv_options(4, 3, 1, Padding::kSame),
    conv_options(4, 3, 1, Padding::kValid),
    conv_options(3, 3, 1, Padding::kCausal),
    conv_options(3, 2, 2, Padding::kSame),
    conv_options(3, 3, 2, Padding::kCausal),          // a stride: the last window ends early
    conv_options(2, 3, 1, Padding::kCausal, 2),       // dilated, as WaveNet's
    conv_options(5, 4, 3, Padding::kValid, 1, Activation::kRelu),
};

}  // namespace

TEST_CASE("spatial_dim's causal padding: window - 1 before, nothing after") {
  CHECK(spatial_dim(10, 3, 1, Padding::kCausal).out == 10);
  CHECK(spatial_dim(10, 3, 1, Padding::kCausal).pad_before == 2);
  CHECK(spatial_dim(6, 3, 2, Padding::kCausal).out == 3);
  CHECK(spatial_dim(6, 3, 2, Padding::kCausal).pad_before == 2);  // Keras's, not SAME's 1
  CHECK(spatial_dim(6, 3, 2, Padding::kCausal).pad_after == 0);
}

TEST_CASE("Conv1D matches Keras's convolution over sequences, for several channel counts") {
  for (std::int64_t channels : {1, 3, 9}) {   // a thin receptive field takes direct convolution
    for (const Conv1D::Options& o : kConvCases) {
      CAPTURE(channels);
      CAPTURE(o.kernel);
      CAPTURE(o.stride);
      CAPTURE(static_cast<int>(o.padding));
      CAPTURE(o.dilation);
      Graph graph;
      Conv1D layer("conv", o);
      const Shape out = layer.build(graph, {11, channels});
      graph.initialize(3);
      for (float& b : graph.values(*graph.find("conv/bias"))) b = 0.1f;
      const Tensor x = random_tensor({2, 11, channels}, 5);
      Tensor y;
      layer.forward(x, y, {});
      const Tensor expected = reference_conv1d(x, graph, o);
      REQUIRE(y.shape() == expected.shape());
      CHECK(out == Shape{expected.dim(1), expected.dim(2)});
      CHECK(graph.find("conv/kernel")->shape == Shape{1, o.kernel, channels, o.filters});
      for (std::int64_t i = 0; i < y.size(); ++i) {
        INFO("output ", i);
        REQUIRE(y[i] == doctest::Approx(expected[i]).epsilon(1e-4));
      }
    }
  }
}

TEST_CASE("Conv1D with causal padding: no output depends on a later step") {
  Graph graph;
  Conv1D layer("conv", conv_options(3, 3, 1, Padding::kCausal, 2));
  layer.build(graph, {12, 2});
  graph.initialize(4);
  Tensor x = random_tensor({1, 12, 2}, 6);
  Tensor before;
  layer.forward(x, before, {});
  for (std::int64_t i = 7 * 2; i < x.size(); ++i) x[i] += 1.0f;  // change steps 7 and on
  Tensor after;
  layer.forward(x, after, {});
  for (std::int64_t i = 0; i < 7 * 3; ++i) CHECK(after[i] == before[i]);  // steps 0 to 6
  CHECK(after[7 * 3] != before[7 * 3]);
}

TEST_CASE("Conv1D gradients match finite differences") {
  for (const Conv1D::Options& o : kConvCases) {
    CAPTURE(o.kernel);
    CAPTURE(o.stride);
    CAPTURE(static_cast<int>(o.padding));
    Graph graph;
    Conv1D layer("conv", o);
    layer.build(graph, {9, 3});
    graph.initialize(2);
    for (float& b : graph.values(*graph.find("conv/bias"))) b = 0.2f;
    Tensor x = random_tensor({2, 9, 3}, 8);
    GradientCheckOptions check;
    check.step = 1e-3;
    expect_layer_gradients(layer, graph, x, {}, check);
  }
}

TEST_CASE("MaxPool1D and AvgPool1D pool along the steps") {
  // One sequence of 5 steps, 2 channels: channel 0 is 1..5, channel 1 is 5..1.
  Tensor x({1, 5, 2});
  for (int t = 0; t < 5; ++t) {
    x[t * 2] = static_cast<float>(t + 1);
    x[t * 2 + 1] = static_cast<float>(5 - t);
  }
  Graph graph;
  MaxPool1D max_pool("max", 2, 2, Padding::kValid);
  CHECK(max_pool.build(graph, {5, 2}) == Shape{2, 2});
  Tensor y;
  max_pool.forward(x, y, {});
  CHECK(y.shape() == Shape{1, 2, 2});
  CHECK(std::vector<float>(y.span().begin(), y.span().end()) == std::vector<float>{2, 5, 4, 3});
  AvgPool1D avg_pool("avg", 2, 2, Padding::kSame);  // 3 windows, the last covers step 4 alone
  CHECK(avg_pool.build(graph, {5, 2}) == Shape{3, 2});
  avg_pool.forward(x, y, {});
  CHECK(std::vector<float>(y.span().begin(), y.span().end()) ==
        std::vector<float>{1.5f, 4.5f, 3.5f, 2.5f, 5, 1});
}

TEST_CASE("MaxPool1D and AvgPool1D gradients match finite differences") {
  for (Padding padding : {Padding::kValid, Padding::kSame}) {
    Graph graph;
    MaxPool1D max_pool("max", 3, 2, padding);
    max_pool.build(graph, {9, 4});
    Tensor x = spaced_tensor({2, 9, 4}, 3);
    expect_layer_gradients(max_pool, graph, x);
    AvgPool1D avg_pool("avg", 3, 2, padding);
    avg_pool.build(graph, {9, 4});
    expect_layer_gradients(avg_pool, graph, x);
  }
}

TEST_CASE("The global pools take sequences: one value per channel over every step") {
  Tensor x({1, 3, 2});
  const std::vector<float> values = {1, -4, 5, 2, 3, 8};  // steps (1, -4), (5, 2), (3, 8)
  std::copy(values.begin(), values.end(), x.data());
  Graph graph;
  GlobalAveragePooling2D mean("mean");
  CHECK(mean.build(graph, {3, 2}) == Shape{2});
  Tensor y;
  mean.forward(x, y, {});
  CHECK(y[0] == doctest::Approx(3.0f));
  CHECK(y[1] == doctest::Approx(2.0f));
  GlobalMaxPooling2D largest("largest");
  CHECK(largest.build(graph, {3, 2}) == Shape{2});
  largest.forward(x, y, {});
  CHECK(y[0] == 5.0f);
  CHECK(y[1] == 8.0f);
  Tensor spaced = spaced_tensor({2, 7, 3}, 4);
  expect_layer_gradients(largest, graph, spaced);
  expect_layer_gradients(mean, graph, spaced);
  CHECK_THROWS_WITH_AS(mean.build(graph, {3}),
                       "GlobalAveragePooling2D \"mean\": input [3] is not [height, width, "
                       "channels] or [steps, channels]",
                       InvalidArgument);
}

TEST_CASE("The 1-D layers refuse what does not fit, naming themselves") {
  Graph graph;
  CHECK_THROWS_WITH_AS(Conv1D("c", conv_options(4, 3, 1, Padding::kSame)).build(graph, {5, 5, 1}),
                       "Conv1D \"c\": input [5, 5, 1] is not [steps, channels]", InvalidArgument);
  CHECK_THROWS_WITH_AS(
      Conv1D("c", conv_options(4, 3, 1, Padding::kValid, 3)).build(graph, {6, 2}),
      "Conv1D \"c\": input [6, 2]: a VALID window of 7 steps is longer than the sequence",
      InvalidArgument);
  CHECK_THROWS_WITH_AS(Conv1D("c", conv_options(4, 0, 1, Padding::kSame)),
                       "Conv1D \"c\": window 0, stride 1: each must be >= 1", InvalidArgument);
  CHECK_THROWS_WITH_AS(Conv1D("c", conv_options(0, 3, 1, Padding::kSame)),
                       "Conv1D \"c\": filters 0, dilation 1: each must be >= 1", InvalidArgument);
  CHECK_THROWS_WITH_AS(MaxPool1D("p", 2, 2, Padding::kCausal),
                       "MaxPool1D \"p\": causal padding is for convolutions; use SAME or VALID",
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(AvgPool1D("p", 2, 2, Padding::kValid).build(graph, {28, 28, 1}),
                       "AvgPool1D \"p\": input [28, 28, 1] is not [steps, channels]",
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(MaxPool2D("p", 2, 2, Padding::kCausal),
                       "MaxPool2D \"p\": causal padding is for convolutions; use SAME or VALID",
                       InvalidArgument);
}

TEST_CASE("A text classifier of Embedding, Conv1D and global max pooling learns to spot a bigram") {
  // 256 sequences of 20 tokens from 30; the class: whether token 7 is followed by token 9
  // anywhere. Each token alone appears in either class, so only a window of two tells them apart.
  const std::int64_t n = 256, steps = 20;
  Tensor ids({n, steps});
  std::vector<std::int32_t> labels(static_cast<std::size_t>(n));
  std::uint64_t state = 12345;
  auto next = [&] { return (state = state * 6364136223846793005ULL + 1442695040888963407ULL) >> 33; };
  for (std::int64_t b = 0; b < n; ++b) {
    float* row = ids.data() + b * steps;
    for (std::int64_t t = 0; t < steps; ++t) {
      std::int64_t token = static_cast<std::int64_t>(next() % 30);
      if (t > 0 && token == 9 && row[t - 1] == 7.0f) token = 10;  // no bigram by chance
      row[t] = static_cast<float>(token);
    }
    row[next() % steps] = 7.0f;  // both classes hold a 7 and a 9
    row[next() % steps] = 9.0f;
    for (std::int64_t t = 1; t < steps; ++t)  // and none holds the bigram but the positives
      if (row[t - 1] == 7.0f && row[t] == 9.0f) row[t] = 11.0f;
    const bool positive = b % 2 == 0;
    if (positive) {
      const std::int64_t at = static_cast<std::int64_t>(next() % (steps - 1));
      row[at] = 7.0f;
      row[at + 1] = 9.0f;
    }
    labels[static_cast<std::size_t>(b)] = positive ? 1 : 0;
  }
  Graph graph;
  Model model(graph, {steps}, 2);
  model.add(embedding("embed", 30, 8))
      .add(conv1d("conv", 16, 2, Activation::kRelu))
      .add(global_max_pool1d("pool"))
      .add(dense("logits", 2));
  graph.initialize(2);
  train_with_adam(model, ids, Targets{labels, nullptr}, 200);
  CHECK(model.evaluate(ids, labels).accuracy > 0.95f);
}
