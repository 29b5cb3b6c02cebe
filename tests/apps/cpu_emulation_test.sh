#!/usr/bin/env bash
# One binary from the default build on older CPUs: a short training under user-mode emulation
# (qemu-user) of an AVX2-only CPU (Haswell, x86-64-v3), which must pick the AVX2 kernels, and of
# an x86-64-v2 CPU (Nehalem, SSE4.2), which must run with nothing refused.
# Usage: cpu_emulation_test.sh TRAIN
# Without qemu-x86_64 it prints "SKIP: ..." and exits 77; with COHORT_REQUIRE_TESTS=1 (CI) that
# is a failure instead.
set -euo pipefail
train=$1
. "$(dirname "$0")/../support/skip.sh"
qemu=$(command -v qemu-x86_64) || skip "qemu-x86_64 not found" "install qemu-user to run this test"
# OpenBLAS's kernels as the emulated CPU calls for them: a machine's own choice in the environment
# (OPENBLAS_CORETYPE=Haswell where OpenBLAS does not know the host CPU) would be an AVX2 kernel on
# an emulated CPU without AVX.
unset OPENBLAS_CORETYPE
# The first 256 images of each Fashion-MNIST file: emulated AVX2 runs hundreds of times slower than
# the CPU, and on some hosts the whole test set alone took minutes.
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
source_dir=/usr/share/datasets/fashion-mnist  # train's default --data_dir
# first_records FILE.gz HEADER_BYTES BYTES: the first BYTES after the header (head's early exit
# stops gzip with SIGPIPE, which is not an error here).
first_records() {
  [[ -r $1 ]] || { echo "error: $1 not found (Debian: dataset-fashion-mnist)" >&2; exit 1; }
  gzip -dc "$1" | tail -c +$(($2 + 1)) | head -c "$3" || true
}
for prefix in train t10k; do
  # IDX headers, big-endian: magic, count (256), and for the images 28 x 28.
  { printf '\0\0\10\3\0\0\1\0\0\0\0\34\0\0\0\34'
    first_records "$source_dir/$prefix-images-idx3-ubyte.gz" 16 $((256 * 784)); } \
    > "$data/$prefix-images-idx3-ubyte"
  { printf '\0\0\10\1\0\0\1\0'
    first_records "$source_dir/$prefix-labels-idx1-ubyte.gz" 8 256; } \
    > "$data/$prefix-labels-idx1-ubyte"
done
steps=20
for cpu in Haswell:x86-64-v3 Nehalem:x86-64-v2; do
  model=${cpu%%:*} level=${cpu##*:}
  echo "== emulated $model, expecting kernels $level"
  # qemu warns about CPU features its emulation leaves out (virtualisation-only ones).
  out=$("$qemu" -cpu "$model" "$train" --data_dir="$data" --mode=local --model=mlp --hidden=32 \
          --train_steps=$steps --lr_schedule=constant --log_every_steps=0 --print_cluster=false 2>&1 |
        grep -v "TCG doesn't support requested feature") || { echo "$out"; echo "error: train failed on $model" >&2; exit 1; }
  echo "$out"
  grep -q "^CPU kernels $level " <<<"$out" || { echo "error: $model did not run the $level kernels" >&2; exit 1; }
  grep -q "^final: global step $steps, test accuracy" <<<"$out" || { echo "error: no final line on $model" >&2; exit 1; }
done
# The convolution kernels of the AVX2 level too (direct first layer, Winograd second): a few
# steps of small_cnn on the emulated Haswell.
echo "== emulated Haswell, small_cnn"
out=$("$qemu" -cpu Haswell "$train" --data_dir="$data" --mode=local --model=small_cnn --batch_size=16 \
        --train_steps=3 --lr_schedule=constant --log_every_steps=0 --print_cluster=false 2>&1 |
      grep -v "TCG doesn't support requested feature") || { echo "$out"; echo "error: small_cnn failed on Haswell" >&2; exit 1; }
echo "$out"
grep -q "^final: global step 3, test accuracy" <<<"$out" || { echo "error: no final line for small_cnn on Haswell" >&2; exit 1; }
