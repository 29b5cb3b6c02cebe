#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "support/skip.h"

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int failed = context.run();
  if (failed != 0 || context.shouldExit()) return failed;
  return cohort::test::exit_status(0);
}
