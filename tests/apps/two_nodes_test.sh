#!/usr/bin/env bash
# Training across two nodes, emulated on one machine: mpiexec starts its daemons on hosts
# cohort-node-a and cohort-node-b through a remote shell that runs each in a UTS namespace of its
# own under that host name. Open MPI then sees two nodes, each of two ranks: shared memory within
# a node, TCP between them (over loopback here), one daemon per node, as on a cluster. Checks:
#   1. sync mode, 1 ps + 3 workers: the task table names both nodes, the windows (which span the
#      nodes, where Open MPI has no one-sided TCP transport) are served by messages, and the
#      accuracy reaches the bar of the other 300-step runs;
#   2. async mode, 2 ps tasks: one on each node;
#   3. allreduce mode, 4 workers: summed in each node's shared memory and across the nodes.
# Usage: two_nodes_test.sh MPIEXEC TRAIN
# Without UTS namespaces (unshare: root, or user namespaces) or with an MPI other than Open MPI 4
# (whose remote shell is set by OMPI_MCA_plm_rsh_agent) it prints "SKIP: ..." and exits 77; with
# COHORT_REQUIRE_TESTS=1 (CI) that is a failure instead.
set -euo pipefail
mpiexec=$1 train=$2

namespace=""
for candidate in "unshare --uts" "unshare --user --map-root-user --uts"; do
  if $candidate true 2>/dev/null; then
    namespace=$candidate
    break
  fi
done
. "$(dirname "$0")/../support/skip.sh"
[[ -n $namespace ]] ||
  skip "unshare cannot make a UTS namespace here" "it needs root or user namespaces"
"$mpiexec" --version 2>&1 | grep -qE '\(Open(RTE| MPI)\) 4\.' ||
  skip "$mpiexec is not Open MPI 4's, whose remote shell this test replaces"

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# The remote shell: [options] HOST COMMAND..., run here under the name HOST.
cat > "$dir/rsh" <<EOF
#!/usr/bin/env bash
while [[ \$1 == -* ]]; do shift; done
host=\$1
shift
exec $namespace bash -c "hostname \$host && \$*"
EOF
chmod +x "$dir/rsh"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
# run NAME ARGS...: trains across the two nodes and keeps the output in $dir/NAME.log.
run() {
  local name=$1
  shift
  echo "== $name: $*"
  if ! OMPI_MCA_plm_rsh_agent="$dir/rsh" OMPI_MCA_btl_tcp_if_include=lo \
       timeout 90 "$mpiexec" --host cohort-node-a:2,cohort-node-b:2 -np 4 \
       "$train" --model=mlp --train_steps=300 --lr_scaling=none --lr_schedule=constant \
                --log_every_steps=0 "$@" > "$dir/$name.log" 2>&1; then
    cat "$dir/$name.log"
    fail "$name: the run failed"
  fi
  cat "$dir/$name.log"
}
expect() {  # expect NAME REGEX: the log of run NAME matches REGEX (extended)
  grep -Eq "$2" "$dir/$1.log" || fail "$1: no line matches '$2'"
}
accuracy='final: global step 30[0-9], test accuracy 0\.(7[5-9]|8[0-9])'

run sync --ps_tasks=1 --mode=sync
expect sync 'cluster: 4 tasks on 2 nodes'
expect sync '^worker +2 +3 +cohort-node-b$'
expect sync 'parameters on the ps tasks: served by messages'
expect sync "$accuracy"

run async --ps_tasks=2 --mode=async --lr_schedule=cosine  # async: judged decayed, as elsewhere
expect async '^ps +0 +0 +cohort-node-a$'
expect async '^ps +1 +2 +cohort-node-b$'
expect async "$accuracy"

run allreduce --mode=allreduce
expect allreduce 'summed in each node.s shared memory'
expect allreduce "$accuracy"
echo "PASS: sync, async and allreduce modes across two nodes"
