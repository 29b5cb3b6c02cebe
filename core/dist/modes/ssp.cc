// --mode=ssp, stale synchronous parallel: async pushes, plus a clock per replica. A replica
// starting step c waits until the slowest has finished step c - staleness. With staleness 0 the
// replicas move in lock step.
#include <algorithm>

#include "cohort/core/dist/modes/modes.h"
#include "cohort/core/dist/modes/ps_mode.h"

namespace cohort::modes {
namespace {

class SspReplication final : public DeltaPushReplication {
 public:
  using DeltaPushReplication::DeltaPushReplication;

  void before_step(std::span<float> values) override {
    const std::int64_t bound = clock_ - options_.staleness;
    std::int64_t slowest = 0;
    const auto ready = [&] {
      const auto clocks = store_.read_worker_slots();
      slowest = *std::min_element(clocks.begin(), clocks.end());
      return slowest >= bound;
    };
    timed_wait(ready, options_.wait_timeout, [&] { return laggards(bound); });
    max_gap_ = std::max(max_gap_, clock_ - slowest);
    store_.pull(values);
    set_values(values);
  }
  StepOutcome after_step(std::span<float> grads, std::span<float> values) override {
    push_delta(grads, values);
    store_.complete();  // at the ps before the clock says so
    store_.write(ControlSlot::kWorkerBase, ++clock_, replica_);
    step_ = store_.fetch_add(ControlSlot::kGlobalStep, 1) + 1;
    return {step_, true, stopped()};
  }
  std::int64_t max_observed_staleness() const override { return max_gap_; }
  std::int64_t batches_at(std::int64_t step) const override { return step / replicas_; }
  std::string mode_stats() const override {
    return "largest clock gap seen " + std::to_string(max_gap_) + " (bound " +
           std::to_string(options_.staleness) + ")";
  }

 private:
  std::string laggards(std::int64_t bound) {
    const auto clocks = store_.read_worker_slots();
    std::string names;
    for (int r = 0; r < static_cast<int>(clocks.size()); ++r)
      if (clocks[static_cast<std::size_t>(r)] < bound)
        names += (names.empty() ? "" : ", ") + server_.replica_task(r).to_string() + " (clock " +
                 std::to_string(clocks[static_cast<std::size_t>(r)]) + ")";
    return names + " to reach clock " + std::to_string(bound);
  }

  std::int64_t clock_ = 0;
  std::int64_t max_gap_ = 0;
};

}  // namespace

std::unique_ptr<Replication> ssp(Server& server, Graph& graph, Optimizer& optimizer,
                                 const ReplicationOptions& options) {
  if (options.staleness < 0) throw InvalidArgument("--staleness must be >= 0");
  return std::make_unique<SspReplication>(server, graph, optimizer, options);
}

}  // namespace cohort::modes
