#pragma once
// Stops a diverged run (TensorFlow's tf.train.NanTensorHook).

#include <cstdint>
#include <string>

#include "cohort/core/base/error.h"
#include "cohort/core/train/session.h"

namespace cohort {

/// The loss became NaN (TensorFlow's NanLossDuringTrainingError). what():
/// "NaN loss during training at global step N". kDivergedStatus.
class NanLossError : public Error {
 public:
  explicit NanLossError(std::int64_t global_step);
  std::int64_t global_step() const noexcept { return global_step_; }

 private:
  std::int64_t global_step_;
};

/// Watches a fetchable scalar (by default "loss") every step. When it is NaN, throws
/// NanLossError out of run() (`fail_on_nan`, the default: the session stops with an error and
/// app::Run ends the job), or prints a warning on stderr and requests a stop, so the session
/// closes cleanly (end() on the hooks, a final checkpoint).
///
///     session_options.hooks.push_back(std::make_shared<cohort::NanTensorHook>());
///
/// Infinite values are not NaN and pass, as in TensorFlow. Not thread-safe (used by the session).
class NanTensorHook : public SessionRunHook {
 public:
  explicit NanTensorHook(std::string loss_tensor = "loss", bool fail_on_nan = true);

  SessionRunArgs before_run(RunContext& context) override;
  /// Reads the global step from `values` when fetched there, else from the session.
  void after_run(RunContext& context, const SessionRunValues& values) override;

 private:
  std::string loss_tensor_;
  bool fail_on_nan_;
};

}  // namespace cohort
