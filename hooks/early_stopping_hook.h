#pragma once
// Stops training when a metric stops improving.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cohort/core/train/session.h"

namespace cohort {

class Metric;
class Model;

enum class EarlyStoppingMode {
  kAuto,  ///< as the model's metric says (Metric::higher_is_better): higher for an accuracy,
          ///< precision, recall, f1, auc or pr_auc, lower for the loss, mse, mae and perplexity;
          ///< a metric of one's own that does not say is refused (Keras's mode="auto", as Keras 3
          ///< has it)
  kMin,   ///< lower is better (a loss)
  kMax,   ///< higher is better (an accuracy)
};

/// Whether `mode`, for the metric `metric`, counts a lower value as the better one. kAuto: the
/// loss lower; a metric of `model` (where given) as it says (Metric::higher_is_better), and
/// InvalidArgument, one line naming it, where it does not say (a metric of one's own whose name
/// tells nothing, "mean_iou"); any other name by the name (cohort::higher_is_better: lower
/// unless an accuracy, precision, recall, f1, auc or pr_auc). Not collective; thread-safe.
bool lower_is_better(EarlyStoppingMode mode, const std::string& metric,
                     const Model* model = nullptr);

struct EarlyStoppingHookOptions {
  /// A fetchable scalar, e.g. "loss" or "accuracy".
  std::string metric = "loss";
  EarlyStoppingMode mode = EarlyStoppingMode::kAuto;
  /// Stop after this many checks in a row without improvement.
  std::int64_t patience = 5;
  /// An improvement must beat the best value so far by more than this.
  double min_delta = 0;
  /// Check every this many runs of this session.
  std::int64_t every_n_steps = 100;
};

/// Every `every_n_steps` runs, takes `metric` over the runs since the previous check (single
/// batches are noisy) and compares it with the best so far. A metric of the model is taken over
/// all the runs' examples, from its counts (Metric::from_counts, as an evaluation does): a
/// recall of a rare class is not the mean of batches' recalls, most of them of no positive. The
/// loss, and a metric of a program's own step, are the mean of the runs' values. It improves
/// when it is below best - min_delta (kMin) or above best + min_delta (kMax; kAuto asks the
/// model's metric, lower_is_better, and refuses when the session starts a metric that does not
/// say). After
/// `patience` checks in a row without improvement it requests a stop, printing one line that
/// says why ("EarlyStoppingHook: loss has not improved on 0.41 for 3 checks in a row ...").
/// (TensorFlow's stop_if_no_decrease_hook does the same on evaluation results.)
///
///     session_options.hooks.push_back(std::make_shared<cohort::EarlyStoppingHook>(
///         cohort::EarlyStoppingHookOptions{.metric = "loss", .patience = 3, .every_n_steps = 500}));
///
/// Each worker judges its own batches; in allreduce mode one worker's stop stops all, in the ps
/// modes the chief's stops all and another worker's takes that worker out alone (the chief
/// warns that it left). To judge by the chief's batches alone, give it in chief_only_hooks. A
/// held-out set judges better than training batches: ValidationHook's patience. Throws
/// InvalidArgument at construction for bad options. Not thread-safe (used by the session).
class EarlyStoppingHook : public SessionRunHook {
 public:
  explicit EarlyStoppingHook(EarlyStoppingHookOptions options);

  void begin() override;
  /// Takes the direction of the metric from the session's model (kAuto).
  void after_create_session(MonitoredSession& session) override;
  SessionRunArgs before_run(RunContext& context) override;
  void after_run(RunContext& context, const SessionRunValues& values) override;

  /// The best average so far (none before the first check).
  std::optional<double> best() const { return best_; }
  /// Checks in a row without improvement.
  std::int64_t checks_without_improvement() const { return bad_checks_; }
  /// True once it has requested a stop.
  bool stopped() const { return stopped_; }

 private:
  EarlyStoppingHookOptions options_;
  std::int64_t runs_ = 0;
  double sum_ = 0;
  std::int64_t count_ = 0;
  std::optional<double> best_;
  std::int64_t bad_checks_ = 0;
  bool stopped_ = false;
  std::optional<bool> lower_;  // from the session's model; else by the metric's name
  const Metric* metric_ = nullptr;  // the session model's metric so named, if any
  std::vector<double> counts_;      // its counts summed since the last check
  bool counts_ok_ = true;           // every run since the last check gave its counts
};

}  // namespace cohort
