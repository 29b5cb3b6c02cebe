#include "cohort/hooks/second_or_step_timer.h"

#include "cohort/core/base/error.h"

namespace cohort {

SecondOrStepTimer::SecondOrStepTimer(std::int64_t every_steps, double every_secs, const std::string& owner)
    : every_steps_(every_steps), every_secs_(every_secs) {
  if (every_steps < 0 || every_secs < 0 || (every_steps > 0) == (every_secs > 0))
    throw InvalidArgument(owner + ": give exactly one of a positive step count and a positive number of seconds (got steps=" +
                          std::to_string(every_steps) + ", secs=" + std::to_string(every_secs) + ")");
}

void SecondOrStepTimer::reset() { last_step_.reset(); }

bool SecondOrStepTimer::should_trigger_for_step(std::int64_t step) const {
  if (!last_step_) return true;
  if (*last_step_ == step) return false;
  if (every_secs_ > 0)
    return std::chrono::duration<double>(Clock::now() - last_time_).count() >= every_secs_;
  return step >= *last_step_ + every_steps_;
}

std::optional<SecondOrStepTimer::Elapsed> SecondOrStepTimer::update_last_triggered_step(std::int64_t step) {
  const Clock::time_point now = Clock::now();
  std::optional<Elapsed> elapsed;
  if (last_step_) elapsed = Elapsed{std::chrono::duration<double>(now - last_time_).count(), step - *last_step_};
  last_step_ = step;
  last_time_ = now;
  return elapsed;
}

}  // namespace cohort
