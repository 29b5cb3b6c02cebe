#!/usr/bin/env bash
# train's final evaluation joins the eval run (checkpoint_dir/eval, or summary_dir/eval) once,
# with the numbers of the final line, in every mode, as TensorFlow's train_and_evaluate writes its
# last evaluation; the evaluator job writes the same series. Each run's eval/metrics.csv and its
# event files must hold `loss` and `accuracy` alone, at the steps given, the last being the final
# line's step with its accuracy and loss (to the four places printed):
# - local mode, 25 steps evaluated every 10, with moving averages: 10, 20 and 25; resumed to 35,
#   30 and 35 follow;
# - allreduce mode, two workers, 30 steps evaluated every 15: 15 and 30, the last once;
# - sync mode, a ps and two workers, without --eval_every_steps: the final evaluation alone;
# - an evaluator job beside a chief that evaluates every 20 steps into a --summary_dir of its
#   own: the evaluator's tags are the chief's, and its evaluation of the final checkpoint is the
#   chief's final one (the loss to its sum's rounding).
#
#   final_evaluation_test.sh TRAIN MPIEXEC NP_FLAG WORKDIR
set -euo pipefail
train=$1 mpiexec=$2 np_flag=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
common=(--log_every_steps=0 --print_cluster=false --save_checkpoint_steps=10)

# run NAME NP FLAGS...: train on NP ranks, its output in $work/NAME.log; must succeed.
run() {
  local name=$1 np=$2
  shift 2
  local status=0
  timeout -k 5 60 "$mpiexec" "$np_flag" "$np" --oversubscribe "$train" "${common[@]}" "$@" \
    > "$work/$name.log" 2>&1 || status=$?
  cat "$work/$name.log"
  ((status == 0)) || { echo "$name: the job failed (status $status; 124 or 137: still running after 60 s)"; exit 1; }
}

# eval_run NAME DIR STEPS...: DIR's eval run holds loss and accuracy at STEPS, in order, each
# once, in metrics.csv and in the event files alike, the last with the final line's numbers.
eval_run() {
  local name=$1 dir=$2
  shift 2
  python3 - "$work/$name.log" "$dir" "$@" <<'PY' || { echo "$name: wrong eval run in $dir"; exit 1; }
import csv, glob, re, struct, sys

log, logdir, steps = sys.argv[1], sys.argv[2], [int(s) for s in sys.argv[3:]]
final = re.search(r"^final: global step (\d+), test accuracy ([0-9.]+), test loss ([0-9.]+),",
                  open(log).read(), re.M)
assert final, "no final line"
assert int(final[1]) == steps[-1], f"the final step is {final[1]}, not {steps[-1]}"

def varint(b, i):
    n = shift = 0
    while True:
        n |= (b[i] & 0x7F) << shift
        shift += 7
        i += 1
        if b[i - 1] < 0x80:
            return n, i

def fields(b):
    # (number, value) of each field of a protobuf message: ints, bytes and 32-bit floats.
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        kind = key & 7
        if kind == 0:
            v, i = varint(b, i)
        elif kind == 1:
            v, i = b[i:i + 8], i + 8
        elif kind == 5:
            v, i = struct.unpack("<f", b[i:i + 4])[0], i + 4
        else:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        yield key >> 3, v

# (tag, step, value) from the rows and from the events' scalar summaries.
rows = [(r["tag"], int(r["step"]), float(r["value"])) for r in csv.DictReader(open(logdir + "/metrics.csv"))]
events = []
for path in sorted(glob.glob(logdir + "/events.out.tfevents.*")):
    data = open(path, "rb").read()
    i = 0
    while i < len(data):
        n = struct.unpack("<Q", data[i:i + 8])[0]
        event = dict(fields(data[i + 12:i + 12 + n]))
        i += 16 + n
        for number, value in fields(event.get(5, b"")):
            v = dict(fields(value))
            events.append((v[1].decode(), event.get(2, 0), v[2]))
for what, points in (("metrics.csv", rows), ("the event files", events)):
    tags = sorted({t for t, _, _ in points})
    assert tags == ["accuracy", "loss"], f"{what}: tags {tags}, not accuracy and loss"
    for tag in tags:
        at = [s for t, s, _ in points if t == tag]
        assert at == steps, f"{what}: {tag} at steps {at}, not {steps}"
    last = {t: v for t, s, v in points if s == steps[-1]}
    assert ("%.4f" % last["accuracy"], "%.4f" % last["loss"]) == (final[2], final[3]), \
        f"{what}: accuracy {last['accuracy']}, loss {last['loss']} at step {steps[-1]}, the final line {final[2]}, {final[3]}"
print(f"{logdir}: loss and accuracy at steps {steps}, the last the final line's")
PY
}

run local 1 --mode=local --train_steps=25 --eval_every_steps=10 --moving_average_decay=0.9 --checkpoint_dir="$work/local"
eval_run local "$work/local/eval" 10 20 25
run resumed 1 --mode=local --train_steps=35 --eval_every_steps=10 --moving_average_decay=0.9 --checkpoint_dir="$work/local"
eval_run resumed "$work/local/eval" 10 20 25 30 35

run allreduce 2 --mode=allreduce --train_steps=30 --eval_every_steps=15 --checkpoint_dir="$work/allreduce"
eval_run allreduce "$work/allreduce/eval" 15 30

run sync 3 --ps_tasks=1 --mode=sync --train_steps=20 --checkpoint_dir="$work/sync"
eval_run sync "$work/sync/eval" 20

# The evaluator beside a chief (MPMD): the chief's evaluations go to the --summary_dir's eval
# run, the evaluator's to --checkpoint_dir's.
a=(--mode=local --train_steps=30 --eval_every_steps=20 --checkpoint_dir="$work/evj" --summary_dir="$work/evj_summaries")
status=0
timeout -k 5 60 "$mpiexec" "$np_flag" 1 --oversubscribe "$train" --job_name=chief "${common[@]}" "${a[@]}" \
  : "$np_flag" 1 "$train" --job_name=evaluator "${common[@]}" "${a[@]}" > "$work/evaluator.log" 2>&1 || status=$?
cat "$work/evaluator.log"
((status == 0)) || { echo "evaluator: the job failed (status $status)"; exit 1; }
eval_run evaluator "$work/evj_summaries/eval" 20 30
tags() { sed 1d "$1" | cut -d, -f3 | sort -u | tr '\n' ' '; }
[ "$(tags "$work/evj/eval/metrics.csv")" = "$(tags "$work/evj_summaries/eval/metrics.csv")" ] ||
  { echo "the evaluator's tags ($(tags "$work/evj/eval/metrics.csv")) are not the chief's" \
         "($(tags "$work/evj_summaries/eval/metrics.csv"))"; exit 1; }
final=$(sed -nE 's/^final: global step 30, test accuracy ([0-9.]+), test loss ([0-9.]+),.*/\1 \2/p' "$work/evaluator.log")
last=$(sed -nE 's/^evaluator:0 evaluated global step 30: test accuracy ([0-9.]+), test loss ([0-9.]+)$/\1 \2/p' \
         "$work/evaluator.log")
[ -n "$final" ] && [ -n "$last" ] || { echo "no final line, or no evaluation of the final checkpoint"; exit 1; }
awk -v a="$final" -v b="$last" 'BEGIN { split(a, x, " "); split(b, y, " ");
    d = x[2] - y[2]; exit !(x[1] == y[1] && d <= 0.0002 && d >= -0.0002) }' \
  || { echo "the evaluator's final evaluation ($last) differs from the chief's ($final)"; exit 1; }
grep -qE '^30,[0-9.]+,accuracy,' "$work/evj/eval/metrics.csv" \
  || { echo "the evaluator wrote no accuracy at step 30"; exit 1; }
echo "final evaluation test passed"
