// --mode=sync: barrier-based synchronous SGD. For step s, replicas claim one of k slots in the
// sync word on ps 0 (a compare-and-swap that names the step, so a late gradient can never count
// for a later step), add their gradient into the accumulators on the ps tasks and report
// completion. The chief waits for the k claims, takes the sum, adds its own gradient, which never
// leaves it, averages, applies the update once with its optimizer, writes the parameters back and
// publishes step s+1; the others wait for that and pull, while the chief zeroes the accumulators
// (where the memory is one-sided; served, the take zeroes them) and then opens step s+1 for
// claims. A step whose only gradient is the chief's (one worker; backup workers' steps that it
// alone won) takes and zeroes nothing. Gradients that arrive after k others, or for an old step,
// are dropped and counted (backup workers: k below the number of replicas). The control traffic
// is batched so that a step costs each replica few round trips to ps 0 (see
// ParameterStore::update). With --bucket_bytes a replica claims its slot when the backward pass
// finishes the first piece of its gradient, and adds each piece as it becomes final; the report
// still follows the last. With --compression=bf16 the gradients travel to the ps, and their sum
// to the chief, as bfloat16 with error feedback (the sum's at the ps); the parameters stay
// float32.
#include <algorithm>
#include <optional>

#include "cohort/core/base/bfloat16.h"
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
  // The chief adds its own gradient where it applies the step; it sends nothing.
  cohort::GradientListener* gradient_listener(std::span<float> grads) override {
    return server_.is_chief() ? nullptr : PsReplication::gradient_listener(grads);
  }

  StepOutcome after_step(std::span<float> grads, std::span<float> values) override {
    const std::int64_t s = step_;
    if (in_pieces() && !server_.is_chief()) {
      send_rest(grads);  // the first piece claims the slot
    } else {
      claimed_.reset();
    }
    if (!claimed_) claimed_ = claim(s);
    const bool claimed = *claimed_;
    if (!claimed) {
      ++dropped_;
      store_.update({{ControlSlot::kDropped, 1, mpi::Op::kSum}});
    } else if (!server_.is_chief()) {
      if (!in_pieces()) start_send(0, grads, /*accumulators=*/true);
      store_.complete();
      // The worker slot is for the stall inspector.
      store_.update({{ControlSlot::kCompleted, 1, mpi::Op::kSum},
                     {ControlSlot::kWorkerBase, s + 1, mpi::Op::kReplace, replica_}});
    }
    if (server_.is_chief()) {
      apply(s, claimed ? grads : std::span<const float>(), values);
    } else {
      std::int64_t global = 0;
      timed_wait(
          [&] {
            read_counters();
            global = counters_[slot(ControlSlot::kGlobalStep)];
            return global > s || counters_[slot(ControlSlot::kStopped)] != 0;
          },
          options_.wait_timeout,
          [&] { return chief_name() + " to apply step " + std::to_string(s); });
      store_.pull(values);
      step_ = std::max(s + 1, global);
    }
    return {step_, claimed, counters_[slot(ControlSlot::kStopped)] != 0};
  }

  std::int64_t dropped_gradients() const override { return dropped_; }
  // Every replica computes one gradient per global step (dropped ones included).
  std::int64_t batches_at(std::int64_t step) const override { return step; }
  std::string mode_stats() const override {
    return "dropped " + std::to_string(dropped_) + " stale or surplus gradients";
  }

 private:
  static std::size_t slot(ControlSlot c) { return static_cast<std::size_t>(c); }

  void begin_pieces(std::size_t) override { claimed_.reset(); }
  bool send_piece(std::int64_t first, std::span<const float> grads) override {
    if (!claimed_) claimed_ = claim(step_);
    if (*claimed_) start_send(first, grads, /*accumulators=*/true);
    return *claimed_;
  }
  // Slots kGlobalStep..kStopped, in one round trip.
  void read_counters() { store_.read(ControlSlot::kGlobalStep, counters_); }

  // Takes one of step s's k slots: a compare-and-swap that names the step. The first try
  // guesses that no slot is taken yet, which saves reading the word first. A word of an earlier
  // step means the chief has published step s but not yet opened it (it is zeroing the
  // accumulators): wait for that; a later step's means this gradient is stale.
  bool claim(std::int64_t s) {
    std::int64_t word = s << kStepShift;
    for (;;) {
      const std::int64_t seen = store_.compare_and_swap(ControlSlot::kSyncWord, word, word + 1);
      if (seen == word) return true;
      if ((seen >> kStepShift) < s) {
        timed_wait([&] { return (store_.read(ControlSlot::kSyncWord) >> kStepShift) >= s; },
                   options_.wait_timeout,
                   [&] { return chief_name() + " to open step " + std::to_string(s); });
        continue;
      }
      if ((seen >> kStepShift) != s || (seen & kCountMask) >= k_) return false;
      word = seen;
    }
  }

  // The chief: waits for the claimed gradients, averages them with its own (`mine`, empty when
  // it did not claim a slot), applies the update and publishes step s+1.
  void apply(std::int64_t s, std::span<const float> mine, std::span<float> values) {
    const std::int64_t own = mine.empty() ? 0 : 1;
    const auto completed = [&] { return counters_[slot(ControlSlot::kCompleted)] + own; };
    const auto ready = [&] {
      read_counters();
      const std::int64_t active = replicas_ - counters_[slot(ControlSlot::kRetired)];
      return completed() >= std::min<std::int64_t>(k_, std::max<std::int64_t>(active, 1));
    };
    timed_wait(ready, options_.wait_timeout, [&] { return missing(s, own); });
    // Close step s to further claims; a claim made just before must still arrive in full.
    const std::int64_t claims =
        store_.exchange(ControlSlot::kSyncWord, (s << kStepShift) | k_) & kCountMask;
    if (completed() < claims)
      timed_wait([&] { return read_counters(), completed() >= claims; }, options_.wait_timeout,
                 [&] { return missing(s, own); });
    // Where the chief's own gradient is the step's only one (one worker, or backup workers'
    // steps that it alone won), the float32 accumulators hold zeros: nothing to take or clear.
    const bool alone = claims == 1 && own == 1 && options_.compression != Compression::kBf16;
    std::span<const float> sum = mine;
    if (!alone) {
      sums_.resize(values.size());
      if (options_.compression == Compression::kBf16) {
        // As bfloat16; what the rounding loses stays in the accumulators for the next step.
        taken_.resize(values.size());
        store_.take_gradients_bf16(taken_);
        bf16::to_float(taken_, sums_);
      } else {
        store_.take_gradients(sums_);  // served: and the accumulators are zero again
      }
      // The chief's own gradient joins the sum; the optimizer averages as it reads it.
      if (own)
        for (std::size_t i = 0; i < sums_.size(); ++i) sums_[i] += mine[i];
      sum = sums_;
    }
    optimizer_.apply(values, sum, s, 1.0f / static_cast<float>(claims));
    store_.assign(values);
    // The count is reset before step s+1 opens for claims. Served, one request takes and zeroes
    // the accumulators, and the step opens as it is published. One-sided, the step is published
    // first, so that the others pull while the chief zeroes the accumulators, and opens for
    // claims after that (a replica that claims sooner waits for it: see claim()).
    const std::int64_t next = (s + 1) << kStepShift;
    if (store_.served()) {
      store_.update({{ControlSlot::kCompleted, 0},
                     {ControlSlot::kWorkerBase, s + 1, mpi::Op::kReplace, replica_},
                     {ControlSlot::kSyncWord, next},
                     {ControlSlot::kGlobalStep, s + 1}});
    } else {
      store_.update({{ControlSlot::kCompleted, 0},
                     {ControlSlot::kWorkerBase, s + 1, mpi::Op::kReplace, replica_},
                     {ControlSlot::kGlobalStep, s + 1}});
      if (!alone) store_.clear_gradients();
      store_.update({{ControlSlot::kSyncWord, next}});
    }
    step_ = s + 1;
  }

  // Names the replicas that have not delivered a gradient for step s.
  std::string missing(std::int64_t s, std::int64_t own) {
    const auto last = store_.read_worker_slots();
    std::string names;
    for (int r = 0; r < replicas_; ++r)
      if (last[static_cast<std::size_t>(r)] < s + 1 && !(r == replica_ && own))
        names += (names.empty() ? "" : ", ") + replica_name(r);
    return std::to_string(k_) + " gradients for step " + std::to_string(s) + ", have " +
           std::to_string(store_.read(ControlSlot::kCompleted) + own) + "; no gradient yet from " +
           names;
  }

  std::int64_t k_;
  std::optional<bool> claimed_;  // whether this step's gradient holds one of the k slots
  std::int64_t dropped_ = 0;
  std::vector<float> sums_;
  std::vector<std::uint16_t> taken_;  // --compression=bf16: the sum as it travels
  std::vector<std::int64_t> counters_ = std::vector<std::int64_t>(slot(ControlSlot::kStopped) + 1);
};

}  // namespace

std::unique_ptr<Replication> sync(Server& server, Graph& graph, Optimizer& optimizer,
                                  const ReplicationOptions& options) {
  return std::make_unique<SyncReplication>(server, graph, optimizer, options);
}

}  // namespace cohort::modes
