#include "cohort/core/base/stall_watch.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

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

// A wait that has lasted this long is named on stderr (then every warn_every), so that a job
// held up by a stalled peer does not sit in silence until the timeout, which must be long.
std::atomic<std::int64_t> warn_after_ns{60'000'000'000};
std::atomic<std::int64_t> warn_every_ns{300'000'000'000};
// Polled waits with a deadline of their own under way (StallWatch::Hush): they warn themselves,
// with that deadline, which comes before the watch's.
std::atomic<int> hushed{0};

void warn(const char* what, std::int64_t step, std::int64_t waited_ns, std::int64_t left_ns) {
  const std::string where = step >= 0 ? " (global step " + std::to_string(step) + ")" : "";
  std::fprintf(stderr,
               "[%s] warning: no progress for %lld s in %s%s: a peer may have stalled; the job "
               "ends in %lld s unless it moves (the stall timeout)\n",
               process_label().c_str(), static_cast<long long>(waited_ns / 1'000'000'000),
               what != nullptr ? what : "a wait for the other tasks", where.c_str(),
               static_cast<long long>(left_ns / 1'000'000'000));
  std::fflush(stderr);
}

// The live StallWatch::PeerCheck's function and id (0: none), and the lock that keeps them
// while the function runs.
std::mutex peer_check_mutex;
std::function<std::string()> peer_check;
std::uint64_t peer_check_id = 0, peer_checks_made = 0;

// The peer check's message, once an armed wait has lasted a second ("" until then, or with none).
std::string look_at_peers(std::int64_t waited_ns) {
  if (waited_ns < 1'000'000'000) return "";
  const std::lock_guard<std::mutex> lock(peer_check_mutex);
  return peer_check ? peer_check() : "";
}

void watch_forever() {
  std::int64_t last = now_ns();
  std::int64_t warned_due = 0, next_warning = 0;  // the wait warned about, and when next
  for (;;) {
    std::this_thread::sleep_for(kTick);
    const std::int64_t now = now_ns();
    // Far more than a tick since the last look: the process was stopped (a suspended job); the
    // armed deadline moves on by that long.
    const std::int64_t gap = now - last - std::chrono::nanoseconds(kTick).count();
    last = now;
    std::int64_t due = deadline.load();
    if (due != 0 && gap > std::chrono::nanoseconds(std::chrono::seconds(2)).count()) {
      if (deadline.compare_exchange_strong(due, due + gap) && warned_due == due) {
        warned_due = due + gap;
        next_warning += gap;
      }
    }
    due = deadline.load();
    if (due == 0) continue;
    const char* what = phase.load();
    const std::int64_t step = phase_step.load();
    if (deadline.load() != due) continue;  // another wait began meanwhile
    if (now > due) fire(what, step, timeout_ms.load());
    const std::int64_t began = due - timeout_ms.load() * 1'000'000;
    if (const std::string parted = look_at_peers(now - began); !parted.empty()) {
      std::fprintf(stderr, "[%s] error: %s\n", process_label().c_str(), parted.c_str());
      std::fflush(stderr);
      std::_Exit(1);
    }
    if (warned_due != due) {
      warned_due = due;
      next_warning = began + warn_after_ns.load();
    }
    if (now >= next_warning && due - now > warn_every_ns.load() / 10) {
      if (hushed.load() == 0) warn(what, step, now - began, due - now);
      // Past now: a wait that comes back (an inner watch gone) warns once, not for every
      // interval it missed.
      while (next_warning <= now) next_warning += warn_every_ns.load();
    }
  }
}

}  // namespace

StallWatch::PeerCheck::PeerCheck(std::function<std::string()> check) {
  const std::lock_guard<std::mutex> lock(peer_check_mutex);
  peer_check = std::move(check);
  id_ = peer_check_id = ++peer_checks_made;
}

StallWatch::PeerCheck::~PeerCheck() {
  const std::lock_guard<std::mutex> lock(peer_check_mutex);
  if (peer_check_id != id_) return;  // replaced by a newer one, which holds on
  peer_check = nullptr;
  peer_check_id = 0;
}

void StallWatch::set_timeout(std::chrono::milliseconds timeout) { timeout_ms.store(timeout.count()); }

std::chrono::milliseconds StallWatch::timeout() { return std::chrono::milliseconds(timeout_ms.load()); }

StallWatch::Hush::Hush() { hushed.fetch_add(1); }
StallWatch::Hush::~Hush() { hushed.fetch_sub(1); }

std::chrono::milliseconds StallWatch::first_warning() {
  return std::chrono::milliseconds(warn_after_ns.load() / 1'000'000);
}

std::chrono::milliseconds StallWatch::warning_every() {
  return std::chrono::milliseconds(warn_every_ns.load() / 1'000'000);
}

void StallWatch::set_warnings(std::chrono::milliseconds first, std::chrono::milliseconds every) {
  if (first.count() <= 0 || every.count() <= 0)
    throw InvalidArgument("StallWatch::set_warnings: the intervals must be positive");
  warn_after_ns.store(first.count() * 1'000'000);
  warn_every_ns.store(every.count() * 1'000'000);
}

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
