// Tests of core/nn/ops/depthwise.h: DepthwiseConv2D against Conv2D with a block-diagonal kernel,
// its gradients, and SeparableConv2D as the two convolutions in a row.
#include "cohort/core/nn/ops/depthwise.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <limits>
#include <string>
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

std::span<float> variable(Graph& graph, const std::string& name) {
  const Variable* v = graph.find(name);
  REQUIRE(v != nullptr);
  return graph.values(*v);
}

struct Case {
  std::int64_t kernel, stride, multiplier;
  Padding padding;
  std::int64_t dilation = 1;
};

std::string describe(const Case& c) {
  return "kernel " + std::to_string(c.kernel) + ", stride " + std::to_string(c.stride) +
         ", multiplier " + std::to_string(c.multiplier) +
         (c.padding == Padding::kSame ? ", SAME" : ", VALID") + ", dilation " +
         std::to_string(c.dilation);
}

DepthwiseConv2D::Options options(const Case& c, Activation activation = Activation::kNone) {
  DepthwiseConv2D::Options o;
  o.kernel_h = o.kernel_w = c.kernel;
  o.stride_h = o.stride_w = c.stride;
  o.padding = c.padding;
  o.dilation_h = o.dilation_w = c.dilation;
  o.depth_multiplier = c.multiplier;
  o.activation = activation;
  return o;
}

const std::vector<Case> kCases = {
    {3, 1, 1, Padding::kSame}, {3, 2, 1, Padding::kSame}, {5, 1, 2, Padding::kSame},
    {3, 2, 3, Padding::kValid}, {2, 1, 1, Padding::kValid},
    {3, 1, 2, Padding::kSame, 2}, {2, 2, 1, Padding::kValid, 3},  // dilated (atrous)
};

}  // namespace

TEST_CASE("DepthwiseConv2D equals Conv2D with a kernel that joins each channel to its own filters") {
  // Conv2D's kernel [k, k, C, C x M] zero except [i, j, c, c M + m] = the depthwise kernel's
  // [i, j, c, m]: a full convolution that never mixes channels, computed by im2col.
  const std::int64_t channels = 5;
  for (const Case& c : kCases)
    for (const bool relu : {false, true}) {
      const std::string what = describe(c) + (relu ? ", ReLU" : "");
      INFO(what);
      const Activation activation = relu ? Activation::kRelu : Activation::kNone;
      Graph graph;
      DepthwiseConv2D depthwise("dw", options(c, activation));
      const Shape out = depthwise.build(graph, {7, 6, channels});
      graph.initialize(1);
      const auto bias = variable(graph, "dw/bias");
      for (std::size_t q = 0; q < bias.size(); ++q) bias[q] = 0.05f * static_cast<float>(q) - 0.2f;
      Conv2D::Options o;
      o.filters = channels * c.multiplier;
      o.kernel_h = o.kernel_w = c.kernel;
      o.stride_h = o.stride_w = c.stride;
      o.padding = c.padding;
      o.dilation_h = o.dilation_w = c.dilation;
      o.activation = activation;
      o.algorithm = Conv2D::Options::Algorithm::kIm2col;
      Graph full_graph;
      Conv2D full("full", o);
      CHECK(full.build(full_graph, {7, 6, channels}) == out);
      const auto dk = variable(graph, "dw/kernel");
      const auto fk = variable(full_graph, "full/kernel");
      std::fill(fk.begin(), fk.end(), 0.0f);
      const std::int64_t taps = c.kernel * c.kernel, m_count = c.multiplier, filters = o.filters;
      for (std::int64_t t = 0; t < taps; ++t)
        for (std::int64_t ch = 0; ch < channels; ++ch)
          for (std::int64_t m = 0; m < m_count; ++m)
            fk[static_cast<std::size_t>((t * channels + ch) * filters + ch * m_count + m)] =
                dk[static_cast<std::size_t>((t * channels + ch) * m_count + m)];
      std::copy(bias.begin(), bias.end(), variable(full_graph, "full/bias").begin());
      const Tensor x = random_tensor({3, 7, 6, channels}, 2);
      Tensor y, expected;
      depthwise.forward(x, y, {});
      full.forward(x, expected, {});
      REQUIRE(y.shape() == expected.shape());
      for (std::int64_t i = 0; i < y.size(); ++i) REQUIRE(y[i] == doctest::Approx(expected[i]).epsilon(1e-5));
      // The same gradients of the input, and of the kernel on its block diagonal.
      const Tensor dy = random_tensor(y.shape(), 3);
      Tensor dx, full_dx;
      std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()));
      std::vector<float> full_grads(static_cast<std::size_t>(full_graph.num_parameters()));
      depthwise.backward(x, y, dy, &dx, grads);
      full.backward(x, expected, dy, &full_dx, full_grads);
      for (std::int64_t i = 0; i < dx.size(); ++i) REQUIRE(dx[i] == doctest::Approx(full_dx[i]).epsilon(1e-5));
      const Variable& kernel_var = *graph.find("dw/kernel");
      const Variable& full_var = *full_graph.find("full/kernel");
      for (std::int64_t t = 0; t < taps; ++t)
        for (std::int64_t ch = 0; ch < channels; ++ch)
          for (std::int64_t m = 0; m < m_count; ++m)
            REQUIRE(grads[static_cast<std::size_t>(kernel_var.offset + (t * channels + ch) * m_count + m)] ==
                    doctest::Approx(full_grads[static_cast<std::size_t>(
                                        full_var.offset + (t * channels + ch) * filters + ch * m_count + m)])
                        .epsilon(1e-4));
    }
}

TEST_CASE("DepthwiseConv2D gradients, with and without a bias; 1 and 3 threads alike") {
  for (const Case& c : kCases)
    for (const bool bias : {true, false}) {
      // Without the ReLU, whose kinks a difference quotient cannot cross (its gradient is checked
      // against Conv2D's above).
      const std::string what = describe(c) + (bias ? ", bias" : ", no bias");
      INFO(what);
      DepthwiseConv2D::Options o = options(c);
      o.use_bias = bias;
      Graph graph;
      DepthwiseConv2D layer("dw", o);
      layer.build(graph, {5, 4, 3});
      graph.initialize(4);
      CHECK((graph.find("dw/bias") != nullptr) == bias);
      Tensor x = random_tensor({2, 5, 4, 3}, 5);
      GradientCheckOptions check;
      check.step = 1e-3;
      expect_layer_gradients(layer, graph, x, {}, check);
    }
  // On 3 threads: the same output and input gradient, the kernel's and bias's summed alike (and
  // overwritten: they start as NaN).
  Graph graph;
  DepthwiseConv2D layer("dw", options(kCases[2], Activation::kRelu));
  layer.build(graph, {12, 12, 8});
  graph.initialize(6);
  const Tensor x = random_tensor({5, 12, 12, 8}, 7);
  cohort::testing::expect_same_on_threads(layer, graph, x, 3);
}

TEST_CASE("SeparableConv2D is a depthwise convolution, then a 1x1 one with the bias and activation") {
  Graph graph;
  auto layer = separable_conv2d("sep", 6, 3, Activation::kRelu, 2, Padding::kSame, 2);
  CHECK(layer->build(graph, {8, 8, 4}) == Shape{4, 4, 6});
  std::vector<std::string> names;
  for (const Variable& v : graph.variables()) names.push_back(v.name + " " + to_string(v.shape));
  CHECK(names == std::vector<std::string>{"sep/depthwise/kernel [3, 3, 4, 2]",
                                          "sep/pointwise/kernel [1, 1, 8, 6]",
                                          "sep/pointwise/bias [6]"});
  graph.initialize(8);
  for (float& b : variable(graph, "sep/pointwise/bias")) b = 0.1f;
  // Its output is the two layers' in a row.
  Graph parts_graph;
  DepthwiseConv2D::Options d = options({3, 2, 2, Padding::kSame});
  d.use_bias = false;
  DepthwiseConv2D depthwise("sep/depthwise", d);
  Conv2D pointwise("sep/pointwise", {.filters = 6, .kernel_h = 1, .kernel_w = 1,
                                     .activation = Activation::kRelu});
  pointwise.build(parts_graph, depthwise.build(parts_graph, {8, 8, 4}));
  REQUIRE(graph.values().size() == parts_graph.values().size());
  std::copy(graph.values().begin(), graph.values().end(), parts_graph.values().begin());
  const Tensor x = random_tensor({2, 8, 8, 4}, 9);
  Tensor y, middle, expected;
  layer->forward(x, y, {});
  depthwise.forward(x, middle, {});
  pointwise.forward(middle, expected, {});
  REQUIRE(y.shape() == expected.shape());
  CHECK(std::equal(y.span().begin(), y.span().end(), expected.span().begin()));
  Tensor input = random_tensor({2, 8, 8, 4}, 10);
  GradientCheckOptions check;
  check.step = 1e-3;
  expect_layer_gradients(*layer, graph, input, {}, check);
}

TEST_CASE("DepthwiseConv2D and SeparableConv2D refuse what they cannot do, naming the layer") {
  CHECK_THROWS_WITH_AS(depthwise_conv2d("dw", 3, Activation::kNone, 1, Padding::kSame, 0),
                       doctest::Contains("DepthwiseConv2D \"dw\": kernel 3x3, stride 1x1, dilation 1x1, depth multiplier 0"),
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(depthwise_conv2d("dw", 3, Activation::kNone, 1, Padding::kCausal),
                       doctest::Contains("not causal"), InvalidArgument);
  CHECK_THROWS_WITH_AS(separable_conv2d("sep", 0, 3), "SeparableConv2D \"sep\": filters 0: must be >= 1",
                       InvalidArgument);
  Graph graph;
  CHECK_THROWS_WITH_AS(depthwise_conv2d("dw", 5, Activation::kNone, 1, Padding::kValid)->build(graph, {4, 9, 2}),
                       doctest::Contains("DepthwiseConv2D \"dw\": input [4, 9, 2]: VALID window 5"),
                       InvalidArgument);
}
