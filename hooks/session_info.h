#pragma once
// Facts about the session that several hooks need and the session does not hand out directly.

#include <cstdint>

#include "cohort/core/session.h"

namespace cohort::hooks {

/// This worker's task index in the worker job (0 in local mode). Not collective.
int worker_index(const MonitoredSession& session);

/// Examples behind one increment of the global step, given this worker's batch `examples`:
/// one batch in local, async and ssp modes (every push counts a step), replicas_to_aggregate
/// batches in sync mode, every worker's batch in allreduce mode. Not collective.
double examples_per_global_step(MonitoredSession& session, double examples);

}  // namespace cohort::hooks
