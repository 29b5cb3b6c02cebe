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
cmake -S . -B build-cpu-only -DCMAKE_BUILD_TYPE=Release -DCOHORT_WITH_CUDA=OFF >/dev/null
cmake --build build-cpu-only -j "$(nproc)" >/dev/null
cd build-cpu-only
ctest --output-on-failure --timeout 600 -j "$(nproc)" -L unit
ctest --output-on-failure --timeout 600 -R '^train_(gpu_without_device|mlp_one_epoch)$'
