#pragma once
// A task's server: its identity in the cluster, the replicas that train, the memory the ps tasks
// host for them, and the task's lifetime (done, join).
//
//   ClusterSpec cluster = cluster_from_flags();
//   Server server(cluster);                 // collective
//   if (server.job_name() == "ps") { server.join(); return 0; }   // serves, then returns
//   ... train ...
//   server.done();                          // or let the destructor say it

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cohort/core/dist/cluster.h"
#include "cohort/mpi/comm.h"
#include "cohort/mpi/request.h"
#include "cohort/mpi/window.h"

namespace cohort {

/// One-sided memory the ps tasks hold for the computing tasks, made by Server::host(): a window
/// of floats and a window of 64-bit counters over the training tasks (the ps and computing tasks;
/// not the evaluators). Target ranks are ranks in those windows: ps_ranks[p] is ps task p's.
/// Owned by the Server; valid until it frees them (see Server::host).
struct HostedMemory {
  mpi::Window<float>& values;
  mpi::Window<std::int64_t>& counters;
  std::vector<int> ps_ranks;
};

/// One task's server.
///
/// Jobs: "worker" and "chief" tasks compute (the replicas; with a chief job, as in TensorFlow's
/// TF_CONFIG, the chief is replica 0 and worker i is replica i + 1, else worker i is replica i);
/// "ps" tasks host memory for them; "evaluator" tasks only follow training. Computing tasks call
/// done() when they finish; the others join(), which returns once every computing task has.
/// Control messages travel on the server's own communicator (a duplicate of cluster.world()), so
/// they never mix with other traffic.
///
/// Construction is collective over cluster.world() (every rank makes its Server, in the same
/// order as its other collectives). A Server given a ClusterSpec it may keep (a temporary:
/// `Server server(cluster_from_flags())`, or std::move(cluster)) keeps it, as TensorFlow's
/// Server keeps its own copy; given a named one it refers to it, which must outlive the Server.
/// Not copyable; movable. Not thread-safe: main thread only.
class Server {
 public:
  /// Collective. The job and task are this rank's in `cluster`.
  explicit Server(const ClusterSpec& cluster);
  explicit Server(ClusterSpec&& cluster);
  /// Collective. If any rank is not the `job`:`task` it names, every rank throws
  /// InvalidArgument (naming the first such rank).
  Server(const ClusterSpec& cluster, const std::string& job, int task);
  Server(ClusterSpec&& cluster, const std::string& job, int task);

  Server(Server&&) noexcept;
  Server& operator=(Server&&) = delete;
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  /// A computing task that has not called done() calls it here, so that a worker returning from
  /// main still lets the other tasks finish; a non-computing task first serves, as join() does,
  /// until every done() has arrived (no message may outlive the control communicator). While an
  /// exception unwinds through it, it does neither (app::Run is about to end the job) and leaves
  /// the hosted memory to MPI_Abort. An error (a task that never came) is printed and ends the
  /// job (MPI_Abort), since a destructor cannot throw it.
  ~Server();

  const std::string& job_name() const { return task_.job; }
  int task_index() const { return task_.index; }
  const TaskId& task() const { return task_; }
  /// The chief: the "chief" task if the cluster has that job, else worker 0 (replica 0 either
  /// way). Only it initialises or restores the parameters and writes checkpoints and summaries.
  bool is_chief() const { return replica_ == 0; }
  /// True for tasks that compute and call done(): jobs "worker" and "chief".
  bool is_computing() const { return replica_ >= 0; }
  /// This server's name, e.g. "mpi://worker/0@rank2".
  std::string target() const;
  /// This task's device prefix, e.g. "/job:worker/task:0".
  std::string worker_device() const;
  const ClusterSpec& cluster() const { return *cluster_; }

  /// This task's index among the replicas (-1 on a task that does not compute), their number,
  /// each one's task and world rank, and a communicator of them with ranks in replica order
  /// (null on other tasks).
  int replica_index() const { return replica_; }
  int num_replicas() const { return static_cast<int>(replica_ranks_.size()); }
  const TaskId& replica_task(int replica) const;
  int replica_rank(int replica) const;
  const mpi::Comm& replicas() const { return replicas_; }

  /// Collective over the computing tasks; the ps tasks take part from join(). Makes the memory
  /// the ps tasks host: ps task p holds value_sizes[p] floats and counter_sizes[p] counters,
  /// zeroed; computing tasks hold none. Only the chief's sizes are read (one entry per ps task;
  /// other tasks pass empty spans). The memory lives until every computing task is done: done()
  /// frees it (collectively, waiting for the other training tasks) and join() on the ps tasks
  /// too. Throws InvalidArgument without ps tasks, or on a task that does not compute.
  HostedMemory host(std::span<const std::int64_t> value_sizes,
                    std::span<const std::int64_t> counter_sizes);

  /// How the hosted memory is reached: "one-sided (MPI_Win_allocate)", or "served by messages
  /// (...)" with the reason, where MPI has no one-sided transport (see mpi::Window); "" before
  /// any memory was hosted. Kept after the memory is freed.
  std::string memory_transport() const;
  /// Whether that memory is one-sided windows (false where served by messages, or before host()).
  /// The same on every training task: the windows agree when they are made.
  bool memory_is_one_sided() const { return one_sided_; }
  /// Blocking; for non-computing tasks (ps, evaluator). Serves (makes the memory the chief asks
  /// for) until every computing task has called done() (returns at once if they all have), then
  /// frees that memory. While it waits it sleeps a couple of milliseconds at a time and probes
  /// for messages in between: a core stays idle, and MPI keeps making progress for one-sided
  /// traffic aimed at this rank. Where the memory is served by messages, it answers the requests
  /// as they come, and sleeps only once they pause. A stop signal (SIGTERM, SIGUSR1) is reported once and otherwise
  /// ignored: the computing tasks stop on it, and this task serves them until they are done.
  /// `timeout` 0 means wait forever; on expiry it throws Error naming
  /// the tasks not yet done. May be called again after a timeout. Throws InvalidArgument on a
  /// computing task.
  void join(std::chrono::milliseconds timeout = std::chrono::milliseconds::zero());

  /// Non-blocking; for non-computing tasks that work while training runs (an evaluator): takes
  /// the messages that have arrived and says whether every computing task is done. join()
  /// afterwards returns at once. Throws InvalidArgument on a computing task or a ps task (which
  /// must serve from join()).
  bool training_done();

  /// For computing tasks (worker, chief). Tells every ps and evaluator task that this task is
  /// finished; then, if memory is hosted, frees it together with the other training tasks
  /// (blocking until they are all done too, at most StallWatch::timeout(), then throwing an
  /// Error naming those not come; without that deadline after leave_early()). Calling it again
  /// does nothing. Throws InvalidArgument on other tasks.
  void done();

  /// For computing tasks that leave training while the others train on (a stop signal of their
  /// own, in the ps modes): done() then waits for the others with no deadline, since they may
  /// train for hours yet (their own waits keep theirs).
  void leave_early() { left_early_ = true; }

  /// For computing tasks, after an error in this task's session (a replication's abandon()):
  /// done() then tells the ps tasks but leaves the hosted memory to the job's end instead of
  /// freeing it with the other training tasks, which may train on for hours; the job must then
  /// end with this task's failure (app::Run aborts it: mpi::Environment::left_behind()).
  void abandon() { abandoned_ = true; }

  /// The computing tasks whose done() this server has received (in join()), in rank order.
  std::vector<TaskId> tasks_done() const;

 private:
  struct Hosted;
  // The constructors' work: `owned`, the ClusterSpec the Server keeps, or none, and `cluster`,
  // the one it refers to; `job` null: this rank's own job and task.
  Server(std::unique_ptr<const ClusterSpec> owned, const ClusterSpec* cluster, const std::string* job,
         int task);
  void serve(std::chrono::milliseconds timeout);
  bool receive_messages();
  void make_hosted(std::span<const std::int64_t> value_sizes,
                   std::span<const std::int64_t> counter_sizes);
  void free_hosted();
  std::vector<int> pending() const;

  std::unique_ptr<const ClusterSpec> owned_cluster_;  // given by value; null when referred to
  const ClusterSpec* cluster_;  // owned_cluster_, or the one given by reference
  TaskId task_;
  mpi::Comm control_;
  mpi::Comm training_;                 // ps and computing tasks, in world order; null elsewhere
  mpi::Comm replicas_;                 // computing tasks, in replica order; null elsewhere
  std::vector<int> replica_ranks_;     // world rank of each replica
  int replica_ = -1;
  std::vector<std::vector<std::int64_t>> payloads_;  // host requests in flight
  std::vector<mpi::Request> sends_;  // destroyed (waited for) before the above and control_
  std::vector<bool> done_;           // by rank: its done() message has arrived here
  std::size_t remaining_ = 0;        // computing tasks not done, as seen here
  std::vector<std::unique_ptr<Hosted>> hosted_;
  bool done_sent_ = false;
  bool abandoned_ = false;  // abandon(): the hosted memory is left, not freed
  bool left_early_ = false;  // leave_early(): the others train on
  std::string transport_;  // how the hosted memory is reached (memory_transport())
  bool one_sided_ = false;
  int exceptions_at_start_ = 0;
};

}  // namespace cohort
