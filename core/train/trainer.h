#pragma once
// One worker's training loop body: towers, data, and the replication mode.

#include <chrono>
#include <array>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "cohort/core/dist/replication.h"
#include "cohort/core/io/safetensors.h"
#include "cohort/core/nn/data/batch_iterator.h"
#include "cohort/core/nn/data/dataset.h"
#include "cohort/core/nn/data/prefetcher.h"
#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/model.h"
#include "cohort/core/nn/moving_average.h"
#include "cohort/core/nn/optimizer.h"

namespace cohort {

class Server;
namespace mpi {
class Comm;
}  // namespace mpi

/// Where a run starts: a checkpoint's global step and the examples trained by then
/// (Trainer::examples_at), or {0, 0}.
struct ResumePoint {
  std::int64_t global_step = 0;
  std::int64_t examples = 0;
};

struct TrainerOptions {
  ReplicationOptions replication;
  std::int64_t batch_size = 64;  ///< examples per worker step, split over the towers
  /// Image normalisation for every batch (training and evaluate()), random crops and flips for
  /// training batches (see data::ImageOptions).
  data::ImageOptions image;
  /// Batch normalisation layers built with synchronised statistics reduce them over every
  /// replica (each replica at batch B then equals one process at W·B). Needs a mode in which
  /// every replica computes every step: allreduce, or sync without backup workers; one tower.
  bool sync_batch_norm = false;
  int towers = 1;                ///< model replicas on this worker, one thread each
  /// Batches each worker computes per global step, their gradients averaged into one update:
  /// the step of a batch this many times larger, in the memory of one batch (gradient
  /// accumulation). Not with gradients sent during the backward pass (bucket_bytes).
  int accumulation_steps = 1;
  /// The CUDA device of each tower (see core/gpu_placement.h); empty: the towers compute on the
  /// host. Parameters stay on the host either way (Model::set_gpu says what is copied).
  std::vector<int> gpus;
  bool allow_tf32 = false;       ///< GPU towers may use TF32 tensor cores
  /// Initialisation, shuffling, augmentation and dropout derive from it; each worker but worker
  /// 0 (which draws as local mode does) shuffles, augments and drops out from a seed of its own.
  std::uint64_t seed = 1;
  /// Passes over this replica's data, after which its input has ended (end_of_input()) and a
  /// session stops, as TensorFlow's does at a finite dataset's OutOfRangeError; 0: the data
  /// repeats, reshuffled every epoch, until a hook stops training.
  std::int64_t epochs = 0;
  std::string model_name;        ///< recorded in checkpoints
  /// The variables to train (Graph::matching's regular expression, as TensorFlow's var_list or
  /// Keras's trainable flags choose them); the others are held as they are (frozen: no update,
  /// no weight decay; batch normalisation's moving statistics still follow the data). Empty:
  /// every variable. A pattern that matches no variable is an InvalidArgument listing them.
  std::string trainable_vars{};
  /// Factors on the learning rate by variable (PyTorch's parameter groups): pairs of a pattern
  /// (Graph::matching's regular expression) and a factor above 0. A variable takes the factor
  /// of the first pattern that matches it, 1 if none does; weight decay scales with it. A
  /// pretrained backbone at a tenth of its new head's rate: {{"conv", 0.1}}. A pattern that
  /// matches no trainable variable is an InvalidArgument listing them; so is one that never
  /// applies (each variable it matches taken by an earlier pattern, or left out of
  /// trainable_vars), and a factor that is not finite and above 0.
  std::vector<std::pair<std::string, double>> learning_rate_factors{};
  /// In (0, 1): the chief (replica 0) keeps an exponential moving average of the parameters with
  /// this decay (ExponentialMovingAverage, TensorFlow 1's with num_updates = the global step),
  /// updated from the parameters each of its steps starts from; its evaluate() uses the averages,
  /// and its checkpoints hold them ("<variable>/ExponentialMovingAverage"). 0: none.
  double moving_average_decay = 0;
  /// A training step of one's own in place of the model's train_step(), for what one loss on
  /// the model's output does not express (a GAN: the discriminator's step and the generator's
  /// through Model::forward() and Model::backward(), docs/MODELS.md). Given tower `tower`'s
  /// model (the factory's), its batch and the step's context, it overwrites `grads` (the graph's
  /// num_parameters() floats, every variable of the graph: a generator's as well as the model's)
  /// with the step's gradient and returns the step's loss and metrics. Every mode then treats
  /// that gradient as the model's (averaged over towers and replicas, applied by the optimizer
  /// to every variable), and the session's hooks, checkpoints and evaluation are as ever.
  /// Host towers only (InvalidArgument with gpus). Empty: Model::train_step.
  using Step = std::function<StepMetrics(Model& model, int tower, const Tensor& features,
                                         const Targets& targets, std::span<float> grads,
                                         const OpContext& context)>;
  Step step{};

  /// Examples one global step consumes over `workers` replicas: a replica's batch in the async
  /// modes, k (or all replicas') batches in sync, every replica's in allreduce; each times
  /// accumulation_steps.
  std::int64_t examples_per_global_step(int workers) const;
  /// The last global step of `epochs` passes over `examples` training examples (every worker's
  /// together), counted globally: ceil(epochs * examples / examples_per_global_step(workers)),
  /// or resumed `from` a checkpoint, its step plus the steps the examples left take at this
  /// run's examples a step (none where none are left). InvalidArgument unless epochs and
  /// examples are at least 1.
  std::int64_t steps_for_epochs(std::int64_t epochs, std::int64_t examples, int workers,
                                ResumePoint from = {}) const;
};

/// Collective over the server's replicas: where a session with `checkpoint_dir` will start, as
/// the chief reads it from the latest checkpoint's header (the examples it counts, or where it
/// counts none, its steps at `options`' examples a step); {0, 0} without one, or where the chief
/// cannot read it (the session then says why, or falls back to an older one). For a run whose
/// length counts epochs (TrainerOptions::steps_for_epochs) to plan it, learning-rate schedule
/// included, before the trainer exists.
ResumePoint resume_point(const Server& server, const std::string& checkpoint_dir,
                         const TrainerOptions& options);

/// The values of one step, by name: what a session can fetch.
struct StepValues {
  std::int64_t global_step = 0;
  float loss = 0;
  float accuracy = 0;
  /// The model's metrics, in Model::metric_names() order (accuracy among them).
  std::array<float, StepMetrics::kMaxMetrics> metrics{};
  /// Each metric's Metric::counts, summed over the step's batches and towers: what its value
  /// over several steps comes from (Metric::from_counts; EarlyStoppingHook sums them). Empty
  /// where a program's own step (TrainerOptions::step) computes the metrics.
  std::vector<std::vector<double>> metric_counts;
  double learning_rate = 0;
  std::int64_t examples = 0;  ///< examples this worker computed on
  bool applied = true;        ///< false: sync mode dropped this gradient as stale or surplus
  bool stop = false;          ///< the chief has stopped training
  /// When the phases ran (steady-clock seconds): before_step began, parameters were current,
  /// gradients were ready, the update was done.
  double pull_begin = 0, pull_end = 0, compute_end = 0, update_end = 0;
  /// Seconds spent waiting for other tasks: as the pull began (ssp's staleness bound), and as
  /// the update ended (sync mode's barrier).
  double pull_wait = 0, update_wait = 0;
};

/// Runs training steps on one replica (a worker, or the chief): splits each batch over the towers
/// (threads sharing the graph's parameters), averages their gradients, and hands them to the
/// replication mode. The mode itself stays inside: the session and hooks see what they need of
/// it through the members below (stop agreement, step times, the parameters for a checkpoint,
/// the global step, examples per step).
///
/// Construction and start() are collective over the replicas (and the ps tasks, for modes with a
/// store); step() may be too, depending on the mode. Not thread-safe: one thread drives it.
class Trainer {
 public:
  using ModelFactory = std::function<Model(Graph&)>;

  /// `model` is called once per tower; the towers share the variables it creates. `data` is this
  /// replica's shard; it must fit the model (Model::check_data: an InvalidArgument naming both
  /// otherwise). `server` may be null for --mode=local.
  Trainer(Server* server, Graph& graph, const ModelFactory& model, data::Dataset data,
          std::unique_ptr<Optimizer> optimizer, TrainerOptions options);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  /// Collective. The chief initialises the variables from the seed (unless `restored`: then the
  /// graph already holds restored values) and every replica starts from its parameters at
  /// `initial_step`; the others wait at most `max_wait` for the chief (default: the mode's
  /// wait_timeout). A replica resuming at a step past 0 moves its data to where an uninterrupted
  /// run would be (exactly so in sync and allreduce modes, where each replica consumes one batch
  /// per global step). Again after finish() in local and allreduce modes (a new session on the
  /// same trainer, every replica alike); not in the ps modes, whose finish() left the store for
  /// good: an InvalidArgument there, and while it is training.
  void start(std::int64_t initial_step = 0, bool restored = false,
             std::optional<std::chrono::milliseconds> max_wait = std::nullopt);
  /// The InvalidArgument start() would throw before doing anything, if any (a session checks
  /// first, before its hooks begin and the chief restores).
  void check_can_start() const;
  /// One step: forward, backward, update. Between start() and finish() (an InvalidArgument
  /// otherwise). `count_metrics` false leaves StepValues::metric_counts empty and, over towers or
  /// accumulated batches, the metrics the mean of the pieces' (what a session does on a step
  /// that fetches no metric: an AUC's counts cost a pass over its bins).
  StepValues step(bool count_metrics = true);
  /// Loss and metrics of the current parameters over `data`, in order (tower 0, no dropout, batch
  /// norm on its moving statistics, the options' image normalisation); of their moving averages
  /// where this replica keeps them (moving_average()). Like predict() and evaluate_across(), an
  /// InvalidArgument before the variables have values (a session's start, which initialises or
  /// restores them, restore(), warm_start() or load_parameters()): their zeros would score as a
  /// model.
  StepMetrics evaluate(const data::Dataset& data, std::int64_t batch_size = 1000);
  /// evaluate() shared out among the replicas (collective over them: every replica calls it at
  /// the same point, with the same batch size): each evaluates `part`, its own
  /// Dataset::shard(worker_index(), num_workers()) of the set, on the chief's parameters (its
  /// moving averages where it keeps them) and layer state, sent to every replica for it, and every
  /// replica gets the metrics of the whole set, as the chief's evaluate() of all of it would give
  /// (the loss up to its sum's rounding). Each replica's own parameters and state are put back
  /// after. At the end of training in any mode, or between steps in allreduce mode (between
  /// steps in another, an InvalidArgument); without a cluster, evaluate(part).
  StepMetrics evaluate_across(const data::Dataset& part, std::int64_t batch_size = 1000);
  /// The model's output for new examples `features` [n, example...], as evaluate() sees data:
  /// tower 0 without dropout, the options' image normalisation, the moving averages where this
  /// replica keeps them; a classifier's logits, a regression's values [n, output...], computed
  /// batch_size examples at a time. Host models (Model::predict).
  Tensor predict(const Tensor& features, std::int64_t batch_size = 1000);
  /// The same as the probabilities under the model's loss (Model::predict_probabilities: a
  /// softmax per row, a sigmoid per logit; InvalidArgument for a regression).
  Tensor predict_probabilities(const Tensor& features, std::int64_t batch_size = 1000);
  /// The moving average of the parameters (TrainerOptions::moving_average_decay) on the chief,
  /// null elsewhere, without one, and before the first start(). It starts at the parameters
  /// training starts from, or at the averages of the checkpoint restored, where it holds them.
  const ExponentialMovingAverage* moving_average() const {
    return has_average() ? &*average_ : nullptr;
  }
  /// Leaves training (collective with the ps tasks for modes with a store). With `fetch` the
  /// graph first takes the final parameters (fetch_parameters()), and keeps them: evaluate() and
  /// checkpoint() then use them. Without (after an error) it takes no collective step that
  /// peers may never join (Replication::abandon). Once finished, fetch_parameters() does nothing.
  void finish(bool fetch = true);

  Graph& graph() { return graph_; }
  Model& model() { return towers_.front().model; }
  Optimizer& optimizer() { return *optimizer_; }
  Mode mode() const { return options_.replication.mode; }
  /// The server target of this replica's task ("" in local mode without a server).
  const std::string& target() const { return target_; }
  std::int64_t global_step() const { return replication_->global_step(); }
  /// A fresh read of the global step (from the store in the ps modes, where other replicas move
  /// it); not collective. After take_final_parameters(), its step; once finished otherwise, the
  /// last step seen.
  std::int64_t read_global_step() {
    return final_step_ ? *final_step_ : left_ ? global_step() : replication_->read_global_step();
  }
  /// The graph takes the final parameters, with the store's global step read just before them
  /// (as checkpoint() reads them), and from here until the next start() fetch_parameters() and
  /// read_global_step() give that snapshot: the final checkpoint, the final evaluation and the
  /// step a program reports then describe the same parameters, where in the async modes other
  /// replicas' pushes move the store on meanwhile. Not collective; a session takes it as it
  /// closes, before the hooks' end(). Nothing before start() or after finish().
  void take_final_parameters();
  /// A fresh read of whether the chief has stopped training, in the ps modes (where the other
  /// replicas hear it through the store); false elsewhere, and once finished.
  bool read_stopped() { return !left_ && replication_->read_stopped(); }
  /// This replica's index and the number of replicas (0 and 1 without a cluster).
  int worker_index() const { return worker_index_; }
  int num_workers() const { return num_workers_; }
  /// Examples one global step consumes over the whole cluster: a replica's batch in the
  /// async modes, k (or all replicas') batches in sync, every replica's in allreduce.
  std::int64_t examples_per_global_step() const;
  /// Examples whose gradients went into the updates since start(), as far as this replica
  /// knows: where it applies every update (the sync chief), the gradients they averaged times the
  /// batch, which leaves out the workers that left; elsewhere the global steps since start()
  /// times examples_per_global_step(). The numerator of a run's images/s.
  std::int64_t examples_trained() const;
  /// The examples trained over the whole training, resumes included, up to global `step` (at or
  /// after the session's start): those of the checkpoint it started from (or its global steps'
  /// worth, when it holds no count), then examples_per_global_step() a step. What a checkpoint
  /// records, so that a resume with other workers, another batch size or accumulation finds
  /// its data position and counts its epochs by examples, not by steps
  /// (StopAtStepHook::after_examples).
  std::int64_t examples_at(std::int64_t step) const;
  /// On the chief, between restore() and the session's start: the examples the checkpoint
  /// recorded (none from a checkpoint that holds no count).
  std::optional<std::int64_t> restored_examples() const;

  /// True once this replica has trained on options.epochs passes over its data (never with
  /// epochs = 0). The position counts from the examples a session starts at, in this run's
  /// steps, as the data's resumed order does: exact in local and allreduce modes and in sync
  /// mode without backup workers, the replica's share of the global step otherwise.
  bool end_of_input() const;

  /// Whether to stop after this step, given this replica's wish: agreed across the replicas in
  /// allreduce mode (collective, every step); the ps modes hear the chief's stop through the store.
  bool agree_to_stop(bool mine);
  /// A factor in (0, 1] on the schedule's learning rate, in every replica (Keras's
  /// ReduceLROnPlateau; ValidationHook's reduce_lr_factor): given on the chief, the others hear
  /// it through the mode (Replication::set_learning_rate_scale): in allreduce mode every replica,
  /// the chief too, from the first step after the replicas next agree on it (at the end of a
  /// session's run, after the hooks' after_run: a hook's call applies from the next step, a call
  /// between runs from the step after the next), in sync mode from the next step, within a step
  /// or two in async and ssp.
  /// Kept in checkpoints and restored with them; a session that starts from the initialisers, or
  /// a warm start, starts at 1.
  /// InvalidArgument outside (0, 1], and on another replica than the chief while it trains
  /// with others (its scale would be dropped).
  void set_learning_rate_scale(double scale);
  /// The factor this replica's steps use (1 until the chief sets another).
  double learning_rate_scale() const { return replication_->learning_rate_scale(); }
  /// Shares this replica's recent mean step time; returns every replica's on the chief (in
  /// replica order), this one's alone elsewhere. Collective in allreduce mode: call it at the
  /// same step everywhere.
  std::vector<double> exchange_step_times(double mine);
  /// Makes the graph hold the current parameters (from the ps tasks in the modes that keep them
  /// there); not collective. After finish(), nothing: the graph holds the final ones.
  void fetch_parameters() {
    if (!left_ && !final_step_) replication_->fetch_parameters(graph_.values());
  }
  /// The current parameters and optimizer state as a checkpoint at the global step, with the
  /// model, mode and optimizer in its metadata (fetch_parameters() first), and the moving
  /// averages where this replica keeps them.
  Checkpoint checkpoint();
  /// Loads a checkpoint's variables, optimizer state and moving averages (where both keep them)
  /// into the graph, optimizer and average (before start(..., restored = true)). Throws
  /// CheckpointError when it does not fit the model.
  void restore(const Checkpoint& checkpoint);
  /// After finish(): loads a checkpoint's variables and layer state, and its moving averages
  /// where this replica keeps them, for evaluate(), predict() and checkpoint() (Keras's
  /// restore_best_weights, from ValidationHook's best_checkpoint(); the optimizer state is left
  /// as it is). Throws InvalidArgument before finish() (training would overwrite them),
  /// CheckpointError when it does not fit the model.
  void load_parameters(const Checkpoint& checkpoint);
  /// Loads a checkpoint's variables (and layer state) alone, as a starting point: the optimizer
  /// starts afresh (before start(0, restored = true)). With `vars` (a regular expression, see
  /// restore_variables_matching()) only the variables it selects; the others start from their
  /// initialisers. Returns how many variables were loaded. Throws CheckpointError when the
  /// checkpoint does not fit the model (the selected variables), InvalidArgument for a bad `vars`.
  std::size_t warm_start(const Checkpoint& checkpoint, const std::string& vars = "");
  /// The mode's counters for the log, e.g. "dropped 3 stale or surplus gradients".
  std::string stats() const { return replication_->stats(); }
  /// Allreduce: gradient bytes this worker has handed to MPI (Replication::gradient_bytes_sent).
  std::int64_t gradient_bytes_sent() const { return replication_->gradient_bytes_sent(); }
  /// Sync mode: this replica's gradients dropped as stale or surplus.
  std::int64_t dropped_gradients() const { return replication_->dropped_gradients(); }

 private:
  // On stderr where this run's schedule gives another rate at `checkpoint`'s step than the one
  // it recorded (a resume under a longer run, whose decay then jumps back up).
  void warn_of_another_schedule(const Checkpoint& checkpoint) const;
  // On stderr where the optimizer's settings differ from those `checkpoint` recorded, and where
  // it holds moving averages that this run does not keep.
  void warn_of_other_settings(const Checkpoint& checkpoint) const;
  // InvalidArgument, naming Trainer::`what`, unless the variables were initialised or loaded.
  void check_has_parameters(const char* what) const;
  // predict() or predict_probabilities().
  Tensor predict_outputs(const Tensor& features, std::int64_t batch_size, bool probabilities);
  struct Tower {
    Model model;
    data::Batch batch;
    std::vector<float> own_grads;
    std::span<float> grads;  // own_grads, or the replication's gradient memory (tower 0)
    StepMetrics metrics;
    std::vector<std::vector<double>> counts;  // the metrics' counts of its last batch
  };
  void run_tower(std::size_t index);
  void compute_batch(bool last_batch, StepValues& values, float share);
  static void add_counts(const std::vector<std::vector<double>>& counts,
                         std::vector<std::vector<double>>& total);
  // Tower `index`'s step on `batch`: options_.step, or its model's train_step.
  StepMetrics tower_step(std::size_t index, const data::Batch& batch, const OpContext& context);
  void accumulate_batches(int k, std::uint64_t step_seed, StepValues& values);
  void tower_thread(std::size_t index);
  // Whether the chief's moving average has started (from start() on).
  bool has_average() const { return average_ && !average_->values().empty(); }

  Graph& graph_;
  TrainerOptions options_;
  std::string target_;
  const mpi::Comm* replicas_ = nullptr;  // the server's replicas, for evaluate_across()
  int worker_index_ = 0;
  std::uint64_t seed_ = 0;  // this worker's draws (shuffles, augmentation, dropout) derive from it
  int num_workers_ = 1;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<Replication> replication_;
  std::unique_ptr<CrossReplicaSum> cross_replica_;
  data::BatchPrefetcher batches_;  // the next batches fill while a step computes
  data::Batch batch_;
  std::vector<Tower> towers_;
  std::uint64_t step_seed_ = 0;
  bool has_parameters_ = false;         // initialised or loaded: start(), restore(), load_parameters(), warm_start()
  bool started_ = false;                // start() done
  bool left_ = false;                   // finish() done
  std::optional<std::int64_t> final_step_;  // take_final_parameters()'s step, until start()
  std::int64_t start_step_ = 0;         // the global step at start()
  std::int64_t batches_taken_ = 0;      // this replica's batches since global step 0
  bool count_metrics_ = true;           // this step's: step()'s argument
  std::int64_t examples_at_start_ = 0;  // the examples trained up to global step examples_step_,
  std::int64_t examples_step_ = 0;      // the chief's at start()
  std::optional<std::int64_t> restored_examples_;  // restore()'s checkpoint's, for start()
  std::vector<float> accumulated_;      // accumulation_steps > 1: the step's gradient sum so far
  std::int64_t applied_at_start_ = 0;   // replication_->gradients_applied() at start()
  std::optional<ExponentialMovingAverage> average_;  // the chief's, with moving_average_decay
  bool average_restored_ = false;       // restore() loaded it: start() keeps it

  // Towers beyond the first run on their own threads, released once per step.
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_, finished_;
  std::int64_t generation_ = 0;
  int running_ = 0;
  bool quit_ = false;
  std::exception_ptr tower_error_;

  // GPU towers: the graph's values and the towers' gradients page-locked for their copies
  // (Model::pin_for_gpu). Last, so released before the memory they lock is freed.
  std::vector<std::shared_ptr<const void>> gpu_pins_;
};

}  // namespace cohort
