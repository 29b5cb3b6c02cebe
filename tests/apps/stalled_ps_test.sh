#!/usr/bin/env bash
# A ps task that stalls (SIGSTOP) while async training goes on over its one-sided windows: the
# workers train to the end without it, then wait for it to free the windows, and the stall timeout
# (3 s here) ends that wait naming it: "timed out after 3 s waiting for ps:0 (rank 0) to reach
# the end of training" (said by each worker, or once for both), status 1, no rank left behind.
#
#   stalled_ps_test.sh TRAIN MPIEXEC NP_FLAG WORKDIR
set -euo pipefail
. "$(dirname "$0")/job_control.sh"
train=$1 mpiexec=$2 np_flag=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
"$mpiexec" "$np_flag" 3 --oversubscribe "$train" --ps_tasks=1 --mode=async --model=mlp --hidden=32 \
  --train_steps=20000 --log_every_steps=100 --print_cluster=false --stall_timeout_secs=3 \
  > "$work/log" 2>&1 &
job=$!
end_job_at_exit "$job" "$train"
wait_for_line "$work/log" "^step [0-9]+/" "$job"
ps=$(rank_pid "$job" "$train" 0 "the ps task" "$work/log")
kill -STOP "$ps"
status=0
timeout 90 tail --pid="$job" -f /dev/null || { echo "FAIL: the job did not end"; cat "$work/log"; exit 1; }
wait "$job" || status=$?
cat "$work/log"
((status == 1)) || { echo "FAIL: the job exited with status $status, not 1"; exit 1; }
grep -qE "^(\[worker:[01] rank [12]\]|\[all 2 workers\]) error: timed out after 3 s waiting for ps:0 \(rank 0\) to reach the end of training \(stalled, or lost\?\)$" "$work/log" \
  || { echo "FAIL: no worker named the stalled ps"; exit 1; }
grep -qE "^final: " "$work/log" && { echo "FAIL: a final line, as if training had ended well"; exit 1; }
echo "stalled ps test passed"
