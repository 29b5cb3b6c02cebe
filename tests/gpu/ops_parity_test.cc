// The GPU ops (gpu/ops.h) against the CPU ops of core/nn/ops/ as oracles: for each op, forward and
// backward on fresh random inputs, the CPU through the Layer interface on a small Graph and the
// GPU on the same values, compared by relative error. Every device case passes, saying so,
// without a device; the geometry cases need none.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/ops/ops.h"
#include "cohort/core/nn/optimizer.h"
#include "cohort/core/nn/tensor.h"
#include "cohort/gpu/buffer.h"
#include "cohort/gpu/device.h"
#include "cohort/gpu/handles.h"
#include "cohort/gpu/ops.h"
#include "cohort/gpu/stream.h"
#include "support/gpu_test.h"

namespace gpu = cohort::gpu;
using cohort::Graph;
using cohort::Padding;
using cohort::Tensor;

namespace {

std::vector<float> random_floats(std::size_t n, std::uint32_t seed, float scale = 1.0f) {
  std::mt19937 engine(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> values(n);
  for (float& v : values) v = dist(engine);
  return values;
}

Tensor random_tensor(const cohort::Shape& shape, std::uint32_t seed) {
  return Tensor(shape, random_floats(static_cast<std::size_t>(cohort::num_elements(shape)), seed));
}

// A stream with both library handles bound to it.
struct Device {
  gpu::Stream stream;
  gpu::CublasHandle cublas{stream};
  gpu::CudnnHandle cudnn{stream};
};

template <typename T>
gpu::DeviceBuffer<T> upload(std::span<const T> host) {
  gpu::DeviceBuffer<T> buffer(host.size());
  buffer.copy_from_host(host);
  return buffer;
}
gpu::DeviceBuffer<float> upload(const Tensor& t) { return upload<float>(t.span()); }

std::vector<float> download(const Device& device, const gpu::DeviceBuffer<float>& buffer,
                            std::size_t offset = 0, std::size_t count = SIZE_MAX) {
  device.stream.synchronize();  // blocking copies are not ordered after a Stream's work
  std::vector<float> all(buffer.size());
  buffer.copy_to_host(all);
  count = std::min(count, all.size() - offset);
  return {all.begin() + static_cast<std::ptrdiff_t>(offset),
          all.begin() + static_cast<std::ptrdiff_t>(offset + count)};
}

// max |gpu - cpu| relative to max |cpu|: the error against the scale of the result. Reported
// (the device check's table quotes it) under `what`.
double relative_error(const std::string& what, std::span<const float> gpu_values,
                      std::span<const float> cpu_values) {
  REQUIRE(gpu_values.size() == cpu_values.size());
  double diff = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < cpu_values.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(gpu_values[i]) - cpu_values[i]));
    scale = std::max(scale, std::abs(static_cast<double>(cpu_values[i])));
  }
  const double error = diff / std::max(scale, 1e-30);
  MESSAGE(what << ": relative error " << error);
  return error;
}

std::span<const float> slice(std::span<const float> all, const cohort::Variable& v) {
  return all.subspan(static_cast<std::size_t>(v.offset), static_cast<std::size_t>(v.size));
}

constexpr double kTolerance = 1e-4;  // FP32, different summation orders
// The CPU's Winograd path rounds a little differently from a direct convolution.
constexpr double kConvTolerance = 3e-4;

// TensorFlow's padding on one dimension, as (before, after).
std::pair<int, int> pads(std::int64_t in, std::int64_t window, std::int64_t stride,
                         Padding padding) {
  const cohort::SpatialDim d = cohort::spatial_dim(in, window, stride, padding);
  return {static_cast<int>(d.pad_before), static_cast<int>(d.pad_after)};
}

struct ConvCase {
  int h, w, c, filters, k, stride;
  Padding padding;
};

gpu::ConvGeometry conv_geometry(const ConvCase& t, int batch) {
  gpu::ConvGeometry g;
  g.batch = batch;
  g.height = t.h, g.width = t.w, g.channels = t.c;
  g.filters = t.filters, g.kernel_h = t.k, g.kernel_w = t.k;
  g.stride_h = t.stride, g.stride_w = t.stride;
  std::tie(g.pad_top, g.pad_bottom) = pads(t.h, t.k, t.stride, t.padding);
  std::tie(g.pad_left, g.pad_right) = pads(t.w, t.k, t.stride, t.padding);
  return g;
}

const ConvCase kConvCases[] = {
    {8, 8, 3, 16, 3, 1, Padding::kSame},    // even padding
    {8, 8, 4, 6, 3, 2, Padding::kSame},     // uneven: 0 before, 1 after
    {7, 7, 2, 3, 2, 1, Padding::kSame},     // even kernel, uneven
    {9, 9, 8, 8, 3, 2, Padding::kSame},     // strided, even
    {7, 6, 16, 16, 5, 1, Padding::kSame},   // the CPU's Winograd paths
    {6, 6, 8, 8, 3, 1, Padding::kSame},
    {10, 10, 3, 5, 5, 1, Padding::kValid},
    {11, 9, 3, 4, 3, 3, Padding::kValid},   // stride leaves some input unread
    {6, 6, 8, 4, 1, 1, Padding::kSame},     // 1x1
};

}  // namespace

TEST_CASE("ConvGeometry and PoolGeometry give TensorFlow's output sizes") {
  for (const ConvCase& t : kConvCases) {
    CAPTURE(t.h);
    CAPTURE(t.k);
    CAPTURE(t.stride);
    const gpu::ConvGeometry g = conv_geometry(t, 2);
    CHECK(g.out_height() == cohort::spatial_dim(t.h, t.k, t.stride, t.padding).out);
    CHECK(g.out_width() == cohort::spatial_dim(t.w, t.k, t.stride, t.padding).out);
  }
  // Bad geometries are rejected before any cuDNN call, so this needs no device.
  gpu::PoolGeometry bad;
  bad.height = 1;  // 2x2 window over one row, no padding
  CHECK_THROWS_AS(gpu::PoolPlan{bad}, cohort::InvalidArgument);
  gpu::PoolGeometry all_padding;
  all_padding.pad_top = 2;  // a window of padding only
  CHECK_THROWS_AS(gpu::PoolPlan{all_padding}, cohort::InvalidArgument);
}

TEST_CASE("dense forward and backward match the CPU") {
  if (cohort::test::no_device()) return;
  Device device;
  for (const bool tf32 : {false, true}) {
    CAPTURE(tf32);
    const std::int64_t n = 33, in = 70, units = 17;
    Graph graph;
    cohort::Dense layer("fc", units);
    layer.build(graph, {in});
    graph.initialize(7);
    const cohort::Variable& kernel = *graph.find("fc/kernel");
    const cohort::Variable& bias = *graph.find("fc/bias");
    const std::vector<float> b = random_floats(units, 3);
    std::copy(b.begin(), b.end(), graph.values(bias).begin());
    const Tensor x = random_tensor({n, in}, 11);
    const Tensor dy = random_tensor({n, units}, 12);
    Tensor y, dx;
    layer.forward(x, y, {});
    std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()));
    layer.backward(x, y, dy, &dx, grads);

    auto values = upload<float>(graph.values());
    auto dx_in = upload(x), d_dy = upload(dy);
    gpu::DeviceBuffer<float> d_y(y.size()), d_dx(x.size()), d_grads(grads.size());
    const float* w = values.data() + kernel.offset;
    gpu::dense_forward(device.cublas, n, in, units, dx_in.data(), w, values.data() + bias.offset,
                       d_y.data(), tf32);
    gpu::dense_backward(device.cublas, n, in, units, dx_in.data(), w, d_dy.data(),
                        d_grads.data() + kernel.offset, d_grads.data() + bias.offset,
                        d_dx.data(), tf32);
    const double tolerance = tf32 ? 1e-2 : kTolerance;
    const auto label = [&](const std::string& what) { return tf32 ? what + " (tf32)" : what; };
    CHECK(relative_error(label("dense y"), download(device, d_y), y.span()) < tolerance);
    CHECK(relative_error(label("dense dx"), download(device, d_dx), dx.span()) < tolerance);
    const std::vector<float> g = download(device, d_grads);
    CHECK(relative_error(label("dense dkernel"), slice(g, kernel), slice(grads, kernel)) < tolerance);
    CHECK(relative_error("dense dbias", slice(g, bias), slice(grads, bias)) < kTolerance);  // no GEMM
  }
}

TEST_CASE("conv2d forward and backward match the CPU") {
  if (cohort::test::no_device()) return;
  Device device;
  const int n = 3;
  std::uint32_t seed = 100;
  for (const ConvCase& t : kConvCases) {
    CAPTURE(t.h);
    CAPTURE(t.w);
    CAPTURE(t.c);
    CAPTURE(t.filters);
    CAPTURE(t.k);
    CAPTURE(t.stride);
    const bool same = t.padding == Padding::kSame;
    CAPTURE(same);
    Graph graph;
    cohort::Conv2D::Options options;
    options.filters = t.filters;
    options.kernel_h = options.kernel_w = t.k;
    options.stride_h = options.stride_w = t.stride;
    options.padding = t.padding;
    cohort::Conv2D layer("conv", options);
    const cohort::Shape out = layer.build(graph, {t.h, t.w, t.c});
    graph.initialize(++seed);
    const cohort::Variable& kernel = *graph.find("conv/kernel");
    const cohort::Variable& bias = *graph.find("conv/bias");
    const std::vector<float> b = random_floats(static_cast<std::size_t>(t.filters), ++seed);
    std::copy(b.begin(), b.end(), graph.values(bias).begin());
    const Tensor x = random_tensor({n, t.h, t.w, t.c}, ++seed);
    const Tensor dy = random_tensor({n, out[0], out[1], out[2]}, ++seed);
    Tensor y, dx;
    layer.forward(x, y, {});
    std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()));
    layer.backward(x, y, dy, &dx, grads);

    const gpu::ConvGeometry geometry = conv_geometry(t, n);
    REQUIRE(geometry.out_height() == out[0]);
    REQUIRE(geometry.out_width() == out[1]);
    gpu::ConvPlan plan(device.cudnn, geometry);
    auto values = upload<float>(graph.values());
    auto d_x = upload(x), d_dy = upload(dy);
    gpu::DeviceBuffer<float> d_y(y.size()), d_dx(x.size()), d_grads(grads.size());
    const float* w = values.data() + kernel.offset;
    gpu::conv2d_forward(device.cudnn, plan, d_x.data(), w, values.data() + bias.offset,
                        d_y.data());
    gpu::conv2d_backward_data(device.cudnn, plan, d_dy.data(), w, d_dx.data());
    gpu::conv2d_backward_filter(device.cudnn, plan, d_x.data(), d_dy.data(),
                                d_grads.data() + kernel.offset, d_grads.data() + bias.offset);
    CHECK(relative_error("conv2d y", download(device, d_y), y.span()) < kConvTolerance);
    CHECK(relative_error("conv2d dx", download(device, d_dx), dx.span()) < kConvTolerance);
    const std::vector<float> g = download(device, d_grads);
    CHECK(relative_error("conv2d dkernel", slice(g, kernel), slice(grads, kernel)) < kConvTolerance);
    CHECK(relative_error("conv2d dbias", slice(g, bias), slice(grads, bias)) < kConvTolerance);

    // A moved plan keeps working; the moved-from one refuses.
    gpu::ConvPlan moved = std::move(plan);
    gpu::conv2d_forward(device.cudnn, moved, d_x.data(), w, nullptr, d_y.data());
    CHECK_THROWS_AS(gpu::conv2d_forward(device.cudnn, plan, d_x.data(), w, nullptr, d_y.data()),
                    cohort::Error);
  }
}

TEST_CASE("filter layout conversions are inverse transposes") {
  if (cohort::test::no_device()) return;
  Device device;
  const int h = 3, w = 2, i = 4, o = 5;
  const std::vector<float> hwio = random_floats(h * w * i * o, 5);
  auto d_hwio = upload<float>(hwio);
  gpu::DeviceBuffer<float> d_ohwi(hwio.size()), back(hwio.size());
  gpu::hwio_to_ohwi(h, w, i, o, d_hwio.data(), d_ohwi.data(), device.stream);
  gpu::ohwi_to_hwio(h, w, i, o, d_ohwi.data(), back.data(), device.stream);
  const std::vector<float> ohwi = download(device, d_ohwi);
  // Element (y, x, ci, co) of HWIO is element (co, y, x, ci) of OHWI.
  CHECK(ohwi[((4 * h + 2) * w + 1) * i + 3] == hwio[((2 * w + 1) * i + 3) * o + 4]);
  CHECK(download(device, back) == hwio);
}

TEST_CASE("max pooling forward and backward match the CPU") {
  if (cohort::test::no_device()) return;
  Device device;
  struct Case {
    int h, w, c, window, stride;
    Padding padding;
  };
  const Case cases[] = {
      {8, 8, 5, 2, 2, Padding::kValid},  {7, 7, 3, 3, 2, Padding::kSame},
      {8, 8, 3, 3, 2, Padding::kSame},   {6, 5, 17, 3, 1, Padding::kSame},
      {9, 9, 4, 3, 3, Padding::kValid},
  };
  const int n = 4;
  std::uint32_t seed = 200;
  for (const Case& t : cases) {
    CAPTURE(t.h);
    CAPTURE(t.w);
    CAPTURE(t.window);
    CAPTURE(t.stride);
    const bool same = t.padding == Padding::kSame;
    CAPTURE(same);
    Graph graph;
    cohort::MaxPool2D layer("pool", t.window, t.stride, t.padding);
    const cohort::Shape out = layer.build(graph, {t.h, t.w, t.c});
    const Tensor x = random_tensor({n, t.h, t.w, t.c}, ++seed);
    const Tensor dy = random_tensor({n, out[0], out[1], out[2]}, ++seed);
    Tensor y, dx;
    layer.forward(x, y, {});
    layer.backward(x, y, dy, &dx, {});

    gpu::PoolGeometry g;
    g.batch = n, g.height = t.h, g.width = t.w, g.channels = t.c;
    g.window_h = g.window_w = t.window;
    g.stride_h = g.stride_w = t.stride;
    std::tie(g.pad_top, g.pad_bottom) = pads(t.h, t.window, t.stride, t.padding);
    std::tie(g.pad_left, g.pad_right) = pads(t.w, t.window, t.stride, t.padding);
    REQUIRE(g.out_height() == out[0]);
    REQUIRE(g.out_width() == out[1]);
    gpu::PoolPlan plan(g);
    auto d_x = upload(x), d_dy = upload(dy);
    gpu::DeviceBuffer<float> d_y(y.size()), d_dx(x.size());
    gpu::max_pool_forward(device.cudnn, plan, d_x.data(), d_y.data());
    gpu::max_pool_backward(device.cudnn, plan, d_x.data(), d_y.data(), d_dy.data(), d_dx.data());
    CHECK(download(device, d_y) == std::vector<float>(y.span().begin(), y.span().end()));
    CHECK(relative_error("max_pool dx", download(device, d_dx), dx.span()) < kTolerance);
  }
}

TEST_CASE("relu, bias and dropout match the CPU") {
  if (cohort::test::no_device()) return;
  Device device;
  Graph graph;
  const Tensor x = random_tensor({16, 5, 7}, 300);
  const Tensor dy = random_tensor({16, 5, 7}, 301);
  const auto size = static_cast<std::size_t>(x.size());
  auto d_x = upload(x), d_dy = upload(dy);
  gpu::DeviceBuffer<float> d_y(size), d_dx(size), mask(size);

  SUBCASE("relu") {
    cohort::ReLU layer("relu");
    layer.build(graph, {5, 7});
    Tensor y, dx;
    layer.forward(x, y, {});
    layer.backward(x, y, dy, &dx, {});
    gpu::relu_forward(size, d_x.data(), d_y.data(), device.stream);
    gpu::relu_backward(size, d_y.data(), d_dy.data(), d_dx.data(), device.stream);
    CHECK(download(device, d_y) == std::vector<float>(y.span().begin(), y.span().end()));
    CHECK(download(device, d_dx) == std::vector<float>(dx.span().begin(), dx.span().end()));
  }
  SUBCASE("dropout: the same mask, bit for bit") {
    cohort::Dropout layer("drop", 0.3f);
    layer.build(graph, {5, 7});
    const cohort::OpContext context{true, 1234};
    Tensor y, dx;
    layer.forward(x, y, context);
    layer.backward(x, y, dy, &dx, {});
    gpu::dropout_forward(size, 0.3f, Graph::variable_seed(context.seed, "drop"), d_x.data(),
                         d_y.data(), mask.data(), device.stream);
    gpu::dropout_backward(size, mask.data(), d_dy.data(), d_dx.data(), device.stream);
    const std::vector<float> m = download(device, mask);
    CHECK(m == std::vector<float>(layer.mask().span().begin(), layer.mask().span().end()));
    CHECK(download(device, d_y) == std::vector<float>(y.span().begin(), y.span().end()));
    CHECK(download(device, d_dx) == std::vector<float>(dx.span().begin(), dx.span().end()));
    const auto dropped = std::count(m.begin(), m.end(), 0.0f);
    CHECK(dropped > 0);
    CHECK(dropped < static_cast<std::ptrdiff_t>(size));
    CHECK_THROWS_AS(gpu::dropout_forward(size, 1.0f, 0, d_x.data(), d_y.data(), mask.data(),
                                         device.stream),
                    cohort::InvalidArgument);
  }
  SUBCASE("bias add and bias gradient over many rows") {
    const std::size_t rows = 5003, cols = 37;
    const std::vector<float> y0 = random_floats(rows * cols, 310);
    const std::vector<float> bias = random_floats(cols, 311);
    auto d_y0 = upload<float>(y0), d_bias = upload<float>(bias);
    gpu::DeviceBuffer<float> d_db(cols);
    gpu::bias_add(rows, cols, d_bias.data(), d_y0.data(), device.stream);
    gpu::bias_grad(rows, cols, d_y0.data(), d_db.data(), device.stream);
    std::vector<float> expect_y(y0);
    std::vector<double> sums(cols, 0.0);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < cols; ++c) {
        expect_y[r * cols + c] += bias[c];
        sums[c] += expect_y[r * cols + c];
      }
    CHECK(download(device, d_y0) == expect_y);
    const std::vector<float> expect_db(sums.begin(), sums.end());
    CHECK(relative_error("bias_grad db", download(device, d_db), expect_db) < kTolerance);
  }
}

TEST_CASE("softmax cross-entropy and accuracy match the CPU") {
  if (cohort::test::no_device()) return;
  Device device;
  const std::size_t n = 50, classes = 10;
  std::mt19937 engine(400);
  std::vector<std::int32_t> labels(n);
  for (auto& l : labels) l = static_cast<std::int32_t>(engine() % classes);
  auto d_labels = upload<std::int32_t>(labels);
  gpu::DeviceBuffer<float> loss(1), grad(n * classes);
  for (const float scale : {1.0f, 5.0f, 1000.0f}) {  // the last overflows a naive exp()
    CAPTURE(scale);
    const Tensor logits({static_cast<std::int64_t>(n), static_cast<std::int64_t>(classes)},
                        random_floats(n * classes, 401, scale));
    cohort::SoftmaxCrossEntropy loss_op;
    const float cpu_loss = loss_op.forward(logits, labels);
    Tensor cpu_grad;
    loss_op.backward(cpu_grad);
    auto d_logits = upload(logits);
    gpu::softmax_cross_entropy(n, classes, d_logits.data(), d_labels.data(), loss.data(),
                               grad.data(), device.stream);
    const float gpu_loss = download(device, loss)[0];
    CHECK(std::isfinite(gpu_loss));
    CHECK(std::abs(gpu_loss - cpu_loss) <= kTolerance * std::max(1.0f, std::abs(cpu_loss)));
    CHECK(relative_error("softmax_ce dlogits", download(device, grad), cpu_grad.span()) < kTolerance);
  }

  // Accuracy, with some rows made right and some rows tied (the first maximum counts).
  std::vector<float> values = random_floats(n * classes, 402);
  for (std::size_t i = 0; i < n; i += 3) values[i * classes + labels[i]] = 2.0f;
  for (std::size_t i = 1; i < n; i += 5) {
    const std::size_t other = (labels[i] + 1) % classes;
    values[i * classes + labels[i]] = values[i * classes + other] = 3.0f;
  }
  const Tensor logits({static_cast<std::int64_t>(n), static_cast<std::int64_t>(classes)}, values);
  const float cpu_accuracy = cohort::accuracy(logits, labels);
  auto d_logits = upload(logits);
  gpu::DeviceBuffer<std::int32_t> count(1);
  gpu::accuracy_count(n, classes, d_logits.data(), d_labels.data(), count.data(), device.stream);
  device.stream.synchronize();
  std::vector<std::int32_t> correct(1);
  count.copy_to_host(correct);
  CHECK(static_cast<float>(correct[0]) / static_cast<float>(n) == cpu_accuracy);
  CHECK(correct[0] > 0);
}

TEST_CASE("optimizer updates match core's optimizers") {
  if (cohort::test::no_device()) return;
  Device device;
  const std::size_t n = 1000;
  for (const std::string name : {"sgd", "momentum", "nesterov", "adam"}) {
    CAPTURE(name);
    cohort::OptimizerOptions options;
    options.name = name == "nesterov" ? "momentum" : name;
    options.nesterov = name == "nesterov";
    options.learning_rate.base = 0.05;
    const auto optimizer = cohort::Optimizer::create(options);
    std::vector<float> values = random_floats(n, 500);
    auto d_values = upload<float>(values);
    gpu::DeviceBuffer<float> slot1(n), slot2(n), delta(n);
    slot1.zero();
    slot2.zero();
    std::vector<float> cpu_delta(n);
    for (int step = 1; step <= 3; ++step) {
      CAPTURE(step);
      const std::vector<float> g = random_floats(n, 500 + static_cast<std::uint32_t>(step));
      auto d_g = upload<float>(g);
      // Even steps apply in place (accumulate), odd steps compute a delta.
      const bool accumulate = step % 2 == 0;
      const std::vector<float> before = values;
      if (accumulate)
        optimizer->apply(values, g, step);
      else
        optimizer->compute_delta(g, step, cpu_delta);
      float* out = accumulate ? d_values.data() : delta.data();
      const auto lr = static_cast<float>(options.learning_rate.base);
      if (options.name == "sgd") {
        gpu::sgd_update(n, lr, 1.0f, d_g.data(), out, accumulate, device.stream);
      } else if (options.name == "momentum") {
        gpu::momentum_update(n, lr, static_cast<float>(options.momentum), options.nesterov, 1.0f,
                             d_g.data(), slot1.data(), out, accumulate, device.stream);
      } else {
        const double t = step;
        const auto lr_t = static_cast<float>(options.learning_rate.base *
                                             std::sqrt(1.0 - std::pow(options.beta2, t)) /
                                             (1.0 - std::pow(options.beta1, t)));
        gpu::adam_update(n, lr_t, static_cast<float>(options.beta1),
                         static_cast<float>(options.beta2), static_cast<float>(options.epsilon),
                         1.0f, d_g.data(), slot1.data(), slot2.data(), out, accumulate,
                         device.stream);
      }
      if (accumulate) {
        // Compare the steps taken, not the values, which would hide a wrong step.
        std::vector<float> gpu_step = download(device, d_values), cpu_step = values;
        for (std::size_t i = 0; i < n; ++i) gpu_step[i] -= before[i], cpu_step[i] -= before[i];
        CHECK(relative_error("optimizer step", gpu_step, cpu_step) < kTolerance);
      } else {
        CHECK(relative_error("optimizer delta", download(device, delta), cpu_delta) < kTolerance);
      }
    }
  }
}
