#include "cohort/hooks/global_step_waiter_hook.h"

#include <cstdio>
#include <string>
#include <thread>

#include "cohort/core/base/error.h"
#include "cohort/core/base/signals.h"

namespace cohort {

GlobalStepWaiterHook::GlobalStepWaiterHook(std::int64_t wait_until_step, std::chrono::milliseconds timeout,
                                           std::chrono::milliseconds poll)
    : wait_until_step_(wait_until_step), timeout_(timeout), poll_(poll) {
  if (timeout.count() < 0) throw InvalidArgument("GlobalStepWaiterHook: timeout must be >= 0");
  if (poll.count() <= 0) throw InvalidArgument("GlobalStepWaiterHook: poll must be > 0");
}

void GlobalStepWaiterHook::begin() { started_ = false; }

SessionRunArgs GlobalStepWaiterHook::before_run(RunContext& context) {
  if (started_) return {};
  started_ = true;
  MonitoredSession& session = context.session();
  const Mode mode = session.trainer().mode();
  if (mode == Mode::kSsp)
    std::fprintf(stderr, "[%s] GlobalStepWaiterHook: no wait in ssp mode (the staleness bound would "
                 "hold the other workers back while this one waits)\n", process_label().c_str());
  if (mode != Mode::kAsync) return {};
  if (session.read_global_step() >= wait_until_step_) return {};
  std::printf("[%s] waiting for global step %lld before starting training\n", process_label().c_str(),
              static_cast<long long>(wait_until_step_));
  std::fflush(stdout);
  // Sleeping in long slices rather than core's wait_until(): the wait is meant to last seconds
  // to minutes, and each poll is a read from the ps.
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (;;) {
    const std::int64_t step = session.read_global_step();
    if (step >= wait_until_step_) return {};
    // Training ended before the step came (the chief stopped; the first step hears it), or a
    // stop signal arrived that the session stops for (after the step).
    if (session.trainer().read_stopped() ||
        (session.options().stop_on_signals && stop_signal_received() != 0))
      return {};
    if (timeout_.count() > 0 && std::chrono::steady_clock::now() >= deadline)
      throw Error("GlobalStepWaiterHook: timed out after " + std::to_string(timeout_.count() / 1000.0) +
                  " s waiting for global step " + std::to_string(wait_until_step_) + " (now " +
                  std::to_string(step) + ")");
    std::this_thread::sleep_for(poll_);
  }
}

}  // namespace cohort
