#!/usr/bin/env bash
# An error whose message quotes a control byte (here a newline in --data_dir, as a file's bytes
# may hold one) is printed on one line, the byte written as \x0a.
#
#   one_line_error_test.sh TRAIN
set -uo pipefail
train=$1
out=$("$train" --data_dir="$(printf 'no\nsuch')" --print_cluster=false 2>&1) \
  && { echo "FAIL: the run succeeded: $out"; exit 1; }
grep -qF 'error: no\x0asuch: neither train-images-idx3-ubyte.gz nor train-images-idx3-ubyte found' <<<"$out" \
  || { echo "FAIL: no error with the newline escaped: $out"; exit 1; }
[[ $(grep -c 'such' <<<"$out") -eq 1 ]] || { echo "FAIL: the error spans lines: $out"; exit 1; }
echo "one-line error test passed"
