#include "cohort/hooks/stop_at_step_hook.h"

#include <algorithm>
#include <string>

#include "cohort/core/base/error.h"

namespace cohort {

StopAtStepHook::StopAtStepHook(std::optional<std::int64_t> last_step, std::int64_t num_steps,
                               std::int64_t examples)
    : last_step_(last_step), examples_(examples), num_steps_(num_steps) {}

std::shared_ptr<StopAtStepHook> StopAtStepHook::last(std::int64_t last_step) {
  if (last_step < 0) throw InvalidArgument("StopAtStepHook::last: last_step must be >= 0, got " + std::to_string(last_step));
  return std::shared_ptr<StopAtStepHook>(new StopAtStepHook(last_step, 0));
}

std::shared_ptr<StopAtStepHook> StopAtStepHook::num(std::int64_t num_steps) {
  if (num_steps < 0) throw InvalidArgument("StopAtStepHook::num: num_steps must be >= 0, got " + std::to_string(num_steps));
  return std::shared_ptr<StopAtStepHook>(new StopAtStepHook(std::nullopt, num_steps));
}

std::shared_ptr<StopAtStepHook> StopAtStepHook::after_examples(std::int64_t examples) {
  if (examples < 1)
    throw InvalidArgument("StopAtStepHook::after_examples: examples must be >= 1, got " + std::to_string(examples));
  return std::shared_ptr<StopAtStepHook>(new StopAtStepHook(std::nullopt, 0, examples));
}

void StopAtStepHook::after_create_session(MonitoredSession& session) {
  const std::int64_t step = session.global_step();
  if (examples_ > 0) {
    const std::int64_t left = examples_ - session.trainer().examples_at(step);
    const std::int64_t per_step = session.trainer().examples_per_global_step();
    last_step_ = step + std::max<std::int64_t>(0, (left + per_step - 1) / per_step);
  }
  if (!last_step_) last_step_ = step + num_steps_;
  // Restored at (or past) the last step: nothing is left to train.
  if (session.global_step() >= *last_step_) session.request_stop();
}

SessionRunArgs StopAtStepHook::before_run(RunContext&) { return {{"global_step"}}; }

void StopAtStepHook::after_run(RunContext& context, const SessionRunValues& values) {
  if (last_step_ && static_cast<std::int64_t>(values.get("global_step")) >= *last_step_) context.request_stop();
}

}  // namespace cohort
