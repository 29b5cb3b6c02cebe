# Sourced by the test scripts. skip WHY [HINT]: this test cannot run here. It prints
# "SKIP: WHY (HINT)" and exits 77, ctest's SKIP_RETURN_CODE, so the skip shows; with
# COHORT_REQUIRE_TESTS=1 (CI, where every prerequisite is installed) it is a failure instead.
skip() {
  if [[ ${COHORT_REQUIRE_TESTS:-0} == 1 ]]; then
    echo "error: $1, and COHORT_REQUIRE_TESTS=1 asks for this test" >&2
    exit 1
  fi
  echo "SKIP: $1${2:+ ($2)}"
  exit 77
}
