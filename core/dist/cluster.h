#pragma once
// Building the ClusterSpec from the command line.
//
//   mpirun -np 4 ./train --ps_tasks=1                            # by counts: ps:0 = rank 0
//   mpirun -np 1 ./train --job_name=ps : -np 3 ./train --job_name=worker       # MPMD
//   mpirun -np 4 ./train --cluster_spec='{"ps":[0],"worker":[1,2,3]}'          # explicit
//
// Flags (defined in cluster.cc): --cluster_spec, --job_name, --task_index, --ps_tasks,
// --print_cluster.

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "cohort/mpi/cluster_spec.h"
#include "cohort/mpi/comm.h"

namespace cohort {

using mpi::ClusterSpec;
using mpi::TaskId;

/// How to build the cluster; cluster_options_from_flags() fills it from the command line.
struct ClusterOptions {
  /// Explicit spec (see parse_cluster_spec_json), or the path of a file holding it. Wins if set.
  std::string cluster_spec;
  /// This rank's job. Without cluster_spec: the MPMD builder (every rank names its job). With
  /// cluster_spec: a check that the spec gives this rank a task of that job.
  std::string job_name;
  /// With job_name: a check of this rank's task index; -1 leaves it unchecked.
  int task_index = -1;
  /// Without cluster_spec and job_name: the number of ps tasks, the rest are workers.
  int ps_tasks = 0;
};

/// Not collective. The options given by --cluster_spec, --job_name, --task_index, --ps_tasks.
ClusterOptions cluster_options_from_flags();

/// Collective over `world`. Builds the cluster: from options.cluster_spec if given, else from
/// options.job_name (MPMD) if given, else from options.ps_tasks. Every rank ends with the same
/// spec, or every rank throws the same InvalidArgument: ranks that disagree on the way to build
/// it, a bad spec, --ps_tasks combined with another way, a job or task index that does not match
/// the rank's task. Prints nothing and sets no process label.
ClusterSpec build_cluster(const mpi::Comm& world, const ClusterOptions& options);

/// Collective over MPI_COMM_WORLD. build_cluster() from the flags; then labels this process
/// "worker:1 rank 3" in error messages (set_process_label), and, unless --print_cluster=false,
/// rank 0 prints the task table to stdout.
ClusterSpec cluster_from_flags();

/// Not collective. Parses an explicit spec into (job, ranks) pairs, in the order the jobs appear:
/// - ranks:      {"ps":[0,1],"worker":[2,3,4,5]}
/// - TF_CONFIG:  {"cluster":{"ps":["h1:2222"],"worker":["h2:2222","h3:2222"]},"task":{...}}
///   or the bare cluster dict {"ps":["h1:2222"],"worker":[...]}. The host:port entries only count
///   tasks: they are bound to ranks 0, 1, 2, ... in the order the jobs and entries appear (above:
///   ps:0 -> rank 0, worker:0 -> rank 1, worker:1 -> rank 2). Keys beside "cluster" ("task",
///   "environment") are ignored: a rank's task comes from its rank.
/// Job names are checked later by ClusterSpec. Throws InvalidArgument quoting the text for bad
/// JSON, a value that is not a list, entries that are neither ranks nor strings, a mix of the
/// two forms, or more host:port entries than `world_size`. `addresses`, when given, receives
/// each host:port entry by the rank it was bound to, and `ignored` the keys beside "cluster".
std::vector<std::pair<std::string, std::vector<int>>> parse_cluster_spec_json(
    const std::string& text, int world_size, std::map<int, std::string>* addresses = nullptr,
    std::vector<std::string>* ignored = nullptr);

}  // namespace cohort
