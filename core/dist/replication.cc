#include "cohort/core/dist/replication.h"

#include <algorithm>
#include <exception>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/base/wait.h"
#include "cohort/core/dist/fusion.h"
#include "cohort/core/dist/parameter_store.h"
#include "cohort/core/dist/server.h"

namespace cohort {

Mode parse_mode(const std::string& name) {
  if (name == "local") return Mode::kLocal;
  if (name == "async") return Mode::kAsync;
  if (name == "sync") return Mode::kSync;
  if (name == "ssp") return Mode::kSsp;
  if (name == "allreduce") return Mode::kAllreduce;
  throw InvalidArgument("unknown mode '" + name + "' (known: sync, async, ssp, allreduce, local)");
}

const char* to_string(Mode mode) {
  switch (mode) {
    case Mode::kLocal: return "local";
    case Mode::kAsync: return "async";
    case Mode::kSync: return "sync";
    case Mode::kSsp: return "ssp";
    case Mode::kAllreduce: return "allreduce";
  }
  return "?";
}

namespace {

// One process: the optimizer updates the parameters in place.
class LocalReplication final : public Replication {
 public:
  explicit LocalReplication(Optimizer& optimizer) : optimizer_(optimizer) {}
  void start(std::span<float>, std::int64_t initial_step) override { step_ = initial_step; }
  void before_step(std::span<float>) override {}
  StepOutcome after_step(std::span<float> grads, std::span<float> values) override {
    optimizer_.apply(values, grads, step_);
    return {++step_, true, false};
  }
  std::int64_t global_step() const override { return step_; }
  void finish() override {}
  void fetch_parameters(std::span<float>) override {}  // the graph holds them
  std::vector<double> exchange_step_times(double mine) override { return {mine}; }

 private:
  Optimizer& optimizer_;
  std::int64_t step_ = 0;
};

// Horovod's scheme on MPI: every worker sums the gradients with in-place MPI_Allreduce, averages
// and applies the same update, so parameters stay identical without any ps.
class AllreduceReplication final : public Replication {
 public:
  AllreduceReplication(Server& server, Optimizer& optimizer, const ReplicationOptions& options)
      : comm_(server.cluster().job_comm()),
        chief_rank_in_job_(0),
        optimizer_(optimizer),
        fusion_bytes_(options.fusion_bytes) {
    if (server.job_name() != "worker")
      throw InvalidArgument("allreduce mode runs on worker tasks, not " + server.task().to_string());
  }
  void start(std::span<float> values, std::int64_t initial_step) override {
    comm_.bcast(values, chief_rank_in_job_);  // everyone starts from the chief's parameters
    step_ = comm_.allreduce(initial_step, mpi::Op::kMax);
  }
  void before_step(std::span<float>) override {}
  StepOutcome after_step(std::span<float> grads, std::span<float> values) override {
    allreduce_fused(comm_, grads, fusion_bytes_);
    const float scale = 1.0f / static_cast<float>(comm_.size());
    for (float& g : grads) g *= scale;
    optimizer_.apply(values, grads, step_);
    return {++step_, true, false};
  }
  std::int64_t global_step() const override { return step_; }
  void finish() override {}
  void fetch_parameters(std::span<float>) override {}  // every worker holds them
  std::vector<double> exchange_step_times(double mine) override { return comm_.allgather(mine); }
  bool agree_to_stop(bool mine) override {
    return comm_.allreduce(mine ? 1 : 0, mpi::Op::kMax) != 0;
  }

 private:
  const mpi::Comm& comm_;
  int chief_rank_in_job_;
  Optimizer& optimizer_;
  std::int64_t fusion_bytes_;
  std::int64_t step_ = 0;
};

// The modes with parameters on ps tasks share start-up (the chief initialises the store, the
// others wait until it is ready) and shutdown.
class PsReplication : public Replication {
 public:
  PsReplication(Server& server, Graph& graph, Optimizer& optimizer,
                const ReplicationOptions& options, bool accumulators)
      : server_(server),
        optimizer_(optimizer),
        options_(options),
        store_(server, graph, ParameterStore::Options{accumulators}),
        worker_(server.task_index()),
        workers_(server.cluster().num_tasks("worker")) {
    if (server.job_name() != "worker")
      throw InvalidArgument(std::string(to_string(options.mode)) + " mode runs on worker tasks, not " +
                            server.task().to_string());
  }
  ~PsReplication() override {
    // While an error unwinds, leaving would wait on other tasks; app::Run ends the job instead.
    if (std::uncaught_exceptions() > 0) return;
    try {
      finish();
    } catch (...) {
    }
  }

  void start(std::span<float> values, std::int64_t initial_step) override {
    if (server_.is_chief()) {
      store_.assign(values);
      store_.write(ControlSlot::kGlobalStep, initial_step);
      store_.write(ControlSlot::kSyncWord, initial_step << kStepShift);
      store_.write(ControlSlot::kReady, 1);
    } else {
      timed_wait([&] { return store_.read(ControlSlot::kReady) == 1; }, options_.wait_timeout,
                 [&] { return "the chief (" + chief_name() + ") to initialise the parameters"; });
    }
    store_.pull(values);
    step_ = store_.read(ControlSlot::kGlobalStep);
  }

  std::int64_t global_step() const override { return step_; }
  std::int64_t read_global_step() override { return store_.read(ControlSlot::kGlobalStep); }
  void fetch_parameters(std::span<float> values) override { store_.pull(values); }

  std::vector<double> exchange_step_times(double mine) override {
    // Microseconds in the second block of worker slots; the chief reads them all.
    store_.write(ControlSlot::kWorkerBase, static_cast<std::int64_t>(mine * 1e6), workers_ + worker_);
    if (!server_.is_chief()) return {mine};
    std::vector<double> times;
    for (std::int64_t us : store_.read_worker_slots(1)) times.push_back(static_cast<double>(us) * 1e-6);
    return times;
  }

  void finish() override {
    if (finished_) return;
    finished_ = true;
    // A retired worker's clock stops counting against the others' staleness bound.
    store_.write(ControlSlot::kWorkerBase, kRetiredClock, worker_);
    store_.fetch_add(ControlSlot::kRetired, 1);
    if (server_.is_chief()) store_.write(ControlSlot::kStopped, 1);
    store_.close();
  }

 protected:
  static constexpr int kStepShift = 24;
  static constexpr std::int64_t kCountMask = (std::int64_t{1} << kStepShift) - 1;
  static constexpr std::int64_t kRetiredClock = std::int64_t{1} << 60;

  std::string chief_name() const {
    return "worker:0, rank " + std::to_string(server_.cluster().rank_of("worker", 0));
  }
  bool stopped() { return store_.read(ControlSlot::kStopped) != 0; }

  // wait_until, with the time spent added to last_wait_.
  void timed_wait(const std::function<bool()>& ready, std::chrono::milliseconds timeout,
                  const std::function<std::string()>& what) {
    const auto begin = std::chrono::steady_clock::now();
    wait_until(ready, timeout, what);
    last_wait_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  }

  Server& server_;
  Optimizer& optimizer_;
  ReplicationOptions options_;
  ParameterStore store_;
  int worker_;
  int workers_;
  std::int64_t step_ = 0;
  bool finished_ = false;
};

// Async: nothing waits. The worker computes on the parameters it pulled, its own optimizer turns
// the gradients into a delta, and MPI_Accumulate adds it at the ps without the ps's help.
class AsyncReplication final : public PsReplication {
 public:
  using PsReplication::PsReplication;
  void before_step(std::span<float> values) override { store_.pull(values); }
  std::int64_t batches_at(std::int64_t step) const override { return step / workers_; }
  StepOutcome after_step(std::span<float> grads, std::span<float>) override {
    delta_.resize(grads.size());
    optimizer_.compute_delta(grads, step_, delta_);
    store_.push(delta_);
    step_ = store_.fetch_add(ControlSlot::kGlobalStep, 1) + 1;
    return {step_, true, stopped()};
  }

 private:
  std::vector<float> delta_;
};

// Stale synchronous parallel: async pushes, plus a clock per worker. A worker starting step c
// waits until the slowest worker has finished step c - staleness. With staleness 0 the workers
// move in lock step.
class SspReplication final : public PsReplication {
 public:
  using PsReplication::PsReplication;
  void before_step(std::span<float> values) override {
    last_wait_ = 0;
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
  }
  StepOutcome after_step(std::span<float> grads, std::span<float>) override {
    delta_.resize(grads.size());
    optimizer_.compute_delta(grads, step_, delta_);
    store_.push(delta_);  // complete at the ps before the clock says so
    store_.write(ControlSlot::kWorkerBase, ++clock_, worker_);
    step_ = store_.fetch_add(ControlSlot::kGlobalStep, 1) + 1;
    return {step_, true, stopped()};
  }
  std::int64_t max_observed_staleness() const override { return max_gap_; }
  std::int64_t batches_at(std::int64_t step) const override { return step / workers_; }
  std::string stats() const override {
    return "largest clock gap seen " + std::to_string(max_gap_) + " (bound " +
           std::to_string(options_.staleness) + ")";
  }

 private:
  std::string laggards(std::int64_t bound) {
    const auto clocks = store_.read_worker_slots();
    std::string names;
    for (int w = 0; w < static_cast<int>(clocks.size()); ++w)
      if (clocks[static_cast<std::size_t>(w)] < bound)
        names += (names.empty() ? "" : ", ") + std::string("worker:") + std::to_string(w) +
                 " (clock " + std::to_string(clocks[static_cast<std::size_t>(w)]) + ")";
    return names + " to reach clock " + std::to_string(bound);
  }

  std::vector<float> delta_;
  std::int64_t clock_ = 0;
  std::int64_t max_gap_ = 0;
};

// Barrier-based synchronous SGD. For step s, workers claim one of k slots in the sync word on
// ps 0 (a compare-and-swap that names the step, so a late gradient can never count for a later
// step), add their gradient into the accumulators on the ps tasks and report completion. The
// chief waits for the k claims, averages, applies the update once with its optimizer, writes the
// parameters back, zeroes the accumulators and publishes step s+1; the others wait for that and
// pull. Gradients that arrive after k others, or for an old step, are dropped and counted.
class SyncReplication final : public PsReplication {
 public:
  SyncReplication(Server& server, Graph& graph, Optimizer& optimizer,
                  const ReplicationOptions& options)
      : PsReplication(server, graph, optimizer, options, /*accumulators=*/true),
        k_(options.replicas_to_aggregate > 0 ? options.replicas_to_aggregate
                                             : server.cluster().num_tasks("worker")) {
    if (k_ > workers_)
      throw InvalidArgument("--replicas_to_aggregate=" + std::to_string(k_) + " exceeds the " +
                            std::to_string(workers_) + " workers");
  }

  void before_step(std::span<float>) override { last_wait_ = 0; }

  StepOutcome after_step(std::span<float> grads, std::span<float> values) override {
    const std::int64_t s = step_;
    const bool claimed = claim(s);
    if (claimed) {
      store_.accumulate_gradients(grads);
      store_.fetch_add(ControlSlot::kCompleted, 1);
      store_.write(ControlSlot::kWorkerBase, s + 1, worker_);  // for the stall inspector
    } else {
      ++dropped_;
      store_.fetch_add(ControlSlot::kDropped, 1);
    }
    if (server_.is_chief()) {
      apply(s, values);
    } else {
      timed_wait([&] { return store_.read(ControlSlot::kGlobalStep) > s || stopped(); },
                 options_.wait_timeout,
                 [&] { return "the chief (" + chief_name() + ") to apply step " + std::to_string(s); });
      store_.pull(values);
      step_ = std::max(s + 1, store_.read(ControlSlot::kGlobalStep));
    }
    return {step_, claimed, stopped()};
  }

  std::int64_t dropped_gradients() const override { return dropped_; }
  // Every worker computes one gradient per global step (dropped ones included).
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
      const std::int64_t active = workers_ - store_.read(ControlSlot::kRetired);
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
    // Open step s+1 for claims before publishing it: a worker that sees the new global step
    // must find its claim slot ready, or its gradient would be dropped as stale.
    store_.write(ControlSlot::kSyncWord, (s + 1) << kStepShift);
    store_.write(ControlSlot::kGlobalStep, s + 1);
    step_ = s + 1;
  }

  // Names the workers that have not delivered a gradient for step s.
  std::string missing(std::int64_t s) {
    const auto last = store_.read_worker_slots();
    std::string names;
    for (int w = 0; w < workers_; ++w)
      if (last[static_cast<std::size_t>(w)] < s + 1)
        names += (names.empty() ? "" : ", ") + std::string("worker:") + std::to_string(w) +
                 " (rank " + std::to_string(server_.cluster().rank_of("worker", w)) + ")";
    return std::to_string(k_) + " gradients for step " + std::to_string(s) + ", have " +
           std::to_string(store_.read(ControlSlot::kCompleted)) + "; no gradient yet from " +
           names;
  }

  std::int64_t k_;
  std::int64_t dropped_ = 0;
  std::vector<float> sums_;
};

}  // namespace

std::unique_ptr<Replication> Replication::create(Server* server, Graph& graph, Optimizer& optimizer,
                                                 const ReplicationOptions& options) {
  if (options.mode == Mode::kLocal) return std::make_unique<LocalReplication>(optimizer);
  if (!server) throw InvalidArgument(std::string(to_string(options.mode)) + " mode needs a cluster");
  switch (options.mode) {
    case Mode::kAllreduce:
      return std::make_unique<AllreduceReplication>(*server, optimizer, options);
    case Mode::kAsync:
      return std::make_unique<AsyncReplication>(*server, graph, optimizer, options, false);
    case Mode::kSsp:
      if (options.staleness < 0) throw InvalidArgument("--staleness must be >= 0");
      return std::make_unique<SspReplication>(*server, graph, optimizer, options, false);
    case Mode::kSync:
      return std::make_unique<SyncReplication>(*server, graph, optimizer, options);
    case Mode::kLocal:
      break;
  }
  return std::make_unique<LocalReplication>(optimizer);
}

}  // namespace cohort
