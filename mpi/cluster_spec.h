#pragma once
// The ClusterSpec-to-communicator layer: which MPI rank runs which task of which job.

#include <string>
#include <utility>
#include <vector>

#include "cohort/mpi/comm.h"

namespace cohort::mpi {

/// One task of one job, e.g. {"worker", 1}.
struct TaskId {
  std::string job;
  int index = -1;

  /// "worker:1".
  std::string to_string() const;
  bool operator==(const TaskId&) const = default;
};

/// The jobs of a training cluster, each a list of tasks, each task bound to one rank of a
/// communicator ("the world"; usually MPI_COMM_WORLD, any communicator works).
///
/// Job names: "chief" (at most one task; when present it is the chief instead of worker 0),
/// "ps" (parameter servers), "worker" (at least one task, unless a chief task trains alone) and
/// "evaluator". Any other name is refused, so that a typo fails at start-up instead of making an
/// idle job. The jobs are kept in that fixed order, whatever order they were given in, so that
/// every way of building a spec gives the same spec; jobs with no tasks are left out.
///
/// The three builders are collective over `world` and agree across ranks before validating:
/// every rank ends with the same spec, or every rank throws the same InvalidArgument (never a
/// hang). Each spec owns a duplicate of the world (so Cohort's traffic has its own context) and a
/// communicator per job. Move-only; the accessors are const and safe to call from any thread.
class ClusterSpec {
 public:
  using JobList = std::vector<std::pair<std::string, std::vector<int>>>;

  /// Collective. The first `ps_tasks` tasks are parameter servers, the rest workers (task index
  /// in rank order). ps tasks are spread round-robin over the nodes (found with split_shared()),
  /// each taking its node's lowest free rank: on one node, ps:i is rank i. Throws
  /// InvalidArgument if ps_tasks is negative, leaves no worker, or differs between ranks.
  static ClusterSpec from_counts(const Comm& world, int ps_tasks);
  /// Collective (MPMD launch: `mpirun -np 1 prog --job_name=ps : -np 2 prog --job_name=worker`).
  /// Each rank names its own job; a task's index is the order of its rank within the job.
  static ClusterSpec from_job_names(const Comm& world, const std::string& my_job);
  /// Collective. An explicit spec: job name -> ranks of its tasks, in task order. Every rank must
  /// pass the same list, with each rank of `world` in exactly one task.
  static ClusterSpec from_ranks(const Comm& world, const JobList& jobs);

  ClusterSpec(ClusterSpec&&) noexcept = default;
  ClusterSpec& operator=(ClusterSpec&&) noexcept = default;
  ClusterSpec(const ClusterSpec&) = delete;
  ClusterSpec& operator=(const ClusterSpec&) = delete;
  ~ClusterSpec() = default;

  /// The jobs with at least one task, in the order chief, ps, worker, evaluator.
  const std::vector<std::string>& job_names() const { return job_names_; }
  bool has_job(const std::string& job) const;
  /// Number of tasks of `job`; 0 if there is no such job.
  int num_tasks(const std::string& job) const;
  /// Total number of tasks (= ranks of the world).
  int size() const { return static_cast<int>(tasks_.size()); }
  /// The rank running `job`:`task`. Throws InvalidArgument if there is no such task.
  int rank_of(const std::string& job, int task) const;
  int rank_of(const TaskId& task) const { return rank_of(task.job, task.index); }
  /// The task run by `rank`. Throws InvalidArgument if the rank is out of range.
  const TaskId& task_of(int rank) const;
  /// The ranks of `job`'s tasks, in task order (empty if there is no such job).
  const std::vector<int>& ranks_of(const std::string& job) const;
  /// This process's task and rank (in world()).
  const TaskId& my_task() const { return tasks_.at(static_cast<std::size_t>(my_rank_)); }
  int my_rank() const { return my_rank_; }
  /// The host name of `rank` (MPI_Get_processor_name).
  const std::string& node_of(int rank) const;

  /// A duplicate of the world given to the builder, owned by the spec; ranks are the same.
  const Comm& world() const { return world_; }
  /// The communicator of this rank's job; its rank is the task index.
  const Comm& job_comm() const { return job_comm_; }

  /// One line per task, in job then task order: job, task, rank, node.
  std::string table() const;
  /// The spec as text, e.g. "ps:[0] worker:[1,2]"; identical on every rank.
  std::string to_string() const;

 private:
  ClusterSpec() = default;
  static ClusterSpec build(const Comm& world, JobList jobs);

  Comm world_;
  Comm job_comm_;
  std::vector<std::string> job_names_;
  JobList jobs_;                    // job_names_ order, ranks in task order
  std::vector<TaskId> tasks_;       // by rank
  std::vector<std::string> nodes_;  // by rank
  int my_rank_ = -1;
};

/// The job names a ClusterSpec accepts, in its order: chief, ps, worker, evaluator.
const std::vector<std::string>& known_job_names();

}  // namespace cohort::mpi
