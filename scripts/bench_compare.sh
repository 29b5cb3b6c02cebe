#!/usr/bin/env bash
# Cohort against PyTorch on the same machine in the same run: training throughput of the
# built-in models (forward, backward, SGD update; batch 64 by default), the two programs
# alternating for several rounds so that both meet the same machine; medians per model.
# PyTorch runs both in its default layout (NCHW) and channels-last (NHWC, Cohort's layout); the
# ratio is against the faster of the two.
#
#   scripts/bench_compare.sh [--models resnet,cnn] [--threads 1] [--rounds 5] [--seconds 4]
#
# PyTorch is /usr/bin/python3's torch (Debian: python3-torch). Debian's torch uses reference BLAS
# for its matrix products unless given OpenBLAS: the script puts OpenBLAS's OpenMP build first
# on LD_LIBRARY_PATH when it is installed (libopenblas0-openmp). Set OPENBLAS_CORETYPE (e.g.
# SkylakeX) where OpenBLAS 0.3.21 misdetects the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
models=resnet threads=1 rounds=5 seconds=4 batch=64
while (($#)); do
  case $1 in
    --models) models=$2 ;;
    --threads) threads=$2 ;;
    --rounds) rounds=$2 ;;
    --seconds) seconds=$2 ;;
    --batch_size) batch=$2 ;;
    *) echo "bench_compare.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift 2
done
openmp_blas=/usr/lib/x86_64-linux-gnu/openblas-openmp
[ -d "$openmp_blas" ] && export LD_LIBRARY_PATH="$openmp_blas${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores," \
     "$(grep -qw avx512f /proc/cpuinfo && echo AVX-512 || echo 'no AVX-512'); load $(cut -d' ' -f1 /proc/loadavg)"
for ((r = 1; r <= rounds; r++)); do
  build/bin/bench_train --models="$models" --threads="$threads" --batch_size="$batch" \
      --seconds="$seconds" --windows=3 2>/dev/null |
    awk '!/^#/ && NR > 1 && $1 != "model" {print "cohort", $1, $4}' >> "$out"
  for layout in "" --channels_last; do
    /usr/bin/python3 scripts/bench_pytorch.py --models "$models" --threads "$threads" \
        --batch_size "$batch" --seconds "$seconds" $layout 2>/dev/null |
      awk -v l="${layout:+channels_last}" '{print (l == "" ? "pytorch" : "pytorch_cl"), $1, $(NF-1)}' >> "$out"
  done
done
/usr/bin/python3 - "$out" "$threads" "$batch" "$rounds" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    who, model, rate = line.split()
    rows.setdefault(model, {}).setdefault(who, []).append(float(rate))
print(f"threads {sys.argv[2]}, batch {sys.argv[3]}, {sys.argv[4]} alternating rounds, medians (images/s)")
print("| model | Cohort | PyTorch NCHW | PyTorch channels-last | Cohort / best PyTorch |")
print("|---|---:|---:|---:|---:|")
for model, r in rows.items():
    med = {k: statistics.median(v) for k, v in r.items()}
    best = max(med.get("pytorch", 0), med.get("pytorch_cl", 0))
    ratio = f"{med['cohort'] / best:.2f}x" if best and "cohort" in med else "-"
    print(f"| {model} | {med.get('cohort', 0):,.0f} | {med.get('pytorch', 0):,.0f} | "
          f"{med.get('pytorch_cl', 0):,.0f} | {ratio} |")
PY
