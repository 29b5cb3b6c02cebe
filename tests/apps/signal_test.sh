#!/usr/bin/env bash
# SIGTERM to the chief mid-training: it stops at the end of the step, writes a final checkpoint,
# every rank exits 0; the same command again resumes from that checkpoint and finishes.
#
#   signal_test.sh TRAIN MPIEXEC NP_FLAG WORKDIR
set -euo pipefail
. "$(dirname "$0")/job_control.sh"
train=$1 mpiexec=$2 np_flag=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
args=(--ps_tasks=1 --mode=sync --model=small_cnn --train_steps=400 --save_checkpoint_steps=1000
      --log_every_steps=10 --print_cluster=false --checkpoint_dir="$work/ckpt")

"$mpiexec" "$np_flag" 3 --oversubscribe "$train" "${args[@]}" > "$work/first.log" 2>&1 &
job=$!
end_job_at_exit "$job" "$train"
wait_for_line "$work/first.log" "^step ([5-9][0-9]|[1-9][0-9][0-9])/" "$job"
# The chief is worker 0: rank 1 (rank 0 is the ps).
chief=$(rank_pid "$job" "$train" 1 "the chief")
kill -TERM "$chief"
status=0
wait "$job" || status=$?
cat "$work/first.log"
[ "$status" -eq 0 ] || { echo "the job exited $status after SIGTERM, expected 0"; exit 1; }
stopped=$(stopped_step "$work/first.log" 15)
[ -n "$stopped" ] || { echo "the chief did not report stopping on the signal"; exit 1; }
[ -f "$work/ckpt/model.ckpt-$stopped.safetensors" ] || { echo "no final checkpoint at step $stopped"; exit 1; }
grep -q "ps:0 served for" "$work/first.log" || { echo "the ps did not return from join()"; exit 1; }

"$mpiexec" "$np_flag" 3 --oversubscribe "$train" "${args[@]}" > "$work/second.log" 2>&1 \
  || { cat "$work/second.log"; exit 1; }
grep -q "restored from .* at global step $stopped$" "$work/second.log" \
  || { cat "$work/second.log"; echo "did not resume from step $stopped"; exit 1; }
grep -q "^final: global step 400," "$work/second.log" || { echo "did not finish"; exit 1; }

# SIGTERM to a worker that is not the chief in allreduce mode: every replica stops with it, and
# the chief says why rather than end as if training were done.
"$mpiexec" "$np_flag" 2 --oversubscribe "$train" --mode=allreduce --model=mlp --train_steps=4000 \
  --log_every_steps=10 --print_cluster=false > "$work/allreduce.log" 2>&1 &
job=$!
end_job_at_exit "$job" "$train"
wait_for_line "$work/allreduce.log" "^step ([5-9][0-9]|[1-9][0-9][0-9])/" "$job"
kill -TERM "$(rank_pid "$job" "$train" 1 "worker 1")"
status=0
wait "$job" || status=$?
cat "$work/allreduce.log"
[ "$status" -eq 0 ] || { echo "the job exited $status after SIGTERM, expected 0"; exit 1; }
grep -qE "^\[worker:0 rank 0\] stopping after global step [0-9]+: another worker asked to stop" "$work/allreduce.log" \
  || { echo "the chief did not say that another worker stopped training"; exit 1; }
echo "signal test passed: stopped at step $stopped, resumed and finished; allreduce stopped with worker 1"
