#!/usr/bin/env bash
# Training on HDF5 files written by h5py (apps/examples/tabular.cc, 2 workers, allreduce mode):
# - Fashion-MNIST's first 6000 training and 1000 test images as uint8 [n, 28, 28] in a group of
#   the file ("train/images", gzip-compressed in chunks) with int64 labels, through the mlp with
#   --standardize: test accuracy at least 0.8; and the same arrays in .npy files train to the
#   same test loss and accuracy, to the last digit printed (each shard's rows read from the file
#   are the ones the .npy reader keeps);
# - a regression of float64 features and float32 targets [n, 2]: test MSE below 0.05; one value
#   per example ([n] features and targets), y = 2x + 1: test MSE below 0.01;
# - a missing dataset (its message names those present), a file that is not HDF5, a dataset
#   of strings, a truncated file and a dataset too large for memory each end the job in one line
#   (no error stack of the HDF5 library).
#
#
# And images in HDF5 arrays (apps/examples/images.cc, its CNN, standardised by the training set):
# - the same uint8 [n, 28, 28] Fashion-MNIST arrays: test accuracy at least 0.8;
# - float32 [n, 16, 16, 3] images of values around 1000 whose class is which channel is
#   brightest, with --horizontal_flip and a fifth of them held out (--validation_split): 960
#   images trained on and test accuracy at least 0.95 on the 240 held out;
#   --predict on the test file classifies its images in the same proportion (0.95);
# - the same images channels-first ([n, 3, 16, 16], PyTorch's layout) with --channels_first: the
#   same metrics and predictions to the last digit; without it, refused in one line;
# - a test set standardised where the training set is not: warned of;
# - float targets, a test set of another size or kind, neither --test nor --validation_split,
#   --height, a --predict file of image files or of another image size, a training file of no
#   images each end the job in one line.
#
#   hdf5_test.sh TABULAR MPIEXEC NP_FLAG DATA_DIR WORKDIR IMAGES
set -euo pipefail
tabular=$1 mpiexec=$2 np_flag=$3 data_dir=$4 work=$5 images=$6
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../support/skip.sh"
/usr/bin/python3 -c "import numpy, h5py" 2>/dev/null ||
  skip "/usr/bin/python3 cannot import numpy and h5py" "install python3-numpy python3-h5py"
[[ -d $data_dir ]] || skip "no Fashion-MNIST in $data_dir" "Debian: dataset-fashion-mnist"
rm -rf "$work" && mkdir -p "$work"
cd "$work"

PYTHONPATH="$here/../support" /usr/bin/python3 - "$data_dir" <<'PY'
import sys
import h5py
import numpy as np
from fashion_mnist import first

for split, prefix, n in (("train", "train", 6000), ("test", "t10k", 1000)):
    images, labels = first(sys.argv[1], prefix, n)
    with h5py.File(f"fashion_{split}.h5", "w") as f:
        f.create_dataset("train/images", data=images.astype(np.uint8), compression="gzip",
                         chunks=(100, 28, 28))
        f.create_dataset("train/labels", data=labels.astype(np.int64))
    np.save(f"fashion_{split}_x.npy", images.astype(np.float32))
    np.save(f"fashion_{split}_y.npy", labels.astype(np.int32))

rng = np.random.default_rng(3)
weights = rng.normal(size=(6, 2))
for split, n in (("train", 2000), ("test", 500)):
    x = rng.normal(size=(n, 6))
    y = np.tanh(x @ weights) + rng.normal(0, 0.01, size=(n, 2))
    with h5py.File(f"regression_{split}.h5", "w") as f:
        f["x"] = x  # float64
        f["y"] = y.astype(np.float32)
for split, n in (("train", 1000), ("test", 200)):  # one value per example: features [n]
    x = rng.uniform(-1, 1, size=n).astype(np.float32)
    with h5py.File(f"line_{split}.h5", "w") as f:
        f["x"] = x
        f["y"] = 2 * x + 1
with h5py.File("strings.h5", "w") as f:
    f["x"] = np.array([b"a", b"b"])
    f["y"] = np.array([0, 1])
for split, n in (("train", 1200), ("test", 300)):  # the brightest channel is the class
    labels = rng.integers(0, 3, size=n)
    pictures = 1000 + rng.normal(0, 20, size=(n, 16, 16, 3))
    pictures[np.arange(n), :, :, labels] += 30
    with h5py.File(f"channels_{split}.h5", "w") as f:
        f["images"] = pictures.astype(np.float32)
        f["labels"] = labels.astype(np.uint8)
    if split == "test":  # the same test images standardised, where the training ones are not
        with h5py.File("channels_standardised.h5", "w") as f:
            f["images"] = ((pictures - pictures.mean()) / pictures.std()).astype(np.float32)
            f["labels"] = labels.astype(np.uint8)
    with h5py.File(f"channels_first_{split}.h5", "w") as f:  # PyTorch's layout, [n, 3, 16, 16]
        f["images"] = pictures.astype(np.float32).transpose(0, 3, 1, 2)
        f["labels"] = labels.astype(np.uint8)
with h5py.File("channels_small.h5", "w") as f:  # a test set of smaller images
    f["images"] = np.zeros((10, 8, 8, 3), dtype=np.float32)
    f["labels"] = np.zeros(10, dtype=np.uint8)
with h5py.File("channels_empty.h5", "w") as f:  # no images at all
    f["images"] = np.zeros((0, 16, 16, 3), dtype=np.float32)
    f["labels"] = np.zeros(0, dtype=np.uint8)
with h5py.File("huge.h5", "w") as f:  # declared, never written: a few bytes on disk
    f.create_dataset("x", shape=(10**12, 4), dtype="f4", chunks=(1000, 4))
    f["y"] = np.zeros(4, dtype=np.float32)
PY
printf 'not an HDF5 file\n' > text.h5
head -c "$(( $(stat -c %s regression_train.h5) / 2 ))" regression_train.h5 > truncated.h5

. "$here/example_jobs.sh"
run() { run_job "$tabular" "$1" 2 "${@:2}"; }  # run NAME ARGS...: 2 ranks
# check NAME KEY OP BAR: NAME.json's KEY compared with BAR (OP is >= or <), printed.
check() {
  local value
  value=$(json_value "$1.json" "$2")
  /usr/bin/python3 -c "import sys; sys.exit(0 if $value $3 $4 else 1)" \
    || { echo "$1: test $2 $value, expected $3 $4"; exit 1; }
  echo "$1: test $2 $value"
}

common=(--model=mlp --hidden=128 --standardize --learning_rate=0.001 --train_steps=300)
run fashion_h5 "${common[@]}" --train=fashion_train.h5 --test=fashion_test.h5 \
  --features_key=train/images --targets_key=train/labels --metrics_json=h5.json \
  || { echo "the job on HDF5 files failed"; exit 1; }
run fashion_npy "${common[@]}" --train=fashion_train_x.npy,fashion_train_y.npy \
  --test=fashion_test_x.npy,fashion_test_y.npy --metrics_json=npy.json \
  || { echo "the job on .npy files failed"; exit 1; }
/usr/bin/python3 - <<'PY' || exit 1
import json, sys
h5, npy = json.load(open("h5.json")), json.load(open("npy.json"))
print(f"fashion: HDF5 {h5}, .npy {npy}")
if h5["accuracy"] < 0.8:
    sys.exit(f"fashion: test accuracy {h5['accuracy']} from HDF5, expected at least 0.8")
if h5 != npy:
    sys.exit("fashion: the HDF5 files did not train as the same arrays in .npy files")
PY

run regression --train=regression_train.h5 --test=regression_test.h5 --loss=mse \
  --hidden=32,32 --train_steps=600 --metrics_json=regression.json \
  || { echo "the regression job on HDF5 files failed"; exit 1; }
check regression mse "<" 0.05

run line --train=line_train.h5 --test=line_test.h5 --loss=mse --hidden=16 --train_steps=600 \
  --metrics_json=line.json || { echo "the job on one value per example failed"; exit 1; }
check line mse "<" 0.01

expect_job_failure "$tabular" missing \
  "fashion_train.h5: no dataset 'x' \(datasets present: train/images, train/labels\)" \
  "0 1 2" --train=fashion_train.h5
expect_job_failure "$tabular" not_hdf5 \
  "text.h5: not an HDF5 file, or not one this HDF5 library reads" "0 1 2" --train=text.h5
expect_job_failure "$tabular" strings \
  "strings.h5: dataset 'x' holds strings, not integers or floats" \
  "0 1 2" --train=strings.h5
expect_job_failure "$tabular" truncated \
  "truncated.h5: an HDF5 file that cannot be opened for reading \(truncated or damaged, .*" \
  "0 1 2" --train=truncated.h5
expect_job_failure "$tabular" huge \
  "huge.h5: dataset 'x' \[[0-9]+, 4\] does not fit in memory as float32" "0 1 2" --train=huge.h5

# Images: the CNN of example_images on the same Fashion-MNIST arrays, and on RGB-like floats.
run_job "$images" images_fashion 2 --train=fashion_train.h5 --test=fashion_test.h5 \
  --hdf5_images=train/images --hdf5_labels=train/labels --train_steps=300 \
  --metrics_json=images_fashion.json || { echo "the HDF5 images job failed"; exit 1; }
grep -q "^images: 2 workers, 6000 images of \[28, 28\] in 10 classes, global step 300, " images_fashion.log \
  || { echo "images_fashion: not 6000 images of [28, 28] in 10 classes"; exit 1; }
run_job "$images" images_channels 2 --train=channels_train.h5 --validation_split=0.2 --seed=2 \
  --filters=8 --hidden=16 --horizontal_flip --train_steps=150 --metrics_json=images_channels.json \
  --predict=channels_test.h5 --predictions=channels_predictions.csv \
  || { echo "the HDF5 RGB images job failed"; exit 1; }
# A fifth of the 1200 held out: 960 to train on (the workers' shards of the same split), 240 to test.
grep -q "^images: 2 workers, 960 images of \[16, 16, 3\] in 3 classes, " images_channels.log \
  || { echo "images_channels: not 960 training images of [16, 16, 3] in 3 classes"; exit 1; }
check images_channels test_examples "==" 240
# --predict on an HDF5 file: its 300 images classified (standardised as the training arrays: not,
# they would stay at chance) as its labels say, at least as well as the bar.
/usr/bin/python3 - <<'PY' || { echo "images_channels: the predictions are wrong"; exit 1; }
import csv, h5py, numpy as np
rows = list(csv.reader(open("channels_predictions.csv")))
assert rows[0] == ["index", "class", "probability"], rows[0]
labels = h5py.File("channels_test.h5")["labels"][:]
assert [int(r[0]) for r in rows[1:]] == list(range(len(labels))), "not one row per image, in order"
right = np.mean([int(r[1]) == labels[int(r[0])] for r in rows[1:]])
assert all(1 / 3 <= float(r[2]) <= 1 for r in rows[1:]), "a probability out of range"
print(f"images_channels: {right:.3f} of the {len(labels)} predictions right")
assert right >= 0.95
PY
# The same images channels-first, turned by --channels_first: the same run to the last digit.
run_job "$images" images_channels_first 2 --train=channels_first_train.h5 --validation_split=0.2 --seed=2 \
  --filters=8 --hidden=16 --horizontal_flip --train_steps=150 --metrics_json=images_channels_first.json \
  --predict=channels_first_test.h5 --predictions=channels_first_predictions.csv --channels_first \
  || { echo "the channels-first HDF5 images job failed"; exit 1; }
cmp -s images_channels.json images_channels_first.json && cmp -s channels_predictions.csv channels_first_predictions.csv \
  || { echo "images_channels_first: not the channels-last run's metrics and predictions"; exit 1; }
# A test set prepared otherwise than the training set is said to be (and evaluated as it is).
run_job "$images" images_standardised 1 --train=channels_train.h5 --test=channels_standardised.h5 \
  --filters=8 --hidden=16 --train_steps=2 || { echo "the job with a standardised test set failed"; exit 1; }
grep -q "^warning: --test=channels_standardised.h5: its values have mean .* the training data's 10[0-9][0-9] and .*: prepared otherwise" \
  images_standardised.log || { echo "images_standardised: no warning of a test set of another scale"; exit 1; }
expect_job_failure "$images" images_channels_first_unsaid \
  "--train=channels_first_train.h5: dataset 'images': images of \[3, 16, 16\] look channels-first \(\[channels, height, width\], PyTorch's layout\), where Cohort's are \[height, width, channels\]: give --channels_first to turn them" \
  "0 1 2" --train=channels_first_train.h5 --validation_split=0.2
check images_fashion accuracy ">=" 0.8
check images_channels accuracy ">=" 0.95
expect_job_failure "$images" images_targets \
  "--train=regression_train.h5: dataset 'x' holds examples of shape \[6\] with float targets: expected .*" \
  "0 1 2" --train=regression_train.h5 --test=regression_test.h5 --hdf5_images=x --hdf5_labels=y
expect_job_failure "$images" images_test_size \
  "--test=channels_small.h5: dataset 'images' holds images of shape \[8, 8, 3\], not the training images' .*" \
  "0" --train=channels_train.h5 --test=channels_small.h5
expect_job_failure "$images" images_empty "--train=channels_empty.h5: no images in it" \
  "0 1 2" --train=channels_empty.h5 --test=channels_test.h5
expect_job_failure "$images" images_height \
  "--height, --width and --channels: for decoded images; --train=channels_train.h5 is an HDF5 file, .*" \
  "0 1 2" --train=channels_train.h5 --height=8 --width=8
expect_job_failure "$images" images_predict \
  "--predict=anything and --train=channels_train.h5: both HDF5 files or neither .*" \
  "0 1 2" --train=channels_train.h5 --predict=anything
expect_job_failure "$images" images_predict_size \
  "--predict=channels_small.h5: dataset 'images' holds \[10, 8, 8, 3\], not images of the training images' shape \[16, 16, 3\]" \
  "0" --train=channels_train.h5 --test=channels_test.h5 --train_steps=1 --predict=channels_small.h5
expect_job_failure "$images" images_no_test \
  "--test or --validation_split is required with an HDF5 --train=channels_train.h5 .*" \
  "0 1 2" --train=channels_train.h5
expect_job_failure "$images" images_mixed \
  "--test=photos and --train=channels_train.h5: both HDF5 files or neither .*" \
  "0 1 2" --train=channels_train.h5 --test=photos

# One line each: the HDF5 library's own error stack is not printed.
for name in missing not_hdf5 strings truncated huge images_targets images_height; do
  ! grep -q "HDF5-DIAG" "$name.log" || { echo "$name: the HDF5 library printed its error stack"; exit 1; }
done
echo "HDF5 test passed"
