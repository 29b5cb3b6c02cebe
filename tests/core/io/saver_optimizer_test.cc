// Tests of core/io/saver.h across optimizers: a checkpoint records the optimizer that wrote it,
// restoring it into another one is refused in one line (one of another model as such), and
// --reset_optimizer restores the variables and starts the optimizer afresh.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "cohort/core/base/flags.h"
#include "cohort/core/io/saver.h"
#include "cohort/core/nn/gradient_check.h"
#include "cohort/core/nn/models.h"
#include "cohort/core/nn/threads.h"
#include "support/stderr_capture.h"
#include "support/temp_dir.h"

namespace cohort {
COHORT_DECLARE_bool(reset_optimizer);
}  // namespace cohort

using namespace cohort;

namespace {

const bool kOneThread = (set_intra_op_threads(1), true);

std::vector<float> copy(std::span<const float> values) { return {values.begin(), values.end()}; }

std::unique_ptr<Optimizer> optimizer_named(const std::string& name) {
  OptimizerOptions options;
  options.name = name;
  options.learning_rate.base = 0.01;
  return Optimizer::create(options);
}

void train(Model& model, Graph& graph, Optimizer& optimizer, int steps) {
  std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()));
  for (int step = 0; step < steps; ++step) {
    const Tensor images = random_tensor({4, 28, 28, 1}, 10 + step);
    const std::vector<std::int32_t> labels = {0, 1, 2, 3};
    model.train_step(images, labels, grads,
                     {.training = true, .seed = static_cast<std::uint64_t>(step)});
    optimizer.apply(graph.values(), grads, step);
  }
}

bool all_finite(std::span<const float> values) {
  return std::all_of(values.begin(), values.end(), [](float v) { return std::isfinite(v); });
}

// A small mlp trained 3 steps with Adam, written to a file and read back.
struct AdamCheckpoint {
  test::TempDir dir{"saver_optimizer"};
  Graph graph;
  Model model = mlp(graph, {8});
  Checkpoint checkpoint;

  AdamCheckpoint() {
    graph.initialize(3);
    auto adam = optimizer_named("adam");
    train(model, graph, *adam, 3);
    Checkpoint made = make_checkpoint(graph, *adam);
    made.metadata["global_step"] = "3";
    write_checkpoint(dir / "adam.safetensors", made);
    checkpoint = read_checkpoint(dir / "adam.safetensors");
  }
};

}  // namespace

TEST_CASE("a checkpoint records the optimizer that wrote it") {
  AdamCheckpoint a;
  CHECK(a.checkpoint.metadata.at("optimizer") == "adam");
  CHECK(a.checkpoint.count("optimizer_iterations") == 3);
  CHECK(a.checkpoint.find("optimizer/adam_m") != nullptr);

  // The same optimizer restores everything, as before.
  Graph graph;
  mlp(graph, {8});
  graph.initialize(99);
  auto adam = optimizer_named("adam");
  restore_checkpoint(a.checkpoint, graph, *adam, {});
  CHECK(copy(graph.values()) == copy(a.graph.values()));
  CHECK(adam->iterations() == 3);
  CHECK(copy(adam->slots()[0].second) == a.checkpoint.find("optimizer/adam_m")->values);
}

TEST_CASE("restoring into another optimizer is refused in one line, touching nothing") {
  AdamCheckpoint a;
  Graph graph;
  mlp(graph, {8});
  graph.initialize(99);
  const std::vector<float> before = copy(graph.values());
  auto momentum = optimizer_named("momentum");
  std::string message;
  try {
    restore_checkpoint(a.checkpoint, graph, *momentum, {});
  } catch (const InvalidArgument& e) {
    message = e.what();
  }
  INFO(message);
  CHECK(message.find("written by optimizer 'adam'") != std::string::npos);
  CHECK(message.find("the optimizer is 'momentum'") != std::string::npos);
  CHECK(message.find("--reset_optimizer") != std::string::npos);
  CHECK(message.find('\n') == std::string::npos);
  CHECK(copy(graph.values()) == before);
  CHECK(momentum->iterations() == 0);
  // adamw keeps the same slots but is another optimizer: refused too.
  auto adamw = optimizer_named("adamw");
  CHECK_THROWS_AS(restore_checkpoint(a.checkpoint, graph, *adamw, {}), InvalidArgument);
}

TEST_CASE("a checkpoint of another model is refused as such, whatever optimizer wrote it") {
  // --reset_optimizer would not help: the model's shapes are named, not the optimizer.
  AdamCheckpoint a;
  Graph graph;
  mlp(graph, {16});
  graph.initialize(99);
  auto momentum = optimizer_named("momentum");
  CHECK_THROWS_WITH_AS(restore_checkpoint(a.checkpoint, graph, *momentum, {}),
                       doctest::Contains("checkpoint does not fit the model: "), CheckpointError);
}

TEST_CASE("reset_optimizer restores the variables and starts the optimizer afresh") {
  AdamCheckpoint a;
  Graph graph;
  Model model = mlp(graph, {8});
  graph.initialize(99);
  auto momentum = optimizer_named("momentum");
  train(model, graph, *momentum, 2);  // state the reset must clear
  REQUIRE(momentum->iterations() == 2);

  std::vector<std::string> lines;
  SUBCASE("asked for in the options") {
    test::StderrCapture err(a.dir / "stderr.txt");
    restore_checkpoint(a.checkpoint, graph, *momentum, {.reset_optimizer = true});
    lines = err.lines();
  }
  SUBCASE("asked for by the flag, the default") {
    const bool saved = FLAGS_reset_optimizer;
    CHECK_FALSE(restore_options_from_flags().reset_optimizer);
    FLAGS_reset_optimizer = true;
    CHECK(restore_options_from_flags().reset_optimizer);
    test::StderrCapture err(a.dir / "stderr.txt");
    restore_checkpoint(a.checkpoint, graph, *momentum);
    lines = err.lines();
    FLAGS_reset_optimizer = saved;
  }
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find("--reset_optimizer: restored the variables only") != std::string::npos);
  CHECK(lines[0].find("optimizer 'momentum' starts afresh") != std::string::npos);
  CHECK(lines[0].find("optimizer 'adam' state is dropped") != std::string::npos);
  CHECK(copy(graph.values()) == copy(a.graph.values()));
  CHECK(momentum->iterations() == 0);
  for (const auto& [name, slot] : momentum->slots()) {
    CHECK(static_cast<std::int64_t>(slot.size()) == graph.num_parameters());
    CHECK(std::all_of(slot.begin(), slot.end(), [](float v) { return v == 0.0f; }));
  }
  // It trains on exactly as a fresh momentum optimizer from the restored variables would.
  Graph fresh_graph;
  Model fresh_model = mlp(fresh_graph, {8});
  fresh_graph.initialize(99);
  std::copy(a.graph.values().begin(), a.graph.values().end(), fresh_graph.values().begin());
  auto fresh = optimizer_named("momentum");
  train(model, graph, *momentum, 2);
  train(fresh_model, fresh_graph, *fresh, 2);
  CHECK(copy(graph.values()) == copy(fresh_graph.values()));
  CHECK(all_finite(graph.values()));
}

TEST_CASE("a checkpoint that does not name its optimizer restores as it always did") {
  AdamCheckpoint a;
  a.checkpoint.metadata.erase("optimizer");
  Graph graph;
  mlp(graph, {8});
  graph.initialize(99);
  auto momentum = optimizer_named("momentum");
  restore_checkpoint(a.checkpoint, graph, *momentum, {});
  CHECK(copy(graph.values()) == copy(a.graph.values()));
  CHECK(momentum->iterations() == 3);  // the count carries over; the momentum slot starts at zero
  const auto slot = momentum->slots()[0].second;
  CHECK(std::all_of(slot.begin(), slot.end(), [](float v) { return v == 0.0f; }));
}

TEST_CASE("an optimizer_iterations that is not a count is refused, never turned into NaN") {
  AdamCheckpoint a;
  Graph graph;
  Model model = mlp(graph, {8});
  graph.initialize(99);
  auto adam = optimizer_named("adam");
  for (const std::string bad : {"-5", "9223372036854775807", "abc", "12abc", ""}) {
    INFO(bad);
    a.checkpoint.metadata["optimizer_iterations"] = bad;
    CHECK_THROWS_WITH_AS(restore_checkpoint(a.checkpoint, graph, *adam, {}),
                         doctest::Contains(("optimizer_iterations '" + bad + "'").c_str()),
                         CheckpointError);
    CHECK(adam->iterations() == 0);
  }
  // The largest count is usable: Adam's bias correction stays finite.
  a.checkpoint.metadata["optimizer_iterations"] = std::to_string(kMaxCheckpointCount);
  restore_checkpoint(a.checkpoint, graph, *adam, {});
  CHECK(adam->iterations() == kMaxCheckpointCount);
  train(model, graph, *adam, 1);
  CHECK(all_finite(graph.values()));
}
