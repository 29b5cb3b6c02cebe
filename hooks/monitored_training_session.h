#pragma once
// The session factory with TensorFlow's default hooks (tf.train.MonitoredTrainingSession).

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "cohort/core/train/session.h"
#include "cohort/core/train/trainer.h"

namespace cohort {

struct MonitoredTrainingSessionOptions {
  std::string master{};  ///< the server's target (Server::target()); empty in local mode
  bool is_chief = true;
  /// Restore from and save checkpoints here (the chief); summaries go here too. Empty: no
  /// checkpoints, no summaries, no step counter.
  std::string checkpoint_dir{};
  HookList hooks{};             ///< run on every worker
  HookList chief_only_hooks{};  ///< run on the chief only
  /// Checkpoint cadence: every save_checkpoint_steps global steps when that is > 0 (it takes
  /// precedence), else every save_checkpoint_secs seconds when that is > 0, else no periodic
  /// checkpoints (the session still restores from checkpoint_dir).
  std::int64_t save_checkpoint_secs = 600, save_checkpoint_steps = 0;
  /// Summary cadence, the same rule: steps when > 0, else seconds when > 0, else none.
  std::int64_t save_summaries_steps = 100, save_summaries_secs = 0;
  /// StepCounterHook every this many global steps; 0: none.
  std::int64_t log_step_count_steps = 100;
  /// Non-chief workers wait at most this long for the chief to initialise the parameters.
  std::chrono::seconds max_wait_secs{600};
  SessionConfig config{};
  int keep_checkpoint_max = 5;
  /// Stop cleanly at the end of the step on SIGTERM or SIGUSR1.
  bool stop_on_signals = true;
};

/// Creates a MonitoredSession with TensorFlow's default hooks. On the chief with a
/// checkpoint_dir, after `chief_only_hooks` come a StepCounterHook (log_step_count_steps > 0), a
/// SummarySaverHook writing into checkpoint_dir and a CheckpointSaverHook, each when its cadence
/// is set; non-chief workers run only `hooks`. The user's `hooks` run before the chief-only ones
/// at every step.
///
///     auto session = cohort::MonitoredTrainingSession(trainer, {
///         .master = server.target(), .is_chief = server.is_chief(),
///         .checkpoint_dir = FLAGS_checkpoint_dir,
///         .hooks = {cohort::StopAtStepHook::last(FLAGS_train_steps)}});
///     while (!session->should_stop()) session->run();
///
/// Collective as MonitoredSession's constructor is (over the workers and ps tasks). Throws
/// InvalidArgument for negative cadences.
std::unique_ptr<MonitoredSession> MonitoredTrainingSession(Trainer& trainer, MonitoredTrainingSessionOptions options);

}  // namespace cohort
