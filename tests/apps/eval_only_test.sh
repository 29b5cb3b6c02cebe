#!/usr/bin/env bash
# train --eval_only evaluates a checkpoint without training: one process trains 40 steps (moving
# averages kept, images normalised) into a checkpoint directory; --eval_only then evaluates its
# latest checkpoint while another process holds the directory's write lock, and gives exactly
# the test accuracy and loss the training run printed and wrote, with the directory left as it
# was. A given checkpoint (--eval_checkpoint) is evaluated at its own step; flags that contradict
# the checkpoint are refused or warned of; a directory with no checkpoint, a missing one, a job
# of two ranks and --eval_checkpoint alone are refused in one line, with a non-zero status.
#
#   eval_only_test.sh TRAIN MPIEXEC NP_FLAG WORKDIR
set -euo pipefail
train=$1 mpiexec=$2 np_flag=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
ckpt=$work/ckpt
flags=(--mode=local --normalize --moving_average_decay=0.9 --log_every_steps=0)
fail() { echo "FAIL: $*"; exit 1; }
listing() { find "$1" -printf '%P %s %T@\n' | sort; }

echo "== training: 40 steps, a checkpoint every 20"
timeout 120 "$train" "${flags[@]}" --train_steps=40 --save_checkpoint_steps=20 --checkpoint_dir="$ckpt" \
  --metrics_json="$work/train.json" > "$work/train.log" 2>&1 || { cat "$work/train.log"; fail "training failed"; }
trained=$(sed -nE 's/^final: global step 40, (test accuracy [0-9.]+, test loss [0-9.]+),.*/\1/p' "$work/train.log")
[[ -n $trained ]] || { cat "$work/train.log"; fail "no final line at step 40"; }
listing "$ckpt" > "$work/before"

echo "== --eval_only while another process holds the write lock: the training run's numbers"
timeout 60 flock "$ckpt/checkpoint.lock" "$train" "${flags[@]}" --eval_only --checkpoint_dir="$ckpt" \
  --metrics_json="$work/eval.json" > "$work/eval.log" 2>&1 || { cat "$work/eval.log"; fail "--eval_only failed"; }
cat "$work/eval.log"
evaluated=$(sed -nE 's/^final: global step 40, (test accuracy [0-9.]+, test loss [0-9.]+), evaluation only,.*/\1/p' "$work/eval.log")
[[ $evaluated == "$trained" ]] || fail "--eval_only printed '$evaluated', training '$trained'"
grep -q "on its moving averages of the parameters" "$work/eval.log" || fail "the moving averages were not evaluated"
! grep -qE "warning|restored|training" "$work/eval.log" || fail "a warning, a restore or training in --eval_only"
/usr/bin/python3 - "$work/train.json" "$work/eval.json" <<'PY'
import json, sys
t, e = (json.load(open(p)) for p in sys.argv[1:])
for key in ("global_step", "test_accuracy", "test_loss"):
    if t[key] != e[key]:
        sys.exit(f"{key}: training wrote {t[key]}, --eval_only {e[key]}")
if not (e["eval_only"] is True and t["eval_only"] is False and e["moving_averages"] is True):
    sys.exit(f"eval_only {e['eval_only']} / {t['eval_only']}, moving_averages {e['moving_averages']}")
if e["flags"]["normalize"] is not True or not e["checkpoint"].endswith("model.ckpt-40.safetensors"):
    sys.exit(f"flags.normalize {e['flags']['normalize']}, checkpoint {e['checkpoint']}")
PY
listing "$ckpt" > "$work/after"
diff "$work/before" "$work/after" || fail "--eval_only changed the checkpoint directory"

echo "== a given checkpoint, at its own step"
timeout 60 "$train" "${flags[@]}" --eval_only --eval_checkpoint="$ckpt/model.ckpt-20.safetensors" \
  > "$work/step20.log" 2>&1 || { cat "$work/step20.log"; fail "--eval_checkpoint failed"; }
grep -qE "^final: global step 20, test accuracy 0\.[0-9]{4}, " "$work/step20.log" || { cat "$work/step20.log"; fail "not step 20"; }

echo "== flags that contradict the checkpoint"
out=$(timeout 60 "$train" --mode=local --eval_only --checkpoint_dir="$ckpt" 2>&1) && fail "--normalize=false accepted: $out"
grep -q "its parameters were trained with --normalize=true, this job has --normalize=false" <<<"$out" || fail "$out"
out=$(timeout 60 "$train" --mode=local --normalize --eval_only --checkpoint_dir="$ckpt" 2>&1) || fail "$out"
grep -q "holds moving averages of the parameters: evaluating its variables" <<<"$out" || fail "no warning: $out"

echo "== refusals, each in one line with a non-zero status, creating nothing"
mkdir "$work/empty"
check_refused() {  # PATTERN COMMAND...
  local pattern=$1 status=0 out
  shift
  out=$(timeout 60 "$@" 2>&1) || status=$?
  ((status != 0)) || fail "accepted: $*: $out"
  # Under mpiexec, its own notice of MPI_Abort follows: the program's lines are the one error.
  [[ $1 == "$mpiexec" ]] || [[ $(wc -l <<<"$out") -eq 1 ]] || fail "more than one line: $out"
  [[ $(grep -c "error: " <<<"$out") -eq 1 ]] && grep -qE "$pattern" <<<"$out" || fail "not one line '$pattern': $out"
  echo "refused ($status): $out"
}
check_refused "error: --eval_only: --checkpoint_dir=$work/empty holds no checkpoint$" \
  "$train" --eval_only --checkpoint_dir="$work/empty"
[[ -z $(ls -A "$work/empty") ]] || fail "--eval_only wrote into an empty directory"
check_refused "error: --eval_only: --checkpoint_dir=$work/missing: no such directory" \
  "$train" --eval_only --checkpoint_dir="$work/missing"
[[ ! -e $work/missing ]] || fail "--eval_only made the missing directory"
check_refused "error: --eval_checkpoint=.*: read with --eval_only only" \
  "$train" --eval_checkpoint="$ckpt/model.ckpt-20.safetensors" --checkpoint_dir="$work/new"
[[ ! -e $work/new ]] || fail "--eval_checkpoint without --eval_only made a directory"
check_refused "^\[all 2 ranks\] error: --eval_only evaluates in one process, and this job has 2 ranks" \
  "$mpiexec" "$np_flag" 2 --oversubscribe "$train" --eval_only --checkpoint_dir="$ckpt" --normalize
echo "eval_only test passed"
