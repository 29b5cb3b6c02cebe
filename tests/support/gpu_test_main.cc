#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include "cohort/gpu/device.h"
#include "support/gpu_test.h"
#include "support/skip.h"

namespace cohort::test {

bool no_device() {
  if (gpu::device_count() > 0) return false;
  // Only a machine without a GPU skips; a GPU this build cannot use is a failure, and so is no
  // GPU at all where the caller says there must be one (scripts/gpu_check.sh does).
  if (const std::string problem = gpu::device_problem(); !problem.empty())
    FAIL("unusable CUDA device: " << problem);
  if (const char* required = std::getenv("COHORT_REQUIRE_GPU");
      required != nullptr && std::string(required) == "1")
    FAIL("no CUDA device, and COHORT_REQUIRE_GPU=1 asks for one");
  skip_allowed("no CUDA device");
  return true;
}

}  // namespace cohort::test

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int failed = context.run();
  if (failed != 0 || context.shouldExit()) return failed;
  return cohort::test::exit_status(0);
}
