#!/usr/bin/env bash
# Resuming carries the optimizer's state to every replica: 2 workers in allreduce mode train 150
# steps, stop with a checkpoint, and the same command with 300 steps resumes and trains 150 more.
# The result must equal an uninterrupted 300-step run's, to 1e-6, with momentum, with Adam
# (whose state a restore fills on the chief alone; each replica applies the updates itself) and
# with RMSProp with momentum (whose mean square starts at 1, not 0, and has two slots).
#
#   resume_test.sh TRAIN MPIEXEC NP_FLAG WORKDIR
set -euo pipefail
train=$1 mpiexec=$2 np_flag=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
# A constant rate: a schedule over --train_steps would differ between 150 and 300 steps.
args=(--mode=allreduce --model=mlp --lr_schedule=constant --lr_warmup_steps=0
      --save_checkpoint_steps=1000 --log_every_steps=0 --print_cluster=false)
run() {  # DIR STEPS [flags...]
  "$mpiexec" "$np_flag" 2 --oversubscribe "$train" "${args[@]}" --checkpoint_dir="$1" \
    --train_steps="$2" "${@:3}" > "$1.log" 2>&1 || { cat "$1.log"; exit 1; }
}
for optimizer in momentum adam rmsprop; do
  flags=(--optimizer=$optimizer --learning_rate=0.001)
  [[ $optimizer == momentum ]] && flags=(--optimizer=momentum --learning_rate=0.01)
  [[ $optimizer == rmsprop ]] && flags+=(--momentum=0.9)
  echo "== $optimizer: 300 steps straight, and 150 + 150"
  run "$work/$optimizer-straight" 300 "${flags[@]}" --metrics_json="$work/$optimizer-straight.json"
  run "$work/$optimizer-resumed" 150 "${flags[@]}"
  run "$work/$optimizer-resumed" 300 "${flags[@]}"
  grep -q "restored from .* at global step 150$" "$work/$optimizer-resumed.log" \
    || { cat "$work/$optimizer-resumed.log"; echo "did not resume from step 150"; exit 1; }
  ! grep "warning: the learning rate" "$work/$optimizer-resumed.log" || { echo "a constant rate was warned of"; exit 1; }
  ! grep "was written training with" "$work/$optimizer-resumed.log" || { echo "the same settings were warned of"; exit 1; }
  /usr/bin/python3 "$(dirname "$0")/compare_checkpoints.py" --rtol 1e-6 \
    "$work/$optimizer-resumed/model.ckpt-300.safetensors" \
    "$work/$optimizer-straight/model.ckpt-300.safetensors"
done

echo "== a resume under a longer cosine decay: its rate at the checkpoint's step jumps, and is told"
run "$work/cosine" 100 --lr_schedule=cosine
run "$work/cosine" 200 --lr_schedule=cosine
grep -q "warning: the learning rate at global step 100 was 0.002 when the checkpoint was written, and this run's schedule has 0.011 there" \
  "$work/cosine.log" || { cat "$work/cosine.log"; echo "no word of the schedule's jump"; exit 1; }
# The decay's length fixed at the last run's: the same rate at step 200, no word.
run "$work/cosine" 300 --lr_schedule=cosine --lr_decay_steps=200
grep -q "restored from .* at global step 200$" "$work/cosine.log" || { cat "$work/cosine.log"; exit 1; }
! grep "warning: the learning rate" "$work/cosine.log" || { echo "the same schedule was warned of"; exit 1; }

echo "== a resume with other optimizer settings, or without the moving averages it holds, is told"
run "$work/settings" 20 --optimizer=momentum --learning_rate=0.01 --moving_average_decay=0.9
run "$work/settings-warm" 10 --warm_start_from="$work/settings"
grep -q "warning: the warm start takes the checkpoint's parameters themselves, not the moving averages" \
  "$work/settings-warm.log" || { cat "$work/settings-warm.log"; echo "no word of the averages a warm start leaves"; exit 1; }
run "$work/settings" 40 --optimizer=momentum --learning_rate=0.01 --momentum=0.5 --nesterov --weight_decay=0.001
grep -q "warning: the checkpoint at global step 20 was written training with momentum 0.9; training goes on with this run's momentum 0.5 (Nesterov), weight decay 0.001$" \
  "$work/settings.log" || { cat "$work/settings.log"; echo "no word of the other settings"; exit 1; }
grep -q "warning: the checkpoint at global step 20 holds moving averages of the parameters, which this run" \
  "$work/settings.log" || { cat "$work/settings.log"; echo "no word of the averages left behind"; exit 1; }

echo "== a finished run started again trains nothing, and says so"
run "$work/momentum-straight" 200 --optimizer=momentum --learning_rate=0.01
grep -q "^restored at global step 300, at or past the last step, 200: nothing left to train$" \
  "$work/momentum-straight.log" || { cat "$work/momentum-straight.log"; echo "no word of it"; exit 1; }

echo "== async mode: the final line's step is the final checkpoint's, the others' last pushes and all"
# Other workers push on while the chief closes: its last line, its final checkpoint and its final
# evaluation must describe one snapshot of the store (they once read it at three moments).
for steps in 60 120 180; do
  "$mpiexec" "$np_flag" 4 --oversubscribe "$train" "${args[@]}" --mode=async --ps_tasks=1 --batch_size=16 \
    --checkpoint_dir="$work/async" --train_steps=$steps > "$work/async.log" 2>&1 || { cat "$work/async.log"; exit 1; }
  printed=$(sed -nE 's/^final: global step ([0-9]+),.*/\1/p' "$work/async.log")
  saved=$(sed -nE 's/.*"latest": "model\.ckpt-([0-9]+)\.safetensors".*/\1/p' "$work/async/checkpoint")
  [[ -n $printed && $printed == "$saved" ]] \
    || { cat "$work/async.log"; echo "the final line says step $printed, the final checkpoint is step $saved"; exit 1; }
done

echo "== a resume with other inputs than the checkpoint's parameters were trained on is refused"
if "$mpiexec" "$np_flag" 2 --oversubscribe "$train" "${args[@]}" --checkpoint_dir="$work/momentum-straight" \
    --train_steps=400 --optimizer=momentum --learning_rate=0.01 --normalize > "$work/normalize.log" 2>&1; then
  cat "$work/normalize.log"; echo "a resume with --normalize was accepted"; exit 1
fi
grep -q "its parameters were trained with --normalize=false, this job has --normalize=true" "$work/normalize.log" \
  || { cat "$work/normalize.log"; echo "no word of --normalize"; exit 1; }

echo "== a warm start from that run: its variables, from global step 0, with another optimizer"
run "$work/warm" 50 --optimizer=adam --learning_rate=0.001 --warm_start_from="$work/momentum-straight"
grep -q "^warm start from $work/momentum-straight (its global step 300); training starts at global step 0$" \
  "$work/warm.log" || { cat "$work/warm.log"; echo "no warm start"; exit 1; }
grep -qE "^final: global step 50, test accuracy 0\.(8[0-9]|9[0-9])" "$work/warm.log" \
  || { cat "$work/warm.log"; echo "the warm start did not train on from the run's accuracy"; exit 1; }

echo "== a warm start of the hidden layers alone: a new head trains on them"
# 50 steps from scratch reach 0.77 in this recipe; on the pre-trained hidden layers, 0.80.
run "$work/warm-hidden" 50 --optimizer=adam --learning_rate=0.001 --warm_start_from="$work/momentum-straight" \
  --warm_start_vars=hidden
grep -q "^warm start from $work/momentum-straight (its global step 300, 4 of 6 variables); training starts at global step 0$" \
  "$work/warm-hidden.log" || { cat "$work/warm-hidden.log"; echo "no warm start of 4 variables"; exit 1; }
grep -qE "^final: global step 50, test accuracy 0\.(79|8[0-9]|9[0-9])" "$work/warm-hidden.log" \
  || { cat "$work/warm-hidden.log"; echo "the new head did not train on the warm-started layers"; exit 1; }

echo "== fine-tuning the head alone (--trainable_vars): the hidden layers stay the warm start's"
# In allreduce mode (every replica applies the update) and in sync mode (the chief does, in
# pieces, on the ps task): after 50 steps the hidden layers equal the source run's to the bit,
# and the head has moved.
for mode in allreduce sync; do
  np=2 extra=()
  [[ $mode == sync ]] && np=3 extra=(--ps_tasks=1)
  "$mpiexec" "$np_flag" $np --oversubscribe "$train" "${args[@]}" --mode=$mode "${extra[@]}" \
    --checkpoint_dir="$work/head-$mode" --train_steps=50 --optimizer=adam --learning_rate=0.001 \
    --warm_start_from="$work/momentum-straight" --trainable_vars=logits \
    > "$work/head-$mode.log" 2>&1 || { cat "$work/head-$mode.log"; exit 1; }
  /usr/bin/python3 - "$work/head-$mode/model.ckpt-50.safetensors" \
    "$work/momentum-straight/model.ckpt-300.safetensors" "$(dirname "$0")/../core/io" <<'PY' \
    || { cat "$work/head-$mode.log"; exit 1; }
import os, sys
import numpy as np
sys.path.insert(0, sys.argv[3])
from checkpoint_reader import load
tuned, _ = load(sys.argv[1])
source, _ = load(sys.argv[2])
held = [n for n in tuned if n.startswith("hidden") and not np.array_equal(tuned[n], source[n])]
still = [n for n in tuned if n.startswith("logits/") and np.array_equal(tuned[n], source[n])]
if held or still:
    sys.exit(f"frozen variables that moved: {held}; trained ones that did not: {still}")
PY
done

echo "== fine-tuning with learning-rate factors (--lr_factors): each variable's step at its factor"
# In sync mode (the chief applies the update in pieces): one SGD step from the warm start, with
# and without factors, the same batches; hidden2's bias moves by twice (its pattern comes first),
# the other hidden variables by a tenth, the head as before.
for factors in "" "hidden2/bias:2,hidden:0.1"; do
  name=sgd-step${factors:+-factored}
  "$mpiexec" "$np_flag" 3 --oversubscribe "$train" "${args[@]}" --mode=sync --ps_tasks=1 \
    --checkpoint_dir="$work/$name" --train_steps=1 --optimizer=sgd --learning_rate=0.05 \
    --lr_scaling=none --warm_start_from="$work/momentum-straight" ${factors:+--lr_factors=$factors} \
    > "$work/$name.log" 2>&1 || { cat "$work/$name.log"; exit 1; }
done
grep -q "^learning-rate factors: hidden2/bias 2, hidden 0.1 (the others 1)$" "$work/sgd-step-factored.log" \
  || { cat "$work/sgd-step-factored.log"; echo "no line of the factors"; exit 1; }
/usr/bin/python3 - "$work" "$(dirname "$0")/../core/io" <<'PY' || exit 1
import sys
import numpy as np
sys.path.insert(0, sys.argv[2])
from checkpoint_reader import load
work = sys.argv[1]
source, _ = load(f"{work}/momentum-straight/model.ckpt-300.safetensors")
plain, _ = load(f"{work}/sgd-step/model.ckpt-1.safetensors")
factored, _ = load(f"{work}/sgd-step-factored/model.ckpt-1.safetensors")
for name in source:
    if "/" not in name or name.startswith("optimizer"):
        continue
    factor = 0.1 if name.startswith("hidden") and name != "hidden2/bias" else 2.0 if name == "hidden2/bias" else 1.0
    step, want = factored[name] - source[name], factor * (plain[name] - source[name])
    if not np.allclose(step, want, rtol=1e-3, atol=1e-7) or not np.any(step):
        sys.exit(f"lr factors: {name} moved by {np.abs(step).max()}, expected {factor} x {np.abs(plain[name] - source[name]).max()}")
print("lr factors: every variable stepped at its factor")
PY

echo "== the chief's metrics file says what ran and how it ended"
/usr/bin/python3 - "$work/adam-straight.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
expected = {"global_step": 300, "train_steps": 300, "mode": "allreduce", "model": "mlp",
            "workers": 2, "ps_tasks": 0, "batch_size": 64, "stop_signal": 0, "stopped_early": False,
            "optimizer": "adam (beta1 0.9, beta2 0.999, epsilon 1e-08)",
            # --learning_rate=0.001 times the 2 batches a step averages (--lr_scaling=linear)
            "learning_rate": 0.002, "lr_schedule": "constant", "label_smoothing": 0.0,
            "train_examples": 300 * 2 * 64}
wrong = {k: (m.get(k), v) for k, v in expected.items() if m.get(k) != v}
if wrong or not 0.5 < m["test_accuracy"] <= 1 or not m["train_images_per_sec"] > 0:
    sys.exit(f"metrics file: {m}\nwrong (found, expected): {wrong}")
PY

echo "== another model's checkpoint: refused, naming both models first"
if "$mpiexec" "$np_flag" 2 --oversubscribe "$train" "${args[@]}" --model=small_cnn \
     --checkpoint_dir="$work/momentum-straight" --train_steps=400 --optimizer=momentum \
     > "$work/other-model.log" 2>&1; then
  cat "$work/other-model.log"; echo "a checkpoint of another model was taken"; exit 1
fi
grep -q "error: .*global step 300: it was written by model 'mlp', and this one is 'small_cnn': checkpoint does not fit the model: " \
  "$work/other-model.log" || { cat "$work/other-model.log"; echo "the models were not named"; exit 1; }

echo "== epochs count examples: a job resumed on fewer workers trains the rest of them, in its steps"
# One epoch on 3 workers (313 steps of 192: 60,096 examples), then --epochs=2 on 2 workers: the
# 59,904 examples left of 120,000 take 468 steps of 128, to step 781 (counting steps, 938), and
# the cosine schedule's length follows.
epochs_args=("${args[@]}" --checkpoint_dir="$work/epochs" --optimizer=momentum --learning_rate=0.01)
"$mpiexec" "$np_flag" 3 --oversubscribe "$train" "${epochs_args[@]}" --epochs=1 > "$work/epochs-1.log" 2>&1 \
  || { cat "$work/epochs-1.log"; exit 1; }
"$mpiexec" "$np_flag" 2 --oversubscribe "$train" "${epochs_args[@]}" --epochs=2 > "$work/epochs-2.log" 2>&1 \
  || { cat "$work/epochs-2.log"; exit 1; }
for line in "^restored from $work/epochs at global step 313 (60096 examples trained, 469 of this run's steps of 128: the data and epochs go on from there)$" \
            "^the rest of 2 epochs after the checkpoint's 60096 examples: to global step 781, at 128 examples a step$" \
            "^training mlp .* 781 global steps$" \
            "^final: global step 781, "; do
  grep -q "$line" "$work/epochs-2.log" || { cat "$work/epochs-2.log"; echo "missing: $line"; exit 1; }
done
echo "resume test passed"
