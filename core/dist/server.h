#pragma once
// A task's server: its identity in the cluster, and the ps lifetime (join until the workers are
// done).
//
//   ClusterSpec cluster = cluster_from_flags();
//   Server server(cluster);                 // collective
//   if (server.job_name() == "ps") { server.join(); return 0; }   // serves, then returns
//   ... train ...
//   server.done();                          // or let the destructor say it

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cohort/core/dist/cluster.h"
#include "cohort/mpi/comm.h"
#include "cohort/mpi/request.h"

namespace cohort {

class ParameterStore;

/// One task's server. Tasks of the "worker" and "chief" jobs compute and call done() when they
/// finish; tasks of the other jobs ("ps", "evaluator") join(), which serves until every
/// computing task has called done(). The messages travel on the server's own communicator (a
/// duplicate of cluster.world()), so they never mix with other traffic.
///
/// Serving means: a store header from the chief (send_store_header) makes join() create this
/// task's side of the ParameterStore (collective with the workers' constructor); the store is
/// closed once every worker is done, before join() returns. One store per Server.
///
/// Construction is collective over cluster.world() (every rank makes its Server, in the same
/// order as its other collectives). Destruction waits on ps tasks (see ~Server): destroy the
/// Servers before any collective that a worker still holding its Server would need.
/// `cluster` must outlive the Server. Not copyable; movable. Not thread-safe: main thread only.
class Server {
 public:
  /// Collective. The job and task are this rank's in `cluster`.
  explicit Server(const ClusterSpec& cluster);
  /// Collective. If any rank is not the `job`:`task` it names, every rank throws
  /// InvalidArgument (naming the first such rank).
  Server(const ClusterSpec& cluster, const std::string& job, int task);

  Server(Server&&) noexcept;
  Server& operator=(Server&&) = delete;
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  /// Blocking on ps and evaluator tasks. A computing task that has not called done() calls it
  /// here, so that a worker returning from main still lets the ps tasks finish. A ps or evaluator
  /// task first serves, as join() does, until every done() has arrived: no message may outlive
  /// the control communicator. While an exception unwinds through it, it does neither (app::Run
  /// is about to end the job) and leaves any store unclosed. Errors are ignored.
  ~Server();

  const std::string& job_name() const { return task_.job; }
  int task_index() const { return task_.index; }
  const TaskId& task() const { return task_; }
  /// The chief: the "chief" task if the cluster has that job, else worker 0. Only it initialises
  /// or restores the parameters and writes checkpoints and summaries.
  bool is_chief() const;
  /// True for tasks that compute and call done(): jobs "worker" and "chief".
  bool is_computing() const;
  /// This server's name, e.g. "mpi://worker/0@rank2".
  std::string target() const;
  /// This task's device prefix, e.g. "/job:worker/task:0".
  std::string worker_device() const;
  const ClusterSpec& cluster() const { return *cluster_; }

  /// Blocking; for non-computing tasks (ps, evaluator). Serves until every computing task has
  /// called done() (returns at once if they all have). While it waits it sleeps a couple of
  /// milliseconds at a time and probes for messages in between: a core stays idle, and MPI keeps
  /// making progress for one-sided traffic aimed at this rank. `timeout` 0 means wait forever;
  /// on expiry it throws Error naming the tasks not yet done. May be called again after a
  /// timeout. Throws InvalidArgument on a computing task.
  void join(std::chrono::milliseconds timeout = std::chrono::milliseconds::zero());

  /// Non-blocking; for computing tasks (worker, chief). Tells every ps and evaluator task that
  /// this task is finished. Calling it again does nothing. Throws InvalidArgument on other tasks.
  void done();

  /// Non-blocking; for the chief. Sends `header` (the ParameterStore's description of `rank`'s
  /// share) to the non-computing task at `rank`, whose join() hands it to
  /// ParameterStore::serve(). Throws InvalidArgument for another sender or receiver.
  void send_store_header(int rank, const std::vector<std::int64_t>& header);

  /// The computing tasks whose done() this server has received (in join()), in rank order.
  std::vector<TaskId> tasks_done() const;

 private:
  void serve(std::chrono::milliseconds timeout);

  const ClusterSpec* cluster_;
  TaskId task_;
  mpi::Comm control_;
  std::vector<std::vector<std::int64_t>> payloads_;  // store headers in flight
  std::vector<mpi::Request> sends_;  // destroyed (waited for) before the above and control_
  std::vector<bool> done_;           // by rank: its done() message has arrived here
  std::vector<std::unique_ptr<ParameterStore>> stores_;  // ps side, open until all are done
  bool done_sent_ = false;
  int exceptions_at_start_ = 0;
};

}  // namespace cohort
