// How the training modes coordinate under real mpiexec: async pushes that add up exactly, a
// stop the chief makes before applying a step, backup workers, and the SSP bound.
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <thread>

#include "cohort/core/dist/cluster.h"
#include "cohort/core/dist/parameter_store.h"
#include "cohort/core/dist/replication.h"
#include "cohort/core/dist/server.h"
#include "core/dist/replication_test_support.h"
#include "support/mpi_test.h"

namespace cohort {
namespace {

using namespace replication_test;

}  // namespace

COHORT_MPI_TEST_CASE("sync mode: a step the chief stopped before applying is not counted", 3) {
  // The chief trains 2 steps and stops; the other worker's third gradient finds the chief
  // stopped: its step ends at global step 2, unapplied, with the stop.
  const auto data = data::synthetic(3 * 2 * kBatch, 15);
  const ClusterSpec cluster = ClusterSpec::from_counts(comm, 1);
  Server server(cluster);
  if (served_as_ps(server)) return;
  Graph graph(setter(1));
  Model model = small_mlp(graph, false);
  graph.initialize(7);
  auto optimizer = Optimizer::create(momentum());
  ReplicationOptions options;
  options.mode = Mode::kSync;
  auto replication = start_replication(server, graph, *optimizer, options);
  std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()));
  Tensor images;
  std::vector<std::int32_t> labels;
  const int me = server.task_index();
  const int steps = server.is_chief() ? 2 : 3;
  StepOutcome outcome;
  for (int step = 0; step < steps; ++step) {
    replication->before_step(graph.values());
    slice(data, (step * 2 + me) * kBatch, kBatch, images, labels);
    model.train_step(images, labels, grads, {});
    outcome = replication->after_step(grads, graph.values());
  }
  if (server.is_chief()) {
    CHECK(outcome.global_step == 2);
  } else {
    CHECK(outcome.global_step == 2);
    CHECK_FALSE(outcome.applied);
    CHECK(outcome.stop);
    CHECK(replication->global_step() == 2);
  }
  replication->finish();
  server.done();
}

COHORT_MPI_TEST_CASE("async pushes from 4 workers add up exactly, whole and in pieces", 5) {
  const ClusterSpec cluster = ClusterSpec::from_counts(comm, 1);
  Server server(cluster);
  if (served_as_ps(server)) return;
  Graph graph(setter(1));
  graph.get_variable("a", {3, 5}, Initializer::zeros());
  graph.get_variable("b", {7}, Initializer::zeros());
  const auto n = static_cast<std::size_t>(graph.num_parameters());
  ParameterStore store(server, graph, {});
  if (server.is_chief()) MESSAGE("parameters: " << server.memory_transport());
  const int me = server.task_index();
  constexpr int kPushes = 50;
  std::vector<float> initial(n);
  for (std::size_t i = 0; i < n; ++i) initial[i] = static_cast<float>(i);
  if (server.is_chief()) {
    store.assign(initial);
    store.write(ControlSlot::kReady, 1);
  }
  while (store.read(ControlSlot::kReady) != 1) std::this_thread::sleep_for(1ms);
  // Integer-valued deltas: float sums of them are exact, whatever the order.
  std::vector<float> delta(n), pulled(n);
  for (int p = 1; p <= kPushes; ++p) {
    for (std::size_t i = 0; i < n; ++i) delta[i] = static_cast<float>((me + 1) * p + int(i % 3));
    if (p % 2 == 0) {
      store.push(delta);
      store.fetch_add(ControlSlot::kGlobalStep, 1);
    } else {
      // As --bucket_bytes sends them: pieces from the end down, across both variables, each
      // started and left open, then the pull that completes them.
      const std::span<const float> all(delta);
      store.start_push(13, all.subspan(13));
      store.progress();
      store.start_push(4, all.subspan(4, 9));
      store.start_push(0, all.subspan(0, 4));
      store.pull_counting(pulled, ControlSlot::kGlobalStep);
    }
  }
  store.fetch_add(ControlSlot::kRetired, 1);
  const int workers = cluster.num_tasks("worker");
  while (store.read(ControlSlot::kRetired) < workers) std::this_thread::sleep_for(1ms);
  std::vector<float> final_values(n);
  store.pull(final_values);
  const double pushes_sum = kPushes * (kPushes + 1) / 2.0;
  double worker_sum = 0;
  for (int w = 1; w <= workers; ++w) worker_sum += w;
  for (std::size_t i = 0; i < n; ++i)  // exact: integer-valued sums below 2^24
    CHECK(double(final_values[i]) ==
          initial[i] + worker_sum * pushes_sum + double(workers * kPushes * int(i % 3)));
  CHECK(store.read(ControlSlot::kGlobalStep) == workers * kPushes);
  store.close();
}

// Three workers and a ps train a small mlp in `options.mode`; worker `slow` sleeps `pause` per
// step. `done(steps)` says when to stop; `check(replication, slow)` runs on every worker after.
template <typename Done, typename Check>
void train_with_a_slow_worker(const mpi::Comm& comm, ReplicationOptions options, int slow,
                              std::chrono::milliseconds pause, Done done, Check check) {
  const ClusterSpec cluster = ClusterSpec::from_counts(comm, 1);
  Server server(cluster);
  if (served_as_ps(server)) return;
  const auto data = data::synthetic(256, 15);
  Graph graph(setter(1));
  Model model = mlp(graph, {8});
  graph.initialize(3);
  auto optimizer = Optimizer::create(momentum());
  auto replication = start_replication(server, graph, *optimizer, options);
  std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()));
  Tensor images;
  std::vector<std::int32_t> labels;
  const bool is_slow = server.task_index() == slow;
  std::int64_t last = 0, steps = 0;
  while (!done(*replication, steps)) {
    replication->before_step(graph.values());
    slice(data, (steps++ % 16) * 16, 16, images, labels);
    model.train_step(images, labels, grads, {});
    if (is_slow) std::this_thread::sleep_for(pause);
    const StepOutcome outcome = replication->after_step(grads, graph.values());
    CHECK(outcome.global_step > last);  // steps always advance
    last = outcome.global_step;
  }
  check(*replication, is_slow, steps);
  replication->finish();
  server.done();
}

// Sync mode, k=2 of 3 workers, worker `slow` 30 ms behind: 20 steps are applied all the same, and
// the slow one's gradients are dropped.
void backup_workers_with_a_slow_one(const mpi::Comm& comm, int slow, const char* who) {
  ReplicationOptions options;
  options.mode = Mode::kSync;
  options.replicas_to_aggregate = 2;
  train_with_a_slow_worker(
      comm, options, slow, 30ms, [](Replication& r, std::int64_t) { return r.global_step() >= 20; },
      [who](Replication& r, bool is_slow, std::int64_t steps) {
        CHECK(r.global_step() >= 20);
        if (!is_slow) return;
        CHECK(r.dropped_gradients() > 0);
        MESSAGE(who << ": " << r.dropped_gradients() << " of " << steps << " gradients dropped");
      });
}

COHORT_MPI_TEST_CASE("backup workers: k=2 of 3, a slow worker's gradients are dropped", 4) {
  backup_workers_with_a_slow_one(comm, /*slow=*/2, "slow worker");
}

COHORT_MPI_TEST_CASE("backup workers: k=2 of 3, the chief slow: it applies the others' sum", 4) {
  // The chief adds its own gradient only when it claimed a slot; here the two others take both
  // slots first, so the chief applies their sum alone and counts its own as dropped.
  backup_workers_with_a_slow_one(comm, /*slow=*/0, "slow chief");
}

// Sync mode, k=1 of 2 workers that compute the same batch, the chief and the other slow by turns:
// each step applies one gradient, the chief's own (when it claims first) or the other's, so the
// parameters equal one process's at batch B. On the chief's turns nothing of the other's
// gradient of the step before may join the sum. With the wide model in pieces, on the other's
// turns the chief, without a gradient of its own, names the other to clear the sums.
void backup_by_turns(const mpi::Comm& comm, Builder build) {
  constexpr int kTurns = 8;
  const auto data = data::synthetic(kTurns * kBatch, 11);
  const ClusterSpec cluster = ClusterSpec::from_counts(comm, 1);
  Server server(cluster);
  if (served_as_ps(server)) return;
  Graph graph(setter(1));
  Model model = build(graph, false);
  graph.initialize(7);
  auto optimizer = Optimizer::create(momentum());
  ReplicationOptions options;
  options.mode = Mode::kSync;
  options.replicas_to_aggregate = 1;
  auto replication = start_replication(server, graph, *optimizer, options);
  std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()));
  Tensor images;
  std::vector<std::int32_t> labels;
  // Turns by global step: the chief's the even ones, the other's the odd ones. The other may
  // skip steps (the chief applies its own without waiting); the chief computes every one.
  for (std::int64_t step = 0; step < kTurns;) {
    replication->before_step(graph.values());
    slice(data, step * kBatch, kBatch, images, labels);
    model.train_step(images, labels, grads, {});
    // The other's turn. A worker that slept starts its next step that much later (it learns of
    // the chief's update only after the sleep); the chief waits for nobody, so it sleeps twice
    // as long to lose.
    if (step % 2 != server.task_index())
      std::this_thread::sleep_for(server.is_chief() ? 100ms : 50ms);
    step = replication->after_step(grads, graph.values()).global_step;
  }
  const std::vector<float> values = parameters_and_state(graph);
  if (server.is_chief()) CHECK(replication->dropped_gradients() == kTurns / 2);
  const std::string stats = replication->stats() + "; memory " + server.memory_transport();
  replication->finish();
  server.done();
  check_equal(values, reference(data, 1, build, kTurns));
  MESSAGE("worker " << server.task_index() << ": " << stats);
  // A gradient of one piece sends its count with its completion, and the chief, which may see
  // the completion first, then clears the sums itself: who clears is checked for more pieces.
  if (graph.num_parameters() <= 64 * 1024) return;
  const bool cleared = stats.find("cleared the sums of " + std::to_string(kTurns / 2) +
                                  " steps") != std::string::npos;
  const bool pieces = stats.find("memory one-sided") != std::string::npos &&
                      std::thread::hardware_concurrency() >= 2;
  CHECK(cleared == (pieces && !server.is_chief()));
}

COHORT_MPI_TEST_CASE("backup workers: k=1 of 2 by turns equals one process at batch B", 3) {
  backup_by_turns(comm, small_mlp);
}

COHORT_MPI_TEST_CASE("backup workers in pieces: k=1 of 2 by turns equals one process at B", 3) {
  backup_by_turns(comm, wide_mlp);
}

COHORT_MPI_TEST_CASE("ssp: no worker runs more than `staleness` steps ahead of the slowest", 4) {
  ReplicationOptions options;
  options.mode = Mode::kSsp;
  options.staleness = 2;
  train_with_a_slow_worker(
      comm, options, /*slow=*/1, 60ms, [](Replication&, std::int64_t steps) { return steps >= 10; },
      [](Replication& r, bool slow, std::int64_t) {
        // Without the bound the fast workers would end 9 steps ahead of the slow one.
        MESSAGE("largest gap " << r.max_observed_staleness() << std::string(slow ? " (slow worker)" : ""));
        CHECK(r.max_observed_staleness() <= 2);
        if (!slow) CHECK(r.max_observed_staleness() >= 1);
      });
}

}  // namespace cohort
