#include "cohort/hooks/validation_hook.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <string>
#include <utility>

#include "cohort/core/base/error.h"
#include "cohort/core/io/checkpoint.h"
#include "cohort/core/io/summary_writer.h"
#include "cohort/core/nn/evaluation.h"
#include "cohort/core/train/evaluator.h"
#include "cohort/core/train/trainer.h"

namespace cohort {
namespace {

// "1 evaluation", "2 evaluations".
std::string evaluations(std::int64_t n) {
  return std::to_string(n) + (n == 1 ? " evaluation" : " evaluations");
}

}  // namespace

ValidationHook::ValidationHook(ValidationHookOptions options) : options_(std::move(options)) {
  const auto bad = [](const std::string& what) { return InvalidArgument("ValidationHook: " + what); };
  // Shared, a worker's part may be empty (fewer examples than workers).
  if (options_.data.size() == 0 && !options_.shared) throw bad("the validation data is empty");
  if (options_.every_steps < 1)
    throw bad("every_steps must be >= 1, got " + std::to_string(options_.every_steps));
  if (options_.batch_size < 1)
    throw bad("batch_size must be >= 1, got " + std::to_string(options_.batch_size));
  if (options_.patience < 0) throw bad("patience must be >= 0, got " + std::to_string(options_.patience));
  if (!(options_.min_delta >= 0)) throw bad("min_delta must be >= 0");
  if (options_.monitor.empty()) throw bad("monitor is empty");
  if (options_.name.empty() || options_.name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                               "0123456789_-.") != std::string::npos)
    throw bad("name '" + options_.name + "' must be letters, digits, '_', '-' and '.'");
  if (!(options_.reduce_lr_factor >= 0 && options_.reduce_lr_factor < 1))
    throw bad("reduce_lr_factor must be in (0, 1) (0: no reduction), got " +
              std::to_string(options_.reduce_lr_factor));
  if (options_.reduce_lr_factor > 0 && options_.reduce_lr_patience < 1)
    throw bad("reduce_lr_patience must be >= 1 with a reduce_lr_factor, got " +
              std::to_string(options_.reduce_lr_patience));
  if (options_.reduce_lr_cooldown < 0)
    throw bad("reduce_lr_cooldown must be >= 0, got " + std::to_string(options_.reduce_lr_cooldown));
  if (!(options_.min_learning_rate_scale >= 0 && options_.min_learning_rate_scale < 1))
    throw bad("min_learning_rate_scale must be in [0, 1), got " +
              std::to_string(options_.min_learning_rate_scale));
}

ValidationHook::~ValidationHook() = default;

void ValidationHook::begin() {
  next_ = -1;
  history_.clear();
  best_.reset();
  without_improvement_ = 0;
  plateau_ = 0;
  cooldown_ = 0;
  reductions_ = 0;
  best_checkpoint_.clear();
  stopped_ = false;
  stop_at_start_ = false;
  state_.clear();
}

std::string ValidationHook::collective() const {
  return options_.shared ? "a ValidationHook that shares its evaluations among the workers" : "";
}

void ValidationHook::after_create_session(MonitoredSession& session) {
  chief_ = session.is_chief();
  active_ = chief_ || options_.shared;
  if (!active_) return;
  const Mode mode = session.trainer().mode();
  const int workers = session.trainer().num_workers();
  if (options_.shared && mode != Mode::kAllreduce && !(mode == Mode::kLocal && workers == 1))
    throw InvalidArgument("ValidationHook: shared evaluations need the workers at the same step, in "
                          "allreduce mode, not " + std::string(to_string(mode)) + " mode with " +
                          std::to_string(workers) + (workers == 1 ? " worker" : " workers"));
  const Model& model = session.trainer().model();
  metric_names_ = model.metric_names();
  if (options_.monitor != "loss" &&
      std::find(metric_names_.begin(), metric_names_.end(), options_.monitor) == metric_names_.end()) {
    std::string known = "loss";
    for (const std::string& name : metric_names_) known += ", " + name;
    throw InvalidArgument("ValidationHook: monitor '" + options_.monitor +
                          "' is not the loss or a metric of the model (" + known + ")");
  }
  try {
    lower_ = lower_is_better(options_.mode, options_.monitor, &model);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(std::string("ValidationHook: ") + e.what());
  }
  check_dataset(model, options_.data);
  if (!chief_) return;
  // The step after the one the session started from (in async mode the store's count may
  // already have moved on).
  first_step_ = session.restored_step().value_or(0) + 1;
  // Patience that ran out before the restart (and is no longer) ends training before its first
  // step, as a StopAtStepHook restored at its last step does: no step, no new checkpoint.
  if (std::exchange(stop_at_start_, false)) {
    stopped_ = true;
    if (options_.log)
      std::printf("%s: %s had not improved in %s before the restart: stopping\n",
                  options_.name.c_str(), options_.monitor.c_str(), evaluations(without_improvement_).c_str());
    session.request_stop();
  }
  const SessionOptions& s = session.options();
  if (!options_.best_dir.empty() && !s.checkpoint_dir.empty() &&
      std::filesystem::weakly_canonical(options_.best_dir) == std::filesystem::weakly_canonical(s.checkpoint_dir))
    throw InvalidArgument("ValidationHook: best_dir " + options_.best_dir +
                          " is the session's checkpoint_dir; the best checkpoints need a directory of their own");
  summary_dir_ = options_.output_dir;
  if (summary_dir_.empty() && !(s.summary_dir.empty() && s.checkpoint_dir.empty()))
    summary_dir_ = (s.summary_dir.empty() ? s.checkpoint_dir : s.summary_dir) +
                   (options_.name == "validation" ? "/eval" : "/eval_" + options_.name);
}

SessionRunArgs ValidationHook::before_run(RunContext&) {
  if (!active_) return {};
  return {{"global_step"}};
}

void ValidationHook::after_run(RunContext& context, const SessionRunValues& values) {
  if (!active_) return;
  const auto step = static_cast<std::int64_t>(values.get("global_step"));
  const std::int64_t every = options_.every_steps;
  if (next_ < 0) next_ = (step + every - 1) / every * every;  // the first multiple from here
  if (step < next_) return;
  next_ = (step / every + 1) * every;
  if (validate(context.session(), step)) context.request_stop();
}

void ValidationHook::end(MonitoredSession& session) {
  if (!active_) return;
  // The final parameters' step (the store's in the async modes), as the final checkpoint's.
  const std::int64_t step = session.read_global_step();
  if (options_.at_end && (history_.empty() || history_.back().global_step != step))
    validate(session, step, /*training=*/false);
  if (writer_) writer_->flush();
  writer_.reset();
}

bool ValidationHook::validate(MonitoredSession& session, std::int64_t step, bool training) {
  // The parameters as they stand on the ps tasks (the chief's own copy may be a step behind, or
  // more in the async modes), as the best checkpoint will hold them.
  Trainer& trainer = session.trainer();
  trainer.fetch_parameters();
  const StepMetrics m = options_.shared ? trainer.evaluate_across(options_.data, options_.batch_size)
                                        : trainer.evaluate(options_.data, options_.batch_size);
  Validation v;
  v.global_step = step;
  v.loss = m.loss;
  for (std::size_t i = 0; i < metric_names_.size(); ++i) {
    v.metrics.push_back(m.metrics[i]);
    if (metric_names_[i] == options_.monitor) v.monitored = m.metrics[i];
  }
  if (options_.monitor == "loss") v.monitored = v.loss;
  const Validation* best = this->best();
  v.improved = !std::isnan(v.monitored) &&
               (!best || (lower_ ? v.monitored < best->monitored - options_.min_delta
                                : v.monitored > best->monitored + options_.min_delta));
  history_.push_back(v);
  if (v.improved) {
    best_ = v;
    without_improvement_ = 0;
    if (!options_.best_dir.empty() && chief_) best_checkpoint_ = session.save_checkpoint(options_.best_dir);
  } else {
    ++without_improvement_;
  }
  if (chief_ && !summary_dir_.empty()) {
    // Opened at the first write, so that a session that fails to start holds no directory.
    // Each session has an event file of its own, and the directory is free again at its end.
    if (!writer_) {
      writer_ = std::make_unique<SummaryWriter>(summary_dir_);
      // The points an earlier run wrote after the checkpoint this session started from (it died
      // before its next one) are dropped by TensorBoard; this session's replace them (from its
      // own first point: one that trains no step evaluates at the step it restored).
      writer_->add_session_start(std::min(first_step_, step));
    }
    writer_->add_scalars(evaluation_scalars(metric_names_, m), step);  // the evaluator's tags
    writer_->flush();
  }
  if (options_.log && chief_) {
    std::printf("%s at global step %lld: loss %.4f", options_.name.c_str(), static_cast<long long>(step), v.loss);
    for (std::size_t i = 0; i < metric_names_.size(); ++i)
      std::printf(", %s %.4f", metric_names_[i].c_str(), v.metrics[i]);
    if (v.improved) {
      std::printf(" (the best so far)\n");
    } else if (const Validation* b = this->best()) {
      std::printf(" (best %s %.4f at global step %lld)\n", options_.monitor.c_str(), b->monitored,
                  static_cast<long long>(b->global_step));
    } else {
      std::printf(" (%s is not a number)\n", options_.monitor.c_str());
    }
    std::fflush(stdout);
  }
  const bool out_of_patience = options_.patience > 0 && without_improvement_ >= options_.patience;
  // A rate lowered for steps that will not come would only be reported.
  if (options_.reduce_lr_factor > 0 && training && chief_ && !out_of_patience) reduce_on_plateau(session, v);
  // What a restart goes on from: the evaluations during training, not the one after its end
  // (which one run of the whole job would make only once).
  if (training) keep_state();
  if (out_of_patience && !stopped_) {
    stopped_ = true;
    if (options_.log && chief_)
      std::printf("%s: %s has not improved in %s: stopping\n", options_.name.c_str(),
                  options_.monitor.c_str(), evaluations(without_improvement_).c_str());
    return true;
  }
  return false;
}

std::string ValidationHook::state_scope() const { return options_.name + "/"; }

std::string ValidationHook::state_key(const char* field) const {
  return state_scope() + options_.monitor + "/" + field;
}

void ValidationHook::save_state(std::map<std::string, std::string>& metadata) const {
  for (const auto& [key, value] : state_) metadata[key] = value;
  // The step the next evaluation is due at, as the save finds it: one due at this very step
  // that a CheckpointSaverHook ahead of this hook saved before, still due.
  if (next_ >= 0) metadata[state_key("next_evaluation")] = std::to_string(next_);
}

void ValidationHook::keep_state() {
  state_.clear();
  const auto put = [&](const char* field, const std::string& value) {
    state_[state_key(field)] = value;
  };
  if (best_) {
    char text[32];
    std::snprintf(text, sizeof text, "%.17g", best_->monitored);  // read back exactly
    put("best", text);
    put("best_step", std::to_string(best_->global_step));
  }
  put("without_improvement", std::to_string(without_improvement_));
  put("plateau", std::to_string(plateau_));
  put("cooldown", std::to_string(cooldown_));
}

void ValidationHook::restore_state(const std::map<std::string, std::string>& metadata) {
  const auto get = [&](const char* field) -> std::optional<std::string> {
    const auto it = metadata.find(state_key(field));
    if (it == metadata.end()) return std::nullopt;
    return it->second;
  };
  const auto bad = [&](const char* field, const std::string& value) {
    return CheckpointError("the checkpoint's " + state_key(field) + " is '" + value +
                           "', not a " + (std::string(field) == "best" ? "number" : "count"));
  };
  const auto count = [&](const char* field) -> std::int64_t {
    const std::optional<std::string> value = get(field);
    if (!value) return 0;
    std::int64_t n = -1;
    const auto [end, error] = std::from_chars(value->data(), value->data() + value->size(), n);
    if (error != std::errc() || end != value->data() + value->size() || n < 0) throw bad(field, *value);
    return n;
  };
  without_improvement_ = count("without_improvement");
  plateau_ = count("plateau");
  cooldown_ = count("cooldown");
  // An evaluation that was due when the checkpoint was saved is made at the first step. Not
  // for a shared hook: its other workers, which restore nothing, count from the step alone.
  if (get("next_evaluation") && !options_.shared) next_ = count("next_evaluation");
  if (const std::optional<std::string> best = get("best")) {
    char* end = nullptr;
    Validation v;
    v.monitored = std::strtod(best->c_str(), &end);
    if (end == best->c_str() || *end != '\0' || std::isnan(v.monitored)) throw bad("best", *best);
    v.global_step = count("best_step");
    v.improved = true;
    v.loss = options_.monitor == "loss" ? v.monitored : std::numeric_limits<double>::quiet_NaN();
    best_ = v;
    // The best checkpoint, if kept: the latest in best_dir.
    if (!options_.best_dir.empty()) {
      try {
        best_checkpoint_ = CheckpointManager(options_.best_dir, 0).latest_path().value_or("");
      } catch (const Error&) {
        best_checkpoint_.clear();
      }
    }
  }
  keep_state();
  // Patience that ran out before the restart (and is no longer) ends training at once.
  stop_at_start_ = options_.patience > 0 && without_improvement_ >= options_.patience;
}

void ValidationHook::reduce_on_plateau(MonitoredSession& session, const Validation& v) {
  // A cooldown's evaluations do not count (Keras's count the last of them), an improvement
  // starts the count again.
  const bool cooling = cooldown_ > 0;
  if (cooling) --cooldown_;
  if (v.improved || cooling) {
    plateau_ = 0;
    return;
  }
  if (++plateau_ < options_.reduce_lr_patience) return;
  plateau_ = 0;
  Trainer& trainer = session.trainer();
  const double now = trainer.learning_rate_scale();
  const double next = std::max(now * options_.reduce_lr_factor, options_.min_learning_rate_scale);
  if (!(next < now && next > 0)) return;  // at the floor already (or at float's)
  trainer.set_learning_rate_scale(next);
  cooldown_ = options_.reduce_lr_cooldown;
  ++reductions_;
  if (options_.log) {
    std::printf("%s: %s has not improved in %s: learning rate scaled to %g of the schedule's\n",
                options_.name.c_str(), options_.monitor.c_str(), evaluations(options_.reduce_lr_patience).c_str(), next);
    std::fflush(stdout);
  }
}

std::optional<std::int64_t> last_evaluated_step(const ValidationHook* hook) {
  if (hook == nullptr || hook->history().empty()) return std::nullopt;
  return hook->history().back().global_step;
}

}  // namespace cohort
