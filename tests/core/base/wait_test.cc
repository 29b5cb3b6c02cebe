// wait_until: returns once ready, whether it sleeps or spins first; the deadline holds while it
// spins, and the error names what was awaited.
#include "cohort/core/base/wait.h"

#include <doctest/doctest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/base/stall_watch.h"
#include "support/stderr_capture.h"

namespace cohort {
namespace {

using namespace std::chrono_literals;

TEST_CASE("wait_until returns as soon as ready() holds, sleeping or spinning first") {
  for (const std::chrono::microseconds spin : {0us, 200us, 10000us}) {
    CAPTURE(spin.count());
    int polls = 0;
    wait_until([&] { return ++polls == 40; }, 10s, [] { return std::string("forty polls"); },
               spin);
    CHECK(polls == 40);
  }
  int polls = 0;
  wait_until([&] { return ++polls >= 1; }, 0ms, [] { return std::string("nothing"); }, 1ms);
  CHECK(polls == 1);  // ready at once: one poll, no spin
}

TEST_CASE("wait_until's deadline holds while it spins, and its error names what was awaited") {
  const auto start = std::chrono::steady_clock::now();
  std::string message;
  try {
    wait_until([] { return false; }, 30ms, [] { return std::string("worker:1 (rank 2)"); }, 60s);
  } catch (const Error& e) {
    message = e.what();
  }
  CHECK(std::chrono::steady_clock::now() - start < 20s);  // not the minute of spin
  CHECK(message.find("timed out after 0.03 s waiting") != std::string::npos);
  CHECK(message.find("waiting for worker:1 (rank 2)") != std::string::npos);
}

TEST_CASE("a long wait_until says on stderr what it waits for, and when it will give up") {
  StallWatch::set_warnings(100ms, 200ms);
  std::vector<std::string> lines;
  {
    test::StderrCapture err((std::filesystem::temp_directory_path() /
                             ("wait_test_" + std::to_string(::getpid()) + ".txt")).string());
    CHECK_THROWS_AS(wait_until([] { return false; }, 1000ms,
                               [] { return std::string("worker:1 (rank 2)"); }),
                    Error);
    lines = err.lines();
  }
  StallWatch::set_warnings(60s, 300s);
  // At 0.1, 0.3, 0.5, 0.7 and 0.9 s; a busy machine may miss some, never all.
  REQUIRE(lines.size() >= 1);
  CHECK(lines.size() <= 5);
  for (const std::string& line : lines) {
    CAPTURE(line);
    CHECK(line.find("warning: waiting 0 s so far for worker:1 (rank 2); gives up in ") != std::string::npos);
    CHECK(line.ends_with(" s (the wait timeout)"));
  }
}

}  // namespace
}  // namespace cohort
