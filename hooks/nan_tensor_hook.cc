#include "cohort/hooks/nan_tensor_hook.h"

#include <cmath>
#include <cstdio>
#include <utility>

namespace cohort {

NanLossError::NanLossError(std::int64_t global_step)
    : Error("NaN loss during training at global step " + std::to_string(global_step), kDivergedStatus),
      global_step_(global_step) {}

NanTensorHook::NanTensorHook(std::string loss_tensor, bool fail_on_nan)
    : loss_tensor_(std::move(loss_tensor)), fail_on_nan_(fail_on_nan) {
  if (loss_tensor_.empty()) throw InvalidArgument("NanTensorHook: the loss tensor name is empty");
}

SessionRunArgs NanTensorHook::before_run(RunContext&) { return {{loss_tensor_, "global_step"}}; }

void NanTensorHook::after_run(RunContext& context, const SessionRunValues& values) {
  if (!std::isnan(values.get(loss_tensor_))) return;
  const std::int64_t step = values.has("global_step") ? static_cast<std::int64_t>(values.get("global_step"))
                                                      : context.session().global_step();
  const NanLossError error(step);
  if (fail_on_nan_) throw error;
  std::fprintf(stderr, "[%s] warning: %s; stopping\n", process_label().c_str(), error.what());
  context.request_stop();
}

}  // namespace cohort
