#include "cohort/core/dist/server.h"

#include <climits>
#include <cstdint>
#include <exception>
#include <thread>

#include "cohort/core/dist/parameter_store.h"
#include "cohort/mpi/error.h"

namespace cohort {
namespace {

constexpr int kDoneTag = 1;
constexpr int kStoreHeaderTag = 2;
// The payload only has to exist: the sender's rank travels in the status.
constexpr std::int32_t kDoneMessage = 1;
// Long enough that waiting costs next to no CPU, short enough that a ps answers promptly and that
// MPI's progress engine runs often (software-emulated accumulates on some fabrics need it).
constexpr std::chrono::milliseconds kPollInterval(2);

bool computing_job(const std::string& job) { return job == "worker" || job == "chief"; }

}  // namespace

Server::Server(const ClusterSpec& cluster)
    : Server(cluster, cluster.my_task().job, cluster.my_task().index) {}

Server::Server(const ClusterSpec& cluster, const std::string& job, int task)
    : cluster_(&cluster),
      task_(cluster.my_task()),
      control_(cluster.world().dup()),
      done_(static_cast<std::size_t>(cluster.size()), false),
      exceptions_at_start_(std::uncaught_exceptions()) {
  // Every rank throws if any rank's job or task is wrong: a Server missing on one rank would
  // leave the ps tasks waiting for its done() forever.
  const int me = cluster.my_rank();
  const bool mismatch = job != task_.job || task != task_.index;
  const int first = control_.allreduce(mismatch ? me : INT_MAX, mpi::Op::kMin);
  if (first == INT_MAX) return;
  const std::string mine = "Server(" + job + ", " + std::to_string(task) + "): rank " +
                           std::to_string(me) + " is " + task_.to_string() + " in the cluster spec";
  throw InvalidArgument(control_.bcast_string(mine, first));
}

Server::Server(Server&&) noexcept = default;

Server::~Server() {
  if (control_.is_null()) return;
  if (std::uncaught_exceptions() > exceptions_at_start_) {
    // An exception unwinds: app::Run is about to end the job. Closing a store is collective and
    // would wait for ranks that never come, so the stores are left to MPI_Abort.
    for (auto& store : stores_) static_cast<void>(store.release());
    return;
  }
  try {
    if (is_computing()) {
      if (!done_sent_) done();
    } else {
      // Receive every done() still due, so that no message outlives the control communicator:
      // one arriving after MPI_Comm_free could be matched on a new communicator that reuses its
      // context id. Every computing task sends exactly once (at the latest from its destructor).
      serve(std::chrono::milliseconds::zero());
    }
  } catch (...) {
    // Destructors do not throw.
  }
}

bool Server::is_chief() const {
  if (cluster_->has_job("chief")) return task_.job == "chief";
  return task_.job == "worker" && task_.index == 0;
}

bool Server::is_computing() const { return computing_job(task_.job); }

std::string Server::target() const {
  return "mpi://" + task_.job + "/" + std::to_string(task_.index) + "@rank" +
         std::to_string(cluster_->my_rank());
}

std::string Server::worker_device() const {
  return "/job:" + task_.job + "/task:" + std::to_string(task_.index);
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
}

void Server::send_store_header(int rank, const std::vector<std::int64_t>& header) {
  if (!is_chief())
    throw InvalidArgument("Server::send_store_header: " + task_.to_string() +
                          " is not the chief; only the chief describes the store");
  if (computing_job(cluster_->task_of(rank).job))
    throw InvalidArgument("Server::send_store_header: rank " + std::to_string(rank) + " is " +
                          cluster_->task_of(rank).to_string() + ", which does not serve a store");
  payloads_.push_back(header);  // the buffer must outlive the send; the vector's data stays put
  sends_.push_back(
      control_.isend(std::span<const std::int64_t>(payloads_.back()), rank, kStoreHeaderTag));
  sends_.back().test();
}

void Server::join(std::chrono::milliseconds timeout) {
  if (is_computing())
    throw InvalidArgument("Server::join: " + task_.to_string() +
                          " is a computing task; workers call done(), ps tasks join()");
  serve(timeout);
}

// Probing rather than keeping receives posted: nothing is left pending when this returns or
// throws, and each probe drives MPI's progress engine like a test would.
void Server::serve(std::chrono::milliseconds timeout) {
  const auto pending = [&] {
    std::vector<int> ranks;
    for (int rank = 0; rank < cluster_->size(); ++rank)
      if (computing_job(cluster_->task_of(rank).job) && !done_[static_cast<std::size_t>(rank)])
        ranks.push_back(rank);
    return ranks;
  };
  std::size_t remaining = pending().size();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (remaining > 0) {
    if (const auto status = control_.iprobe(MPI_ANY_SOURCE, kStoreHeaderTag)) {
      int count = 0;
      COHORT_MPI_CALL(MPI_Get_count(&*status, MPI_INT64_T, &count));
      std::vector<std::int64_t> header(static_cast<std::size_t>(count));
      control_.recv(std::span<std::int64_t>(header), status->MPI_SOURCE, kStoreHeaderTag);
      // Collective with the workers' ParameterStore constructor. Looked for before done()
      // messages, so that a header is never left behind by the last done().
      stores_.push_back(ParameterStore::serve(*cluster_, header));
      continue;
    }
    if (const auto status = control_.iprobe(MPI_ANY_SOURCE, kDoneTag)) {
      std::int32_t message = 0;
      control_.recv(std::span<std::int32_t>(&message, 1), status->MPI_SOURCE, kDoneTag);
      const auto source = static_cast<std::size_t>(status->MPI_SOURCE);
      if (!done_[source] && computing_job(cluster_->task_of(status->MPI_SOURCE).job)) {
        done_[source] = true;
        --remaining;
      }
      continue;  // take every message already there before sleeping
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
    std::this_thread::sleep_for(kPollInterval);
  }
  // Every worker is done with the store: close it together with them (collective).
  for (auto& store : stores_) store->close();
  stores_.clear();
}

std::vector<TaskId> Server::tasks_done() const {
  std::vector<TaskId> tasks;
  for (int rank = 0; rank < cluster_->size(); ++rank)
    if (done_[static_cast<std::size_t>(rank)]) tasks.push_back(cluster_->task_of(rank));
  return tasks;
}

}  // namespace cohort
