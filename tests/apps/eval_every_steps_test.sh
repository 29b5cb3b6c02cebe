#!/usr/bin/env bash
# train --eval_every_steps with two workers: in sync mode the chief evaluates the test set alone,
# in allreduce mode the workers share each evaluation out (each its part, the chief's
# parameters). Either way every evaluation is printed, and the one at the last step is the final
# evaluation's (shared out at the end in both modes): the same accuracy, and the same loss to
# its sum's rounding. Then --patience and --reduce_lr_patience stop training and lower the
# learning rate in both modes, and the metrics file says training stopped early; and a job
# started again on its checkpoints goes on counting.
#
#   eval_every_steps_test.sh TRAIN MPIEXEC NP_FLAG WORKDIR
set -euo pipefail
train=$1 mpiexec=$2 np_flag=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
for mode in sync allreduce; do
  ps=0
  [ "$mode" = sync ] && ps=1
  status=0
  out=$("$mpiexec" "$np_flag" $((ps + 2)) --oversubscribe "$train" --ps_tasks=$ps --mode=$mode \
          --train_steps=100 --eval_every_steps=50 --log_every_steps=0 --print_cluster=false 2>&1) || status=$?
  echo "$out"
  ((status == 0)) || { echo "$mode: the job failed ($status)"; exit 1; }
  grep -qE "^validation at global step 50: loss [0-9.]+, accuracy 0\.[5-9][0-9]* \(the best so far\)$" <<<"$out" \
    || { echo "$mode: no evaluation at step 50"; exit 1; }
  last=$(sed -nE 's/^validation at global step 100: loss ([0-9.]+), accuracy ([0-9.]+) .*/\2 \1/p' <<<"$out")
  final=$(sed -nE 's/^final: global step 100, test accuracy ([0-9.]+), test loss ([0-9.]+),.*/\1 \2/p' <<<"$out")
  [ -n "$last" ] && [ -n "$final" ] || { echo "$mode: no evaluation at step 100, or no final one"; exit 1; }
  awk -v a="$last" -v b="$final" 'BEGIN { split(a, x, " "); split(b, y, " ");
      d = x[2] - y[2]; exit !(x[1] == y[1] && d <= 0.0002 && d >= -0.0002) }' \
    || { echo "$mode: the evaluation at step 100 ($last) is not the final one ($final)"; exit 1; }
  echo "$mode: evaluated at steps 50 and 100, the last as the final evaluation ($final)"

  # No evaluation can beat the first by 1e9: the learning rate is lowered after each evaluation
  # without improvement, and the second ends training on every worker.
  status=0
  out=$("$mpiexec" "$np_flag" $((ps + 2)) --oversubscribe "$train" --ps_tasks=$ps --mode=$mode \
          --min_delta=1e9 --train_steps=1000 --eval_every_steps=20 --patience=2 --reduce_lr_patience=1 \
          --log_every_steps=0 --print_cluster=false --metrics_json="$work/$mode.json" 2>&1) || status=$?
  echo "$out"
  ((status == 0)) || { echo "$mode: the job that stops early failed ($status)"; exit 1; }
  for line in "^validation: loss has not improved in 1 evaluation: learning rate scaled to 0.1 of the schedule's$" \
              "^validation: loss has not improved in 2 evaluations: stopping$" "^final: global step 60, "; do
    grep -qE "$line" <<<"$out" || { echo "$mode: no line $line"; exit 1; }
  done
  /usr/bin/python3 -c 'import json, sys; m = json.load(open(sys.argv[1])); sys.exit(0 if m["stopped_early"] is True and m["global_step"] == 60 else 1)' \
    "$work/$mode.json" || { echo "$mode: the metrics file does not say training stopped early"; exit 1; }
  echo "$mode: stopped early at step 60"

  # The same counts across a restart: a first job of 40 steps evaluates at 20 (the best) and 40,
  # and its checkpoint keeps the count; the job started again on its checkpoints stops at 80, as
  # one job would have (counting afresh, it would go on to 120).
  for steps in 40 1000; do
    status=0
    out=$("$mpiexec" "$np_flag" $((ps + 2)) --oversubscribe "$train" --ps_tasks=$ps --mode=$mode \
            --min_delta=1e9 --train_steps=$steps --eval_every_steps=20 --patience=3 \
            --checkpoint_dir="$work/$mode-ckpt" --log_every_steps=0 --print_cluster=false 2>&1) || status=$?
    echo "$out"
    ((status == 0)) || { echo "$mode: the job of $steps steps failed ($status)"; exit 1; }
  done
  grep -q "^final: global step 80, " <<<"$out" \
    || { echo "$mode: the job started again did not stop at step 80"; exit 1; }
  echo "$mode: stopped at step 80 after a restart at step 40"
done
echo "eval_every_steps test passed"
