// --mode=allreduce: Horovod's scheme on MPI. Every replica sums the gradients with in-place
// MPI_Allreduce in fused pieces, averages and applies the same update, so the parameters stay
// identical without any ps.
#include "cohort/core/dist/fusion.h"
#include "cohort/core/dist/modes/modes.h"

namespace cohort::modes {
namespace {

class AllreduceReplication final : public Replication {
 public:
  AllreduceReplication(Server& server, Optimizer& optimizer, const ReplicationOptions& options)
      : comm_(server.replicas()), optimizer_(optimizer), fusion_bytes_(options.fusion_bytes) {}
  void start(std::span<float> values, std::int64_t initial_step,
             std::optional<std::chrono::milliseconds>) override {
    comm_.bcast(values, kChief);  // everyone starts from the chief's parameters
    step_ = comm_.allreduce(initial_step, mpi::Op::kMax);
  }
  void before_step(std::span<float>) override {}
  StepOutcome after_step(std::span<float> grads, std::span<float> values) override {
    allreduce_fused(comm_, grads, fusion_bytes_);
    const float scale = 1.0f / static_cast<float>(comm_.size());
    for (float& g : grads) g *= scale;
    optimizer_.apply(values, grads, step_);
    return {++step_, true, false};
  }
  std::int64_t global_step() const override { return step_; }
  void finish() override {}
  void fetch_parameters(std::span<float>) override {}  // every replica holds them
  std::vector<double> exchange_step_times(double mine) override { return comm_.allgather(mine); }
  bool agree_to_stop(bool mine) override {
    return comm_.allreduce(mine ? 1 : 0, mpi::Op::kMax) != 0;
  }

 private:
  static constexpr int kChief = 0;  // replica 0, rank 0 of the replicas' communicator
  const mpi::Comm& comm_;
  Optimizer& optimizer_;
  std::int64_t fusion_bytes_;
  std::int64_t step_ = 0;
};

}  // namespace

std::unique_ptr<Replication> allreduce(Server& server, Optimizer& optimizer,
                                       const ReplicationOptions& options) {
  return std::make_unique<AllreduceReplication>(server, optimizer, options);
}

}  // namespace cohort::modes
