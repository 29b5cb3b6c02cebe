// --mode=sync: barrier-based synchronous SGD. For step s, replicas claim one of k slots in the
// sync word on ps 0 (a compare-and-swap that names the step, so a late gradient can never count
// for a later step), add their gradient into the accumulators on the ps tasks and report
// completion. The chief waits for the k claims, averages, applies the update once with its
// optimizer, writes the parameters back, zeroes the accumulators and publishes step s+1; the
// others wait for that and pull. Gradients that arrive after k others, or for an old step, are
// dropped and counted (backup workers: k below the number of replicas).
#include <algorithm>

#include "cohort/core/dist/modes/modes.h"
#include "cohort/core/dist/modes/ps_mode.h"

namespace cohort::modes {
namespace {

class SyncReplication final : public PsReplication {
 public:
  SyncReplication(Server& server, Graph& graph, Optimizer& optimizer,
                  const ReplicationOptions& options)
      : PsReplication(server, graph, optimizer, options, /*accumulators=*/true),
        k_(options.replicas_to_aggregate > 0 ? options.replicas_to_aggregate : replicas_) {
    if (k_ > replicas_)
      throw InvalidArgument("--replicas_to_aggregate=" + std::to_string(k_) + " exceeds the " +
                            std::to_string(replicas_) + " workers");
  }

  void before_step(std::span<float>) override { last_wait_ = 0; }

  StepOutcome after_step(std::span<float> grads, std::span<float> values) override {
    const std::int64_t s = step_;
    const bool claimed = claim(s);
    if (claimed) {
      store_.accumulate_gradients(grads);
      store_.fetch_add(ControlSlot::kCompleted, 1);
      store_.write(ControlSlot::kWorkerBase, s + 1, replica_);  // for the stall inspector
    } else {
      ++dropped_;
      store_.fetch_add(ControlSlot::kDropped, 1);
    }
    if (server_.is_chief()) {
      apply(s, values);
    } else {
      timed_wait([&] { return store_.read(ControlSlot::kGlobalStep) > s || stopped(); },
                 options_.wait_timeout,
                 [&] { return chief_name() + " to apply step " + std::to_string(s); });
      store_.pull(values);
      step_ = std::max(s + 1, store_.read(ControlSlot::kGlobalStep));
    }
    return {step_, claimed, stopped()};
  }

  std::int64_t dropped_gradients() const override { return dropped_; }
  // Every replica computes one gradient per global step (dropped ones included).
  std::int64_t batches_at(std::int64_t step) const override { return step; }
  std::string stats() const override {
    return "dropped " + std::to_string(dropped_) + " stale or surplus gradients";
  }

 private:
  bool claim(std::int64_t s) {
    std::int64_t word = store_.read(ControlSlot::kSyncWord);
    for (;;) {
      if ((word >> kStepShift) != s || (word & kCountMask) >= k_) return false;
      const std::int64_t seen = store_.compare_and_swap(ControlSlot::kSyncWord, word, word + 1);
      if (seen == word) return true;
      word = seen;
    }
  }

  void apply(std::int64_t s, std::span<float> values) {
    const auto ready = [&] {
      const std::int64_t completed = store_.read(ControlSlot::kCompleted);
      const std::int64_t active = replicas_ - store_.read(ControlSlot::kRetired);
      return completed >= std::min<std::int64_t>(k_, std::max<std::int64_t>(active, 1));
    };
    timed_wait(ready, options_.wait_timeout, [&] { return missing(s); });
    // Close step s to further claims; a claim made just before must still arrive in full.
    const std::int64_t claims =
        store_.exchange(ControlSlot::kSyncWord, (s << kStepShift) | k_) & kCountMask;
    timed_wait([&] { return store_.read(ControlSlot::kCompleted) >= claims; }, options_.wait_timeout,
               [&] { return missing(s); });
    sums_.resize(values.size());
    store_.read_gradients(sums_);
    const float scale = 1.0f / static_cast<float>(claims);
    for (float& g : sums_) g *= scale;
    optimizer_.apply(values, sums_, s);
    store_.assign(values);
    store_.zero_gradients();
    store_.write(ControlSlot::kCompleted, 0);
    // Open step s+1 for claims before publishing it: a replica that sees the new global step
    // must find its claim slot ready, or its gradient would be dropped as stale.
    store_.write(ControlSlot::kSyncWord, (s + 1) << kStepShift);
    store_.write(ControlSlot::kGlobalStep, s + 1);
    step_ = s + 1;
  }

  // Names the replicas that have not delivered a gradient for step s.
  std::string missing(std::int64_t s) {
    const auto last = store_.read_worker_slots();
    std::string names;
    for (int r = 0; r < replicas_; ++r)
      if (last[static_cast<std::size_t>(r)] < s + 1)
        names += (names.empty() ? "" : ", ") + replica_name(r);
    return std::to_string(k_) + " gradients for step " + std::to_string(s) + ", have " +
           std::to_string(store_.read(ControlSlot::kCompleted)) + "; no gradient yet from " +
           names;
  }

  std::int64_t k_;
  std::int64_t dropped_ = 0;
  std::vector<float> sums_;
};

}  // namespace

std::unique_ptr<Replication> sync(Server& server, Graph& graph, Optimizer& optimizer,
                                  const ReplicationOptions& options) {
  return std::make_unique<SyncReplication>(server, graph, optimizer, options);
}

}  // namespace cohort::modes
