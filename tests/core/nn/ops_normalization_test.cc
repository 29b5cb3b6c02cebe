// Tests of core/nn/ops/normalization.h: BatchNormalization (training, inference, moving
// statistics, synchronised over two in-process replicas) and LayerNormalization.
#include "cohort/core/nn/ops/normalization.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/ops/ops.h"
#include "cohort/core/nn/threads.h"
#include "core/nn/gradient_check.h"

using namespace cohort;
using cohort::testing::expect_layer_gradients;
using cohort::testing::GradientCheckOptions;
using cohort::testing::random_tensor;
using cohort::testing::ramp;
using cohort::testing::set_variable;
using cohort::testing::with_batch;

namespace {

std::vector<float> get(const Graph& graph, const std::string& name) {
  const Variable* v = graph.find(name);
  REQUIRE(v != nullptr);
  const auto values = graph.values(*v);
  return {values.begin(), values.end()};
}

// Per-channel statistics of a [rows, C] view of x, in double: the mean and biased variance.
struct Moments {
  std::vector<double> mean, variance;
};

Moments moments(const Tensor& x, std::int64_t c) {
  const std::int64_t rows = x.size() / c;
  Moments m{std::vector<double>(static_cast<std::size_t>(c), 0.0),
            std::vector<double>(static_cast<std::size_t>(c), 0.0)};
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t k = 0; k < c; ++k) m.mean[k] += x[r * c + k];
  for (auto& v : m.mean) v /= static_cast<double>(rows);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t k = 0; k < c; ++k) {
      const double d = x[r * c + k] - m.mean[k];
      m.variance[k] += d * d;
    }
  for (auto& v : m.variance) v /= static_cast<double>(rows);
  return m;
}

// [n, c] raw values such as years or prices: channel k around 2000 + k, spread 0.5 (as float32
// holds them).
Tensor mean_dwarfs_spread(std::int64_t n, std::int64_t c) {
  Tensor x({n, c});
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t k = 0; k < c; ++k)
      x[i * c + k] = 2000.0f + static_cast<float>(k) + 0.5f * std::sin(0.37f * static_cast<float>(i * (k + 1)));
  return x;
}

// Expects y = gamma * (x - mean) / sqrt(variance + eps) + beta per channel of the last axis.
void expect_normalized(const Tensor& x, const Tensor& y, const std::vector<double>& mean,
                       const std::vector<double>& variance, const std::vector<float>& gamma,
                       const std::vector<float>& beta, double eps) {
  REQUIRE(y.shape() == x.shape());
  const auto c = static_cast<std::int64_t>(gamma.size());
  for (std::int64_t i = 0; i < x.size(); ++i) {
    const std::int64_t k = i % c;
    const double expected = gamma[k] * (x[i] - mean[k]) / std::sqrt(variance[k] + eps) + beta[k];
    CAPTURE(i);
    CHECK(y[i] == doctest::Approx(expected).epsilon(1e-5));
  }
}

BatchNormalization::Options bn_options(float momentum = 0.9f, float epsilon = 1e-3f,
                                       bool synchronized = false) {
  BatchNormalization::Options options;
  options.momentum = momentum;
  options.epsilon = epsilon;
  options.synchronized = synchronized;
  return options;
}

// Builds `layer` on `graph` for examples of `example` and gives gamma, beta and the moving
// statistics non-trivial values.
void build_bn(BatchNormalization& layer, Graph& graph, const Shape& example) {
  layer.build(graph, example);
  graph.initialize(1);
  const std::int64_t c = example.back();
  const std::string& name = layer.name();
  set_variable(graph, name + "/gamma", ramp(c, 0.5f, 0.25f));
  set_variable(graph, name + "/beta", ramp(c, -0.3f, 0.1f));
  set_variable(graph, name + "/moving_mean", ramp(c, 0.2f, -0.15f));
  set_variable(graph, name + "/moving_variance", ramp(c, 0.6f, 0.3f));
}


// Counts the calls of a layer that should make none.
class CountingSum : public CrossReplicaSum {
 public:
  void sum(std::span<double>) override { ++calls; }
  int replicas() const override { return 1; }
  int calls = 0;
};

// Two replicas on two threads: each sum() waits for the other's and gives both the element-wise
// sum (added in rank order, so both get the same bits). Records the sizes of the calls.
class TwoReplicas {
 public:
  class Member : public CrossReplicaSum {
   public:
    Member(TwoReplicas& group, int rank) : group_(group), rank_(rank) {}
    void sum(std::span<double> values) override {
      group_.slots_[rank_].assign(values.begin(), values.end());
      group_.barrier_.arrive_and_wait();  // both slots written
      const auto& a = group_.slots_[0];
      const auto& b = group_.slots_[1];
      const bool same_size = a.size() == b.size() && a.size() == values.size();
      for (std::size_t i = 0; i < values.size(); ++i)
        values[i] = same_size ? a[i] + b[i] : std::nan("");
      sizes.push_back(static_cast<std::int64_t>(values.size()));
      group_.barrier_.arrive_and_wait();  // both read before either writes again
    }
    int replicas() const override { return 2; }
    std::vector<std::int64_t> sizes;

   private:
    TwoReplicas& group_;
    int rank_;
  };

  Member& member(int rank) { return members_[rank]; }

 private:
  std::barrier<> barrier_{2};
  std::vector<double> slots_[2];
  Member members_[2] = {Member(*this, 0), Member(*this, 1)};
};

// Rows [begin, end) of the batch dimension of t.
Tensor batch_rows(const Tensor& t, std::int64_t begin, std::int64_t end) {
  const std::int64_t per_example = t.size() / t.dim(0);
  Shape shape = t.shape();
  shape[0] = end - begin;
  return Tensor(shape, t.span().subspan(static_cast<std::size_t>(begin * per_example),
                                        static_cast<std::size_t>((end - begin) * per_example)));
}

void expect_close(std::span<const float> a, std::span<const float> b, double relative) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    CAPTURE(i);
    CHECK(a[i] == doctest::Approx(b[i]).epsilon(relative));
  }
}

// The message of the InvalidArgument f throws ("" if it throws none).
template <typename F>
std::string invalid_argument_message(F&& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("BatchNormalization creates gamma, beta and the moving statistics per channel") {
  Graph graph;
  BatchNormalization layer("bn", bn_options());
  CHECK(layer.build(graph, {3, 3, 5}) == Shape{3, 3, 5});
  for (const char* name : {"bn/gamma", "bn/beta"}) {
    const Variable* v = graph.find(name);
    REQUIRE(v != nullptr);
    CHECK(v->shape == Shape{5});
    CHECK(v->trainable);
    CHECK_FALSE(v->decay);
  }
  for (const char* name : {"bn/moving_mean", "bn/moving_variance"}) {
    const Variable* v = graph.find(name);
    REQUIRE(v != nullptr);
    CHECK(v->shape == Shape{5});
    CHECK_FALSE(v->trainable);
  }
  CHECK(graph.num_parameters() == 10);
  CHECK(graph.num_state() == 10);
  graph.initialize(7);
  CHECK(get(graph, "bn/gamma") == std::vector<float>(5, 1.0f));
  CHECK(get(graph, "bn/beta") == std::vector<float>(5, 0.0f));
  CHECK(get(graph, "bn/moving_mean") == std::vector<float>(5, 0.0f));
  CHECK(get(graph, "bn/moving_variance") == std::vector<float>(5, 1.0f));
  CHECK(layer.flops_per_example() > 45.0);

  auto made = batch_norm("bn2", true, Activation::kNone, 0.99f, 1e-5f);
  const auto* bn = dynamic_cast<const BatchNormalization*>(made.get());
  REQUIRE(bn != nullptr);
  CHECK(bn->name() == "bn2");
  CHECK(bn->options().synchronized);
  CHECK(bn->options().momentum == 0.99f);
  CHECK(bn->options().epsilon == 1e-5f);
}

// Channel counts below, at and past a vector of them (8 or 16 lanes), and row counts that end in
// a partial, odd block of the statistics' 16-row blocks.
TEST_CASE("BatchNormalization in training normalises with the batch statistics") {
  for (const Shape& example : {Shape{3, 3, 5}, Shape{7}, Shape{5, 7, 19}}) {
    CAPTURE(to_string(example));
    const std::int64_t n = example.size() == 1 ? 6 : 3;
    const std::int64_t c = example.back();
    const float eps = 1e-3f;
    Graph graph;
    BatchNormalization layer("bn", bn_options(0.9f, eps));
    build_bn(layer, graph, example);
    // A mean well away from 0 and a different spread per channel.
    Tensor x = random_tensor(with_batch(n, example), 3, -1.0f, 3.0f);
    for (std::int64_t i = 0; i < x.size(); ++i) x[i] *= 1.0f + 0.5f * static_cast<float>(i % c);
    Tensor y;
    layer.forward(x, y, {});
    const Moments m = moments(x, c);
    expect_normalized(x, y, m.mean, m.variance, get(graph, "bn/gamma"), get(graph, "bn/beta"), eps);
    // A second step reuses the buffers and gives the same.
    Tensor y2;
    layer.forward(x, y2, {});
    CHECK(std::equal(y.span().begin(), y.span().end(), y2.span().begin()));
  }
}

TEST_CASE("BatchNormalization keeps the spread of a channel whose mean dwarfs it") {
  const std::int64_t n = 4096, c = 3;
  const Tensor x = mean_dwarfs_spread(n, c);
  Graph graph;
  BatchNormalization layer("bn", bn_options(0.9f, 1e-6f));
  layer.build(graph, {c});
  graph.initialize(1);
  Tensor y;
  layer.forward(x, y, {});
  const Moments m = moments(x, c);  // in double, two passes
  // The mean itself is a float: x - mean carries up to half a unit in its last place (6e-5 at
  // 2000), about 1e-4 of the spread; the statistics must add no more than that.
  double worst = 0;
  for (std::int64_t i = 0; i < x.size(); ++i) {
    const std::int64_t k = i % c;
    worst = std::max(worst, std::abs(y[i] - (x[i] - m.mean[k]) / std::sqrt(m.variance[k] + 1e-6)));
  }
  CHECK(worst < 1e-3);
}

TEST_CASE("BatchNormalization moves its statistics toward the batch's only with update_state") {
  const Shape example{2, 2, 3};
  const std::int64_t n = 5, c = 3;
  const float momentum = 0.8f;
  Graph graph;
  BatchNormalization layer("bn", bn_options(momentum));
  build_bn(layer, graph, example);
  const std::vector<float> mean0 = get(graph, "bn/moving_mean");
  const std::vector<float> variance0 = get(graph, "bn/moving_variance");
  Tensor x = random_tensor(with_batch(n, example), 4, -0.5f, 2.5f);
  Tensor y;

  OpContext frozen;
  frozen.update_state = false;
  layer.forward(x, y, frozen);
  CHECK(get(graph, "bn/moving_mean") == mean0);
  CHECK(get(graph, "bn/moving_variance") == variance0);

  layer.forward(x, y, {});
  const Moments m = moments(x, c);
  const double count = static_cast<double>(n * 4);  // 5 examples of 2 x 2 pixels
  const std::vector<float> mean1 = get(graph, "bn/moving_mean");
  const std::vector<float> variance1 = get(graph, "bn/moving_variance");
  for (std::int64_t k = 0; k < c; ++k) {
    CAPTURE(k);
    const double unbiased = m.variance[k] * count / (count - 1);
    CHECK(mean1[k] == doctest::Approx(momentum * mean0[k] + (1 - momentum) * m.mean[k]));
    CHECK(variance1[k] == doctest::Approx(momentum * variance0[k] + (1 - momentum) * unbiased));
  }

  // Inference leaves the state alone too.
  OpContext inference;
  inference.training = false;
  layer.forward(x, y, inference);
  CHECK(get(graph, "bn/moving_mean") == mean1);
  CHECK(get(graph, "bn/moving_variance") == variance1);
}

TEST_CASE("BatchNormalization at inference normalises with the moving statistics") {
  for (const Shape& example : {Shape{3, 3, 5}, Shape{7}}) {
    CAPTURE(to_string(example));
    const std::int64_t c = example.back();
    const float eps = 1e-2f;
    Graph graph;
    // Synchronised, to show that inference never reduces over replicas.
    BatchNormalization layer("bn", bn_options(0.9f, eps, true));
    build_bn(layer, graph, example);
    Tensor x = random_tensor(with_batch(3, example), 5, -1.0f, 2.0f);
    CountingSum replicas;
    OpContext context;
    context.training = false;
    context.cross_replica = &replicas;
    Tensor y;
    layer.forward(x, y, context);
    const std::vector<float> mm = get(graph, "bn/moving_mean");
    const std::vector<float> mv = get(graph, "bn/moving_variance");
    expect_normalized(x, y, std::vector<double>(mm.begin(), mm.end()),
                      std::vector<double>(mv.begin(), mv.end()), get(graph, "bn/gamma"),
                      get(graph, "bn/beta"), eps);
    CHECK(get(graph, "bn/moving_mean") == mm);
    CHECK(get(graph, "bn/moving_variance") == mv);
    // Backward of an inference forward: dx = gamma / sqrt(var + eps) * dy, no reduction either.
    const Tensor dy = random_tensor(y.shape(), 6);
    Tensor dx;
    std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()));
    layer.backward(x, y, dy, &dx, grads);
    const std::vector<float> gamma = get(graph, "bn/gamma");
    for (std::int64_t i = 0; i < x.size(); ++i) {
      const std::int64_t k = i % c;
      CHECK(dx[i] == doctest::Approx(gamma[k] * dy[i] / std::sqrt(mv[k] + eps)).epsilon(1e-5));
    }
    CHECK(replicas.calls == 0);
  }
}

TEST_CASE("BatchNormalization gradients match finite differences in training and inference") {
  for (const Shape& example : {Shape{3, 3, 5}, Shape{7}, Shape{3, 1, 19}}) {
    for (bool training : {true, false}) {
      CAPTURE(to_string(example));
      CAPTURE(training);
      const std::int64_t n = example.size() == 1 ? 6 : 3;
      Graph graph;
      BatchNormalization layer("bn", bn_options());
      build_bn(layer, graph, example);
      Tensor x = random_tensor(with_batch(n, example), 8, -1.0f, 3.0f);
      OpContext context;
      context.training = training;
      GradientCheckOptions options;
      options.step = 1e-2;
      options.threshold = 1e-2;
      expect_layer_gradients(layer, graph, x, context, options);
    }
  }
}

TEST_CASE("BatchNormalization with a fused ReLU equals BatchNormalization then ReLU") {
  for (const Shape& example : {Shape{3, 3, 5}, Shape{3, 3, 19}})
  for (bool training : {true, false}) {
    CAPTURE(to_string(example));
    CAPTURE(training);
    Graph fused_graph, plain_graph;
    BatchNormalization::Options options = bn_options();
    options.activation = Activation::kRelu;
    BatchNormalization fused("bn", options);
    BatchNormalization plain("bn", bn_options());
    build_bn(fused, fused_graph, example);
    build_bn(plain, plain_graph, example);
    Tensor x = random_tensor(with_batch(4, example), 5, -1.0f, 3.0f);
    OpContext context;
    context.training = training;
    Tensor y, y_plain;
    fused.forward(x, y, context);
    plain.forward(x, y_plain, context);
    Tensor dy = random_tensor(y.shape(), 6);
    Tensor dy_plain = dy;  // through the ReLU by hand
    int clipped = 0;
    for (std::int64_t i = 0; i < y.size(); ++i) {
      CHECK(y[i] == doctest::Approx(std::max(0.0f, y_plain[i])).epsilon(1e-6));
      if (y_plain[i] <= 0.0f) {
        dy_plain[i] = 0.0f;
        ++clipped;
      }
    }
    CHECK(clipped > 0);
    CHECK(clipped < y.size());
    std::vector<float> grads(static_cast<std::size_t>(fused_graph.num_parameters()));
    std::vector<float> grads_plain(grads.size());
    Tensor dx, dx_plain;
    fused.backward(x, y, dy, &dx, grads);
    plain.backward(x, y_plain, dy_plain, &dx_plain, grads_plain);
    for (std::size_t i = 0; i < grads.size(); ++i)
      CHECK(grads[i] == doctest::Approx(grads_plain[i]).epsilon(1e-5));
    for (std::int64_t i = 0; i < dx.size(); ++i)
      CHECK(dx[i] == doctest::Approx(dx_plain[i]).epsilon(1e-5));
    // Finite differences across the ReLU's kink: on the small example only, where no input lies
    // within a step of it (the larger one's gradients are the plain layer's, checked above).
    if (example.back() != 5) continue;
    GradientCheckOptions check;
    check.step = 1e-3;
    expect_layer_gradients(fused, fused_graph, x, context, check);
  }
}

TEST_CASE("BatchNormalization backward overwrites its gradient slices and can skip dx") {
  Graph graph;
  BatchNormalization layer("bn", bn_options());
  build_bn(layer, graph, {4});
  Tensor x = random_tensor({5, 4}, 2), y, dy = random_tensor({5, 4}, 3), dx;
  layer.forward(x, y, {});
  std::vector<float> first(static_cast<std::size_t>(graph.num_parameters()), 0.0f);
  std::vector<float> garbage(first.size(), 123.0f);
  layer.backward(x, y, dy, &dx, first);
  layer.backward(x, y, dy, nullptr, garbage);
  CHECK(first == garbage);
  CHECK(dx.shape() == Shape{5, 4});
  // In training, each channel's input gradient sums to 0 (the mean is subtracted).
  for (std::int64_t k = 0; k < 4; ++k) {
    double sum = 0;
    for (std::int64_t r = 0; r < 5; ++r) sum += dx[r * 4 + k];
    CHECK(sum == doctest::Approx(0.0).scale(1.0).epsilon(1e-5));
  }
}

TEST_CASE("Synchronised BatchNormalization on two replicas computes what one process does") {
  const Shape example{3, 3, 4};
  const std::int64_t half = 3, n = 2 * half, c = example.back();
  const Tensor x = random_tensor(with_batch(n, example), 9, -1.0f, 3.0f);
  const Tensor w = random_tensor(with_batch(n, example), 10);  // dLoss/dy

  // One process, the whole batch, unsynchronised.
  Graph whole_graph;
  BatchNormalization whole("bn", bn_options(0.7f));
  build_bn(whole, whole_graph, example);
  Tensor whole_y, whole_dx;
  whole.forward(x, whole_y, {});
  std::vector<float> whole_grads(static_cast<std::size_t>(whole_graph.num_parameters()));
  whole.backward(x, whole_y, w, &whole_dx, whole_grads);

  // Two replicas, half each, synchronised.
  TwoReplicas group;
  Graph graphs[2];
  std::unique_ptr<BatchNormalization> layers[2];
  Tensor ys[2], dxs[2];
  std::vector<float> grads[2];
  std::exception_ptr failures[2];
  for (int r = 0; r < 2; ++r) {
    layers[r] = std::make_unique<BatchNormalization>("bn", bn_options(0.7f, 1e-3f, true));
    build_bn(*layers[r], graphs[r], example);
    grads[r].assign(static_cast<std::size_t>(graphs[r].num_parameters()), 0.0f);
  }
  auto replica = [&](int r) {
    try {
      const Tensor xr = batch_rows(x, r * half, (r + 1) * half);
      const Tensor wr = batch_rows(w, r * half, (r + 1) * half);
      OpContext context;
      context.cross_replica = &group.member(r);
      layers[r]->forward(xr, ys[r], context);
      layers[r]->backward(xr, ys[r], wr, &dxs[r], grads[r]);
    } catch (...) {
      failures[r] = std::current_exception();
    }
  };
  std::thread other(replica, 1);
  replica(0);
  other.join();
  for (const auto& failure : failures)
    if (failure) std::rethrow_exception(failure);

  // In forward, at the first synchronised step, one reduction of the plain sums for the pivot
  // ([sum x, count]), then as at every step [sum x, sum x^2, count]; in backward [sum dy,
  // sum dy x_hat].
  for (int r = 0; r < 2; ++r)
    CHECK(group.member(r).sizes == std::vector<std::int64_t>{c + 1, 2 * c + 1, 2 * c});
  for (int r = 0; r < 2; ++r) {
    CAPTURE(r);
    const Tensor y_rows = batch_rows(whole_y, r * half, (r + 1) * half);
    const Tensor dx_rows = batch_rows(whole_dx, r * half, (r + 1) * half);
    expect_close(ys[r].span(), y_rows.span(), 1e-5);
    expect_close(dxs[r].span(), dx_rows.span(), 1e-5);
    for (const char* state : {"bn/moving_mean", "bn/moving_variance"}) {
      CAPTURE(state);
      expect_close(get(graphs[r], state), get(whole_graph, state), 1e-6);
    }
  }
  // The parameter gradients are each replica's own; their sum is the whole batch's.
  std::vector<float> summed(whole_grads.size());
  for (std::size_t i = 0; i < summed.size(); ++i) summed[i] = grads[0][i] + grads[1][i];
  expect_close(summed, whole_grads, 1e-5);

  // Unsynchronised, a half normalises with its own statistics: not the whole's rows.
  Graph alone_graph;
  BatchNormalization alone("bn", bn_options(0.7f));
  build_bn(alone, alone_graph, example);
  Tensor alone_y;
  alone.forward(batch_rows(x, 0, half), alone_y, {});
  const Tensor first_rows = batch_rows(whole_y, 0, half);
  double difference = 0;
  for (std::int64_t i = 0; i < alone_y.size(); ++i)
    difference = std::max(difference, std::abs(double{alone_y[i]} - first_rows[i]));
  CHECK(difference > 1e-3);
}

TEST_CASE("Synchronised BatchNormalization keeps the spread from its first step, the pivot shared") {
  const std::int64_t half = 2048, c = 3;
  const Tensor x = mean_dwarfs_spread(2 * half, c);
  const Moments m = moments(x, c);
  TwoReplicas group;
  Graph graphs[2];
  std::unique_ptr<BatchNormalization> layers[2];
  double worst[2][2] = {};  // [replica][step]
  for (int r = 0; r < 2; ++r) {
    layers[r] = std::make_unique<BatchNormalization>("bn", bn_options(0.9f, 1e-6f, true));
    layers[r]->build(graphs[r], {c});
    graphs[r].initialize(1);
  }
  auto replica = [&](int r) {
    const Tensor xr = batch_rows(x, r * half, (r + 1) * half);
    OpContext context;
    context.cross_replica = &group.member(r);
    for (int step = 0; step < 2; ++step) {
      Tensor y;
      layers[r]->forward(xr, y, context);
      for (std::int64_t i = 0; i < xr.size(); ++i) {
        const std::int64_t k = i % c;
        const double exact = (xr[i] - m.mean[k]) / std::sqrt(m.variance[k] + 1e-6);
        worst[r][step] = std::max(worst[r][step], std::abs(y[i] - exact));
      }
    }
  };
  std::thread other(replica, 1);
  replica(0);
  other.join();
  for (int r = 0; r < 2; ++r) {
    CAPTURE(r);
    CHECK(worst[r][0] < 1e-3);  // pivoted on the first batch's mean, from a reduction of its own
    CHECK(worst[r][1] < 1e-3);  // on the first step's mean
  }
}

TEST_CASE("BatchNormalization and LayerNormalization on two threads compute what they do on one") {
  // 65536 elements: enough for normalization.cc to split them between two threads.
  const Shape example{8, 8, 32};
  const Tensor x = random_tensor(with_batch(32, example), 11, -1.0f, 3.0f);
  const Tensor dy = random_tensor(x.shape(), 12);
  auto same = [](std::span<const float> a, std::span<const float> b) {
    REQUIRE(a.size() == b.size());
    float worst = 0.0f, largest = 0.0f;
    for (std::size_t i = 0; i < a.size(); ++i) {
      worst = std::max(worst, std::abs(a[i] - b[i]));
      largest = std::max(largest, std::abs(a[i]));
    }
    CHECK(largest > 0.0f);
    CHECK(worst <= 1e-5f * largest);
  };
  auto run = [&](Layer& layer, Graph& graph) {
    Tensor y1, y2, dx1, dx2;
    std::vector<float> g1(static_cast<std::size_t>(graph.num_parameters()));
    std::vector<float> g2(g1.size(), 5.0f);
    set_intra_op_threads(1);
    layer.forward(x, y1, {});
    layer.backward(x, y1, dy, &dx1, g1);
    set_intra_op_threads(2);
    layer.forward(x, y2, {});
    layer.backward(x, y2, dy, &dx2, g2);
    set_intra_op_threads(1);
    same(y1.span(), y2.span());
    same(dx1.span(), dx2.span());
    same(g1, g2);
  };
  Graph bn_graph;
  BatchNormalization bn("bn", bn_options());
  build_bn(bn, bn_graph, example);
  run(bn, bn_graph);
  Graph ln_graph;
  LayerNormalization ln("ln");
  ln.build(ln_graph, example);
  ln_graph.initialize(1);
  set_variable(ln_graph, "ln/gamma", ramp(32, 0.5f, 0.05f));
  run(ln, ln_graph);
}

TEST_CASE("LayerNormalization normalises each row over the last axis") {
  const Shape example{3, 6};
  const std::int64_t n = 4, f = 6;
  const float eps = 1e-3f;
  Graph graph;
  LayerNormalization layer("ln", eps);
  CHECK(layer.build(graph, example) == example);
  for (const char* name : {"ln/gamma", "ln/beta"}) {
    const Variable* v = graph.find(name);
    REQUIRE(v != nullptr);
    CHECK(v->shape == Shape{f});
    CHECK(v->trainable);
    CHECK_FALSE(v->decay);
  }
  CHECK(graph.num_state() == 0);
  graph.initialize(1);
  CHECK(get(graph, "ln/gamma") == std::vector<float>(f, 1.0f));
  CHECK(get(graph, "ln/beta") == std::vector<float>(f, 0.0f));
  CHECK(layer.flops_per_example() > 0.0);
  const std::vector<float> gamma = ramp(f, 0.5f, 0.2f), beta = ramp(f, 0.4f, -0.15f);
  set_variable(graph, "ln/gamma", gamma);
  set_variable(graph, "ln/beta", beta);
  Tensor x = random_tensor(with_batch(n, example), 13, -1.0f, 3.0f);
  for (std::int64_t i = 0; i < x.size(); ++i) x[i] *= 1.0f + static_cast<float>(i / f);
  Tensor y, y_inference;
  layer.forward(x, y, {});
  OpContext inference;
  inference.training = false;
  layer.forward(x, y_inference, inference);
  CHECK(std::equal(y.span().begin(), y.span().end(), y_inference.span().begin()));
  REQUIRE(y.shape() == x.shape());
  for (std::int64_t r = 0; r < x.size() / f; ++r) {
    double mean = 0, variance = 0;
    for (std::int64_t k = 0; k < f; ++k) mean += x[r * f + k];
    mean /= f;
    for (std::int64_t k = 0; k < f; ++k) variance += (x[r * f + k] - mean) * (x[r * f + k] - mean);
    variance /= f;
    for (std::int64_t k = 0; k < f; ++k) {
      CAPTURE(r);
      CAPTURE(k);
      const double expected =
          gamma[k] * (x[r * f + k] - mean) / std::sqrt(variance + eps) + beta[k];
      CHECK(y[r * f + k] == doctest::Approx(expected).epsilon(1e-5));
    }
  }
  auto made = layer_norm("ln2", 1e-5f);
  REQUIRE(dynamic_cast<const LayerNormalization*>(made.get()) != nullptr);
  CHECK(made->name() == "ln2");
}

TEST_CASE("LayerNormalization gradients match finite differences") {
  for (const Shape& example : {Shape{9}, Shape{2, 5}}) {
    CAPTURE(to_string(example));
    Graph graph;
    LayerNormalization layer("ln");
    layer.build(graph, example);
    graph.initialize(1);
    const std::int64_t f = example.back();
    set_variable(graph, "ln/gamma", ramp(f, 0.5f, 0.2f));
    set_variable(graph, "ln/beta", ramp(f, 0.4f, -0.15f));
    Tensor x = random_tensor(with_batch(3, example), 14, -1.0f, 3.0f);
    GradientCheckOptions options;
    options.step = 1e-2;
    options.threshold = 1e-2;
    expect_layer_gradients(layer, graph, x, {}, options);
    // Backward overwrites its slices, with or without dx.
    Tensor y, dx;
    layer.forward(x, y, {});
    const Tensor dy = random_tensor(y.shape(), 15);
    std::vector<float> first(static_cast<std::size_t>(graph.num_parameters()), 0.0f);
    std::vector<float> garbage(first.size(), 123.0f);
    layer.backward(x, y, dy, &dx, first);
    layer.backward(x, y, dy, nullptr, garbage);
    CHECK(first == garbage);
  }
}

TEST_CASE("BatchNormalization and LayerNormalization reject bad arguments naming the layer") {
  CHECK_THROWS_AS(BatchNormalization("bn", bn_options(1.0f)), InvalidArgument);
  CHECK_THROWS_AS(BatchNormalization("bn", bn_options(-0.1f)), InvalidArgument);
  CHECK_THROWS_AS(BatchNormalization("bn", bn_options(std::nanf(""))), InvalidArgument);
  CHECK_THROWS_AS(BatchNormalization("bn", bn_options(0.9f, 0.0f)), InvalidArgument);
  CHECK_THROWS_AS(BatchNormalization("bn", bn_options(0.9f, -1e-3f)), InvalidArgument);
  CHECK_THROWS_AS(batch_norm("bn", false, Activation::kNone, 1.5f), InvalidArgument);
  CHECK_NOTHROW(BatchNormalization("bn", bn_options(0.0f)));
  CHECK_THROWS_AS(LayerNormalization("ln", 0.0f), InvalidArgument);
  CHECK_THROWS_AS(LayerNormalization("ln", -1.0f), InvalidArgument);
  CHECK_THROWS_AS(layer_norm("ln", 0.0f), InvalidArgument);

  const std::string momentum =
      invalid_argument_message([] { BatchNormalization("bn_momentum", bn_options(2.0f)); });
  CHECK(momentum.find("\"bn_momentum\"") != std::string::npos);
  CHECK(momentum.find("momentum") != std::string::npos);
  CHECK(momentum.find('\n') == std::string::npos);

  Graph graph;
  BatchNormalization bn("bn_scalar", bn_options());
  const std::string scalar = invalid_argument_message([&] { bn.build(graph, {}); });
  CHECK(scalar.find("\"bn_scalar\"") != std::string::npos);
  CHECK(scalar.find("scalar") != std::string::npos);
  CHECK_THROWS_AS(bn.build(graph, {4, 0}), InvalidArgument);
  LayerNormalization ln("ln_scalar");
  const std::string ln_scalar = invalid_argument_message([&] { ln.build(graph, {}); });
  CHECK(ln_scalar.find("\"ln_scalar\"") != std::string::npos);

  // Training on one value per channel would give zeros and no gradient: refused, as PyTorch
  // refuses it. One row of an image has several values per channel; inference takes any batch.
  Graph rows_graph, image_graph;
  BatchNormalization rows("bn_rows", bn_options());
  rows.build(rows_graph, {3});
  rows_graph.initialize(1);
  Tensor one({1, 3}, std::vector<float>{1, 2, 3}), y;
  CHECK_THROWS_WITH_AS(rows.forward(one, y, OpContext{}),
                       "BatchNormalization \"bn_rows\": training on one value per channel (a batch of "
                       "[1, 3]) normalises each to 0 and passes no gradient: give two or more examples a "
                       "batch (a tower's share of it)",
                       InvalidArgument);
  OpContext inference;
  inference.training = false;
  CHECK_NOTHROW(rows.forward(one, y, inference));
  BatchNormalization image("bn_image", bn_options());
  image.build(image_graph, {2, 2, 3});
  image_graph.initialize(1);
  Tensor pixels = random_tensor({1, 2, 2, 3}, 3);
  CHECK_NOTHROW(image.forward(pixels, y, OpContext{}));
}
