#!/usr/bin/env bash
# The GPU check, one command on a machine with an NVIDIA GPU and Cohort's build dependencies:
#
#   scripts/gpu_check.sh [TABLE_FILE]        # default: build-gpu/gpu_check.md
#
# 1. builds Release with the GPU backend required, for sm_90 (CUDA_ARCHS=... for another GPU);
# 2. runs the `gpu` tests, where a skip is a failure (COHORT_REQUIRE_GPU=1): every op's GPU path
#    and the mlp and cnn, forward and backward, against the CPU path (they print the errors they
#    measured);
# 3. times mlp and cnn training steps on GPU 0 at batch 64 and 256 (bench_train --device=gpu);
# 4. where python3 has torch with CUDA, times the same models in PyTorch on the same GPU;
# and writes the parity lines and a Cohort-vs-PyTorch table to TABLE_FILE. Each stage has a time
# limit; the whole check takes about 3 to 5 minutes on a 16-core host.
set -euo pipefail
cd "$(dirname "$0")/.."

build=${COHORT_GPU_BUILD_DIR:-build-gpu}
archs=${CUDA_ARCHS:-90}
table=${1:-$build/gpu_check.md}
seconds=${BENCH_SECONDS:-4}
mkdir -p "$build" "$(dirname "$table")"
log="$build/gpu_check.log"
: >"$log"
started=$SECONDS

say() { echo "gpu_check: $*" | tee -a "$log" >&2; }
fail() { say "$*"; exit 1; }

nvidia-smi -L >>"$log" 2>&1 || fail "no NVIDIA GPU here (nvidia-smi -L failed)"
gpu_name=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n 1)
say "GPU: $gpu_name"

say "building ($build, sm_$archs) ..."
timeout 240 cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCOHORT_WITH_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="$archs" >>"$log" 2>&1 || fail "configure failed: see $log"
timeout 300 cmake --build "$build" -j "$(env -u OMP_NUM_THREADS nproc)" --target bench_train gpu_device_test \
  gpu_ops_parity_test gpu_model_parity_test >>"$log" 2>&1 || fail "build failed: see $log"
say "built in $((SECONDS - started)) s"

say "gpu tests ..."
tests_ok=yes
# A GPU test that skips here (no device, or one it cannot use) fails instead.
(cd "$build" && COHORT_REQUIRE_GPU=1 timeout 180 ctest -L gpu -V) >"$build/gpu_tests.log" 2>&1 || tests_ok=no
cat "$build/gpu_tests.log" >>"$log"
summary=$(grep -E "tests passed|tests failed" "$build/gpu_tests.log" | tail -n 1 || true)
say "gpu tests: ${summary:-no summary} (tests_ok=$tests_ok)"

cohort_rate() {  # model batch -> images/s from bench_train
  timeout 120 "$build/bin/bench_train" --device=gpu --models="$1" --batch_size="$2" \
    --seconds="$seconds" --windows=5 2>>"$log" | tee -a "$log" |
    awk -v m="$1" '$1 == m { print $4 }'
}
have_torch=no
if timeout 60 python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" \
  >>"$log" 2>&1; then
  have_torch=yes
  torch_version=$(python3 -c "import torch; print(torch.__version__)")
fi
torch_rate() {  # model batch -> images/s from bench_pytorch.py
  timeout 120 python3 scripts/bench_pytorch.py --device cuda --models "$1" --batch_size "$2" \
    --seconds "$seconds" 2>>"$log" | tee -a "$log" | awk '{ print $(NF-1) }'
}

{
  echo "# GPU check, $(date -u +%Y-%m-%d)"
  echo
  echo "GPU: $gpu_name; CUDA architectures: $archs; host: $(nproc) cores."
  echo
  echo "## Parity (gpu tests: ${summary:-no summary})"
  echo
  # Per-op lines ("dense y: relative error E", one per case) become the worst case per op;
  # the whole-model lines are quoted as they are.
  grep -E "MESSAGE: " "$build/gpu_tests.log" | sed 's/^.*MESSAGE: //' |
    awk -F': relative error ' '
      NF == 2 { if (!($1 in worst) || $2 + 0 > worst[$1]) worst[$1] = $2 + 0; next }
      { print "- " $0 }
      END { for (op in worst) printf "- %s: worst relative error %.2g\n", op, worst[op] }' |
    sort -u || true
  echo
  echo "## Training throughput, FP32, images/s (median of 5 windows)"
  echo
  echo "Cohort: bench_train --device=gpu (parameters copied in and gradients out each step, the"
  echo "SGD update on the host, as a GPU tower in train). PyTorch ${torch_version:-absent}: the same"
  echo "models and step, everything on the GPU, TF32 off."
  echo
  echo "| model | batch | Cohort | PyTorch | Cohort / PyTorch |"
  echo "|---|---:|---:|---:|---:|"
} >"$table"

for batch in 64 256; do
  for model in mlp cnn; do
    c=$(cohort_rate "$model" "$batch" || true)
    p="-"
    ratio="-"
    if [ "$have_torch" = yes ]; then
      p=$(torch_rate "$model" "$batch" || true)
      if [ -n "$c" ] && [ -n "$p" ]; then
        ratio=$(awk -v c="$c" -v p="$p" 'BEGIN { printf "%.2fx", c / p }')
      fi
    fi
    echo "| $model | $batch | ${c:-failed} | ${p:-failed} | $ratio |" >>"$table"
    say "$model batch $batch: Cohort ${c:-failed}, PyTorch ${p:-failed} ($ratio)"
  done
done
echo >>"$table"
echo "Whole check: $((SECONDS - started)) s." >>"$table"

cat "$table"
say "table written to $table; log in $log"
[ "$tests_ok" = yes ] || fail "gpu tests failed: see $build/gpu_tests.log"
