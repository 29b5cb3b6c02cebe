#pragma once
// Step timelines for Perfetto / chrome://tracing (TensorFlow's tf.train.ProfilerHook).

#include <chrono>
#include <cstdint>
#include <deque>
#include <string>

#include "cohort/core/train/session.h"
#include "cohort/hooks/second_or_step_timer.h"

namespace cohort {

struct ProfilerHookOptions {
  /// Record the phases of one step every this many global steps.
  std::int64_t every_n_steps = 100;
  /// The trace file; each worker inserts its index before the extension
  /// ("trace.json" -> "trace.worker1.json"). Parent directories are created.
  std::string output_file = "timeline.json";
  /// Keep the phases of at most this many recorded steps (the latest).
  std::int64_t max_steps = 1000;
};

/// Records when the phases of a step ran (MonitoredSession::last_trace(): "pull",
/// "forward_backward", "push", "wait"; a second "wait" before the pull where the step began by
/// waiting, as ssp mode's staleness bound makes it) and writes them as a Chrome trace-event JSON file that
/// Perfetto (ui.perfetto.dev) and chrome://tracing load:
///
///     {"displayTimeUnit": "ms", "traceEvents": [
///       {"name": "pull", "cat": "step", "ph": "X", "pid": 0, "tid": 1,
///        "ts": 1520.3, "dur": 88.1, "args": {"global_step": 200}}, ...]}
///
/// pid is the worker index, tid one track per phase kind (pull 1, forward_backward 2, push 3,
/// wait 4; others from 5), with process_name / thread_name metadata events; ts and dur are
/// microseconds since this worker's session started (so files of different workers are not
/// aligned to a common clock). The first run is not recorded (it includes warm-up) but starts
/// the count, as in TensorFlow: a step is recorded every `every_n_steps` global steps after it.
///
/// Every worker that has the hook writes its own file (put it in `hooks` to profile all
/// workers, in `chief_only_hooks` for the chief alone). The file is written when the session is
/// created (an empty trace: a file that cannot be written is found then, not after the run),
/// rewritten at end() and at most every 30 seconds while training, and by the destructor where
/// an error skipped end() (the failed runs are the ones worth profiling), each time through a
/// temporary file and a rename, so it is always complete JSON.
///
///     session_options.hooks.push_back(std::make_shared<cohort::ProfilerHook>(
///         cohort::ProfilerHookOptions{.every_n_steps = 50, .output_file = "logs/trace.json"}));
///
/// Throws InvalidArgument at construction for bad options; Error when the file cannot be
/// written. Not thread-safe (used by the session).
class ProfilerHook : public SessionRunHook {
 public:
  explicit ProfilerHook(ProfilerHookOptions options);
  ~ProfilerHook() override;
  ProfilerHook(const ProfilerHook&) = delete;
  ProfilerHook& operator=(const ProfilerHook&) = delete;

  void begin() override;
  void after_create_session(MonitoredSession& session) override;
  SessionRunArgs before_run(RunContext& context) override;
  void after_run(RunContext& context, const SessionRunValues& values) override;
  void end(MonitoredSession& session) override;

  /// This worker's trace file (known after after_create_session).
  const std::string& path() const { return path_; }
  /// Steps recorded so far (including those dropped beyond max_steps).
  std::int64_t recorded_steps() const { return recorded_; }
  /// Writes the trace file now.
  void write();

 private:
  ProfilerHookOptions options_;
  SecondOrStepTimer timer_;
  int worker_ = 0;
  std::string path_;
  bool first_run_ = true;
  std::deque<StepTrace> traces_;
  std::int64_t recorded_ = 0;
  std::int64_t written_ = 0;  // recorded_ at the last write()
  std::chrono::steady_clock::time_point last_write_{};
};

}  // namespace cohort
