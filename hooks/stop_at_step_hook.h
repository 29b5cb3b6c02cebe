#pragma once
// Stops training at a global step (TensorFlow's tf.train.StopAtStepHook).

#include <cstdint>
#include <memory>
#include <optional>

#include "cohort/core/train/session.h"

namespace cohort {

/// Requests a stop once the fetched "global_step" (the step after this run) reaches the last
/// step: either given (`last`) or counted from the global step the session started at (`num`,
/// e.g. a restored checkpoint's step plus `num_steps`). A session that starts at or past the
/// last step stops before its first step (TensorFlow's runs one): a finished run restarted from
/// its checkpoint trains no further.
///
///     session_options.hooks.push_back(cohort::StopAtStepHook::last(2000));
///
/// Put it in `hooks` (every worker): in async modes each worker stops on its own once it sees
/// the step; the chief's stop reaches the others anyway. Not thread-safe (used by the session).
class StopAtStepHook : public SessionRunHook {
 public:
  /// Stops after global step `last_step`. Throws InvalidArgument if it is negative.
  static std::shared_ptr<StopAtStepHook> last(std::int64_t last_step);
  /// Stops `num_steps` global steps after the step at after_create_session(). Throws
  /// InvalidArgument if it is negative.
  static std::shared_ptr<StopAtStepHook> num(std::int64_t num_steps);
  /// Stops at the first global step by which the whole training, resumes included, has taken
  /// `examples` examples (Trainer::examples_at): epochs counted by examples, so that a job
  /// resumed with other workers or another batch size still trains `examples` in all. Throws
  /// InvalidArgument if it is below 1.
  static std::shared_ptr<StopAtStepHook> after_examples(std::int64_t examples);

  void after_create_session(MonitoredSession& session) override;
  SessionRunArgs before_run(RunContext& context) override;
  void after_run(RunContext& context, const SessionRunValues& values) override;

  /// The step training stops at; for num() and after_examples() known once the session exists.
  std::optional<std::int64_t> last_step() const { return last_step_; }

 private:
  StopAtStepHook(std::optional<std::int64_t> last_step, std::int64_t num_steps, std::int64_t examples = 0);

  std::optional<std::int64_t> last_step_;
  std::int64_t examples_ = 0;  // after_examples()
  std::int64_t num_steps_;
};

}  // namespace cohort
