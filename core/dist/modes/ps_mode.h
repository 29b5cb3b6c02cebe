#pragma once
// What the modes with parameters on ps tasks (async, ssp, sync) share: the store, start-up (the
// chief initialises it, the others wait until it is ready), step times, leaving, and sending the
// gradients in pieces during the backward pass (--bucket_bytes).

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "cohort/core/dist/buckets.h"
#include "cohort/core/dist/parameter_store.h"
#include "cohort/core/dist/replication.h"
#include "cohort/core/dist/server.h"

namespace cohort::modes {

class PsReplication : public Replication, private GradientListener {
 public:
  PsReplication(Server& server, Graph& graph, Optimizer& optimizer,
                const ReplicationOptions& options, bool accumulators);
  ~PsReplication() override;

  void start(std::span<float> values, std::int64_t initial_step,
             std::optional<std::chrono::milliseconds> ready_timeout) override;
  std::int64_t global_step() const override { return step_; }
  std::int64_t read_global_step() override { return store_.read(ControlSlot::kGlobalStep); }
  bool read_stopped() override { return stopped(); }
  /// On the chief, also written to the control slot the others read it from.
  void set_learning_rate_scale(double scale) override;
  bool can_start() const override { return !finished_; }
  void fetch_parameters(std::span<float> values) override { store_.pull(values); }
  std::vector<double> exchange_step_times(double mine) override;
  void finish() override;
  /// finish(), and the server leaves the hosted memory at done() (Server::abandon).
  void abandon() override;
  std::int64_t gradient_bytes_sent() const override { return bytes_sent_; }
  /// With --bucket_bytes: this step's pieces start as the backward pass finishes them.
  GradientListener* gradient_listener(std::span<float> grads) override;
  std::string stats() const override;

 protected:
  static constexpr int kStepShift = 24;
  static constexpr std::int64_t kCountMask = (std::int64_t{1} << kStepShift) - 1;
  /// A control word that counts something for one step: (step << kStepShift) | count.
  static constexpr std::int64_t step_word(std::int64_t step, std::int64_t count) {
    return (step << kStepShift) | count;
  }
  /// What such a word counts for `step`: 0 when it is another step's.
  static constexpr std::int64_t count_for(std::int64_t word, std::int64_t step) {
    return (word >> kStepShift) == step ? word & kCountMask : 0;
  }
  static constexpr std::int64_t kRetiredClock = std::int64_t{1} << 60;

  /// "the chief (worker:0, rank 1)".
  std::string chief_name() const;
  /// "worker:1 (rank 2)" for replica `replica`.
  std::string replica_name(int replica) const;
  /// Whether the chief has stopped training; hears its learning-rate scale in the same read.
  bool stopped();
  /// kLearningRateScale's word as the chief wrote it: learning_rate_scale_ from now on.
  void hear_learning_rate_scale(std::int64_t word);
  /// Whether waits poll without sleeping: the memory is one-sided and each worker on this node
  /// has a core of its own, so one replica's work can overlap another's wait (or
  /// ReplicationOptions::spin_waits says so).
  bool waits_spin() const { return spin_.count() > 0; }
  /// wait_until(), with the time spent added to last_wait_. After a stop signal (SIGTERM,
  /// SIGUSR1) it waits at most twice the recent time between waits (at least 0.5 s) more, then
  /// throws StopSignalled("stopped by signal N while waiting ... for <what>"): a stalled peer
  /// must not keep a stopping task past the scheduler's grace period.
  void timed_wait(const std::function<bool()>& ready, std::chrono::milliseconds timeout,
                  const std::function<std::string()>& what);

  /// Starts adding `values` (gradients or a delta) to the parameters (`accumulators`: to sync
  /// mode's gradient accumulators) from `first` on: as float32, or with --compression=bf16
  /// rounded to bfloat16 with error feedback (what the rounding loses is added to the next
  /// send of the same elements). Completes like ParameterStore::start_push.
  void start_send(std::int64_t first, std::span<const float> values, bool accumulators);
  /// out := base + what start_send() sent of `values` (from element 0) as the ps adds it: the
  /// values themselves, or with --compression=bf16 their bfloat16 rounding.
  void add_sent(std::span<const float> base, std::span<const float> values,
                std::span<float> out) const;

  /// finish() and abandon(): this replica leaves training (its clock no longer counts against
  /// the others' staleness bound; the chief's leaving stops training). A non-chief stopped by a
  /// signal of its own (not after an error) while the chief trains on tells its Server
  /// (Server::leave_early).
  void retire(bool after_error);

  /// --bucket_bytes > 0: the gradients leave in pieces (buckets.h), each through send_piece().
  bool in_pieces() const { return options_.bucket_bytes > 0; }
  /// The step's forward and backward pass is about to start (its listener is asked for): a mode
  /// that starts transfers then (a prefetch) says so by returning true, and the backward pass
  /// then moves them on between layers.
  virtual bool begin_pass() { return false; }
  /// A step's pieces of `parameters` values are about to start (before the first send_piece()).
  virtual void begin_pieces(std::size_t parameters) { static_cast<void>(parameters); }
  /// Starts sending the final gradients grads[first, first + size) (the transfer may complete
  /// later: ParameterStore::start_push), or returns false when this step sends nothing (a sync
  /// gradient without a slot); pieces come from the buffer's end down, each once.
  virtual bool send_piece(std::int64_t first, std::span<const float> grads) = 0;
  /// In after_step(): sends the pieces the backward pass has not (all of them where it had no
  /// listener, e.g. a GPU tower).
  void send_rest(std::span<float> grads);
  /// What this mode's own stats() says; stats() adds the pieces to it.
  virtual std::string mode_stats() const { return ""; }

  Server& server_;
  Optimizer& optimizer_;
  ReplicationOptions options_;
  ParameterStore store_;
  int replica_;   // this task's index among the replicas
  int replicas_;  // how many there are
  std::int64_t step_ = 0;
  bool finished_ = false;

 private:
  // GradientListener, during the backward pass.
  void ready(std::int64_t from) override;
  void open_pieces(std::span<float> grads);
  void send(std::size_t bucket, bool during_backward);

  std::optional<std::chrono::steady_clock::time_point> last_wait_end_;
  std::chrono::duration<double> pace_{0};
  // How long a wait polls without sleeping (see wait_until): where the windows are one-sided a
  // poll is a read of ps memory that costs the ps nothing; where they are served, each poll is
  // a request the ps must answer, and waits sleep from the start.
  std::chrono::microseconds spin_{0};
  // --bucket_bytes: this step's buffer and its buckets; pieces sent, and during backward.
  std::span<float> grads_;
  Buckets buckets_;
  bool open_ = false;
  std::int64_t pieces_ = 0, during_backward_ = 0;
  // --compression=bf16: what the rounding has not sent yet, and the values as they travel.
  std::vector<float> residual_;
  std::vector<std::uint16_t> wire_;
  std::int64_t bytes_sent_ = 0;
};

/// The modes whose replicas push their optimizer's delta (async, ssp): each replica keeps its own
/// optimizer state, which is per element, so with --bucket_bytes a piece's delta is the whole
/// delta's range (Optimizer::delta_piece) and leaves as soon as its gradients are final.
class DeltaPushReplication : public PsReplication {
 public:
  /// Throws InvalidArgument for --bucket_bytes with gradient clipping (whose norm needs the whole
  /// gradient before any piece could leave).
  DeltaPushReplication(Server& server, Graph& graph, Optimizer& optimizer,
                       const ReplicationOptions& options);
  /// PsReplication::start, then every replica takes the chief's optimizer state: a checkpoint
  /// holds the chief's, the one state a resumed job has for all of them.
  void start(std::span<float> values, std::int64_t initial_step,
             std::optional<std::chrono::milliseconds> ready_timeout) override;

 protected:
  /// The parameters the step's gradients are taken at (weight decay needs them); set by
  /// before_step(). Then, in after_step(), push_delta() starts the delta's transfer (or its last
  /// pieces); it completes with the store's next blocking transfer or complete().
  void set_values(std::span<float> values) { values_ = values; }
  void push_delta(std::span<float> grads, std::span<float> values);

  std::vector<float> delta_;  // this step's update (push_delta)
  std::span<float> values_;

 private:
  void begin_pieces(std::size_t parameters) override;
  bool send_piece(std::int64_t first, std::span<const float> grads) override;
};

}  // namespace cohort::modes
