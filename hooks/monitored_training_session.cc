#include "cohort/hooks/monitored_training_session.h"

#include <utility>

#include "cohort/core/base/error.h"
#include "cohort/hooks/checkpoint_saver_hook.h"
#include "cohort/hooks/step_counter_hook.h"
#include "cohort/hooks/summary_saver_hook.h"

namespace cohort {
namespace {

void check_not_negative(const char* name, std::int64_t value) {
  if (value < 0) throw InvalidArgument(std::string("MonitoredTrainingSession: ") + name + " must be >= 0, got " + std::to_string(value));
}

}  // namespace

std::unique_ptr<MonitoredSession> MonitoredTrainingSession(Trainer& trainer, SessionOptions options) {
  check_not_negative("save_checkpoint_secs", options.save_checkpoint_secs);
  check_not_negative("save_checkpoint_steps", options.save_checkpoint_steps);
  check_not_negative("save_summaries_steps", options.save_summaries_steps.value_or(0));
  check_not_negative("save_summaries_secs", options.save_summaries_secs);
  if (options.save_summaries_steps && options.save_summaries_secs > 0)  // TensorFlow's ValueError
    throw InvalidArgument("MonitoredTrainingSession: save_summaries_steps = " +
                          std::to_string(*options.save_summaries_steps) + " and save_summaries_secs = " +
                          std::to_string(options.save_summaries_secs) + ": give one");
  check_not_negative("log_step_count_steps", options.log_step_count_steps);
  if (options.is_chief) {
    HookList& chief = options.chief_only_hooks;
    const std::string& summary_dir = options.summary_dir.empty() ? options.checkpoint_dir : options.summary_dir;
    if (!summary_dir.empty() && options.log_step_count_steps > 0)
      chief.push_back(std::make_shared<StepCounterHook>(StepCounterHookOptions{.every_n_steps = options.log_step_count_steps}));
    const std::int64_t summary_steps =
        options.save_summaries_steps.value_or(options.save_summaries_secs > 0 ? 0 : 100);
    if (!summary_dir.empty() && (summary_steps > 0 || options.save_summaries_secs > 0)) {
      SummarySaverHookOptions summaries{.output_dir = summary_dir,
                                        .histograms = options.summary_histograms};
      if (summary_steps > 0)
        summaries.every_steps = summary_steps;
      else
        summaries.every_secs = static_cast<double>(options.save_summaries_secs);
      chief.push_back(std::make_shared<SummarySaverHook>(std::move(summaries)));
    }
    if (!options.checkpoint_dir.empty() && (options.save_checkpoint_steps > 0 || options.save_checkpoint_secs > 0)) {
      CheckpointSaverHookOptions checkpoints;
      if (options.save_checkpoint_steps > 0)
        checkpoints.every_steps = options.save_checkpoint_steps;
      else
        checkpoints.every_secs = static_cast<double>(options.save_checkpoint_secs);
      chief.push_back(std::make_shared<CheckpointSaverHook>(std::move(checkpoints)));
    }
  }
  return std::make_unique<MonitoredSession>(trainer, std::move(options));
}

}  // namespace cohort
