#!/usr/bin/env bash
# Runs kernel test programs at every x86-64 level below the best this CPU supports, each forced
# with COHORT_CPU_LEVEL; each program checks first that the level asked for is the one in use.
# The levels come from the dynamic loader, which is what chooses the copy of the kernels.
# Usage: cpu_levels_test.sh PROGRAM...
set -euo pipefail
loader=/lib64/ld-linux-x86-64.so.2
supported=$("$loader" --help | sed -nE 's/^ +(x86-64-v[0-9]) \(supported, searched\)$/\1/p')
[[ -n $supported ]] || { echo "error: $loader names no supported x86-64 level" >&2; exit 1; }
best=$(head -n 1 <<<"$supported")
below=$(tail -n +2 <<<"$supported" | sort)
. "$(dirname "$0")/../../support/skip.sh"
[[ -n $below ]] || skip "this CPU's best level, $best, is the lowest one Cohort builds kernels for"
echo "CPU: best level $best; forcing: $below"
for level in $below; do
  for program in "$@"; do
    echo "== $level: $(basename "$program")"
    COHORT_CPU_LEVEL=$level "$program"
  done
done
