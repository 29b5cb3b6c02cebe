#!/usr/bin/env bash
# Training images/s with 1 and 2 workers in every mode, for mlp and cnn (docs/BENCHMARKS.md).
#
#   scripts/bench_scaling.sh [train binary]
#
# Each run: one ps task (idle in allreduce mode) plus W workers, batch 64 per worker, a fixed
# number of global steps; images/s is train_images_per_sec from --metrics_json (whole cluster,
# steady state after start-up). Then, where /usr/bin/python3 has torch, PyTorch DDP (gloo) on the
# same models and steps (scripts/bench_ddp.py). Prints a markdown table.
#
# The last column is how far apart the first two CPUs were before the 1-worker run, between the
# runs and after the 2-worker run (bench_core_latency: a cache line's round trip). Two workers that
# sum their gradients read each other's memory every step; a virtual machine's host may place its
# two CPUs on cores of one L3 (about 50 ns) or far apart (about 300 ns), and move them at any time.
set -euo pipefail
cd "$(dirname "$0")/.."
train=${1:-build/bin/train}
. scripts/mpi_env.sh
out=$(mktemp -d)
rate() {  # model mode workers steps
  local json="$out/$1-$2-$3.json"
  mpirun -np $(( $3 + 1 )) "$train" --ps_tasks=1 --model="$1" --mode="$2" --train_steps="$4" \
    --log_every_steps=0 --print_cluster=false --metrics_json="$json" > "$out/log" 2>&1 \
    || { cat "$out/log" >&2; exit 1; }
  /usr/bin/python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['train_images_per_sec']))" "$json"
}
# Round trip between the first two CPUs, ns.
core_latency=$(dirname "$train")/bench_core_latency
apart() { { [ -x "$core_latency" ] && "$core_latency" | grep -oE '[0-9]+ ns$' | grep -oE '^[0-9]+'; } || echo -; }
# What the ps said serving the last run cost it (in allreduce mode it only waits in join()).
ps_cpu() { grep -oE '[0-9.]+% of a core' "$out/log" | head -1 | grep -oE '^[0-9.]+%' || echo -; }
echo "| model | mode | 1 worker img/s | 2 workers img/s | speed-up | ps CPU, 2 workers | CPUs apart, ns |"
echo "|---|---|---:|---:|---:|---:|---|"
for model in mlp cnn; do
  steps=4000; [ "$model" = cnn ] && steps=60  # mlp: some seconds of steady state
  for mode in sync allreduce async ssp; do
    before=$(apart)
    one=$(rate "$model" "$mode" 1 "$steps")
    between=$(apart)
    # Async and SSP count one global step per push: twice the steps for the same work per worker.
    two_steps=$steps; { [ "$mode" = async ] || [ "$mode" = ssp ]; } && two_steps=$((steps * 2))
    two=$(rate "$model" "$mode" 2 "$two_steps")
    cpu=$(ps_cpu)
    echo "| $model | $mode | $one | $two | $(/usr/bin/python3 -c "print(f'{$two/$one:.2f}x')") | $cpu | $before, $between, $(apart) |"
  done
done
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
  for model in mlp cnn; do
    steps=4000; [ "$model" = cnn ] && steps=60
    before=$(apart)
    one=$(scripts/bench_ddp.py --model "$model" --workers 1 --steps "$steps")
    between=$(apart)
    two=$(scripts/bench_ddp.py --model "$model" --workers 2 --steps "$steps")
    echo "| $model | PyTorch DDP (gloo) | $one | $two | $(/usr/bin/python3 -c "print(f'{$two/$one:.2f}x')") | - | $before, $between, $(apart) |"
  done
else
  echo "# PyTorch DDP not measured: /usr/bin/python3 cannot import torch (Debian: python3-torch)"
fi
rm -rf "$out"
