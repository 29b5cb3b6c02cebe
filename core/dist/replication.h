#pragma once
// How a worker's gradients become parameter updates: the training modes behind --mode.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/layer.h"
#include "cohort/core/nn/optimizer.h"

namespace cohort {

class Server;

enum class Mode {
  kLocal,      ///< one process, no communication
  kAsync,      ///< pull, compute, push the optimizer's delta with MPI_Accumulate; no waiting
  kSync,       ///< every step aggregates the gradients of (the first k of) all workers
  kSsp,        ///< async, but no worker more than `staleness` steps ahead of the slowest
  kAllreduce,  ///< no ps: gradients summed with in-place MPI_Allreduce in fused buffers
};
/// "local", "async", "sync", "ssp" or "allreduce"; anything else is an InvalidArgument.
Mode parse_mode(const std::string& name);
const char* to_string(Mode mode);

/// How gradients travel between the workers.
enum class Compression {
  kNone,  ///< float32
  kBf16,  ///< bfloat16, half the bytes, with error feedback
};
/// "none" or "bf16"; anything else is an InvalidArgument.
Compression parse_compression(const std::string& name);
const char* to_string(Compression compression);
/// Bytes one value takes on the wire: 4 for float32, 2 for bfloat16.
inline std::int64_t wire_bytes(Compression compression) {
  return compression == Compression::kBf16 ? 2 : 4;
}

struct ReplicationOptions {
  Mode mode = Mode::kLocal;
  /// Sync: gradients that complete a step (the rest are backup workers); 0 means all workers.
  std::int64_t replicas_to_aggregate = 0;
  /// SSP: how many steps a worker may run ahead of the slowest one.
  std::int64_t staleness = 0;
  /// Allreduce: gradients are reduced in pieces of at most this many bytes (on the wire).
  std::int64_t fusion_bytes = 64 << 20;
  /// > 0 sends the gradients during the backward pass, in buckets of this many bytes on the
  /// wire (from the last layer's down, buckets.h) as each becomes final: non-blocking allreduces,
  /// or pushes to the ps tasks (async and ssp push each piece's delta, sync adds each piece to
  /// the accumulators; the sync chief keeps its own). 0 sends them after it (allreduce: in
  /// fusion_bytes pieces). Async and ssp refuse it with clipping.
  std::int64_t bucket_bytes = 0;
  /// The gradients' type on the wire. The ps modes take kBf16 only where the parameters are
  /// served by messages (the ps converts as it adds; MPI_Accumulate adds float32 only), and
  /// send the sync mode's gradients (and the chief takes their sum), or async/ssp's deltas, as
  /// bfloat16 with error feedback; the parameters travel as float32.
  Compression compression = Compression::kNone;
  /// Async: the next step's parameters are pulled during the step (the pull starts before its
  /// forward pass, ahead of this worker's own update), and the worker adds its update itself
  /// (as the ps adds it: rounded, with compression). They miss only the other workers' pushes
  /// that arrive during the step, which the next pull brings.
  bool prefetch = false;
  /// Allreduce mode, float32 without buckets: the ranks of a node sum their gradients in the
  /// memory they share, and MPI_Allreduce sums across the nodes (NodeSum), where every node
  /// holds as many workers. False: MPI_Allreduce alone.
  bool shared_memory_sums = true;
  /// Every wait on other tasks gives up after this long (0: never), naming what it waited for.
  /// Long by default, so that a task that hangs (a hook stuck on a file system, say) ends the
  /// job within the hour rather than at its time limit; `train` sets --wait_timeout_secs.
  std::chrono::milliseconds wait_timeout{std::chrono::minutes(30)};
  /// A wait inside MPI (a collective, a transfer to a stalled ps, the end of training, where no
  /// poll can time out) ends the job after this long (0: never): StallWatch::timeout(), which
  /// the Trainer sets. Long: a chief may keep the others waiting a while (restoring,
  /// evaluating, saving).
  std::chrono::milliseconds stall_timeout{std::chrono::minutes(30)};
  /// The ps modes, where the memory is one-sided: whether a wait polls for up to a millisecond
  /// before it sleeps (and a sync step goes in pieces). Unset: where every worker on the node
  /// has a CPU for each of its threads. Where the memory is served, waits sleep.
  std::optional<bool> spin_waits;
};

/// What one step did.
struct StepOutcome {
  std::int64_t global_step = 0;  ///< the global step after this step
  bool applied = true;           ///< false: sync mode dropped this worker's gradient as stale or
                                 ///< surplus, or the chief stopped before applying the step
  bool stop = false;             ///< the chief has stopped training; leave the loop
};

/// One replica's side of a training mode (a worker's, or the chief's). The trainer calls, per
/// step:
///   before_step(values)  — make `values` current (pull; SSP waits for the slowest worker)
///   gradient_listener(grads) — optional: what the backward pass tells as gradients finish
///   ...forward and backward into grads...
///   after_step(grads, values) — turn grads into an update (apply, push, or aggregate)
/// Methods are blocking, from the main thread only. Collective calls are marked so.
class Replication {
 public:
  /// Makes the replication for `options.mode` on a computing task (one file per mode in
  /// core/dist/modes/). Modes with a ps make the parameter store (a collective over the computing
  /// and ps tasks); allreduce mode its shared memory (a collective over the computing tasks).
  /// Throws InvalidArgument when the cluster does not fit the mode (no ps for async/sync/ssp) or
  /// `server` is not a computing task.
  static std::unique_ptr<Replication> create(Server* server, Graph& graph, Optimizer& optimizer,
                                             const ReplicationOptions& options);
  virtual ~Replication() = default;

  /// Collective over the replicas. `values` holds the chief's initial parameters on the chief; on
  /// return every replica's `values` holds the parameters training starts from.
  /// `initial_step` is the chief's global step to start from (a restored checkpoint's). The
  /// others wait at most `ready_timeout` for the chief (default: the options' wait_timeout).
  virtual void start(std::span<float> values, std::int64_t initial_step,
                     std::optional<std::chrono::milliseconds> ready_timeout = std::nullopt) = 0;
  virtual void before_step(std::span<float> values) = 0;
  /// Called before each step's backward pass with the buffer after_step() will get: a listener
  /// for OpContext::gradients_ready that sends each part of the gradients as it becomes final,
  /// or null when the mode takes them whole in after_step().
  virtual GradientListener* gradient_listener(std::span<float>) { return nullptr; }
  /// For OpContext::update_in_place: the update the layers may make in the backward pass, where
  /// the mode applies the gradients itself and nothing else reads them (local mode with SGD), or
  /// null. after_step() finishes it. Only for a step made by one tower.
  virtual InPlaceUpdate* update_in_place() { return nullptr; }
  /// Where the mode would have the gradients computed (allreduce mode: memory the other ranks of
  /// the node read them from), or empty. after_step() takes them anywhere; here they need no copy.
  virtual std::span<float> gradient_memory() { return {}; }
  virtual StepOutcome after_step(std::span<float> grads, std::span<float> values) = 0;
  /// The global step as this worker last saw it.
  virtual std::int64_t global_step() const = 0;
  /// A fresh read of the global step; not collective.
  virtual std::int64_t read_global_step() { return global_step(); }
  /// A fresh read of whether the chief has stopped training (the ps modes; elsewhere a stop is
  /// agreed at a step); not collective.
  virtual bool read_stopped() { return false; }
  /// Whether start() may be called (again): not in the ps modes once finish() has left the store.
  virtual bool can_start() const { return true; }
  /// Leaves training: others no longer wait for this worker. The chief also tells the others to
  /// stop. Then closes the store (collective with the ps tasks). Called by the destructor too.
  virtual void finish() = 0;
  /// Leaves training after an error, where peers may be waiting in a collective this worker
  /// will not join: the ps modes finish() and leave the hosted memory (Server::abandon);
  /// allreduce takes nothing collective at destruction unless a new start() comes first. What
  /// is left behind ends the job with this process (app::Run aborts it, even on a return of 0).
  virtual void abandon() { finish(); }
  /// Mode-specific counters for the log, e.g. "dropped 3 stale gradients".
  virtual std::string stats() const { return ""; }
  /// SSP: the largest gap seen between this worker's clock and the slowest worker's when it
  /// started a step (never more than the staleness bound).
  virtual std::int64_t max_observed_staleness() const { return 0; }
  /// Sync: gradients this worker's pushes had dropped as stale or surplus.
  virtual std::int64_t dropped_gradients() const { return 0; }
  /// Where this task applies the updates of the whole cluster (the sync chief): the gradients
  /// its updates have averaged so far (fewer per step once a worker has left, or with backup
  /// workers' k). std::nullopt elsewhere: a global step is examples_per_global_step()'s worth.
  virtual std::optional<std::int64_t> gradients_applied() const { return std::nullopt; }
  /// The gradient bytes this worker has handed to MPI so far: allreduce, what one rank puts on
  /// the wire for its part of each reduction (before the reduction's own traffic; summed in a
  /// node's shared memory, its whole gradient all the same); the ps
  /// modes, its pushes (the sync chief sends none); 0 in local mode.
  virtual std::int64_t gradient_bytes_sent() const { return 0; }

  /// The current parameters (from the ps tasks in modes that keep them there). For checkpoints.
  virtual void fetch_parameters(std::span<float> values) = 0;
  /// Shares this worker's recent mean step time; returns every worker's on the chief (in worker
  /// order), this worker's alone elsewhere. Collective over the workers in allreduce mode: call
  /// it at the same step everywhere.
  virtual std::vector<double> exchange_step_times(double mine) = 0;
  /// Whether to stop after this step, given this worker's wish. Allreduce mode agrees across the
  /// workers (collective, every step); the ps modes hear the chief's stop through the store.
  virtual bool agree_to_stop(bool mine) { return mine; }
  /// The factor on every replica's learning rate (a reduction on a plateau), set on the chief
  /// (elsewhere it changes what this replica uses until the chief's is heard again). The chief
  /// uses it from its next step; the others hear it in the ps modes with the stop flag, after
  /// their step (the sync chief alone applies updates; in async and ssp a worker may take a
  /// step or two at the old rate), and allreduce mode agrees on it with the stop (collective,
  /// as agree_to_stop), so that every replica changes rate at the same step, the chief too.
  virtual void set_learning_rate_scale(double scale) { learning_rate_scale_ = scale; }
  /// The factor this replica's steps use: the chief's as this replica last heard (or agreed)
  /// it; 1 until the chief sets another.
  double learning_rate_scale() const { return learning_rate_scale_; }
  /// Batches this worker has consumed when the global step is `step` (to resume the data order).
  virtual std::int64_t batches_at(std::int64_t step) const { return step; }
  /// Seconds spent waiting for other tasks (the staleness bound, the chief) since the last call.
  double take_wait_seconds() { return std::exchange(last_wait_, 0.0); }

 protected:
  double last_wait_ = 0;
  double learning_rate_scale_ = 1.0;
};

}  // namespace cohort
