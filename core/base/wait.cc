#include "cohort/core/base/wait.h"

#include <algorithm>
#include <cstdio>
#include <iomanip>
#include <optional>
#include <sstream>
#include <thread>

#include "cohort/core/base/error.h"
#include "cohort/core/base/stall_watch.h"

namespace cohort {
namespace {

// "3", "2.5", "0.03": a timeout in seconds as it was most likely given.
std::string seconds_text(std::chrono::milliseconds timeout) {
  std::ostringstream text;
  text << std::setprecision(12) << std::chrono::duration<double>(timeout).count();
  return text.str();
}

}  // namespace

void wait_until(const std::function<bool()>& ready, std::chrono::milliseconds timeout,
                const std::function<std::string()>& what, std::chrono::microseconds spin) {
  using namespace std::chrono;
  const auto start = steady_clock::now();
  microseconds pause(5);
  constexpr microseconds kLongest(1000);
  // A yield that returns on an idle core takes about a microsecond; one this late ran another
  // process in between.
  constexpr microseconds kLateYield(50);
  bool spinning = spin.count() > 0;
  // A long wait with a timeout says so on stderr, as StallWatch's waits do, rather than keep
  // silent until the timeout (one without is meant to last, or is a StallWatch's to name).
  auto next_warning = timeout.count() > 0 ? start + StallWatch::first_warning()
                                          : steady_clock::time_point::max();
  std::optional<StallWatch::Hush> hush;  // this deadline comes first: the watch keeps quiet
  if (timeout.count() > 0) hush.emplace();
  while (!ready()) {
    const auto now = steady_clock::now();
    if (timeout.count() > 0 && now - start >= timeout)
      throw Error("timed out after " + seconds_text(timeout) + " s waiting for " + what());
    if (now >= next_warning) {
      const auto waited = duration_cast<seconds>(now - start).count();
      const auto left = duration_cast<seconds>(start + timeout - now).count();
      std::fprintf(stderr, "[%s] warning: waiting %lld s so far for %s; gives up in %lld s (the wait timeout)\n",
                   process_label().c_str(), static_cast<long long>(waited), what().c_str(),
                   static_cast<long long>(left));
      std::fflush(stderr);
      while (next_warning <= now) next_warning += StallWatch::warning_every();
    }
    if (spinning && now - start < spin) {
      std::this_thread::yield();
      spinning = steady_clock::now() - now < kLateYield;
      continue;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(kLongest, pause * 5 / 4 + microseconds(1));
  }
}

}  // namespace cohort
