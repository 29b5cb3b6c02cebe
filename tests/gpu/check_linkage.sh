#!/usr/bin/env bash
# A program built against the GPU backend does not load cuBLAS or cuDNN at start, through its own
# links or its libraries' (they are loaded when a GPU first computes), so it starts where they are
# not installed.
#   check_linkage.sh PROGRAM...
set -euo pipefail
for program in "$@"; do
  loaded=$(ldd "$program")
  linked=$(grep -E 'lib(cudnn|cublas)' <<<"$loaded" || true)
  if [[ -n $linked ]]; then
    echo "FAIL: $program loads cuBLAS or cuDNN at start:"
    echo "$linked"
    exit 1
  fi
  echo "$program: loads $(grep -cE 'libcuda' <<<"$loaded") CUDA libraries at start (the runtime), no cuBLAS or cuDNN"
done
