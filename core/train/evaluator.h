#pragma once
// The evaluator job (TensorFlow's "evaluator" task): a process beside the training cluster that
// follows the chief's checkpoints and evaluates each one as it appears.
//
//   t=build/bin/train a="--mode=sync --checkpoint_dir=ckpt"
//   mpirun -np 1 $t --job_name=ps $a : -np 2 $t --job_name=worker $a : -np 1 $t --job_name=evaluator $a
//
// The evaluator takes no part in training (no gradient, no hosted memory, no collective with the
// replicas); it reads the files the chief writes and ends when every replica is done.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cohort/core/dist/server.h"
#include "cohort/core/nn/data/batch_iterator.h"
#include "cohort/core/nn/data/dataset.h"
#include "cohort/core/nn/model.h"

namespace cohort {

struct EvaluatorOptions {
  /// The directory the chief writes checkpoints to (required).
  std::string checkpoint_dir{};
  /// Where the evaluator's summaries go (evaluation_scalars at each checkpoint's global step);
  /// empty: checkpoint_dir/eval, where TensorBoard shows them beside the training curves.
  std::string output_dir{};
  /// How often the checkpoint index is looked at.
  std::chrono::milliseconds poll{500};
  std::int64_t batch_size = 1000;
  /// The image normalisation the trainer uses (its random crops and flips play no part).
  data::ImageOptions image{};
  /// Evaluate the moving averages of the variables where a checkpoint holds them (the chief
  /// keeps them with TrainerOptions::moving_average_decay), as TensorFlow's evaluators restore
  /// ExponentialMovingAverage.variables_to_restore(); a checkpoint without them is evaluated on
  /// its variables, with a warning.
  bool moving_averages = false;
};

/// One checkpoint evaluated.
struct Evaluation {
  std::string checkpoint;  ///< its path
  std::int64_t global_step = 0;
  StepMetrics metrics;
};

/// The scalars of one evaluation in an eval run: "loss", then each of the model's metrics by its
/// name (`metric_names`, Model::metric_names(), in the order of `metrics.metrics`), as
/// TensorFlow's estimators name them in their eval directory. The evaluator, a ValidationHook
/// and a program's own final evaluation (write_evaluation) all write these, so that TensorBoard
/// and metrics.csv show one series whichever of them made a point.
std::vector<std::pair<std::string, double>> evaluation_scalars(const std::vector<std::string>& metric_names,
                                                               const StepMetrics& metrics);

/// Writes one evaluation (evaluation_scalars at `step`) to the eval run in `dir`, through a
/// SummaryWriter of its own for the time of the call (a new event file; the directory must not
/// be another writer's meanwhile): for a program that evaluates its final parameters itself
/// after the session has closed, as TensorFlow's train_and_evaluate writes its last evaluation.
/// `session_start`: the session's first step, for a session that wrote no other point to `dir`
/// (TensorBoard drops an earlier run's points from there on); none when it did, whose own
/// session start comes first. Throws what SummaryWriter throws.
void write_evaluation(const std::string& dir, std::int64_t step, const std::vector<std::string>& metric_names,
                      const StepMetrics& metrics, std::optional<std::int64_t> session_start = std::nullopt);

/// A program's own evaluation of its final parameters, made after its session has closed, added
/// to the eval run in `dir` once (write_evaluation): not when `last_point`, the step of the last
/// point the session wrote there (ValidationHook::history), is `step` already. `session_start`:
/// the session's first step, which starts the run's points when the session wrote none. The
/// training has ended well: a write that fails (a full disk) is a warning on stderr, not an
/// error. Returns whether the evaluation was written.
bool write_final_evaluation(const std::string& dir, std::int64_t step, const std::vector<std::string>& metric_names,
                            const StepMetrics& metrics, std::optional<std::int64_t> last_point,
                            std::int64_t session_start);

/// Blocking; for an evaluator task. Until every replica is done (Server::training_done), looks
/// at the latest checkpoint in options.checkpoint_dir every options.poll; each new one is loaded
/// into `model`'s variables (the model must be built as the trainer's is), evaluated on `data`,
/// printed as one line and written to the summaries. The chief's final checkpoint, written before
/// it says done, is evaluated last. An index or checkpoint that cannot be read (a file the chief
/// has just pruned) is a warning, and looked at again at the next poll. Returns the evaluations
/// in order. Throws InvalidArgument without a checkpoint_dir or on a computing task,
/// CheckpointError when a checkpoint does not fit the model, or when the final one is still
/// unreadable a few polls after training ended.
std::vector<Evaluation> run_evaluator(Server& server, Model& model, const data::Dataset& data,
                                      const EvaluatorOptions& options);

}  // namespace cohort
