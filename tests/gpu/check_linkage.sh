#!/usr/bin/env bash
# A program built against the GPU backend does not link cuBLAS or cuDNN (they are loaded when a
# GPU first computes), so it starts where they are not installed.
#   check_linkage.sh PROGRAM...
set -euo pipefail
for program in "$@"; do
  linked=$(readelf -d "$program" | grep -E 'NEEDED.*lib(cudnn|cublas)' || true)
  if [[ -n $linked ]]; then
    echo "FAIL: $program links cuBLAS or cuDNN:"
    echo "$linked"
    exit 1
  fi
  echo "$program: $(readelf -d "$program" | grep -cE 'NEEDED.*libcuda') CUDA libraries linked (the runtime), no cuBLAS or cuDNN"
done
