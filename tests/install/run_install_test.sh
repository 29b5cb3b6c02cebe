#!/usr/bin/env bash
# Tests the installed Cohort as a user meets it: installs the build into a temporary prefix with
# `cmake --install --prefix`, then, in a non-interactive bash, `module use` + `module load cohort`
# (the modulefile copied into a module tree of its own, as a site would) and
#   - runs cohort-train --help from PATH,
#   - builds the installed examples (share/cohort/examples: their CMakeLists.txt, find_package
#     (Cohort)) out of tree, installs them (they run without a library path), checks that --help
#     names the guide's flags by guide.cc alone, and
#     runs the guide example (docs/GUIDE.md) with mpirun on 3 ranks (1 ps, 2 workers, sync SGD)
#     with its settings given as a batch script gives them (COHORT_PS_TASKS, COHORT_TRAIN_STEPS,
#     COHORT_CHECKPOINT_DIR, and COHORT_MODEL and COHORT_MODE, which it does not define): it exits
#     0, the loss falls, the test accuracy is far above chance, both workers report, and the chief
#     writes its checkpoint; run again with more steps, it restores that checkpoint and trains on,
#   - compiles and runs a small program with the flags from `pkg-config cohort`, and checks that
#     neither pkg-config nor the CMake package links cuBLAS or cuDNN.
# It works in BUILD_DIR/test-install and leaves the prefix and the built examples there.
#
# Usage: run_install_test.sh CMAKE BUILD_DIR SOURCE_DIR
# Exits 77 (ctest's SKIP_RETURN_CODE) after running everything else with the environment set by
# hand when neither Lmod nor Environment Modules is installed; fails instead with
# COHORT_REQUIRE_TESTS=1.
set -euo pipefail
. "$(dirname "$0")/../support/skip.sh"

cmake=$1
build=$(cd "$2" && pwd)
src=$(cd "$3" && pwd)
version=$(head -n1 "$src/VERSION")

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
started=$SECONDS
log() { printf '[%3ds] %s\n' $((SECONDS - started)) "$*"; }

# In the build tree, kept: the Slurm test runs the guide example built here from the installed copy.
work=$build/test-install
rm -rf "$work" && mkdir -p "$work"

prefix=$work/cohort
"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log" ||
  { cat "$work/install.log"; fail "cmake --install failed"; }
log "installed into $prefix"
# The manifest, which packagers and uninstalls read, names every file as installed.
manifest=$build/install_manifest.txt
[[ -s $manifest ]] || fail "no install manifest at $manifest"
while IFS= read -r f; do
  [[ -e $f || -L $f ]] || fail "the install manifest names $f, which is not there"
done < "$manifest"
grep -qx "$prefix/bin/cohort-train" "$manifest" || fail "the install manifest does not name bin/cohort-train"

# The layout.
for f in bin/cohort-train bin/cohort-plot-metrics include/cohort/cohort.h include/cohort/mpi/comm.h \
         include/cohort/core/base/error.h include/cohort/core/train/session.h \
         include/cohort/core/nn/data/dataset.h include/cohort/core/nn/ops/ops.h \
         include/cohort/core/dist/server.h include/cohort/core/io/checkpoint.h \
         include/cohort/core/placement/device_spec.h include/cohort/hooks/hooks.h \
         lib/libcohort_mpi.so lib/libcohort_base.so lib/libcohort_placement.so lib/libcohort_nn.so \
         lib/libcohort_dist.so lib/libcohort_io.so lib/libcohort_train.so lib/libcohort_hooks.so \
         lib/cmake/Cohort/CohortConfig.cmake lib/cmake/Cohort/CohortConfigVersion.cmake \
         lib/cmake/Cohort/CohortTargets.cmake lib/pkgconfig/cohort.pc \
         share/cohort/slurm/single_node.sbatch share/cohort/slurm/multi_node.sbatch \
         share/cohort/slurm/gpu.sbatch share/cohort/examples/CMakeLists.txt \
         share/cohort/examples/guide.cc share/cohort/examples/custom_model.cc \
         share/cohort/examples/residual_npy.cc share/cohort/examples/tabular.cc \
         share/cohort/examples/images.cc share/cohort/examples/text.cc share/cohort/examples/denoise.cc \
         share/cohort/examples/language_model.cc \
         share/doc/cohort/README.md share/doc/cohort/INSTALL.md share/doc/cohort/GUIDE.md \
         "share/modulefiles/cohort/$version"; do
  [[ -f $prefix/$f ]] || fail "not installed: $f"
done
[[ -x $prefix/share/cohort/slurm/single_node.sbatch ]] || fail "the batch scripts are not executable"
stray=$(find "$prefix/include" -type f ! -name '*.h')
[[ -z $stray ]] || fail "non-headers installed under include/: $stray"
modulefile=$prefix/share/modulefiles/cohort/$version
grep -q '^#%Module1.0' "$modulefile" || fail "the modulefile lacks #%Module1.0"
grep -qxF "set prefix {$prefix}" "$modulefile" || fail "the modulefile does not name the prefix $prefix"
# The MPI library and its release (Open MPI's as its mpirun gives it), and the standard's version.
built_with='Built with .* (MPI [0-9.]*) from .*mpicxx'
if ompi=$(mpirun --version 2>/dev/null | sed -nE 's/.*\(Open MPI\) ([0-9.]+).*/\1/p') && [[ -n $ompi ]]; then
  built_with="Built with Open MPI $ompi (MPI [0-9.]*) from .*mpicxx"
fi
grep -q "$built_with" "$modulefile" || fail "the modulefile does not name the MPI it was built with: no '$built_with'"
# The CPU kernels once per level, where the build made them (the default build on x86-64).
for copy in "$build"/lib/glibc-hwcaps/*/libcohort_nn.so; do
  [[ -f $copy ]] || continue
  level=$(basename "$(dirname "$copy")")
  [[ -f $prefix/lib/glibc-hwcaps/$level/libcohort_nn.so ]] || fail "not installed: the $level kernels"
done
log "layout: headers, libraries, CMake package, pkg-config file, modulefile, scripts, examples, docs"

# Every program and library, built and installed, finds libraries through RUNPATH entries that
# name directories: an empty one would have the loader search the working directory (for libc
# too), and an installed one must not name the build tree.
checked=0
while IFS= read -r -d '' elf; do
  runpath=$({ readelf -d "$elf" 2>/dev/null || true; } | sed -n 's/.*(RUNPATH).*\[\(.*\)\]$/\1/p')
  [[ -n $runpath ]] || continue
  [[ ":$runpath:" != *::* ]] || fail "$elf: its RUNPATH '$runpath' has an empty entry (the working directory)"
  [[ $elf != "$prefix"/* || $runpath != *"$build"* ]] || fail "$elf: its RUNPATH '$runpath' names the build tree"
  checked=$((checked + 1))
done < <(find "$build/bin" "$build/lib" "$build/tests" "$prefix/bin" "$prefix/lib" -maxdepth 3 -type f \
              \( -name '*.so' -o -perm -u+x \) -print0)
((checked >= 20)) || fail "only $checked programs and libraries with a RUNPATH found"
log "RUNPATHs of $checked programs and libraries: no empty entry, none into the build tree when installed"

# The tree finds its own libraries wherever it is moved, with no LD_LIBRARY_PATH, and the loader
# picks the kernels the CPU supports from it.
moved=$work/moved
cp -a "$prefix" "$moved"
header=$(env -u LD_LIBRARY_PATH "$moved/bin/cohort-train" --mode=local --train_steps=1 \
           --log_every_steps=0 --print_cluster=false 2>&1) ||
  { echo "$header"; fail "the moved tree's cohort-train did not run"; }
resolved=$(env -u LD_LIBRARY_PATH ldd "$moved/bin/cohort-train" | grep -E 'libcohort_nn[.]so => ')
[[ $resolved == *"=> $moved/"* ]] || fail "the moved cohort-train loads libcohort_nn from elsewhere: $resolved"
kernels=$(sed -nE 's/^CPU kernels ([^ ]+) .*/\1/p' <<<"$header")
if [[ -d $build/lib/glibc-hwcaps/$kernels ]]; then
  [[ $resolved == *"/glibc-hwcaps/$kernels/"* ]] ||
    fail "cohort-train runs the $kernels kernels but loads $resolved"
fi
log "moved tree: runs without LD_LIBRARY_PATH, kernels $kernels from ${resolved#*=> }"
rm -rf "$moved"

# A small program for the pkg-config check: core and hooks, linked in the order the .pc gives.
cat >"$work/pc_check.cc" <<'CC'
#include <cohort/core/nn/tensor.h>
#include <cohort/hooks/stop_at_step_hook.h>
#include <cstdio>
int main() {
  cohort::Tensor t({2, 3});
  auto hook = cohort::StopAtStepHook::last(7);
  std::printf("pkg-config build: tensor of %lld, stop after step %lld\n",
              static_cast<long long>(t.size()), static_cast<long long>(*hook->last_step()));
  return t.size() == 6 && *hook->last_step() == 7 ? 0 : 1;
}
CC

# What a user types, in a fresh non-interactive bash. Lmod's init script breaks under `set -u`.
module_init=""
for init in /usr/share/lmod/lmod/init/bash /usr/share/modules/init/bash; do
  if [[ -f $init ]]; then module_init=$init; break; fi
done
if [[ -n $module_init ]]; then
  # As a site would: the modulefile copied into a module tree of its own.
  mkdir -p "$work/modulefiles/cohort"
  cp "$modulefile" "$work/modulefiles/cohort/$version"
  setup="source $module_init
module use $work/modulefiles
module load cohort || exit 1
module list"
else
  echo "no module system found (Debian package lmod or environment-modules): setting the environment by hand"
  setup="export PATH=$prefix/bin:\$PATH CMAKE_PREFIX_PATH=$prefix PKG_CONFIG_PATH=$prefix/lib/pkgconfig"
fi
# The installed examples, as a user names them once the module is loaded.
examples='$COHORT_ROOT/share/cohort/examples'
[[ -n $module_init ]] || examples=$prefix/share/cohort/examples
# A clean environment, plus what mpirun needs on a small machine (and as root, in CI).
mpi_env=(OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_rmaps_base_oversubscribe=1)
if [[ $(id -u) == 0 ]]; then mpi_env+=(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1); fi
status=0
env -i HOME="$HOME" PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    TERM=dumb LANG=C.UTF-8 "${mpi_env[@]}" \
    bash --noprofile --norc -e -o pipefail -c "
$setup
echo \"cohort-train: \$(command -v cohort-train)\"
[ \"\$(command -v cohort-train)\" = $prefix/bin/cohort-train ]
[ \"\$COHORT_SLURM_DIR\" = $prefix/share/cohort/slurm ] || [ -z \"$module_init\" ]
# Other Cohort builds must keep loading their own libraries: the module sets no library path.
[ -z \"\${LD_LIBRARY_PATH:-}\" ] || { echo \"the module set LD_LIBRARY_PATH=\$LD_LIBRARY_PATH\"; exit 1; }
cohort-train --help | grep -- '--checkpoint_dir' > /dev/null
cmake -S $examples -B $work/examples > $work/examples-configure.log ||
  { cat $work/examples-configure.log; exit 1; }
cmake --build $work/examples -j 2 > $work/examples-build.log || { cat $work/examples-build.log; exit 1; }
(cd $work/examples && ls guide custom_model denoise gan images language_model residual_npy tabular text > /dev/null)
echo 'built the installed examples against the module'
# Installed in turn (a user's cmake --install), a program finds Cohort's libraries with no library path.
cmake --install $work/examples --prefix $work/examples-installed > $work/examples-install.log ||
  { cat $work/examples-install.log; exit 1; }
$work/examples-installed/bin/guide --help | grep -qxF 'Flags from guide.cc:' ||
  { echo 'the installed guide does not run'; $work/examples-installed/bin/guide --help 2>&1 | head -3; exit 1; }
echo 'installed the examples: they run without LD_LIBRARY_PATH'
# Where the CUDA toolkit is not to be found (a login node without a CUDA module), programs that do
# not link Cohort::gpu, as these, still configure.
cmake -S $examples -B $work/examples-no-cuda -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=TRUE \
    > $work/examples-no-cuda.log || { cat $work/examples-no-cuda.log; exit 1; }
echo 'configured the installed examples without a CUDA toolkit'
# --help names a user's flags by their path in the user's source tree, not an absolute one.
$work/examples/guide --help | grep -qxF 'Flags from guide.cc:' ||
  { echo 'guide --help does not list its flags under guide.cc'; $work/examples/guide --help | grep '^Flags from'; exit 1; }
# As a batch script runs it: its settings in the environment, the script's arguments on the line.
export COHORT_MODEL=mlp COHORT_MODE=sync COHORT_PS_TASKS=1 COHORT_CHECKPOINT_DIR=$work/ckpt
COHORT_TRAIN_STEPS=300 mpirun -np 3 $work/examples/guide --sync_replicas 2>&1 | tee $work/guide.out
COHORT_TRAIN_STEPS=350 mpirun -np 3 $work/examples/guide --sync_replicas 2>&1 | tee $work/guide-resumed.out
# cuBLAS and cuDNN are loaded when a GPU computes: a consumer is never linked against them.
if pkg-config --libs cohort | grep -E 'cudnn|cublas'; then echo 'pkg-config links cuBLAS or cuDNN'; exit 1; fi
if grep -rlE 'cudnn[.]so|cublas[.]so' $prefix/lib/cmake/Cohort; then echo 'the CMake package links cuBLAS or cuDNN'; exit 1; fi
mpicxx -std=c++20 -O1 $work/pc_check.cc \$(pkg-config --cflags --libs cohort) -o $work/pc_check
$work/pc_check
" || status=$?
((status == 0)) || fail "the module / examples / pkg-config steps failed (status $status)"

out=$work/guide.out
[[ $(grep -cE '^worker [01]: [0-9]+ steps, last loss' "$out") == 2 ]] ||
  fail "the guide's own hook did not report on both workers"
# The chief's LoggingTensorHook: the first line (global step 1) and the one at the end.
losses=$(sed -nE 's/^global_step = [0-9]+, loss = ([0-9.e+-]+), accuracy = .*$/\1/p' "$out")
first=$(head -n1 <<<"$losses") last=$(tail -n1 <<<"$losses")
[[ -n $first && $(wc -l <<<"$losses") -ge 3 ]] || fail "no loss lines from the chief's LoggingTensorHook"
awk -v f="$first" -v l="$last" 'BEGIN { exit !(l < 0.7 * f) }' ||
  fail "the loss did not fall: first $first, last $last"
accuracy=$(sed -nE 's/^guide: 2 workers, 1 ps, mode sync, global step 300, .*test accuracy ([0-9.]+)$/\1/p' "$out")
[[ -n $accuracy ]] || fail "the guide did not train 300 global steps in sync mode on 1 ps and 2 workers"
awk -v a="$accuracy" 'BEGIN { exit !(a > 0.6) }' || fail "test accuracy $accuracy is not above 0.6"
[[ -f $work/ckpt/model.ckpt-300.safetensors ]] ||
  fail "no checkpoint at step 300 in COHORT_CHECKPOINT_DIR: $(ls "$work/ckpt" 2>&1 | tr '\n' ' ')"
resumed=$work/guide-resumed.out
grep -qxF "restored from $work/ckpt at global step 300" "$resumed" ||
  fail "the second run did not restore the checkpoint of step 300"
grep -qE '^guide: 2 workers, 1 ps, mode sync, global step 350, ' "$resumed" ||
  fail "the second run did not train on to global step 350"
log "guide on 3 ranks: loss $first -> $last, test accuracy $accuracy, checkpoint at 300 restored"
if [[ -n $module_init ]]; then
  # A tree moved with its modulefile in it: the module finds it from the file's place, and a
  # modulefile whose tree is gone refuses to load; an empty directory left at the old place
  # (made again by another install, say) does not count as the tree.
  moved=$work/moved-module
  rm -rf "$moved" && cp -a "$prefix" "$moved" && mv "$prefix" "$prefix.away" && mkdir "$prefix"
  load_moved() {
    env -i HOME="$HOME" PATH=/usr/bin:/bin bash --noprofile --norc -c "source $module_init
module use $1
module load cohort 2>&1 && echo \"root=\$COHORT_ROOT train=\$(command -v cohort-train)\""
  }
  # Lmod folds its messages to the terminal's width: compared with the lines joined.
  found=$(load_moved "$moved/share/modulefiles" | tr -s ' \n' '  ') || true
  gone=$(load_moved "$work/modulefiles" | tr -s ' \n' '  ') || true
  rmdir "$prefix" && mv "$prefix.away" "$prefix"
  rm -rf "$moved"
  [[ $found == *"root=$moved train=$moved/bin/cohort-train"* ]] ||
    fail "the moved tree's module did not find the tree: $found"
  [[ $gone == *"was installed to $prefix, which no longer holds it"* && $gone != *"root="* ]] ||
    fail "a modulefile whose tree is gone loaded anyway: $gone"
  log "moved tree: its module finds it; a copy naming the old place refuses to load"
fi
if [[ -z $module_init ]]; then
  skip "no module system found (lmod or environment-modules); everything but it passed" \
    "install lmod (or environment-modules) to test it"
fi
log "PASS (module system: $module_init)"
