#!/usr/bin/env bash
# example_residual_npy on images in PyTorch's layout: the .npy files the example_residual_npy test
# wrote ([n, 28, 28, 1]) saved again as [n, 1, 28, 28] train, with --channels_first, to the same
# last line as the originals, 20 steps on one worker; without the flag they are refused in one
# line that names it.
#
#   residual_npy_channels_first_test.sh RESIDUAL_NPY MPIEXEC NP_FLAG FIXTURE_PREFIX WORKDIR
set -euo pipefail
residual=$1 mpiexec=$2 np_flag=$3 fixture=$4 work=$5
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../support/skip.sh"
/usr/bin/python3 -c "import numpy" 2>/dev/null || skip "/usr/bin/python3 cannot import numpy" "install python3-numpy"
rm -rf "$work" && mkdir -p "$work"
cd "$work"
/usr/bin/python3 -c "
import numpy as np, sys
for split in ('train', 'test'):
    np.save(f'{split}_nchw.npy', np.load(f'{sys.argv[1]}/{split}_x.npy').transpose(0, 3, 1, 2))" "$fixture"
. "$here/example_jobs.sh"
common=(--train_steps=20 --train_labels="$fixture/train_y.npy" --test_labels="$fixture/test_y.npy")
run_job "$residual" nhwc 1 "${common[@]}" --train_features="$fixture/train_x.npy" --test_features="$fixture/test_x.npy" \
  || { echo "the channels-last job failed"; exit 1; }
run_job "$residual" nchw 1 "${common[@]}" --train_features=train_nchw.npy --test_features=test_nchw.npy --channels_first \
  || { echo "the channels-first job failed"; exit 1; }
[[ -n $(tail -1 nhwc.log) && $(tail -1 nchw.log) == "$(tail -1 nhwc.log)" ]] \
  || { echo "channels-first: '$(tail -1 nchw.log)', where channels-last gave '$(tail -1 nhwc.log)'"; exit 1; }
expect_job_failure "$residual" unsaid \
  "--train_features=train_nchw.npy: images of \[1, 28, 28\] look channels-first \(\[channels, height, width\], PyTorch's layout\), where Cohort's are \[height, width, channels\]: give --channels_first to turn them" \
  "0 1 2" "${common[@]}" --train_features=train_nchw.npy --test_features=test_nchw.npy
echo "channels-first test passed"
