#!/usr/bin/env bash
# One binary from the default build on older CPUs: a short training under user-mode emulation
# (qemu-user) of an AVX2-only CPU (Haswell, x86-64-v3), which must pick the AVX2 kernels, and of
# an x86-64-v2 CPU (Nehalem, SSE4.2), which must run with nothing refused.
# Usage: cpu_emulation_test.sh TRAIN
# Without qemu-x86_64 it prints "SKIP: ..." and exits 77; with COHORT_REQUIRE_TESTS=1 (CI) that
# is a failure instead.
set -euo pipefail
train=$1
if ! qemu=$(command -v qemu-x86_64); then
  if [[ ${COHORT_REQUIRE_TESTS:-0} == 1 ]]; then
    echo "error: qemu-x86_64 not found (Debian: qemu-user), and COHORT_REQUIRE_TESTS=1 asks for this test" >&2
    exit 1
  fi
  echo "SKIP: qemu-x86_64 not found (install qemu-user to run this test)"
  exit 77
fi
steps=20
for cpu in Haswell:x86-64-v3 Nehalem:x86-64-v2; do
  model=${cpu%%:*} level=${cpu##*:}
  echo "== emulated $model, expecting kernels $level"
  # qemu warns about CPU features its emulation leaves out (virtualisation-only ones).
  out=$("$qemu" -cpu "$model" "$train" --mode=local --model=mlp --hidden=32 --train_steps=$steps \
          --lr_schedule=constant --log_every_steps=0 --print_cluster=false 2>&1 |
        grep -v "TCG doesn't support requested feature") || { echo "$out"; echo "error: train failed on $model" >&2; exit 1; }
  echo "$out"
  grep -q "^CPU kernels $level " <<<"$out" || { echo "error: $model did not run the $level kernels" >&2; exit 1; }
  grep -q "^final: global step $steps, test accuracy" <<<"$out" || { echo "error: no final line on $model" >&2; exit 1; }
done
# The convolution kernels of the AVX2 level too (direct first layer, Winograd second): a few
# steps of small_cnn on the emulated Haswell, most of its 40 s the test-set evaluation.
echo "== emulated Haswell, small_cnn"
out=$("$qemu" -cpu Haswell "$train" --mode=local --model=small_cnn --batch_size=16 --train_steps=3 \
        --lr_schedule=constant --log_every_steps=0 --print_cluster=false 2>&1 |
      grep -v "TCG doesn't support requested feature") || { echo "$out"; echo "error: small_cnn failed on Haswell" >&2; exit 1; }
echo "$out"
grep -q "^final: global step 3, test accuracy" <<<"$out" || { echo "error: no final line for small_cnn on Haswell" >&2; exit 1; }
