#!/usr/bin/env bash
# README command 1: set up, build, and run the main job: 8 ranks training on Fashion-MNIST in the
# seed's layout — one parameter-server task and seven workers, synchronous SGD.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --target train
. scripts/mpi_env.sh
exec mpirun -np 8 build/bin/train --ps_tasks=1 --mode=sync "$@"
