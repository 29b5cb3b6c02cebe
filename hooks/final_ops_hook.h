#pragma once
// The values training ended with (TensorFlow's tf.train.FinalOpsHook).

#include <map>
#include <string>
#include <vector>

#include "cohort/core/train/session.h"

namespace cohort {

/// Keeps the values of `final_fetches` from the last step run, for after training:
///
///     auto final = std::make_shared<cohort::FinalOpsHook>(std::vector<std::string>{"loss", "accuracy"});
///     session_options.hooks.push_back(final);
///     ... train, close the session ...
///     std::printf("final loss %g\n", final->final_values().at("loss"));
///
/// Unlike TensorFlow, which runs the fetches once more in end(), a Cohort session cannot run a
/// step after training: the hook fetches them at every step (scalars, so this is free) and
/// final_values() are those of the last step. Empty before the first step of a session. Not
/// thread-safe (used by the session).
class FinalOpsHook : public SessionRunHook {
 public:
  /// Throws InvalidArgument when `final_fetches` is empty.
  explicit FinalOpsHook(std::vector<std::string> final_fetches);

  void begin() override { values_.clear(); }
  SessionRunArgs before_run(RunContext& context) override;
  void after_run(RunContext& context, const SessionRunValues& values) override;

  const std::map<std::string, double>& final_values() const { return values_; }

 private:
  std::vector<std::string> fetches_;
  std::map<std::string, double> values_;
};

}  // namespace cohort
