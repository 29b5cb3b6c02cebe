#pragma once
// A small local-mode training setup for driving hooks through a real MonitoredSession, and a
// temporary directory that removes itself.

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <unistd.h>

#include "cohort/core/nn/data/dataset.h"
#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/models.h"
#include "cohort/core/nn/optimizer.h"
#include "cohort/core/train/session.h"
#include "cohort/core/train/trainer.h"

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

/// A fresh directory under the system's temp directory, removed (with its contents) at scope end.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    static std::atomic<int> counter{0};
    path_ = (std::filesystem::temp_directory_path() /
             ("cohort_hooks_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++)))
                .string();
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

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
