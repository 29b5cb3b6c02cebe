#!/usr/bin/env bash
# SIGTERM to one worker alone in sync mode (1 ps + 2 workers): that worker stops after its step
# and leaves; the chief trains on with the other gradients, warns once, and the final line counts
# the worker that left, and its images/s only the gradients applied. The job ends 0 with every
# step trained, although the rest of training outlasts the stall timeout (2 s here) that the
# worker that left waits for the others under: its wait is no stall.
#
#   signal_one_worker_test.sh TRAIN MPIEXEC NP_FLAG WORKDIR
set -euo pipefail
. "$(dirname "$0")/job_control.sh"
train=$1 mpiexec=$2 np_flag=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
"$mpiexec" "$np_flag" 3 --oversubscribe "$train" --ps_tasks=1 --mode=sync --model=mlp \
  --train_steps=20000 --log_every_steps=100 --print_cluster=false --metrics_json="$work/metrics.json" \
  --stall_timeout_secs=2 \
  > "$work/log" 2>&1 &
job=$!
end_job_at_exit "$job" "$train"
# The signal at about step 100 of 20000 (seconds before the end on any machine).
wait_for_line "$work/log" "^step [0-9]+/" "$job"
worker=$(rank_pid "$job" "$train" 2 "worker 1" "$work/log")
kill -TERM "$worker" || { echo "worker 1 was gone before the signal"; cat "$work/log"; exit 1; }
signalled=$EPOCHREALTIME
status=0
timeout 120 tail --pid="$job" -f /dev/null || { echo "the job did not end"; kill -9 "$job"; }
wait "$job" || status=$?
cat "$work/log"
((status == 0)) || { echo "FAIL: the job exited with status $status"; exit 1; }
/usr/bin/python3 -c "import sys; after = $EPOCHREALTIME - $signalled; print(f'the job ended {after:.1f} s after the signal'); sys.exit(after < 3)" \
  || { echo "FAIL: training after the signal was too short to outlast the stall timeout"; exit 1; }
grep -qE "^\[worker:1 rank 2\] signal 15: stopping after global step [0-9]+$" "$work/log" \
  || { echo "FAIL: the worker did not say it stopped"; exit 1; }
[ "$(grep -cE "^\[worker:0 rank 1\] warning: 1 of 2 workers have left training by global step [0-9]+; a step now averages 1 gradient$" "$work/log")" = 1 ] \
  || { echo "FAIL: the chief did not warn once that a worker left"; exit 1; }
grep -qE "^final: global step 20000, .*, 1 of 2 workers left before the end" "$work/log" \
  || { echo "FAIL: the final line does not count the worker that left"; exit 1; }
# The run's examples count the worker's gradients up to its last step, and none after: each
# update averaged 2 gradients until about the step it left at, then 1.
left=$(sed -nE 's/^\[worker:1 rank 2\] signal 15: stopping after global step ([0-9]+)$/\1/p' "$work/log")
/usr/bin/python3 - "$work/metrics.json" "$left" <<'PY' || exit 1
import json, sys
examples, left = json.load(open(sys.argv[1]))["train_examples"], int(sys.argv[2])
low, high = (20000 + left - 2) * 64, (20000 + left + 2) * 64
if not low <= examples <= high:
    sys.exit(f"FAIL: train_examples {examples}, not in [{low}, {high}] for a worker that left at step {left}")
PY
echo "one-worker signal test passed"
