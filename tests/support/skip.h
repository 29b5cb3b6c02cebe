#pragma once
// Test cases that cannot run here (a prerequisite is missing) say so, and the test program then
// exits with kSkipped, which ctest reports as a skip rather than a pass (unless a check failed,
// which fails the test as usual). Programs linked with test_main.cc or gpu_test_main.cc.

#include <string>

namespace cohort::test {

/// ctest's SKIP_RETURN_CODE for the test programs.
constexpr int kSkipped = 77;

/// The calling case cannot run here: `why` names the missing prerequisite. Prints
/// "skipped: <why>" and marks the program skipped; the case should return. Where the environment
/// has COHORT_REQUIRE_TESTS=1 (CI, where every prerequisite is installed) the case fails instead.
void skip(const std::string& why);

/// The same for a skip CI allows (a GPU test on a machine without a GPU): never a failure.
void skip_allowed(const std::string& why);

/// What a test program's main returns after its cases: `failed` (doctest's result) if not 0,
/// else kSkipped if a case skipped, else 0.
int exit_status(int failed);

}  // namespace cohort::test
