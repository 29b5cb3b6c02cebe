#!/bin/bash
# The CPU kernels on aarch64: builds core/base, core/nn and core/placement (everything the kernel
# tests need; the rest is MPI and I/O plumbing with no CPU-specific code) and the kernel tests with
# Debian's cross compiler, then runs the tests under qemu-user. On aarch64 the kernels take their
# generic path: one copy, no x86 level copies, the compiler's NEON code for the vector types.
#
#   scripts/aarch64_check.sh [doctest options]
#
# The tests run on one thread, without the test cases that use two (intra-op threads, or
# replicas on threads): under Debian 12's qemu-user (7.2) two threads that wait for each other
# hang, an OpenMP parallel loop of a few lines and a std::barrier included.
#
# Needs the cross compiler, qemu-user and the libraries for arm64 (Debian 12):
#   dpkg --add-architecture arm64 && apt-get update
#   apt-get install g++-aarch64-linux-gnu qemu-user libopenblas-dev:arm64 \
#       libboost-program-options-dev:arm64 libzip-dev:arm64 zlib1g-dev:arm64
# Headers that do not depend on the architecture (Eigen, doctest, nlohmann-json, Boost's) come
# from the host's /usr/include. Objects and programs go to build-aarch64/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/build-aarch64
cxx=aarch64-linux-gnu-g++
for tool in $cxx qemu-aarch64; do
  command -v $tool > /dev/null || { echo "aarch64_check.sh: $tool is missing (see the header of this script)" >&2; exit 1; }
done
[ -f /usr/include/aarch64-linux-gnu/cblas.h ] ||
  { echo "aarch64_check.sh: no arm64 OpenBLAS (libopenblas-dev:arm64; see the header of this script)" >&2; exit 1; }

mkdir -p "$out/include" "$out/obj"
ln -sfn "$root" "$out/include/cohort"  # sources include "cohort/<dir>/<file>.h"
flags=(-std=c++20 -O2 -fopenmp -Wall -Wextra -DEIGEN_MAX_ALIGN_BYTES=64 -I"$out/include" -I"$root/tests"
       -I/usr/include/aarch64-linux-gnu -I/usr/include/eigen3 -idirafter /usr/include)

# The library sources without the CUDA ones (no_gpu.cc stands in for them), and the test sources.
cd "$root"
library=$(ls core/base/*.cc core/nn/*.cc core/nn/ops/*.cc core/nn/data/*.cc core/placement/*.cc |
          grep -v '_gpu\.cc$')
library="$library core/nn/no_gpu.cc"
tests=(tests/support/test_main.cc tests/core/nn/cpu_level_test.cc tests/core/nn/ops_*.cc
       tests/core/nn/model_test.cc tests/core/nn/model_graph_test.cc tests/core/nn/loss_test.cc
       tests/core/nn/optimizer_test.cc)
object() { echo "$out/obj/$(echo "$1" | tr / _).o"; }
echo "== compiling for aarch64 ($($cxx -dumpversion))"
printf '%s\n' $library "${tests[@]}" | sort -u |
  xargs -P "$(nproc --all)" -I{} sh -c "$cxx ${flags[*]} -c {} -o $out/obj/\$(echo {} | tr / _).o"

libs=()
for f in $(printf '%s\n' $library | sort -u); do libs+=("$(object "$f")"); done
link=(-L/usr/lib/aarch64-linux-gnu -Wl,-rpath-link,/usr/lib/aarch64-linux-gnu -lopenblas
      -lboost_program_options -lzip -lz -fopenmp)
program() {  # name, test sources...
  local name=$1 objects=()
  shift
  for f in tests/support/test_main.cc tests/core/nn/cpu_level_test.cc "$@"; do objects+=("$(object "$f")"); done
  $cxx -o "$out/$name" "${objects[@]}" "${libs[@]}" "${link[@]}"
}
program nn_ops_test tests/core/nn/ops_{conv2d,dense,dropout,flatten,gemm,max_pool2d,relu,softmax_cross_entropy}_test.cc
program nn_layers_test tests/core/nn/ops_{normalization,pooling,merge,elementwise,embedding}_test.cc
program nn_model_test tests/core/nn/{model,model_graph,loss}_test.cc
program nn_optimizer_test tests/core/nn/optimizer_test.cc
file "$out/nn_ops_test" | grep -q "ARM aarch64" || { echo "aarch64_check.sh: not an aarch64 program" >&2; exit 1; }

status=0
for name in nn_ops_test nn_layers_test nn_model_test nn_optimizer_test; do
  echo "== $name under qemu-aarch64"
  OMP_NUM_THREADS=1 qemu-aarch64 -L /usr/aarch64-linux-gnu "$out/$name" -tce="*thread*,*replicas*" "$@" ||
    status=1
done
exit $status
