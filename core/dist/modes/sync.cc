// --mode=sync: barrier-based synchronous SGD. For step s, replicas claim one of k slots in the sync
// word on ps 0 (a compare-and-swap that names the step, so a late gradient can never count for a
// later step), add their gradient into the accumulators on the ps tasks and report completion. The
// chief waits for the k claims, takes the sum, adds its own gradient, which never leaves it,
// averages, applies the update once with its optimizer, writes the parameters back and publishes
// step s+1; the others wait for that and pull, while the chief zeroes the accumulators (where the
// memory is one-sided; served, the take zeroes them) and then opens step s+1 for claims. Where the
// memory is one-sided and each worker has a core, all of this goes in pieces of 256 KB: the workers
// add their gradients piece by piece, saying how far they are; the chief takes each piece once
// every claimed gradient holds it, then applies and writes it while it stays in its cache, and
// publishes it for the others to pull while it makes the next; one of them, named by the chief
// where all sent in pieces, zeroes each piece of the accumulators after pulling it, and opens step
// s+1. A step whose only gradient is the chief's (one worker; backup workers' steps that it alone
// won) takes and zeroes nothing. Gradients that arrive after k others, or for an old step, are
// dropped and counted (backup workers: k below the number of replicas). The control traffic is
// batched so that a step costs each replica few round trips to ps 0 (see ParameterStore::update).
// With --bucket_bytes a replica claims its slot when the backward pass finishes the first piece of
// its gradient, and adds each piece as it becomes final; the report still follows the last. With
// --compression=bf16 the gradients travel to the ps, and their sum to the chief, as bfloat16 with
// error feedback (the sum's at the ps); the parameters stay float32.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iterator>
#include <optional>

#include "cohort/core/base/bfloat16.h"
#include "cohort/core/base/error.h"
#include "cohort/core/dist/modes/modes.h"
#include "cohort/core/dist/modes/ps_mode.h"

namespace cohort::modes {
namespace {

class SyncReplication final : public PsReplication {
 public:
  // The update's pieces, in parameters: 256 KB, which stay in a core's cache between the take,
  // the optimizer and the write.
  static constexpr std::size_t kPiece = 64 * 1024;

  SyncReplication(Server& server, Graph& graph, Optimizer& optimizer,
                  const ReplicationOptions& options)
      : PsReplication(server, graph, optimizer, options, /*accumulators=*/true),
        k_(options.replicas_to_aggregate > 0 ? options.replicas_to_aggregate : replicas_) {
    if (k_ > replicas_)
      throw InvalidArgument("--replicas_to_aggregate=" + std::to_string(k_) + " exceeds the " +
                            std::to_string(replicas_) + " workers");
    // The chief in pieces also reads the third block: the pieces the others have added.
    const bool all = server.is_chief() && in_cache_pieces();
    counters_.resize(all ? slot(ControlSlot::kWorkerBase) + 3 * static_cast<std::size_t>(replicas_)
                         : slot(ControlSlot::kClearer) + 1);
  }

  void before_step(std::span<float>) override {}
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
      const std::int64_t sent_pieces = in_pieces() ? 0 : send_gradient(s, grads);
      store_.complete();
      // The worker slot is for the stall inspector. In pieces, the last one's count follows the
      // completion: the chief may take the last piece on the count alone, and then resets the
      // completions, which must already hold this one.
      const ParameterStore::SlotUpdate completed{ControlSlot::kCompleted, 1, mpi::Op::kSum};
      const ParameterStore::SlotUpdate delivered{ControlSlot::kWorkerBase, s + 1,
                                                 mpi::Op::kReplace, replica_};
      if (sent_pieces == 0) {
        store_.update({completed, delivered});
      } else {
        store_.update({completed, delivered, pieces_added(s, sent_pieces)});
      }
    }
    bool applied = claimed;
    if (server_.is_chief()) {
      apply(s, claimed ? grads : std::span<const float>(), values);
    } else {
      // The chief writes the update in pieces; each is pulled as soon as it is written, and
      // where the chief has named this worker to clear the sums, their same piece then zeroed.
      std::int64_t global = 0;
      std::size_t pulled = 0, cleared = 0;
      const auto clear_to = [&](std::size_t end) {
        store_.clear_gradients(static_cast<std::int64_t>(cleared), end - cleared);
        cleared = end;
      };
      timed_wait(
          [&] {
            read_counters();
            global = counters_[slot(ControlSlot::kGlobalStep)];
            if (global > s || counters_[slot(ControlSlot::kStopped)] != 0) return true;
            const auto written = std::min(
                values.size(),
                static_cast<std::size_t>(count_for(counters_[slot(ControlSlot::kApplied)], s)) *
                    kPiece);
            if (written > pulled) {
              store_.pull(static_cast<std::int64_t>(pulled),
                          values.subspan(pulled, written - pulled));
              pulled = written;
              if (clears(s)) clear_to(pulled);
            }
            return false;
          },
          options_.wait_timeout,
          [&] { return chief_name() + " to apply step " + std::to_string(s); });
      const bool stopped = counters_[slot(ControlSlot::kStopped)] != 0;
      hear_learning_rate_scale(counters_[slot(ControlSlot::kLearningRateScale)]);
      // A later step than s (this replica fell behind) or a stop: all of it, as it is now.
      if (global != s + 1) pulled = 0;
      store_.pull(static_cast<std::int64_t>(pulled), values.subspan(pulled));
      // The named worker, once the chief has published step s or stopped (either way it has
      // taken every piece), zeroes the rest of the sums and opens step s+1 for claims. It cannot
      // have fallen behind: step s+1 is published only after it opens. The read that ended the
      // wait is atomic slot by slot, not as a whole, so the name is read again if it did not
      // show it.
      if (in_cache_pieces() && (global == s + 1 || stopped) &&
          (clears(s) || store_.read(ControlSlot::kClearer) == clearer_word(s, replica_))) {
        clear_to(values.size());
        store_.update({{ControlSlot::kSyncWord, step_word(s + 1, 0)}});
        ++sums_cleared_;
      }
      // A chief that stopped before applying step s leaves the global step at s, and this
      // gradient unapplied.
      const bool applied_s = global > s;
      applied = claimed && applied_s;
      step_ = applied_s ? std::max(s + 1, global) : s;
    }
    return {step_, applied, counters_[slot(ControlSlot::kStopped)] != 0};
  }

  std::int64_t dropped_gradients() const override { return dropped_; }
  std::optional<std::int64_t> gradients_applied() const override {
    if (!server_.is_chief()) return std::nullopt;
    return gradients_applied_;
  }
  // Every replica computes one gradient per global step (dropped ones included).
  std::int64_t batches_at(std::int64_t step) const override { return step; }
  std::string mode_stats() const override {
    std::string text = "dropped " + std::to_string(dropped_) + " stale or surplus gradients";
    if (left_seen_ > 0)
      text += ", " + std::to_string(left_seen_) + " of " + std::to_string(replicas_) +
              " workers left before the end";
    const std::string pieces =
        " in " + std::to_string(kPiece * sizeof(float) / 1024) + " KB pieces";
    if (updates_in_pieces_ > 0)
      text += ", " + std::to_string(updates_in_pieces_) + " updates written" + pieces;
    if (gradients_in_pieces_ > 0)
      text += ", " + std::to_string(gradients_in_pieces_) + " gradients added" + pieces;
    if (sums_cleared_ > 0)
      text += ", cleared the sums of " + std::to_string(sums_cleared_) + " steps";
    return text;
  }

 private:
  static constexpr std::size_t slot(ControlSlot c) { return static_cast<std::size_t>(c); }

  void begin_pieces(std::size_t) override { claimed_.reset(); }
  bool send_piece(std::int64_t first, std::span<const float> grads) override {
    if (!claimed_) claimed_ = claim(step_);
    if (*claimed_) start_send(first, grads, /*accumulators=*/true);
    return *claimed_;
  }
  // Slots kGlobalStep..kClearer (the chief in pieces: every slot), in one round trip.
  void read_counters() { store_.read(ControlSlot::kGlobalStep, counters_); }

  // Where the memory is one-sided and each worker has a core, the chief makes the update in
  // pieces of kPiece that stay in its cache from the take to the write, each published as it is
  // written for the others to pull while the next is made, and the workers add their gradients
  // in the same pieces. Whole where clipping needs every gradient's norm first, where the memory
  // is served (each piece would cost the ps a request more), and where the workers share cores
  // (a worker that pulls takes the core the chief works on). Each process decides from its own
  // node's CPUs (or ReplicationOptions::spin_waits), so they may differ: a worker that sends
  // whole is waited for whole, and the chief then zeroes the sums itself.
  bool in_cache_pieces() const { return optimizer_.options().clip_norm <= 0 && waits_spin(); }

  // A worker's gradient after its backward pass: whole, or in the chief's pieces, each but the
  // last followed by the count added so far (the third block of worker slots), so that the chief
  // takes a piece as soon as every claimed gradient holds it, while the rest still arrives.
  // Returns the count of pieces, 0 when sent whole; the last's count is the caller's to send.
  std::int64_t send_gradient(std::int64_t s, std::span<const float> grads) {
    if (!in_cache_pieces()) {
      start_send(0, grads, /*accumulators=*/true);
      return 0;
    }
    std::int64_t count = 0;
    gradients_in_pieces_ += grads.size() > kPiece ? 1 : 0;
    for (std::size_t first = 0; first < grads.size(); first += kPiece) {
      if (count > 0) {
        store_.complete();
        store_.update({pieces_added(s, count)});
      }
      start_send(static_cast<std::int64_t>(first),
                 grads.subspan(first, std::min(kPiece, grads.size() - first)),
                 /*accumulators=*/true);
      ++count;
    }
    return count;
  }
  // This worker's slot in the third block: `count` pieces of its step-s gradient added.
  ParameterStore::SlotUpdate pieces_added(std::int64_t s, std::int64_t count) const {
    return {ControlSlot::kWorkerBase, step_word(s, count), mpi::Op::kReplace,
            2 * replicas_ + replica_};
  }

  // The chief, after read_counters(): how many leading parameters every one of the `others`
  // gradients claimed for step s holds, from the counts they sent with their pieces; 0 until
  // each has sent one (a worker that sends whole, or during its backward pass, sends none: the
  // chief waits for its completion). `first`: the lowest-numbered of them, -1 if none.
  std::size_t arrived(std::int64_t s, std::int64_t others, std::size_t n,
                      int* first = nullptr) const {
    std::int64_t senders = 0, pieces = kCountMask;
    const auto base = slot(ControlSlot::kWorkerBase) + 2 * static_cast<std::size_t>(replicas_);
    if (first != nullptr) *first = -1;
    for (int w = 0; w < replicas_; ++w) {
      const std::int64_t count = count_for(counters_[base + static_cast<std::size_t>(w)], s);
      if (count == 0) continue;  // another step's, or never sent (the slots start at 0)
      if (first != nullptr && *first < 0) *first = w;
      ++senders;
      pieces = std::min(pieces, count);
    }
    if (senders < others) return 0;
    return std::min(n, static_cast<std::size_t>(pieces) * kPiece);
  }

  // kClearer's value that names `replica` for step s, and whether the last read_counters() saw
  // this worker named for step s.
  static std::int64_t clearer_word(std::int64_t s, int replica) {
    return step_word(s, replica + 1);
  }
  bool clears(std::int64_t s) const {
    return counters_[slot(ControlSlot::kClearer)] == clearer_word(s, replica_);
  }

  // Who opens step s, for a message about waiting for it: the chief, or the worker it named to
  // clear step s-1's sums (the chief waits for that one alone).
  std::string opener(std::int64_t s) {
    const std::string step = "to open step " + std::to_string(s);
    if (!server_.is_chief())
      return chief_name() + " (or the worker it named to clear the sums) " + step;
    std::int64_t named = 0;
    try {
      named = store_.read(ControlSlot::kClearer);
    } catch (const Error&) {
      // The message stays about the wait, even where the ps no longer answers.
    }
    const std::int64_t replica = (named & kCountMask) - 1;
    const bool known = (named >> kStepShift) == s - 1 && replica >= 0;
    return (known ? replica_name(static_cast<int>(replica)) : std::string("the worker")) +
           ", named to clear the sums of step " + std::to_string(s - 1) + ", " + step;
  }

  // Takes one of step s's k slots: a compare-and-swap that names the step. The first try
  // guesses that no slot is taken yet, which saves reading the word first. A word of an earlier
  // step means step s is published but not yet open (the chief, or the worker it named, is
  // zeroing the accumulators): wait for that, unless the chief stops; a later step's means this
  // gradient is stale.
  bool claim(std::int64_t s) {
    std::int64_t word = step_word(s, 0);
    for (;;) {
      const std::int64_t seen = store_.compare_and_swap(ControlSlot::kSyncWord, word, word + 1);
      if (seen == word) return true;
      if ((seen >> kStepShift) < s) {
        // Slots kSyncWord..kStopped: a stop ends the wait, and the claim fails.
        std::int64_t slots[slot(ControlSlot::kStopped) - slot(ControlSlot::kSyncWord) + 1];
        timed_wait(
            [&] {
              store_.read(ControlSlot::kSyncWord, slots);
              return (slots[0] >> kStepShift) >= s || slots[std::size(slots) - 1] != 0;
            },
            options_.wait_timeout,
            [&] { return opener(s); });
        if (slots[std::size(slots) - 1] != 0) return false;
        continue;
      }
      if ((seen >> kStepShift) != s || (seen & kCountMask) >= k_) return false;
      word = seen;
    }
  }

  // The chief: waits for the claimed gradients, averages them with its own (`mine`, empty when
  // it did not claim a slot), applies the update and publishes step s+1.
  void apply(std::int64_t s, std::span<const float> mine, std::span<float> values) {
    if (static_cast<std::int64_t>(values.size()) != store_.num_parameters() ||
        (!mine.empty() && mine.size() != values.size()))
      throw InvalidArgument("sync mode: " + std::to_string(mine.size()) + " gradients and " +
                            std::to_string(values.size()) + " values for " +
                            std::to_string(store_.num_parameters()) + " parameters");
    const std::int64_t own = mine.empty() ? 0 : 1;
    const auto completed = [&] { return counters_[slot(ControlSlot::kCompleted)] + own; };
    // In pieces, the claims suffice: each piece is taken once every claimed gradient holds it.
    const bool pieces = in_cache_pieces();
    const auto ready = [&] {
      read_counters();
      const std::int64_t active = replicas_ - counters_[slot(ControlSlot::kRetired)];
      const std::int64_t needed = std::min<std::int64_t>(k_, std::max<std::int64_t>(active, 1));
      return completed() >= needed ||
             (pieces && count_for(counters_[slot(ControlSlot::kSyncWord)], s) >= needed);
    };
    timed_wait(ready, options_.wait_timeout, [&] { return missing(s, own); });
    if (const std::int64_t left = counters_[slot(ControlSlot::kRetired)]; left > left_seen_) {
      // A worker that leaves early (a signal of its own, its hook's stop) is not waited for.
      left_seen_ = left;
      const std::int64_t now = std::min<std::int64_t>(k_, std::max<std::int64_t>(replicas_ - left, 1));
      std::fprintf(stderr, "[%s] warning: %lld of %d workers have left training by global step %lld; "
                   "a step now averages %lld gradient%s\n", process_label().c_str(),
                   static_cast<long long>(left), replicas_, static_cast<long long>(s),
                   static_cast<long long>(now), now == 1 ? "" : "s");
    }
    // Close step s to further claims; a claim made just before must still arrive in full.
    const std::int64_t claims =
        store_.exchange(ControlSlot::kSyncWord, step_word(s, k_)) & kCountMask;
    // The pieces' waits share one --wait_timeout from here.
    const auto closed = std::chrono::steady_clock::now();
    // The parameters whose sums are complete: all of them, or in pieces, those arrived so far.
    std::size_t complete = 0;
    const auto holds = [&](std::size_t end) {
      if (complete >= end) return true;
      read_counters();
      complete = completed() >= claims ? values.size() : arrived(s, claims - own, values.size());
      return complete >= end;
    };
    // Where the chief's own gradient is the step's only one (one worker, or backup workers'
    // steps that it alone won), the float32 accumulators hold zeros: nothing to take or clear.
    const bool alone = claims == 1 && own == 1 && options_.compression != Compression::kBf16;
    const std::size_t n = values.size();
    const bool bf16 = options_.compression == Compression::kBf16;
    const std::size_t piece = pieces ? kPiece : std::max<std::size_t>(n, 1);
    const float scale = 1.0f / static_cast<float>(claims);
    if (!alone) sums_.resize(pieces ? std::min(piece, n) : n);  // in pieces, one reused
    if (!alone && bf16) taken_.resize(n);
    if (pieces) optimizer_.begin_pieces(s, n);
    int clearer = -1;  // the worker that zeroes the accumulators, -1 the chief
    updates_in_pieces_ += pieces && n > piece ? 1 : 0;
    // At least once: the optimizer counts the step even with nothing to update.
    std::size_t first = 0;
    do {
      const std::size_t size = std::min(piece, n - first);
      const auto at = static_cast<std::int64_t>(first);
      std::span<const float> sum = mine.empty() ? mine : mine.subspan(first, size);
      std::span<const float> plus;  // a gradient the optimizer adds to `sum` as it reads it
      if (!alone) {
        if (!holds(first + size))
          timed_wait([&] { return holds(first + size); }, left_since(closed),
                     [&] { return missing(s, own); });
        const std::span<float> out = std::span(sums_).subspan(pieces ? 0 : first, size);
        if (bf16) {
          // As bfloat16; what the rounding loses stays in the accumulators for the next step.
          const auto wire = std::span(taken_).subspan(first, size);
          store_.take_gradients_bf16(at, wire);
          bf16::to_float(wire, out);
        } else {
          store_.take_gradients(at, out);  // served: and the accumulators are zero again
        }
        // The chief's own gradient joins the sum: as the optimizer reads it in pieces, else
        // first (clipping takes the norm of the whole sum). The optimizer averages.
        if (own && pieces) plus = sum;
        if (own && !pieces)
          for (std::size_t i = 0; i < size; ++i) out[i] += mine[first + i];
        sum = out;
      }
      // In pieces, one of the others, which pulls each piece while the chief makes the next,
      // zeroes the accumulators behind it: the lowest-numbered of those that sent their
      // gradients in pieces, where all did (else the chief zeroes them, as when whole). Named
      // before the first piece is published.
      if (first == 0 && pieces && !alone) {
        int sender = -1;
        if (arrived(s, claims - own, n, &sender) > 0 && sender >= 0) {
          clearer = sender;
          store_.update({{ControlSlot::kClearer, clearer_word(s, clearer)}});
        }
      }
      const auto part = values.subspan(first, size);
      if (pieces) {
        optimizer_.apply_piece(at, part, sum, scale, plus);
      } else {
        optimizer_.apply(values, sum, s, scale);
      }
      store_.assign(at, part);
      first += size;
      if (first < n)
        store_.update(
            {{ControlSlot::kApplied, step_word(s, static_cast<std::int64_t>(first / piece))}});
    } while (first < n);
    // The count is reset before step s+1 opens for claims. Served, one request takes and zeroes
    // the accumulators, and the step opens as it is published. One-sided, the step is published
    // first, so that the others pull while the accumulators are zeroed, and opens for claims
    // after that (a replica that claims sooner waits for it: see claim()): by the chief, or by
    // the worker it named, which has zeroed them piece by piece behind its pulls.
    const std::int64_t next = step_word(s + 1, 0);
    if (store_.served()) {
      store_.update({{ControlSlot::kCompleted, 0},
                     {ControlSlot::kWorkerBase, s + 1, mpi::Op::kReplace, replica_},
                     {ControlSlot::kSyncWord, next},
                     {ControlSlot::kGlobalStep, s + 1}});
    } else {
      store_.update({{ControlSlot::kCompleted, 0},
                     {ControlSlot::kWorkerBase, s + 1, mpi::Op::kReplace, replica_},
                     {ControlSlot::kGlobalStep, s + 1}});
      if (clearer < 0) {
        if (!alone) store_.clear_gradients();
        store_.update({{ControlSlot::kSyncWord, next}});
      }
    }
    gradients_applied_ += claims;
    step_ = s + 1;
  }

  // What is left of --wait_timeout (0: none) since `since`; at least a millisecond.
  std::chrono::milliseconds left_since(std::chrono::steady_clock::time_point since) const {
    using namespace std::chrono;
    if (options_.wait_timeout.count() == 0) return options_.wait_timeout;
    const auto spent = duration_cast<milliseconds>(steady_clock::now() - since);
    return std::max(milliseconds(1), options_.wait_timeout - spent);
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
  std::int64_t gradients_applied_ = 0;  // the chief: gradients its updates averaged
  std::int64_t left_seen_ = 0;  // the chief: workers seen retired while training
  std::int64_t updates_in_pieces_ = 0;
  std::int64_t gradients_in_pieces_ = 0;
  std::int64_t sums_cleared_ = 0;
  std::vector<float> sums_;
  std::vector<std::uint16_t> taken_;  // --compression=bf16: the sum as it travels
  // The slots read_counters() reads.
  std::vector<std::int64_t> counters_;
};

}  // namespace

std::unique_ptr<Replication> sync(Server& server, Graph& graph, Optimizer& optimizer,
                                  const ReplicationOptions& options) {
  return std::make_unique<SyncReplication>(server, graph, optimizer, options);
}

}  // namespace cohort::modes
