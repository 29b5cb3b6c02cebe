// --mode=async: nothing waits. A replica computes on the parameters it pulled, its own optimizer
// turns the gradients into a delta, and MPI_Accumulate adds it at the ps without the ps's help.
#include "cohort/core/dist/modes/modes.h"
#include "cohort/core/dist/modes/ps_mode.h"

namespace cohort::modes {
namespace {

class AsyncReplication final : public PsReplication {
 public:
  AsyncReplication(Server& server, Graph& graph, Optimizer& optimizer,
                   const ReplicationOptions& options)
      : PsReplication(server, graph, optimizer, options, /*accumulators=*/false) {}
  void before_step(std::span<float> values) override { store_.pull(values); }
  std::int64_t batches_at(std::int64_t step) const override { return step / replicas_; }
  StepOutcome after_step(std::span<float> grads, std::span<float> values) override {
    delta_.resize(grads.size());
    optimizer_.compute_delta(grads, step_, delta_, values);
    store_.push(delta_);
    step_ = store_.fetch_add(ControlSlot::kGlobalStep, 1) + 1;
    return {step_, true, stopped()};
  }

 private:
  std::vector<float> delta_;
};

}  // namespace

std::unique_ptr<Replication> async(Server& server, Graph& graph, Optimizer& optimizer,
                                   const ReplicationOptions& options) {
  return std::make_unique<AsyncReplication>(server, graph, optimizer, options);
}

}  // namespace cohort::modes
