// --mode=async: nothing waits. A replica computes on the parameters it pulled, its own optimizer
// turns the gradients into a delta, and MPI_Accumulate adds it at the ps without the ps's help;
// the same lock epoch pulls the parameters for the next step. With --bucket_bytes the delta
// leaves in pieces while the backward pass still runs (the optimizer's state is per element, so a
// piece's delta is the whole delta's range), and the pull follows the last piece. With
// --prefetch the pull starts before the step's forward and backward pass instead, ahead of this
// worker's own pushes, so the worker adds its own delta to what arrives: the result misses only
// the other workers' pushes that reached the ps during the step, which the next pull brings.
#include "cohort/core/dist/modes/modes.h"
#include "cohort/core/dist/modes/ps_mode.h"

namespace cohort::modes {
namespace {

class AsyncReplication final : public DeltaPushReplication {
 public:
  using DeltaPushReplication::DeltaPushReplication;
  // The parameters came with the last push (or from start()).
  void before_step(std::span<float> values) override { set_values(values); }
  std::int64_t batches_at(std::int64_t step) const override { return step / replicas_; }
  StepOutcome after_step(std::span<float> grads, std::span<float> values) override {
    push_delta(grads, values);
    if (!prefetched_) {
      // The next step's parameters (this push included), and the push counted as a global step.
      step_ = store_.pull_counting(values, ControlSlot::kGlobalStep);
      return {step_, true, stopped()};
    }
    step_ = store_.pull_counting({}, ControlSlot::kGlobalStep);  // the prefetch has arrived
    prefetched_ = false;
    ++prefetches_;
    add_sent(next_, delta_, values);
    return {step_, true, stopped()};
  }
  std::string mode_stats() const override {
    return prefetches_ > 0 ? "next parameters prefetched in " + std::to_string(prefetches_) +
                                 " steps"
                           : "";
  }

 private:
  bool begin_pass() override {
    if (!options_.prefetch || values_.empty()) return false;
    next_.resize(values_.size());
    store_.start_pull(next_);
    prefetched_ = true;
    return true;
  }

  std::vector<float> next_;  // --prefetch: the next step's parameters, less this worker's update
  bool prefetched_ = false;
  std::int64_t prefetches_ = 0;
};

}  // namespace

std::unique_ptr<Replication> async(Server& server, Graph& graph, Optimizer& optimizer,
                                   const ReplicationOptions& options) {
  return std::make_unique<AsyncReplication>(server, graph, optimizer, options);
}

}  // namespace cohort::modes
