#!/usr/bin/env bash
# The exit status says what another try of the same command may expect (docs/GUIDE.md, "Exit
# statuses"): 2 for an input that fails the same way again (a flag, a data directory, a
# checkpoint of another model), 3 for training that diverged (a NaN loss), alone and under
# mpirun, where the failing rank's status is the job's. The stalled-ps test holds a fault that
# may pass (1); the signal tests, 128 + the signal.
#
#   exit_status_test.sh TRAIN MPIEXEC NP_FLAG WORKDIR
set -uo pipefail
train=$1 mpiexec=$2 np_flag=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
failures=0
expect() {  # expect STATUS NAME COMMAND...: COMMAND ends with STATUS and one "error: " line
  local want=$1 name=$2 status=0
  shift 2
  timeout 120 "$@" > "$work/$name.log" 2>&1 || status=$?
  local errors
  errors=$(grep -c "error: " "$work/$name.log")
  if ((status != want)) || ((errors < 1)); then
    cat "$work/$name.log"
    echo "FAIL: $name ended with status $status ($errors error lines), expected $want"
    failures=$((failures + 1))
  else
    echo "$name: status $status: $(grep -m1 "error: " "$work/$name.log")"
  fi
}
common=(--model=mlp --hidden=32 --log_every_steps=0 --print_cluster=false)
expect 2 bad_flag "$train" --mode=local "${common[@]}" --train_steps=5 --optimizer=adamm
expect 2 no_data "$train" --mode=local "${common[@]}" --train_steps=5 --data_dir="$work/nowhere"
expect 3 nan_local "$train" --mode=local "${common[@]}" --hidden=64,64 --train_steps=30 --learning_rate=1e6
expect 3 nan_allreduce "$mpiexec" "$np_flag" 2 --oversubscribe "$train" --mode=allreduce "${common[@]}" \
  --hidden=64,64 --train_steps=30 --learning_rate=1e6
timeout 120 "$train" --mode=local "${common[@]}" --train_steps=5 --checkpoint_dir="$work/mlp" \
  > "$work/mlp.log" 2>&1 || { cat "$work/mlp.log"; exit 1; }
expect 2 another_model "$train" --mode=local --model=small_cnn --log_every_steps=0 --train_steps=10 \
  --checkpoint_dir="$work/mlp"
expect 2 another_model_sync "$mpiexec" "$np_flag" 3 --oversubscribe "$train" --mode=sync --ps_tasks=1 \
  --model=small_cnn --log_every_steps=0 --print_cluster=false --train_steps=10 --checkpoint_dir="$work/mlp"
# The other ranks, ended by mpirun's signal as the job goes down, say so without "error: ".
grep -E "error: " "$work/another_model_sync.log" | grep -v "it was written by model" \
  && { echo "FAIL: an error line besides the root cause's"; failures=$((failures + 1)); }
((failures == 0)) || exit 1
echo "exit status test passed"
