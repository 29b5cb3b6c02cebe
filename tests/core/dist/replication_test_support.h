// What the training-mode tests share: the cluster's pieces, the models, the batches, the
// one-process reference the modes must match, and how closely.
#pragma once

#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "cohort/core/dist/replication.h"
#include "cohort/core/dist/server.h"
#include "cohort/core/nn/data/dataset.h"
#include "cohort/core/nn/models.h"

namespace cohort::replication_test {

using namespace std::chrono_literals;

inline constexpr std::int64_t kBatch = 8;
inline constexpr int kSteps = 6;

inline ReplicaDeviceSetter setter(int ps_tasks) {
  ReplicaDeviceSetterOptions o;
  o.ps_tasks = ps_tasks;
  return ReplicaDeviceSetter(o);
}

// A ps task serves the workers until they are done, and returns true; a worker returns false.
inline bool served_as_ps(Server& server) {
  if (server.job_name() != "ps") return false;
  server.join(60s);
  return true;
}

inline OptimizerOptions momentum() {
  OptimizerOptions o;
  o.name = "momentum";
  o.learning_rate.base = 0.1;
  return o;
}

// Copies examples [first, first + count) of `data` into a batch.
inline void slice(const data::Dataset& data, std::int64_t first, std::int64_t count,
                  Tensor& images, std::vector<std::int32_t>& labels) {
  Shape shape{count};
  for (auto d : data.image_shape()) shape.push_back(d);
  images.resize(shape);
  labels.resize(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) {
    const auto image = data.image(first + i);
    std::memcpy(images.data() + i * data.image_size(), image.data(), image.size_bytes());
    labels[static_cast<std::size_t>(i)] = data.label(first + i);
  }
}

// The models the equivalence tests train; `sync` makes batch norm synchronised.
using Builder = Model (*)(Graph& graph, bool sync);

inline Model small_mlp(Graph& graph, bool) { return mlp(graph, {16}); }
// 159,010 parameters: a sync step's update is written and pulled in three pieces.
inline Model wide_mlp(Graph& graph, bool) { return mlp(graph, {200}); }

// Batch norm on images (NHWC) and on feature rows. The ReLU before each norm keeps the biases
// before it meaningful: a norm right after a bias cancels it, leaving a parameter whose gradient
// is rounding noise, which no two summation orders agree on.
inline Model batch_norm_net(Graph& graph, bool sync) {
  Model model(graph);
  Node x = model.input({28, 28, 1});
  x = model.apply(conv2d("conv", 4, 3, Activation::kRelu, 2), x);
  x = model.apply(batch_norm("bn1", sync), x);
  x = model.apply(global_avg_pool2d("pool"), x);
  x = model.apply(dense("hidden", 16, Activation::kRelu), x);
  x = model.apply(batch_norm("bn2", sync), x);
  model.apply(dense("logits", 10), x);
  return model;
}

// The parameters, then the layer state (batch norm's moving statistics).
inline std::vector<float> parameters_and_state(const Graph& graph) {
  std::vector<float> all(graph.values().begin(), graph.values().end());
  all.insert(all.end(), graph.state().begin(), graph.state().end());
  return all;
}

// One process at batch W*B over the same examples, `steps` steps: the reference the modes must
// match.
inline std::vector<float> reference(const data::Dataset& data, int workers,
                                    Builder build = small_mlp, int steps = kSteps) {
  Graph graph;
  Model model = build(graph, false);
  graph.initialize(7);
  auto optimizer = Optimizer::create(momentum());
  std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()));
  Tensor images;
  std::vector<std::int32_t> labels;
  for (int step = 0; step < steps; ++step) {
    slice(data, step * workers * kBatch, workers * kBatch, images, labels);
    model.train_step(images, labels, grads, {});
    optimizer->apply(graph.values(), grads, step);
  }
  return parameters_and_state(graph);
}

// The replication `options` ask for on `server`, started from the chief's initial values, its
// waits bounded.
inline std::unique_ptr<Replication> start_replication(Server& server, Graph& graph,
                                                      Optimizer& optimizer,
                                                      ReplicationOptions options) {
  options.wait_timeout = 60s;
  auto replication = Replication::create(&server, graph, optimizer, options);
  replication->start(graph.values(), 0);
  return replication;
}

// "Equal to 1e-5 relative": the difference of the parameter vectors is below 1e-5 of the
// reference's norm. Element by element (relative, with values below 1e-3 compared absolutely at
// that scale) the sums of gradients taken in another order stay within `element_bar`: 1e-4, and
// 1e-3 with batch norm, whose statistics and backward sums are also reduced in another order
// and whose per-channel gradients are small differences of large sums.
inline void check_equal(const std::vector<float>& got, const std::vector<float>& want,
                        double element_bar = 1e-4) {
  REQUIRE(got.size() == want.size());
  double diff2 = 0, norm2 = 0, worst = 0;
  std::size_t worst_at = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double d = double(got[i]) - want[i];
    diff2 += d * d;
    norm2 += double(want[i]) * want[i];
    const double error = std::abs(d) / std::max(1e-3, std::abs(double(want[i])));
    if (error > worst) worst = error, worst_at = i;
  }
  const double relative = std::sqrt(diff2 / norm2);
  MESSAGE("relative difference " << relative << ", largest element-wise " << worst << " at "
                                 << worst_at << " of " << got.size() << " (" << got[worst_at]
                                 << " for " << want[worst_at] << ")");
  CHECK(relative < 1e-5);
  CHECK(worst < element_bar);
}

}  // namespace cohort::replication_test
