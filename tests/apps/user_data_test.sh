#!/usr/bin/env bash
# Training on the user's own data (apps/examples/tabular.cc) with 3 workers in allreduce mode:
# - a regression from a CSV file: the test mean squared error must fall below 0.05 (the targets
#   vary by about 0.6 around their mean; the noise added is 0.01), with the test file's columns
#   in another order (matched by name), and the same in sync mode with 1 ps task and 2 workers
#   (with momentum, a cosine schedule after a warm-up and clipped gradients);
# - features on scales far apart: with --standardize the same bar, without it twice the error;
# - the same rows read as [3, 2] sequences by a GRU (--input_shape): the same bar, and its
#   predictions score it;
# - a CSV file without a header (--csv_header=false): every row is an example, and --epochs=2
#   of them the global steps two passes take;
# - a job resumed from --checkpoint_dir evaluates the parameters the first one left, and one
#   that would prepare the data otherwise (--standardize) is refused;
# - a multi-label task (5 labels per example, examples of shape [4, 4]) from .npy files: the test
#   binary accuracy must reach 0.93 (always answering 0 gets about 0.5);
# - a rare class (5% of the rows): balanced class weights raise its test recall to 0.75 or more,
#   at least 0.2 above the unweighted model's, and so does a balanced positive weight of a sigmoid
#   output;
# - --predict on the test files (CSV with the columns in another order and a label column it
#   does not read, standardised features, .npy): a row per example whose values score the test
#   MSE, binary accuracy and recall the job printed; a --predict file without a training
#   column, or of another example shape, ends the job before training;
# - a CSV label column of class names: a test accuracy of 0.9 or more, metrics of a class by number
#   or by name (named by their class, the classes' numbers printed), the predictions written by
#   name, and a test file with a name the training file lacks refused;
# - a CSV file with an id and a text column, left out by --ignore_columns or by --feature_columns,
#   gives the plain file's model exactly;
# - --restore_best: the final evaluation is of the best evaluation's parameters;
# - bad input: a CSV file with no column named to learn, a text column not ignored, an ignored
#   column the file lacks, a --predictions path that cannot be written or is the --predict file, a
#   truncated .npy file, a
#   NaN in a --predict array, an empty test set, data that does not fit the model's input, a loss that does
#   not fit the labels, a target outside [0, 1] for a sigmoid (naming its example), a metric of a class name the file lacks, class weights of another count than the classes or for a regression, a missing value in a CSV file, a test CSV without a training column and
#   a test set that does not fit the model (found before training, not after it) each end the
#   job within seconds, with a one-line error naming the file on every worker.
#
#   user_data_test.sh TABULAR MPIEXEC NP_FLAG WORKDIR
set -euo pipefail
tabular=$1 mpiexec=$2 np_flag=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
cd "$work"

/usr/bin/python3 - <<'PY'
import numpy as np
rng = np.random.default_rng(7)

def regression(n):
    x = rng.uniform(-1, 1, size=(n, 6))
    y1 = np.sin(2 * x[:, 0]) + x[:, 1] * x[:, 2] + 0.5 * x[:, 3] ** 2
    y2 = x[:, 4] - x[:, 5] * x[:, 0]
    y = np.stack([y1, y2], axis=1) + rng.normal(0, 0.1, size=(n, 2))
    return np.concatenate([x, y], axis=1)

header = ",".join([f"f{i}" for i in range(6)] + ["y1", "y2"])
np.savetxt("reg_train.csv", regression(4000), delimiter=",", header=header, comments="", fmt="%.6f")
# The test file's columns in another order: the program matches them by name.
order = [7, 3, 0, 5, 1, 6, 4, 2]
test = regression(1000)[:, order]
np.savetxt("reg_test.csv", test, delimiter=",", header=",".join(header.split(",")[i] for i in order),
           comments="", fmt="%.6f")
np.savetxt("reg_test_no_f5.csv", np.delete(test, 3, axis=1), delimiter=",",
           header=",".join(header.split(",")[i] for i in order if i != 5), comments="", fmt="%.6f")
np.savetxt("reg_no_header.csv", regression(500), delimiter=",", fmt="%.6f")
# Features on scales far apart (a year-like 2000 +- 1000, a ratio +- 0.001): --standardize's case.
def scaled(data):
    data = data.copy()
    data[:, 0] = 2000 + 1000 * data[:, 0]
    data[:, 1] = 0.001 * data[:, 1]
    return data
np.savetxt("reg_scaled_train.csv", scaled(regression(4000)), delimiter=",", header=header,
           comments="", fmt="%.6f")
np.savetxt("reg_scaled_test.csv", scaled(regression(1000)), delimiter=",", header=header,
           comments="", fmt="%.6f")
with open("reg_nan.csv", "w") as f:
    f.write(header + "\n0.1,0.2,0.3,0.4,0.5,0.6,1,2\nnan,0.2,0.3,0.4,0.5,0.6,1,2\n")

w = rng.normal(size=(16, 5))
def multilabel(n):
    x = rng.normal(size=(n, 4, 4)).astype(np.float32)
    return x, (x.reshape(n, 16) @ w > 0).astype(np.float32)

for split, n in (("train", 4000), ("test", 1000)):
    x, y = multilabel(n)
    np.save(f"ml_{split}_x.npy", x)
    np.save(f"ml_{split}_y.npy", y)
np.save("ml_train_y_int.npy", np.load("ml_train_y.npy").astype(np.int32))  # multi-hot rows as integers
bad = np.load("ml_test_y.npy")
bad[97, 1] = 2  # not a probability: row 97 of the test file, example 32 of worker 1's part
np.save("ml_bad_y.npy", bad)
np.save("ml_test_x33.npy", rng.normal(size=(100, 3, 3)).astype(np.float32))
nan_rows = np.load("ml_test_x.npy")
nan_rows[70, 1, 2] = np.nan
np.save("ml_test_x_nan.npy", nan_rows)
np.save("ml_empty_x.npy", np.zeros((0, 4, 4), np.float32))
np.save("ml_empty_y.npy", np.zeros((0, 5), np.float32))
np.save("ml_test_y33.npy", np.zeros((100, 5), np.float32))
with open("ml_train_x.npy", "rb") as f:
    open("truncated_x.npy", "wb").write(f.read(100))

# A rare class: about 5% of the rows, where x0 + x1 plus noise is high; the noise leaves many of
# them looking like the common class.
def rare(n):
    x = rng.normal(size=(n, 2))
    y = (x[:, 0] + x[:, 1] + rng.normal(0, 0.7, size=n) > 2.6).astype(int)
    return np.concatenate([x, y[:, None]], axis=1)
train = rare(6000)
np.savetxt("rare_train.csv", train, delimiter=",", header="x0,x1,y", comments="", fmt=["%.6f", "%.6f", "%d"])
np.savetxt("rare_test.csv", rare(4000), delimiter=",", header="x0,x1,y", comments="", fmt=["%.6f", "%.6f", "%d"])
# The same rows with an id and a text column among them: --ignore_columns' case.
with open("rare_ids.csv", "w") as f:
    f.write("id,x0,note,x1,y\n")
    for i, (a, b, y) in enumerate(train):
        f.write(f'r{i:05d},{a:.6f},"a note, with a comma",{b:.6f},{int(y)}\n')
# Three classes by name (as iris' species), in no order; a test file with a name training lacks.
names = np.array(["virginica", "setosa", "versicolor"])
centres = np.array([[2.0, 0.0], [-1.0, 1.7], [-1.0, -1.7]])
for split, n in (("train", 3000), ("test", 600)):
    k = rng.integers(0, 3, size=n)
    x = centres[k] + rng.normal(0, 0.6, size=(n, 2))
    with open(f"species_{split}.csv", "w") as f:
        f.write("x0,species,x1\n")
        for (a, b), c in zip(x, k):
            f.write(f"{a:.6f},{names[c]},{b:.6f}\n")
with open("rare_named_test.csv", "w") as f:
    f.write("x0,x1,y\n0.1,0.2,yes\n0.3,0.4,no\n")
with open("species_unknown.csv", "w") as f:
    f.write("x0,species,x1\n0.1,setosa,0.2\n0.3,iris,0.4\n")
counts = np.bincount(train[:, 2].astype(int), minlength=2)
# The class weights n / (2 n_c), then the positive weight n_0 / n_1.
open("rare_weights.txt", "w").write(" ".join(["%.4g" % (len(train) / (2 * c)) for c in counts] +
                                             ["%.4g" % (counts[0] / counts[1])]) + "\n")
PY

. "$(dirname "$0")/example_jobs.sh"
run() { run_job "$tabular" "$1" 3 "${@:2}"; }  # run NAME ARGS...: 3 ranks
metric() { json_value "$@"; }  # metric FILE NAME
# predicted NAME KIND DATA VALUE: --predict's CSV NAME.csv, scored against DATA's answers (KIND
# mse: the test file's y1,y2 columns; binary_accuracy: the .npy targets; recall: the label y's
# class 1; accuracy: the class names of the species column), gives VALUE, the test metric the job printed (the same model, the same
# standardisation, the columns matched by name), with a row per example in order.
predicted() {
  /usr/bin/python3 - "$@" <<'PY' || { echo "$1: --predict's predictions do not score the job's test $2 ($4)"; exit 1; }
import csv, sys
import numpy as np
name, kind, data, expected = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
rows = list(csv.DictReader(open(f"{name}.csv")))
if kind == "mse":
    truth = list(csv.DictReader(open(data)))
    value = np.mean([(float(p[c]) - float(t[c])) ** 2 for p, t in zip(rows, truth) for c in ("y1", "y2")])
elif kind == "binary_accuracy":
    truth = np.load(data).reshape(len(rows), -1)
    probabilities = np.array([[float(r[f"y{j}"]) for j in range(truth.shape[1])] for r in rows])
    value = np.mean((probabilities > 0.5) == (truth > 0.5))
elif kind == "accuracy":
    truth = [t["species"] for t in csv.DictReader(open(data))]
    value = np.mean([p["class"] == t for p, t in zip(rows, truth)])
    # Every class's probability beside: they sum to 1, and the class is the likeliest.
    names = [c[2:] for c in rows[0] if c.startswith("p_")]
    assert len(names) >= 2 and set(truth) <= set(names), f"probability columns {names}"
    for p in rows:
        probabilities = [float(p["p_" + n]) for n in names]
        assert abs(sum(probabilities) - 1) < 1e-5, f"row {p['index']}: probabilities sum to {sum(probabilities)}"
        assert names[int(np.argmax(probabilities))] == p["class"], f"row {p['index']}: not the likeliest class"
        assert float(p["probability"]) == max(probabilities), f"row {p['index']}: probability not the class's"
else:
    truth = [int(t["y"]) for t in csv.DictReader(open(data))]
    value = sum(int(p["class"]) == 1 and y == 1 for p, y in zip(rows, truth)) / truth.count(1)
assert [int(r["index"]) for r in rows] == list(range(len(truth))), "not one row per example, in order"
print(f"{name}: test {kind} {value:.5f} from the predictions, {expected:.5f} from the job")
assert abs(value - expected) <= 1e-4 + 1e-3 * abs(expected)
PY
}

run regression --train=reg_train.csv --test=reg_test.csv --target_columns=y1,y2 \
  --loss=mean_squared_error --hidden=64,64 --train_steps=1500 --metrics_json=reg.json \
  --predict=reg_test.csv --predictions=reg_predictions.csv || { echo "the regression job failed"; exit 1; }
mse=$(metric reg.json mse)
predicted reg_predictions mse reg_test.csv "$mse"
/usr/bin/python3 -c "import sys; sys.exit(0 if $mse < 0.05 else 1)" \
  || { echo "regression: test MSE $mse, expected below 0.05"; exit 1; }

# The same in sync mode, 1 ps task and 2 workers: the parameters come from the ps at the end.
# With SGD and momentum, a cosine schedule after a warm-up, and clipped gradients.
run regression_sync --mode=sync --ps_tasks=1 --train=reg_train.csv --test=reg_test.csv \
  --target_columns=y1,y2 --loss=mean_squared_error --hidden=64,64 --train_steps=800 --optimizer=momentum \
  --learning_rate=0.05 --lr_schedule=cosine --lr_warmup_steps=50 --clip_norm=5 \
  --metrics_json=reg_sync.json || { echo "the sync-mode regression job failed"; exit 1; }
grep -qx "tabular: 800 global steps, momentum 0.9, gradients clipped to norm 5, learning rate 0.05 (cosine)" regression_sync.log \
  || { echo "regression_sync: not momentum, a cosine schedule and clipping"; exit 1; }
mse=$(metric reg_sync.json mse)
/usr/bin/python3 -c "import sys; sys.exit(0 if $mse < 0.05 else 1)" \
  || { echo "sync-mode regression: test MSE $mse, expected below 0.05"; exit 1; }

# The six features read as three steps of two by a GRU (--input_shape reshapes each row), and
# predicted for in the file's own shape.
run reshaped --train=reg_train.csv --test=reg_test.csv --target_columns=y1,y2 --loss=mse --model=gru \
  --input_shape=3,2 --units=32 --train_steps=600 --learning_rate=0.005 --metrics_json=reshaped.json \
  --predict=reg_test.csv --predictions=reshaped_predictions.csv || { echo "the reshaped GRU job failed"; exit 1; }
mse_gru=$(metric reshaped.json mse)
predicted reshaped_predictions mse reg_test.csv "$mse_gru"
at_most "$mse_gru" 0.05 || { echo "reshaped GRU: test MSE $mse_gru, expected below 0.05"; exit 1; }

# Features on scales far apart: standardised by the training data's statistics (all shards'),
# the model learns them as it learns the plain ones; as they are, it does not.
run standardized --train=reg_scaled_train.csv --test=reg_scaled_test.csv --target_columns=y1,y2 \
  --loss=mean_squared_error --hidden=64,64 --train_steps=1500 --standardize \
  --metrics_json=reg_std.json --predict=reg_scaled_test.csv --predictions=std_predictions.csv \
  || { echo "the standardised regression job failed"; exit 1; }
mse_std=$(metric reg_std.json mse)
predicted std_predictions mse reg_scaled_test.csv "$mse_std"
run unstandardized --train=reg_scaled_train.csv --test=reg_scaled_test.csv --target_columns=y1,y2 \
  --loss=mean_squared_error --hidden=64,64 --train_steps=1500 \
  --metrics_json=reg_raw.json || { echo "the unstandardised regression job failed"; exit 1; }
mse_raw=$(metric reg_raw.json mse)
/usr/bin/python3 -c "import sys; sys.exit(0 if $mse_std < 0.05 and $mse_raw > 2 * $mse_std else 1)" \
  || { echo "scaled features: test MSE $mse_std standardised, $mse_raw not; expected < 0.05 and" \
              "at least twice that"; exit 1; }

# Without a test file, a fifth of the training file held out (the same fifth on every worker)
# and evaluated on, with the Huber loss (turning linear at 0.5): 3200 rows train, and the MSE
# on the 800 held out is as low as on the test file.
run held_out --train=reg_train.csv --validation_split=0.2 --seed=3 --target_columns=y1,y2 \
  --loss=huber --huber_delta=0.5 --hidden=64,64 --train_steps=1500 --metrics_json=reg_held_out.json \
  || { echo "the job with a validation split failed"; exit 1; }
grep -q "^tabular: 3 workers, 3200 examples, " held_out.log \
  || { echo "held_out: the training part is not 3200 rows"; exit 1; }
mse=$(metric reg_held_out.json mse)
mae=$(metric reg_held_out.json mae)
/usr/bin/python3 -c "import sys; sys.exit(0 if $mse < 0.05 and 0 < $mae < 0.2 else 1)" \
  || { echo "held_out: validation MSE $mse and MAE $mae, expected below 0.05 and 0.2"; exit 1; }

# Evaluations during training (ValidationHook), in sync mode with a ps task: the chief's stop
# for want of improvement ends every task. No evaluation can beat the first (at step 50) by 1e9,
# so two more end training at step 150 of 1500, and the best checkpoint is step 50's. The first
# of those two halves the learning rate (--reduce_lr_patience=1); the second, which stops
# training, lowers no rate that no step would use.
run early_stop --mode=sync --ps_tasks=1 --train=reg_train.csv --validation_split=0.2 \
  --target_columns=y1,y2 --loss=mean_squared_error --train_steps=1500 --eval_every_steps=50 \
  --patience=2 --min_delta=1e9 --best_dir=best --reduce_lr_patience=1 --reduce_lr_factor=0.5 \
  --restore_best --metrics_json=early_stop.json || { echo "the early-stopping job failed"; exit 1; }
grep -q "^validation: loss has not improved in 2 evaluations: stopping$" early_stop.log \
  && grep -q "^tabular: 2 workers, 3200 examples, global step 150, " early_stop.log \
  || { echo "early_stop: training did not stop at global step 150"; exit 1; }
halved="validation: loss has not improved in 1 evaluation: learning rate scaled to"
[[ $(grep "learning rate scaled" early_stop.log) == "$halved 0.5 of the schedule's" ]] \
  || { echo "early_stop: the learning rate was not halved at step 100 alone"; exit 1; }
[[ -f best/model.ckpt-50.safetensors && ! -f best/model.ckpt-100.safetensors ]] \
  || { ls best; echo "early_stop: best/ does not hold step 50's checkpoint alone"; exit 1; }
# --restore_best: the final evaluation is of step 50's parameters (its loss as the evaluation at
# 50 printed it), not of step 150's.
best_loss=$(sed -n 's/^validation at global step 50: loss \([0-9.]*\),.*/\1/p' early_stop.log)
last_loss=$(sed -n 's/^validation at global step 150: loss \([0-9.]*\),.*/\1/p' early_stop.log)
final_loss=$(metric early_stop.json loss)
grep -q "^tabular: the best evaluation's parameters, of global step 50 (--restore_best)$" early_stop.log \
  && /usr/bin/python3 -c "import sys; sys.exit(0 if abs($final_loss - $best_loss) <= 6e-5 and abs($best_loss - $last_loss) > 1e-3 else 1)" \
  || { echo "early_stop: final loss $final_loss, not step 50's $best_loss (step 150's: $last_loss)"; exit 1; }

# With precision, recall and the ROC curve's area over every label of the test set (counted
# over all of it, not averaged over batches).
run multilabel --train=ml_train_x.npy,ml_train_y.npy --test=ml_test_x.npy,ml_test_y.npy \
  --loss=sigmoid_cross_entropy --hidden=64 --train_steps=1000 --metrics=precision,recall,auc \
  --metrics_json=ml.json --predict=ml_test_x.npy --predictions=ml_predictions.csv \
  || { echo "the multi-label job failed"; exit 1; }
accuracy=$(metric ml.json binary_accuracy)
predicted ml_predictions binary_accuracy ml_test_y.npy "$accuracy"
/usr/bin/python3 -c "import sys; sys.exit(0 if $accuracy >= 0.93 else 1)" \
  || { echo "multi-label: test binary accuracy $accuracy, expected at least 0.93"; exit 1; }
for name in precision recall; do
  value=$(metric ml.json $name)
  /usr/bin/python3 -c "import sys; sys.exit(0 if 0.9 <= $value <= 1 else 1)" \
    || { echo "multi-label: test $name $value, expected at least 0.9"; exit 1; }
done
auc=$(metric ml.json auc)
/usr/bin/python3 -c "import sys; sys.exit(0 if 0.97 <= $auc <= 1 else 1)" \
  || { echo "multi-label: test AUC $auc, expected at least 0.97"; exit 1; }

# A rare class (5% of the rows): weighed as much in all as the common one (--class_weights=
# balanced, counted over the 3 workers' parts), the model finds far more of its examples (the
# test recall of class 1) than without weights, which leave it to the common class where in doubt.
for weights in "" balanced; do
  run "rare_${weights:-plain}" --train=rare_train.csv --test=rare_test.csv --label_column=y \
    --hidden=16 --train_steps=600 --metrics=recall ${weights:+--class_weights=$weights} \
    --metrics_json="rare_${weights:-plain}.json" --predict=rare_test.csv \
    --predictions="rare_${weights:-plain}_predictions.csv" || { echo "the rare-class job ($weights) failed"; exit 1; }
done
predicted rare_balanced_predictions recall rare_test.csv "$(metric rare_balanced.json recall)"
# Classes by name: numbered in sorted order on every worker alike, the test file's names matched
# to them, and the predictions written by name.
# Its metrics of one class by number ('setosa' is class 0, 'virginica' 2) or by name, the mapping
# printed before training; asked for without a class, a metric is of class 1 and named by it.
run species --train=species_train.csv --test=species_test.csv --label_column=species --hidden=16 \
  --train_steps=300 --metrics=recall@0,f1@2,precision@setosa,recall --metrics_json=species.json \
  --predict=species_test.csv --predictions=species_predictions.csv || { echo "the job with class names failed"; exit 1; }
species_accuracy=$(metric species.json accuracy)
predicted species_predictions accuracy species_test.csv "$species_accuracy"
for value in "$species_accuracy" "$(metric species.json recall@0)" "$(metric species.json f1@2)" \
    "$(metric species.json precision@setosa)" "$(metric species.json recall@versicolor)"; do
  at_least "$value" 0.9 || { echo "class names: test accuracy, setosa's recall, virginica's F1, setosa's precision," \
                                   "versicolor's recall: $value, expected at least 0.9"; exit 1; }
done
[[ $(grep -c "^classes: 0 setosa, 1 versicolor, 2 virginica$" species.log) == 1 ]] \
  || { echo "class names: the classes' numbers are not printed once before training"; exit 1; }
grep -q "^tabular: .*, recall@0 [0-9.]*, f1@2 [0-9.]*, precision@setosa [0-9.]*, recall@versicolor [0-9.]*$" species.log \
  || { echo "class names: the test metrics do not name their classes"; exit 1; }
# The same rows among an id and a text column, left out by --ignore_columns or by naming the
# features: the same model as from the plain file (its test file has neither column).
for columns in --ignore_columns=id,note --feature_columns=x0,x1; do
  name=rare_${columns%%=*}; name=${name/--/}
  run "$name" --train=rare_ids.csv --test=rare_test.csv --label_column=y --hidden=16 \
    --train_steps=600 --metrics=recall "$columns" --metrics_json="$name.json" \
    || { echo "the rare-class job with $columns failed"; exit 1; }
  for key in loss recall; do
    [[ $(metric "$name.json" $key) == $(metric rare_plain.json $key) ]] \
      || { echo "$columns: test $key $(metric "$name.json" $key), not the plain file's $(metric rare_plain.json $key)"; exit 1; }
  done
done
grep -qxF "class weights: $(cut -d' ' -f1,2 rare_weights.txt)" rare_balanced.log \
  || { echo "rare class: the weights are not n / (2 n_c) of the whole file ($(cut -d' ' -f1,2 rare_weights.txt))"; exit 1; }
recall_plain=$(metric rare_plain.json recall)
recall_balanced=$(metric rare_balanced.json recall)
/usr/bin/python3 -c "import sys; sys.exit(0 if $recall_balanced >= 0.75 and $recall_balanced >= $recall_plain + 0.2 else 1)" \
  || { echo "rare class: test recall $recall_balanced with balanced weights, $recall_plain without;" \
              "expected at least 0.75 and 0.2 more"; exit 1; }
# The same as a sigmoid output against 0/1 targets, its positives weighed by negatives / positives.
run rare_sigmoid --train=rare_train.csv --test=rare_test.csv --target_columns=y \
  --loss=sigmoid_cross_entropy --hidden=16 --train_steps=600 --metrics=recall --pos_weight=balanced \
  --metrics_json=rare_sigmoid.json || { echo "the rare-class sigmoid job failed"; exit 1; }
grep -qxF "positive weights: $(cut -d' ' -f3 rare_weights.txt)" rare_sigmoid.log \
  || { echo "rare class: the positive weight is not negatives / positives ($(cut -d' ' -f3 rare_weights.txt))"; exit 1; }
recall_sigmoid=$(metric rare_sigmoid.json recall)
/usr/bin/python3 -c "import sys; sys.exit(0 if $recall_sigmoid >= 0.75 else 1)" \
  || { echo "rare class: test recall $recall_sigmoid with a balanced positive weight, expected at least 0.75"; exit 1; }
# The focal loss, the positives weighed 0.75 and the easy examples fading: recall at least 0.7
# (measured 0.76 - 0.82; unweighted, the softmax above 0.61 and a plain sigmoid output 0.51).
run rare_focal --train=rare_train.csv --test=rare_test.csv --target_columns=y --loss=focal --focal_alpha=0.75 \
  --hidden=16 --train_steps=600 --metrics=recall --metrics_json=rare_focal.json \
  || { echo "the rare-class focal job failed"; exit 1; }
recall_focal=$(metric rare_focal.json recall)
/usr/bin/python3 -c "import sys; sys.exit(0 if $recall_focal >= 0.7 else 1)" \
  || { echo "rare class: test recall $recall_focal with the focal loss, expected at least 0.7"; exit 1; }

# Checkpoints: a second job on the same --checkpoint_dir resumes at the first's last step, trains
# no more, and evaluates the same parameters.
for name in first resumed; do
  run "checkpoint_$name" --train=reg_train.csv --test=reg_test.csv --target_columns=y1,y2 \
    --loss=mean_squared_error --train_steps=200 --checkpoint_dir=tab_ckpt \
    --metrics_json="checkpoint_$name.json" || { echo "the $name checkpointed job failed"; exit 1; }
done
grep -q "^tabular: 3 workers, 4000 examples, global step 200, " checkpoint_resumed.log \
  && [[ "$(metric checkpoint_first.json mse)" == "$(metric checkpoint_resumed.json mse)" ]] \
  || { echo "checkpoint: the resumed job is not at step 200 with the same test MSE"; exit 1; }
# Each job's final evaluation joins the eval run beside the training summaries, at step 200
# with the printed numbers: once per job (metrics.csv is appended to; in the event files the
# resumed job's session start replaces the first's point for TensorBoard).
/usr/bin/python3 - tab_ckpt/eval/metrics.csv checkpoint_resumed.json <<'PY' \
  || { echo "checkpoint: tab_ckpt/eval/metrics.csv does not hold each job's final evaluation"; exit 1; }
import csv, json, sys
rows = [(r["tag"], int(r["step"]), float(r["value"])) for r in csv.DictReader(open(sys.argv[1]))]
final = json.load(open(sys.argv[2]))
assert sorted(t for t, _, _ in rows) == sorted(list(final) * 2), (rows, final)
for tag, step, value in rows:
    assert step == 200 and abs(value - final[tag]) <= 1e-6 * max(1, abs(value)), (tag, step, value, final[tag])
PY

# Two epochs of the 500 rows, counted globally: 3 workers' batches of 32 a step, 11 steps.
run no_header --train=reg_no_header.csv --csv_header=false --target_columns=6,7 \
  --loss=mean_squared_error --epochs=2 || { echo "the job without a CSV header failed"; exit 1; }
grep -q "^tabular: 3 workers, 500 examples, global step 11, " no_header.log \
  || { echo "no_header: not all 500 rows were read as examples, or 2 epochs are not 11 steps"; exit 1; }

# expect_failure NAME REGEX ARGS...: the job fails, quickly, every worker saying REGEX in one line
# (with REPORTERS="0", the chief alone: the test data is the chief's alone to read).
expect_failure() { expect_job_failure "$tabular" "$1" "$2" "${REPORTERS:-0 1 2}" "${@:3}"; }
expect_failure truncated "truncated_x\.npy: .*" \
  --train=truncated_x.npy,ml_train_y.npy --loss=sigmoid_cross_entropy
expect_failure input_shape "reg_train\.csv: the data's examples are \[6\], the model's input takes \[7\]" \
  --train=reg_train.csv --target_columns=y1,y2 --loss=mean_squared_error --input_shape=7
expect_failure loss_labels "ml_train_x\.npy, ml_train_y\.npy: loss softmax_cross_entropy does not fit the data: .*; it needs class labels, an integer per example \(\[N\] or \[N, 1\]\); several values per example, .*" \
  --train=ml_train_x.npy,ml_train_y.npy --loss=softmax_cross_entropy
# Integer rows of several values are targets per output too: no advice to save them as integers.
expect_failure loss_int_rows "ml_train_x\.npy, ml_train_y_int\.npy: loss softmax_cross_entropy does not fit the data: predictions \[5\] per example, float targets \[5\]; it needs class labels, an integer per example \(\[N\] or \[N, 1\]\); several values per example, integers or floats, are read as a target per output \(one-hot or multi-hot rows\): .*" \
  --train=ml_train_x.npy,ml_train_y_int.npy --loss=softmax_cross_entropy
expect_failure sigmoid_label_column "--loss=sigmoid_cross_entropy with --label_column=y: it takes 0/1 targets, one per output; give the column as --target_columns=y \(class labels are for softmax_cross_entropy\)" \
  --train=rare_train.csv --label_column=y --loss=sigmoid_cross_entropy
# A target a sigmoid's loss cannot take, named with its file and example before training: the
# worker holding it names its own example; the chief, reading the test file whole, the file's row.
REPORTERS=1 expect_failure bad_target "ml_test_x\.npy, ml_bad_y\.npy: example 32 of the examples this process holds: loss sigmoid_cross_entropy: target 2 \(value 1 of the example\) is not in \[0, 1\], .*" \
  --train=ml_test_x.npy,ml_bad_y.npy --loss=sigmoid_cross_entropy
REPORTERS=0 expect_failure bad_test_target "ml_test_x\.npy, ml_bad_y\.npy: example 97: loss sigmoid_cross_entropy: target 2 \(value 1 of the example\) is not in \[0, 1\], a probability per logit \(bytes: divide by 255\)" \
  --train=ml_train_x.npy,ml_train_y.npy --test=ml_test_x.npy,ml_bad_y.npy --loss=sigmoid_cross_entropy \
  --train_steps=100000000
expect_failure missing_value "reg_nan\.csv: line 3, column 0 \('f0'\): 'nan' is not a finite number \(a missing value\?\)" \
  --train=reg_nan.csv --target_columns=y1,y2 --loss=mean_squared_error
expect_failure class_weights_count "--class_weights '1,2,3': 3 weights for 2 classes" \
  --train=rare_train.csv --label_column=y --class_weights=1,2,3
expect_failure class_weights_loss "--class_weights weighs softmax_cross_entropy, not --loss=mean_squared_error" \
  --train=reg_train.csv --target_columns=y1,y2 --loss=mean_squared_error --class_weights=balanced
expect_failure no_label "--train=rare_train\.csv: a CSV file needs --label_column \(class labels\) or --target_columns \(float targets\): the column\(s\) to learn" \
  --train=rare_train.csv
expect_failure text_column "rare_ids\.csv: line 2, column 0 \('id'\): 'r00000' is not a number" \
  --train=rare_ids.csv --label_column=y --ignore_columns=note
expect_failure ignore_missing "rare_ids\.csv: no column 'notes' \(columns: .*\)" \
  --train=rare_ids.csv --label_column=y --ignore_columns=id,notes
REPORTERS=0 expect_failure unknown_class "species_unknown\.csv: line 3, column 1 \('species'\): label 'iris' is not one of the 3 classes \(class_names; the training file's\)" \
  --train=species_train.csv --test=species_unknown.csv --label_column=species --train_steps=100000000
expect_failure class_metric_name "metric 'recall@iris': no class named 'iris' \(the classes: setosa, versicolor, virginica\)" \
  --train=species_train.csv --label_column=species --metrics=recall@iris
expect_failure huber_delta "--huber_delta: for --loss=huber, not --loss=mean_squared_error" \
  --train=reg_train.csv --target_columns=y1,y2 --loss=mean_squared_error --huber_delta=2
expect_failure focal_alpha "--focal_alpha: for --loss=focal, not --loss=sigmoid_cross_entropy" \
  --train=rare_train.csv --target_columns=y --loss=sigmoid_cross_entropy --focal_alpha=0.5
expect_failure epochs_and_steps "--epochs=2 with --train_steps=100: give one" \
  --train=rare_train.csv --label_column=y --epochs=2 --train_steps=100
REPORTERS=0 expect_failure names_for_indices "rare_named_test\.csv: label column 'y' holds class names \('no', \.\.\.\) where class indices below 2 were asked for \(num_classes\)" \
  --train=rare_train.csv --test=rare_named_test.csv --label_column=y --train_steps=100000000
REPORTERS=0 expect_failure predictions_dir "--predictions=no/such/dir/p\.csv: no directory no/such/dir" \
  --train=rare_train.csv --label_column=y --predict=rare_test.csv --predictions=no/such/dir/p.csv \
  --train_steps=100000000
# The file to predict for is not overwritten by the predictions (nor is it read empty).
REPORTERS=0 expect_failure predictions_over_input "--predictions=\./rare_test\.csv: the same file as --predict=rare_test\.csv, which it would overwrite" \
  --train=rare_train.csv --label_column=y --predict=rare_test.csv --predictions=./rare_test.csv \
  --train_steps=100000000
# The checkpoints of a job without --standardize do not resume with it (nor with other columns).
REPORTERS=0 expect_failure resumed_standardized "tab_ckpt, global step 200: its parameters were trained with --standardize=false, this job has --standardize=true: give the same .*" \
  --train=reg_train.csv --test=reg_test.csv --target_columns=y1,y2 --loss=mean_squared_error \
  --train_steps=400 --checkpoint_dir=tab_ckpt --standardize
REPORTERS=0 expect_failure test_column "reg_test_no_f5\.csv: no column 'f5' \(columns: .*\)" \
  --train=reg_train.csv --test=reg_test_no_f5.csv --target_columns=y1,y2 --loss=mean_squared_error
REPORTERS=0 expect_failure test_shape "ml_test_x33\.npy, ml_test_y33\.npy: the data's examples are \[3, 3\], the model's input takes \[4, 4\]" \
  --train=ml_train_x.npy,ml_train_y.npy --test=ml_test_x33.npy,ml_test_y33.npy \
  --loss=sigmoid_cross_entropy --train_steps=100000000
# --predict's file too, read and checked before training.
REPORTERS=0 expect_failure predict_column "reg_test_no_f5\.csv: no column 'f5' \(columns: .*\)" \
  --train=reg_train.csv --test=reg_test.csv --target_columns=y1,y2 --loss=mean_squared_error \
  --predict=reg_test_no_f5.csv --train_steps=100000000
REPORTERS=0 expect_failure predict_shape "--predict=ml_test_x33\.npy: examples of shape \[3, 3\], not the model's input \[4, 4\]" \
  --train=ml_train_x.npy,ml_train_y.npy --test=ml_test_x.npy,ml_test_y.npy \
  --loss=sigmoid_cross_entropy --predict=ml_test_x33.npy --train_steps=100000000
REPORTERS=0 expect_failure predict_nan "--predict=ml_test_x_nan\.npy: example 70 holds nan, not a finite number" \
  --train=ml_train_x.npy,ml_train_y.npy --test=ml_test_x.npy,ml_test_y.npy \
  --loss=sigmoid_cross_entropy --predict=ml_test_x_nan.npy --train_steps=100000000
# An empty test set: its metrics would be zeros.
REPORTERS=0 expect_failure test_empty "ml_empty_x\.npy, ml_empty_y\.npy: no examples to evaluate on" \
  --train=ml_train_x.npy,ml_train_y.npy --test=ml_empty_x.npy,ml_empty_y.npy \
  --loss=sigmoid_cross_entropy --train_steps=100000000
echo "user data test passed: regression test MSE $mse, multi-label test binary accuracy $accuracy," \
  "rare-class test recall $recall_plain without weights, $recall_balanced with balanced ones," \
  "$recall_sigmoid with a balanced positive weight"
