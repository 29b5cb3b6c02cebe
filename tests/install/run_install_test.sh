#!/usr/bin/env bash
# Tests the installed Cohort as a user meets it: installs the build into a temporary prefix with
# `cmake --install --prefix`, then, in a non-interactive bash, `module use` + `module load cohort`
# (the modulefile copied into a module tree of its own, as a site would) and
#   - runs cohort-train --help from PATH,
#   - builds tests/consumer (find_package(Cohort); apps/examples/custom_model.cc, its own model and hook) out of tree and runs
#     it with mpirun on 3 ranks (1 ps, 2 workers): the loss falls, the test accuracy is far above
#     chance, and the hook reported on every worker,
#   - compiles and runs a small program with the flags from `pkg-config cohort`.
#
# Usage: run_install_test.sh CMAKE BUILD_DIR SOURCE_DIR
# Exits 77 (ctest's SKIP_RETURN_CODE) after running everything else with the environment set by
# hand when neither Lmod nor Environment Modules is installed.
set -euo pipefail

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

work=$(mktemp -d "${TMPDIR:-/tmp}/cohort-install.XXXXXX")
trap 'status=$?; if ((status == 0 || status == 77)); then rm -rf "$work"; else echo "kept $work"; fi' EXIT

prefix=$work/cohort
"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log" ||
  { cat "$work/install.log"; fail "cmake --install failed"; }
log "installed into $prefix"

# The layout.
for f in bin/cohort-train include/cohort/cohort.h include/cohort/mpi/comm.h \
         include/cohort/core/base/error.h include/cohort/core/train/session.h \
         include/cohort/core/nn/data/dataset.h include/cohort/core/nn/ops/ops.h \
         include/cohort/core/dist/server.h include/cohort/core/io/checkpoint.h \
         include/cohort/core/placement/device_spec.h include/cohort/hooks/hooks.h \
         lib/libcohort_mpi.a lib/libcohort_base.a lib/libcohort_placement.a lib/libcohort_nn.a \
         lib/libcohort_dist.a lib/libcohort_io.a lib/libcohort_train.a lib/libcohort_hooks.a \
         lib/cmake/Cohort/CohortConfig.cmake lib/cmake/Cohort/CohortConfigVersion.cmake \
         lib/cmake/Cohort/CohortTargets.cmake lib/pkgconfig/cohort.pc \
         share/cohort/slurm/single_node.sbatch share/cohort/slurm/multi_node.sbatch \
         share/cohort/slurm/gpu.sbatch share/doc/cohort/README.md share/doc/cohort/INSTALL.md \
         "share/modulefiles/cohort/$version"; do
  [[ -f $prefix/$f ]] || fail "not installed: $f"
done
[[ -x $prefix/share/cohort/slurm/single_node.sbatch ]] || fail "the batch scripts are not executable"
stray=$(find "$prefix/include" -type f ! -name '*.h')
[[ -z $stray ]] || fail "non-headers installed under include/: $stray"
modulefile=$prefix/share/modulefiles/cohort/$version
grep -q '^#%Module1.0' "$modulefile" || fail "the modulefile lacks #%Module1.0"
grep -qxF "set prefix {$prefix}" "$modulefile" || fail "the modulefile does not name the prefix $prefix"
log "layout: headers, libraries, CMake package, pkg-config file, modulefile, scripts, docs"

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
cohort-train --help | grep -- '--checkpoint_dir' > /dev/null
cmake -S $src/tests/consumer -B $work/consumer -DCMAKE_BUILD_TYPE=Release > $work/consumer-configure.log ||
  { cat $work/consumer-configure.log; exit 1; }
cmake --build $work/consumer > $work/consumer-build.log || { cat $work/consumer-build.log; exit 1; }
echo 'built tests/consumer against the module'
mpirun -np 3 $work/consumer/consumer --ps_tasks=1 --train_steps=200 2>&1 | tee $work/consumer.out
mpicxx -std=c++20 -O1 $work/pc_check.cc \$(pkg-config --cflags --libs cohort) -o $work/pc_check
$work/pc_check
" || status=$?
((status == 0)) || fail "the module / consumer / pkg-config steps failed (status $status)"

out=$work/consumer.out
[[ $(grep -c '^loss trend hook' "$out") == 2 ]] || fail "the consumer's hook did not report on both workers"
read -r first last < <(sed -nE 's/^loss trend hook \(chief\).* first 20 ([0-9.]+), of the last 20 ([0-9.]+)$/\1 \2/p' "$out")
[[ -n ${last:-} ]] || fail "no loss trend from the chief's hook"
awk -v f="$first" -v l="$last" 'BEGIN { exit !(l < 0.7 * f) }' ||
  fail "the loss did not fall: first $first, last $last"
accuracy=$(sed -nE 's/^consumer: 2 workers, global step 200, test accuracy ([0-9.]+)$/\1/p' "$out")
[[ -n $accuracy ]] || fail "the consumer did not finish 200 global steps on 2 workers"
awk -v a="$accuracy" 'BEGIN { exit !(a > 0.6) }' || fail "test accuracy $accuracy is not above 0.6"
log "consumer on 3 ranks: loss $first -> $last, test accuracy $accuracy; hook fired on both workers"
if [[ -z $module_init ]]; then
  echo "SKIP: everything but the module system passed; install lmod (or environment-modules) to test it"
  exit 77
fi
log "PASS (module system: $module_init)"
