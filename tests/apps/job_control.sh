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

# Every job this test launches carries this tag in its environment (mpirun hands it to the
# ranks), which tells its ranks from those of other tests running the same program meanwhile.
export COHORT_TEST_JOB_TAG="test-$$-$RANDOM"

# rank_pids JOB PROGRAM [RANK]: the pids of this test's MPI ranks of PROGRAM (JOB is the
# launcher's pid, kept for the callers' sake): those with a rank in their environment (so not
# mpirun) and this test's tag, or of rank RANK only.
rank_pids() {
  local program=$2 want=${3:-[0-9]+} pid environ
  for pid in $(pgrep -f -- "$program"); do
    environ=$(tr '\0' '\n' 2>/dev/null < "/proc/$pid/environ") || continue
    grep -qxF "COHORT_TEST_JOB_TAG=$COHORT_TEST_JOB_TAG" <<<"$environ" || continue
    grep -qxE "OMPI_COMM_WORLD_RANK=$want" <<<"$environ" && echo "$pid"
  done
  return 0
}

# rank_pid JOB PROGRAM RANK WHAT [LOG]: the pid of this test's rank RANK of PROGRAM; where there
# is none, says so naming WHAT (and prints LOG) on stderr, and fails (under set -e, the test).
rank_pid() {
  local pid
  pid=$(rank_pids "$1" "$2" "$3")
  if [ -z "$pid" ]; then
    echo "could not find $4's process" >&2
    [ -z "${5:-}" ] || cat "$5" >&2
    return 1
  fi
  echo "$pid"
}

# end_job_at_exit JOB PROGRAM: however the test exits, JOB and this test's ranks of PROGRAM that
# are still there are killed (a stopped one too, an orphan too), so that a failed test leaves no
# job behind. Replaces the test's EXIT trap.
end_job_at_exit() {
  trap "kill -KILL \$(rank_pids ${1@Q} ${2@Q}) ${1@Q} 2>/dev/null || true" EXIT
}

# stopped_step LOG SIGNAL: the global step of LOG's "stopped by signal SIGNAL at global step N".
stopped_step() {
  sed -nE "s/^stopped by signal $2 at global step ([0-9]+)$/\1/p" "$1" | head -n1
}
