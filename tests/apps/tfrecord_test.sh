#!/usr/bin/env bash
# Training on TFRecord files of tf.train.Example records written by the protobuf library
# (tests/support/tfrecord_writer.py):
# - apps/examples/images.cc on Fashion-MNIST's first 3000 training and 1000 test images as
#   encoded PNG and JPEG images with int64 labels (the training set in three files, one
#   gzip-compressed, named by a pattern), as TensorFlow's image pipelines store them: sync mode,
#   1 ps task and 2 workers, 300 steps, test accuracy at least 0.80, as from the same images in
#   folders (tests/apps/images_test.sh), and --predict on the test records scores the same;
#   kept encoded and decoded as batches take them
#   (--decode_on_use), the same test loss and accuracy; without --test, --validation_split=0.2
#   trains on 2400 of the records and evaluates on the 600 held out;
# - apps/examples/tabular.cc on a regression stored as float lists (6 features, 2 targets, the
#   data of tests/apps/user_data_test.sh): test MSE below 0.05, as from CSV;
# - a record with a broken checksum ends the job within seconds, naming the file and record.
#
#   tfrecord_test.sh IMAGES TABULAR MPIEXEC NP_FLAG DATA_DIR WORKDIR
set -euo pipefail
example=$1 tabular=$2 mpiexec=$3 np_flag=$4 data_dir=$5 work=$6
here=$(dirname "$0")
. "$here/../support/skip.sh"
/usr/bin/python3 -c "import numpy, PIL, google.protobuf" 2>/dev/null ||
  skip "/usr/bin/python3 cannot import numpy, PIL and google.protobuf" \
       "install python3-numpy python3-pil python3-protobuf"
[[ -d $data_dir ]] || skip "no Fashion-MNIST in $data_dir" "Debian: dataset-fashion-mnist"
rm -rf "$work" && mkdir -p "$work/records"
cd "$work"

/usr/bin/python3 - "$data_dir" "$here/../support" <<'PY'
import os, sys
from io import BytesIO
import numpy as np
from PIL import Image
sys.path.insert(0, sys.argv[2])
from fashion_mnist import first
from tfrecord_writer import Example, write_records

data_dir = sys.argv[1]

def example(image, label, i):
    out = BytesIO()
    Image.fromarray(image, "L").save(out, format="PNG" if i % 2 else "JPEG", quality=95)
    e = Example()
    e.features.feature["image/encoded"].bytes_list.value.append(out.getvalue())
    e.features.feature["image/class/label"].int64_list.value.append(int(label))
    return e

for split, prefix, n, files in (("train", "train", 3000, 3), ("test", "t10k", 1000, 1)):
    images, labels = first(data_dir, prefix, n)
    per_file = n // files
    for f in range(files):
        rows = range(f * per_file, (f + 1) * per_file)
        name = f"records/{split}-{f}.tfrecord" if files > 1 else f"records/{split}.tfrecord"
        write_records(name + (".gz" if f == 1 else ""), [example(images[i], labels[i], i) for i in rows],
                      gzip=f == 1)
# A regression (tests/apps/user_data_test.sh's): 6 features, 2 targets with noise 0.1.
rng = np.random.default_rng(7)
for split, n in (("train", 4000), ("test", 1000)):
    x = rng.uniform(-1, 1, size=(n, 6))
    y1 = np.sin(2 * x[:, 0]) + x[:, 1] * x[:, 2] + 0.5 * x[:, 3] ** 2
    y2 = x[:, 4] - x[:, 5] * x[:, 0]
    y = np.stack([y1, y2], axis=1) + rng.normal(0, 0.1, size=(n, 2))
    examples = []
    for i in range(n):
        e = Example()
        e.features.feature["x"].float_list.value.extend(x[i].tolist())
        e.features.feature["y"].float_list.value.extend(y[i].tolist())
        examples.append(e)
    write_records(f"records/regression-{split}.tfrecord", examples)
# A copy of the test file with one byte of its third record's data changed.
data = bytearray(open("records/test.tfrecord", "rb").read())
at = 0
for _ in range(2):
    at += 16 + int.from_bytes(data[at:at + 8], "little")
data[at + 12 + 40] ^= 0x55
open("records/broken.tfrecord", "wb").write(bytes(data))
PY

. "$here/example_jobs.sh"
run() { run_job "$example" "$@"; }  # run NAME NP ARGS...

run sync 3 --ps_tasks=1 --mode=sync --train='records/train-*' --test=records/test.tfrecord \
  --train_steps=300 --metrics_json=sync.json --predict=records/test.tfrecord --predictions=predictions.csv \
  || { echo "the sync-mode job failed"; exit 1; }
grep -q "^images: 2 workers, 3000 images of \[28, 28, 1\] in 10 classes, global step 300," sync.log \
  || { echo "sync: not every record was read, or not as 28x28 grey"; exit 1; }
accuracy=$(json_value sync.json accuracy)
at_least "$accuracy" 0.80 \
  || { echo "sync: test accuracy $accuracy, expected at least 0.80"; exit 1; }
# --predict on the test records: a row per record, in order, whose classes score the test
# accuracy the job printed.
/usr/bin/python3 - "$data_dir" "$here/../support" "$accuracy" <<'PY' || { echo "sync: the predictions do not score the test accuracy $accuracy"; exit 1; }
import csv, sys
sys.path.insert(0, sys.argv[2])
from fashion_mnist import first
_, labels = first(sys.argv[1], "t10k", 1000)
rows = list(csv.DictReader(open("predictions.csv")))
assert [int(r["index"]) for r in rows] == list(range(1000)), "not a row per record, in order"
value = sum(int(r["class"]) == int(y) for r, y in zip(rows, labels)) / 1000
print(f"predictions: test accuracy {value:.4f}, the job's {float(sys.argv[3]):.4f}")
assert abs(value - float(sys.argv[3])) < 1e-4
PY
# The images kept encoded and decoded as batches take them: the same run to the last digit.
run on_use 3 --ps_tasks=1 --mode=sync --train='records/train-*' --test=records/test.tfrecord \
  --train_steps=300 --decode_on_use || { echo "the decode-on-use job failed"; exit 1; }
grep -q "^images: 2 workers, 3000 images of \[28, 28, 1\] in 10 classes (decoded on use), " on_use.log \
  || { echo "on_use: the images were not decoded on use"; exit 1; }
[[ $(grep -o "global step 300, test loss.*" on_use.log) == $(grep -o "global step 300, test loss.*" sync.log) ]] \
  || { echo "decoded on use, the run ended elsewhere than with the images in memory"; exit 1; }

# Without --test, a fifth of the records held out (--validation_split), kept encoded: 2400 to train
# on (the workers' shards of the same split) and 600 to evaluate on.
run split 2 --train='records/train-*' --validation_split=0.2 --seed=5 --decode_on_use \
  --train_steps=20 --metrics_json=split.json || { echo "the validation-split job failed"; exit 1; }
grep -q "^images: 2 workers, 2400 images of \[28, 28, 1\] in 10 classes (decoded on use), " split.log \
  || { echo "split: not 2400 of the 3000 records trained on"; exit 1; }
[[ $(json_value split.json test_examples) == 600 ]] \
  || { echo "split: $(json_value split.json test_examples) records evaluated, not the 600 held out"; exit 1; }

run_job "$tabular" regression 3 --train=records/regression-train.tfrecord --test=records/regression-test.tfrecord \
  --target_columns=y --loss=mean_squared_error --hidden=64,64 --train_steps=1500 \
  --metrics_json=regression.json || { echo "the tabular regression job failed"; exit 1; }
mse=$(json_value regression.json mse)
at_most "$mse" 0.05 \
  || { echo "regression: test MSE $mse, expected below 0.05"; exit 1; }

expect_job_failure "$example" broken \
  "records/broken\.tfrecord: record 2 at byte [0-9]+: the data's checksum does not match \(a corrupt file\)" \
  "0" --train='records/train-*' --test=records/broken.tfrecord --train_steps=100000000
echo "TFRecord test passed: images in sync mode, test accuracy $accuracy; regression, test MSE $mse"
