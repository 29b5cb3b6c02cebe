#pragma once
// Sums over the replicas for layers that need them (synchronised batch normalisation).

#include <span>

#include "cohort/core/nn/layer.h"
#include "cohort/mpi/comm.h"

namespace cohort {

/// nn's CrossReplicaSum on MPI: an in-place MPI_Allreduce over the replicas' communicator
/// (Server::replicas()). Collective: every replica calls sum() with the same sizes in the same
/// order; from the thread that makes MPI calls (the main thread). `replicas` must outlive it.
class ReplicaSum final : public CrossReplicaSum {
 public:
  explicit ReplicaSum(const mpi::Comm& replicas) : comm_(replicas) {}
  void sum(std::span<double> values) override { comm_.allreduce(values); }
  int replicas() const override { return comm_.size(); }

 private:
  const mpi::Comm& comm_;
};

}  // namespace cohort
