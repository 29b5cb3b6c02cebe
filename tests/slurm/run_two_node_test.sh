#!/usr/bin/env bash
# Tests slurm/multi_node.sbatch on a real Slurm of two nodes, emulated on this machine
# (cluster.sh: each slurmd in a UTS and a mount namespace of its own, so that the ranks of each
# node share memory and reach the other node's over TCP, as on two machines):
#   1. the script as it stands (allreduce, 4 ranks on each node): training finishes, the ranks
#      are spread 4 and 4 over the two nodes, the gradients are summed in each node's shared
#      memory and across the nodes, and the chief's checkpoint is in the submit directory;
#   2. COHORT_MODE=async COHORT_PS_TASKS=2, the script's second example: one ps task on each node;
#      the walltime warning while it trains: every rank on both nodes stops, the job
#      checkpoints, requeues itself, and the second run resumes from the checkpoint and finishes;
#   3. a rank of the second node killed (SIGKILL) while the job trains in sync mode: the whole job
#      ends with a non-zero status within seconds (srun --kill-on-bad-exit; the ps task serves on
#      after Slurm's SIGTERM, for a chief's checkpoint, until KillWait, 10 s here, ends it), and
#      no rank is left on either node.
# Usage: run_two_node_test.sh SOURCE_DIR TRAIN_PROGRAM
# Skips (exit 77) as cluster.sh says; COHORT_KEEP_SLURM_TEST=1 keeps the temporary directory.
set -euo pipefail
src=$(cd "$1" && pwd)
train=$(realpath "$2")

. "$(dirname "$0")/cluster.sh"
job_program=${train##*/}
start_cluster cnode1 cnode2
export COHORT_PROGRAM=$train COHORT_LAUNCHER=srun

# The cluster table's node of each rank of JOB_KIND ("worker" or "ps"), one line each.
nodes_of() { awk -v kind="$1" '$1 == kind && $4 ~ /^cnode[12]$/ { print $4 }' "$out"; }

# ---- 1. The script as it stands.
submit_and_wait "$work/job1" "$src/slurm/multi_node.sbatch" --train_steps=200 --log_every_steps=100
((status == 0)) || fail "sbatch --wait multi_node.sbatch exited with status $status"
grep -q "^cohort: job $job, run 1, 8 ranks on 2 node(s) (cnode\[1-2\])" "$out" ||
  fail "$out: the job did not get 8 ranks on the two nodes"
grep -q "^cluster: 8 tasks on 2 nodes$" "$out" || fail "$out: the ranks do not see two nodes"
spread=$(nodes_of worker | sort | uniq -c | awk '{ printf "%s:%s ", $2, $1 }')
[[ $spread == "cnode1:4 cnode2:4 " ]] || fail "$out: the workers are spread '$spread', not 4 on each node"
grep -q "summed in each node's shared memory" "$out" ||
  fail "$out: the gradients were not summed in each node's shared memory, then across the nodes"
check_finished 200
ls checkpoints/"$job"/model.ckpt-200.safetensors >/dev/null ||
  fail "no model.ckpt-200.safetensors in checkpoints/$job"
log "multi_node.sbatch: allreduce, 4 workers on each node, 200 steps, test accuracy $accuracy"

# ---- 2. Two ps tasks, one on each node, and the walltime warning: a requeue across both nodes.
steps=10000
COHORT_MODE=async COHORT_PS_TASKS=2 COHORT_TRAIN_STEPS=$steps \
  submit_in_background "$work/job2" "$src/slurm/multi_node.sbatch" --log_every_steps=100
wait_for_output "^step [1-9][0-9]*/$steps "
scancel --signal=USR1 --batch "$job"
log "sent the walltime warning to job $job (async, 2 ps + 6 workers on two nodes)"
status=0
wait "$waiter" || status=$?
cat "$out"
((status == 0)) || fail "sbatch --wait of the requeued job exited with status $status"
ps_nodes=$(nodes_of ps | head -n2 | tr '\n' ' ')
[[ $ps_nodes == "cnode1 cnode2 " ]] || fail "$out: the two ps tasks are on '$ps_nodes', not one on each node"
grep -q "mode async, 6 workers" "$out" || fail "$out: the job did not train with 2 ps tasks and 6 workers"
check_requeued 40
grep -q "^cohort: job $job, run 2, 8 ranks on 2 node(s)" "$out" || fail "job $job did not run a second time on two nodes"
check_finished "1[0-9]{4}"
log "requeue on two nodes: stopped at step $stopped, restored step $restored, finished with test accuracy $accuracy"

# ---- 3. A rank of the second node killed while the job trains: the job ends within seconds.
COHORT_MODE=sync COHORT_TRAIN_STEPS=100000 \
  submit_in_background "$work/job3" "$src/slurm/multi_node.sbatch" --log_every_steps=100
wait_for_output "^step [1-9][0-9]*/100000 "
victim=""
for pid in $(pgrep -x "$job_program"); do
  environment=$({ tr '\0' '\n' <"/proc/$pid/environ"; } 2>/dev/null) || continue
  if grep -qxF "SLURM_JOB_ID=$job" <<<"$environment" && grep -qxF "SLURMD_NODENAME=cnode2" <<<"$environment"; then
    victim=$pid
    break
  fi
done
[[ -n $victim ]] || fail "job $job: no rank of it found on cnode2"
killed_at=$SECONDS
kill -KILL "$victim"
log "killed rank pid $victim of job $job on cnode2"
status=0
wait "$waiter" || status=$?
took=$((SECONDS - killed_at))
cat "$out"
((status != 0 && status != 124)) || fail "job $job: sbatch --wait exited with status $status after a rank was killed"
((took <= 30)) || fail "job $job took $took s to end after a rank was killed"
left=""
for pid in $(pgrep -x "$job_program"); do
  { tr '\0' '\n' <"/proc/$pid/environ"; } 2>/dev/null | grep -qxF "SLURM_JOB_ID=$job" && left+=" $pid"
done
[[ -z $left ]] || fail "job $job: ranks left running after it ended:$left"
log "a rank killed on cnode2: the job ended $took s later with status $status, no rank left"
log "PASS"
