#!/usr/bin/env bash
# Histogram summaries end to end (train --summary_histograms): 1 ps task and 2 workers in sync
# mode write summaries at steps 1, 51 and 101 and a final checkpoint at 101; summary_events.py
# parses the event file with the protobuf library and requires the last histograms to be exactly
# what numpy makes of the checkpoint's variables.
#
#   summary_histograms_test.sh TRAIN MPIEXEC NP_FLAG WORKDIR
set -euo pipefail
train=$1 mpiexec=$2 np_flag=$3 work=$4
here=$(dirname "$0")
. "$here/../support/skip.sh"
/usr/bin/python3 -c "import numpy, google.protobuf" 2>/dev/null ||
  skip "/usr/bin/python3 cannot import numpy and google.protobuf" "install python3-numpy python3-protobuf"
rm -rf "$work" && mkdir -p "$work"
timeout 120 "$mpiexec" "$np_flag" 3 --oversubscribe "$train" --print_cluster=false --ps_tasks=1 \
  --mode=sync --model=mlp --train_steps=101 --save_summaries_steps=50 --summary_histograms \
  --checkpoint_dir="$work" --save_checkpoint_steps=50 > "$work/train.log" 2>&1 ||
  { cat "$work/train.log"; echo "the training job failed"; exit 1; }
/usr/bin/python3 "$here/summary_events.py" "$work" "$work/model.ckpt-101.safetensors"
