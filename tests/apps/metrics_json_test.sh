#!/usr/bin/env bash
# train --metrics_json tells the runs of a sweep apart: two workers in allreduce mode train two
# steps, and the file holds every flag's value under "flags" (the seed, --hidden, --normalize,
# --epochs, --lr_boundaries, --weight_decay and the rest, given or not), the ones given under
# "flags_given", and beside the peak "learning_rate", which --lr_scaling doubled for the two
# workers, the flag's own value.
#
#   metrics_json_test.sh TRAIN MPIEXEC NP_FLAG WORKDIR
set -euo pipefail
train=$1 mpiexec=$2 np_flag=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
"$mpiexec" "$np_flag" 2 --oversubscribe "$train" --mode=allreduce --train_steps=2 --seed=7 \
  --learning_rate=0.01 --hidden=64 --weight_decay=1e-4 --log_every_steps=0 --print_cluster=false \
  --metrics_json="$work/m.json" > "$work/train.log" 2>&1 || { cat "$work/train.log"; exit 1; }
/usr/bin/python3 - "$work/m.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
f = m["flags"]
expected = {"seed": 7, "learning_rate": 0.01, "hidden": "64", "weight_decay": 1e-4, "normalize": False,
            "epochs": 12, "lr_boundaries": "", "mode": "allreduce", "train_steps": 2, "batch_size": 64}
wrong = {k: f.get(k) for k, v in expected.items() if f.get(k) != v or type(f.get(k)) is not type(v)}
if wrong:
    sys.exit(f"flags that are not as given: {wrong}")
if m["learning_rate"] != 0.02:
    sys.exit(f"learning_rate {m['learning_rate']}: expected the rate scaled for 2 workers, 0.02")
given = set(m["flags_given"])
if not {"seed", "learning_rate", "hidden", "weight_decay", "train_steps"} <= given or "epochs" in given:
    sys.exit(f"flags_given {sorted(given)}")
if m["test_accuracy"] <= 0 or m["global_step"] != 2:  # the keys before the flags, as they were
    sys.exit(f"test_accuracy {m['test_accuracy']}, global_step {m['global_step']}")
print("metrics file: flags", len(f), "given", sorted(given))
PY
echo "metrics_json test passed"
