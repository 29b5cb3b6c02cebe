#pragma once
// Training curves for TensorBoard (TensorFlow's tf.train.SummarySaverHook).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cohort/core/train/session.h"
#include "cohort/hooks/second_or_step_timer.h"

namespace cohort {

class SummaryWriter;

struct SummarySaverHookOptions {
  /// Write every this many global steps, or every this many seconds: exactly one positive.
  std::int64_t every_steps = 0;
  double every_secs = 0;
  /// Where the event file and metrics.csv go (MonitoredTrainingSession uses checkpoint_dir).
  std::string output_dir{};
  /// At each write, also a histogram of every variable's values (trainable ones and layer state
  /// such as batch norm's moving statistics) under the variable's name, as a TensorFlow program
  /// gets from tf.summary.histogram(v.name, v) for each variable. In the ps modes the chief
  /// first fetches the current parameters from the ps tasks (as a checkpoint does).
  bool histograms = false;
};

/// Writes the scalars "loss", each of the model's metrics ("accuracy" for a classifier, "mse",
/// ...), "learning_rate" of the current step, "global_step/sec" and "examples/sec" to a
/// SummaryWriter in `output_dir`: at the first step, then every `every_steps` global steps or
/// `every_secs` seconds. The rates are the whole job's since the previous write: the global-step
/// delta over the time (the chart TensorFlow's StepCounterHook writes), and that times the
/// examples behind one global step (this worker's batch, times the workers a step aggregates in
/// sync and allreduce modes); both are missing from the first write. The
/// writer is flushed after each write and at end(). With `histograms`, each write also records
/// a histogram of every variable. At a session's first step the hook also
/// writes a session start (SummaryWriter::add_session_start), as TensorFlow's does, so that
/// TensorBoard drops what a run restarted from an earlier checkpoint overwrites.
///
///     session_options.chief_only_hooks.push_back(std::make_shared<cohort::SummarySaverHook>(
///         cohort::SummarySaverHookOptions{.every_steps = 100, .output_dir = "logs"}));
///
/// Only the chief writes files: on other workers the hook does nothing. Throws InvalidArgument
/// at construction for a bad cadence or an empty output_dir; Error from the writer when a file
/// cannot be written. Not thread-safe (used by the session).
class SummarySaverHook : public SessionRunHook {
 public:
  explicit SummarySaverHook(SummarySaverHookOptions options);
  ~SummarySaverHook() override;

  void after_create_session(MonitoredSession& session) override;
  SessionRunArgs before_run(RunContext& context) override;
  void after_run(RunContext& context, const SessionRunValues& values) override;
  void end(MonitoredSession& session) override;

  const SummarySaverHookOptions& options() const { return options_; }
  /// How many times it has written (each write is one event with every scalar).
  std::int64_t writes() const { return writes_; }
  /// The latest session's event file (the chief's, from its first step on).
  const std::string& event_file() const { return event_file_; }

 private:
  void write_histograms(Trainer& trainer, std::int64_t step);

  SummarySaverHookOptions options_;
  SecondOrStepTimer timer_;
  std::unique_ptr<SummaryWriter> writer_;  // a session's, from its first write to its end
  std::string event_file_;
  std::vector<std::string> metrics_;  // the model's metric names
  std::int64_t writes_ = 0;
  bool chief_ = false;    // this session's task is the chief, which alone writes
  bool started_ = false;  // the session start is written (at its first step)
};

}  // namespace cohort
