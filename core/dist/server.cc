#include "cohort/core/dist/server.h"

#include <algorithm>
#include <climits>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "cohort/core/base/signals.h"
#include "cohort/core/base/stall_watch.h"
#include "cohort/core/base/wait.h"
#include "cohort/mpi/environment.h"
#include "cohort/mpi/error.h"

namespace cohort {
namespace {

constexpr int kDoneTag = 1;
constexpr int kHostTag = 2;
constexpr int kArrivedTag = 3;  // on the training tasks' communicator: at the end, to free memory
// The payload only has to exist: the sender's rank travels in the status.
constexpr std::int32_t kDoneMessage = 1;
constexpr std::int64_t kHostMagic = 0x436f68727448ll;  // identifies a request for hosted memory
// Long enough that waiting costs next to no CPU, short enough that a ps answers promptly and that
// MPI's progress engine runs often (software-emulated accumulates on some fabrics need it).
constexpr std::chrono::milliseconds kPollInterval(2);
// Served windows: the first sleep after the last request (then doubling up to kPollInterval).
constexpr std::chrono::microseconds kFirstIdleSleep(20);

bool computing_job(const std::string& job) { return job == "worker" || job == "chief"; }

}  // namespace

// What one host() call made, on this task: its share of the two windows.
struct Server::Hosted {
  mpi::Window<float> values;
  mpi::Window<std::int64_t> counters;
};

Server::Server(const ClusterSpec& cluster) : Server(nullptr, &cluster, nullptr, 0) {}

Server::Server(ClusterSpec&& cluster)
    : Server(std::make_unique<const ClusterSpec>(std::move(cluster)), nullptr, nullptr, 0) {}

Server::Server(const ClusterSpec& cluster, const std::string& job, int task)
    : Server(nullptr, &cluster, &job, task) {}

Server::Server(ClusterSpec&& cluster, const std::string& job, int task)
    : Server(std::make_unique<const ClusterSpec>(std::move(cluster)), nullptr, &job, task) {}

Server::Server(std::unique_ptr<const ClusterSpec> owned, const ClusterSpec* given,
               const std::string* job_given, int task_given)
    : owned_cluster_(std::move(owned)),
      cluster_(owned_cluster_ ? owned_cluster_.get() : given),
      task_(cluster_->my_task()),
      control_(cluster_->world().dup()),
      done_(static_cast<std::size_t>(cluster_->size()), false),
      exceptions_at_start_(std::uncaught_exceptions()) {
  const ClusterSpec& cluster = *cluster_;
  const std::string& job = job_given != nullptr ? *job_given : task_.job;
  const int task = job_given != nullptr ? task_given : task_.index;
  // Every rank throws if any rank's job or task is wrong: a Server missing on one rank would
  // leave the other tasks waiting for its done() forever.
  const int me = cluster.my_rank();
  const bool mismatch = job != task_.job || task != task_.index;
  const int first = control_.allreduce(mismatch ? me : INT_MAX, mpi::Op::kMin);
  if (first != INT_MAX) {
    const std::string mine = "Server(" + job + ", " + std::to_string(task) + "): rank " +
                             std::to_string(me) + " is " + task_.to_string() +
                             " in the cluster spec";
    throw InvalidArgument(control_.bcast_string(mine, first));
  }
  // The replicas in TensorFlow's order: the chief job's task, then the workers.
  for (const char* job_name : {"chief", "worker"})
    for (int rank : cluster.ranks_of(job_name)) {
      if (rank == me) replica_ = static_cast<int>(replica_ranks_.size());
      replica_ranks_.push_back(rank);
    }
  remaining_ = replica_ranks_.size();
  replicas_ = control_.split(is_computing() ? 0 : MPI_UNDEFINED, replica_);
  training_ = control_.split(task_.job != "evaluator" ? 0 : MPI_UNDEFINED, me);
  // A bad input every worker reads fails them alike while the ps tasks serve on: said once.
  // (Every rank sets it, or clears what an earlier Server of the process set.)
  const auto workers = static_cast<int>(replica_ranks_.size());
  if (is_computing() && workers > 1 && workers < control_.size())
    mpi::Environment::set_failure_group(replicas_.dup(), "workers");
  else
    mpi::Environment::set_failure_group(mpi::Comm(), "");
}

Server::Server(Server&&) noexcept = default;

Server::~Server() {
  if (control_.is_null()) return;
  // An exception unwinds: app::Run is about to end the job. Freeing hosted memory is collective
  // and would wait for ranks that never come; the windows skip it themselves while unwinding.
  if (std::uncaught_exceptions() > exceptions_at_start_) return;
  try {
    if (is_computing()) {
      if (!done_sent_) done();
    } else {
      // Receive every done() still due, so that no message outlives the control communicator:
      // one arriving after MPI_Comm_free could be matched on a new communicator that reuses its
      // context id. Every computing task sends exactly once (at the latest from its destructor).
      serve(std::chrono::milliseconds::zero());
    }
  } catch (const std::exception& e) {
    // Destructors do not throw: said here, and the job ended, since peers may wait on this task
    // (a wait for a task that stalled at the end, say).
    std::fprintf(stderr, "[%s] error: %s\n", process_label().c_str(), e.what());
    std::fflush(stderr);
    mpi::Environment::abort(1);
  } catch (...) {
    mpi::Environment::abort(1);
  }
}

const TaskId& Server::replica_task(int replica) const {
  return cluster_->task_of(replica_rank(replica));
}

int Server::replica_rank(int replica) const {
  if (replica < 0 || replica >= num_replicas())
    throw InvalidArgument("Server: no replica " + std::to_string(replica) + " of " +
                          std::to_string(num_replicas()));
  return replica_ranks_[static_cast<std::size_t>(replica)];
}

std::string Server::target() const {
  return "mpi://" + task_.job + "/" + std::to_string(task_.index) + "@rank" +
         std::to_string(cluster_->my_rank());
}

std::string Server::worker_device() const {
  return "/job:" + task_.job + "/task:" + std::to_string(task_.index);
}

HostedMemory Server::host(std::span<const std::int64_t> value_sizes,
                          std::span<const std::int64_t> counter_sizes) {
  if (!is_computing())
    throw InvalidArgument("Server::host: " + task_.to_string() +
                          " does not compute; ps tasks serve hosted memory from join()");
  const std::vector<int>& ps = cluster_->ranks_of("ps");
  if (ps.empty()) throw InvalidArgument("Server::host: the cluster has no ps task to host memory");
  if (is_chief()) {
    if (value_sizes.size() != ps.size() || counter_sizes.size() != ps.size())
      throw InvalidArgument("Server::host: " + std::to_string(value_sizes.size()) + " and " +
                            std::to_string(counter_sizes.size()) + " sizes for " +
                            std::to_string(ps.size()) + " ps tasks");
    for (std::size_t p = 0; p < ps.size(); ++p) {
      if (value_sizes[p] < 0 || counter_sizes[p] < 0)
        throw InvalidArgument("Server::host: negative size for ps task " + std::to_string(p));
      // The buffer must outlive the send; moving the outer vector keeps each inner one in place.
      payloads_.push_back({kHostMagic, value_sizes[p], counter_sizes[p]});
      sends_.push_back(
          control_.isend(std::span<const std::int64_t>(payloads_.back()), ps[p], kHostTag));
      sends_.back().test();
    }
  }
  make_hosted({}, {});
  // Window ranks are ranks of training_: the world's, less the evaluators below them.
  HostedMemory memory{hosted_.back()->values, hosted_.back()->counters, {}};
  for (int rank : ps) {
    int below = 0;
    for (int r = 0; r < rank; ++r) below += cluster_->task_of(r).job == "evaluator" ? 1 : 0;
    memory.ps_ranks.push_back(rank - below);
  }
  return memory;
}

// Collective over the training tasks: computing tasks from host(), ps tasks from a request.
void Server::make_hosted(std::span<const std::int64_t> value_sizes,
                         std::span<const std::int64_t> counter_sizes) {
  auto hosted = std::make_unique<Hosted>();
  hosted->values = mpi::Window<float>(
      training_, value_sizes.empty() ? 0 : static_cast<std::size_t>(value_sizes.front()));
  hosted->counters = mpi::Window<std::int64_t>(
      training_, counter_sizes.empty() ? 0 : static_cast<std::size_t>(counter_sizes.front()));
  transport_ = hosted->values.transport();
  one_sided_ = !hosted->values.served();
  hosted_.push_back(std::move(hosted));
}

std::string Server::memory_transport() const { return transport_; }

// Collective over the training tasks, once each is done with the memory.
void Server::free_hosted() {
  if (hosted_.empty()) return;
  if (abandoned_) {
    // The others may train on for hours, and would then wait in the free for this task.
    mpi::Environment::note_left_behind(task_.to_string() + "'s parameter memory, left after an "
                                       "error in its session");
    for (auto& hosted : hosted_) {
      hosted->values.abandon();
      hosted->counters.abandon();
    }
    hosted_.clear();
    return;
  }
  // Tasks arrive here at their own times. Each tells the others it has, then waits, sleeping,
  // for word from every other before the windows are freed (MPI_Win_free is collective and would
  // spin). A task that never comes (stalled, or lost, while the others trained on without it)
  // is named when the stall timeout ends the wait; a task that left early waits without one.
  const int me = training_.rank(), n = training_.size();
  std::vector<mpi::Request> told;
  for (int r = 0; r < n; ++r)
    if (r != me)
      told.push_back(training_.isend(std::span<const std::int32_t>(&kDoneMessage, 1), r, kArrivedTag));
  std::vector<char> arrived(static_cast<std::size_t>(n), 0);
  arrived[static_cast<std::size_t>(me)] = 1;
  int missing = n - 1;
  const auto heard = [&] {
    while (const auto status = training_.iprobe(MPI_ANY_SOURCE, kArrivedTag)) {
      std::int32_t message = 0;
      training_.recv(std::span<std::int32_t>(&message, 1), status->MPI_SOURCE, kArrivedTag);
      if (!std::exchange(arrived[static_cast<std::size_t>(status->MPI_SOURCE)], 1)) --missing;
    }
    return missing == 0;
  };
  // The computing tasks not come yet, else the ps tasks (which come once every computing task
  // is done: while one is missing, they wait for it too).
  const auto awaited = [&] {
    std::string computing, others;
    int r = 0;  // training ranks are the world's in order, less the evaluators
    for (int rank = 0; rank < cluster_->size(); ++rank) {
      const TaskId& task = cluster_->task_of(rank);
      if (task.job == "evaluator" || arrived[static_cast<std::size_t>(r++)]) continue;
      std::string& names = computing_job(task.job) ? computing : others;
      names += (names.empty() ? "" : ", ") + task.to_string() + " (rank " + std::to_string(rank) + ")";
    }
    return (computing.empty() ? others : computing) + " to reach the end of training (stalled, or lost?)";
  };
  try {
    wait_until(heard, left_early_ ? std::chrono::milliseconds::zero() : StallWatch::timeout(), awaited);
  } catch (...) {
    // A task that never came never receives: its send must not be waited for on the way out.
    for (mpi::Request& send : told) send.abandon();
    throw;
  }
  // Every other task is here and receives what it has not yet; then the collective frees.
  const StallWatch watch("the end of training's frees of the parameter memory");
  told.clear();
  for (auto& hosted : hosted_) hosted.reset();  // in creation order, as on every task
  hosted_.clear();
}

void Server::done() {
  if (!is_computing())
    throw InvalidArgument("Server::done: " + task_.to_string() +
                          " is not a computing task; only worker and chief tasks call done()");
  if (done_sent_) return;
  done_sent_ = true;
  for (int rank = 0; rank < cluster_->size(); ++rank)
    if (!computing_job(cluster_->task_of(rank).job))
      sends_.push_back(
          control_.isend(std::span<const std::int32_t>(&kDoneMessage, 1), rank, kDoneTag));
  // Small messages usually complete at once; testing frees what can be freed and lets MPI
  // progress, without ever blocking the worker.
  for (mpi::Request& send : sends_) send.test();
  free_hosted();
}

void Server::join(std::chrono::milliseconds timeout) {
  if (is_computing())
    throw InvalidArgument("Server::join: " + task_.to_string() +
                          " is a computing task; workers call done(), ps tasks join()");
  serve(timeout);
}

bool Server::training_done() {
  if (is_computing())
    throw InvalidArgument("Server::training_done: " + task_.to_string() +
                          " is a computing task; it says done() itself");
  return receive_messages();
}

// Probing rather than keeping receives posted: nothing is left pending when this returns or
// throws, and each probe drives MPI's progress engine like a test would. Returns whether every
// computing task is done.
bool Server::receive_messages() {
  for (;;) {
    if (const auto status = control_.iprobe(MPI_ANY_SOURCE, kHostTag)) {
      int count = 0;
      COHORT_MPI_CALL(MPI_Get_count(&*status, MPI_INT64_T, &count));
      std::vector<std::int64_t> request(static_cast<std::size_t>(count));
      control_.recv(std::span<std::int64_t>(request), status->MPI_SOURCE, kHostTag);
      if (request.size() != 3 || request[0] != kHostMagic)
        throw Error("Server: malformed request for hosted memory from rank " +
                    std::to_string(status->MPI_SOURCE));
      // Collective with the computing tasks' host(). Looked for before done() messages, so that
      // a request is never left behind by the last done().
      make_hosted(std::span(request).subspan(1, 1), std::span(request).subspan(2, 1));
      continue;
    }
    if (const auto status = control_.iprobe(MPI_ANY_SOURCE, kDoneTag)) {
      std::int32_t message = 0;
      control_.recv(std::span<std::int32_t>(&message, 1), status->MPI_SOURCE, kDoneTag);
      const auto source = static_cast<std::size_t>(status->MPI_SOURCE);
      if (!done_[source] && computing_job(cluster_->task_of(status->MPI_SOURCE).job)) {
        done_[source] = true;
        --remaining_;
      }
      continue;  // take every message already there before sleeping
    }
    return remaining_ == 0;
  }
}

std::vector<int> Server::pending() const {
  std::vector<int> ranks;
  for (int rank : replica_ranks_)
    if (!done_[static_cast<std::size_t>(rank)]) ranks.push_back(rank);
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

void Server::serve(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool told = false;
  std::optional<std::chrono::steady_clock::time_point> signalled;
  std::chrono::microseconds idle = kPollInterval;
  while (!receive_messages()) {
    // A stop signal changes nothing here: the computing tasks stop on it too, and this task
    // serves them until they are done, so that every task exits cleanly. SIGTERM is also how
    // the launcher ends the ranks of a job that another rank aborted (SIGKILL follows a second
    // later): that one is told only once it has lasted, so that an error's last line is not a
    // note that this task serves on.
    if (const int signal = stop_signal_received(); signal != 0 && !told) {
      const auto now = std::chrono::steady_clock::now();
      if (!signalled) signalled = now;
      if (signal != SIGTERM || now - *signalled >= std::chrono::seconds(3)) {
        told = true;
        std::fprintf(stderr, "[%s] signal %d: serving until the computing tasks are done\n",
                     process_label().c_str(), signal);
      }
    }
    if (timeout.count() > 0 && std::chrono::steady_clock::now() >= deadline) {
      std::string waiting;
      for (int rank : pending()) {
        if (!waiting.empty()) waiting += ", ";
        waiting += cluster_->task_of(rank).to_string() + " (rank " + std::to_string(rank) + ")";
      }
      throw Error("Server::join: " + task_.to_string() + " timed out after " +
                  std::to_string(timeout.count()) + " ms; still waiting for done() from " +
                  waiting);
    }
    // Served windows (no one-sided transport): answer what has arrived, and while requests keep
    // coming look again at once; idle, sleep ever longer, up to the poll interval.
    int answered = 0;
    for (auto& hosted : hosted_) answered += hosted->values.serve() + hosted->counters.serve();
    if (answered > 0) {
      idle = std::chrono::microseconds::zero();
      continue;
    }
    idle = std::min<std::chrono::microseconds>(2 * idle + kFirstIdleSleep, kPollInterval);
    std::this_thread::sleep_for(idle);
  }
  // Every computing task is done with the hosted memory: free it together with them.
  free_hosted();
}

std::vector<TaskId> Server::tasks_done() const {
  std::vector<TaskId> tasks;
  for (int rank = 0; rank < cluster_->size(); ++rank)
    if (done_[static_cast<std::size_t>(rank)]) tasks.push_back(cluster_->task_of(rank));
  return tasks;
}

}  // namespace cohort
