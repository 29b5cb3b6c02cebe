# Sourced by the tests that run the example programs on data of their own (user_data_test.sh,
# images_test.sh, tfrecord_test.sh, denoise_test.sh, ...). The caller sets $mpiexec and $np_flag.

# run_job PROGRAM NAME NP ARGS...: PROGRAM on NP ranks (oversubscribed, at most 120 s), its
# output in NAME.log and printed; returns the job's status.
run_job() {
  local program=$1 name=$2 np=$3
  shift 3
  local start=$SECONDS status=0
  timeout 120 "$mpiexec" "$np_flag" "$np" --oversubscribe "$program" --print_cluster=false "$@" \
    > "$name.log" 2>&1 || status=$?
  cat "$name.log"
  echo "($name: status $status after $((SECONDS - start)) s)"
  return $status
}

# expect_job_failure PROGRAM NAME REGEX WORKERS ARGS...: PROGRAM on 3 ranks fails within 20 s,
# each worker of WORKERS (indices, e.g. "0 1 2") saying REGEX in one line; where all three fail
# alike, rank 0 may say it once for all.
expect_job_failure() {
  local program=$1 name=$2 regex=$3 workers=$4
  shift 4
  local start=$SECONDS
  if run_job "$program" "$name" 3 "$@"; then echo "$name: the job succeeded"; exit 1; fi
  (( SECONDS - start <= 20 )) || { echo "$name: the job took $((SECONDS - start)) s to end"; exit 1; }
  if [[ $workers == "0 1 2" ]] && grep -qE "^\[all 3 ranks\] error: $regex\$" "$name.log"; then
    if grep -qE "^\[worker:[0-9] rank [0-9]\] error:" "$name.log"; then
      echo "$name: said once for all ranks, and again by a rank"; exit 1
    fi
    return 0
  fi
  for w in $workers; do
    grep -qE "^\[worker:$w rank $w\] error: $regex\$" "$name.log" \
      || { echo "$name: worker $w did not report: $regex"; exit 1; }
  done
}

# json_value FILE KEY: a value from a JSON file the chief wrote (--metrics_json).
json_value() {
  /usr/bin/python3 -c "import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"
}

# at_most VALUE BAR / at_least VALUE BAR: the comparison holds (floats).
at_most() { /usr/bin/python3 -c "import sys; sys.exit(0 if $1 <= $2 else 1)"; }
at_least() { /usr/bin/python3 -c "import sys; sys.exit(0 if $1 >= $2 else 1)"; }
