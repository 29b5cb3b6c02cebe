#include "cohort/hooks/session_info.h"

#include <cstdlib>
#include <string>

#include "cohort/mpi/comm.h"

namespace cohort::hooks {

int worker_index(const MonitoredSession& session) {
  // The session's master is the Server's target, "mpi://<job>/<task>@rank<r>"; local sessions
  // have none and are worker 0.
  const std::string& master = session.options().master;
  const std::string prefix = "mpi://worker/";
  if (master.compare(0, prefix.size(), prefix) != 0) return 0;
  return std::atoi(master.c_str() + prefix.size());
}

double examples_per_global_step(MonitoredSession& session, double examples) {
  const ReplicationOptions& replication = session.trainer().options().replication;
  switch (replication.mode) {
    case Mode::kLocal:
    case Mode::kAsync:
    case Mode::kSsp:
      return examples;
    case Mode::kSync:
      if (replication.replicas_to_aggregate > 0)
        return examples * static_cast<double>(replication.replicas_to_aggregate);
      break;
    case Mode::kAllreduce:
      // No ps tasks in this mode: every rank of the job is a worker.
      return examples * mpi::Comm::world().size();
  }
  // Sync over all workers: the chief learns their number from the shared step times.
  const auto times = session.worker_step_times();
  return examples * static_cast<double>(times.empty() ? 1 : times.size());
}

}  // namespace cohort::hooks
