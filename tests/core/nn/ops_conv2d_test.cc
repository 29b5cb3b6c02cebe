#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/cpu_level.h"
#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/ops/ops.h"
#include "cohort/core/nn/threads.h"
#include "core/nn/gradient_check.h"

using namespace cohort;
using cohort::testing::expect_layer_gradients;
using cohort::testing::GradientCheckOptions;
using cohort::testing::random_tensor;

namespace {

// A case of the tests that run several: the input's shape and the layer's options.
struct Case {
  Shape input;
  Conv2D::Options o;
};

using Algorithm = Conv2D::Options::Algorithm;

// Whether the kernels in use take direct convolution for thin receptive fields: those compiled
// with AVX (direct_conv.h).
bool direct_kernels() {
  const std::string level = kernel_level();
  return level == "x86-64-v3" || level == "x86-64-v4";
}

Conv2D::Options options(std::int64_t filters, std::int64_t kh, std::int64_t kw, std::int64_t stride,
                        Padding padding, Activation activation = Activation::kNone,
                        Algorithm algorithm = Algorithm::kIm2col) {
  Conv2D::Options o;
  o.algorithm = algorithm;
  o.filters = filters;
  o.kernel_h = kh;
  o.kernel_w = kw;
  o.stride_h = o.stride_w = stride;
  o.padding = padding;
  o.activation = activation;
  return o;
}

// A layer of options `o` and its im2col twin, built on `graph` for batches of shape `input` (the
// twin reuses the layer's variables): what the faster algorithms are checked against.
struct Im2colTwins {
  Conv2D layer, plain;
  Im2colTwins(Graph& graph, const Conv2D::Options& o, const Shape& input)
      : layer("conv", o), plain("conv", with_im2col(o)) {
    const Shape example = {input[1], input[2], input[3]};
    layer.build(graph, example);
    plain.build(graph, example);
  }
  static Conv2D::Options with_im2col(Conv2D::Options o) {
    o.algorithm = Algorithm::kIm2col;
    return o;
  }
};

// Direct convolution in double, TensorFlow's definition: out[n, oh, ow, f] = bias[f] +
// sum over (i, j, c) of in[n, oh * s + i - pad_h, ow * s + j - pad_w, c] * k[i, j, c, f].
Tensor reference_conv(const Tensor& in, std::span<const float> kernel, std::span<const float> bias,
                      const Conv2D::Options& o) {
  const std::int64_t n = in.dim(0), h = in.dim(1), w = in.dim(2), c = in.dim(3);
  const SpatialDim dh = spatial_dim(h, o.kernel_h, o.stride_h, o.padding);
  const SpatialDim dw = spatial_dim(w, o.kernel_w, o.stride_w, o.padding);
  Tensor out({n, dh.out, dw.out, o.filters});
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t oh = 0; oh < dh.out; ++oh)
      for (std::int64_t ow = 0; ow < dw.out; ++ow)
        for (std::int64_t f = 0; f < o.filters; ++f) {
          double sum = bias[static_cast<std::size_t>(f)];
          for (std::int64_t i = 0; i < o.kernel_h; ++i)
            for (std::int64_t j = 0; j < o.kernel_w; ++j) {
              const std::int64_t ih = oh * o.stride_h + i - dh.pad_before;
              const std::int64_t iw = ow * o.stride_w + j - dw.pad_before;
              if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
              for (std::int64_t k = 0; k < c; ++k)
                sum += static_cast<double>(in[((b * h + ih) * w + iw) * c + k]) *
                       kernel[static_cast<std::size_t>(((i * o.kernel_w + j) * c + k) * o.filters + f)];
            }
          if (o.activation == Activation::kRelu) sum = std::max(sum, 0.0);
          out[((b * dh.out + oh) * dw.out + ow) * o.filters + f] = static_cast<float>(sum);
        }
  return out;
}

void check_against_reference(const Shape& input_shape, const Conv2D::Options& o) {
  Graph graph;
  Conv2D layer("conv", o);
  layer.build(graph, {input_shape[1], input_shape[2], input_shape[3]});
  graph.initialize(9);
  for (float& b : graph.values(*graph.find("conv/bias"))) b = 0.1f;
  Tensor x = random_tensor(input_shape, 4), y;
  layer.forward(x, y, {});
  const Tensor expected = reference_conv(x, graph.values(*graph.find("conv/kernel")),
                                         graph.values(*graph.find("conv/bias")), o);
  REQUIRE(y.shape() == expected.shape());
  for (std::int64_t i = 0; i < y.size(); ++i) {
    INFO("output ", i);
    REQUIRE(y[i] == doctest::Approx(expected[i]).epsilon(1e-4));
  }
}

}  // namespace

TEST_CASE("spatial_dim follows TensorFlow's SAME and VALID rules") {
  CHECK(spatial_dim(28, 5, 1, Padding::kSame).out == 28);
  CHECK(spatial_dim(28, 5, 1, Padding::kSame).pad_before == 2);
  CHECK(spatial_dim(5, 2, 2, Padding::kSame).out == 3);
  CHECK(spatial_dim(5, 2, 2, Padding::kSame).pad_before == 0);  // the extra padding goes after
  CHECK(spatial_dim(4, 2, 2, Padding::kSame).pad_before == 0);
  CHECK(spatial_dim(7, 4, 1, Padding::kSame).pad_before == 1);  // 3 in all: 1 before, 2 after
  CHECK(spatial_dim(28, 5, 1, Padding::kValid).out == 24);
  CHECK(spatial_dim(7, 3, 2, Padding::kValid).out == 3);
  CHECK_THROWS_AS(spatial_dim(3, 5, 1, Padding::kValid), InvalidArgument);
  CHECK_THROWS_AS(spatial_dim(3, 2, 0, Padding::kSame), InvalidArgument);
}

TEST_CASE("Conv2D: a 3x3 all-ones filter on a 4x4 image sums neighbourhoods") {
  Tensor x({1, 4, 4, 1});
  for (int i = 0; i < 16; ++i) x[i] = static_cast<float>(i + 1);  // 1..16 row-major
  for (Padding padding : {Padding::kValid, Padding::kSame}) {
    Graph graph;
    Conv2D layer("conv", options(1, 3, 3, 1, padding));
    const Shape out = layer.build(graph, {4, 4, 1});
    for (float& k : graph.values(*graph.find("conv/kernel"))) k = 1.0f;
    Tensor y;
    layer.forward(x, y, {});
    if (padding == Padding::kValid) {
      CHECK(out == Shape{2, 2, 1});
      // Centres 6, 7, 10, 11: nine neighbours each, sum = 9 * centre.
      CHECK(std::vector<float>(y.span().begin(), y.span().end()) ==
            std::vector<float>{54, 63, 90, 99});
    } else {
      CHECK(out == Shape{4, 4, 1});
      CHECK(y[0] == 1 + 2 + 5 + 6);                     // corner: 4 pixels
      CHECK(y[1] == 1 + 2 + 3 + 5 + 6 + 7);             // edge: 6 pixels
      CHECK(y[5] == 54);                                // interior
      CHECK(y[15] == 11 + 12 + 15 + 16);
    }
  }
}

TEST_CASE("Conv2D forward matches a direct convolution") {
  check_against_reference({2, 7, 6, 3}, options(4, 3, 3, 1, Padding::kSame));
  check_against_reference({2, 7, 6, 3}, options(4, 3, 3, 1, Padding::kValid));
  check_against_reference({2, 7, 6, 3}, options(5, 3, 2, 2, Padding::kSame));
  check_against_reference({2, 7, 6, 3}, options(5, 3, 3, 2, Padding::kValid));
  check_against_reference({1, 5, 5, 2}, options(3, 2, 2, 1, Padding::kSame));  // uneven padding
  check_against_reference({2, 4, 4, 3}, options(2, 1, 1, 1, Padding::kSame));  // 1x1: no im2col
  check_against_reference({1, 6, 6, 2}, options(3, 4, 4, 1, Padding::kSame, Activation::kRelu));
  // kw * in >= 16 takes the patch-row layout; the cases above take patch columns.
  check_against_reference({2, 9, 8, 8}, options(5, 3, 3, 2, Padding::kSame));
  check_against_reference({2, 9, 8, 8}, options(5, 2, 3, 2, Padding::kValid));
  // Several images per chunk and several chunks: 28x28x8 with a 5x5 filter is one image a chunk.
  check_against_reference({3, 28, 28, 8}, options(32, 5, 5, 1, Padding::kSame, Activation::kRelu));
  check_against_reference({9, 12, 12, 1}, options(4, 5, 5, 1, Padding::kSame));
}

TEST_CASE("Conv2D gradients match finite differences") {
  const std::vector<Case> cases = {
      {{2, 5, 5, 2}, options(3, 3, 3, 1, Padding::kSame)},
      {{2, 5, 5, 2}, options(3, 3, 3, 1, Padding::kValid)},
      {{2, 6, 5, 2}, options(3, 3, 3, 2, Padding::kSame)},
      {{2, 7, 6, 2}, options(2, 3, 2, 2, Padding::kValid)},
      {{2, 4, 4, 3}, options(2, 1, 1, 1, Padding::kSame)},
      {{2, 5, 5, 2}, options(3, 3, 3, 1, Padding::kSame, Activation::kRelu)},
      {{2, 4, 4, 6}, options(20, 3, 3, 1, Padding::kSame, Activation::kRelu)},  // 16 + 4 filters
      {{2, 6, 6, 1}, options(18, 5, 5, 2, Padding::kSame)},
      // kw * in >= 16: the patch-row layout (the cases above use patch columns).
      {{2, 7, 7, 8}, options(3, 3, 3, 2, Padding::kValid)},
      {{2, 6, 5, 8}, options(3, 3, 2, 2, Padding::kSame)},
  };
  for (const Case& c : cases) {
    CAPTURE(to_string(c.input));
    CAPTURE(c.o.stride_h);
    CAPTURE(c.o.padding == Padding::kSame);
    Graph graph;
    Conv2D layer("conv", c.o);
    layer.build(graph, {c.input[1], c.input[2], c.input[3]});
    graph.initialize(2);
    for (float& b : graph.values(*graph.find("conv/bias"))) b = 0.2f;
    Tensor x = random_tensor(c.input, 8);
    GradientCheckOptions check;
    check.step = 1e-3;
    expect_layer_gradients(layer, graph, x, {}, check);
  }
}

TEST_CASE("Conv2D gradients across several chunks match finite differences") {
  for (Algorithm algorithm : {Algorithm::kIm2col, Algorithm::kWinograd}) {
    CAPTURE(algorithm == Algorithm::kWinograd);
    Graph graph;
    Conv2D layer("conv", options(8, 5, 5, 1, Padding::kSame, Activation::kNone, algorithm));
    layer.build(graph, {28, 28, 8});  // one image per chunk either way
    graph.initialize(4);
    Tensor x = random_tensor({3, 28, 28, 8}, 3);
    // Linear in every input, so a large step costs no accuracy and keeps the float rounding of
    // 18816 outputs (Winograd's F(2x2, 5x5) rounds more than a direct sum) out of the difference.
    GradientCheckOptions check;
    check.step = 0.1;
    check.max_per_tensor = 40;
    expect_layer_gradients(layer, graph, x, {}, check);
  }
}

TEST_CASE("Conv2D by Winograd matches direct convolution, im2col and finite differences") {
  const std::vector<Case> cases = {
      {{2, 7, 7, 8}, options(8, 3, 3, 1, Padding::kSame, Activation::kNone, Algorithm::kWinograd)},
      {{1, 8, 8, 12}, options(10, 3, 3, 1, Padding::kValid, Activation::kNone, Algorithm::kWinograd)},
      {{2, 9, 8, 8}, options(9, 5, 5, 1, Padding::kValid, Activation::kNone, Algorithm::kWinograd)},
      {{2, 7, 6, 9}, options(8, 5, 5, 1, Padding::kSame, Activation::kNone, Algorithm::kWinograd)},
      {{3, 14, 14, 17}, options(20, 5, 5, 1, Padding::kSame, Activation::kRelu, Algorithm::kWinograd)},
      {{2, 5, 5, 16}, options(16, 3, 3, 1, Padding::kSame, Activation::kRelu, Algorithm::kWinograd)},
  };
  for (const Case& c : cases) {
    CAPTURE(to_string(c.input));
    CAPTURE(c.o.kernel_h);
    check_against_reference(c.input, c.o);
    Graph graph;
    Im2colTwins layers(graph, c.o, c.input);
    Conv2D& winograd = layers.layer;
    Conv2D& plain = layers.plain;
    REQUIRE(winograd.uses_winograd());
    REQUIRE_FALSE(plain.uses_winograd());
    graph.initialize(5);
    for (float& b : graph.values(*graph.find("conv/bias"))) b = 0.2f;
    Tensor x = random_tensor(c.input, 9);

    // The same gradients as the im2col path, ReLU included.
    Tensor y1, y2, dx1, dx2;
    std::vector<float> g1(static_cast<std::size_t>(graph.num_parameters()));
    std::vector<float> g2(g1.size(), 3.0f);
    plain.forward(x, y1, {});
    winograd.forward(x, y2, {});
    const Tensor dy = random_tensor(y1.shape(), 10);
    plain.backward(x, y1, dy, &dx1, g1);
    winograd.backward(x, y2, dy, &dx2, g2);
    // Entries are sums of many terms that partly cancel: compare against the largest entry.
    auto close = [](std::span<const float> a, std::span<const float> b) {
      float largest = 0.0f, worst = 0.0f;
      for (std::size_t i = 0; i < a.size(); ++i) {
        largest = std::max(largest, std::abs(a[i]));
        worst = std::max(worst, std::abs(a[i] - b[i]));
      }
      INFO("largest ", largest, ", worst difference ", worst);
      CHECK(largest > 0.0f);
      CHECK(worst <= 1e-4f * largest);
    };
    close(dx1.span(), dx2.span());
    close(g1, g2);

    // And finite differences, on the linear cases (a ReLU's kinks need a step below what
    // Winograd's rounding allows: its rounding differs between x + h and x - h more than direct
    // convolution's, and a step below ~1e-2 measures that noise).
    if (c.o.activation == Activation::kNone) {
      GradientCheckOptions check;
      check.max_per_tensor = 60;
      expect_layer_gradients(winograd, graph, x, {}, check);
    }
  }
}

TEST_CASE("Conv2D picks Winograd where it serves") {
  Graph graph;
  auto conv = [&](const char* name, std::int64_t filters, std::int64_t k, std::int64_t stride,
                  const Shape& input, Algorithm algorithm = Algorithm::kAuto) {
    Conv2D layer(name, options(filters, k, k, stride, Padding::kSame, Activation::kNone, algorithm));
    layer.build(graph, input);
    return layer.uses_winograd();
  };
  CHECK(conv("a", 64, 5, 1, {14, 14, 32}));       // the tutorial CNN's conv2
  CHECK(conv("b", 32, 3, 1, {14, 14, 16}));
  CHECK_FALSE(conv("c", 32, 5, 1, {28, 28, 1}));  // one input channel: direct convolution
  CHECK_FALSE(conv("d", 64, 5, 2, {14, 14, 32}));  // strided
  CHECK_FALSE(conv("e", 64, 7, 1, {14, 14, 32}));
  CHECK_FALSE(conv("f", 64, 5, 1, {14, 14, 32}, Algorithm::kIm2col));
  CHECK_THROWS_AS(conv("g", 64, 5, 2, {14, 14, 32}, Algorithm::kWinograd), InvalidArgument);
  // Direct convolution for a thin receptive field (a first layer's few channels).
  auto direct = [&](const char* name, std::int64_t filters, std::int64_t k, const Shape& input,
                    Algorithm algorithm = Algorithm::kAuto) {
    Conv2D layer(name, options(filters, k, k, 1, Padding::kSame, Activation::kNone, algorithm));
    layer.build(graph, input);
    return layer.uses_direct();
  };
  CHECK(direct("h", 32, 5, {28, 28, 1}) == direct_kernels());  // the tutorial CNN's conv1
  CHECK(direct("i", 16, 3, {32, 32, 3}) == direct_kernels());
  CHECK_FALSE(direct("j", 16, 7, {32, 32, 3}));  // 21 values a kernel row: im2col
  CHECK_FALSE(direct("k", 32, 5, {28, 28, 1}, Algorithm::kIm2col));
  CHECK_FALSE(direct("l", 32, 3, {14, 14, 16}));  // Winograd's
}

TEST_CASE("Conv2D on two threads computes what it does on one") {
  // Both column layouts; batches that split evenly and unevenly into chunks and threads.
  const std::vector<Case> cases = {
      {{7, 28, 28, 1}, options(32, 5, 5, 1, Padding::kSame, Activation::kRelu)},
      {{7, 28, 28, 1}, options(32, 5, 5, 1, Padding::kSame, Activation::kRelu, Algorithm::kAuto)},
      {{5, 14, 14, 32}, options(16, 5, 5, 1, Padding::kSame, Activation::kRelu)},
      {{5, 14, 14, 32}, options(16, 5, 5, 1, Padding::kSame, Activation::kRelu, Algorithm::kWinograd)},
      {{32, 14, 14, 16}, options(32, 3, 3, 1, Padding::kSame, Activation::kRelu, Algorithm::kWinograd)},
      {{1, 9, 9, 16}, options(8, 3, 3, 2, Padding::kValid)},
      {{6, 4, 4, 8}, options(4, 1, 1, 1, Padding::kSame)},
  };
  for (const Case& c : cases) {
    CAPTURE(to_string(c.input));
    Graph graph;
    Conv2D one("conv", c.o), two("conv", c.o);
    one.build(graph, {c.input[1], c.input[2], c.input[3]});
    two.build(graph, {c.input[1], c.input[2], c.input[3]});
    graph.initialize(6);
    for (float& b : graph.values(*graph.find("conv/bias"))) b = 0.05f;
    const Tensor x = random_tensor(c.input, 1);
    Tensor y1, y2, dx1, dx2;
    std::vector<float> g1(static_cast<std::size_t>(graph.num_parameters()));
    std::vector<float> g2(g1.size(), 42.0f);
    set_intra_op_threads(1);
    one.forward(x, y1, {});
    const Tensor dy = random_tensor(y1.shape(), 2);
    one.backward(x, y1, dy, &dx1, g1);
    set_intra_op_threads(2);
    two.forward(x, y2, {});
    two.backward(x, y2, dy, &dx2, g2);
    set_intra_op_threads(1);
    REQUIRE(y2.shape() == y1.shape());
    for (std::int64_t i = 0; i < y1.size(); ++i) REQUIRE(y2[i] == doctest::Approx(y1[i]).epsilon(1e-5));
    for (std::int64_t i = 0; i < dx1.size(); ++i) REQUIRE(dx2[i] == doctest::Approx(dx1[i]).epsilon(1e-5));
    // A gradient sums the whole batch in another order: judged against its largest element.
    float largest = 0.0f;
    for (const float g : g1) largest = std::max(largest, std::abs(g));
    for (std::size_t i = 0; i < g1.size(); ++i)
      REQUIRE(g2[i] == doctest::Approx(g1[i]).epsilon(1e-5).scale(largest));
  }
}

TEST_CASE("Conv2D rejects bad options and inputs") {
  CHECK_THROWS_AS(Conv2D("c", options(0, 3, 3, 1, Padding::kSame)), InvalidArgument);
  CHECK_THROWS_AS(Conv2D("c", options(1, 3, 3, 0, Padding::kSame)), InvalidArgument);
  Graph graph;
  CHECK_THROWS_WITH_AS(Conv2D("c", options(1, 3, 3, 1, Padding::kCausal)).build(graph, {8, 8, 1}),
                       "Conv2D \"c\": causal padding is for sequences (Conv1D, or a filter one row "
                       "high); this filter is 3x3",
                       InvalidArgument);
  Conv2D layer("c", options(1, 5, 5, 1, Padding::kValid));
  CHECK_THROWS_AS(layer.build(graph, {28, 28}), InvalidArgument);
  // The layer is named, as the pooling layers name theirs: a stack too deep for its images.
  CHECK_THROWS_WITH_AS(layer.build(graph, {3, 3, 1}),
                       "Conv2D \"c\": input [3, 3, 1]: VALID window 5 is larger than the input 3",
                       InvalidArgument);
  Conv2D he("he", options(4, 3, 3, 1, Padding::kSame));
  he.build(graph, {8, 8, 2});
  CHECK(graph.find("he/kernel")->shape == Shape{3, 3, 2, 4});
  CHECK(graph.find("he/kernel")->initializer == Initializer::he_normal());
}

// Dilated (atrous) convolution.

namespace {

Conv2D::Options dilated(std::int64_t filters, std::int64_t k, std::int64_t stride, Padding padding,
                        std::int64_t dilation_h, std::int64_t dilation_w,
                        Algorithm algorithm = Algorithm::kAuto) {
  Conv2D::Options o = options(filters, k, k, stride, padding, Activation::kNone, algorithm);
  o.dilation_h = dilation_h;
  o.dilation_w = dilation_w;
  return o;
}

// Direct dilated convolution in double, from TensorFlow's definition: a k-tap filter of dilation
// d spans (k - 1) * d + 1 pixels, which set the output size and SAME padding, and tap (i, j)
// reads pixel (oh * s + i * d_h - pad_h, ow * s + j * d_w - pad_w); pixels outside are zeros.
Tensor reference_dilated_conv(const Tensor& in, std::span<const float> kernel,
                              std::span<const float> bias, const Conv2D::Options& o) {
  const std::int64_t n = in.dim(0), h = in.dim(1), w = in.dim(2), c = in.dim(3);
  auto out_and_pad = [&](std::int64_t size, std::int64_t k, std::int64_t d, std::int64_t s) {
    const std::int64_t extent = (k - 1) * d + 1;
    if (o.padding == Padding::kValid)
      return std::pair<std::int64_t, std::int64_t>{(size - extent) / s + 1, 0};
    const std::int64_t out = (size + s - 1) / s;
    const std::int64_t pad = std::max<std::int64_t>(0, (out - 1) * s + extent - size);
    return std::pair<std::int64_t, std::int64_t>{out, pad / 2};
  };
  const auto [out_h, pad_h] = out_and_pad(h, o.kernel_h, o.dilation_h, o.stride_h);
  const auto [out_w, pad_w] = out_and_pad(w, o.kernel_w, o.dilation_w, o.stride_w);
  Tensor out({n, out_h, out_w, o.filters});
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t oh = 0; oh < out_h; ++oh)
      for (std::int64_t ow = 0; ow < out_w; ++ow)
        for (std::int64_t f = 0; f < o.filters; ++f) {
          double sum = bias[static_cast<std::size_t>(f)];
          for (std::int64_t i = 0; i < o.kernel_h; ++i)
            for (std::int64_t j = 0; j < o.kernel_w; ++j) {
              const std::int64_t ih = oh * o.stride_h + i * o.dilation_h - pad_h;
              const std::int64_t iw = ow * o.stride_w + j * o.dilation_w - pad_w;
              if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
              for (std::int64_t k = 0; k < c; ++k)
                sum += static_cast<double>(in[((b * h + ih) * w + iw) * c + k]) *
                       kernel[static_cast<std::size_t>(((i * o.kernel_w + j) * c + k) * o.filters +
                                                       f)];
            }
          if (o.activation == Activation::kRelu) sum = std::max(sum, 0.0);
          out[((b * out_h + oh) * out_w + ow) * o.filters + f] = static_cast<float>(sum);
        }
  return out;
}

}  // namespace

TEST_CASE("Conv2D with dilation 2: a 3x3 filter of ones reads every other pixel") {
  Tensor x({1, 5, 5, 1});
  for (int i = 0; i < 25; ++i) x[i] = static_cast<float>(i + 1);  // 1..25 row-major
  Graph graph;
  Conv2D layer("conv", dilated(1, 3, 1, Padding::kValid, 2, 2));
  CHECK(layer.build(graph, {5, 5, 1}) == Shape{1, 1, 1});  // the filter spans 5x5
  Conv2D same("same", dilated(1, 3, 1, Padding::kSame, 2, 2));
  CHECK(same.build(graph, {5, 5, 1}) == Shape{5, 5, 1});
  for (float& k : graph.values(*graph.find("conv/kernel"))) k = 1.0f;
  for (float& k : graph.values(*graph.find("same/kernel"))) k = 1.0f;
  Tensor y;
  layer.forward(x, y, {});
  CHECK(y[0] == 1 + 3 + 5 + 11 + 13 + 15 + 21 + 23 + 25);
  same.forward(x, y, {});
  CHECK(y[0] == 1 + 3 + 11 + 13);        // (0, 0): taps at rows and columns -2, 0, 2
  CHECK(y[6] == 7 + 9 + 17 + 19);        // (1, 1): taps at 1 and 3 (-1 is padding)
  CHECK(y[12] == 1 + 3 + 5 + 11 + 13 + 15 + 21 + 23 + 25);  // the centre
}

TEST_CASE("Conv2D with dilation matches a direct dilated convolution") {
  std::vector<Case> cases = {
      {{2, 9, 8, 3}, dilated(4, 3, 1, Padding::kSame, 2, 2)},
      {{2, 9, 8, 3}, dilated(4, 3, 1, Padding::kValid, 2, 2)},
      {{2, 9, 8, 3}, dilated(4, 3, 2, Padding::kSame, 2, 2)},
      {{2, 10, 9, 3}, dilated(4, 3, 2, Padding::kValid, 2, 2)},
      {{1, 9, 11, 2}, dilated(3, 3, 1, Padding::kSame, 2, 3)},  // different dilations
      {{1, 8, 8, 2}, dilated(3, 2, 1, Padding::kSame, 3, 1)},   // even filter, uneven padding
      {{1, 2, 2, 1}, dilated(2, 2, 1, Padding::kSame, 3, 3)},   // windows with no tap inside
      // in >= 16: the patch-row layout, one pixel per tap (the cases above use patch columns).
      {{2, 9, 8, 16}, dilated(5, 3, 1, Padding::kSame, 2, 2)},
      {{2, 9, 8, 16}, dilated(5, 3, 2, Padding::kValid, 2, 2)},
      {{1, 7, 9, 20}, dilated(4, 3, 2, Padding::kSame, 1, 3)},
      // Dilated only in height: patch rows still copy whole kernel rows.
      {{1, 9, 7, 8}, dilated(4, 3, 1, Padding::kSame, 2, 1)},
      // A layer Winograd would serve were it not dilated.
      {{2, 12, 12, 8}, dilated(8, 3, 1, Padding::kSame, 2, 2)},
  };
  Conv2D::Options relu = dilated(6, 3, 1, Padding::kSame, 2, 2);
  relu.activation = Activation::kRelu;
  cases.push_back({{2, 7, 7, 4}, relu});
  for (const Case& c : cases) {
    CAPTURE(to_string(c.input));
    CAPTURE(c.o.stride_h);
    CAPTURE(c.o.dilation_h);
    CAPTURE(c.o.dilation_w);
    CAPTURE(c.o.padding == Padding::kSame);
    Graph graph;
    Conv2D layer("conv", c.o);
    layer.build(graph, {c.input[1], c.input[2], c.input[3]});
    CHECK_FALSE(layer.uses_winograd());
    graph.initialize(9);
    for (float& b : graph.values(*graph.find("conv/bias"))) b = 0.1f;
    Tensor x = random_tensor(c.input, 4), y;
    layer.forward(x, y, {});
    const Tensor expected = reference_dilated_conv(x, graph.values(*graph.find("conv/kernel")),
                                                   graph.values(*graph.find("conv/bias")), c.o);
    REQUIRE(y.shape() == expected.shape());
    for (std::int64_t i = 0; i < y.size(); ++i) {
      INFO("output ", i);
      REQUIRE(y[i] == doctest::Approx(expected[i]).epsilon(1e-4));
    }
  }
}

TEST_CASE("Conv2D with dilation: gradients match finite differences") {
  const std::vector<Case> cases = {
      {{2, 7, 7, 2}, dilated(3, 3, 1, Padding::kSame, 2, 2)},
      {{2, 7, 8, 2}, dilated(3, 3, 1, Padding::kValid, 2, 2)},
      {{2, 8, 7, 2}, dilated(2, 3, 2, Padding::kSame, 2, 2)},
      {{1, 9, 9, 2}, dilated(2, 3, 2, Padding::kValid, 2, 3)},
      {{1, 2, 2, 1}, dilated(2, 2, 1, Padding::kSame, 3, 3)},
      {{2, 7, 6, 16}, dilated(3, 3, 1, Padding::kSame, 2, 2)},  // patch rows
      {{1, 8, 7, 16}, dilated(3, 3, 2, Padding::kValid, 2, 2)},
  };
  for (const Case& c : cases) {
    CAPTURE(to_string(c.input));
    CAPTURE(c.o.stride_h);
    CAPTURE(c.o.padding == Padding::kSame);
    Graph graph;
    Conv2D layer("conv", c.o);
    layer.build(graph, {c.input[1], c.input[2], c.input[3]});
    graph.initialize(2);
    for (float& b : graph.values(*graph.find("conv/bias"))) b = 0.2f;
    Tensor x = random_tensor(c.input, 8);
    GradientCheckOptions check;
    check.step = 1e-3;
    check.max_per_tensor = 80;
    expect_layer_gradients(layer, graph, x, {}, check);
  }
}

TEST_CASE("Conv2D with dilation on two threads computes what it does on one") {
  Graph graph;
  const Conv2D::Options o = dilated(8, 3, 1, Padding::kSame, 2, 2);
  Conv2D one("conv", o), two("conv", o);
  one.build(graph, {10, 10, 8});
  two.build(graph, {10, 10, 8});
  graph.initialize(6);
  const Tensor x = random_tensor({5, 10, 10, 8}, 1);
  Tensor y1, y2, dx1, dx2;
  std::vector<float> g1(static_cast<std::size_t>(graph.num_parameters()));
  std::vector<float> g2(g1.size(), 42.0f);
  set_intra_op_threads(1);
  one.forward(x, y1, {});
  const Tensor dy = random_tensor(y1.shape(), 2);
  one.backward(x, y1, dy, &dx1, g1);
  set_intra_op_threads(2);
  two.forward(x, y2, {});
  two.backward(x, y2, dy, &dx2, g2);
  set_intra_op_threads(1);
  for (std::int64_t i = 0; i < y1.size(); ++i)
    REQUIRE(y2[i] == doctest::Approx(y1[i]).epsilon(1e-5));
  for (std::int64_t i = 0; i < dx1.size(); ++i)
    REQUIRE(dx2[i] == doctest::Approx(dx1[i]).epsilon(1e-5));
  for (std::size_t i = 0; i < g1.size(); ++i) REQUIRE(g2[i] == doctest::Approx(g1[i]).epsilon(1e-4));
}

TEST_CASE("Conv2D's direct kernels match a direct convolution and im2col's gradients") {
  // Filter counts that are multiples of 16 take the direct kernels (AVX and up) at either vector
  // width (8 or 16 floats), in every grouping of filter vectors (1 to 4, and 4 + 1, 4 + 2); 24, 40 and 56
  // only with 8-float vectors (im2col otherwise). Output widths leave pixels after the groups,
  // patches of 1 to 27 taps leave taps after the groups of the filter gradient.
  auto thin = [](std::int64_t filters, std::int64_t kh, std::int64_t kw, std::int64_t stride,
                 Padding padding, Activation activation = Activation::kNone) {
    return options(filters, kh, kw, stride, padding, activation, Algorithm::kAuto);
  };
  const std::vector<Case> cases = {
      {{3, 28, 28, 1}, thin(32, 5, 5, 1, Padding::kSame, Activation::kRelu)},  // the tutorial CNN's conv1
      {{2, 13, 11, 1}, thin(16, 3, 3, 1, Padding::kSame, Activation::kRelu)},
      {{2, 9, 10, 3}, thin(48, 3, 3, 2, Padding::kValid)},
      {{2, 9, 10, 3}, thin(64, 3, 3, 2, Padding::kSame)},
      {{1, 8, 7, 2}, thin(80, 2, 3, 1, Padding::kSame)},  // uneven padding
      {{2, 6, 7, 1}, thin(96, 1, 1, 2, Padding::kValid)},  // one tap
      {{1, 7, 9, 1}, thin(24, 3, 3, 1, Padding::kSame)},
      {{1, 7, 9, 1}, thin(40, 5, 5, 1, Padding::kSame)},
      {{1, 7, 9, 2}, thin(56, 3, 3, 1, Padding::kValid)},
      {{2, 11, 11, 1}, dilated(16, 3, 1, Padding::kSame, 2, 3)},
      {{2, 11, 12, 3}, dilated(32, 3, 2, Padding::kValid, 2, 2)},
  };
  for (const Case& c : cases) {
    CAPTURE(to_string(c.input));
    CAPTURE(c.o.filters);
    CAPTURE(c.o.kernel_h);
    Graph graph;
    Im2colTwins layers(graph, c.o, c.input);
    Conv2D& direct = layers.layer;
    Conv2D& plain = layers.plain;
    if (c.o.filters % 16 == 0) REQUIRE(direct.uses_direct() == direct_kernels());
    REQUIRE_FALSE(plain.uses_direct());
    graph.initialize(3);
    for (float& b : graph.values(*graph.find("conv/bias"))) b = 0.1f;
    const Tensor x = random_tensor(c.input, 5);
    Tensor y, y_plain;
    direct.forward(x, y, {});
    const Tensor expected = reference_dilated_conv(x, graph.values(*graph.find("conv/kernel")),
                                                   graph.values(*graph.find("conv/bias")), c.o);
    REQUIRE(y.shape() == expected.shape());
    for (std::int64_t i = 0; i < y.size(); ++i) {
      INFO("output ", i);
      REQUIRE(y[i] == doctest::Approx(expected[i]).epsilon(1e-4));
    }
    plain.forward(x, y_plain, {});
    const Tensor dy = random_tensor(y.shape(), 6);
    // As a first layer (no input gradient: the direct filter gradient), then with one.
    for (const bool input_grad : {false, true}) {
      CAPTURE(input_grad);
      Tensor dx, dx_plain;
      std::vector<float> g(static_cast<std::size_t>(graph.num_parameters()), 7.0f);
      std::vector<float> g_plain(g.size());
      direct.backward(x, y, dy, input_grad ? &dx : nullptr, g);
      plain.backward(x, y_plain, dy, input_grad ? &dx_plain : nullptr, g_plain);
      for (std::size_t i = 0; i < g.size(); ++i) {
        INFO("gradient ", i);
        REQUIRE(g[i] == doctest::Approx(g_plain[i]).epsilon(1e-4).scale(1.0));
      }
      for (std::int64_t i = 0; i < dx_plain.size(); ++i) REQUIRE(dx[i] == doctest::Approx(dx_plain[i]));
      if (input_grad) continue;
      // Two threads, each summing the filter gradient of its share of the images.
      std::vector<float> g_two(g.size(), 9.0f);
      set_intra_op_threads(2);
      Tensor y_two;
      direct.forward(x, y_two, {});
      direct.backward(x, y_two, dy, nullptr, g_two);
      set_intra_op_threads(1);
      for (std::int64_t i = 0; i < y.size(); ++i) REQUIRE(y_two[i] == doctest::Approx(y[i]));
      for (std::size_t i = 0; i < g.size(); ++i)
        REQUIRE(g_two[i] == doctest::Approx(g[i]).epsilon(1e-4).scale(1.0));
    }
  }
}

TEST_CASE("Conv2D with dilation never takes Winograd; dilation below 1 is refused") {
  Graph graph;
  // 3x3, stride 1, 16 channels in and out: Winograd's, undilated.
  Conv2D plain("plain", dilated(16, 3, 1, Padding::kSame, 1, 1));
  plain.build(graph, {14, 14, 16});
  CHECK(plain.uses_winograd());
  Conv2D atrous("atrous", dilated(16, 3, 1, Padding::kSame, 2, 2));
  CHECK(atrous.build(graph, {14, 14, 16}) == Shape{14, 14, 16});
  CHECK_FALSE(atrous.uses_winograd());
  Conv2D tall("tall", dilated(16, 3, 1, Padding::kSame, 2, 1));
  tall.build(graph, {14, 14, 16});
  CHECK_FALSE(tall.uses_winograd());
  Conv2D forced("forced", dilated(16, 3, 1, Padding::kSame, 1, 2, Algorithm::kWinograd));
  CHECK_THROWS_AS(forced.build(graph, {14, 14, 16}), InvalidArgument);
  CHECK_THROWS_AS(Conv2D("c", dilated(4, 3, 1, Padding::kSame, 0, 1)), InvalidArgument);
  CHECK_THROWS_AS(Conv2D("c", dilated(4, 3, 1, Padding::kSame, 1, -1)), InvalidArgument);
  // VALID needs the dilated extent to fit: 3 taps 3 apart span 7 pixels.
  Conv2D wide("wide", dilated(4, 3, 1, Padding::kValid, 3, 3));
  CHECK_THROWS_AS(wide.build(graph, {6, 6, 2}), InvalidArgument);
  CHECK(wide.build(graph, {7, 7, 2}) == Shape{1, 1, 4});
  // Direct-convolution FLOPs, whatever the dilation.
  Conv2D undilated("undilated", dilated(16, 3, 1, Padding::kSame, 1, 1, Algorithm::kIm2col));
  undilated.build(graph, {14, 14, 16});
  CHECK(atrous.flops_per_example() == undilated.flops_per_example());
}

TEST_CASE("Conv2D without a bias: no bias variable, the outputs and gradients of a zero bias") {
  // Each path: im2col in both column layouts, Winograd, 1x1 (pointwise), direct (a first layer's
  // thin receptive field), with and without a fused ReLU, on one thread and two.
  const std::vector<Case> cases = {
      {{3, 12, 12, 1}, options(16, 5, 5, 1, Padding::kSame, Activation::kRelu, Algorithm::kAuto)},
      {{3, 10, 10, 16}, options(8, 3, 3, 1, Padding::kSame, Activation::kRelu, Algorithm::kWinograd)},
      {{3, 9, 9, 16}, options(8, 3, 3, 2, Padding::kValid)},
      {{3, 4, 4, 8}, options(4, 1, 1, 1, Padding::kSame)},
      {{3, 8, 8, 3}, options(16, 3, 3, 1, Padding::kSame, Activation::kNone, Algorithm::kAuto)},
  };
  for (const Case& c : cases) {
    for (const int threads : {1, 2}) {
      CAPTURE(to_string(c.input));
      CAPTURE(threads);
      Conv2D::Options without = c.o;
      without.use_bias = false;
      Graph with_graph, without_graph;
      Conv2D biased("conv", c.o), plain("conv", without);
      const Shape example{c.input[1], c.input[2], c.input[3]};
      biased.build(with_graph, example);
      plain.build(without_graph, example);
      CHECK(without_graph.find("conv/bias") == nullptr);
      REQUIRE(without_graph.num_parameters() + c.o.filters == with_graph.num_parameters());
      with_graph.initialize(6);  // the bias starts at zero
      without_graph.initialize(6);
      const auto kernel = [](Graph& g) { return g.values(g.variable("conv/kernel")); };
      REQUIRE(std::equal(kernel(with_graph).begin(), kernel(with_graph).end(), kernel(without_graph).begin()));
      const Tensor x = random_tensor(c.input, 1);
      set_intra_op_threads(threads);
      Tensor y1, y2, dx1, dx2;
      biased.forward(x, y1, {});
      plain.forward(x, y2, {});
      const Tensor dy = random_tensor(y1.shape(), 2);
      std::vector<float> g1(static_cast<std::size_t>(with_graph.num_parameters()));
      std::vector<float> g2(static_cast<std::size_t>(without_graph.num_parameters()), 42.0f);
      biased.backward(x, y1, dy, &dx1, g1);
      plain.backward(x, y2, dy, &dx2, g2);
      set_intra_op_threads(1);
      CHECK(std::equal(y1.span().begin(), y1.span().end(), y2.span().begin()));
      CHECK(std::equal(dx1.span().begin(), dx1.span().end(), dx2.span().begin()));
      const std::int64_t k = with_graph.variable("conv/kernel").offset;
      for (std::int64_t i = 0; i < without_graph.num_parameters(); ++i)
        REQUIRE(g2[static_cast<std::size_t>(i)] == g1[static_cast<std::size_t>(k + i)]);
    }
  }
}
