#pragma once
// Waiting without burning a core, with a deadline and a message that says what is awaited.

#include <chrono>
#include <functional>
#include <string>

namespace cohort {

/// Polls `ready` until it returns true. Starts with short sleeps (tens of microseconds) so a
/// lock-step exchange stays fast, and backs off to about a millisecond so a long wait costs next
/// to no CPU. `timeout` zero waits forever; on expiry throws Error("timed out after N s waiting
/// for " + what()), where `what` names the tasks still awaited (the stall inspector). A wait
/// with a timeout that lasts StallWatch::first_warning() (a minute) says so on stderr, naming
/// what() and the time left, and again every StallWatch::warning_every().
/// Blocking; calls `ready` from the calling thread only.
///
/// With `spin`, it first polls without sleeping for up to that long, yielding the core between
/// polls: a short sleep lasts tens of microseconds more than asked (the kernel's timer slack),
/// while a rank with a core to itself then sees a lock-step peer's answer at once. A yield that
/// comes back late means another process wanted the core (more ranks than cores): the spin
/// ends there and the sleeps begin.
void wait_until(const std::function<bool()>& ready, std::chrono::milliseconds timeout,
                const std::function<std::string()>& what,
                std::chrono::microseconds spin = std::chrono::microseconds(0));

}  // namespace cohort
