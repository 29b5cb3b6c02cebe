#pragma once
// The session factory with TensorFlow's default hooks (tf.train.MonitoredTrainingSession).

#include <memory>

#include "cohort/core/train/session.h"
#include "cohort/core/train/trainer.h"

namespace cohort {

/// Creates a MonitoredSession from `options`, adding TensorFlow's default hooks for the cadences
/// SessionOptions marks [default hooks]: on the chief, after `chief_only_hooks` come a
/// StepCounterHook (log_step_count_steps > 0) and a SummarySaverHook writing into summary_dir
/// (or checkpoint_dir) when either directory is set, and a CheckpointSaverHook when
/// checkpoint_dir is, each when its cadence is set; other replicas run only `hooks`. The user's
/// `hooks` run before the chief-only ones at every step.
///
///     auto session = cohort::MonitoredTrainingSession(trainer, {
///         .master = server.target(), .is_chief = server.is_chief(),
///         .checkpoint_dir = FLAGS_checkpoint_dir,
///         .hooks = {cohort::StopAtStepHook::last(FLAGS_train_steps)}});
///     while (!session->should_stop()) session->run();
///
/// Collective as MonitoredSession's constructor is (over the replicas and ps tasks). Throws
/// InvalidArgument for negative cadences, and what MonitoredSession throws.
std::unique_ptr<MonitoredSession> MonitoredTrainingSession(Trainer& trainer, SessionOptions options);

}  // namespace cohort
