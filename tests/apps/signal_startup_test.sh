#!/usr/bin/env bash
# SIGTERM to every rank while the job is still starting (MPI's start-up takes a noticeable part
# of a second): each rank honours it as soon as it has its handler, which app::Run installs
# first of all; the job stops after its first step, every rank exits 0.
#
#   signal_startup_test.sh TRAIN MPIEXEC NP_FLAG WORKDIR
set -euo pipefail
. "$(dirname "$0")/job_control.sh"
train=$1 mpiexec=$2 np_flag=$3 work=$4
rm -rf "$work" && mkdir -p "$work"

"$mpiexec" "$np_flag" 2 --oversubscribe "$train" --mode=allreduce --train_steps=100000 \
  --print_cluster=false > "$work/job.log" 2>&1 &
job=$!
end_job_at_exit "$job" "$train"
# A rank's SIGTERM handler shows as bit 15 of SigCgt in /proc/PID/status.
handles_sigterm() {
  local mask
  mask=$(sed -n 's/^SigCgt:\s*//p' "/proc/$1/status" 2>/dev/null) || return 1
  [ -n "$mask" ] && (( (16#$mask >> 14) & 1 ))
}
signalled=()
for _ in $(seq 1 1000); do
  for pid in $(rank_pids "$job" "$train"); do
    [[ " ${signalled[*]} " == *" $pid "* ]] && continue
    if handles_sigterm "$pid"; then kill -TERM "$pid" && signalled+=("$pid"); fi
  done
  [ "${#signalled[@]}" -eq 2 ] && break
  kill -0 "$job" 2>/dev/null || break
  sleep 0.005
done
started=$(grep -c "^step " "$work/job.log" || true)
status=0
wait "$job" || status=$?
cat "$work/job.log"
[ "${#signalled[@]}" -eq 2 ] || { echo "signalled ${#signalled[@]} of 2 ranks"; exit 1; }
[ "$status" -eq 0 ] || { echo "the job exited $status after SIGTERM at start-up, expected 0"; exit 1; }
stopped=$(stopped_step "$work/job.log" 15)
[ -n "$stopped" ] || { echo "the job did not report stopping on the signal"; exit 1; }
echo "start-up signal test passed: signalled before $started logged steps, stopped at step $stopped"
