#!/usr/bin/env bash
# One-core SGEMM of OpenBLAS (what Cohort's ops use), BLIS and oneDNN, on this machine, at the
# CPU's own level and capped at the AVX2 class (x86-64-v3), to check that the GEMM the ops use is
# as good as the best library on each level (docs/BENCHMARKS.md).
#
# Usage: scripts/bench_blas.sh [--rounds N]
# Needs libopenblas-dev; BLIS (libblis-dev) and oneDNN (libdnnl-dev) are measured when installed.
# The cap: OPENBLAS_CORETYPE=Haswell, BLIS_ARCH_TYPE=3 (its haswell sub-configuration),
# ONEDNN_MAX_CPU_ISA=AVX2 -- the same caps scripts/bench_compare.sh --level x86-64-v3 gives.
# Libraries are run alternately, round after round; the table gives each one's median.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3
while (($#)); do
  case $1 in
    --rounds) rounds=$2; shift ;;
    *) echo "bench_blas.sh: unknown argument $1 (expected --rounds N)" >&2; exit 2 ;;
  esac
  shift
done
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 BLIS_NUM_THREADS=1
built=()
cc -O2 scripts/bench_blas.c -o "$dir/openblas" -lopenblas && built+=(openblas)
blis_include=$(find /usr/include -name cblas.h -path '*blis*' 2>/dev/null | head -1)
if [ -n "$blis_include" ]; then
  cc -O2 -DUSE_BLIS -I"$(dirname "$blis_include")" scripts/bench_blas.c -o "$dir/blis" -lblis &&
    built+=(blis)
else
  echo "# BLIS not installed (libblis-dev): not measured"
fi
if [ -f /usr/include/dnnl.h ]; then
  cc -O2 -DUSE_DNNL scripts/bench_blas.c -o "$dir/onednn" -ldnnl && built+=(onednn)
else
  echo "# oneDNN not installed (libdnnl-dev): not measured"
fi
echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')," \
     "$(grep -qw avx512f /proc/cpuinfo && echo AVX-512 || echo 'no AVX-512'); load $(cut -d' ' -f1 /proc/loadavg)"
levels=(native)
grep -qw avx512f /proc/cpuinfo && levels+=(x86-64-v3)
for level in "${levels[@]}"; do
  for ((r = 1; r <= rounds; r++)); do
    for lib in "${built[@]}"; do
      if [ "$level" = native ]; then
        line=$("$dir/$lib")
      else
        line=$(OPENBLAS_CORETYPE=Haswell BLIS_ARCH_TYPE=3 ONEDNN_MAX_CPU_ISA=AVX2 "$dir/$lib")
      fi
      printf '%s\t%s\t%s\n' "$level" "$lib" "$line" >> "$dir/out"
    done
  done
done
python3 - "$dir/out" "$rounds" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    level, lib, name, *g = line.rstrip("\n").split("\t")
    key = (level, name)
    rows.setdefault(key, []).append([float(x) for x in g])
print(f"one thread, GFLOP/s, median of {sys.argv[2]} alternating rounds (best of 7 timings each)")
print("| level | library | 1024^3 | 256^3 | 3136x32x144 | 3136x64x576 | 1024x32x16 | 1024x64x64 "
      "| 64x128x1568 | 64x256x784 | 784x256x64 (A^T) |")
print("|---|---|" + "---:|" * 9)
for (level, name), runs in rows.items():
    cells = [statistics.median(col) for col in zip(*runs)]
    print(f"| {level} | {name} | " + " | ".join(f"{c:.1f}" for c in cells) + " |")
PY
