#!/usr/bin/env bash
# README command 2: set up, build, and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --tests
. scripts/mpi_env.sh
cd build
ctest --output-on-failure --timeout 600 -j "$(nproc)" "$@"
