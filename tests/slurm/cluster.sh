# Sourced by the Slurm tests: a real Slurm cluster private to a temporary directory (munged,
# slurmctld and slurmd from Debian's packages, started without systemd), and the helpers the
# tests share.
#
#   . cluster.sh
#   start_cluster                # one node: this machine, under its own host name
#   start_cluster cnode1 cnode2  # two nodes on this machine, each slurmd in namespaces of its own
#
# With names, each slurmd runs in a UTS namespace under its node's name and in a mount namespace
# with a directory of its own bound over the cluster's TmpFS, where Slurm's PMIx plugin keeps
# its per-node files; the nodes share the network, each slurmd on a port of its own. What runs
# on a node (the step daemon, the ranks) inherits the node's namespaces, so MPI sees two hosts:
# shared memory within a node, TCP between them, as on two real machines.
#
# Sets: work (the temporary directory), conf (slurm.conf, also exported as SLURM_CONF), nodes.
# Exits 77 (ctest's SKIP_RETURN_CODE) when not root, when Slurm or munge is not installed, or,
# for named nodes, when namespaces cannot be made; COHORT_REQUIRE_TESTS=1 turns that into a
# failure. COHORT_KEEP_SLURM_TEST=1 keeps the temporary directory (logs, job output,
# checkpoints); it is also kept when the test fails. On exit the test's jobs are cancelled,
# whatever of them is left is killed, and the daemons are stopped by their pids.

. "$(dirname "${BASH_SOURCE[0]}")/../support/skip.sh"

started=$SECONDS
log() { printf '[%3ds] %s\n' $((SECONDS - started)) "$*"; }
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# Pids of the daemons this cluster started, read from their pid files.
daemon_pids() {
  local f
  for f in "$work"/slurmd-*.pid "$work/slurmctld.pid" "$work/munge/munged.pid"; do
    [[ -s $f ]] && cat "$f"
  done
  return 0
}

cleanup() {
  local status=$? pid i
  trap - EXIT
  if [[ -s $work/slurmctld.pid ]]; then
    # Jobs first: slurmd leaves running steps behind when it stops.
    scancel --full $(squeue -h -o %i 2>/dev/null) 2>/dev/null || true
    for ((i = 0; i < 20; i++)); do
      [[ -z $(squeue -h -o %i 2>/dev/null) ]] && break
      sleep 0.5
    done
  fi
  # Whatever of this cluster's jobs outlived the cancel (a step stuck in its cleanup), by pid:
  # step daemons and the ranks of job_program, whose environment names this cluster's slurm.conf.
  local environment
  for pid in $(pgrep -x slurmstepd || true) $( [[ -z ${job_program:-} ]] || pgrep -x "$job_program" || true); do
    environment=$({ tr '\0' '\n' <"/proc/$pid/environ"; } 2>/dev/null) || continue
    if grep -qxF "SLURM_CONF=$conf" <<<"$environment"; then
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  for pid in $(daemon_pids); do
    kill "$pid" 2>/dev/null || true
    for ((i = 0; i < 40; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.25
    done
    kill -KILL "$pid" 2>/dev/null || true
  done
  if ((status != 0)); then
    for f in "$work"/log/*.log "$work"/munge/munged.log; do
      [[ -f $f ]] && { echo "---- last lines of $f"; tail -n 20 "$f"; }
    done
    echo "kept $work for inspection"
  elif [[ ${COHORT_KEEP_SLURM_TEST:-0} == 1 ]]; then
    echo "kept $work"
  else
    rm -rf "$work"
  fi
  exit "$status"
}

# A port nothing listens on, other than those given.
free_port() {
  local port i
  for ((i = 0; i < 100; i++)); do
    port=$((20000 + RANDOM % 30000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && [[ " $* " != *" $port "* ]]; then
      echo "$port"
      return
    fi
  done
  fail "no free port found"
}

# start_cluster [NODE...]: the cluster, up and every node idle, with a partition of all nodes.
# Every node advertises 8 CPUs (more than a CI machine has, so that 8 ranks fit on one node)
# and four fake GPUs (GRES backed by links to /dev/null: no mknod needed in containers).
# job_program: the name of the program the jobs run, whose leftovers the cleanup kills.
start_cluster() {
  nodes=("$@")
  [[ $(id -u) == 0 ]] || skip "the Slurm tests start slurmctld, slurmd and munged and need root"
  local exe
  for exe in /usr/sbin/slurmctld /usr/sbin/slurmd /usr/sbin/munged mungekey sbatch scontrol sinfo \
             squeue scancel srun runuser; do
    command -v "$exe" >/dev/null ||
      skip "$exe not found: install the Debian packages slurmctld slurmd slurm-client munge"
  done
  id munge >/dev/null 2>&1 || skip "no munge user: install the Debian package munge"
  if ((${#nodes[@]})); then
    unshare --uts --mount --propagation private true 2>/dev/null ||
      skip "unshare cannot make UTS and mount namespaces here, to emulate nodes" "it needs root with CAP_SYS_ADMIN"
  fi

  work=$(mktemp -d "${TMPDIR:-/tmp}/cohort-slurm.XXXXXX")
  chmod 755 "$work"  # munged (user munge) needs to reach its directory inside
  mkdir -p "$work"/{state,spool,log,tmp,dev,munge}
  chown munge:munge "$work/munge"
  conf=$work/slurm.conf
  export SLURM_CONF=$conf
  trap cleanup EXIT
  trap "exit 143" TERM INT
  local i
  for i in 0 1 2 3; do ln -s /dev/null "$work/dev/gpu$i"; done

  local host ctld_port node_lines="" ports name
  host=$(hostname -s)
  ctld_port=$(free_port)
  ports=$ctld_port
  if ((${#nodes[@]})); then
    for name in "${nodes[@]}"; do
      i=$(free_port $ports)
      ports+=" $i"
      node_lines+="NodeName=$name NodeAddr=127.0.0.1 Port=$i CPUs=8 Gres=gpu:4 State=UNKNOWN"$'\n'
    done
  else
    node_lines="SlurmdPort=$(free_port $ports)"$'\n'"NodeName=$host NodeAddr=127.0.0.1 CPUs=8 Gres=gpu:4 State=UNKNOWN"$'\n'
  fi
  cat >"$conf" <<CONF
ClusterName=cohortci
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
# A requeued job waits out the credential lifetime before it runs again (120 s by default).
AuthInfo=socket=$work/munge/munge.sock,cred_expire=5
MpiDefault=pmix
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
ReturnToService=2
EnforcePartLimits=ALL
# Advertise more CPUs than the machine has, so that 8 ranks fit on a small CI machine.
SlurmdParameters=config_overrides
# Schedule at once; forget finished jobs soon (keeps sbatch --wait polling every 2 s).
SchedulerParameters=sched_interval=1,bf_interval=1
MinJobAge=4
# Seconds between SIGTERM and SIGKILL when a job is cancelled: time to checkpoint.
KillWait=10
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool/%n
TmpFS=$work/tmp
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd-%n.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd-%n.log
MailProg=/bin/true
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
${node_lines}PartitionName=ci Nodes=ALL Default=YES OverSubscribe=YES MaxTime=INFINITE State=UP
CONF
  cat >"$work/gres.conf" <<CONF
AutoDetect=off
Name=gpu File=$work/dev/gpu[0-3]
CONF

  runuser -u munge -- mungekey --create --keyfile="$work/munge/munge.key"
  runuser -u munge -- /usr/sbin/munged --socket="$work/munge/munge.sock" \
    --key-file="$work/munge/munge.key" --pid-file="$work/munge/munged.pid" \
    --log-file="$work/munge/munged.log" --seed-file="$work/munge/seed"
  /usr/sbin/slurmctld -f "$conf"
  if ((${#nodes[@]})); then
    for name in "${nodes[@]}"; do
      mkdir -p "$work/spool/$name" "$work/tmp-$name"
      unshare --uts --mount --propagation private bash -c \
        'mount --bind "$1" "$2" && hostname "$3" && exec /usr/sbin/slurmd -f "$4"' \
        slurmd "$work/tmp-$name" "$work/tmp" "$name" "$conf"
    done
  else
    mkdir -p "$work/spool/$host"
    /usr/sbin/slurmd -f "$conf"
  fi
  local state="" want
  want=$(printf 'idle\n%.0s' $(seq "$((${#nodes[@]} ? ${#nodes[@]} : 1))"))
  for ((i = 0; i < 120; i++)); do
    state=$(sinfo -h -N -o %t 2>/dev/null || true)
    [[ $state == "${want%$'\n'}" ]] && break
    sleep 0.25
  done
  [[ $state == "${want%$'\n'}" ]] || fail "the nodes did not become idle (states: $(echo $state))"
  srun --mpi=list 2>&1 | grep -qw pmix || fail "Slurm has no pmix MPI plugin"
  log "Slurm is up: node(s) $(sinfo -h -N -o %N | tr '\n' ' ')(slurmctld port $ctld_port)"

  # Eight ranks on a machine with fewer cores must yield when idle; mpirun refuses root without these.
  export OMPI_MCA_mpi_yield_when_idle=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  unset COHORT_CHECKPOINT_DIR COHORT_MODEL COHORT_MODE COHORT_PS_TASKS COHORT_TRAIN_STEPS

  # Every wait ends by this deadline, leaving time for the cleanup within ctest's timeout.
  deadline=$((SECONDS + ${COHORT_SLURM_TEST_BUDGET:-240}))
}

time_left() {
  local left=$((deadline - SECONDS))
  ((left > 0)) || fail "out of time (COHORT_SLURM_TEST_BUDGET)"
  echo "$left"
}

# submit_and_wait DIR SCRIPT [ARGS...]: `sbatch --wait` in DIR; sets `job`, `out` (the job's output
# file) and `status` (sbatch's exit status: the job's, or 124 at the deadline). sbatch runs in the
# background so that a SIGTERM (from ctest) is handled at once, not when sbatch returns.
submit_and_wait() {
  local dir=$1 pid
  shift
  mkdir -p "$dir" && cd "$dir"
  status=0
  timeout "$(time_left)" sbatch --wait --parsable "$@" >sbatch.out 2>sbatch.err &
  pid=$!
  wait "$pid" || status=$?
  job=$(head -n1 sbatch.out)
  [[ $job =~ ^[0-9]+$ ]] || { cat sbatch.err; fail "sbatch $* did not submit"; }
  out=$dir/cohort-$job.out
  [[ -f $out ]] && cat "$out"
  return 0
}

# submit_in_background DIR SCRIPT [ARGS...]: `sbatch --wait` in DIR, in the background (its pid in
# `waiter`), once it has printed the job's id; sets `job` and `out`. `wait "$waiter"` then waits
# through the job's requeues.
submit_in_background() {
  local dir=$1
  shift
  mkdir -p "$dir" && cd "$dir"
  timeout "$(time_left)" sbatch --wait --parsable "$@" >sbatch.out 2>sbatch.err &
  waiter=$!
  until [[ -s sbatch.out ]]; do  # sbatch prints the job id before it waits
    kill -0 "$waiter" 2>/dev/null || { cat sbatch.err; fail "sbatch $* did not submit"; }
    sleep 0.1
  done
  job=$(head -n1 sbatch.out)
  out=$dir/cohort-$job.out
}

# wait_for_output PATTERN: until the job's output matches (training is under way).
wait_for_output() {
  while ! grep -qE "$1" "$out" 2>/dev/null; do
    ((SECONDS < deadline)) || fail "job $job: no output matching '$1'"
    sleep 0.25
  done
}

# check_requeued SLACK: the job's chief stopped on the walltime warning (SIGUSR1) at a global step,
# the job requeued itself, ran again, and that run restored a checkpoint of that step or of up to
# SLACK steps more (in async mode the chief's checkpoint may count the pushes of workers that
# stopped after it); sets `stopped` and `restored`.
check_requeued() {
  stopped=$(sed -nE 's/^stopped by signal 10 at global step ([0-9]+)$/\1/p' "$out" | head -n1)
  [[ -n $stopped ]] || fail "$out: the chief did not stop on the warning"
  grep -q "requeueing job $job" "$out" || fail "job $job did not requeue itself after the warning"
  grep -q "^cohort: job $job, run 2," "$out" || fail "job $job did not run a second time"
  restored=$(sed -nE 's/^restored from .* at global step ([0-9]+)$/\1/p' "$out" | head -n1)
  [[ -n $restored ]] && ((restored >= stopped && restored <= stopped + $1)) ||
    fail "$out: the requeued run did not restore a checkpoint of the step it stopped at, $stopped (restored: '$restored')"
}

# check_finished STEPS: the job's last run trained to global step STEPS (a regex) and printed a
# test accuracy above 0.5 (chance is 0.1); sets `accuracy`.
check_finished() {
  accuracy=$(sed -nE "s/^final: global step $1, test accuracy ([0-9.]+),.*/\1/p" "$out" | tail -n1)
  [[ -n $accuracy ]] || fail "$out: no 'final: global step $1, test accuracy ...'"
  awk -v a="$accuracy" 'BEGIN { exit !(a > 0.5) }' || fail "$out: test accuracy $accuracy is not above 0.5"
}
