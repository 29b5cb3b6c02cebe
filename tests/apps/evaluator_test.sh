#!/usr/bin/env bash
# An evaluator task beside a ps and two workers (MPMD launch): it follows the chief's
# checkpoints, evaluates each one it sees on the test set, writes its own summaries under
# checkpoint_dir/eval, and exits once training has ended, after evaluating the final checkpoint:
# its last evaluation must equal the chief's final one. Then the same job resumes in a copy of
# that directory whose index names a checkpoint that is gone: the chief falls back to the one
# before, and the evaluator, which reads the index too, warns and looks again until the chief's
# next save, rather than end the job; this job keeps a moving average of the parameters, which
# the chief and the evaluator both evaluate. Last, an evaluator that stalls (SIGSTOP) does not keep the
# job alive for good once training is over: the others give up in MPI_Finalize after
# --stall_timeout_secs. And a final checkpoint the evaluator cannot read fails the job.
#
#   evaluator_test.sh TRAIN MPIEXEC NP_FLAG WORKDIR
set -euo pipefail
. "$(dirname "$0")/job_control.sh"
train=$1 mpiexec=$2 np_flag=$3 work=$4
rm -rf "$work" && mkdir -p "$work"

# launch FLAGS...: 1 ps, 2 workers and an evaluator (MPMD), sync mode, each given FLAGS. A job
# still running after 60 s (they take seconds) is ended, so that a hang fails the part of the
# test it hung in, with its log, rather than the whole test by its time limit.
launch() {
  local args=(--mode=sync --log_every_steps=0 --print_cluster=false "$@")
  timeout -k 5 60 "$mpiexec" "$np_flag" 1 --oversubscribe "$train" --job_name=ps "${args[@]}" \
    : "$np_flag" 2 "$train" --job_name=worker "${args[@]}" \
    : "$np_flag" 1 "$train" --job_name=evaluator "${args[@]}"
}

# job STEPS CHECKPOINT_DIR LOG [FLAGS...]: launch, a checkpoint every 100 steps; must succeed.
job() {
  local steps=$1 dir=$2 log=$3
  shift 3
  local status=0
  launch --train_steps="$steps" --save_checkpoint_steps=100 --checkpoint_dir="$dir" "$@" > "$log" 2>&1 || status=$?
  ((status == 0)) || { cat "$log"; echo "the job failed (status $status; 124 or 137: still running after 60 s)"; exit 1; }
  cat "$log"
}

# final_and_evaluated LOG STEP: the chief's final accuracy and loss, and the evaluator's of the
# final checkpoint, which must be equal: the accuracy exactly, the loss to its sum's rounding (the
# workers share the final evaluation out, the evaluator makes it alone).
final_and_evaluated() {
  local final last
  final=$(sed -nE "s/^final: global step $2, test accuracy ([0-9.]+), test loss ([0-9.]+),.*/\1 \2/p" "$1")
  [ -n "$final" ] || { echo "the chief did not finish $2 steps"; exit 1; }
  last=$(sed -nE "s/^evaluator:0 evaluated global step $2: test accuracy ([0-9.]+), test loss ([0-9.]+)$/\1 \2/p" "$1")
  [ -n "$last" ] || { echo "the evaluator did not evaluate the final checkpoint (step $2)"; exit 1; }
  awk -v a="$final" -v b="$last" 'BEGIN { split(a, x, " "); split(b, y, " ");
      d = x[2] - y[2]; exit !(x[1] == y[1] && d <= 0.0002 && d >= -0.0002) }' \
    || { echo "the evaluator's final evaluation ($last) differs from the chief's ($final)"; exit 1; }
  echo "$last"
}

job 400 "$work/ckpt" "$work/run.log"
last=$(final_and_evaluated "$work/run.log" 400)
grep -qE "^evaluator:0: [1-9][0-9]* checkpoints? evaluated$" "$work/run.log" \
  || { echo "the evaluator did not end"; exit 1; }
csv=$work/ckpt/eval/metrics.csv
# The tags a ValidationHook writes in its eval run (TensorFlow's estimators' names), no others.
grep -qE '^400,[0-9.]+,accuracy,' "$csv" || { echo "no accuracy at step 400 in $csv"; exit 1; }
[ "$(sed 1d "$csv" | cut -d, -f3 | sort -u | tr '\n' ' ')" = "accuracy loss " ] \
  || { echo "$csv holds other tags than loss and accuracy"; exit 1; }
ls "$work"/ckpt/eval/events.out.tfevents.* > /dev/null || { echo "no event file in ckpt/eval"; exit 1; }
# A session start (Event field 7, SessionLog{status: START}): an evaluator started again after a
# restart evaluates the latest checkpoint again, and TensorBoard then drops the earlier point.
python3 -c 'import glob, sys; sys.exit(0 if any(b"\x3a\x02\x08\x01" in open(f, "rb").read() for f in glob.glob(sys.argv[1] + "/events.out.tfevents.*")) else 1)' \
  "$work/ckpt/eval" || { echo "no session start in the evaluator's event file"; exit 1; }
grep -q "ps:0 served for" "$work/run.log" || { echo "the ps did not return from join()"; exit 1; }
evaluations=$(grep -c '^evaluator:0 evaluated' "$work/run.log")

# Resumed with a moving average of the parameters, which starts at the restored variables (the
# checkpoint holds none): the chief evaluates the averages, and so does the evaluator, from the
# checkpoints that hold them.
cp -r "$work/ckpt" "$work/ckpt2"
rm "$work/ckpt2/model.ckpt-400.safetensors"
job 500 "$work/ckpt2" "$work/resumed.log" --moving_average_decay=0.99
grep -q "^\[evaluator:0 rank 3\] warning: .*model\.ckpt-400\.safetensors.*; looking again in a moment$" "$work/resumed.log" \
  || { echo "the evaluator did not warn of the missing checkpoint"; exit 1; }
grep -q "^evaluated on the moving averages of the parameters, decay 0.99$" "$work/resumed.log" \
  || { echo "the chief did not say it evaluates the moving averages"; exit 1; }
averaged=$(final_and_evaluated "$work/resumed.log" 500)
python3 - "$work/ckpt2/model.ckpt-500.safetensors" <<'PY' || { echo "the final checkpoint's moving averages are wrong"; exit 1; }
import json, struct, sys
data = open(sys.argv[1], "rb").read()
header = json.loads(data[8:8 + struct.unpack("<Q", data[:8])[0]])
names = [n for n in header if n != "__metadata__"]
variables = [n for n in names if not n.startswith("optimizer/") and not n.endswith("/ExponentialMovingAverage")]
averages = [n for n in names if n.endswith("/ExponentialMovingAverage")]
assert sorted(averages) == sorted(v + "/ExponentialMovingAverage" for v in variables), names
assert all(header[v]["shape"] == header[v + "/ExponentialMovingAverage"]["shape"] for v in variables)
PY

# launch_and_stop_evaluator LOG FLAGS...: launch in the background (pid in $job, its start in
# $launched) and stop the evaluator (SIGSTOP; pid in $evaluator) once training has begun.
launch_and_stop_evaluator() {
  local log=$1
  shift
  launched=$SECONDS
  launch "$@" > "$log" 2>&1 &
  job=$!
  end_job_at_exit "$job" "$train"
  wait_for_line "$log" "^training mlp" "$job"
  evaluator=$(rank_pid "$job" "$train" 3 "the evaluator")
  kill -STOP "$evaluator"
}

launch_and_stop_evaluator "$work/stalled.log" --train_steps=300 --wait_timeout_secs=2 \
  --stall_timeout_secs=3 --checkpoint_dir="$work/ckpt3"
# The others give up on it by themselves. Then mpiexec ends the job, but its SIGTERM cannot end
# a stopped process, and it would wait for the evaluator for good: the test kills it once the
# others have given up.
wait_for_line "$work/stalled.log" "error: no progress for 3 s in MPI_Finalize" "$job"
kill -KILL "$evaluator" 2>/dev/null || true
status=0
wait "$job" || status=$?
cat "$work/stalled.log"
[ "$status" -ne 0 ] || { echo "the job with a stalled evaluator exited 0"; exit 1; }
# 124 or 137 from timeout once 60 s have passed; mpiexec itself exits 137 when it reports the
# evaluator killed (by the test, above) before the others' errors.
((status != 124 && status != 137)) || ((SECONDS - launched < 60)) ||
  { echo "the job with a stalled evaluator was still running after 60 s"; exit 1; }
grep -qE "^final: global step 300, " "$work/stalled.log" || { echo "training did not finish"; exit 1; }
grep -qE "error: no progress for 3 s in MPI_Finalize, which waits for every process of the job" \
  "$work/stalled.log" || { echo "nobody gave up on the stalled evaluator"; exit 1; }
# The final checkpoint damaged before the evaluator (stopped meanwhile) reads it: it warns,
# tries a few times, then fails the job, naming the file, rather than end as if it had evaluated.
launch_and_stop_evaluator "$work/damaged.log" --train_steps=300 --save_checkpoint_steps=100 \
  --stall_timeout_secs=120 --checkpoint_dir="$work/ckpt4"
wait_for_line "$work/damaged.log" "^final: global step 300, " "$job"
: > "$work/ckpt4/model.ckpt-300.safetensors"
kill -CONT "$evaluator"
status=0
wait "$job" || status=$?
cat "$work/damaged.log"
[ "$status" -ne 0 ] || { echo "the job whose final checkpoint was damaged exited 0"; exit 1; }
((status != 124 && status != 137)) || ((SECONDS - launched < 60)) ||
  { echo "the job whose final checkpoint was damaged was still running after 60 s"; exit 1; }
grep -qE "^\[evaluator:0 rank 3\] error: evaluator:0: the final checkpoint could not be evaluated: .*model\.ckpt-300\.safetensors" \
  "$work/damaged.log" || { echo "the evaluator did not name the damaged final checkpoint"; exit 1; }

echo "evaluator test passed: $evaluations evaluations, the last equal to the chief's ($last); a missing checkpoint skipped; the moving averages evaluated alike by both ($averaged); a stalled evaluator given up on; a damaged final checkpoint failed the job"
