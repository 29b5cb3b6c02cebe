#include "cohort/hooks/stop_at_step_hook.h"

#include <string>

#include "cohort/core/base/error.h"

namespace cohort {

StopAtStepHook::StopAtStepHook(std::optional<std::int64_t> last_step, std::int64_t num_steps)
    : last_step_(last_step), num_steps_(num_steps) {}

std::shared_ptr<StopAtStepHook> StopAtStepHook::last(std::int64_t last_step) {
  if (last_step < 0) throw InvalidArgument("StopAtStepHook::last: last_step must be >= 0, got " + std::to_string(last_step));
  return std::shared_ptr<StopAtStepHook>(new StopAtStepHook(last_step, 0));
}

std::shared_ptr<StopAtStepHook> StopAtStepHook::num(std::int64_t num_steps) {
  if (num_steps < 0) throw InvalidArgument("StopAtStepHook::num: num_steps must be >= 0, got " + std::to_string(num_steps));
  return std::shared_ptr<StopAtStepHook>(new StopAtStepHook(std::nullopt, num_steps));
}

void StopAtStepHook::after_create_session(MonitoredSession& session) {
  if (!last_step_) last_step_ = session.global_step() + num_steps_;
  // Restored at (or past) the last step: nothing is left to train.
  if (session.global_step() >= *last_step_) session.request_stop();
}

SessionRunArgs StopAtStepHook::before_run(RunContext&) { return {{"global_step"}}; }

void StopAtStepHook::after_run(RunContext& context, const SessionRunValues& values) {
  if (last_step_ && static_cast<std::int64_t>(values.get("global_step")) >= *last_step_) context.request_stop();
}

}  // namespace cohort
