#include "support/skip.h"

#include <doctest/doctest.h>

#include <atomic>
#include <cstdlib>
#include <string>

namespace cohort::test {
namespace {
std::atomic<bool> skipped{false};
}  // namespace

void skip(const std::string& why) {
  if (const char* required = std::getenv("COHORT_REQUIRE_TESTS");
      required != nullptr && std::string(required) == "1")
    FAIL(why << ", and COHORT_REQUIRE_TESTS=1 asks for this test");
  skip_allowed(why);
}

void skip_allowed(const std::string& why) {
  MESSAGE("skipped: " << why);
  skipped = true;
}

int exit_status(int failed) { return failed != 0 ? failed : skipped ? kSkipped : 0; }

}  // namespace cohort::test
