#!/usr/bin/env bash
# Installs the Debian packages Cohort needs (only those missing) and builds it into build/.
# Works as root, or through sudo otherwise.
# Usage: scripts/setup.sh [--tests] [--target NAME] [extra cmake args]
#   --tests        also installs what the test suite uses (Python readers and plots, Slurm, modules)
#   --target NAME  builds that target (and what it needs) only, e.g. train
set -euo pipefail
cd "$(dirname "$0")/.."
with_tests=0
target=()
while (($#)); do
  case $1 in
    --tests) with_tests=1; shift ;;
    --target) target=(--target "$2"); shift 2 ;;
    *) break ;;
  esac
done

packages=(
  build-essential cmake pkg-config
  openmpi-bin libopenmpi-dev        # MPI
  libeigen3-dev                     # tensors and GEMM
  libboost-dev libboost-program-options-dev  # flags; Boost.CRC for checksums
  doctest-dev nlohmann-json3-dev zlib1g-dev
  libzip-dev                        # NumPy .npz archives
  libpng-dev libjpeg-dev            # folders of PNG and JPEG images
  libhdf5-dev                       # HDF5 files
  libopenblas-dev                   # the convolutions' and dense layers' matrix products
  libdnnl-dev                       # oneDNN: the large ones
  ocl-icd-opencl-dev                # required by oneDNN's CMake package (its GPU runtime)
  dataset-fashion-mnist             # the default training data
)
if ((with_tests)); then
  packages+=(
    python3-numpy python3-matplotlib  # checkpoint reader test, metric plots
    python3-pil                       # images written by another library, to read back
    python3-h5py                      # HDF5 files written by another library, to read back
    python3-torch                     # the recurrent and attention layers checked against PyTorch's
    python3-protobuf                  # event files parsed by the protobuf library
    slurmctld slurmd slurm-client munge libpmix-dev  # the real-Slurm test
    lmod                              # the module-system install test
    qemu-user                         # the default build on emulated older CPUs
  )
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The cores this process may use (nproc alone reports OMP_NUM_THREADS where it is set, as
# HPC shells often set it to 1).
jobs=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build build -j "$jobs" "${target[@]}"
