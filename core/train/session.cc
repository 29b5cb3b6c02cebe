#include "cohort/core/train/session.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "cohort/core/base/error.h"
#include "cohort/core/base/signals.h"
#include "cohort/core/io/checkpoint.h"
#include "cohort/core/io/safetensors.h"
#include "cohort/core/io/saver.h"
#include "cohort/core/train/app.h"

namespace cohort {
namespace {

// Where a checkpoint's metadata keeps SessionOptions::settings.
const std::string kSettingsScope = "settings/";

// The one table of what run() can fetch: each name with how its value is read off a step. The
// model's metrics ("accuracy", "top5_accuracy", "mse", ...) are fetchable by name beside them
// ("accuracy" also for a categorical or binary one); a metric the model lacks is not (it would
// read 0).
struct Fetchable {
  const char* name;
  double (*value)(const StepValues& step);
};

const Fetchable kFetchables[] = {
    {"loss", [](const StepValues& v) { return static_cast<double>(v.loss); }},
    {"global_step", [](const StepValues& v) { return static_cast<double>(v.global_step); }},
    {"learning_rate", [](const StepValues& v) { return v.learning_rate; }},
    {"examples", [](const StepValues& v) { return static_cast<double>(v.examples); }},
    {"step_seconds", [](const StepValues& v) { return v.update_end - v.pull_begin; }},
    {"gradient_applied", [](const StepValues& v) { return v.applied ? 1.0 : 0.0; }},
};

// The index among `metrics` of the metric fetched as `name`, or -1 for another fetch (one of
// kFetchables first, whatever the metrics' names). "accuracy" also names a categorical or
// binary one, as StepMetrics::accuracy does.
int metric_index(const std::string& name, const std::vector<std::string>& metrics) {
  for (const Fetchable& f : kFetchables)
    if (name == f.name) return -1;
  for (std::size_t i = 0; i < metrics.size(); ++i)
    if (metrics[i] == name) return static_cast<int>(i);
  return name == "accuracy" ? accuracy_metric(metrics) : -1;
}

// The value of `name` in `step`; InvalidArgument listing what is known for an unknown name.
double fetch(const std::string& name, const StepValues& step,
             const std::vector<std::string>& metrics) {
  for (const Fetchable& f : kFetchables)
    if (name == f.name) return f.value(step);
  if (const int i = metric_index(name, metrics); i >= 0)
    return step.metrics[static_cast<std::size_t>(i)];
  std::string known;
  for (const Fetchable& f : kFetchables) known += (known.empty() ? "" : ", ") + std::string(f.name);
  for (const std::string& m : metrics) known += ", " + m;
  throw InvalidArgument("cannot fetch '" + name + "' (known: " + known + ")");
}

void check_fetches(const std::vector<std::string>& names, const std::vector<std::string>& metrics) {
  const StepValues none;
  for (const std::string& name : names) fetch(name, none, metrics);
}

SessionRunValues select(const std::vector<std::string>& names, const StepValues& step,
                        const std::vector<std::string>& metrics) {
  SessionRunValues values;
  for (const std::string& name : names) {
    values.set(name, fetch(name, step, metrics));
    const int i = metric_index(name, metrics);
    if (i >= 0 && static_cast<std::size_t>(i) < step.metric_counts.size())
      values.set_counts(name, step.metric_counts[static_cast<std::size_t>(i)]);
  }
  return values;
}

void check_options(const SessionOptions& o, const Trainer& trainer) {
  trainer.check_can_start();
  if (!o.master.empty() && o.master != trainer.target())
    throw InvalidArgument("MonitoredSession: master '" + o.master +
                          "' is not this task's server" +
                          (trainer.target().empty() ? std::string(" (local mode has none)")
                                                    : " '" + trainer.target() + "'") +
                          "; a Cohort session runs on its own task's server");
  // Who restores, writes files and runs the chief-only hooks must be the replica whose
  // parameters the others start from (worker 0, Server::is_chief()).
  if (o.is_chief != (trainer.worker_index() == 0))
    throw InvalidArgument(std::string("MonitoredSession: is_chief = ") + (o.is_chief ? "true" : "false") +
                          ", but this replica is worker " + std::to_string(trainer.worker_index()) +
                          " of " + std::to_string(trainer.num_workers()) +
                          ", and the chief is worker 0: pass .is_chief = server.is_chief()");
  std::set<const SessionRunHook*> given;
  for (const HookList* hooks : {&o.hooks, &o.chief_only_hooks})
    for (const auto& hook : *hooks) {
      if (!hook)
        throw InvalidArgument(std::string("MonitoredSession: an empty hook pointer among ") +
                              (hooks == &o.hooks ? "hooks" : "chief_only_hooks"));
      if (!given.insert(hook.get()).second)
        throw InvalidArgument("MonitoredSession: a hook given twice (in hooks and chief_only_hooks, or "
                              "twice in one): it would run twice a step");
    }
  for (const auto& hook : o.chief_only_hooks)
    if (const std::string what = hook->collective(); !what.empty())
      throw InvalidArgument("MonitoredSession: " + what + " is among chief_only_hooks, but every "
                            "replica must run it: give it in hooks");
  std::map<std::string, const SessionRunHook*> scopes{{kSettingsScope, nullptr}};  // each hook's
  for (const HookList* hooks : {&o.hooks, &o.chief_only_hooks})
    for (const auto& hook : *hooks)
      if (const std::string scope = hook->state_scope(); !scope.empty())
        if (const auto [at, fresh] = scopes.emplace(scope, hook.get()); !fresh)
          throw InvalidArgument(at->second == nullptr
                                    ? "MonitoredSession: a hook keeps its state in checkpoints under '" + scope +
                                          "', where the session keeps its settings: give it another name"
                                    : "MonitoredSession: two hooks keep their state in checkpoints under '" + scope +
                                          "': give them different names");
  if (o.max_wait_secs.count() < 0)
    throw InvalidArgument("MonitoredSession: max_wait_secs must be >= 0");
  if (o.step_time_every_steps < 0)
    throw InvalidArgument("MonitoredSession: step_time_every_steps must be >= 0");
  if (!o.warm_start_vars.empty()) {
    if (o.warm_start_from.empty())
      throw InvalidArgument("MonitoredSession: warm_start_vars '" + o.warm_start_vars +
                            "' without warm_start_from: name the checkpoint to load them from");
    check_variable_pattern(o.warm_start_vars);
  }
}

}  // namespace

double SessionRunValues::get(const std::string& name) const {
  const auto it = values_.find(name);
  if (it == values_.end()) throw InvalidArgument("'" + name + "' was not fetched in this step");
  return it->second;
}

MonitoredSession::MonitoredSession(Trainer& trainer, SessionOptions options)
    : trainer_(trainer), options_(std::move(options)), start_(std::chrono::steady_clock::now()) {
  check_options(options_, trainer_);
  if (options_.stop_on_signals) install_stop_signal_handlers();
  create();
}

MonitoredSession::~MonitoredSession() {
  // Closing leaves training, which may wait for other tasks: not while an error unwinds, when
  // app::Run is about to end the job.
  if (std::uncaught_exceptions() > 0) return;
  try {
    close();
  } catch (const std::exception& e) {
    // Nothing can be thrown from here: the program fails when it ends (under app::Run).
    std::fprintf(stderr, "[%s] error while closing the session: %s\n", process_label().c_str(), e.what());
    // A stop signal's status (128 + N) is its error's, as any other error's.
    const auto* error = dynamic_cast<const Error*>(&e);
    app::fail_at_exit(std::string("closing the session: ") + e.what(),
                      error != nullptr ? error->exit_status() : kFaultStatus);
  }
}

HookList MonitoredSession::all_hooks() const {
  HookList hooks = options_.hooks;
  if (options_.is_chief)
    hooks.insert(hooks.end(), options_.chief_only_hooks.begin(), options_.chief_only_hooks.end());
  return hooks;
}

double MonitoredSession::now() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void MonitoredSession::create() {
  for (auto& hook : all_hooks()) hook->begin();
  std::int64_t step = 0;
  bool restored = false;
  if (options_.is_chief && !options_.checkpoint_dir.empty()) {
    checkpoints_ = std::make_unique<CheckpointManager>(options_.checkpoint_dir, options_.keep_checkpoint_max,
                                                       options_.keep_checkpoint_every_n_hours);
    checkpoints_->lock_for_writing();
    if (auto checkpoint = checkpoints_->restore_latest()) {
      step = checkpoint->global_step();
      const std::string from = options_.checkpoint_dir + ", global step " + std::to_string(step);
      try {
        check_settings(checkpoint->metadata);
        trainer_.restore(*checkpoint);
        for (auto& hook : all_hooks()) hook->restore_state(checkpoint->metadata);
      } catch (const CheckpointError& e) {
        throw CheckpointError(from + ": " + e.what(), e.exit_status());
      } catch (const InvalidArgument& e) {
        throw InvalidArgument(from + ": " + e.what());
      }
      restored = true;
      restored_step_ = step;
      // A checkpoint written at another global batch (other workers, batch size or
      // accumulation) says what its steps held.
      const std::int64_t per_step = trainer_.examples_per_global_step();
      const std::optional<std::int64_t> examples = trainer_.restored_examples();
      std::string held;
      if (examples && *examples != step * per_step)
        held = " (" + std::to_string(*examples) + " examples trained, " +
               std::to_string(*examples / per_step) + " of this run's steps of " +
               std::to_string(per_step) + ": the data and epochs go on from there)";
      std::printf("restored from %s at global step %lld%s\n", options_.checkpoint_dir.c_str(),
                  static_cast<long long>(step), held.c_str());
      std::fflush(stdout);
    }
  }
  if (options_.is_chief && !restored && !options_.warm_start_from.empty()) {
    const std::string& from = options_.warm_start_from;
    std::optional<Checkpoint> checkpoint;
    std::size_t loaded = 0;
    std::string origin;
    try {
      std::error_code ec;
      if (std::filesystem::is_directory(from, ec))
        checkpoint = CheckpointManager(from).restore_latest();
      else if (std::filesystem::exists(from, ec))
        checkpoint = read_safetensors(from);  // Cohort's, or weights another framework saved
      if (!checkpoint)
        throw CheckpointError(std::filesystem::exists(from, ec) ? "no checkpoint in the directory"
                                                                : "no such file or directory",
                              kInputStatus);
      // Another framework's file has no format_version, and often no global step.
      if (!checkpoint->metadata.contains("format_version"))
        origin = "another framework's weights, taken in Cohort's layouts (a square kernel as it is)";
      else
        origin = "its global step " + std::to_string(checkpoint->global_step());
      loaded = trainer_.warm_start(*checkpoint, options_.warm_start_vars);
    } catch (const CheckpointError& e) {
      throw CheckpointError("warm_start_from " + from + ": " + e.what(), e.exit_status());
    }
    restored = true;  // the graph holds the values: not to be initialised
    const std::size_t all = trainer_.graph().variables().size();
    const std::string which = loaded == all ? "" : ", " + std::to_string(loaded) + " of " +
                                                        std::to_string(all) + " variables";
    std::printf("warm start from %s (%s%s); training starts at global step 0\n", from.c_str(), origin.c_str(),
                which.c_str());
    std::fflush(stdout);
  }
  trainer_.start(step, restored, options_.max_wait_secs);
  try {
    if (options_.is_chief && options_.config.log_device_placement)
      std::printf("%s", trainer_.graph().device_setter().table().c_str());
    for (auto& hook : all_hooks()) hook->after_create_session(*this);
    stop_ = trainer_.agree_to_stop(stop_ || trainer_.end_of_input());
  } catch (...) {
    // No session to close: leave training as after a failed step, so that no peer waits on
    // this replica (and a program that goes on may start the trainer again).
    trainer_.finish(/*fetch=*/false);
    release_checkpoint_dirs();
    throw;
  }
}

bool MonitoredSession::should_stop() const { return stop_ || error_ || closed_; }

SessionRunValues MonitoredSession::run(const std::vector<std::string>& fetches) {
  if (should_stop())
    throw Error(std::string("MonitoredSession::run called after the session ") +
                (closed_ ? "was closed" : error_ ? "failed" : "stopped (should_stop())"));
  try {
    const std::vector<std::string>& metrics = trainer_.model().metric_names();
    check_fetches(fetches, metrics);
    RunContext context(*this, SessionRunArgs{fetches});
    const HookList hooks = all_hooks();
    std::vector<SessionRunArgs> asked;
    asked.reserve(hooks.size());
    for (auto& hook : hooks) {
      asked.push_back(hook->before_run(context));
      check_fetches(asked.back().fetches, metrics);
    }

    // Counts of the metrics (StepValues::metric_counts) only where some fetch is of a metric.
    const auto of_metric = [&](const std::vector<std::string>& names) {
      return std::any_of(names.begin(), names.end(),
                         [&](const std::string& name) { return metric_index(name, metrics) >= 0; });
    };
    const bool count = of_metric(fetches) ||
                       std::any_of(asked.begin(), asked.end(),
                                   [&](const SessionRunArgs& a) { return of_metric(a.fetches); });
    const StepValues step = trainer_.step(count);
    const double step_seconds = step.update_end - step.pull_begin;

    const double origin = std::chrono::duration<double>(start_.time_since_epoch()).count();
    trace_.global_step = step.global_step;
    trace_.phases.clear();
    const double pulled = step.pull_begin + step.pull_wait - origin;
    if (step.pull_wait > 0) trace_.phases.push_back({"wait", step.pull_begin - origin, pulled});
    const double pushed = step.update_end - step.update_wait - origin;
    trace_.phases.push_back({"pull", pulled, step.pull_end - origin});
    trace_.phases.push_back({"forward_backward", step.pull_end - origin, step.compute_end - origin});
    trace_.phases.push_back({"push", step.compute_end - origin, pushed});
    trace_.phases.push_back({"wait", pushed, step.update_end - origin});

    for (std::size_t i = 0; i < hooks.size(); ++i) hooks[i]->after_run(context, select(asked[i].fetches, step, metrics));

    step_seconds_sum_ += step_seconds;
    ++step_seconds_count_;
    if (options_.step_time_every_steps > 0 && ++local_steps_ % options_.step_time_every_steps == 0) {
      worker_step_times_ = trainer_.exchange_step_times(
          step_seconds_sum_ / static_cast<double>(step_seconds_count_));
      step_seconds_sum_ = 0;
      step_seconds_count_ = 0;
    }

    // A stop asked of the step's context, or of the session itself during the step.
    // The end of this replica's input (TrainerOptions::epochs) too, as TensorFlow's session takes
    // a dataset's OutOfRangeError.
    bool stop = stop_ || context.stop_requested() || step.stop || trainer_.end_of_input();
    if (options_.stop_on_signals && stop_signal_received() != 0) {
      if (!stop)
        std::fprintf(stderr, "[%s] signal %d: stopping after global step %lld\n",
                     process_label().c_str(), stop_signal_received(),
                     static_cast<long long>(step.global_step));
      stop = true;
    }
    stop_ = trainer_.agree_to_stop(stop);
    // A stop this replica did not ask for: another's signal, hook or end of input (allreduce's
    // replicas stop together), said where it would otherwise pass for the end of training.
    if (stop_ && !stop)
      std::fprintf(stderr, "[%s] stopping after global step %lld: another worker asked to stop (a stop "
                   "signal, a hook or the end of its input)\n",
                   process_label().c_str(), static_cast<long long>(step.global_step));
    return select(fetches, step, metrics);
  } catch (...) {
    error_ = true;
    throw;
  }
}

std::string MonitoredSession::save_checkpoint(const std::string& dir) {
  if (!options_.is_chief) throw Error("save_checkpoint: only the chief writes checkpoints");
  if (dir.empty() && !checkpoints_) throw Error("save_checkpoint: the session has no checkpoint_dir");
  CheckpointManager& manager = checkpoint_manager(dir);
  Checkpoint checkpoint = trainer_.checkpoint();
  for (const auto& hook : all_hooks()) hook->save_state(checkpoint.metadata);
  for (const auto& [name, value] : options_.settings) checkpoint.metadata[kSettingsScope + name] = value;
  const std::int64_t step = checkpoint.global_step();
  // Diverged parameters are not written: a requeued job would restore them, and keep-the-last-N
  // would push the finite checkpoints out. (A replica's NaN reaches the chief's parameters
  // through its gradients before that replica's NanTensorHook can end the job.)
  for (const CheckpointTensor& t : checkpoint.tensors) {
    const auto bad = std::find_if(t.values.begin(), t.values.end(), [](float v) { return !std::isfinite(v); });
    if (bad != t.values.end())
      throw CheckpointError("not writing the checkpoint of global step " + std::to_string(step) + ": " + t.name +
                            " holds " + std::to_string(*bad) + " (training diverged); " + manager.directory() +
                                " keeps its last finite checkpoint",
                            kDivergedStatus);
  }
  return manager.save(step, std::move(checkpoint));
}

CheckpointManager& MonitoredSession::checkpoint_manager(const std::string& dir) {
  std::error_code ec;
  const auto same = [&](const std::string& a, const std::string& b) {
    return a == b || std::filesystem::equivalent(a, b, ec);
  };
  if (checkpoints_ && (dir.empty() || same(dir, options_.checkpoint_dir))) return *checkpoints_;
  for (const auto& other : other_checkpoints_)
    if (same(dir, other->directory())) return *other;
  auto manager = std::make_unique<CheckpointManager>(dir, options_.keep_checkpoint_max,
                                                     options_.keep_checkpoint_every_n_hours);
  manager->lock_for_writing();
  return *other_checkpoints_.emplace_back(std::move(manager));
}

void MonitoredSession::release_checkpoint_dirs() {
  if (checkpoints_) checkpoints_->unlock();
  other_checkpoints_.clear();
}

void MonitoredSession::check_settings(const std::map<std::string, std::string>& metadata) const {
  for (const auto& [name, value] : options_.settings)
    if (const auto saved = metadata.find(kSettingsScope + name); saved != metadata.end() && saved->second != value)
      throw InvalidArgument("its parameters were trained with " + name + "=" + saved->second + ", this job has " +
                            name + "=" + value + ": give the same (or another checkpoint directory)");
}

void MonitoredSession::close() {
  if (closed_) return;
  closed_ = true;
  // Every hook's end() runs, also after another's failed (a trace that cannot be written must
  // not cost the checkpoint saver's final save); the first error is thrown once all have run.
  std::exception_ptr failure;
  // The final parameters, once: the final checkpoint and whatever the program reports after
  // close() describe the same ones. A store that fails here takes no further step.
  bool fetched = !error_;
  if (!error_) {
    try {
      trainer_.take_final_parameters();
    } catch (...) {
      failure = std::current_exception();
      fetched = false;
    }
  }
  if (fetched)
    for (auto& hook : all_hooks()) {
      try {
        hook->end(*this);
      } catch (...) {
        if (!failure) failure = std::current_exception();
      }
    }
  // After an error the store may be unusable: the parameters stay as they are.
  trainer_.finish(/*fetch=*/fetched);
  release_checkpoint_dirs();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace cohort
