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
constexpr std::chrono::milliseconds kTick{200};

std::atomic<std::int64_t> timeout_ms{0};  // the process's stall timeout
// The armed wait: its deadline (steady-clock nanoseconds, 0: none), name and step.
std::atomic<std::int64_t> deadline{0};
std::atomic<const char*> phase{nullptr};
std::atomic<std::int64_t> phase_step{-1};

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

[[noreturn]] void fire(const char* what, std::int64_t step, std::int64_t timeout) {
  const std::string where = step >= 0 ? " (global step " + std::to_string(step) + ")" : "";
  std::fprintf(stderr,
               "[%s] error: no progress for %lld s in %s%s: a peer has stalled or been lost; "
               "ending the job\n",
               process_label().c_str(), static_cast<long long>(timeout / 1000),
               what != nullptr ? what : "a wait for the other tasks", where.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

void watch_forever() {
  std::int64_t last = now_ns();
  for (;;) {
    std::this_thread::sleep_for(kTick);
    const std::int64_t now = now_ns();
    // Far more than a tick since the last look: the process was stopped (a suspended job); the
    // armed deadline moves on by that long.
    const std::int64_t gap = now - last - std::chrono::nanoseconds(kTick).count();
    last = now;
    std::int64_t due = deadline.load();
    if (due != 0 && gap > std::chrono::nanoseconds(std::chrono::seconds(2)).count())
      deadline.compare_exchange_strong(due, due + gap);
    due = deadline.load();
    if (due == 0 || now <= due) continue;
    const char* what = phase.load();
    const std::int64_t step = phase_step.load();
    if (deadline.load() == due) fire(what, step, timeout_ms.load());  // still the same wait
  }
}

}  // namespace

void StallWatch::set_timeout(std::chrono::milliseconds timeout) { timeout_ms.store(timeout.count()); }

std::chrono::milliseconds StallWatch::timeout() { return std::chrono::milliseconds(timeout_ms.load()); }

StallWatch::StallWatch(const char* what, std::int64_t step) {
  const std::int64_t timeout = timeout_ms.load();
  if (timeout <= 0) return;
  static std::once_flag started;
  std::call_once(started, [] { std::thread(watch_forever).detach(); });
  armed_ = true;
  previous_what_ = phase.load();
  previous_step_ = phase_step.load();
  previous_deadline_ = deadline.exchange(0);  // disarmed while the wait is described
  phase.store(what);
  phase_step.store(step);
  deadline.store(now_ns() + timeout * 1'000'000);
}

StallWatch::~StallWatch() {
  if (!armed_) return;
  deadline.store(0);
  phase.store(previous_what_);
  phase_step.store(previous_step_);
  deadline.store(previous_deadline_);
}

}  // namespace cohort
