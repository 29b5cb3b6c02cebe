#!/usr/bin/env bash
# A training step of one's own on several workers (apps/examples/gan.cc): a GAN whose generator
# learns N(3, 0.5), its step given to the trainer as TrainerOptions::step.
# - allreduce on 2 workers and sync on 1 ps + 2 workers take the same gradients, so they give the
#   same samples to the last digit: over the last half of training their mean must come within
#   0.1 of 3 and their deviation within [0.3, 0.7] (measured: 2.995 and 0.44; the generator
#   starts at a mean near 0 and a deviation near 0.4, and a collapsed one draws a deviation
#   near 0.05). Async on 2 workers, whose stale gradients make it wander more, learns the mean
#   as well, its deviation at least 0.15 (2.99-3.01 and 0.21-0.38 in seven runs);
# - the generator's variables are the graph's: a run stopped at step 2000 and resumed from its
#   checkpoint ends where the uninterrupted run ends, to the last digit.
#
#   gan_test.sh GAN MPIEXEC NP_FLAG WORKDIR
set -euo pipefail
gan=$1 mpiexec=$2 np_flag=$3 work=$4
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work"
cd "$work"
. "$here/example_jobs.sh"

# "MEAN DEVIATION" from a job's summary line.
statistics() {
  sed -nE 's/^gan: generated samples over the last half of training: mean ([-0-9.]+), standard deviation ([0-9.]+) .*/\1 \2/p' "$1.log"
}
# check_learned NAME [LEAST_DEVIATION]
check_learned() {
  local name=$1 least=${2:-0.3} mean deviation
  read -r mean deviation <<< "$(statistics "$name")"
  [[ -n $mean ]] || { echo "$name: no summary line"; exit 1; }
  awk -v m="$mean" -v d="$deviation" -v least="$least" \
    'BEGIN { exit !(m > 2.9 && m < 3.1 && d >= least && d <= 0.7) }' ||
    { echo "$name: the samples' mean $mean and deviation $deviation are not N(3, 0.5)'s"; exit 1; }
  echo "$name: mean $mean, deviation $deviation"
}

run_job "$gan" allreduce 2
check_learned allreduce
run_job "$gan" sync 3 --ps_tasks=1 --mode=sync
check_learned sync
[[ "$(statistics allreduce)" == "$(statistics sync)" ]] ||
  { echo "allreduce and sync differ: $(statistics allreduce) against $(statistics sync)"; exit 1; }
run_job "$gan" async 3 --ps_tasks=1 --mode=async
check_learned async 0.15

run_job "$gan" first_half 2 --checkpoint_dir=ckpt --train_steps=2000
run_job "$gan" resumed 2 --checkpoint_dir=ckpt
grep -q "^restored from ckpt at global step 2000$" resumed.log || { echo "resumed: not restored at step 2000"; exit 1; }
[[ "$(statistics resumed)" == "$(statistics allreduce)" ]] ||
  { echo "the resumed run ends at $(statistics resumed), the uninterrupted one at $(statistics allreduce)"; exit 1; }
echo "gan test passed"
