#pragma once
// The training modes behind Replication::create(), one file each (internal to core/dist).

#include <memory>

#include "cohort/core/dist/replication.h"
#include "cohort/core/dist/server.h"

namespace cohort::modes {

/// One process: the optimizer updates the parameters in place (local.cc).
std::unique_ptr<Replication> local(Optimizer& optimizer);
/// Horovod's scheme: the gradients summed over the workers (in a node's shared memory, and
/// fused in-place MPI_Allreduce), no ps (allreduce.cc). Collective over the workers.
std::unique_ptr<Replication> allreduce(Server& server, const Graph& graph, Optimizer& optimizer,
                                       const ReplicationOptions& options);
/// Parameters on the ps tasks, pushed with MPI_Accumulate without waiting (async.cc).
std::unique_ptr<Replication> async(Server& server, Graph& graph, Optimizer& optimizer,
                                   const ReplicationOptions& options);
/// Async with a bound on how far a replica runs ahead of the slowest (ssp.cc).
std::unique_ptr<Replication> ssp(Server& server, Graph& graph, Optimizer& optimizer,
                                 const ReplicationOptions& options);
/// Barrier-based synchronous SGD with backup workers, applied once by the chief (sync.cc).
std::unique_ptr<Replication> sync(Server& server, Graph& graph, Optimizer& optimizer,
                                  const ReplicationOptions& options);

}  // namespace cohort::modes
