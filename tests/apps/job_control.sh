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

# rank_pids PROGRAM [RANK]: the pids of PROGRAM's MPI ranks (those with a rank in their
# environment, so not mpirun), or of rank RANK only.
rank_pids() {
  local program=$1 want=${2:-[0-9]+} pid
  for pid in $(pgrep -f -- "$program"); do
    if tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -qxE "OMPI_COMM_WORLD_RANK=$want"; then
      echo "$pid"
    fi
  done
}

# stopped_step LOG SIGNAL: the global step of LOG's "stopped by signal SIGNAL at global step N".
stopped_step() {
  sed -nE "s/^stopped by signal $2 at global step ([0-9]+)$/\1/p" "$1" | head -n1
}
