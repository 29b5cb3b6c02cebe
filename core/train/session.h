#pragma once
// The monitored session: the seed's training loop,
//
//   while (!session.should_stop()) session.run();
//
// with a chain of hooks around every step. The chief initialises the parameters or restores them
// from the latest checkpoint, and alone writes files; other workers wait until it is ready.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cohort/core/train/trainer.h"

namespace cohort {

class MonitoredSession;
class CheckpointManager;

/// What a hook asks the next step to fetch, by name. Scalars of every step: "loss",
/// "global_step", "learning_rate", "examples" (this worker's batch), "step_seconds",
/// "gradient_applied" (0 when sync mode dropped this worker's gradient), and each of the model's
/// metrics by its name ("accuracy" for a classifier, "top5_accuracy", "mse", ...).
struct SessionRunArgs {
  std::vector<std::string> fetches;
};

/// The values of exactly the fetches asked for, by name.
class SessionRunValues {
 public:
  /// Throws InvalidArgument naming `name` if it was not fetched.
  double get(const std::string& name) const;
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  const std::map<std::string, double>& all() const { return values_; }
  void set(const std::string& name, double value) { values_[name] = value; }
  /// A fetched metric's Metric::counts for the step (StepValues::metric_counts): summed over
  /// steps, its value over them is Metric::from_counts of the sums, where the mean of the
  /// steps' values is not (a recall of batches without a positive). Empty for another fetch, or
  /// where the program's own step computes the metrics.
  std::span<const double> counts(const std::string& name) const {
    const auto it = counts_.find(name);
    return it == counts_.end() ? std::span<const double>{} : std::span<const double>(it->second);
  }
  void set_counts(const std::string& name, std::vector<double> counts) { counts_[name] = std::move(counts); }

 private:
  std::map<std::string, double> values_;
  std::map<std::string, std::vector<double>> counts_;
};

/// Handed to hooks around one run() call.
class RunContext {
 public:
  RunContext(MonitoredSession& session, SessionRunArgs original) : session_(session), original_(std::move(original)) {}
  /// Ends training after this step (TensorFlow's run_context.request_stop()).
  void request_stop() { stop_requested_ = true; }
  bool stop_requested() const { return stop_requested_; }
  /// The fetches the caller of run() asked for.
  const SessionRunArgs& original_args() const { return original_; }
  MonitoredSession& session() { return session_; }

 private:
  MonitoredSession& session_;
  SessionRunArgs original_;
  bool stop_requested_ = false;
};

/// A hook into the training loop (TensorFlow's SessionRunHook). Override what you need.
/// Called on the main thread: begin() once before the session exists, after_create_session() once
/// it is initialised or restored, before_run()/after_run() around every step, end() once when the
/// session closes without an error.
class SessionRunHook {
 public:
  virtual ~SessionRunHook() = default;
  virtual void begin() {}
  virtual void after_create_session(MonitoredSession&) {}
  /// The names returned here are fetched for this step and handed to after_run().
  virtual SessionRunArgs before_run(RunContext&) { return {}; }
  virtual void after_run(RunContext&, const SessionRunValues&) {}
  virtual void end(MonitoredSession&) {}
  /// What the hook is, when it takes part in collectives over the replicas and so must run on
  /// every one of them (a session refuses it among chief_only_hooks); empty otherwise.
  virtual std::string collective() const { return {}; }
  /// State the hook keeps across a restart of the job (an early stop's count of evaluations
  /// without improvement): the chief's session adds it to the metadata of every checkpoint it
  /// saves, and gives the metadata of the checkpoint it restores back to restore_state(),
  /// after begin() and before after_create_session(). Keys should name the hook
  /// ("validation/loss/best"); restore_state must accept metadata without them (a checkpoint
  /// written before, or without the hook). A bad value is a CheckpointError.
  virtual void save_state(std::map<std::string, std::string>& /*metadata*/) const {}
  virtual void restore_state(const std::map<std::string, std::string>& /*metadata*/) {}
  /// What save_state's keys start with ("validation/"), where it writes any: a session refuses
  /// two hooks of the same scope, whose states would overwrite each other.
  virtual std::string state_scope() const { return {}; }
};

using HookList = std::vector<std::shared_ptr<SessionRunHook>>;

/// When one step's phases ran, for profiling (seconds since the session started).
struct StepTrace {
  struct Phase {
    const char* name;  ///< "pull", "forward_backward", "push", "wait"
    double begin;
    double end;
  };
  std::int64_t global_step = 0;
  std::vector<Phase> phases;
};

/// Settings of the session itself (TensorFlow's ConfigProto, the parts that apply here).
struct SessionConfig {
  /// The chief prints where every variable lives (the replica device setter's table) at start.
  bool log_device_placement = false;
};

/// Everything a session is made from: TensorFlow's MonitoredTrainingSession arguments, in its
/// order. One struct for both ways to make a session: MonitoredSession runs the hooks it is given;
/// MonitoredTrainingSession() (hooks/) also turns the cadences marked [default hooks] into the
/// standard hooks. Every field is read by one of the two.
struct SessionOptions {
  /// This task's server target (Server::target()); empty in local mode. When set, the session
  /// checks that it names the server its trainer runs on (an InvalidArgument otherwise, e.g. for
  /// a "grpc://" target carried over from a TensorFlow program).
  std::string master{};
  bool is_chief = true;
  /// The chief restores the latest checkpoint here at start (when there is one); the checkpoint
  /// hooks write here, and the summary hooks unless summary_dir is set. Empty: no restore.
  std::string checkpoint_dir{};
  HookList hooks{};             ///< run on every replica
  HookList chief_only_hooks{};  ///< run on the chief only (TensorFlow's rule)
  /// [default hooks] Checkpoint cadence: every save_checkpoint_steps global steps when that is
  /// > 0 (it takes precedence), else every save_checkpoint_secs seconds when that is > 0, else
  /// no periodic checkpoints (the session still restores from checkpoint_dir).
  std::int64_t save_checkpoint_secs = 600, save_checkpoint_steps = 0;
  /// [default hooks] Summary cadence, TensorFlow's rule: every save_summaries_steps global steps
  /// when that is given (0: no summaries), else every save_summaries_secs seconds when that is
  /// > 0, else every 100 steps. Steps given with seconds > 0 is refused, as TensorFlow does.
  std::optional<std::int64_t> save_summaries_steps{};
  std::int64_t save_summaries_secs = 0;
  /// [default hooks] StepCounterHook every this many global steps; 0: none.
  std::int64_t log_step_count_steps = 100;
  /// The other replicas wait at most this long for the chief to initialise or restore the
  /// parameters (0: wait forever).
  std::chrono::seconds max_wait_secs{600};
  /// [default hooks] Where the summary and step-counter hooks go; empty: checkpoint_dir. Either
  /// directory brings them (TensorFlow's rule), checkpoint_dir alone the checkpoint saver.
  std::string summary_dir{};
  SessionConfig config{};
  /// How many checkpoints the chief keeps in checkpoint_dir (0: all).
  int keep_checkpoint_max = 5;
  /// Of the checkpoints keep_checkpoint_max would delete, one every this many hours is kept for
  /// good (TensorFlow's keep_checkpoint_every_n_hours; 0: off; see CheckpointManager).
  double keep_checkpoint_every_n_hours = 0;
  /// [default hooks] The summary hook also writes a histogram of every variable at each write
  /// (SummarySaverHookOptions::histograms).
  bool summary_histograms = false;
  /// Stop cleanly at the end of the step on SIGTERM or SIGUSR1 (a second signal ends the
  /// process at once).
  bool stop_on_signals = true;
  /// Every this many local steps the replicas share their mean step time (worker_step_times()).
  std::int64_t step_time_every_steps = 100;
  /// A checkpoint file, or a directory whose latest checkpoint is taken, that the chief loads
  /// the variables from when checkpoint_dir holds no checkpoint (TensorFlow's Scaffold init_fn,
  /// or an Estimator's warm start): training starts there at global step 0, the optimizer and
  /// the data afresh. The file may also be weights another framework saved in safetensors,
  /// under the model's variable names and layouts (read_safetensors()). A checkpoint in checkpoint_dir wins, so a restarted job resumes. Its
  /// variables must be the model's (a CheckpointError names those that differ).
  std::string warm_start_from{};
  /// With warm_start_from: a regular expression choosing the variables to load, matched from
  /// the start of each name (TensorFlow's vars_to_warm_start; see restore_variables_matching());
  /// the others start from their initialisers, and the checkpoint's other tensors are ignored.
  /// Empty: every variable, and the checkpoint must hold exactly the model's.
  std::string warm_start_vars{};
  /// What the parameters mean beyond their shapes, as names and values: how the data are
  /// prepared and what the classes are ({"--standardize", "true"}, {"classes", "cat,dog"}). The
  /// chief records them in every checkpoint it saves ("settings/<name>" in its metadata) and
  /// refuses to restore one that recorded another value of any of them (InvalidArgument naming
  /// both), where training on would go on from parameters that mean something else. A
  /// checkpoint that recorded none of a setting restores; warm starts are not checked.
  std::map<std::string, std::string> settings{};
};
using MonitoredSessionOptions = SessionOptions;
using MonitoredTrainingSessionOptions = SessionOptions;

/// Runs training steps of a Trainer with hooks around them.
///
/// Construction is collective over the workers (and ps tasks, through the trainer's store): it
/// calls begin() on the hooks, initialises or (chief, with a checkpoint) restores the parameters,
/// then after_create_session(). Errors follow TensorFlow's MonitoredSession used in a `with`
/// block: an exception from a step or a hook propagates out of run(), should_stop() is true from
/// then on, and end() is not called on the hooks, not by close() either (docs/HOOKS.md); close()
/// after a clean stop calls end() on every hook. Not thread-safe.
class MonitoredSession {
 public:
  MonitoredSession(Trainer& trainer, SessionOptions options);
  ~MonitoredSession();
  MonitoredSession(const MonitoredSession&) = delete;
  MonitoredSession& operator=(const MonitoredSession&) = delete;

  /// True after a hook requested a stop, this replica's input ended (TrainerOptions::epochs),
  /// the chief stopped training, a signal arrived, or an error escaped run().
  bool should_stop() const;
  /// One training step with the hooks around it. Returns the values of `fetches` (same names
  /// as SessionRunArgs). Blocking; collective in the modes whose steps are.
  SessionRunValues run(const std::vector<std::string>& fetches = {});
  /// Ends the session: takes the final parameters and their global step into the graph
  /// (Trainer::take_final_parameters), calls end() on the hooks (unless an error happened; every
  /// hook's, even after one threw), then leaves training with those parameters in the graph
  /// (Trainer::finish), ready to evaluate or save; releases the checkpoint directory's lock; then throws the first error
  /// an end() threw. Called by the destructor if needed, which cannot throw that error: it
  /// prints it, and app::Run then fails the program (app::fail_at_exit). Call close() to have it
  /// thrown to you. In allreduce mode collective over the replicas of a node (ReplicaBoard,
  /// NodeSum::leave), which is how a replica whose loop ended early is told from one that trains
  /// on: every replica closes at the same point of its program, before any collective step of
  /// its own that comes after.
  void close();
  /// Stops training: from a hook's after_create_session() before the first step (StopAtStepHook
  /// calls it when the restored step is already its last, so a finished run restarted trains no
  /// further), or during a step (as RunContext::request_stop) after it. The workers agree on it
  /// as on any stop.
  void request_stop() { stop_ = true; }

  bool is_chief() const { return options_.is_chief; }
  /// The server target the session runs on ("" in local mode).
  const std::string& master() const { return options_.master; }
  std::int64_t global_step() const { return trainer_.global_step(); }
  /// A fresh read of the global step, which other workers move in the async modes.
  std::int64_t read_global_step() { return trainer_.read_global_step(); }
  int worker_index() const { return trainer_.worker_index(); }
  int num_workers() const { return trainer_.num_workers(); }
  Trainer& trainer() { return trainer_; }
  const SessionOptions& options() const { return options_; }
  /// The chief: the step of the checkpoint it restored at start, if any. Other workers restore
  /// nothing (std::nullopt); they start at global_step().
  std::optional<std::int64_t> restored_step() const { return restored_step_; }
  const StepTrace& last_trace() const { return trace_; }
  /// Seconds since the session started (the clock of StepTrace).
  double now() const;

  /// Chief only: writes a checkpoint of the current parameters, optimizer state and data
  /// position to `dir` (model.ckpt-<step>.safetensors; empty: checkpoint_dir). Returns its path.
  /// A directory other than checkpoint_dir is locked for writing (CheckpointManager::
  /// lock_for_writing) at its first save and keeps keep_checkpoint_max checkpoints; the session
  /// releases every lock as it closes, also after an error.
  std::string save_checkpoint(const std::string& dir = "");
  /// Every worker's mean step time (seconds) as last shared (every step_time_every_steps local
  /// steps), in worker order; on the chief only (this worker's alone elsewhere). Not collective:
  /// the session gathers at a fixed cadence on every worker.
  const std::vector<double>& worker_step_times() const { return worker_step_times_; }

 private:
  void create();
  HookList all_hooks() const;

  Trainer& trainer_;
  SessionOptions options_;
  std::unique_ptr<CheckpointManager> checkpoints_;
  std::vector<std::unique_ptr<CheckpointManager>> other_checkpoints_;  // save_checkpoint(dir)'s
  // The manager of `dir` (checkpoints_ for checkpoint_dir's), made and locked on first use.
  CheckpointManager& checkpoint_manager(const std::string& dir);
  void release_checkpoint_dirs();
  // InvalidArgument unless a checkpoint's `metadata` recorded options_.settings' values, where
  // it recorded them at all.
  void check_settings(const std::map<std::string, std::string>& metadata) const;
  std::optional<std::int64_t> restored_step_;
  std::chrono::steady_clock::time_point start_;
  StepTrace trace_;
  double step_seconds_sum_ = 0;
  std::int64_t step_seconds_count_ = 0;
  std::int64_t local_steps_ = 0;
  std::vector<double> worker_step_times_;
  bool stop_ = false;
  bool error_ = false;
  bool closed_ = false;
};

}  // namespace cohort
