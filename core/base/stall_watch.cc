#include "cohort/core/base/stall_watch.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include "cohort/core/base/error.h"

namespace cohort {
namespace {

using Clock = std::chrono::steady_clock;

// The armed phase: its deadline (steady-clock nanoseconds, 0: none), timeout, name and step.
std::atomic<std::int64_t> deadline{0};
std::atomic<std::int64_t> timeout_ms{0};
std::atomic<const char*> phase{nullptr};
std::atomic<std::int64_t> phase_step{-1};
std::atomic<std::int64_t> finish_ms{0};

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

[[noreturn]] void fire() {
  const std::int64_t step = phase_step.load();
  const std::string where = step >= 0 ? " (global step " + std::to_string(step) + ")" : "";
  std::fprintf(stderr,
               "[%s] error: no progress for %lld s in %s%s: a peer has stalled or been lost; "
               "ending the job\n",
               process_label().c_str(), static_cast<long long>(timeout_ms.load() / 1000),
               phase.load(), where.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

void watch_forever() {
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const std::int64_t due = deadline.load();
    if (due != 0 && now_ns() > due) fire();
  }
}

}  // namespace

StallWatch::StallWatch(std::chrono::milliseconds timeout, const char* what, std::int64_t step) {
  if (timeout.count() <= 0) return;
  static std::once_flag started;
  std::call_once(started, [] { std::thread(watch_forever).detach(); });
  armed_ = true;
  previous_timeout_ = timeout_ms.load();
  previous_what_ = phase.load();
  previous_step_ = phase_step.load();
  previous_deadline_ = deadline.exchange(0);  // disarmed while the phase is described
  timeout_ms.store(timeout.count());
  phase.store(what);
  phase_step.store(step);
  deadline.store(now_ns() + std::chrono::duration_cast<std::chrono::nanoseconds>(timeout).count());
}

void StallWatch::set_finish_timeout(std::chrono::milliseconds timeout) {
  finish_ms.store(timeout.count());
}

std::chrono::milliseconds StallWatch::finish_timeout() {
  return std::chrono::milliseconds(finish_ms.load());
}

StallWatch::~StallWatch() {
  if (!armed_) return;
  deadline.store(0);
  timeout_ms.store(previous_timeout_);
  phase.store(previous_what_);
  phase_step.store(previous_step_);
  deadline.store(previous_deadline_);
}

}  // namespace cohort
