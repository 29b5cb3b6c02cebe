#include "cohort/core/base/wait.h"

#include <algorithm>
#include <iomanip>
#include <sstream>
#include <thread>

#include "cohort/core/base/error.h"

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
  while (!ready()) {
    const auto now = steady_clock::now();
    if (timeout.count() > 0 && now - start >= timeout)
      throw Error("timed out after " + seconds_text(timeout) + " s waiting for " + what());
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
