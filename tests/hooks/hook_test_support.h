#pragma once
// A small local-mode training setup for driving hooks through a real MonitoredSession, and the
// session options the hook tests start from.

#include <cstdint>
#include <memory>
#include <string>

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

}  // namespace cohort::test
