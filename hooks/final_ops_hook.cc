#include "cohort/hooks/final_ops_hook.h"

#include <utility>

#include "cohort/core/base/error.h"

namespace cohort {

FinalOpsHook::FinalOpsHook(std::vector<std::string> final_fetches) : fetches_(std::move(final_fetches)) {
  if (fetches_.empty()) throw InvalidArgument("FinalOpsHook: no fetches given");
}

SessionRunArgs FinalOpsHook::before_run(RunContext&) { return {fetches_}; }

void FinalOpsHook::after_run(RunContext&, const SessionRunValues& values) { values_ = values.all(); }

}  // namespace cohort
