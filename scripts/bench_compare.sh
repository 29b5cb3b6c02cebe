#!/usr/bin/env bash
# Cohort against PyTorch on the same machine in the same run: training throughput of the
# built-in models (forward, backward, SGD update; batch 64 by default), the two programs
# alternating for several rounds so that both meet the same machine; medians per model.
# PyTorch runs both in its default layout (NCHW) and channels-last (NHWC, Cohort's layout); the
# ratio is against the faster of the two. The last column is the ratio Cohort would reach if its
# step were nothing but its own matrix products (bench_train's "products only", one thread): where
# the ratio comes near it, the libraries' products, not the rest of the step, set the limit.
#
#   scripts/bench_compare.sh [--models resnet,cnn] [--threads 1] [--rounds 5] [--seconds 4]
#                            [--level x86-64-v3] [--bench_train build/bin/bench_train]
#
# --level caps both sides at one x86-64 level, e.g. the AVX2 class on an AVX-512 machine:
# Cohort's kernels with COHORT_CPU_LEVEL, PyTorch's with ONEDNN_MAX_CPU_ISA (AVX2 for x86-64-v3,
# SSE41 for x86-64-v2), and both sides' OpenBLAS with OPENBLAS_CORETYPE (Haswell, Nehalem) unless
# it is set. The table's first lines say what ran.
#
# PyTorch is /usr/bin/python3's torch (Debian: python3-torch). Debian's torch uses reference BLAS
# for its matrix products unless given OpenBLAS: the script puts OpenBLAS's OpenMP build first
# on LD_LIBRARY_PATH when it is installed (libopenblas0-openmp). Set OPENBLAS_CORETYPE (e.g.
# SkylakeX) where OpenBLAS 0.3.21 misdetects the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
models=resnet threads=1 rounds=5 seconds=4 batch=64 bench_train=build/bin/bench_train level=""
while (($#)); do
  case $1 in
    --models) models=$2 ;;
    --threads) threads=$2 ;;
    --rounds) rounds=$2 ;;
    --seconds) seconds=$2 ;;
    --batch_size) batch=$2 ;;
    --bench_train) bench_train=$2 ;;
    --level) level=$2 ;;
    *) echo "bench_compare.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift 2
done
case $level in
  "") ;;
  x86-64-v4) export COHORT_CPU_LEVEL=$level ONEDNN_MAX_CPU_ISA=AVX512_CORE ;;
  x86-64-v3) export COHORT_CPU_LEVEL=$level ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell} ;;
  x86-64-v2) export COHORT_CPU_LEVEL=$level ONEDNN_MAX_CPU_ISA=SSE41 OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Nehalem} ;;
  *) echo "bench_compare.sh: --level $level: expected x86-64-v2, x86-64-v3 or x86-64-v4" >&2; exit 2 ;;
esac
/usr/bin/python3 -c "import torch" 2>/dev/null ||
  { echo "bench_compare.sh: /usr/bin/python3 cannot import torch (Debian: python3-torch)" >&2; exit 1; }
openmp_blas=/usr/lib/x86_64-linux-gnu/openblas-openmp
[ -d "$openmp_blas" ] && export LD_LIBRARY_PATH="$openmp_blas${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
# glibc hands big blocks out by mmap and returns them on free, until a free raises its threshold:
# PyTorch, which allocates its activations every step, then pays page faults (resnet alone ran
# at 515-580 images/s with a fifth of its time in the kernel, 675-695 after other models had
# raised the threshold). A fixed threshold gives it the fast case every time; Cohort allocates
# nothing in its steady state.
export MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=1073741824
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc --all) cores," \
     "$(grep -qw avx512f /proc/cpuinfo && echo AVX-512 || echo 'no AVX-512')${ONEDNN_MAX_CPU_ISA:+, PyTorch capped at $ONEDNN_MAX_CPU_ISA}${OPENBLAS_CORETYPE:+, OpenBLAS as $OPENBLAS_CORETYPE}; load $(cut -d' ' -f1 /proc/loadavg)"
for ((r = 1; r <= rounds; r++)); do
  "$bench_train" --models="$models" --threads="$threads" --batch_size="$batch" \
      --seconds="$seconds" --windows=3 2>/dev/null |
    awk '/^# CPU kernels/ {sub(/^# /, ""); print "kernels", $0}
         !/^#/ && NR > 1 && $1 != "model" {print "cohort", $1, $4
                                           if ($9 != "-") print "products", $1, $9}' >> "$out"
  for layout in "" --channels_last; do
    /usr/bin/python3 scripts/bench_pytorch.py --models "$models" --threads "$threads" \
        --batch_size "$batch" --seconds "$seconds" $layout 2>/dev/null |
      awk -v l="${layout:+channels_last}" '{print (l == "" ? "pytorch" : "pytorch_cl"), $1, $(NF-1)}' >> "$out"
  done
done
/usr/bin/python3 - "$out" "$threads" "$batch" "$rounds" <<'PY'
import statistics, sys
rows = {}
kernels = set()
for line in open(sys.argv[1]):
    if line.startswith("kernels "):
        kernels.add(line.split(" ", 1)[1].strip())
        continue
    who, model, rate = line.split()
    rows.setdefault(model, {}).setdefault(who, []).append(float(rate))
for k in sorted(kernels):
    print(f"# Cohort: {k}")
print(f"threads {sys.argv[2]}, batch {sys.argv[3]}, {sys.argv[4]} alternating rounds: "
      "images/s, median (lowest - highest round)")
print("| model | Cohort | PyTorch NCHW | PyTorch channels-last | Cohort / best PyTorch "
      "| products only / best PyTorch |")
print("|---|---:|---:|---:|---:|---:|")
def cell(v):
    return f"{statistics.median(v):,.0f} ({min(v):,.0f} - {max(v):,.0f})" if v else "-"
for model, r in rows.items():
    med = {k: statistics.median(v) for k, v in r.items()}
    best = max(med.get("pytorch", 0), med.get("pytorch_cl", 0))
    ratio = f"{med['cohort'] / best:.2f}x" if best and "cohort" in med else "-"
    bound = f"{med['products'] / best:.2f}x" if best and "products" in med else "-"
    print(f"| {model} | {cell(r.get('cohort'))} | {cell(r.get('pytorch'))} | "
          f"{cell(r.get('pytorch_cl'))} | {ratio} | {bound} |")
PY
