// wait_until: returns once ready, whether it sleeps or spins first; the deadline holds while it
// spins, and the error names what was awaited.
#include "cohort/core/base/wait.h"

#include <doctest/doctest.h>

#include <chrono>
#include <string>

#include "cohort/core/base/error.h"

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

}  // namespace
}  // namespace cohort
