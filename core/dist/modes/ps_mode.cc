#include "cohort/core/dist/modes/ps_mode.h"

#include <sched.h>

#include <algorithm>
#include <bit>
#include <exception>

#include "cohort/core/base/bfloat16.h"
#include "cohort/core/base/error.h"
#include "cohort/core/base/signals.h"
#include "cohort/core/base/wait.h"
#include "cohort/core/dist/fusion.h"
#include "cohort/core/dist/modes/modes.h"
#include "cohort/core/nn/threads.h"

namespace cohort::modes {
namespace {

// Whether the workers on this task's node, with their intra-op threads, have a CPU each among
// those this process may run on. With more ranks than cores, a waiting rank must give its core
// to the others.
bool cores_to_spare(const Server& server) {
#ifdef __linux__
  cpu_set_t cpus;
  if (!server.is_computing() || sched_getaffinity(0, sizeof cpus, &cpus) != 0) return false;
  const ClusterSpec& cluster = server.cluster();
  const std::string& node = cluster.node_of(server.replica_rank(server.replica_index()));
  int workers = 0;
  for (int r = 0; r < server.num_replicas(); ++r)
    workers += cluster.node_of(server.replica_rank(r)) == node ? 1 : 0;
  return workers * intra_op_threads() <= CPU_COUNT(&cpus);
#else
  static_cast<void>(server);
  return false;
#endif
}

}  // namespace

PsReplication::PsReplication(Server& server, Graph& graph, Optimizer& optimizer,
                             const ReplicationOptions& options, bool accumulators)
    : server_(server),
      optimizer_(optimizer),
      options_(options),
      store_(server, graph, ParameterStore::Options{accumulators}),
      replica_(server.replica_index()),
      replicas_(server.num_replicas()) {
  // A sync step's waits on shared memory last a few hundred microseconds (the mlp's); polling
  // up to a millisecond without sleeping made 2 workers' mlp steps about 15% faster, where each
  // worker had a core, and 8% slower with 7 workers on 2 cores (docs/BENCHMARKS.md).
  if (!store_.served() && options.spin_waits.value_or(cores_to_spare(server)))
    spin_ = std::chrono::milliseconds(1);
  if (options.compression == Compression::kBf16 && !store_.served())
    throw InvalidArgument(
        std::string("compression bf16: the ") + to_string(options.mode) + " mode's ps converts "
        "bfloat16 as it adds, which needs parameters served by messages (as over TCP alone, or "
        "with COHORT_ONE_SIDED=0); here they are " + server.memory_transport() +
        ", where MPI_Accumulate adds float32 only");
}

PsReplication::~PsReplication() {
  // While an error unwinds, leaving would wait on other tasks; app::Run ends the job instead.
  if (std::uncaught_exceptions() > 0) return;
  try {
    finish();
  } catch (...) {
  }
}

std::string PsReplication::chief_name() const {
  return "the chief (" + server_.replica_task(0).to_string() + ", rank " +
         std::to_string(server_.replica_rank(0)) + ")";
}

std::string PsReplication::replica_name(int replica) const {
  return server_.replica_task(replica).to_string() + " (rank " +
         std::to_string(server_.replica_rank(replica)) + ")";
}

void PsReplication::timed_wait(const std::function<bool()>& ready,
                               std::chrono::milliseconds timeout,
                               const std::function<std::string()>& what) {
  using namespace std::chrono;
  const auto begin = steady_clock::now();
  // After a stop signal the others are given twice the recent step time (at least half a
  // second) to arrive; one that has not by then is stalled, and the scheduler will not wait.
  std::optional<steady_clock::time_point> signalled;
  const duration<double> grace = std::max(duration<double>(0.5), 2 * pace_);
  wait_until(
      [&] {
        if (ready()) return true;
        if (stop_signal_received() == 0) return false;
        const auto now = steady_clock::now();
        if (!signalled) signalled = now;
        if (now - *signalled > grace)
          throw StopSignalled(stop_signal_received(),
                              "stopped by signal " + std::to_string(stop_signal_received()) +
                                  " while waiting " +
                                  std::to_string(duration<double>(now - begin).count()) +
                                  " s for " + what());
        return false;
      },
      timeout, what, spin_);
  const auto end = steady_clock::now();
  last_wait_ += duration<double>(end - begin).count();
  // The pace of the cluster: time from one completed wait to the next, smoothed.
  if (last_wait_end_) pace_ = 0.8 * pace_ + 0.2 * (end - *last_wait_end_);
  last_wait_end_ = end;
}

void PsReplication::start(std::span<float> values, std::int64_t initial_step,
                          std::optional<std::chrono::milliseconds> ready_timeout) {
  if (server_.is_chief()) {
    store_.assign(values);
    store_.write(ControlSlot::kGlobalStep, initial_step);
    store_.write(ControlSlot::kSyncWord, step_word(initial_step, 0));
    set_learning_rate_scale(learning_rate_scale_);  // a restored one, for the first step
    store_.write(ControlSlot::kReady, 1);
  } else {
    timed_wait([&] { return store_.read(ControlSlot::kReady) == 1; },
               ready_timeout.value_or(options_.wait_timeout),
               [&] { return chief_name() + " to initialise the parameters"; });
    stopped();  // hears the chief's learning-rate scale (a restored one) before the first step
  }
  store_.pull(values);
  step_ = store_.read(ControlSlot::kGlobalStep);
}

bool PsReplication::stopped() {
  std::int64_t slots[2];  // kStopped, kLearningRateScale
  static_assert(static_cast<int>(ControlSlot::kLearningRateScale) ==
                static_cast<int>(ControlSlot::kStopped) + 1);
  store_.read(ControlSlot::kStopped, slots);
  hear_learning_rate_scale(slots[1]);
  return slots[0] != 0;
}

void PsReplication::hear_learning_rate_scale(std::int64_t word) {
  if (word != 0) learning_rate_scale_ = std::bit_cast<double>(word);
}

void PsReplication::set_learning_rate_scale(double scale) {
  Replication::set_learning_rate_scale(scale);
  if (server_.is_chief() && !finished_)  // after finish(), the store is closed
    store_.write(ControlSlot::kLearningRateScale, std::bit_cast<std::int64_t>(scale));
}

std::vector<double> PsReplication::exchange_step_times(double mine) {
  // Microseconds in the second block of replica slots; the chief reads them all.
  store_.write(ControlSlot::kWorkerBase, static_cast<std::int64_t>(mine * 1e6),
               replicas_ + replica_);
  if (!server_.is_chief()) return {mine};
  std::vector<double> times;
  for (std::int64_t us : store_.read_worker_slots(1)) times.push_back(static_cast<double>(us) * 1e-6);
  return times;
}

void PsReplication::start_send(std::int64_t first, std::span<const float> values,
                               bool accumulators) {
  if (options_.compression == Compression::kNone) {
    bytes_sent_ += static_cast<std::int64_t>(values.size_bytes());
    if (accumulators) return store_.start_accumulate(first, values);
    return store_.start_push(first, values);
  }
  if (residual_.empty()) {
    residual_.assign(static_cast<std::size_t>(store_.num_parameters()), 0.0f);
    wire_.resize(residual_.size());
  }
  const auto range = [&](auto& all) {
    return std::span(all).subspan(static_cast<std::size_t>(first), values.size());
  };
  round_with_feedback(values, range(residual_), range(wire_));
  bytes_sent_ += static_cast<std::int64_t>(range(wire_).size_bytes());
  if (accumulators) return store_.start_accumulate_bf16(first, range(wire_));
  store_.start_push_bf16(first, range(wire_));
}

void PsReplication::add_sent(std::span<const float> base, std::span<const float> values,
                             std::span<float> out) const {
  if (options_.compression == Compression::kBf16) {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = base[i] + bf16::to_float(wire_[i]);
  } else {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = base[i] + values[i];
  }
}

GradientListener* PsReplication::gradient_listener(std::span<float> grads) {
  const bool started = begin_pass();
  if (in_pieces()) open_pieces(grads);
  return in_pieces() || started ? this : nullptr;
}

void PsReplication::open_pieces(std::span<float> grads) {
  grads_ = grads;
  buckets_ = Buckets(static_cast<std::int64_t>(grads.size()),
                     options_.bucket_bytes / wire_bytes(options_.compression));
  open_ = true;
  begin_pieces(grads.size());
}

void PsReplication::send(std::size_t bucket, bool during_backward) {
  const auto first = static_cast<std::size_t>(buckets_.begin(bucket));
  const bool sent = send_piece(buckets_.begin(bucket),
                               grads_.subspan(first, static_cast<std::size_t>(buckets_.size(bucket))));
  pieces_ += sent ? 1 : 0;
  during_backward_ += sent && during_backward ? 1 : 0;
}

void PsReplication::ready(std::int64_t from) {
  if (open_) buckets_.start_final(from, [&](std::size_t k) { send(k, true); });
  store_.progress();
}

void PsReplication::send_rest(std::span<float> grads) {
  // Without a listener this step (a GPU tower), every piece starts here.
  if (!open_ || grads.data() != grads_.data() || grads.size() != grads_.size()) open_pieces(grads);
  buckets_.start_rest([&](std::size_t k) { send(k, false); });
  open_ = false;
}

std::string PsReplication::stats() const {
  std::string text = mode_stats();
  if (bytes_sent_ > 0)
    text += std::string(text.empty() ? "" : ", ") + "gradients on the wire as " +
            (options_.compression == Compression::kBf16 ? "bfloat16" : "float32") + ": " +
            std::to_string(bytes_sent_) + " bytes";
  if (pieces_ > 0)
    text += std::string(text.empty() ? "" : ", ") + std::to_string(during_backward_) + " of " +
            std::to_string(pieces_) + " gradient pieces sent during the backward pass";
  return text;
}

void PsReplication::finish() { retire(/*after_error=*/false); }

void PsReplication::retire(bool after_error) {
  if (finished_) return;
  finished_ = true;
  // A retired replica's clock stops counting against the others' staleness bound.
  store_.write(ControlSlot::kWorkerBase, kRetiredClock, replica_);
  store_.fetch_add(ControlSlot::kRetired, 1);
  if (server_.is_chief()) {
    store_.write(ControlSlot::kStopped, 1);
  } else if (!after_error && stop_signal_received() != 0 &&
             store_.read(ControlSlot::kStopped) == 0) {
    // Stopped by a signal of its own while the chief trains on, and the others with it, maybe
    // for hours: this task's wait for them at the end is no stall. (Where every task got the
    // signal, the scheduler's kill bounds the job.)
    server_.leave_early();
  }
  store_.close();
}

void PsReplication::abandon() {
  retire(/*after_error=*/true);
  server_.abandon();
}

DeltaPushReplication::DeltaPushReplication(Server& server, Graph& graph, Optimizer& optimizer,
                                           const ReplicationOptions& options)
    : PsReplication(server, graph, optimizer, options, /*accumulators=*/false) {
  if (in_pieces() && optimizer.options().clip_norm > 0)
    throw InvalidArgument("--bucket_bytes=" + std::to_string(options.bucket_bytes) + " with " +
                          "--clip_norm: the " + to_string(options.mode) + " mode's pushes of a "
                          "clipped update cannot leave before the whole gradient's norm is known");
}

void DeltaPushReplication::start(std::span<float> values, std::int64_t initial_step,
                                 std::optional<std::chrono::milliseconds> ready_timeout) {
  PsReplication::start(values, initial_step, ready_timeout);
  share_optimizer_state(server_.replicas(), optimizer_, values.size());
}

void DeltaPushReplication::push_delta(std::span<float> grads, std::span<float> values) {
  values_ = values;
  if (in_pieces()) return send_rest(grads);
  delta_.resize(grads.size());
  optimizer_.compute_delta(grads, step_, delta_, values);
  start_send(0, delta_, /*accumulators=*/false);
}

void DeltaPushReplication::begin_pieces(std::size_t parameters) {
  delta_.resize(parameters);
  optimizer_.begin_pieces(step_, parameters);
}

bool DeltaPushReplication::send_piece(std::int64_t first, std::span<const float> grads) {
  const auto range = [&](auto all) {
    return all.subspan(static_cast<std::size_t>(first), grads.size());
  };
  optimizer_.delta_piece(first, grads, range(std::span<float>(delta_)),
                         values_.empty() ? values_ : range(values_));
  start_send(first, range(std::span<const float>(delta_)), /*accumulators=*/false);
  return true;
}

}  // namespace cohort::modes
