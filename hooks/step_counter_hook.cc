#include "cohort/hooks/step_counter_hook.h"

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "cohort/core/base/error.h"

namespace cohort {

StepCounterHook::StepCounterHook(StepCounterHookOptions options)
    : options_(options),
      timer_(options.every_n_steps == 0 && options.every_n_secs == 0 ? 100 : options.every_n_steps,
             options.every_n_secs, "StepCounterHook") {}

void StepCounterHook::begin() {
  timer_.reset();
  last_global_step_.reset();
  warned_ = false;
  reported_times_.clear();
}

SessionRunArgs StepCounterHook::before_run(RunContext&) { return {{"global_step", "examples"}}; }

void StepCounterHook::after_run(RunContext& context, const SessionRunValues& values) {
  const auto step = static_cast<std::int64_t>(values.get("global_step"));
  std::ostream& out = options_.out ? *options_.out : std::cout;
  if (timer_.should_trigger_for_step(step)) {
    const auto elapsed = timer_.update_last_triggered_step(step);
    if (elapsed && elapsed->seconds > 0) {
      MonitoredSession& session = context.session();
      steps_per_sec_ = static_cast<double>(elapsed->steps) / elapsed->seconds;
      examples_per_sec_ = *steps_per_sec_ * static_cast<double>(session.trainer().examples_per_global_step());
      char line[128];
      std::snprintf(line, sizeof line, "global_step/sec: %.4g, examples/sec: %.0f", *steps_per_sec_, *examples_per_sec_);
      out << line << std::endl;
      if (session.is_chief()) {
        const std::vector<double> times = session.worker_step_times();
        const auto fast = std::min_element(times.begin(), times.end());
        // A worker that has not reported a step time yet reads 0: wait until all have.
        if (times.size() >= 2 && times != reported_times_ && *fast > 0) {
          reported_times_ = times;
          const auto slow = std::max_element(times.begin(), times.end());
          std::snprintf(line, sizeof line, "stragglers: slowest worker %d at %.4g s/step, fastest worker %d at %.4g s/step (%.2fx)",
                        static_cast<int>(slow - times.begin()), *slow, static_cast<int>(fast - times.begin()), *fast,
                        *slow / *fast);
          out << line << std::endl;
        }
      }
    }
  }
  if (last_global_step_ == step && !warned_) {
    warned_ = true;
    std::fprintf(stderr, "[%s] warning: the global step has not advanced (still %lld) since the previous run\n",
                 process_label().c_str(), static_cast<long long>(step));
  }
  last_global_step_ = step;
}

}  // namespace cohort
