#!/usr/bin/env bash
# SIGUSR1 (Slurm's walltime warning) to every rank of a user's program in ps mode — the guide
# example, whose ps task only calls server.join(): the workers stop at the end of a step, the
# chief writes a final checkpoint, the ps serves until they are done, and every rank exits 0;
# the same command again resumes from that checkpoint and finishes.
#
#   signal_user_program_test.sh PROGRAM MPIEXEC NP_FLAG WORKDIR
set -euo pipefail
. "$(dirname "$0")/job_control.sh"
program=$1 mpiexec=$2 np_flag=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
args=(--ps_tasks=1 --sync_replicas --checkpoint_dir="$work/ckpt")

COHORT_TRAIN_STEPS=20000 "$mpiexec" "$np_flag" 3 --oversubscribe "$program" "${args[@]}" \
  > "$work/first.log" 2>&1 &
job=$!
end_job_at_exit "$job" "$program"
wait_for_line "$work/first.log" "^global_step = [1-9][0-9]{2}," "$job" 1200
mapfile -t ranks < <(rank_pids "$job" "$program")
[ "${#ranks[@]}" -eq 3 ] || { echo "found ${#ranks[@]} ranks, expected 3"; cat "$work/first.log"; exit 1; }
kill -USR1 "${ranks[@]}"
status=0
wait "$job" || status=$?
cat "$work/first.log"
[ "$status" -eq 0 ] || { echo "the job exited $status after SIGUSR1 to every rank, expected 0"; exit 1; }
stopped=$(stopped_step "$work/first.log" 10)
[ -n "$stopped" ] || { echo "the chief did not report stopping on the signal"; exit 1; }
[ -f "$work/ckpt/model.ckpt-$stopped.safetensors" ] || { echo "no final checkpoint at step $stopped"; exit 1; }
grep -q "signal 10: serving until the computing tasks are done" "$work/first.log" \
  || { echo "the ps did not report the signal while serving"; exit 1; }
[ "$(grep -cE '^worker [01]: [0-9]+ steps' "$work/first.log")" -eq 2 ] \
  || { echo "not both workers ended their session"; exit 1; }

target=$((stopped + 200))
COHORT_TRAIN_STEPS=$target "$mpiexec" "$np_flag" 3 --oversubscribe "$program" "${args[@]}" \
  > "$work/second.log" 2>&1 || { cat "$work/second.log"; exit 1; }
grep -q "restored from .* at global step $stopped$" "$work/second.log" \
  || { cat "$work/second.log"; echo "did not resume from step $stopped"; exit 1; }
grep -qE "^guide: 2 workers, 1 ps, mode sync, global step $target," "$work/second.log" \
  || { cat "$work/second.log"; echo "did not finish at step $target"; exit 1; }
echo "user program signal test passed: every rank exited 0 at step $stopped, resumed to $target"
