#!/usr/bin/env bash
# SIGTERM to a worker that waits for a stalled chief (sync mode, 1 ps + 2 workers): the worker
# gives up the wait and exits within 2 s, naming the signal and what it waited for, and the job
# ends — rather than at the wait's timeout (120 s by default), past any scheduler's grace period.
#
#   signal_wait_test.sh TRAIN MPIEXEC NP_FLAG WORKDIR
set -euo pipefail
. "$(dirname "$0")/job_control.sh"
train=$1 mpiexec=$2 np_flag=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
# The chief (worker 0, rank 1) stalls at global step 20; worker 1 (rank 2) then waits for it.
"$mpiexec" "$np_flag" 3 --oversubscribe "$train" --ps_tasks=1 --mode=sync --model=mlp \
  --train_steps=100000 --inject_fault=stall --inject_fault_task=0 --inject_fault_step=20 \
  --log_every_steps=10 --print_cluster=false > "$work/log" 2>&1 &
job=$!
end_job_at_exit "$job" "$train"
wait_for_line "$work/log" "^step (1[0-9]|20)/" "$job"
sleep 1  # step 20 is reached within milliseconds: the worker is now waiting
worker=$(rank_pid "$job" "$train" 2 "worker 1" "$work/log")
sent=$(date +%s%3N)
kill -TERM "$worker"
# Gone: no process, or a zombie its launcher has not reaped yet (it may be busy ending the others).
alive() { local state; state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) && [ "$state" != Z ]; }
for _ in $(seq 1 1500); do alive "$worker" || break; sleep 0.02; done
gone=$(date +%s%3N)
alive "$worker" && { echo "FAIL: worker 1 still runs 30 s after SIGTERM"; cat "$work/log"; exit 1; }
timeout 20 tail --pid="$job" -f /dev/null ||
  { echo "FAIL: the job did not end within 20 s after the worker left"; cat "$work/log"; exit 1; }
status=0
wait "$job" || status=$?
cat "$work/log"
took=$((gone - sent))
echo "worker 1 exited ${took} ms after SIGTERM; the job exited with status $status"
((took <= 2000)) || { echo "FAIL: the worker took longer than 2 s to stop"; exit 1; }
((status != 0)) || { echo "FAIL: a job whose chief stalled exited 0"; exit 1; }
grep -qE "\[worker:1 rank 2\] stopped by signal 15 while waiting [0-9.]+ s for the chief" "$work/log" \
  || { echo "FAIL: the worker did not say why it stopped"; exit 1; }
echo "stop-in-a-wait test passed"
