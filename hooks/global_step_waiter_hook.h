#pragma once
// Holds a worker back until the job has trained a while (TensorFlow's GlobalStepWaiterHook).

#include <chrono>
#include <cstdint>

#include "cohort/core/train/session.h"

namespace cohort {

/// Before this worker's first step, waits (sleeping, polling every `poll`) until the global
/// step reaches `wait_until_step`. TensorFlow uses it to start non-chief workers gradually, so
/// that early updates come from few workers:
///
///     if (!server.is_chief())
///       session_options.hooks.push_back(std::make_shared<cohort::GlobalStepWaiterHook>(100 * task));
///
/// Only async mode waits: in local, sync and allreduce modes the global step cannot advance
/// while this worker holds back (it would wait for itself), nor in ssp mode further than the
/// staleness bound lets the others run ahead of it, so there the hook returns at once (in ssp
/// mode saying so on stderr). The wait also ends when the chief stops training or a stop signal
/// arrives that the session stops for (the first step then stops the session). Throws Error when
/// the step has not arrived within `timeout` (zero: wait forever). Blocking; not collective; not
/// thread-safe (used by the session).
class GlobalStepWaiterHook : public SessionRunHook {
 public:
  explicit GlobalStepWaiterHook(std::int64_t wait_until_step,
                                std::chrono::milliseconds timeout = std::chrono::minutes(10),
                                std::chrono::milliseconds poll = std::chrono::milliseconds(100));

  void begin() override;
  SessionRunArgs before_run(RunContext& context) override;

  /// True once the wait is over (or was skipped).
  bool started() const { return started_; }

 private:
  std::int64_t wait_until_step_;
  std::chrono::milliseconds timeout_;
  std::chrono::milliseconds poll_;
  bool started_ = false;
};

}  // namespace cohort
