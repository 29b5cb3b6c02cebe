#pragma once
// The trigger that most hooks share: fire every N global steps or every N seconds.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace cohort {

/// Fires every `every_steps` global steps or every `every_secs` seconds (exactly one of the two
/// is positive), TensorFlow's tf.train.SecondOrStepTimer. A timer that has never fired fires at
/// once; it never fires twice for the same step.
///
///     SecondOrStepTimer timer(100, 0, "MyHook");            // every 100 steps
///     if (timer.should_trigger_for_step(step)) {
///       auto elapsed = timer.update_last_triggered_step(step);  // nullopt the first time
///       ...
///     }
///
/// Not thread-safe; not collective. Time is the steady clock.
class SecondOrStepTimer {
 public:
  /// What passed since the previous trigger.
  struct Elapsed {
    double seconds = 0;
    std::int64_t steps = 0;
  };

  /// Throws InvalidArgument, naming `owner` and both values, unless exactly one of `every_steps`
  /// and `every_secs` is positive (and neither is negative).
  SecondOrStepTimer(std::int64_t every_steps, double every_secs, const std::string& owner = "SecondOrStepTimer");

  /// Forgets the last trigger: the next check fires.
  void reset();
  /// True if the timer never fired, or `step` differs from the last triggered step and is at
  /// least `every_steps` past it (or `every_secs` have passed since).
  bool should_trigger_for_step(std::int64_t step) const;
  /// Records a trigger at `step` now; returns the seconds and steps since the previous one
  /// (nullopt for the first).
  std::optional<Elapsed> update_last_triggered_step(std::int64_t step);
  std::optional<std::int64_t> last_triggered_step() const { return last_step_; }

  std::int64_t every_steps() const { return every_steps_; }
  double every_secs() const { return every_secs_; }

 private:
  using Clock = std::chrono::steady_clock;
  std::int64_t every_steps_;
  double every_secs_;
  std::optional<std::int64_t> last_step_;
  Clock::time_point last_time_{};
};

}  // namespace cohort
