#!/usr/bin/env bash
# Runs a Python test that needs a module outside the standard library, or reports a visible skip.
# Usage: python_test.sh MODULE SCRIPT [ARGS...]
# Without MODULE, it prints "SKIP: ..." and exits 77 (the tests' SKIP_RETURN_CODE); with
# COHORT_REQUIRE_TESTS=1 (CI) that is a failure instead.
set -euo pipefail
module=$1
shift
. "$(dirname "$0")/skip.sh"
/usr/bin/python3 -c "import $module" 2>/dev/null ||
  skip "/usr/bin/python3 cannot import $module" "install python3-$module to run this test"
exec /usr/bin/python3 "$@"
