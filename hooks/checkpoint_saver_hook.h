#pragma once
// Periodic checkpoints on the chief (TensorFlow's tf.train.CheckpointSaverHook).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cohort/core/train/session.h"
#include "cohort/hooks/second_or_step_timer.h"

namespace cohort {

/// Called around each checkpoint the CheckpointSaverHook writes (TensorFlow's
/// CheckpointSaverListener), e.g. to evaluate or export after a save. Override what you need.
/// Called on the chief's main thread only.
class CheckpointSaverListener {
 public:
  virtual ~CheckpointSaverListener() = default;
  /// Once, when the session exists (on the chief).
  virtual void begin() {}
  virtual void before_save(MonitoredSession& /*session*/, std::int64_t /*global_step*/) {}
  /// After the checkpoint at `path` is written. Return true to request a stop of training
  /// (TensorFlow's rule); a save at the start takes effect after the first step, one at end()
  /// has nothing left to stop.
  virtual bool after_save(MonitoredSession& /*session*/, std::int64_t /*global_step*/, const std::string& /*path*/) {
    return false;
  }
  /// Once, at the end of training, after the final save.
  virtual void end(MonitoredSession& /*session*/, std::int64_t /*global_step*/) {}
};

struct CheckpointSaverHookOptions {
  /// Where to save (TensorFlow's first argument); empty: the session's checkpoint_dir. A
  /// directory of its own is locked for the session as the session's is, and keeps the
  /// session's keep_checkpoint_max (MonitoredSession::save_checkpoint); the session still
  /// restores from its checkpoint_dir alone.
  std::string checkpoint_dir{};
  /// Save every this many global steps, or every this many seconds: exactly one positive.
  std::int64_t every_steps = 0;
  double every_secs = 0;
  std::vector<std::shared_ptr<CheckpointSaverListener>> listeners{};
};

/// Writes checkpoints through MonitoredSession::save_checkpoint() into its checkpoint_dir, or
/// the session's: when the session starts (the step-0 checkpoint TensorFlow writes), every
/// `every_steps` global steps or `every_secs` seconds after that, and at end() unless the last
/// save was at the final step. A session that restored a checkpoint from the same directory does
/// not save it again at start.
///
///     auto saver = std::make_shared<cohort::CheckpointSaverHook>(
///         cohort::CheckpointSaverHookOptions{.every_steps = 1000});
///     session_options.chief_only_hooks.push_back(saver);
///
/// Chief-only by nature: on other workers it does nothing (and calls no listener). Throws
/// InvalidArgument at after_create_session when neither it nor the session has a
/// checkpoint_dir. Not thread-safe (used by the session).
class CheckpointSaverHook : public SessionRunHook {
 public:
  /// Throws InvalidArgument unless exactly one of every_steps and every_secs is positive.
  explicit CheckpointSaverHook(CheckpointSaverHookOptions options);

  void begin() override;
  void after_create_session(MonitoredSession& session) override;
  SessionRunArgs before_run(RunContext& context) override;
  void after_run(RunContext& context, const SessionRunValues& values) override;
  void end(MonitoredSession& session) override;

  /// Checkpoints written so far, and the path of the last one.
  std::int64_t saves() const { return saves_; }
  const std::string& last_path() const { return last_path_; }

 private:
  // Saves at `step`; true when a listener asks to stop.
  bool save(MonitoredSession& session, std::int64_t step);

  CheckpointSaverHookOptions options_;
  SecondOrStepTimer timer_;
  bool active_ = false;
  bool stop_pending_ = false;
  std::int64_t saves_ = 0;
  std::string last_path_;
};

}  // namespace cohort
