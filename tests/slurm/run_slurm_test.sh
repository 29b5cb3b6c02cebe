#!/usr/bin/env bash
# Tests the batch scripts in slurm/ on a real Slurm: stands up a one-node cluster (cluster.sh:
# munged, slurmctld, slurmd from Debian's packages, all private to a temporary directory, started
# without systemd), then
#   1. runs slurm/single_node.sbatch --epochs=1 with `sbatch --wait`: training runs one epoch, the
#      test accuracy is printed and the chief's checkpoint is in the submit directory;
#   2. runs it with the installed guide example (a user's program) in ps mode, sends the walltime
#      warning (SIGUSR1 to the batch shell, as --signal=B:USR1 does) while it trains: every task,
#      the ps among them, exits 0, the job checkpoints, requeues itself, and the second run
#      resumes from the checkpoint and finishes;
#   3. runs it with COHORT_LAUNCHER=mpirun and --mode async (one ps task by default), and sends
#      the walltime warning while it trains: the job checkpoints, requeues and finishes;
#   4. runs slurm/gpu.sbatch on four fake GPUs (GRES backed by links to /dev/null): every rank
#      gets its own CUDA_VISIBLE_DEVICES;
#   5. cancels a training job with scancel: the ranks checkpoint on SIGTERM, the job is not
#      requeued;
#   6. sends the walltime warning while the ranks are still starting (no handler yet, so SIGUSR1
#      ends them: the launcher exits 138): the job requeues itself anyway and the second run
#      trains to the end;
#   7. runs a job array of two tasks as a sweep (COHORT_ARRAY_ARGS): each takes its own
#      arguments and checkpoints in its own directory.
# Then it cancels what is left and stops the daemons by their pids.
#
# Usage: run_slurm_test.sh SOURCE_DIR TRAIN_PROGRAM GUIDE_PROGRAM
# Skips (exit 77) as cluster.sh says; COHORT_KEEP_SLURM_TEST=1 keeps the temporary directory.
set -euo pipefail
src=$(cd "$1" && pwd)
train=$(realpath "$2")
guide=$3  # the installed guide example, built by the install test

. "$(dirname "$0")/cluster.sh"
[[ -x $guide ]] || fail "the installed guide example $guide is missing: the install test (install_examples) builds it"
job_program=${train##*/}
start_cluster
export COHORT_PROGRAM=$train COHORT_LAUNCHER=srun

# ---- 1. sbatch --wait the single-node script with an argument: it trains for as long as the
# argument says (one epoch over 8 workers of 64: 118 global steps; no step count of the script's
# stands in its way), reports, and leaves a checkpoint.
submit_and_wait "$work/job1" "$src/slurm/single_node.sbatch" --epochs=1
((status == 0)) || fail "sbatch --wait single_node.sbatch exited with status $status"
check_finished 118
[[ -s checkpoints/$job/checkpoint ]] || fail "no checkpoint index in checkpoints/$job"
ls checkpoints/"$job"/model.ckpt-118.safetensors >/dev/null ||
  fail "no model.ckpt-118.safetensors in checkpoints/$job"
log "single_node.sbatch --epochs=1: 118 steps, test accuracy $accuracy, checkpoints/$job: $(ls checkpoints/"$job" | tr '\n' ' ')"

# ---- 2. The walltime warning, in ps mode, to a user's program: the installed guide example
# (built from share/cohort/examples by the install test), whose ps task only calls join(). It
# defines none of the script's settings but --ps_tasks, --train_steps and --checkpoint_dir, and
# takes those from the script's environment. The job checkpoints, requeues itself, and the
# second run resumes from the checkpoint and finishes. sbatch --wait waits through the requeue.
steps=600
COHORT_PROGRAM=$guide COHORT_MODE=sync COHORT_TRAIN_STEPS=$steps \
  submit_in_background "$work/job2" "$src/slurm/single_node.sbatch" --sync_replicas
wait_for_output "^global_step = [1-9][0-9]{2}, "  # the first run has trained 100 steps
scancel --signal=USR1 --batch "$job"
log "sent the walltime warning (SIGUSR1 to the batch shell) to job $job (the installed guide, 1 ps + 7 workers)"
status=0
wait "$waiter" || status=$?
cat "$out"
((status == 0)) || fail "sbatch --wait of the requeued job exited with status $status"
grep -q "signal 10: serving until the computing tasks are done" "$out" ||
  fail "the guide's ps task did not report the warning while serving"
check_requeued 0
accuracy=$(sed -nE "s/^guide: 7 workers, 1 ps, mode sync, global step $steps, .*test accuracy ([0-9.]+)$/\1/p" "$out")
[[ -n $accuracy ]] || fail "the requeued run did not finish $steps steps on 1 ps and 7 workers"
awk -v a="$accuracy" 'BEGIN { exit !(a > 0.5) }' || fail "$out: test accuracy $accuracy is not above 0.5"
log "requeue: the guide stopped and checkpointed at step $stopped, restored it, finished $steps steps, test accuracy $accuracy"

# ---- 3. The same script launching with mpirun instead of srun, in async mode asked for as two
# arguments, --mode async (the script gives it 1 ps task, as for --mode=async), and the walltime
# warning while it trains: mpirun hands it to the ranks, the job checkpoints, requeues itself,
# and the second run resumes and finishes. Async workers may overshoot the last step by a few.
steps=3000
COHORT_LAUNCHER=mpirun COHORT_TRAIN_STEPS=$steps \
  submit_in_background "$work/job3" "$src/slurm/single_node.sbatch" --mode async
wait_for_output "^step [1-9][0-9]*/$steps "
scancel --signal=USR1 --batch "$job"
status=0
wait "$waiter" || status=$?
cat "$out"
((status == 0)) || fail "sbatch --wait single_node.sbatch with COHORT_LAUNCHER=mpirun exited with status $status"
grep -q "mode async, 7 workers" "$out" || fail "$out: mpirun did not start 1 ps task and 7 workers"
check_requeued 20
check_finished '30[0-9]{2}'
log "single_node.sbatch with mpirun, async mode: 1 ps + 7 workers, stopped at step $stopped by the warning, requeued, finished with test accuracy $accuracy"

# ---- 4. gpu.sbatch: one fake GPU per rank. A wrapper reports each rank's device and where train
# is told to compute, then runs train on the CPU (fake GPUs cannot compute).
mkdir -p "$work/job4"
cat >"$work/job4/show_gpu.sh" <<SH
#!/bin/bash
echo "rank \${SLURM_PROCID} CUDA_VISIBLE_DEVICES=\${CUDA_VISIBLE_DEVICES:-unset}"
echo "rank \${SLURM_PROCID} COHORT_DEVICE=\${COHORT_DEVICE:-unset}"
COHORT_DEVICE=cpu exec "$train" "\$@"
SH
chmod +x "$work/job4/show_gpu.sh"
COHORT_PROGRAM=$work/job4/show_gpu.sh COHORT_TRAIN_STEPS=60 submit_and_wait "$work/job4" "$src/slurm/gpu.sbatch"
((status == 0)) || fail "sbatch --wait gpu.sbatch exited with status $status"
ranks=$(grep -cE '^rank [0-3] CUDA_VISIBLE_DEVICES=[0-9]+$' "$out" || true)
devices=$(sed -nE 's/^rank [0-3] CUDA_VISIBLE_DEVICES=([0-9]+)$/\1/p' "$out" | sort -u | wc -l)
((ranks == 4 && devices == 4)) || fail "gpu.sbatch: expected 4 ranks with 4 different GPUs"
told=$(grep -cE '^rank [0-3] COHORT_DEVICE=gpu$' "$out" || true)
((told == 4)) || fail "gpu.sbatch: expected every rank to be told --device=gpu (COHORT_DEVICE=gpu)"
check_finished 60
log "gpu.sbatch: 4 ranks, one GPU each"

# ---- 5. scancel: SIGTERM to the ranks, a checkpoint, no requeue.
mkdir -p "$work/job5" && cd "$work/job5"
job=$(COHORT_TRAIN_STEPS=5000 sbatch --parsable "$src/slurm/single_node.sbatch" --log_every_steps=20)
out=$work/job5/cohort-$job.out
wait_for_output "^step [1-9][0-9]{2}/"
scancel "$job"
while [[ -n $(squeue -h -j "$job" -o %i 2>/dev/null) ]]; do  # KillWait (10 s) bounds it
  ((SECONDS < deadline)) || fail "job $job did not end after scancel"
  sleep 0.25
done
cat "$out"
grep -q "stopped by signal 15" "$out" || fail "job $job: the ranks did not stop on SIGTERM"
saved=$(ls checkpoints/"$job" | sed -nE 's/^model\.ckpt-([0-9]+)\.safetensors$/\1/p' | sort -n | tail -n1)
[[ -n $saved ]] && ((saved >= 100)) || fail "job $job: no checkpoint written on SIGTERM"
grep -q "requeueing" "$out" && fail "job $job was requeued after scancel"
log "scancel: the ranks stopped on SIGTERM, checkpoint at step $saved, not requeued"

# ---- 6. The warning before the ranks can take it: in its first run each rank is a process
# still starting up, without a handler for SIGUSR1, whose default action ends it. The launcher
# then exits 128 + 10; the job requeues itself all the same, and the second run, train itself,
# finishes.
mkdir -p "$work/job6" && cd "$work/job6"
cat >"$work/job6/starting.sh" <<SH
#!/bin/bash
if [[ \${SLURM_RESTART_COUNT:-0} == 0 ]]; then
  echo "rank \${SLURM_PROCID} starting"
  exec sleep 300
fi
exec "$train" "\$@"
SH
chmod +x "$work/job6/starting.sh"
job=$(COHORT_PROGRAM=$work/job6/starting.sh COHORT_TRAIN_STEPS=60 sbatch --parsable \
        "$src/slurm/single_node.sbatch")
out=$work/job6/cohort-$job.out
while :; do
  started_ranks=$(grep -c '^rank [0-7] starting$' "$out" 2>/dev/null) || true
  ((${started_ranks:-0} == 8)) && break
  ((SECONDS < deadline)) || fail "job $job: its 8 ranks did not start"
  sleep 0.25
done
scancel --signal=USR1 --batch "$job"
while [[ -n $(squeue -h -j "$job" -o %i 2>/dev/null) ]]; do
  ((SECONDS < deadline)) || fail "job $job did not end after its requeue"
  sleep 0.5
done
cat "$out"
grep -q "^cohort: the walltime warning ended the ranks before they checkpointed; requeueing job $job$" "$out" ||
  fail "job $job: the launcher's exit on SIGUSR1 did not requeue the job"
grep -q "^cohort: job $job, run 2," "$out" || fail "job $job did not run a second time"
check_finished 60
log "the warning during start-up: the ranks ended on SIGUSR1, the job requeued, run 2 trained 60 steps"

# ---- 7. A sweep as a job array: each task appends its line of COHORT_ARRAY_ARGS to the
# arguments and keeps its checkpoints in a directory of its own under the array's.
mkdir -p "$work/job7" && cd "$work/job7"
printf -- '--train_steps=20\n--train_steps=30 --learning_rate=0.02\n' >sweep.txt
job=$(COHORT_ARRAY_ARGS=$work/job7/sweep.txt COHORT_CHECKPOINT_DIR=$work/job7/ckpt \
        sbatch --parsable --array=0-1 "$src/slurm/single_node.sbatch")
while [[ -n $(squeue -h -r -j "$job" -o %i 2>/dev/null) ]]; do
  ((SECONDS < deadline)) || fail "array job $job did not end"
  sleep 0.5
done
cat cohort-*.out
for task in 0 1; do
  steps=$((20 + 10 * task))
  out=$(grep -lE "^final: global step $steps, " cohort-*.out) || fail "no task of array job $job trained $steps steps"
  grep -q "^cohort: job [0-9]* (array $job, task $task), run 1," "$out" ||
    fail "the output of array task $task does not name its task on its first line"
done
# 0.02 times the 8 workers' batches (--lr_scaling), against 0.01 times 8 by default.
grep -q "^momentum 0.9, learning rate 0.16 (--learning_rate times 8 batches" $(grep -lE "^final: global step 30, " cohort-*.out) ||
  fail "array task 1 did not take --learning_rate=0.02 from its line"
[[ -f ckpt/0/model.ckpt-20.safetensors && -f ckpt/1/model.ckpt-30.safetensors ]] ||
  fail "the array's tasks did not checkpoint in ckpt/0 and ckpt/1: $(ls -R ckpt)"
log "job array $job: task 0 trained 20 steps into ckpt/0, task 1 30 steps at its own learning rate into ckpt/1"
log "PASS"
