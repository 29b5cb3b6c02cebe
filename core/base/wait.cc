#include "cohort/core/base/wait.h"

#include <algorithm>
#include <thread>

#include "cohort/core/base/error.h"

namespace cohort {

void wait_until(const std::function<bool()>& ready, std::chrono::milliseconds timeout,
                const std::function<std::string()>& what) {
  using namespace std::chrono;
  const auto start = steady_clock::now();
  microseconds pause(5);
  constexpr microseconds kLongest(1000);
  while (!ready()) {
    if (timeout.count() > 0 && steady_clock::now() - start >= timeout)
      throw Error("timed out after " + std::to_string(duration<double>(timeout).count()) +
                  " s waiting for " + what());
    std::this_thread::sleep_for(pause);
    pause = std::min(kLongest, pause * 5 / 4 + microseconds(1));
  }
}

}  // namespace cohort
