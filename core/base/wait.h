#pragma once
// Waiting without burning a core, with a deadline and a message that says what is awaited.

#include <chrono>
#include <functional>
#include <string>

namespace cohort {

/// Polls `ready` until it returns true. Starts with short sleeps (tens of microseconds) so a
/// lock-step exchange stays fast, and backs off to about a millisecond so a long wait costs next
/// to no CPU. `timeout` zero waits forever; on expiry throws Error("timed out after N s waiting
/// for " + what()), where `what` names the tasks still awaited (the stall inspector).
/// Blocking; calls `ready` from the calling thread only.
void wait_until(const std::function<bool()>& ready, std::chrono::milliseconds timeout,
                const std::function<std::string()>& what);

}  // namespace cohort
