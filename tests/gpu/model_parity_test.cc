// Whole models on a GPU against the same models on the host (the oracle): mlp and cnn trained
// for 10 SGD steps from the same initial values on the same batches, compared step by step
// (loss, accuracy, gradients) and at the end (parameters, evaluation); two towers on the GPU
// through the Trainer against two on the host; and the refusals. Every case that needs a device
// passes, saying so, without one.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/data/dataset.h"
#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/model.h"
#include "cohort/core/nn/models.h"
#include "cohort/core/nn/optimizer.h"
#include "cohort/core/train/trainer.h"
#include "cohort/gpu/device.h"
#include "cohort/gpu/pinned.h"
#include "support/gpu_test.h"

using cohort::Graph;
using cohort::Model;
using cohort::Tensor;

namespace {

// ||a - b|| / ||b||: the error of a whole vector against its scale.
double relative_error(std::span<const float> a, std::span<const float> b) {
  REQUIRE(a.size() == b.size());
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    diff += d * d;
    norm += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}

// The loss and the logits are continuous functions of the inputs and parameters: FP32 with
// different summation orders keeps them within 1e-4.
constexpr double kTolerance = 1e-4;
// Gradients are not continuous: where two inputs of a max-pool window, or a pre-activation and 0,
// are closer than the two sides' rounding differences (1e-7 to 1e-6 relative; the host computes
// some convolutions by Winograd), the sides route one gradient differently, which moves a
// variable's gradient by up to about 1e-3 of its norm. A wrong gradient is off by far more than
// this bound. The per-op tests (identical inputs, no such flips) hold each op to 1e-4.
constexpr double kGradientTolerance = 1e-2;

std::span<const float> slice(std::span<const float> all, const cohort::Variable& v) {
  return all.subspan(static_cast<std::size_t>(v.offset), static_cast<std::size_t>(v.size));
}

// Compares two gradient-like flat vectors in the graph's layout variable by variable (so a small
// variable's error is not lost in a large one's norm); returns the worst error.
double check_per_variable(const Graph& graph, std::span<const float> gpu_values,
                          std::span<const float> cpu_values) {
  double worst = 0.0;
  for (const cohort::Variable& v : graph.variables()) {
    const double error = relative_error(slice(gpu_values, v), slice(cpu_values, v));
    CAPTURE(v.name);
    CHECK(error < kGradientTolerance);
    worst = std::max(worst, error);
  }
  return worst;
}

std::vector<float> minus(std::span<const float> a, std::span<const float> b) {
  std::vector<float> d(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) d[i] = a[i] - b[i];
  return d;
}

long correct(float accuracy, std::size_t n) { return std::lround(accuracy * static_cast<double>(n)); }

std::unique_ptr<cohort::Optimizer> sgd(double learning_rate) {
  cohort::OptimizerOptions options;
  options.name = "sgd";
  options.learning_rate.base = learning_rate;
  return cohort::Optimizer::create(options);
}

void check_training_parity(const std::string& name) {
  Graph cpu_graph, gpu_graph;
  Model cpu = cohort::build_model(name, cpu_graph);
  Model gpu = cohort::build_model(name, gpu_graph);
  cpu_graph.initialize(11);
  gpu_graph.initialize(11);
  const std::vector<float> initial(cpu_graph.values().begin(), cpu_graph.values().end());
  gpu.set_gpu(0);
  CHECK(gpu.gpu() == 0);
  CHECK(cpu.gpu() == -1);

  const auto data = cohort::data::synthetic(10 * 32, 5);
  auto cpu_optimizer = sgd(0.05), gpu_optimizer = sgd(0.05);
  std::vector<float> cpu_grads(static_cast<std::size_t>(cpu_graph.num_parameters()));
  std::vector<float> gpu_grads(cpu_grads.size());
  auto batches = cohort::data::BatchIterator::in_order(data, 32);
  Tensor images;
  std::vector<std::int32_t> labels;
  double worst_grads = 0.0, worst_loss = 0.0;
  for (std::int64_t step = 0; batches.next(images, labels); ++step) {
    cohort::OpContext context;  // training: the cnn's dropout draws the same mask on both
    context.seed = 100 + static_cast<std::uint64_t>(step);
    const auto c = cpu.train_step(images, labels, cpu_grads, context);
    const auto g = gpu.train_step(images, labels, gpu_grads, context);
    CAPTURE(step);
    const double loss_error = std::abs(g.loss - c.loss) / std::abs(c.loss);
    worst_loss = std::max(worst_loss, loss_error);
    worst_grads = std::max(worst_grads, check_per_variable(cpu_graph, gpu_grads, cpu_grads));
    CHECK(loss_error <= kTolerance);
    CHECK(std::abs(correct(g.accuracy, 32) - correct(c.accuracy, 32)) <= 1);
    CHECK(relative_error(gpu.fetch("logits")->span(), cpu.fetch("logits")->span()) < kTolerance);
    cpu_optimizer->apply(cpu_graph.values(), cpu_grads, step);
    gpu_optimizer->apply(gpu_graph.values(), gpu_grads, step);
  }
  // What training changed, so the identical initial values do not hide a difference.
  const double updates_error =
      check_per_variable(cpu_graph, minus(gpu_graph.values(), initial), minus(cpu_graph.values(), initial));
  MESSAGE(name << ", 10 SGD steps, GPU vs CPU, worst relative error per variable: loss "
               << worst_loss << ", gradients " << worst_grads << ", parameter updates "
               << updates_error);
  const auto test = cohort::data::synthetic(500, 6);
  batches = cohort::data::BatchIterator::in_order(test, 500);
  REQUIRE(batches.next(images, labels));
  const auto c = cpu.evaluate(images, labels);
  const auto g = gpu.evaluate(images, labels);
  CHECK(std::abs(g.loss - c.loss) <= kTolerance * std::abs(c.loss));
  CHECK(std::abs(correct(g.accuracy, 500) - correct(c.accuracy, 500)) <= 2);
}

}  // namespace

TEST_CASE("mlp: 10 steps on the GPU match the host") {
  if (cohort::test::no_device()) return;
  check_training_parity("mlp");
}

TEST_CASE("cnn: 10 steps on the GPU match the host") {
  if (cohort::test::no_device()) return;
  check_training_parity("cnn");
}

TEST_CASE("two GPU towers in the Trainer match two host towers") {
  if (cohort::test::no_device()) return;
  std::vector<std::vector<float>> updates;
  Graph layout;
  for (bool on_gpu : {false, true}) {
    Graph graph;
    cohort::TrainerOptions options;
    options.batch_size = 64;
    options.towers = 2;
    options.seed = 3;
    if (on_gpu) options.gpus = {0, 0};  // both on device 0: any GPU machine can run this
    auto trainer = std::make_unique<cohort::Trainer>(
        nullptr, graph, [](Graph& g) { return cohort::build_model("small_cnn", g); },
        cohort::data::synthetic(640, 9), sgd(0.05), options);
    trainer->start();
    const std::vector<float> initial(graph.values().begin(), graph.values().end());
    for (int step = 0; step < 10; ++step) trainer->step();
    updates.push_back(minus(graph.values(), initial));
    // GPU towers copy from the graph's values page-locked, for as long as the Trainer lives.
    CHECK(cohort::gpu::is_registered_host_memory(graph.values().data()) == on_gpu);
    trainer.reset();
    CHECK_FALSE(cohort::gpu::is_registered_host_memory(graph.values().data()));
    if (!on_gpu) cohort::build_model("small_cnn", layout);  // the same variables, for their names
  }
  const double error = check_per_variable(layout, updates[1], updates[0]);
  MESSAGE("small_cnn, 2 towers, 10 Trainer steps, GPU vs CPU, worst relative error per variable "
          "of the parameter updates " << error);
}

TEST_CASE("a model is refused a GPU that does not exist, and one with a layer without a GPU path") {
  if (cohort::test::no_device()) return;
  Graph graph;
  Model model = cohort::mlp(graph);
  CHECK_THROWS_AS(model.set_gpu(cohort::gpu::device_count()), cohort::InvalidArgument);

  // A user layer that has only a CPU path.
  struct Identity : cohort::Layer {
    std::string name_ = "identity";
    const std::string& name() const override { return name_; }
    cohort::Shape build(Graph&, const cohort::Shape& input) override { return input; }
    void forward(const Tensor& input, Tensor& output, const cohort::OpContext&) override {
      output = input;
    }
    void backward(const Tensor&, const Tensor&, const Tensor& grad_output, Tensor* grad_input,
                  std::span<float>) override {
      if (grad_input) *grad_input = grad_output;
    }
  };
  Graph other;
  Model custom(other, {10});
  custom.add(std::make_unique<Identity>()).add(cohort::dense("logits", 10));
  CHECK_THROWS_WITH_AS(custom.set_gpu(0), "Model: layer \"identity\" has no GPU path",
                       cohort::InvalidArgument);
  custom.set_gpu(-1);
  CHECK(custom.gpu() == -1);

  // The layers that ship CPU-only (batch norm here), and graphs that are not a stack (resnet).
  Graph normalized;
  Model stack(normalized, {28, 28, 1});
  stack.add(cohort::conv2d("conv", 8, 3)).add(cohort::batch_norm("bn")).add(cohort::dense("logits", 10));
  CHECK_THROWS_WITH_AS(stack.set_gpu(0), "Model: layer \"bn\" has no GPU path",
                       cohort::InvalidArgument);
  Graph residual;
  Model resnet = cohort::resnet(residual);
  CHECK_THROWS_WITH_AS(resnet.set_gpu(0),
                       doctest::Contains("GPU towers run a stack of layers; this model is a graph"),
                       cohort::InvalidArgument);
}
