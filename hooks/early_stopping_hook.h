#pragma once
// Stops training when a metric stops improving.

#include <cstdint>
#include <optional>
#include <string>

#include "cohort/core/train/session.h"

namespace cohort {

enum class EarlyStoppingMode {
  kAuto,  ///< by the metric's name (cohort::higher_is_better): higher for an accuracy, precision,
          ///< recall, f1 or auc, lower for a loss and any other (Keras's mode="auto")
  kMin,   ///< lower is better (a loss)
  kMax,   ///< higher is better (an accuracy)
};

/// Whether `mode`, for the metric `metric`, counts a lower value as the better one.
bool lower_is_better(EarlyStoppingMode mode, const std::string& metric);

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

/// Every `every_n_steps` runs, averages `metric` over the runs since the previous check (single
/// batches are noisy) and compares the average with the best so far: it improves when it is
/// below best - min_delta (kMin) or above best + min_delta (kMax; kAuto picks by the metric's
/// name). After `patience` checks in a
/// row without improvement it requests a stop. (TensorFlow's stop_if_no_decrease_hook does the
/// same on evaluation results.)
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
};

}  // namespace cohort
