# Sourced by the tests that signal or kill a running job (restart_test.sh, signal_*test.sh).

# wait_for_line LOG REGEX JOB [TRIES]: waits (0.05 s a try, 600 tries unless given) until a line of
# LOG matches the extended REGEX; fails the test, printing LOG, if JOB ends first or no line
# matches in time.
wait_for_line() {
  local log=$1 regex=$2 job=$3 tries=${4:-600}
  for _ in $(seq 1 "$tries"); do
    grep -qE "$regex" "$log" && return 0
    kill -0 "$job" 2>/dev/null || { echo "the job ended before a line matched '$regex'"; cat "$log"; exit 1; }
    sleep 0.05
  done
  echo "no line matched '$regex' in $log after $((tries / 20)) s"
  cat "$log"
  exit 1
}

# descends_from PID ANCESTOR: whether ANCESTOR is PID or one of its ancestors.
descends_from() {
  local pid=$1
  while [[ -n $pid && $pid -gt 1 ]]; do
    [[ $pid == "$2" ]] && return 0
    pid=$(ps -o ppid= -p "$pid" 2>/dev/null | tr -d ' ') || return 1
  done
  return 1
}

# rank_pids JOB PROGRAM [RANK]: the pids of PROGRAM's MPI ranks that JOB (the launcher's pid)
# started (other tests may run the same program at the same time), those with a rank in their
# environment (so not mpirun), or of rank RANK only.
rank_pids() {
  local job=$1 program=$2 want=${3:-[0-9]+} pid
  for pid in $(pgrep -f -- "$program"); do
    descends_from "$pid" "$job" || continue
    if tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -qxE "OMPI_COMM_WORLD_RANK=$want"; then
      echo "$pid"
    fi
  done
}

# end_job_at_exit JOB PROGRAM: however the test exits, JOB and its ranks of PROGRAM that are still
# there are killed (a stopped one too), so that a failed test leaves no job behind.
end_job_at_exit() {
  trap "kill -KILL \$(rank_pids '$1' '$2') '$1' 2>/dev/null || true" EXIT
}

# stopped_step LOG SIGNAL: the global step of LOG's "stopped by signal SIGNAL at global step N".
stopped_step() {
  sed -nE "s/^stopped by signal $2 at global step ([0-9]+)$/\1/p" "$1" | head -n1
}
