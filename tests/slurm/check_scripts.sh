#!/usr/bin/env bash
# Checks the batch scripts without Slurm: each parses, asks for the walltime warning and requeueing,
# and all share one body (everything from the "Everything below this line" marker on), so the
# single-node run in run_slurm_test.sh covers the multi-node and GPU scripts' logic too.
# Usage: check_scripts.sh SLURM_DIR
set -euo pipefail
dir=$1
marker='# ---- Everything below this line is the same in every Cohort batch script. ----'
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
reference=""
for name in single_node multi_node gpu; do
  script=$dir/$name.sbatch
  bash -n "$script" || fail "$name.sbatch does not parse"
  for directive in '--requeue' '--signal=B:USR1@' '--open-mode=append' '--output=cohort-%j.out'; do
    grep -q "^#SBATCH $directive" "$script" || fail "$name.sbatch lacks #SBATCH $directive"
  done
  grep -qxF "$marker" "$script" || fail "$name.sbatch lacks the shared-body marker"
  body=$(sed -n "\\|^$marker\$|,\$p" "$script")
  grep -q 'srun_mpi=${COHORT_SRUN_MPI:-pmix}' <<<"$body" || fail "$name.sbatch does not default to srun --mpi=pmix"
  grep -q 'srun --kill-on-bad-exit=1 ${srun_mpi_flag:+"$srun_mpi_flag"} "$program"' <<<"$body" || fail "$name.sbatch does not launch with srun"
  if [[ -z $reference ]]; then
    reference=$body
  elif [[ $body != "$reference" ]]; then
    diff <(echo "$reference") <(echo "$body") || true
    fail "$name.sbatch's body differs from single_node.sbatch's"
  fi
done
grep -q '^#SBATCH --gpus-per-task=1' "$dir/gpu.sbatch" || fail "gpu.sbatch does not ask for one GPU per rank"
grep -q '^#SBATCH --nodes=2' "$dir/multi_node.sbatch" || fail "multi_node.sbatch does not ask for 2 nodes"
echo "the batch scripts parse and share one body"
