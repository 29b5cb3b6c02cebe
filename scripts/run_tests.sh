#!/usr/bin/env bash
# README command 2: set up, build, and run the whole test suite.
#
# A skipped test is not a passed one: every skip is listed at the end of each ctest run, and with
# COHORT_REQUIRE_TESTS=1 (CI sets it) a test whose prerequisites are missing (Slurm, a module
# system, Python's numpy or matplotlib) fails instead of skipping, and any skip other than a GPU
# test's on a machine without a GPU fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --tests
# The cores this process may use (nproc alone reports OMP_NUM_THREADS, which mpi_env.sh sets to 1).
jobs=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
. scripts/mpi_env.sh
# Where the time goes, phase by phase (bash's SECONDS counts from the start).
phase() { echo "== $1 (${SECONDS} s so far)"; }
phase "set up and built"

# ctest_checked BUILD_DIR [CTEST_ARGS...]: runs ctest there, then lists what was skipped.
ctest_checked() {
  local dir=$1
  shift
  local junit=$PWD/$dir/Testing/cohort-results.xml status=0
  rm -f "$junit"  # a file from an earlier run must not stand in for this one's
  (cd "$dir" && ctest --output-on-failure --timeout 600 -j "$jobs" --output-junit "$junit" "$@") || status=$?
  local skipped allowed="" name bad=()
  skipped=$(sed -nE 's/.*<testcase name="([^"]+)".*status="(notrun|disabled)".*/\1/p' "$junit" 2>/dev/null || true)
  [[ -n $skipped ]] || return "$status"
  # A GPU test may skip where there is no GPU, and nowhere else.
  if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    allowed=$(cd "$dir" && ctest -N -L '^gpu$' | sed -nE 's/^ *Test +#[0-9]+: (.*)$/\1/p')
  fi
  echo "== skipped, not passed:" $skipped
  for name in $skipped; do
    grep -qxF "$name" <<<"$allowed" || bad+=("$name")
  done
  if [[ ${COHORT_REQUIRE_TESTS:-0} == 1 ]] && ((${#bad[@]})); then
    echo "error: COHORT_REQUIRE_TESTS=1 and these tests did not run: ${bad[*]}" >&2
    return 1
  fi
  return "$status"
}

ctest_checked build "$@"
phase "tests run"

# With ctest arguments (a selection of tests), that selection on the main build is all.
[ "$#" -eq 0 ] || exit 0

# The CPU-only configuration builds and works too: its own build without CUDA (the libraries and
# train, and the programs of the tests labelled cpu_only, whose behaviour depends on CUDA being
# built in), the no-CUDA check, those tests, the refusal of GPU towers and one epoch of training.
echo "== CPU-only build (COHORT_WITH_CUDA=OFF)"
mkdir -p build-cpu-only
# One copy of the CPU kernels there (-march=native), at -O1, and each library's sources compiled
# as a few units (CMake's unity build): the copies per CPU level, the optimised code and the
# sources one by one are the main build's business, and tested there; this build checks what
# CUDA's absence changes, and compiles in three fifths of the time a plain -O1 build takes.
if ! { cmake -S . -B build-cpu-only -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG" \
             -DCOHORT_WITH_CUDA=OFF -DCOHORT_NATIVE=ON -DCMAKE_UNITY_BUILD=ON &&
       cmake --build build-cpu-only -j "$jobs" --target cpu_only_checks; } >build-cpu-only/build.log 2>&1; then
  tail -n 50 build-cpu-only/build.log
  echo "CPU-only build failed: see build-cpu-only/build.log" >&2
  exit 1
fi
ctest_checked build-cpu-only -L cpu_only
phase "CPU-only configuration built and tested"
