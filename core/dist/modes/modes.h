#pragma once
// The training modes behind Replication::create(), one file each (internal to core/dist).

#include <cstddef>
#include <memory>

#include "cohort/core/dist/replication.h"
#include "cohort/core/dist/server.h"

namespace cohort::modes {

/// The chief's optimizer state (its slots and update count) on every replica: a restore fills
/// the chief's alone. Modes whose replicas each apply updates call it from start(), so that a
/// resumed job carries on from the checkpoint's state everywhere. Collective over `replicas`,
/// whose rank 0 is the chief.
void share_optimizer_state(const mpi::Comm& replicas, Optimizer& optimizer, std::size_t parameters);

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
