#!/usr/bin/env bash
# Restart after kill -9: train to step 300 with a checkpoint every 100 steps, kill the whole job
# at a random point after step 150, run the same command again. The rerun must resume from the
# last saved step (not 0), end at step 300, and (sync mode) end with the parameters of an
# uninterrupted run, to 1e-6.
#
#   restart_test.sh TRAIN MPIEXEC NP_FLAG WORKDIR
set -euo pipefail
. "$(dirname "$0")/job_control.sh"
train=$1 mpiexec=$2 np_flag=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
args=(--ps_tasks=1 --mode=sync --model=small_cnn --train_steps=300 --save_checkpoint_steps=100
      --save_checkpoint_secs=0 --log_every_steps=10 --print_cluster=false --learning_rate=0.02)
run() { "$mpiexec" "$np_flag" 3 --oversubscribe "$train" "${args[@]}" --checkpoint_dir="$1" "${@:2}"; }

echo "== uninterrupted run"
run "$work/straight" > "$work/straight.log" 2>&1 || { cat "$work/straight.log"; exit 1; }

# The chief stalls at a random step from 150 to 290, so that the kill lands before the end however
# fast the machine trains, and after a random part of the remaining steps.
stall=$((150 + RANDOM % 141))
echo "== run killed with SIGKILL after step 150 (the chief stalls at step $stall)"
fault="--inject_fault=stall --inject_fault_task=0 --inject_fault_step=$stall"
setsid bash -c "$(declare -f run); $(declare -p train mpiexec np_flag args); run '$work/killed' $fault" \
  > "$work/killed.log" 2>&1 &
leader=$!
wait_for_line "$work/killed.log" "^step (1[5-9][0-9]|2[0-9][0-9])/" "$leader"
sleep "0.$((RANDOM % 5))"
kill -KILL -- "-$leader" 2>/dev/null || true
wait "$leader" 2>/dev/null || true
last=$(grep -oE "^step [0-9]+" "$work/killed.log" | tail -1)
echo "killed after: $last"
if grep -q "^final:" "$work/killed.log"; then echo "the job finished before the kill"; exit 1; fi

echo "== the same command again"
run "$work/killed" > "$work/resumed.log" 2>&1 || { cat "$work/resumed.log"; exit 1; }
cat "$work/resumed.log"
grep -qE "restored from .* at global step [12]00$" "$work/resumed.log" \
  || { echo "did not resume from step 100 or 200"; exit 1; }
grep -q "^final: global step 300," "$work/resumed.log" || { echo "did not end at step 300"; exit 1; }
/usr/bin/python3 "$(dirname "$0")/compare_checkpoints.py" --rtol 1e-6 \
  "$work/killed/model.ckpt-300.safetensors" "$work/straight/model.ckpt-300.safetensors"
echo "restart test passed"
