// --mode=async: nothing waits. A replica computes on the parameters it pulled, its own optimizer
// turns the gradients into a delta, and MPI_Accumulate adds it at the ps without the ps's help;
// the same lock epoch pulls the parameters for the next step.
#include "cohort/core/dist/modes/modes.h"
#include "cohort/core/dist/modes/ps_mode.h"

namespace cohort::modes {
namespace {

class AsyncReplication final : public PsReplication {
 public:
  AsyncReplication(Server& server, Graph& graph, Optimizer& optimizer,
                   const ReplicationOptions& options)
      : PsReplication(server, graph, optimizer, options, /*accumulators=*/false) {}
  // The parameters were pulled with the last push (or by start()).
  void before_step(std::span<float>) override {}
  std::int64_t batches_at(std::int64_t step) const override { return step / replicas_; }
  StepOutcome after_step(std::span<float> grads, std::span<float> values) override {
    delta_.resize(grads.size());
    optimizer_.compute_delta(grads, step_, delta_, values);
    // The next step's parameters (this push included), and the push counted as a global step.
    step_ = store_.push_then_pull(delta_, values, ControlSlot::kGlobalStep);
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
