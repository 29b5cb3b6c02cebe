// Tests of core/io/saver.h with models that have non-trainable state: batch norm's moving
// statistics go through a checkpoint file exactly and never into the gradients or the optimizer;
// a checkpoint written before models had state still loads.
#include "cohort/core/io/saver.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "cohort/core/io/safetensors.h"
#include "cohort/core/nn/gradient_check.h"
#include "cohort/core/nn/models.h"
#include "cohort/core/nn/moving_average.h"
#include "cohort/core/nn/threads.h"
#include "support/temp_dir.h"

using namespace cohort;

namespace {

const bool kOneThread = (set_intra_op_threads(1), true);

std::vector<float> copy(std::span<const float> values) { return {values.begin(), values.end()}; }

ResNetOptions small_resnet() {
  ResNetOptions options;
  options.widths = {8, 16};
  options.blocks_per_stage = 1;
  return options;
}

// `steps` momentum steps of a small resnet on random images: parameters, slots and the moving
// statistics all move away from their initial values.
void train(Model& model, Graph& graph, Optimizer& optimizer, int steps) {
  std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()));
  for (int step = 0; step < steps; ++step) {
    const Tensor images = random_tensor({8, 28, 28, 1}, 100 + step);
    std::vector<std::int32_t> labels(8);
    for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::int32_t>((i + step) % 10);
    model.train_step(images, labels, grads, {.training = true, .seed = static_cast<std::uint64_t>(step)});
    optimizer.apply(graph.values(), grads, step);
  }
}

OptimizerOptions momentum() {
  OptimizerOptions options;
  options.name = "momentum";
  options.learning_rate.base = 0.05;
  return options;
}

}  // namespace

TEST_CASE("batch norm's moving statistics go through a checkpoint file exactly") {
  cohort::test::TempDir dir("saver_test");
  Graph graph;
  Model model = resnet(graph, small_resnet());
  graph.initialize(3);
  auto optimizer = Optimizer::create(momentum());
  const std::vector<float> initial_state = copy(graph.state());
  REQUIRE(graph.num_state() > 0);
  train(model, graph, *optimizer, 3);
  CHECK(copy(graph.state()) != initial_state);  // the moving statistics moved

  const std::string path = dir / "model.safetensors";
  Checkpoint checkpoint = make_checkpoint(graph, *optimizer);
  checkpoint.metadata["global_step"] = "3";
  write_checkpoint(path, checkpoint);
  const Checkpoint back = read_checkpoint(path);
  for (const Variable& v : graph.variables())
    if (!v.trainable) CHECK(back.find(v.name) != nullptr);

  Graph restored_graph;
  Model restored = resnet(restored_graph, small_resnet());
  restored_graph.initialize(99);  // other values, all overwritten
  auto restored_optimizer = Optimizer::create(momentum());
  restore_checkpoint(back, restored_graph, *restored_optimizer);
  CHECK(copy(restored_graph.values()) == copy(graph.values()));
  CHECK(copy(restored_graph.state()) == copy(graph.state()));
  CHECK(restored_optimizer->iterations() == optimizer->iterations());

  // Inference uses the moving statistics: the two models answer bit for bit alike.
  const Tensor images = random_tensor({5, 28, 28, 1}, 7);
  const std::vector<std::int32_t> labels = {1, 2, 3, 4, 5};
  const StepMetrics a = model.evaluate(images, labels);
  const StepMetrics b = restored.evaluate(images, labels);
  CHECK(a.loss == b.loss);
  const Tensor* logits_a = model.fetch("logits");
  const Tensor* logits_b = restored.fetch("logits");
  REQUIRE(logits_a != nullptr);
  REQUIRE(logits_b != nullptr);
  CHECK(copy(logits_a->span()) == copy(logits_b->span()));

  // And both train on identically: the restored slots and statistics carry on.
  train(model, graph, *optimizer, 2);
  train(restored, restored_graph, *restored_optimizer, 2);
  CHECK(copy(restored_graph.values()) == copy(graph.values()));
  CHECK(copy(restored_graph.state()) == copy(graph.state()));
}

TEST_CASE("moving statistics are state, not parameters: no gradient, no optimizer slot") {
  Graph graph;
  Model model = resnet(graph, small_resnet());
  graph.initialize(3);
  std::int64_t trainable = 0, state = 0;
  for (const Variable& v : graph.variables()) {
    const bool moving = v.name.find("/moving_") != std::string::npos;
    CHECK(v.trainable != moving);
    (v.trainable ? trainable : state) += v.size;
  }
  // The gradient buffer, the optimizer's slots, the ps windows and the allreduce all span
  // num_parameters(): the trainable variables alone.
  CHECK(graph.num_parameters() == trainable);
  CHECK(graph.num_state() == state);
  auto optimizer = Optimizer::create(momentum());
  train(model, graph, *optimizer, 1);
  for (const auto& [name, slot] : optimizer->slots())
    CHECK(static_cast<std::int64_t>(slot.size()) == graph.num_parameters());
}

// Written by Cohort 0.1 before models had non-trainable state:
//   train --mode=local --model=mlp --hidden=8 --train_steps=5 --checkpoint_dir=D
//         --save_checkpoint_steps=5   (momentum, the default optimizer)
TEST_CASE("a checkpoint written before non-trainable state existed still loads") {
  const Checkpoint old = read_checkpoint(COHORT_TEST_DATA_DIR "/mlp_hidden8_before_state.safetensors");
  CHECK(old.metadata.at("global_step") == "5");
  Graph graph;
  Model model = mlp(graph, {8});
  graph.initialize(1);
  auto optimizer = Optimizer::create(momentum());
  restore_checkpoint(old, graph, *optimizer);
  for (const Variable& v : graph.variables()) {
    const CheckpointTensor* t = old.find(v.name);
    REQUIRE(t != nullptr);
    CHECK(copy(graph.values(v)) == t->values);
  }
  CHECK(optimizer->iterations() == 5);
  const auto slots = optimizer->slots();
  REQUIRE(slots.size() == 1);
  CHECK(copy(slots[0].second) == old.find("optimizer/" + slots[0].first)->values);
  // It evaluates as the model it was: better than chance after 5 steps is not asked, only
  // finite answers from the restored weights.
  const Tensor images = random_tensor({4, 28, 28, 1}, 1);
  const StepMetrics m = model.evaluate(images, std::vector<std::int32_t>{0, 1, 2, 3});
  CHECK(std::isfinite(m.loss));
}

TEST_CASE("moving averages go through a checkpoint as <variable>/ExponentialMovingAverage") {
  cohort::test::TempDir dir("saver_test");
  Graph graph;
  Model model = resnet(graph, small_resnet());
  graph.initialize(3);
  auto optimizer = Optimizer::create(momentum());
  ExponentialMovingAverage average(0.9);
  average.reset(graph.values());
  for (int step = 0; step < 3; ++step) {
    train(model, graph, *optimizer, 1);
    average.apply(graph.values(), step);
  }
  REQUIRE(copy(average.values()) != copy(graph.values()));

  const std::string path = dir / "model.safetensors";
  Checkpoint written = make_checkpoint(graph, *optimizer);
  add_moving_averages(written, graph, average.values());
  written.metadata["global_step"] = "3";
  write_checkpoint(path, written);
  const Checkpoint back = read_checkpoint(path);
  // One for each trainable variable, of its shape; none for batch norm's moving statistics.
  for (const Variable& v : graph.variables()) {
    const CheckpointTensor* t = back.find(v.name + "/ExponentialMovingAverage");
    CHECK_MESSAGE((t != nullptr) == v.trainable, v.name);
    if (t) CHECK(t->shape == v.shape);
  }

  // A restore for training takes the variables and leaves the averages to restore_moving_averages.
  Graph restored_graph;
  Model restored = resnet(restored_graph, small_resnet());
  auto restored_optimizer = Optimizer::create(momentum());
  restore_checkpoint(back, restored_graph, *restored_optimizer);
  CHECK(copy(restored_graph.values()) == copy(graph.values()));
  std::vector<float> averages(graph.values().size(), -1.0f);
  CHECK(restore_moving_averages(back, restored_graph, averages));
  CHECK(averages == copy(average.values()));

  // For evaluation, each trainable variable may take its average; the state stays the state.
  Graph eval_graph;
  Model eval = resnet(eval_graph, small_resnet());
  std::size_t trainable = 0;
  for (const Variable& v : graph.variables()) trainable += v.trainable;
  CHECK(restore_variables(back, eval_graph, /*moving_averages=*/true) == trainable);
  CHECK(copy(eval_graph.values()) == copy(average.values()));
  CHECK(copy(eval_graph.state()) == copy(graph.state()));
  CHECK(restore_variables(back, eval_graph) == 0);
  CHECK(copy(eval_graph.values()) == copy(graph.values()));

  // A checkpoint written without averages: none restored, the buffer untouched; with
  // moving_averages, each variable loads as it is.
  const Checkpoint plain = make_checkpoint(graph, *optimizer);
  std::fill(averages.begin(), averages.end(), -1.0f);
  CHECK_FALSE(restore_moving_averages(plain, eval_graph, averages));
  CHECK(std::all_of(averages.begin(), averages.end(), [](float a) { return a == -1.0f; }));
  CHECK(restore_variables(plain, eval_graph, true) == 0);
  CHECK(copy(eval_graph.values()) == copy(graph.values()));

  // Averages that do not fit: each named, in one error.
  Checkpoint partial = back;
  const std::string first = graph.variables().front().name + "/ExponentialMovingAverage";
  std::erase_if(partial.tensors, [&](const CheckpointTensor& t) { return t.name == first; });
  CHECK_THROWS_WITH_AS(restore_moving_averages(partial, eval_graph, averages),
                       doctest::Contains((first + " [3, 3, 1, 8] is missing from the checkpoint").c_str()),
                       CheckpointError);
  Checkpoint reshaped = back;
  for (CheckpointTensor& t : reshaped.tensors)
    if (t.name == first) t.shape = {72};
  CHECK_THROWS_WITH_AS(restore_moving_averages(reshaped, eval_graph, averages),
                       doctest::Contains((first + " is [72] in the checkpoint but [3, 3, 1, 8] in the model").c_str()),
                       CheckpointError);
  CHECK_THROWS_AS(restore_variables(reshaped, eval_graph, true), CheckpointError);
  // A variable another framework's file held as integers (read_safetensors passed it over).
  Checkpoint integers = plain;
  const std::string bias = graph.variables().back().name;
  std::erase_if(integers.tensors, [&](const CheckpointTensor& t) { return t.name == bias; });
  integers.passed_over[bias] = "I32";
  CHECK_THROWS_WITH_AS(restore_variables(integers, eval_graph),
                       doctest::Contains((bias + " is of dtype I32 in the file, not a floating-point weight").c_str()),
                       CheckpointError);
  CHECK_THROWS_WITH_AS(add_moving_averages(written, graph, std::vector<float>(3)),
                       doctest::Contains("an average of 3 values for a graph of"), InvalidArgument);
  // An average of a variable the model lacks is no variable of it either.
  Checkpoint stray = back;
  stray.tensors.push_back({"nothing/ExponentialMovingAverage", {1}, {0.0f}});
  CHECK_THROWS_WITH_AS(restore_variables(stray, eval_graph),
                       doctest::Contains("nothing/ExponentialMovingAverage [1] is in the checkpoint but not in the model"),
                       CheckpointError);
  // With its variable there too, the variable alone is named: the average would only repeat it.
  stray.tensors.push_back({"nothing", {1}, {0.0f}});
  try {
    restore_variables(stray, eval_graph);
    FAIL("a variable the model lacks was restored");
  } catch (const CheckpointError& e) {
    const std::string what = e.what();
    CHECK(what.find("nothing [1] is in the checkpoint but not in the model") != std::string::npos);
    CHECK(what.find("ExponentialMovingAverage") == std::string::npos);
    CHECK(what.find("state_dict") == std::string::npos);  // its names are Cohort's
  }
  // A file of PyTorch's names: what to do is said once, after every name.
  Checkpoint torch_names;
  for (const CheckpointTensor& t : plain.tensors) {
    CheckpointTensor renamed = t;
    std::replace(renamed.name.begin(), renamed.name.end(), '/', '.');
    torch_names.tensors.push_back(renamed);
  }
  CHECK_THROWS_WITH_AS(restore_variables(torch_names, eval_graph),
                       doctest::Contains(("(its tensors are named as a PyTorch state_dict's, '" +
                                          torch_names.tensors.front().name + "': save each under the name of "
                                          "the model's variable, as 'conv1/kernel', in Cohort's layout")
                                             .c_str()),
                       CheckpointError);
}
