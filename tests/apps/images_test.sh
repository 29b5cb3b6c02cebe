#!/usr/bin/env bash
# Training on a folder of the user's pictures (apps/examples/images.cc): Fashion-MNIST's
# first 3000 training and 1000 test images written by PIL as PNG and JPEG files, a subfolder per
# class, as a user's photos would be:
# - sync mode, 1 ps task and 2 workers, 300 steps, evaluated on a moving average of the
#   parameters (decay 0.99): test accuracy at least 0.80 (one guess in ten gets 0.10; the network
#   reaches 0.85 - 0.86 here, seeds 1 - 4);
# - the training folder alone, a fifth held out (--validation_split=0.2): the same bar on it;
# - a second run on 1 process restores the first run's checkpoint, its averages with it (the same
#   test loss and accuracy, no more training), and classifies the test set's bags with them: at
#   least 80% called "Bag";
# - allreduce on 2 workers, every image resized to 32x32 and read as RGB, with random flips and
#   balanced class weights (those of the whole folder): the same bar; and the same run with the
#   images decoded as batches take them (--decode_on_use) ends with the same test loss and
#   accuracy;
# - the second convolution separable (--conv=separable): the same bar;
# - bad input: a missing folder, an image that does not decode, a missing image to classify or
#   one that is not named as an image (both found before training), a
#   test folder with a class the training set lacks and a folder of one class each end the job
#   within seconds, with one line naming the file or folder on every worker that read it; a
#   class subfolder without images is warned of; a job resumed on classes of other names is
#   refused.
#
#   images_test.sh EXAMPLE MPIEXEC NP_FLAG DATA_DIR WORKDIR
set -euo pipefail
example=$1 mpiexec=$2 np_flag=$3 data_dir=$4 work=$5
here=$(dirname "$0")
. "$here/../support/skip.sh"
/usr/bin/python3 -c "import numpy, PIL" 2>/dev/null ||
  skip "/usr/bin/python3 cannot import numpy and PIL" "install python3-numpy python3-pil"
[[ -d $data_dir ]] || skip "no Fashion-MNIST in $data_dir" "Debian: dataset-fashion-mnist"
rm -rf "$work" && mkdir -p "$work"
cd "$work"

/usr/bin/python3 - "$data_dir" "$here/../support" <<'PY'
import os, sys
from PIL import Image
sys.path.insert(0, sys.argv[2])
from fashion_mnist import first

data_dir = sys.argv[1]
names = ["T-shirt_top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker",
         "Bag", "Ankle_boot"]

for split, prefix, n in (("train", "train", 3000), ("test", "t10k", 1000)):
    images, labels = first(data_dir, prefix, n)
    for i in range(n):
        folder = f"{split}/{names[labels[i]]}"
        os.makedirs(folder, exist_ok=True)
        image = Image.fromarray(images[i], "L")
        if i % 2:
            image.save(f"{folder}/{i:05d}.png")
        else:
            image.save(f"{folder}/{i:05d}.jpg", quality=95)

# Bad folders: a truncated image among good ones, and a test set with a class of its own.
for i, name in enumerate(("Bag", "Coat")):
    os.makedirs(f"broken/{name}", exist_ok=True)
    for j in range(4):
        Image.fromarray(images[4 * i + j], "L").save(f"broken/{name}/{j}.png")
data = open("broken/Coat/2.png", "rb").read()
open("broken/Coat/2.png", "wb").write(data[: len(data) // 2])
for i, name in enumerate(("Bag", "Coat")):
    os.makedirs(f"small/{name}", exist_ok=True)
    for j in range(8):
        Image.fromarray(images[8 * i + j], "L").save(f"small/{name}/{j}.png")
os.makedirs("extra_class/Bag", exist_ok=True)
os.makedirs("extra_class/Hat", exist_ok=True)
Image.fromarray(images[0], "L").save("extra_class/Bag/0.png")
Image.fromarray(images[1], "L").save("extra_class/Hat/1.png")
# One class alone; and two with images beside an empty third.
os.makedirs("one_class/Bag", exist_ok=True)
for name in ("Bag", "Coat", "Hat"):
    os.makedirs(f"with_empty/{name}", exist_ok=True)
for j in range(4):
    Image.fromarray(images[j], "L").save(f"one_class/Bag/{j}.png")
    Image.fromarray(images[j], "L").save(f"with_empty/Bag/{j}.png")
    Image.fromarray(images[4 + j], "L").save(f"with_empty/Coat/{j}.png")
PY

. "$here/example_jobs.sh"
run() { run_job "$example" "$@"; }  # run NAME NP ARGS...

check_accuracy() {  # check_accuracy NAME BAR: NAME's test accuracy is at least BAR
  local got
  got=$(json_value "$1.json" accuracy)
  at_least "$got" "$2" || { echo "$1: test accuracy $got, expected at least $2"; exit 1; }
  echo "$1: test accuracy $got (bar $2)"
}

run sync 3 --ps_tasks=1 --mode=sync --train=train --test=test --train_steps=300 \
  --moving_average_decay=0.99 --checkpoint_dir=checkpoints --metrics_json=sync.json \
  || { echo "the sync-mode job failed"; exit 1; }
grep -q "^images: 2 workers, 3000 images of \[28, 28, 1\] in 10 classes, global step 300," sync.log \
  || { echo "sync: not every image was read, or not as 28x28 grey"; exit 1; }
check_accuracy sync 0.80

# One folder, a fifth held out to evaluate on (Keras's validation_split): 2400 to train on.
run split 3 --ps_tasks=1 --mode=sync --train=train --validation_split=0.2 --train_steps=300 \
  --metrics_json=split.json || { echo "the validation-split job failed"; exit 1; }
grep -q "^images: 2 workers, 2400 images of \[28, 28, 1\] in 10 classes, global step 300," split.log \
  || { echo "split: not 2400 training images"; exit 1; }
check_accuracy split 0.80

# The trained model back from its checkpoint, classifying new pictures.
bags=$(ls test/Bag | wc -l)
run predict 1 --train=train --test=test --train_steps=300 --checkpoint_dir=checkpoints \
  --moving_average_decay=0.99 --predict=test/Bag --predictions=predictions.csv \
  || { echo "the prediction run failed"; exit 1; }
grep -q "^restored from checkpoints at global step 300" predict.log \
  || { echo "predict: the checkpoint was not restored"; exit 1; }
trained=$(grep -o "global step 300, test loss .*" sync.log)
grep -qF "1 worker, 3000 images of [28, 28, 1] in 10 classes, $trained" predict.log \
  || { echo "predict: the restored model does not score as the trained one did ($trained)"; exit 1; }
grep -q "^images: $bags predictions written to predictions.csv" predict.log \
  || { echo "predict: not one prediction per image"; exit 1; }
called_bag=$(grep -c "^test/Bag/[0-9]*\.\(png\|jpg\),Bag,0\?[.0-9e-]*$" predictions.csv || true)
(( called_bag * 10 >= bags * 8 )) || { echo "predict: $called_bag of $bags bags called Bag"; exit 1; }
echo "predict: $called_bag of $bags bags called Bag"

run resized 2 --mode=allreduce --train=train --test=test --train_steps=300 --height=32 --width=32 \
  --channels=3 --horizontal_flip --class_weights=balanced --metrics_json=resized.json \
  || { echo "the resized allreduce job failed"; exit 1; }
grep -q "^images: 2 workers, 3000 images of \[32, 32, 3\] in 10 classes, global step 300," resized.log \
  || { echo "resized: the images were not read as 32x32 RGB"; exit 1; }
check_accuracy resized 0.80
# Balanced class weights, n / (10 n_c) over the whole training folder, though each worker reads
# its part.
weights=$(/usr/bin/python3 -c 'import os; n = [len(os.listdir("train/" + c)) for c in sorted(os.listdir("train"))]; print(" ".join("%.4g" % (sum(n) / (len(n) * k)) for k in n))')
grep -qxF "class weights: $weights" resized.log || { echo "resized: the class weights are not $weights"; exit 1; }

# The same run with the training images decoded as batches take them: the same batches, so the
# same model to the last digit printed.
run on_use 2 --mode=allreduce --train=train --test=test --train_steps=300 --height=32 --width=32 \
  --channels=3 --horizontal_flip --class_weights=balanced --decode_on_use \
  || { echo "the decode-on-use job failed"; exit 1; }
grep -q "^images: 2 workers, 3000 images of \[32, 32, 3\] in 10 classes (decoded on use), " on_use.log \
  || { echo "on_use: the images were not decoded on use"; exit 1; }
[[ $(grep -o "global step 300, test loss.*" on_use.log) == $(grep -o "global step 300, test loss.*" resized.log) ]] \
  || { echo "decoded on use, the run ended elsewhere than with the images in memory"; exit 1; }

# The second block's convolution separable (depthwise 3x3, then 1x1): the same bar.
run separable 2 --mode=allreduce --train=train --test=test --train_steps=300 --conv=separable \
  --metrics_json=separable.json || { echo "the separable-convolution job failed"; exit 1; }
check_accuracy separable 0.80

# expect_failure NAME REGEX WORKERS ARGS...: 3 workers in allreduce mode; the job fails within
# seconds, each worker in WORKERS saying REGEX in one line.
expect_failure() { expect_job_failure "$example" "$@"; }
expect_failure missing "missing: no such folder" "0 1 2" --train=missing
# Sorted by class, then name, broken/Coat/2.png is image 6 of 8: worker 0's of 3.
expect_failure broken "broken/Coat/2\.png: PNG: .*" "0" --train=broken
# Found before training (a step count no test could wait for says so), not after it.
expect_failure predict_missing "--predict=nothing\.png: no such file or folder" "0" --train=small \
  --predict=nothing.png --train_steps=100000000 --batch_size=4
echo "not an image" > notes.txt
expect_failure predict_not_image "--predict=notes\.txt: not a \.png, \.jpg or \.jpeg file" "0" --train=small \
  --predict=small/Bag/0.png,notes.txt --train_steps=100000000 --batch_size=4
expect_failure extra_class "extra_class: subfolder Hat is not one of the 10 classes given \(.*\)" "0" \
  --train=train --test=extra_class --train_steps=100000000
expect_failure one_class "--train=one_class: one class \(Bag\): a classifier needs two or more" "0 1 2" \
  --train=one_class
# A class subfolder without images is a class no example trains: said, and the job goes on.
run with_empty 1 --train=with_empty --train_steps=2 --batch_size=4 || { echo "the job with an empty class failed"; exit 1; }
grep -q "warning: with_empty: 1 class subfolder without images (Hat): classes no example trains$" with_empty.log \
  && grep -q "^images: 1 worker, 8 images of \[28, 28, 1\] in 3 classes, " with_empty.log \
  || { echo "with_empty: no warning of the empty class Hat, or not 3 classes"; exit 1; }
# A job resumed on other classes (as many, named otherwise) is refused: the logits would mean
# other things.
run small_first 1 --train=small --train_steps=2 --batch_size=4 --checkpoint_dir=small_ckpt \
  || { echo "the job on the small folder failed"; exit 1; }
rm -rf renamed && cp -r small renamed && mv renamed/Coat renamed/Dress
expect_failure renamed_classes "small_ckpt, global step 2: its parameters were trained with classes=Bag,Coat, this job has classes=Bag,Dress: give the same .*" \
  "0" --train=renamed --train_steps=4 --batch_size=4 --checkpoint_dir=small_ckpt
echo "image folder test passed: sync $(json_value sync.json accuracy), resized allreduce $(json_value resized.json accuracy)"
