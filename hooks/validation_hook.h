#pragma once
// Evaluates held-out data during training, on the chief: the loss and metrics written as an
// "eval" run beside the training summaries, the best parameters kept, and training stopped when
// they stop improving (Keras's validation_data with EarlyStopping and ModelCheckpoint's
// save_best_only; TensorFlow's train_and_evaluate with stop_if_no_decrease_hook).

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cohort/core/nn/data/dataset.h"
#include "cohort/core/train/session.h"
#include "cohort/hooks/early_stopping_hook.h"

namespace cohort {

class SummaryWriter;

struct ValidationHookOptions {
  /// The held-out examples (Dataset::split's second part, or a file of their own).
  data::Dataset data{};
  /// Evaluate at every multiple of this many global steps, and once more at the end of training
  /// when the last evaluation is of an earlier step (unless at_end is false: a program that
  /// evaluates the final model itself, and adds that evaluation to the same run with
  /// write_final_evaluation and last_evaluated_step, as train does).
  std::int64_t every_steps = 1000;
  bool at_end = true;
  /// Examples per evaluation batch.
  std::int64_t batch_size = 1000;
  /// Where the results go as summaries (TensorBoard shows them as a run beside the training
  /// one); empty: "eval" in the session's summary_dir, else in its checkpoint_dir, else none.
  std::string output_dir{};
  /// What "better" means: "loss" or one of the model's metrics ("accuracy", "mse", ...), lower
  /// or higher being better (kAuto: as the metric says, Metric::higher_is_better: higher for an
  /// accuracy, precision, recall, f1, auc or pr_auc, lower for the loss, "mse" and "mae"; a
  /// metric of one's own that does not say is refused when the session starts, naming it).
  std::string monitor = "loss";
  EarlyStoppingMode mode = EarlyStoppingMode::kAuto;
  /// An improvement must beat the best so far by more than this.
  double min_delta = 0;
  /// Stop training after this many evaluations in a row without improvement; 0: never.
  std::int64_t patience = 0;
  /// Keras's ReduceLROnPlateau on the same evaluations: after reduce_lr_patience evaluations
  /// in a row without improvement, the learning rate of every worker is multiplied by
  /// reduce_lr_factor (in (0, 1); 0: never), from the chief's next step and in every mode
  /// (Trainer::set_learning_rate_scale, on top of the schedule); then reduce_lr_cooldown
  /// evaluations pass before the count starts again. The factors together never go below
  /// min_learning_rate_scale. The scale and the counts are kept in checkpoints.
  double reduce_lr_factor = 0;
  std::int64_t reduce_lr_patience = 0;
  std::int64_t reduce_lr_cooldown = 0;
  double min_learning_rate_scale = 0;
  /// Keep the best parameters: a checkpoint written here at each improvement (the latest
  /// checkpoint in it is the best), which restore_checkpoint or warm_start_from can load. Empty:
  /// none. It must not be the session's checkpoint_dir. The best value and the evaluations
  /// without improvement (towards patience and a reduction) are kept in the session's
  /// checkpoints, so that a job restarted from them goes on counting (save_state). In the async
  /// modes other workers' pushes may reach the parameters between the evaluation and the save.
  std::string best_dir{};
  /// A line on stdout per evaluation.
  bool log = true;
  /// Names the evaluation, for a session with several (a validation set and a test set, say):
  /// its log lines ("<name> at global step ..."), its summaries' default output_dir ("eval" for
  /// "validation", else "eval_<name>", as TensorFlow's named evaluations) and its state in
  /// checkpoints ("<name>/<monitor>/..."). Two hooks of one session need different names.
  /// Letters, digits, '_', '-' and '.'.
  std::string name = "validation";
  /// Share each evaluation out among the workers (Trainer::evaluate_across), in allreduce mode
  /// (or local mode with one worker, where it is the chief's own): give the hook in `hooks`, on
  /// every worker, each with its own part of the held-out data as `data` (Dataset::shard(worker
  /// index, workers); a part may be empty). Every worker evaluates
  /// its part on the chief's parameters and gets the whole set's metrics; the chief alone
  /// prints, writes summaries, saves the best and lowers the learning rate, and training stops
  /// when patience runs out, on every worker alike. false: the chief evaluates all of `data`.
  bool shared = false;
};

/// One evaluation: the global step, the loss, and each metric of the model's metric_names().
struct Validation {
  std::int64_t global_step = 0;
  double loss = 0;
  std::vector<double> metrics;
  double monitored = 0;  ///< the value of options.monitor
  bool improved = false;
};

/// Evaluates options.data with the trainer (Trainer::evaluate: the current parameters, dropout
/// off) at every multiple of every_steps global steps and at the end, on the chief alone (give
/// it in chief_only_hooks; on another task it does nothing), or shared out among the workers
/// (options.shared). Each evaluation is printed, written as summaries (evaluation_scalars, the
/// evaluator job's tags, in the eval directory), compared with the best so far,
/// saved to best_dir when it improves, and, after `patience` evaluations without improvement,
/// ends training (the chief's stop request ends every mode). A NaN never improves. Throws
/// InvalidArgument for bad options at construction, and when the session starts for a monitor
/// the model does not report or data that does not fit the model. Not thread-safe (used by the
/// session).
class ValidationHook : public SessionRunHook {
 public:
  explicit ValidationHook(ValidationHookOptions options);
  ~ValidationHook() override;

  void begin() override;
  void after_create_session(MonitoredSession& session) override;
  SessionRunArgs before_run(RunContext& context) override;
  void after_run(RunContext& context, const SessionRunValues& values) override;
  void end(MonitoredSession& session) override;
  std::string collective() const override;
  /// The best value, its step, and the counts towards patience and a reduction, as of the last
  /// evaluation during training (not the one after the end), so that a job restarted from its
  /// checkpoints (a requeued batch job) goes on counting as one run would: under
  /// "<name>/<monitor>/...", with the step the next evaluation is due at (one due when the
  /// checkpoint was saved, by a CheckpointSaverHook ahead of this hook, comes at the first step).
  /// Restored with patience run out, training stops before its first step (no step, no new
  /// checkpoint). The chief's; on the other workers
  /// of a shared hook the counts start afresh, and the chief's stop ends training for all.
  void save_state(std::map<std::string, std::string>& metadata) const override;
  void restore_state(const std::map<std::string, std::string>& metadata) override;
  /// "<name>/": a session refuses two hooks of the same name.
  std::string state_scope() const override;

  /// Every evaluation of this session, in order.
  const std::vector<Validation>& history() const { return history_; }
  /// The best evaluation so far, none before the first; one restored from a checkpoint
  /// (restore_state) holds the monitored value and its step alone.
  const Validation* best() const { return best_ ? &*best_ : nullptr; }
  /// The checkpoint of the best evaluation (empty without best_dir).
  const std::string& best_checkpoint() const { return best_checkpoint_; }
  /// True once it has ended training for want of improvement.
  bool stopped() const { return stopped_; }
  /// The learning rate's reductions so far in this session.
  std::int64_t reductions() const { return reductions_; }

 private:
  // Evaluates at `step`; true when patience has run out. `training`: false for the evaluation
  // after the end, which changes no learning rate.
  bool validate(MonitoredSession& session, std::int64_t step, bool training = true);
  // After an evaluation: reduces the learning rate when reduce_lr_patience has run out.
  void reduce_on_plateau(MonitoredSession& session, const Validation& v);
  // Takes the state save_state() writes from the counts as they stand.
  void keep_state();
  // "<name>/<monitor>/<field>": a key of that state.
  std::string state_key(const char* field) const;

  ValidationHookOptions options_;
  bool active_ = false;  // evaluates: on the chief, or on every worker when shared
  bool chief_ = false;   // prints, writes, saves and lowers the learning rate
  std::vector<std::string> metric_names_;
  bool lower_ = true;  // a lower monitored value is the better (options.mode, the model's metric)
  std::string summary_dir_;                 // where the chief writes its summaries (empty: none)
  std::unique_ptr<SummaryWriter> writer_;  // a session's, from its first write to its end
  std::int64_t first_step_ = 0;            // the session's first step: its event file's start
  std::int64_t next_ = -1;  // the step from which the next evaluation is due
  std::vector<Validation> history_;
  std::optional<Validation> best_;  // of this session, or of the run it resumes
  std::int64_t without_improvement_ = 0;
  std::int64_t plateau_ = 0;   // evaluations without improvement counted towards a reduction
  std::int64_t cooldown_ = 0;  // evaluations still to pass before counting again
  std::int64_t reductions_ = 0;
  std::string best_checkpoint_;
  bool stopped_ = false;
  bool stop_at_start_ = false;  // restored with patience run out: stop before the first step
  std::map<std::string, std::string> state_;  // for save_state, as of the last evaluation in training
};

/// The global step of `hook`'s last evaluation in this session (the last point of its eval run,
/// for write_final_evaluation); none without a hook or before its first evaluation.
std::optional<std::int64_t> last_evaluated_step(const ValidationHook* hook);

}  // namespace cohort
