// Tests of core/nn/ops/upsampling.h: Conv2DTranspose, UpSampling2D, ZeroPadding2D and Cropping2D,
// alone and together in a model that learns.
#include "cohort/core/nn/ops/upsampling.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/loss.h"
#include "cohort/core/nn/model.h"
#include "cohort/core/nn/ops/merge.h"
#include "cohort/core/nn/ops/ops.h"
#include "cohort/core/nn/threads.h"
#include "core/nn/gradient_check.h"
#include "core/nn/train_loop.h"

using namespace cohort;
using cohort::testing::expect_layer_gradients;
using cohort::testing::expect_model_gradients;
using cohort::testing::random_tensor;

namespace {

std::vector<float> values(const Tensor& t) { return {t.span().begin(), t.span().end()}; }

std::span<float> variable(Graph& graph, const std::string& name) {
  const Variable* v = graph.find(name);
  REQUIRE(v != nullptr);
  return graph.values(*v);
}

struct Case {
  std::int64_t kernel_h, kernel_w, stride_h, stride_w;
  Padding padding;
  std::int64_t dilation = 1;                   // on both axes
  std::optional<std::int64_t> output_padding = std::nullopt;  // on both axes
};

std::string describe(const Case& c) {
  return "kernel " + std::to_string(c.kernel_h) + "x" + std::to_string(c.kernel_w) + ", stride " +
         std::to_string(c.stride_h) + "x" + std::to_string(c.stride_w) +
         (c.padding == Padding::kSame ? ", SAME" : ", VALID") + ", dilation " +
         std::to_string(c.dilation) +
         (c.output_padding ? ", output_padding " + std::to_string(*c.output_padding) : "");
}

// The transposed convolution from its definition, in double: every input pixel adds
// x * kernel[i][j] onto output pixel (y * stride + i * dilation - pad_top, x * stride + j *
// dilation - pad_left) of the full scatter, which SAME then crops as TensorFlow pads a convolution
// of the output's size (the extra padding row after). Sizes as Keras's. Written from the
// definition, independently of im2col.
Tensor reference_transpose(const Tensor& in, const std::vector<float>& kernel,
                           const std::vector<float>& bias, std::int64_t filters, const Case& c,
                           bool relu) {
  const std::int64_t n = in.dim(0), h = in.dim(1), w = in.dim(2), ch = in.dim(3);
  const bool same = c.padding == Padding::kSame;
  auto size = [&](std::int64_t i, std::int64_t k, std::int64_t s) {
    const std::int64_t extent = (k - 1) * c.dilation + 1;
    if (c.output_padding) return (i - 1) * s + extent - (same ? extent / 2 * 2 : 0) + *c.output_padding;
    return same ? i * s : i * s + std::max<std::int64_t>(extent - s, 0);
  };
  const std::int64_t oh = size(h, c.kernel_h, c.stride_h), ow = size(w, c.kernel_w, c.stride_w);
  // TensorFlow's SAME padding of a convolution from `out` to `in`: half before, the odd one after.
  auto pad = [&](std::int64_t in, std::int64_t out, std::int64_t k, std::int64_t s) {
    const std::int64_t extent = (k - 1) * c.dilation + 1;
    return same ? std::max<std::int64_t>((in - 1) * s + extent - out, 0) / 2 : 0;
  };
  const std::int64_t pt = pad(h, oh, c.kernel_h, c.stride_h), pl = pad(w, ow, c.kernel_w, c.stride_w);
  std::vector<double> out(static_cast<std::size_t>(n * oh * ow * filters), 0.0);
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t y = 0; y < h; ++y)
      for (std::int64_t x = 0; x < w; ++x)
        for (std::int64_t i = 0; i < c.kernel_h; ++i)
          for (std::int64_t j = 0; j < c.kernel_w; ++j) {
            const std::int64_t r = y * c.stride_h + i * c.dilation - pt;
            const std::int64_t q = x * c.stride_w + j * c.dilation - pl;
            if (r < 0 || r >= oh || q < 0 || q >= ow) continue;
            for (std::int64_t f = 0; f < filters; ++f)
              for (std::int64_t k = 0; k < ch; ++k)
                out[static_cast<std::size_t>(((b * oh + r) * ow + q) * filters + f)] +=
                    double(in[((b * h + y) * w + x) * ch + k]) *
                    kernel[static_cast<std::size_t>(((i * c.kernel_w + j) * filters + f) * ch + k)];
          }
  Tensor result({n, oh, ow, filters});
  for (std::int64_t p = 0; p < result.size(); ++p) {
    const double v = out[static_cast<std::size_t>(p)] + bias[static_cast<std::size_t>(p % filters)];
    result[p] = static_cast<float>(relu ? std::max(v, 0.0) : v);
  }
  return result;
}

const std::vector<Case> kCases = {
    {3, 3, 2, 2, Padding::kSame},   // odd padding: the extra row and column after
    {4, 4, 2, 2, Padding::kSame},   // DCGAN's
    {3, 3, 1, 1, Padding::kSame},
    {3, 2, 2, 1, Padding::kSame},
    {2, 2, 2, 2, Padding::kValid},  // windows that tile the output
    {3, 3, 2, 2, Padding::kValid},  // windows that overlap
    {1, 1, 3, 3, Padding::kValid},  // windows with gaps between them
    {3, 3, 1, 1, Padding::kSame, 2},         // dilated
    {2, 3, 2, 2, Padding::kValid, 2},        // dilated and strided
    {3, 3, 2, 2, Padding::kSame, 1, 0},      // output_padding 0: 2 H - 1 rows
    {4, 4, 2, 2, Padding::kSame, 1, 1},      // 2 H - 1 rows, padded 1 before and 2 after
    {3, 2, 3, 3, Padding::kValid, 1, 2},     // rows after the last window: the bias alone
    {3, 3, 2, 2, Padding::kValid, 2, 1},     // dilated, with output_padding
};

Conv2DTranspose make(const Case& c, std::int64_t filters, Activation activation = Activation::kNone) {
  Conv2DTranspose::Options o;
  o.filters = filters;
  o.kernel_h = c.kernel_h;
  o.kernel_w = c.kernel_w;
  o.stride_h = c.stride_h;
  o.stride_w = c.stride_w;
  o.padding = c.padding;
  o.dilation_h = o.dilation_w = c.dilation;
  o.output_padding_h = o.output_padding_w = c.output_padding;
  o.activation = activation;
  return Conv2DTranspose("up", o);
}

}  // namespace

TEST_CASE("Conv2DTranspose: Keras's output sizes and the scatter of its definition, forward") {
  for (const Case& c : kCases)
    for (const bool relu : {false, true}) {
      const std::string what = describe(c) + (relu ? ", ReLU" : ", no activation");
      INFO(what);
      Graph graph;
      Conv2DTranspose layer = make(c, 4, relu ? Activation::kRelu : Activation::kNone);
      const Shape out = layer.build(graph, {5, 6, 3});
      graph.initialize(1);
      std::vector<float> bias(4);
      for (std::size_t f = 0; f < bias.size(); ++f) bias[f] = 0.1f * static_cast<float>(f) - 0.15f;
      std::copy(bias.begin(), bias.end(), variable(graph, "up/bias").begin());
      const auto kernel = variable(graph, "up/kernel");
      CHECK(graph.find("up/kernel")->shape == Shape{c.kernel_h, c.kernel_w, 4, 3});
      const Tensor x = random_tensor({2, 5, 6, 3}, 7);
      Tensor y;
      layer.forward(x, y, {});
      const Tensor expected = reference_transpose(
          x, std::vector<float>(kernel.begin(), kernel.end()), bias, 4, c, relu);
      REQUIRE(y.shape() == expected.shape());
      CHECK(Shape{y.dim(1), y.dim(2), y.dim(3)} == out);
      for (std::int64_t i = 0; i < y.size(); ++i) REQUIRE(y[i] == doctest::Approx(expected[i]).epsilon(1e-5));
    }
  const auto built = [](const Case& c) {
    Graph graph;
    return make(c, 4).build(graph, {7, 7, 8});
  };
  CHECK(built({3, 3, 2, 2, Padding::kSame}) == Shape{14, 14, 4});
  CHECK(built({3, 3, 2, 2, Padding::kValid}) == Shape{15, 15, 4});
  CHECK(built({1, 1, 3, 3, Padding::kValid}) == Shape{21, 21, 4});
  CHECK(built({3, 3, 1, 1, Padding::kValid, 2}) == Shape{11, 11, 4});    // 7 + 5 - 1
  CHECK(built({3, 3, 2, 2, Padding::kSame, 1, 0}) == Shape{13, 13, 4});  // PyTorch's padding 1
  CHECK(built({3, 3, 2, 2, Padding::kSame, 1, 1}) == Shape{14, 14, 4});  // as if unset
  CHECK(built({3, 3, 2, 2, Padding::kValid, 1, 1}) == Shape{16, 16, 4});
}

TEST_CASE("Conv2DTranspose is the adjoint of Conv2D with the same kernel, stride, padding, dilation") {
  // <conv(u), v> = <u, conv_transpose(v)> for the kernel both share, without bias: the property
  // that makes it Conv2D's input gradient (TensorFlow's definition of conv2d_transpose).
  for (const Case& c : kCases) {
    INFO(describe(c));
    Graph graph;
    Conv2DTranspose transpose = make(c, 3);
    const Shape big = transpose.build(graph, {5, 6, 4});
    Conv2D::Options o;
    o.filters = 4;
    o.kernel_h = c.kernel_h;
    o.kernel_w = c.kernel_w;
    o.stride_h = c.stride_h;
    o.stride_w = c.stride_w;
    o.padding = c.padding;
    o.dilation_h = o.dilation_w = c.dilation;
    o.algorithm = Conv2D::Options::Algorithm::kIm2col;
    Graph conv_graph;
    Conv2D conv("up", o);
    CHECK(conv.build(conv_graph, big) == Shape{5, 6, 4});
    graph.initialize(2);
    conv_graph.initialize(9);
    const auto kernel = variable(graph, "up/kernel");
    std::copy(kernel.begin(), kernel.end(), variable(conv_graph, "up/kernel").begin());
    const Tensor u = random_tensor({2, big[0], big[1], 3}, 3), v = random_tensor({2, 5, 6, 4}, 4);
    Tensor conv_u, transpose_v;
    conv.forward(u, conv_u, {});
    transpose.forward(v, transpose_v, {});
    double left = 0.0, right = 0.0;
    for (std::int64_t i = 0; i < v.size(); ++i) left += double(conv_u[i]) * v[i];
    for (std::int64_t i = 0; i < u.size(); ++i) right += double(u[i]) * transpose_v[i];
    CHECK(left == doctest::Approx(right).epsilon(1e-5));
  }
}

TEST_CASE("Conv2DTranspose gradients of the input, the kernel and the bias") {
  for (const Case& c : kCases) {
    INFO(describe(c));
    Graph graph;
    Conv2DTranspose layer = make(c, 3);
    layer.build(graph, {4, 3, 2});
    graph.initialize(5);
    // Biases away from 0: where windows leave gaps (stride 3, kernel 1), an output is its bias.
    const std::vector<float> bias = {0.2f, -0.3f, 0.25f};
    std::copy(bias.begin(), bias.end(), variable(graph, "up/bias").begin());
    Tensor x = random_tensor({2, 4, 3, 2}, 6);
    expect_layer_gradients(layer, graph, x);
  }
}

TEST_CASE("Conv2DTranspose with a fused ReLU: the linear layer's outputs and gradients, masked") {
  // Exactly, where finite differences would trip on the outputs that sit near the ReLU's kink:
  // the ReLU's outputs are the linear layer's clipped at 0, and its gradients are the linear
  // layer's for the output gradient kept where the output is positive.
  for (const Case& c : kCases) {
    INFO(describe(c));
    Graph graph;
    Conv2DTranspose linear = make(c, 3), relu = make(c, 3, Activation::kRelu);
    linear.build(graph, {4, 3, 2});
    relu.build(graph, {4, 3, 2});  // the same variables
    graph.initialize(5);
    const std::vector<float> bias = {0.2f, -0.3f, 0.25f};
    std::copy(bias.begin(), bias.end(), variable(graph, "up/bias").begin());
    const Tensor x = random_tensor({2, 4, 3, 2}, 6);
    Tensor y_linear, y_relu;
    linear.forward(x, y_linear, {});
    relu.forward(x, y_relu, {});
    const Tensor dy = random_tensor(y_linear.shape(), 3);
    Tensor dy_kept = dy;
    std::int64_t kept = 0;
    for (std::int64_t i = 0; i < dy.size(); ++i) {
      REQUIRE(y_relu[i] == std::max(y_linear[i], 0.0f));
      kept += y_linear[i] > 0.0f;
      if (!(y_linear[i] > 0.0f)) dy_kept[i] = 0.0f;
    }
    CHECK(kept > 0);
    CHECK(kept < dy.size());
    std::vector<float> grads_linear(static_cast<std::size_t>(graph.num_parameters())),
        grads_relu(grads_linear.size());
    Tensor dx_linear, dx_relu;
    linear.backward(x, y_linear, dy_kept, &dx_linear, grads_linear);
    relu.backward(x, y_relu, dy, &dx_relu, grads_relu);
    CHECK(grads_relu == grads_linear);
    CHECK(values(dx_relu) == values(dx_linear));
  }
}

TEST_CASE("Conv2DTranspose: a batch in chunks on 1 or 3 threads gives the sums of its images") {
  Graph graph;
  Conv2DTranspose layer = make(kCases[1], 16, Activation::kRelu);
  layer.build(graph, {14, 14, 32});  // a chunk of a few images: a batch of 9 takes several
  graph.initialize(8);
  const Tensor x = random_tensor({9, 14, 14, 32}, 9);
  Tensor y;
  layer.forward(x, y, {});
  const Tensor dy = random_tensor(y.shape(), 10);
  // backward() overwrites the gradients: they start as NaN here.
  auto backward = [&](const Tensor& in, const Tensor& out, const Tensor& grad_out, Tensor& dx) {
    std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()),
                             std::numeric_limits<float>::quiet_NaN());
    layer.backward(in, out, grad_out, &dx, grads);
    return grads;
  };
  // Image by image, each a batch of one: the kernel's and bias's gradients of the batch are the
  // sums of theirs.
  const std::int64_t image = 14 * 14 * 32, out_image = y.size() / 9;
  std::vector<double> sums(static_cast<std::size_t>(graph.num_parameters()), 0.0);
  std::vector<float> dx_alone;
  for (std::int64_t b = 0; b < 9; ++b) {
    const Tensor xb({1, 14, 14, 32}, x.span().subspan(static_cast<std::size_t>(b * image), image));
    const Tensor yb({1, y.dim(1), y.dim(2), y.dim(3)},
                    y.span().subspan(static_cast<std::size_t>(b * out_image), out_image));
    const Tensor dyb(yb.shape(), dy.span().subspan(static_cast<std::size_t>(b * out_image), out_image));
    Tensor dx;
    const std::vector<float> grads = backward(xb, yb, dyb, dx);
    for (std::size_t i = 0; i < grads.size(); ++i) sums[i] += grads[i];
    dx_alone.insert(dx_alone.end(), dx.span().begin(), dx.span().end());
  }
  for (const int threads : {1, 3}) {
    CAPTURE(threads);
    set_intra_op_threads(threads);
    Tensor dx;
    const std::vector<float> grads = backward(x, y, dy, dx);
    set_intra_op_threads(1);
    REQUIRE(dx.size() == static_cast<std::int64_t>(dx_alone.size()));
    for (std::int64_t i = 0; i < dx.size(); ++i)
      REQUIRE(dx[i] == doctest::Approx(dx_alone[static_cast<std::size_t>(i)]).epsilon(1e-5));
    for (std::size_t i = 0; i < grads.size(); ++i)
      REQUIRE(grads[i] == doctest::Approx(sums[i]).epsilon(1e-4));
  }
}

TEST_CASE("Conv2DTranspose refuses what it cannot do, naming the layer") {
  Conv2DTranspose::Options o;
  o.filters = 0;
  CHECK_THROWS_WITH_AS(Conv2DTranspose("up", o),
                       doctest::Contains("Conv2DTranspose \"up\": filters 0"), InvalidArgument);
  o.filters = 2;
  o.padding = Padding::kCausal;
  CHECK_THROWS_WITH_AS(Conv2DTranspose("up", o), doctest::Contains("not causal"), InvalidArgument);
  o.padding = Padding::kSame;
  o.dilation_w = 0;
  CHECK_THROWS_WITH_AS(Conv2DTranspose("up", o), doctest::Contains("dilation 1x0: each must be >= 1"),
                       InvalidArgument);
  o.dilation_w = 1;
  o.stride_h = o.stride_w = 2;
  o.output_padding_h = 1;
  CHECK_THROWS_WITH_AS(Conv2DTranspose("up", o),
                       "Conv2DTranspose \"up\": output_padding is set for one axis only; set both or neither",
                       InvalidArgument);
  o.output_padding_w = 2;
  CHECK_THROWS_WITH_AS(Conv2DTranspose("up", o),
                       "Conv2DTranspose \"up\": output_padding 1x2: each must be >= 0 and less than "
                       "the stride 2x2",
                       InvalidArgument);
  // An even kernel with SAME padding and output_padding 0: Keras gives 2 (H - 1) rows, from
  // which the strided convolution gives H - 1, not H (TensorFlow refuses it as it runs).
  o.kernel_h = o.kernel_w = 4;
  o.output_padding_h = o.output_padding_w = 0;
  Graph even;
  CHECK_THROWS_WITH_AS(Conv2DTranspose("up", o).build(even, {5, 6, 2}),
                       "Conv2DTranspose \"up\": output_padding 0x0 gives input [5, 6, 2] the output "
                       "[8, 10, 2], from which its convolution gives 4x5, not the input's 5x6",
                       InvalidArgument);
  Graph empty;
  CHECK_THROWS_WITH_AS(Conv2DTranspose("up", o).build(empty, {1, 1, 2}),
                       "Conv2DTranspose \"up\": output_padding 0x0 gives input [1, 1, 2] the output "
                       "[0, 0, 2], which has no pixels",
                       InvalidArgument);
  Graph graph;
  CHECK_THROWS_WITH_AS(conv2d_transpose("up", 2, 3)->build(graph, {28, 28}),
                       "Conv2DTranspose \"up\": input [28, 28] is not [height, width, channels]",
                       InvalidArgument);
}

TEST_CASE("UpSampling2D repeats each pixel; its gradient sums each block") {
  Graph graph;
  UpSampling2D layer("up", 2, 3);
  CHECK(layer.build(graph, {2, 2, 2}) == Shape{4, 6, 2});
  // Channel 0 counts the pixels 1..4, channel 1 is their negative.
  const Tensor x({1, 2, 2, 2}, std::vector<float>{1, -1, 2, -2, 3, -3, 4, -4});
  Tensor y;
  layer.forward(x, y, {});
  REQUIRE(y.shape() == Shape{1, 4, 6, 2});
  const std::vector<float> row0 = {1, 1, 1, 2, 2, 2}, row2 = {3, 3, 3, 4, 4, 4};
  for (std::int64_t r = 0; r < 4; ++r)
    for (std::int64_t q = 0; q < 6; ++q) {
      const float expected = (r < 2 ? row0 : row2)[static_cast<std::size_t>(q)];
      CHECK(y[(r * 6 + q) * 2] == expected);
      CHECK(y[(r * 6 + q) * 2 + 1] == -expected);
    }
  Tensor dy({1, 4, 6, 2}), dx;
  for (std::int64_t i = 0; i < dy.size(); ++i) dy[i] = static_cast<float>(i % 2 == 0 ? 1 : i);
  layer.backward(x, y, dy, &dx, {});
  // Channel 0: each pixel's 6 copies, 1 each. Channel 1: the sum of the odd indices of its block.
  CHECK(dx[0] == 6);
  CHECK(dx[6] == 6);
  CHECK(dx[1] == 1 + 3 + 5 + 13 + 15 + 17);
  Tensor random = random_tensor({2, 3, 2, 3}, 4);
  UpSampling2D square("up", 2, 2);
  Graph other;
  square.build(other, {3, 2, 3});
  expect_layer_gradients(square, other, random);
  CHECK(upsampling2d("up", 3)->build(other, {2, 5, 1}) == Shape{6, 15, 1});
  CHECK_THROWS_WITH_AS(UpSampling2D("up", 0, 2), doctest::Contains("UpSampling2D \"up\": size 0x2"),
                       InvalidArgument);
}

TEST_CASE("bilinear UpSampling2D and UpSampling1D interpolate with half-pixel centres") {
  // A sequence [3 steps, 1 channel] doubled: output i samples step (i + 0.5) / 2 - 0.5, the
  // edges held.
  Graph graph;
  auto linear = upsampling1d("up", 2, Interpolation::kBilinear);
  CHECK(linear->build(graph, {3, 1}) == Shape{6, 1});
  const Tensor steps({1, 3, 1}, std::vector<float>{4, 8, -4});
  Tensor y, dx;
  linear->forward(steps, y, {});
  CHECK(values(y) == std::vector<float>{4, 5, 7, 5, -1, -4});
  // Each step's weights over its outputs sum to 2, the factor: a gradient of ones gives 2 each.
  const Tensor ones({1, 6, 1}, std::vector<float>(6, 1.0f));
  linear->backward(steps, y, ones, &dx, {});
  CHECK(values(dx) == std::vector<float>{2, 2, 2});
  // A 2x2 image with two channels, tripled down and doubled across: the rows and columns
  // interpolate alike, and channel 1 (channel 0 negated) stays the negative.
  UpSampling2D image("up", 3, 2, Interpolation::kBilinear);
  CHECK(image.build(graph, {2, 2, 2}) == Shape{6, 4, 2});
  const Tensor x({1, 2, 2, 2}, std::vector<float>{0, 0, 6, -6, 12, -12, 18, -18});
  image.forward(x, y, {});
  // Along the rows (at 0, 0, 1/3, 2/3, 1, 1 of the way down) and the columns (0, 1/4, 3/4, 1).
  const float down[6] = {0, 0, 1.0f / 3, 2.0f / 3, 1, 1}, across[4] = {0, 0.25f, 0.75f, 1};
  for (int r = 0; r < 6; ++r)
    for (int q = 0; q < 4; ++q) {
      CAPTURE(r);
      CAPTURE(q);
      const float expected = 12 * down[r] + 6 * across[q];
      CHECK(y[(r * 4 + q) * 2] == doctest::Approx(expected).epsilon(1e-6));
      CHECK(y[(r * 4 + q) * 2 + 1] == doctest::Approx(-expected).epsilon(1e-6));
    }
  const Tensor all_ones({1, 6, 4, 2}, std::vector<float>(48, 1.0f));
  image.backward(x, y, all_ones, &dx, {});
  for (const float v : dx.span()) CHECK(v == doctest::Approx(6.0f));
  Tensor random = random_tensor({3, 3, 4, 2}, 5);
  Graph other;
  UpSampling2D larger("up", 2, 3, Interpolation::kBilinear);
  larger.build(other, {3, 4, 2});
  expect_layer_gradients(larger, other, random);
  cohort::testing::expect_same_on_threads(larger, other, random, 3);
}

TEST_CASE("ZeroPadding2D and Cropping2D: each other's inverse and gradient") {
  Graph graph;
  Reframe2D pad("pad", {1, 2, 0, 3}, +1);
  Reframe2D crop("crop", {1, 2, 0, 3}, -1);
  CHECK(pad.build(graph, {3, 4, 2}) == Shape{6, 7, 2});
  CHECK(crop.build(graph, {6, 7, 2}) == Shape{3, 4, 2});
  const Tensor x = random_tensor({2, 3, 4, 2}, 1);
  Tensor padded, back;
  pad.forward(x, padded, {});
  crop.forward(padded, back, {});
  CHECK(values(back) == values(x));
  // The frame is zeros: the sum of squares is unchanged, and the first row is all frame.
  double inside = 0.0, all = 0.0;
  for (const float v : x.span()) inside += double(v) * v;
  for (const float v : padded.span()) all += double(v) * v;
  CHECK(all == doctest::Approx(inside));
  for (std::int64_t i = 0; i < 7 * 2; ++i) CHECK(padded[i] == 0.0f);
  CHECK(padded[(1 * 7 + 0) * 2] == x[0]);  // row 1, column 0: the first pixel
  Tensor dx;
  crop.backward(padded, back, x, &dx, {});
  CHECK(values(dx) == values(padded));  // cropping's gradient pads with zeros
  Tensor a = random_tensor({2, 3, 4, 2}, 2), b = random_tensor({2, 6, 7, 2}, 3);
  expect_layer_gradients(pad, graph, a);
  expect_layer_gradients(crop, graph, b);
  CHECK(zero_padding2d("pad", Border::all(2))->build(graph, {28, 28, 1}) == Shape{32, 32, 1});
  CHECK(cropping2d("crop", {4, 4, 0, 0})->build(graph, {32, 32, 1}) == Shape{24, 32, 1});
  CHECK_THROWS_WITH_AS(cropping2d("crop", Border::all(2))->build(graph, {4, 5, 1}),
                       "Cropping2D \"crop\": cropping 2+2 rows and 2+2 columns leaves nothing of "
                       "input [4, 5, 1]",
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(zero_padding2d("pad", {0, -1, 0, 0}),
                       doctest::Contains("ZeroPadding2D \"pad\": top, bottom, left and right"),
                       InvalidArgument);
}

TEST_CASE("a convolutional autoencoder with a U-Net's skip connections learns to redraw its input") {
  // 16x16 images of a bright rectangle each, down to 4x4 by strided convolutions and back up by
  // transposed ones, a skip connection concatenated at 8x8 and an upsampled one added at 16x16,
  // the VALID transpose's extra row and column cropped: every layer of upsampling.h in one graph.
  Graph graph;
  Model model(graph);
  const Node x = model.input({16, 16, 1});
  const Node e1 = model.apply(conv2d("e1", 8, 3, Activation::kRelu, 2), x);    // [8, 8, 8]
  const Node e2 = model.apply(conv2d("e2", 16, 3, Activation::kRelu, 2), e1);  // [4, 4, 16]
  Node d = model.apply(conv2d_transpose("d1", 8, 4, Activation::kRelu, 2), e2);  // [8, 8, 8]
  d = model.apply(concatenate("skip"), {d, e1});                                  // [8, 8, 16]
  d = model.apply(conv2d_transpose("d2", 8, 3, Activation::kRelu, 2, Padding::kValid), d);
  CHECK(model.shape(d) == Shape{17, 17, 8});
  d = model.apply(cropping2d("crop", {0, 1, 0, 1}), d);                          // [16, 16, 8]
  const Node up = model.apply(upsampling2d("up", 2), e1);                         // [16, 16, 8]
  d = model.apply(add("join"), {d, up});
  d = model.apply(zero_padding2d("pad", Border::all(1)), d);                     // [18, 18, 8]
  model.apply(conv2d("out", 1, 3, Activation::kNone, 1, Padding::kValid), d);    // [16, 16, 1]
  model.set_loss(make_loss("mean_squared_error"));
  graph.initialize(3);

  const std::int64_t n = 64;
  Tensor images({n, 16, 16, 1});
  std::uint64_t state = 12345;
  auto next = [&](std::int64_t below) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<std::int64_t>((state >> 33) % static_cast<std::uint64_t>(below));
  };
  double mean = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t top = next(10), left = next(10), h = 3 + next(4), w = 3 + next(4);
    for (std::int64_t r = top; r < top + h; ++r)
      for (std::int64_t c = left; c < left + w; ++c) images[(i * 16 + r) * 16 + c] = 1.0f;
  }
  for (const float v : images.span()) mean += v;
  mean /= static_cast<double>(images.size());
  const double variance = mean * (1.0 - mean);  // the error of answering the mean pixel

  const Targets targets{{}, &images};
  Tensor few({4, 16, 16, 1}, images.span().subspan(0, 4 * 256));
  // The gradients through the whole graph, its biases moved off 0 first: an all-black patch gives
  // every ReLU exactly its bias, which at 0 sits on the kink.
  for (const Variable& v : graph.variables())
    if (v.name.ends_with("/bias")) std::fill_n(graph.values(v).begin(), v.size, 0.1f);
  GradientCheckOptions sampled;
  sampled.max_per_tensor = 6;
  sampled.step = 1e-3;
  expect_model_gradients(model, few, Targets{{}, &few}, {}, sampled);
  std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()));
  const float first = model.train_step(images, targets, grads, {}).loss;
  cohort::testing::train_with_adam(model, images, targets, 300, 0.01);
  const float last = model.train_step(images, targets, grads, {}).loss;
  MESSAGE("reconstruction mse " << first << " -> " << last << " (the mean pixel's: " << variance << ")");
  CHECK(last < 0.1 * variance);
}

TEST_CASE("UpSampling1D, ZeroPadding1D and Cropping1D: the same on a sequence [steps, channels]") {
  Graph graph;
  const Tensor x({1, 3, 2}, std::vector<float>{1, -1, 2, -2, 3, -3});
  Tensor y, dx;
  auto up = upsampling1d("up", 2);
  CHECK(up->build(graph, {3, 2}) == Shape{6, 2});
  up->forward(x, y, {});
  CHECK(y.shape() == Shape{1, 6, 2});
  CHECK(values(y) == std::vector<float>{1, -1, 1, -1, 2, -2, 2, -2, 3, -3, 3, -3});
  auto pad = zero_padding1d("pad", 1, 2);
  CHECK(pad->build(graph, {3, 2}) == Shape{6, 2});
  pad->forward(x, y, {});
  CHECK(values(y) == std::vector<float>{0, 0, 1, -1, 2, -2, 3, -3, 0, 0, 0, 0});
  auto crop = cropping1d("crop", 1, 0);
  CHECK(crop->build(graph, {3, 2}) == Shape{2, 2});
  crop->forward(x, y, {});
  CHECK(y.shape() == Shape{1, 2, 2});
  CHECK(values(y) == std::vector<float>{2, -2, 3, -3});
  for (auto* layer : {up.get(), pad.get(), crop.get()}) {
    CAPTURE(layer->name());
    Tensor input = random_tensor({2, 3, 2}, 11);
    expect_layer_gradients(*layer, graph, input);
  }
  CHECK_THROWS_WITH_AS(cropping1d("crop", 2, 1)->build(graph, {3, 2}),
                       "Cropping1D \"crop\": cropping 2+1 steps leaves nothing of input [3, 2]",
                       InvalidArgument);
  // Each form takes its own kind of input: the 2-D forms no sequence, the 1-D forms no image.
  CHECK_THROWS_WITH_AS(upsampling2d("up", 2)->build(graph, {3, 2}),
                       "UpSampling2D \"up\": input [3, 2] is not [height, width, channels]", InvalidArgument);
  CHECK_THROWS_WITH_AS(zero_padding2d("pad", {1, 1, 0, 0})->build(graph, {3, 2}),
                       "ZeroPadding2D \"pad\": input [3, 2] is not [height, width, channels]",
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(upsampling1d("up", 2)->build(graph, {3, 3, 2}),
                       "UpSampling1D \"up\": input [3, 3, 2] is not [steps, channels]", InvalidArgument);
  CHECK_THROWS_WITH_AS(cropping1d("crop", 1, 1)->build(graph, {4, 4, 1}),
                       "Cropping1D \"crop\": input [4, 4, 1] is not [steps, channels]", InvalidArgument);
  CHECK_THROWS_WITH_AS(zero_padding1d("pad", -1, 0),
                       "ZeroPadding1D \"pad\": before and after must be >= 0", InvalidArgument);
  CHECK_THROWS_WITH_AS(upsampling1d("up", 0), "UpSampling1D \"up\": size 0: must be >= 1", InvalidArgument);
}


TEST_CASE("activated() puts an activation by name after any layer, its variables named as before") {
  Graph graph;
  Model with(graph);
  with.apply(activated(conv2d_transpose("up", 3, 3, Activation::kNone, 2), "tanh"), with.input({4, 4, 2}));
  Model without(graph);  // the same layer's name: the same variables
  without.apply(conv2d_transpose("up", 3, 3, Activation::kNone, 2), without.input({4, 4, 2}));
  graph.initialize(3);
  REQUIRE(graph.variables().size() == 2);
  CHECK(graph.variables()[0].name.rfind("up/", 0) == 0);
  Tensor x({2, 4, 4, 2});
  for (std::int64_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.7f * static_cast<float>(i));
  const Tensor a = with.predict(x);
  const Tensor& b = without.predict(x);
  REQUIRE(a.shape() == b.shape());
  for (std::int64_t i = 0; i < a.size(); ++i) CHECK(a[i] == doctest::Approx(std::tanh(b[i])).epsilon(1e-6));
  CHECK(activated(relu("r"), "")->name() == "r");  // "" and "linear": the layer as it is
  CHECK_THROWS_WITH_AS(activated(relu("r"), "tanhh"), doctest::Contains("tanhh"), InvalidArgument);
}
