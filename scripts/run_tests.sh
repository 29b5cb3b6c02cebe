#!/usr/bin/env bash
# README command 2: set up, build, and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --tests
. scripts/mpi_env.sh
(cd build && ctest --output-on-failure --timeout 600 -j "$(nproc)" "$@")

# With ctest arguments (a selection of tests), that selection on the main build is all.
[ "$#" -eq 0 ] || exit 0

# The CPU-only configuration builds and works too: its own build without CUDA, its unit tests
# (the no-CUDA check among them), the refusal of GPU towers, and one epoch of training.
echo "== CPU-only build (COHORT_WITH_CUDA=OFF)"
mkdir -p build-cpu-only
if ! { cmake -S . -B build-cpu-only -DCMAKE_BUILD_TYPE=Release -DCOHORT_WITH_CUDA=OFF &&
       cmake --build build-cpu-only -j "$(nproc)"; } >build-cpu-only/build.log 2>&1; then
  tail -n 50 build-cpu-only/build.log
  echo "CPU-only build failed: see build-cpu-only/build.log" >&2
  exit 1
fi
cd build-cpu-only
ctest --output-on-failure --timeout 600 -j "$(nproc)" -L unit
ctest --output-on-failure --timeout 600 -R '^train_(gpu_without_device|mlp_one_epoch)$'
