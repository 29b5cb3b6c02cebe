#pragma once
// Prints fetched values as training goes (TensorFlow's tf.train.LoggingTensorHook).

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

#include "cohort/core/train/session.h"
#include "cohort/hooks/second_or_step_timer.h"

namespace cohort {

struct LoggingTensorHookOptions {
  /// The fetch names to print, in this order (e.g. "loss", "accuracy", "global_step").
  std::vector<std::string> tensors{};
  /// Print every this many runs of this session, or every this many seconds: exactly one
  /// positive, or both zero with `at_end` (print only at the end).
  std::int64_t every_n_iter = 0;
  double every_n_secs = 0;
  /// Also print the last step's values at end().
  bool at_end = false;
  /// Turns the values (by name) into the line to print; empty: "loss = 0.41, accuracy = 0.87"
  /// followed by " (0.230 sec)", the time since the previous line, when there is one.
  std::function<std::string(const std::map<std::string, double>&)> formatter{};
  /// Where lines go; null: std::cout. Not owned: must outlive the hook.
  std::ostream* out = nullptr;
};

/// Prints the values of `tensors`, one line each time it triggers, on this worker:
///
///     loss = 0.412345, accuracy = 0.875 (0.230 sec)
///
///     session_options.hooks.push_back(std::make_shared<cohort::LoggingTensorHook>(
///         cohort::LoggingTensorHookOptions{.tensors = {"loss", "accuracy"}, .every_n_iter = 100}));
///
/// It counts runs of this worker's session, as TensorFlow does, not global steps. With `at_end`
/// it fetches the tensors every step so it can print the last values at end(): TensorFlow runs
/// them once more instead, which a Cohort session cannot do after training. Throws
/// InvalidArgument at construction for no tensors or a bad cadence. Not thread-safe (used by
/// the session).
class LoggingTensorHook : public SessionRunHook {
 public:
  explicit LoggingTensorHook(LoggingTensorHookOptions options);

  void begin() override;
  SessionRunArgs before_run(RunContext& context) override;
  void after_run(RunContext& context, const SessionRunValues& values) override;
  void end(MonitoredSession& session) override;

 private:
  void log(const std::map<std::string, double>& values);

  LoggingTensorHookOptions options_;
  SecondOrStepTimer timer_;
  bool only_at_end_;
  std::int64_t iterations_ = 0;
  bool should_trigger_ = false;
  std::map<std::string, double> last_;
};

}  // namespace cohort
