#pragma once
// GPU test cases skip where there is no CUDA device, visibly: the case says so, and the test
// program (linked with gpu_test_main.cc) then exits with kSkipped, which ctest reports as a skip
// rather than a pass (unless a check failed, which fails the test as usual).

#include "support/skip.h"

namespace cohort::test {

/// True when this process sees no CUDA device; the calling case is then marked skipped
/// ("skipped: no CUDA device") and should return. A device that is there but unusable (a driver
/// too old for the runtime) fails the case instead, and so does no device at all when the
/// environment has COHORT_REQUIRE_GPU=1.
bool no_device();

}  // namespace cohort::test
