#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <atomic>

#include "cohort/gpu/device.h"
#include "support/gpu_test.h"

namespace cohort::test {
namespace {
std::atomic<bool> skipped{false};
}  // namespace

bool no_device() {
  if (gpu::device_count() > 0) return false;
  MESSAGE("skipped: no CUDA device");
  skipped = true;
  return true;
}

}  // namespace cohort::test

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int failed = context.run();
  if (failed != 0 || context.shouldExit()) return failed;
  return cohort::test::skipped ? cohort::test::kSkipped : 0;
}
