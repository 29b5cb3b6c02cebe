#include "cohort/hooks/checkpoint_saver_hook.h"

#include <filesystem>
#include <utility>

#include "cohort/core/base/error.h"
#include "cohort/core/io/checkpoint.h"

namespace cohort {

CheckpointSaverHook::CheckpointSaverHook(CheckpointSaverHookOptions options)
    : options_(std::move(options)), timer_(options_.every_steps, options_.every_secs, "CheckpointSaverHook") {
  for (const auto& listener : options_.listeners)
    if (!listener) throw InvalidArgument("CheckpointSaverHook: a listener is null");
}

void CheckpointSaverHook::begin() {
  timer_.reset();
  active_ = false;
  stop_pending_ = false;
}

void CheckpointSaverHook::after_create_session(MonitoredSession& session) {
  active_ = session.is_chief();
  if (!active_) return;
  const std::string& session_dir = session.options().checkpoint_dir;
  const std::string& dir = options_.checkpoint_dir;
  if (dir.empty() && session_dir.empty())
    throw InvalidArgument("CheckpointSaverHook: neither the hook nor the session has a checkpoint_dir to save into");
  std::error_code ignored;
  const bool into_session_dir =
      dir.empty() || (!session_dir.empty() && std::filesystem::equivalent(dir, session_dir, ignored));
  for (const auto& listener : options_.listeners) listener->begin();
  const std::int64_t step = session.global_step();
  // A checkpoint restored from the directory already holds this step; saving it again would only
  // rewrite it. Another directory gets it (and is locked for the session by that first save).
  if (session.restored_step() && into_session_dir)
    timer_.update_last_triggered_step(step);
  else
    stop_pending_ = save(session, step);
}

SessionRunArgs CheckpointSaverHook::before_run(RunContext&) {
  if (!active_) return {};
  return {{"global_step"}};
}

void CheckpointSaverHook::after_run(RunContext& context, const SessionRunValues& values) {
  if (!active_) return;
  if (stop_pending_) {
    context.request_stop();
    stop_pending_ = false;
  }
  const auto step = static_cast<std::int64_t>(values.get("global_step"));
  if (!timer_.should_trigger_for_step(step)) return;
  if (save(context.session(), step)) context.request_stop();
}

void CheckpointSaverHook::end(MonitoredSession& session) {
  if (!active_) return;
  // A fresh read, as TensorFlow reads the global step variable: in the async modes the other
  // workers' last pushes may have moved it since the chief's last step.
  const std::int64_t step = session.read_global_step();
  if (timer_.last_triggered_step() != step) save(session, step);
  // The step of the last file (a save reads the step again: later pushes may have moved it).
  for (const auto& listener : options_.listeners) listener->end(session, timer_.last_triggered_step().value_or(step));
}

bool CheckpointSaverHook::save(MonitoredSession& session, std::int64_t step) {
  for (const auto& listener : options_.listeners) listener->before_save(session, step);
  last_path_ = session.save_checkpoint(options_.checkpoint_dir);
  // The step the file holds (in the async modes the store's count, past the chief's own) is the
  // one the listeners hear and the timer counts from.
  step = CheckpointManager::step_of(std::filesystem::path(last_path_).filename().string()).value_or(step);
  timer_.update_last_triggered_step(step);
  ++saves_;
  bool stop = false;
  for (const auto& listener : options_.listeners) stop = listener->after_save(session, step, last_path_) || stop;
  return stop;
}

}  // namespace cohort
