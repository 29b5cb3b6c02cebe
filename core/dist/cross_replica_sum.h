#pragma once
// Sums over the replicas for layers that need them (synchronised batch normalisation).

#include <optional>
#include <span>

#include "cohort/core/base/stall_watch.h"
#include "cohort/core/nn/layer.h"
#include "cohort/mpi/comm.h"

namespace cohort {

/// nn's CrossReplicaSum on MPI: an in-place MPI_Allreduce over the replicas' communicator
/// (Server::replicas()). Collective: every replica calls sum() with the same sizes in the same
/// order; from the thread that makes MPI calls (the main thread). `replicas` must outlive it.
/// With `watched` (a string literal naming the wait), each sum is under a StallWatch, so that a
/// replica that stalled ends the job rather than keep the others waiting for good.
class ReplicaSum final : public CrossReplicaSum {
 public:
  explicit ReplicaSum(const mpi::Comm& replicas, const char* watched = nullptr)
      : comm_(replicas), watched_(watched) {}
  void sum(std::span<double> values) override {
    std::optional<StallWatch> watch;
    if (watched_) watch.emplace(watched_);
    comm_.allreduce(values);
  }
  int replicas() const override { return comm_.size(); }

 private:
  const mpi::Comm& comm_;
  const char* watched_;
};

}  // namespace cohort
