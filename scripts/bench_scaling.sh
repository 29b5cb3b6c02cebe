#!/usr/bin/env bash
# Training images/s with 1 and 2 workers in every mode, for mlp and cnn (docs/BENCHMARKS.md).
#
#   scripts/bench_scaling.sh [--rounds N] [--models mlp,cnn] [--modes sync,allreduce,async,ssp]
#                            [train binary]
#
# Each run: one ps task (idle in allreduce mode) plus W workers, batch 64 per worker, a fixed
# number of global steps; images/s is train_images_per_sec from --metrics_json (whole cluster,
# steady state after start-up). Then, where /usr/bin/python3 has torch, PyTorch DDP (gloo) on the
# same models and steps (scripts/bench_ddp.py). Prints a markdown table: a row per round (a 1- and
# a 2-worker run), then per mode the median speed-up of all rounds and of the rounds whose CPUs
# stayed near.
#
# The column "CPUs apart" is how far apart the first two CPUs were before the 1-worker run,
# between the runs and after the 2-worker run (bench_core_latency: a cache line's round trip).
# Two workers that sum their gradients read each other's memory every step; a virtual machine's
# host may place its two CPUs on cores of one L3 (about 50 ns) or far apart (about 300 ns), and
# move them at any time. A round is "near" when all three read under 100 ns.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=1 models=mlp,cnn modes=sync,allreduce,async,ssp train=build/bin/train
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=${2:-}; shift $(( $# > 1 ? 2 : 1 )) ;;
    --models) models=${2:-}; shift $(( $# > 1 ? 2 : 1 )) ;;
    --modes) modes=${2:-}; shift $(( $# > 1 ? 2 : 1 )) ;;
    -*) echo "bench_scaling.sh: unknown option $1" >&2; exit 2 ;;
    *) train=$1; shift ;;
  esac
done
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "bench_scaling.sh: --rounds needs a positive whole number, got '$rounds'" >&2; exit 2; }
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
rows="$out/rows"  # model, mode, round, speed-up, near (1/0)
row() {  # model mode round one two cpu distances...
  local model=$1 mode=$2 round=$3 one=$4 two=$5 cpu=$6 a=$7 b=$8 c=$9
  local speedup near=1 name=$mode d
  speedup=$(/usr/bin/python3 -c "print(f'{$two/$one:.2f}')")
  for d in "$a" "$b" "$c"; do [[ "$d" =~ ^[0-9]+$ ]] && [ "$d" -lt 100 ] || near=0; done
  echo "$model $mode $round $speedup $near" >> "$rows"
  [ "$mode" = DDP ] && name="PyTorch DDP (gloo)"
  echo "| $model | $name | $round | $one | $two | ${speedup}x | $cpu | $a, $b, $c |"
}
echo "| model | mode | round | 1 worker img/s | 2 workers img/s | speed-up | ps CPU, 2 workers | CPUs apart, ns |"
echo "|---|---|---:|---:|---:|---:|---:|---|"
for model in ${models//,/ }; do
  steps=4000; [ "$model" = cnn ] && steps=60  # mlp: some seconds of steady state
  for mode in ${modes//,/ }; do
    for round in $(seq 1 "$rounds"); do
      before=$(apart)
      one=$(rate "$model" "$mode" 1 "$steps")
      between=$(apart)
      # Async and SSP count one global step per push: twice the steps for the same work per worker.
      two_steps=$steps; { [ "$mode" = async ] || [ "$mode" = ssp ]; } && two_steps=$((steps * 2))
      two=$(rate "$model" "$mode" 2 "$two_steps")
      row "$model" "$mode" "$round" "$one" "$two" "$(ps_cpu)" "$before" "$between" "$(apart)"
    done
  done
done
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
  for model in ${models//,/ }; do
    steps=4000; [ "$model" = cnn ] && steps=60
    for round in $(seq 1 "$rounds"); do
      before=$(apart)
      one=$(scripts/bench_ddp.py --model "$model" --workers 1 --steps "$steps")
      between=$(apart)
      two=$(scripts/bench_ddp.py --model "$model" --workers 2 --steps "$steps")
      row "$model" "DDP" "$round" "$one" "$two" - "$before" "$between" "$(apart)"
    done
  done
else
  echo "# PyTorch DDP not measured: /usr/bin/python3 cannot import torch (Debian: python3-torch)"
fi
echo
echo "| model | mode | median speed-up, all rounds | median speed-up, near rounds |"
echo "|---|---|---:|---:|"
/usr/bin/python3 - "$rows" <<'PY'
import statistics, sys
groups = {}
for line in open(sys.argv[1]):
    model, mode, _, speedup, near = line.split()
    groups.setdefault((model, mode), []).append((float(speedup), near == "1"))
for (model, mode), runs in groups.items():
    near = [s for s, n in runs if n]
    name = "PyTorch DDP (gloo)" if mode == "DDP" else mode
    near_text = f"{statistics.median(near):.2f}x ({len(near)} of {len(runs)})" if near else f"- (0 of {len(runs)})"
    print(f"| {model} | {name} | {statistics.median(s for s, _ in runs):.2f}x | {near_text} |")
PY
rm -rf "$out"
