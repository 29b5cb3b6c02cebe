#pragma once
// A small local-mode training setup for driving hooks through a real MonitoredSession, the
// session options the hook tests start from, and a reader of the summary writer's metrics.csv.

#include <cstdint>
#include <fstream>
#include <sstream>
#include <memory>
#include <string>
#include <vector>

#include "cohort/core/nn/data/dataset.h"
#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/models.h"
#include "cohort/core/nn/optimizer.h"
#include "cohort/core/train/session.h"
#include "cohort/core/train/trainer.h"
#include "support/temp_dir.h"

namespace cohort::test {

constexpr std::int64_t kBatch = 8;

inline TrainerOptions trainer_options(Mode mode = Mode::kLocal) {
  TrainerOptions options;
  options.replication.mode = mode;
  options.replication.wait_timeout = std::chrono::seconds(60);
  options.batch_size = kBatch;
  options.seed = 3;
  options.model_name = "mlp";
  return options;
}

inline std::unique_ptr<Optimizer> sgd(double learning_rate = 0.05) {
  OptimizerOptions o;
  o.learning_rate.base = learning_rate;
  return Optimizer::create(o);
}

/// A tiny MLP on synthetic data in --mode=local: a step takes well under a millisecond.
struct LocalTraining {
  Graph graph;
  Trainer trainer{nullptr, graph, [](Graph& g) { return mlp(g, {8}); }, data::synthetic(128, 5), sgd(),
                  trainer_options()};
};

/// Session options running `hooks`, with the process's signal handlers left alone.
inline MonitoredSessionOptions with_hooks(HookList hooks) {
  MonitoredSessionOptions options;
  options.hooks = std::move(hooks);
  options.stop_on_signals = false;
  return options;
}

/// Runs until the session stops or `max_steps` runs; returns the runs made.
inline int train(MonitoredSession& session, int max_steps = 1000) {
  int runs = 0;
  while (!session.should_stop() && runs < max_steps) {
    session.run();
    ++runs;
  }
  return runs;
}

/// A row of metrics.csv (SummaryWriter's copy of the scalars).
struct Row {
  std::int64_t step;
  std::string tag;
  double value;
};
/// Every row of the metrics.csv at `path`.
inline std::vector<Row> read_csv(const std::string& path) {
  std::ifstream in(path);
  std::vector<Row> rows;
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string step, wall, tag, value;
    std::getline(fields, step, ',');
    std::getline(fields, wall, ',');
    std::getline(fields, tag, ',');
    std::getline(fields, value, ',');
    rows.push_back({std::stoll(step), tag, std::stod(value)});
  }
  return rows;
}

/// The steps at which `tag` was written.
inline std::vector<std::int64_t> steps_of(const std::vector<Row>& rows, const std::string& tag) {
  std::vector<std::int64_t> steps;
  for (const Row& row : rows)
    if (row.tag == tag) steps.push_back(row.step);
  return steps;
}

}  // namespace cohort::test
