#!/usr/bin/env bash
# Regression on the user's own data (apps/examples/tabular.cc), what the units of the data decide:
# - --standardize's statistics travel with the checkpoint: predicting from it with another
#   --train file (its features scaled x3 + 1) writes the same predictions as the training job;
# - targets of 5e4 +- 4e3 (a price): without --standardize_targets the job warns of their scale;
#   with it the test MSE, in the targets' units, falls below 2% of their variance, the
#   predictions (in those units, written exactly) score it, and predicting from the checkpoint with a --train
#   file of other targets writes the same, with --metrics naming the loss's own metrics again;
#   with class labels it is refused in one line;
# - a checkpoint of targets a,b refuses a job of targets b,a (their outputs would swap names);
# - integer labels in .npy with a class without examples: warned of once, not again as the
#   chief reads the file whole to evaluate on;
# - a CSV file of one column read as windows, the series its own feature: a sine is forecast
#   (test MSE below 1% of its variance), white noise is not (no window sees the row it
#   forecasts: above half its variance), and with --horizon=0 it is refused;
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

# A price: 5e4 +- 4e3, a smooth function of the features with noise of 1% of its deviation.
def prices(n):
    x = rng.uniform(-1, 1, size=(n, 4))
    y = 5e4 + 4e3 * (x[:, 0] + np.sin(2 * x[:, 1]) - x[:, 2] * x[:, 3] + rng.normal(0, 0.01, size=n))
    return x, y[:, None]
price_names = ["f0", "f1", "f2", "f3", "price"]
x, y = prices(2000)
table("price_train.csv", x, y, price_names)
table("price_train_other.csv", x, 2 * y + 1e4, price_names)  # other targets: another mean and deviation
x, y = prices(500)
table("price_test.csv", x, y, price_names)
open("price_var.txt", "w").write(f"{y.var():.6g}\n")
table("labels.csv", x, (y > 5e4).astype(int), ["f0", "f1", "f2", "f3", "label"])
table("two.csv", x, np.concatenate([y, -y], axis=1), ["f0", "f1", "f2", "f3", "a", "b"])
t = np.arange(1500)
np.savetxt("sine.csv", np.sin(t / 7)[:, None], header="v", comments="", fmt="%.9g")
np.savetxt("sine_test.csv", np.sin((t[:300] + 1500) / 7)[:, None], header="v", comments="", fmt="%.9g")
np.savetxt("noise.csv", rng.normal(size=(1500, 1)), header="v", comments="", fmt="%.9g")
np.savetxt("noise_test.csv", rng.normal(size=(300, 1)), header="v", comments="", fmt="%.9g")
np.save("gap_x.npy", x.astype(np.float32))
np.save("gap_y.npy", rng.choice([0, 1, 3], size=len(x)).astype(np.int64))  # no class 2
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

# Targets far from the unit scale: warned of without --standardize_targets, learnt with it.
price=(--target_columns=price --loss=mse --train_steps=600 --test=price_test.csv)
run price_raw 2 --train=price_train.csv "${price[@]}" || { echo "the unscaled price job failed"; exit 1; }
grep -q "^warning: target price: mean 4\.99[0-9]e+04, standard deviation 4[0-9]\{3\}, .* --standardize_targets trains on the targets scaled" price_raw.log \
  && [[ $(grep -c "^warning: target price" price_raw.log) == 1 ]] \
  || { echo "price_raw: no one warning of the targets' scale"; exit 1; }
run price 2 --train=price_train.csv "${price[@]}" --standardize_targets --checkpoint_dir=price_ckpt \
  --metrics=mse,mae --metrics_json=price.json --predict=price_test.csv --predictions=price_predictions.csv \
  || { echo "the price job with --standardize_targets failed"; exit 1; }
! grep -q "^warning: target" price.log || { echo "price: warned of the scale it standardises"; exit 1; }
mse=$(json_value price.json mse)
/usr/bin/python3 - "$mse" "$(cat price_var.txt)" <<'PY' || exit 1
import csv, sys
mse, var = float(sys.argv[1]), float(sys.argv[2])
p = [float(r["price"]) for r in csv.DictReader(open("price_predictions.csv"))]
t = [float(r["price"]) for r in csv.DictReader(open("price_test.csv"))]
value = sum((a - b) ** 2 for a, b in zip(p, t)) / len(t)
print(f"price: test MSE {mse:.6g} from the job, {value:.6g} from the predictions; the targets' variance {var:.6g}")
# Written exactly (9 significant digits), not rounded to 6: a price to a hundredth.
raw = [r["price"] for r in csv.DictReader(open("price_predictions.csv"))]
if max(len(v.replace(".", "").replace("-", "").lstrip("0")) for v in raw) <= 6:
    sys.exit(f"price: predictions written to 6 significant digits ({raw[0]}, ...), not exactly")
if len(p) != len(t) or abs(value - mse) > 1e-4 * mse:
    sys.exit("price: the predictions, in the targets' units, do not score the job's test MSE")
if mse > 0.02 * var:
    sys.exit(f"price: test MSE {mse:.6g} is not below 2% of the targets' variance")
PY
run price_restored 1 --train=price_train_other.csv "${price[@]}" --standardize_targets --checkpoint_dir=price_ckpt \
  --predict=price_test.csv --predictions=price_restored.csv || { echo "the restored price job failed"; exit 1; }
cmp price_predictions.csv price_restored.csv \
  || { echo "price_restored: predictions from the checkpoint differ from the training job's"; exit 1; }
expect_job_failure "$tabular" standardize_labels \
  "--standardize_targets: for float targets and a regression loss \(mse, mae, huber\), not --loss=softmax_cross_entropy of class labels" \
  "0 1 2" --train=labels.csv --label_column=label --standardize_targets

# Targets are outputs in their order: a job that names them in another order is refused, not
# given each other's predictions.
run two 1 --train=two.csv --target_columns=a,b --loss=mse --train_steps=5 --checkpoint_dir=two_ckpt \
  || { echo "the job of two targets failed"; exit 1; }
expect_job_failure "$tabular" two_swapped \
  "two_ckpt, global step 5: its parameters were trained with target columns=a,b, this job has target columns=b,a: .*" \
  "0" --train=two.csv --target_columns=b,a --loss=mse --train_steps=10 --checkpoint_dir=two_ckpt

# A series of one column, forecast from its own past.
series=(--target_columns=v --loss=mse --window=16 --hidden=32 --train_steps=500)
run sine 2 --train=sine.csv --test=sine_test.csv "${series[@]}" --metrics_json=sine.json \
  || { echo "the sine job failed"; exit 1; }
at_most "$(json_value sine.json mse)" 0.005 || { echo "sine: test MSE above 1% of the variance (0.5)"; exit 1; }
run noise 2 --train=noise.csv --test=noise_test.csv "${series[@]}" --metrics_json=noise.json \
  || { echo "the noise job failed"; exit 1; }
at_least "$(json_value noise.json mse)" 0.5 || { echo "noise: forecast below half its variance: a window sees its target"; exit 1; }
expect_job_failure "$tabular" own_feature_horizon0 "sine\.csv: no feature columns: all 1 columns are the label or targets" \
  "0 1 2" --train=sine.csv "${series[@]}" --horizon=0

# A class without examples, warned of by the chief once (it reads the file twice: its shard, and
# the whole to evaluate on).
run gap 2 --train=gap_x.npy,gap_y.npy --train_steps=10 || { echo "the job of labels with a gap failed"; exit 1; }
[[ $(grep -c "warning: gap_y\.npy: 4 classes counted as the largest label + 1, 1 of which no example has (2)" gap.log) == 1 ]] \
  || { echo "gap: the class without examples is not warned of once"; exit 1; }

echo "regression_test: all passed"
