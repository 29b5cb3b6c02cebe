#pragma once
// Training speed, and which worker holds the job back (TensorFlow's tf.train.StepCounterHook).

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <vector>

#include "cohort/core/train/session.h"
#include "cohort/hooks/second_or_step_timer.h"

namespace cohort {

struct StepCounterHookOptions {
  /// Report every this many global steps, or every this many seconds: one of them positive
  /// (`{.every_n_secs = 10}`), or neither for every 100 steps; both positive is refused.
  std::int64_t every_n_steps = 0;
  double every_n_secs = 0;
  /// Where lines go; null: std::cout. Not owned: must outlive the hook.
  std::ostream* out = nullptr;
};

/// Prints the global step rate and the whole job's example rate (images, texts, rows, ...) since
/// the previous report:
///
///     global_step/sec: 123.4, examples/sec: 7890
///
/// (examples per global step as in SummarySaverHook). On the chief, each report is followed by a
/// straggler line whenever new per-worker step times have arrived
/// (MonitoredSession::worker_step_times(), shared every step_time_every_steps steps):
///
///     stragglers: slowest worker 1 at 0.0123 s/step, fastest worker 0 at 0.0101 s/step (1.22x)
///
///     session_options.chief_only_hooks.push_back(std::make_shared<cohort::StepCounterHook>(
///         cohort::StepCounterHookOptions{.every_n_steps = 100}));
///
/// Like TensorFlow it also warns (once, on stderr) when the global step does not advance between
/// runs. Not collective: worker_step_times() only reads what the session gathered. Throws
/// InvalidArgument at construction for a bad cadence. Not thread-safe (used by the session).
class StepCounterHook : public SessionRunHook {
 public:
  explicit StepCounterHook(StepCounterHookOptions options = {});

  void begin() override;
  SessionRunArgs before_run(RunContext& context) override;
  void after_run(RunContext& context, const SessionRunValues& values) override;

  /// The rates of the last report, if one was made.
  std::optional<double> steps_per_sec() const { return steps_per_sec_; }
  std::optional<double> examples_per_sec() const { return examples_per_sec_; }

 private:
  StepCounterHookOptions options_;
  SecondOrStepTimer timer_;
  std::optional<std::int64_t> last_global_step_;
  bool warned_ = false;
  std::vector<double> reported_times_;
  std::optional<double> steps_per_sec_, examples_per_sec_;
};

}  // namespace cohort
