#pragma once
// What the modes with parameters on ps tasks (async, ssp, sync) share: the store, start-up (the
// chief initialises it, the others wait until it is ready), step times, and leaving.

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "cohort/core/dist/parameter_store.h"
#include "cohort/core/dist/replication.h"
#include "cohort/core/dist/server.h"

namespace cohort::modes {

class PsReplication : public Replication {
 public:
  PsReplication(Server& server, Graph& graph, Optimizer& optimizer,
                const ReplicationOptions& options, bool accumulators);
  ~PsReplication() override;

  void start(std::span<float> values, std::int64_t initial_step,
             std::optional<std::chrono::milliseconds> ready_timeout) override;
  std::int64_t global_step() const override { return step_; }
  std::int64_t read_global_step() override { return store_.read(ControlSlot::kGlobalStep); }
  void fetch_parameters(std::span<float> values) override { store_.pull(values); }
  std::vector<double> exchange_step_times(double mine) override;
  void finish() override;

 protected:
  static constexpr int kStepShift = 24;
  static constexpr std::int64_t kCountMask = (std::int64_t{1} << kStepShift) - 1;
  static constexpr std::int64_t kRetiredClock = std::int64_t{1} << 60;

  /// "the chief (worker:0, rank 1)".
  std::string chief_name() const;
  /// "worker:1 (rank 2)" for replica `replica`.
  std::string replica_name(int replica) const;
  bool stopped() { return store_.read(ControlSlot::kStopped) != 0; }
  /// wait_until(), with the time spent added to last_wait_. After a stop signal (SIGTERM,
  /// SIGUSR1) it waits at most twice the recent time between waits (at least 0.5 s) more, then
  /// throws StopSignalled("stopped by signal N while waiting ... for <what>"): a stalled peer
  /// must not keep a stopping task past the scheduler's grace period.
  void timed_wait(const std::function<bool()>& ready, std::chrono::milliseconds timeout,
                  const std::function<std::string()>& what);

  Server& server_;
  Optimizer& optimizer_;
  ReplicationOptions options_;
  ParameterStore store_;
  int replica_;   // this task's index among the replicas
  int replicas_;  // how many there are
  std::int64_t step_ = 0;
  bool finished_ = false;

 private:
  std::optional<std::chrono::steady_clock::time_point> last_wait_end_;
  std::chrono::duration<double> pace_{0};
};

}  // namespace cohort::modes
