#!/usr/bin/env bash
# Images out, on several workers (apps/examples/denoise.cc): a U-Net trained to remove Gaussian
# noise (standard deviation 0.3) from Fashion-MNIST images,
# - in allreduce mode on 2 workers and in sync mode on 1 ps + 2 workers, 300 steps each: the
#   test error must fall below 0.3 of the noisy inputs' own (measured 0.2; a 3x3 median filter
#   leaves 0.46 of it, a 3x3 mean 0.54);
# - its --predictions (the outputs for the 2000 test images) score the test error the job printed
#   against the clean images (to 1e-3 of it);
# - image pairs of its own (inputs and targets of other channels: an image and its mask) train
#   with sigmoid cross-entropy (98% of the pixels right) and with the Dice loss (a mean Dice
#   coefficient of the predicted masks above 0.9), and predict probabilities;
# - the same pairs, and clean images, from HDF5 files give the same runs to the last digit;
# - images whose size the model cannot halve twice, pairs that do not match, pairs to train on
#   beside clean images to test on, values outside
#   [0, 1] where the loss needs them there, and images in PyTorch's layout are refused in one
#   line.
#
#   denoise_test.sh DENOISE MPIEXEC NP_FLAG WORKDIR DATA_DIR
set -euo pipefail
denoise=$1 mpiexec=$2 np_flag=$3 work=$4 data_dir=$5
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../support/skip.sh"
/usr/bin/python3 -c "import numpy, h5py" 2>/dev/null ||
  skip "/usr/bin/python3 cannot import numpy and h5py" "install python3-numpy python3-h5py"
rm -rf "$work" && mkdir -p "$work"
cd "$work"
. "$here/example_jobs.sh"

# The test error, and the noisy inputs' own, from the job's last line.
errors() { sed -nE 's/.*test mean_squared_error ([0-9.]+) \(the inputs. own: ([0-9.]+)\)$/\1 \2/p' "$1.log"; }
check_denoised() {  # check_denoised NAME
  local line
  line=$(errors "$1")
  [[ -n $line ]] || { echo "$1: no test error printed"; exit 1; }
  read -r error own <<< "$line"
  echo "$1: test error $error, the noisy inputs' $own"
  /usr/bin/python3 -c "import sys; sys.exit(0 if $error < 0.3 * $own else 1)" \
    || { echo "$1: the test error $error is not below 0.3 of the inputs' $own"; exit 1; }
}

run_job "$denoise" allreduce 2 --mode=allreduce --predictions=allreduce.npy \
  || { echo "the allreduce job failed"; exit 1; }
check_denoised allreduce
grep -q "^denoise: 2 workers, [0-9]* parameters, global step 300, " allreduce.log \
  || { echo "allreduce: not 2 workers to step 300"; exit 1; }
PYTHONPATH="$here/../support" /usr/bin/python3 - "$data_dir" "$(errors allreduce | cut -d' ' -f1)" <<'PY' || exit 1
import sys
import numpy as np
from fashion_mnist import first
images, _ = first(sys.argv[1], "t10k", 2000)
clean = (images / 255.0).astype(np.float32).reshape(2000, 28, 28, 1)
predicted = np.load("allreduce.npy")
if predicted.shape != clean.shape:
    sys.exit(f"allreduce: predictions of shape {predicted.shape}, expected {clean.shape}")
error, printed = float(np.mean((predicted - clean) ** 2)), float(sys.argv[2])
print(f"allreduce: the predictions' error {error:.5f}, the job's {printed:.5f}")
sys.exit(0 if abs(error - printed) <= 1e-3 * printed else "allreduce: the predictions do not score the job's test error")
PY

run_job "$denoise" sync 3 --ps_tasks=1 --mode=sync || { echo "the sync job failed"; exit 1; }
check_denoised sync
grep -q "^denoise: 2 workers, [0-9]* parameters, global step 300, " sync.log \
  || { echo "sync: not 2 workers to step 300"; exit 1; }

# Pairs of its own: 16x16 images of a bright square on noise, 3 channels, and the square's mask.
/usr/bin/python3 - <<'PY'
import numpy as np
rng = np.random.default_rng(3)
for split, n in (("train", 2000), ("test", 400)):
    images = rng.uniform(0, 0.5, size=(n, 16, 16, 3)).astype(np.float32)
    masks = np.zeros((n, 16, 16), np.float32)
    for i in range(n):
        y, x, s = rng.integers(0, 10), rng.integers(0, 10), rng.integers(3, 7)
        images[i, y:y + s, x:x + s, :] += 0.5
        masks[i, y:y + s, x:x + s] = 1.0
    np.save(f"squares_{split}.npy", images)
    np.save(f"masks_{split}.npy", masks)
np.save("odd_size.npy", np.zeros((10, 18, 16), np.float32))
np.save("small.npy", np.zeros((2000, 8, 8, 3), np.float32))
np.save("channels_first.npy", np.zeros((10, 3, 16, 16), np.float32))  # PyTorch's layout
np.save("bytes.npy", np.full((10, 16, 16), 255, np.uint8))
np.save("mask_bytes.npy", (np.load("masks_train.npy") * 255).astype(np.uint8))
PY
run_job "$denoise" masks 2 --train=squares_train.npy,masks_train.npy --test=squares_test.npy,masks_test.npy \
  --loss=sigmoid_cross_entropy --predictions=masks.npy || { echo "the mask job failed"; exit 1; }
/usr/bin/python3 - <<'PY' || exit 1
import sys
import numpy as np
p, masks = np.load("masks.npy"), np.load("masks_test.npy")[..., None]
if p.shape != masks.shape or p.min() < 0 or p.max() > 1:
    sys.exit(f"masks: predictions of shape {p.shape} in [{p.min()}, {p.max()}], expected probabilities {masks.shape}")
right = float(np.mean((p > 0.5) == (masks > 0.5)))
print(f"masks: {right:.4f} of the pixels classed right")
sys.exit(0 if right > 0.98 else "masks: fewer than 98% of the pixels right")
PY
# The same pairs, and the squares alone as clean images, from an HDF5 file (h5py's, in a group):
# the same runs to the last digit.
/usr/bin/python3 - <<'PY'
import h5py
import numpy as np
for split in ("train", "test"):
    with h5py.File(f"squares_{split}.h5", "w") as f:
        f.create_dataset("scans/images", data=np.load(f"squares_{split}.npy"), compression="gzip")
        f.create_dataset("scans/masks", data=np.load(f"masks_{split}.npy").astype(np.uint8))
PY
run_job "$denoise" masks_h5 2 --train=squares_train.h5 --test=squares_test.h5 --hdf5_inputs=scans/images \
  --hdf5_targets=scans/masks --loss=sigmoid_cross_entropy || { echo "the HDF5 mask job failed"; exit 1; }
loss() { sed -nE 's/.*(global step .*)/\1/p' "$1.log" | head -1; }
[[ -n $(loss masks) && $(loss masks_h5) == "$(loss masks)" ]] \
  || { echo "masks_h5: '$(loss masks_h5)', where the .npy files gave '$(loss masks)'"; exit 1; }
run_job "$denoise" clean_npy 2 --train=masks_train.npy --test=masks_test.npy --train_steps=50 \
  || { echo "the clean .npy job failed"; exit 1; }
/usr/bin/python3 -c "
import h5py, numpy as np
for split in ('train', 'test'):
    with h5py.File(f'masks_{split}.h5', 'w') as f:
        f['x'] = np.load(f'masks_{split}.npy')"
run_job "$denoise" clean_h5 2 --train=masks_train.h5 --test=masks_test.h5 --train_steps=50 \
  || { echo "the clean HDF5 job failed"; exit 1; }
[[ -n $(loss clean_npy) && $(loss clean_h5) == "$(loss clean_npy)" ]] \
  || { echo "clean_h5: '$(loss clean_h5)', where the .npy file gave '$(loss clean_npy)'"; exit 1; }

# The same masks by the Dice loss: each image's overlap, whatever the square's share of it.
run_job "$denoise" dice 2 --train=squares_train.npy,masks_train.npy --test=squares_test.npy,masks_test.npy \
  --loss=dice --predictions=dice.npy || { echo "the Dice job failed"; exit 1; }
/usr/bin/python3 - <<'PY' || exit 1
import sys
import numpy as np
p, masks = np.load("dice.npy"), np.load("masks_test.npy")[..., None] > 0.5
predicted = p > 0.5
dice = np.mean(2 * (predicted & masks).sum(axis=(1, 2, 3)) / (predicted.sum(axis=(1, 2, 3)) + masks.sum(axis=(1, 2, 3))))
print(f"dice: the predicted masks' mean Dice coefficient {dice:.4f}")
sys.exit(0 if dice > 0.9 else "dice: a mean Dice coefficient below 0.9")
PY

expect_job_failure "$denoise" odd_size \
  "--train=odd_size.npy: images of 18x16; the model halves them twice, so their height and width must be multiples of 4" \
  "0 1 2" --train=odd_size.npy --test=odd_size.npy
expect_job_failure "$denoise" no_test "--train=masks_train.npy without --test: give the test images too" \
  "0 1 2" --train=masks_train.npy
expect_job_failure "$denoise" other_forms \
  "--test=masks_test.npy and --train=squares_train.npy,masks_train.npy: not in the same form \(clean images, or inputs and targets\); give both alike" \
  "0 1 2" --train=squares_train.npy,masks_train.npy --test=masks_test.npy
expect_job_failure "$denoise" unmatched \
  "squares_test.npy: features \[400, 16, 16, 3\] and targets masks_train.npy \[2000, 16, 16\] differ in their first dimension: 400 vs 2000 examples" \
  "0 1 2" --train=squares_test.npy,masks_train.npy --test=squares_test.npy,masks_test.npy
expect_job_failure "$denoise" other_size \
  "--train=small.npy,masks_train.npy: images of 8x8 and targets of 16x16: the model's output is of its input's size" \
  "0 1 2" --train=small.npy,masks_train.npy --test=squares_test.npy,masks_test.npy
# Values a loss cannot take: clean images of bytes, and masks of 0 and 255 for sigmoid cross-entropy.
expect_job_failure "$denoise" bytes \
  "--train=bytes.npy: image [0-9] holds 255.000000, not a value in \[0, 1\] \(scale the images: bytes / 255\)" \
  "0 1 2" --train=bytes.npy --test=bytes.npy
expect_job_failure "$denoise" mask_bytes \
  "--train=mask_bytes.npy: image [0-9]+ holds 255.000000, not a value in \[0, 1\] \(scale the images: bytes / 255\)" \
  "0 1 2" --train=squares_train.npy,mask_bytes.npy --test=squares_test.npy,masks_test.npy --loss=sigmoid_cross_entropy
expect_job_failure "$denoise" channels_first \
  "--train=channels_first.npy: images of \[3, 16, 16\] look channels-first \(\[channels, height, width\], PyTorch's layout\), where Cohort's are \[height, width, channels\]: save them as numpy's x.transpose\(0, 2, 3, 1\)" \
  "0 1 2" --train=channels_first.npy --test=channels_first.npy
# HDF5 dataset names with no HDF5 file: Fashion-MNIST would have been trained on in their place.
expect_job_failure "$denoise" hdf5_no_file "--hdf5_targets=masks: for an HDF5 file, and --train= gives none" \
  "0 1 2" --hdf5_targets=masks --train_steps=5
echo "denoise test passed"
