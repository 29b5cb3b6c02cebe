#!/usr/bin/env bash
# Regression on the user's own data (apps/examples/tabular.cc), what the units of the data decide:
# - --standardize's statistics travel with the checkpoint: predicting from it with another
#   --train file (its features scaled x3 + 1) writes the same predictions as the training job;
#
#   regression_test.sh TABULAR MPIEXEC NP_FLAG WORKDIR
set -euo pipefail
tabular=$1 mpiexec=$2 np_flag=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
cd "$work"

/usr/bin/python3 - <<'PY'
import numpy as np
rng = np.random.default_rng(11)

def table(name, x, y, names):
    np.savetxt(name, np.concatenate([x, y], axis=1), delimiter=",", header=",".join(names),
               comments="", fmt="%.9g")

x = rng.uniform(-1, 1, size=(2000, 4))
y = (x[:, 0] - 2 * x[:, 1] * x[:, 2] + np.sin(3 * x[:, 3]))[:, None]
names = ["f0", "f1", "f2", "f3", "y"]
table("train.csv", x, y, names)
table("train_rescaled.csv", 3 * x + 1, y, names)  # another file: other means and deviations
table("new.csv", rng.uniform(-1, 1, size=(50, 4)), np.zeros((50, 1)), names)
PY

. "$(dirname "$0")/example_jobs.sh"
run() { run_job "$tabular" "$1" "$2" "${@:3}"; }  # run NAME NP ARGS...

# The statistics of --standardize, kept with the checkpoint: the second job restores at the last
# step and predicts at once, standardising by the checkpoint's, not by its --train file's.
common=(--target_columns=y --loss=mse --standardize --train_steps=300 --checkpoint_dir=ckpt --predict=new.csv)
run standardized 2 --train=train.csv "${common[@]}" --predictions=trained.csv \
  || { echo "the standardised job failed"; exit 1; }
run restored 1 --train=train_rescaled.csv "${common[@]}" --predictions=restored.csv \
  || { echo "the job restoring the standardised checkpoint failed"; exit 1; }
cmp trained.csv restored.csv \
  || { echo "restored: predictions from the checkpoint differ from the training job's"; exit 1; }

echo "regression_test: all passed"
