// Two workers in allreduce mode: chief-only hooks run on the chief alone, hooks on both, and the
// MonitoredTrainingSession factory gives the default hooks to the chief only. With a ps in async
// mode: the chief's final checkpoint, and GlobalStepWaiterHook's wait. In every mode: the end of
// each worker's input, and the learning-rate scale the chief sets reaching every worker; an
// evaluation shared out among the workers.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <sstream>
#include <thread>

#include "cohort/core/dist/cluster.h"
#include "cohort/core/dist/server.h"
#include "cohort/core/io/checkpoint.h"
#include "cohort/core/nn/loss.h"
#include "cohort/core/placement/replica_device_setter.h"
#include "cohort/hooks/global_step_waiter_hook.h"
#include "cohort/hooks/monitored_training_session.h"
#include "cohort/hooks/step_counter_hook.h"
#include "cohort/hooks/stop_at_step_hook.h"
#include "cohort/hooks/validation_hook.h"
#include "hooks/hook_test_support.h"
#include "hooks/recording_hook.h"
#include "support/mpi_test.h"

namespace cohort {
namespace {

constexpr int kSteps = 5;

struct Worker {
  explicit Worker(const mpi::Comm& comm)
      : cluster(ClusterSpec::from_counts(comm, 0)),
        server(cluster),
        trainer(&server, graph, [](Graph& g) { return mlp(g, {8}); },
                data::synthetic(128, 5).shard(server.task_index(), cluster.num_tasks("worker")), test::sgd(),
                test::trainer_options(Mode::kAllreduce)) {}
  ClusterSpec cluster;
  Server server;
  Graph graph;
  Trainer trainer;
};

// A worker of 1 ps + 2 workers in async mode, its variables on the ps.
ReplicaDeviceSetterOptions on_one_ps() {
  ReplicaDeviceSetterOptions placement;
  placement.ps_tasks = 1;
  return placement;
}
struct AsyncWorker {
  explicit AsyncWorker(Server& server)
      : graph{ReplicaDeviceSetter(on_one_ps())},
        trainer(&server, graph, [](Graph& g) { return mlp(g, {8}); },
                data::synthetic(128, 5).shard(server.task_index(), 2), test::sgd(),
                test::trainer_options(Mode::kAsync)) {}
  Graph graph;
  Trainer trainer;
};

// A directory name every rank agrees on.
std::string shared_dir(const mpi::Comm& comm, const std::string& tag) {
  std::int64_t id = comm.rank() == 0 ? static_cast<std::int64_t>(::getpid()) : 0;
  comm.bcast(std::span<std::int64_t>(&id, 1), 0);
  return (std::filesystem::temp_directory_path() / ("cohort_hooks_" + tag + "_" + std::to_string(id))).string();
}

// Of the test's 3 ranks, a cluster for `mode`: 1 ps and 2 workers in the ps modes (the ps serves
// until the workers are done), the workers of ranks 1 and 2 alone in allreduce mode; on each
// worker, train(server, whether there is a ps).
template <typename Train>
void on_two_workers(const mpi::Comm& comm, Mode mode, Train&& train) {
  const std::string mode_name = to_string(mode);
  CAPTURE(mode_name);
  const bool ps = mode != Mode::kAllreduce;
  const mpi::Comm workers = comm.split(ps || comm.rank() > 0 ? 0 : MPI_UNDEFINED, comm.rank());
  if (workers.is_null()) return;
  const ClusterSpec cluster = ClusterSpec::from_counts(workers, ps ? 1 : 0);
  Server server(cluster);
  if (server.job_name() == "ps") {
    server.join(std::chrono::seconds(60));
    return;
  }
  train(server, ps);
}

}  // namespace

COHORT_MPI_TEST_CASE("chief-only hooks run on the chief only; hooks run on every worker", 2) {
  Worker w(comm);
  auto everywhere = std::make_shared<test::RecordingHook>();
  auto chief_only = std::make_shared<test::RecordingHook>();
  std::ostringstream counter_out;
  auto counter = std::make_shared<StepCounterHook>(StepCounterHookOptions{.every_n_steps = 2, .out = &counter_out});
  {
    MonitoredSessionOptions options;
    options.master = w.server.target();
    options.is_chief = w.server.is_chief();
    options.hooks = {everywhere, StopAtStepHook::last(kSteps)};
    options.chief_only_hooks = {chief_only, counter};
    options.stop_on_signals = false;
    options.step_time_every_steps = 2;
    MonitoredSession session(w.trainer, options);
    CHECK(test::train(session) == kSteps);
  }
  CHECK(everywhere->events == test::expected_events(kSteps));
  CHECK(everywhere->mismatches == 0);
  CHECK(everywhere->chief_seen == (comm.rank() == 0));
  CHECK(everywhere->last_global_step == kSteps);
  if (comm.rank() == 0) {
    CHECK(chief_only->events == test::expected_events(kSteps));
    // Rates at global steps 3 and 5, each followed by a straggler line once step times are shared.
    const std::string out = counter_out.str();
    CHECK(out.find("global_step/sec: ") != std::string::npos);
    CHECK(out.find("stragglers: slowest worker ") != std::string::npos);
    CHECK(out.find(" at 0 s/step") == std::string::npos);  // only times every worker has sent
    REQUIRE(counter->steps_per_sec().has_value());
    // Allreduce: every global step is one batch from each of the 2 workers.
    CHECK(*counter->examples_per_sec() == doctest::Approx(*counter->steps_per_sec() * 2 * test::kBatch));
  } else {
    CHECK(chief_only->events.empty());
    CHECK(counter_out.str().empty());
  }
}

COHORT_MPI_TEST_CASE("MonitoredTrainingSession: the chief checkpoints and writes summaries, the other worker does not", 2) {
  const std::string dir = shared_dir(comm, "mts_mpi");
  if (comm.rank() == 0) std::filesystem::remove_all(dir);
  comm.barrier();
  {
    Worker w(comm);
    auto session = MonitoredTrainingSession(
        w.trainer, {.master = w.server.target(), .is_chief = w.server.is_chief(), .checkpoint_dir = dir,
                    .hooks = {StopAtStepHook::last(4)}, .save_checkpoint_steps = 2, .save_summaries_steps = 2,
                    .log_step_count_steps = 0, .stop_on_signals = false});
    CHECK(session->options().chief_only_hooks.size() == (comm.rank() == 0 ? 2u : 0u));
    CHECK(test::train(*session) == 4);
  }
  comm.barrier();
  for (int step : {0, 2, 4})
    CHECK(std::filesystem::exists(dir + "/model.ckpt-" + std::to_string(step) + ".safetensors"));
  CHECK(std::filesystem::exists(dir + "/metrics.csv"));
  // One writer only: a single event file.
  int event_files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().filename().string().rfind("events.out.tfevents", 0) == 0) ++event_files;
  CHECK(event_files == 1);
  comm.barrier();
  if (comm.rank() == 0) std::filesystem::remove_all(dir);
}

COHORT_MPI_TEST_CASE("after an error every worker hit alike, a new session on the same trainer trains on", 2) {
  Worker w(comm);
  MonitoredSessionOptions options;
  options.master = w.server.target();
  options.is_chief = w.server.is_chief();
  options.stop_on_signals = false;
  {
    options.hooks = {StopAtStepHook::last(3)};
    MonitoredSession session(w.trainer, options);
    CHECK_THROWS_AS(session.run({"no_such_value"}), InvalidArgument);
    session.close();  // after the error: no collective step, none needed by the next session
  }
  options.hooks = {StopAtStepHook::last(3)};
  MonitoredSession session(w.trainer, options);
  CHECK(test::train(session) == 3);
  session.close();
}

// Allreduce mode's node board (core/dist/replica_board.h) over sessions one after another: a
// replica that closes first must not wait for good for one already back in the next session's
// start, nor read the last session's steps as steps gone on to: the sessions start at step 0
// (no checkpoint), and the chief closes the one without steps late (its hooks' end() taking a
// while), so the others wait for it at step 0 while its words of the session before said step 2.
COHORT_MPI_TEST_CASE("allreduce: sessions one after another on the same trainer, each closed alike", 3) {
  // With the sums in shared memory (NodeSum's leave() holds the node's ranks too) and without.
  for (const bool shared_memory_sums : {true, false}) {
    CAPTURE(shared_memory_sums);
    const ClusterSpec cluster = ClusterSpec::from_counts(comm, 0);
    Server server(cluster);
    Graph graph;
    TrainerOptions trainer_options = test::trainer_options(Mode::kAllreduce);
    trainer_options.replication.shared_memory_sums = shared_memory_sums;
    Trainer trainer(&server, graph, [](Graph& g) { return mlp(g, {8}); },
                    data::synthetic(128, 5).shard(server.task_index(), 3), test::sgd(), trainer_options);
    MonitoredSessionOptions options;
    options.master = server.target();
    options.is_chief = server.is_chief();
    options.stop_on_signals = false;
    // Steps per session: the third closes before any step of its own.
    for (const int steps : {6, 2, 0, 6}) {
      options.hooks = {StopAtStepHook::last(steps)};
      MonitoredSession session(trainer, options);
      CHECK(test::train(session) == steps);
      if (server.is_chief() && steps == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
      session.close();
    }
  }
}

COHORT_MPI_TEST_CASE("TrainerOptions::epochs ends every mode's session at the end of each replica's input", 3) {
  // 128 examples over 2 workers in batches of 8: 8 batches a pass of a worker's shard.
  for (Mode mode : {Mode::kAllreduce, Mode::kSync, Mode::kAsync}) {
    on_two_workers(comm, mode, [&](Server& server, bool ps) {
      TrainerOptions options = test::trainer_options(mode);
      options.epochs = 2;
      Graph graph{ReplicaDeviceSetter(ps ? on_one_ps() : ReplicaDeviceSetterOptions{})};
      Trainer trainer(&server, graph, [](Graph& g) { return mlp(g, {8}); },
                      data::synthetic(128, 5).shard(server.task_index(), 2), test::sgd(), options);
      MonitoredSession session(trainer, {.master = server.target(), .is_chief = server.is_chief(),
                                         .stop_on_signals = false});
      // Async: the chief's end, as any stop of the chief, ends training for the other worker too,
      // which may then have trained fewer of its own batches.
      const int runs = test::train(session);
      if (mode == Mode::kAsync && !server.is_chief()) {
        CHECK(runs >= 1);
        CHECK(runs <= 16);
        CHECK(trainer.end_of_input() == (runs == 16));
      } else {
        CHECK(runs == 16);
        CHECK(trainer.end_of_input());
      }
      session.close();
      // Sync and allreduce: a global step is every worker's batch (async: each push, some of the
      // other worker's after the chief's last look).
      if (server.is_chief() && mode != Mode::kAsync) CHECK(trainer.global_step() == 16);
    });
  }
}

namespace {

// The learning rate each step of this worker trained with, by the global step it reached.
class LearningRates : public SessionRunHook {
 public:
  SessionRunArgs before_run(RunContext&) override { return {{"global_step", "learning_rate"}}; }
  void after_run(RunContext&, const SessionRunValues& values) override {
    rates.emplace_back(static_cast<std::int64_t>(values.get("global_step")), values.get("learning_rate"));
  }
  std::vector<std::pair<std::int64_t, double>> rates;
};

// On the chief: halves the learning rate once the global step reaches `at`, after a step (as
// ValidationHook does) or before one (`before`: as a program may, between the agreements of
// allreduce mode).
class HalveAt : public SessionRunHook {
 public:
  HalveAt(std::int64_t at, bool before) : at_(at), before_(before) {}
  SessionRunArgs before_run(RunContext& context) override {
    if (before_) halve(context.session());
    return {};
  }
  void after_run(RunContext& context, const SessionRunValues&) override {
    if (!before_) halve(context.session());
  }
  std::int64_t fired_at = -1;  // the global step after which it halved the rate

 private:
  void halve(MonitoredSession& session) {
    if (session.global_step() < at_ || fired_at >= 0) return;
    session.trainer().set_learning_rate_scale(0.5);
    fired_at = session.global_step();
  }
  std::int64_t at_;
  bool before_;
};

}  // namespace

COHORT_MPI_TEST_CASE("the chief's learning-rate scale reaches every worker, in every mode", 3) {
  constexpr double kRate = 0.05;  // test::sgd()'s
  for (Mode mode : {Mode::kAllreduce, Mode::kSync, Mode::kAsync, Mode::kSsp}) {
    on_two_workers(comm, mode, [&](Server& server, bool ps) {
      TrainerOptions options = test::trainer_options(mode);
      options.replication.staleness = 2;
      Graph graph{ReplicaDeviceSetter(ps ? on_one_ps() : ReplicaDeviceSetterOptions{})};
      Trainer trainer(&server, graph, [](Graph& g) { return mlp(g, {8}); },
                      data::synthetic(128, 5).shard(server.task_index(), 2), test::sgd(kRate), options);
      auto rates = std::make_shared<LearningRates>();
      // Allreduce: halved before a step; the replicas agree on it after that step, the chief's own
      // too (had the chief changed alone, its parameters would part from the others').
      const bool before = mode == Mode::kAllreduce;
      auto halve = std::make_shared<HalveAt>(3, before);
      // The chief alone stops, at step 12: another worker leaves when it hears of the stop, and
      // hears the scale, written before it, no later.
      MonitoredSession session(trainer, {.master = server.target(), .is_chief = server.is_chief(),
                                         .hooks = {rates},
                                         .chief_only_hooks = {halve, StopAtStepHook::last(12)},
                                         .stop_on_signals = false});
      test::train(session);
      session.close();
      CHECK(trainer.learning_rate_scale() == 0.5);
      CHECK_NOTHROW(trainer.set_learning_rate_scale(0.25));  // the ps store is closed: local alone
      // Each step trained at the schedule's rate until this worker heard of the scale, at half of
      // it from then on. The chief's steps after the one it halved the rate at all at half (in the
      // lock-step modes that is step 3; in async and ssp the chief sees the other worker's steps
      // too); in allreduce mode every worker's (they agree on it with the stop, after each step);
      // in sync mode the other worker's from step 4 or 5 (it reads the scale with the steps the
      // chief publishes, which the chief publishes before it halves; the chief alone applies the
      // updates).
      REQUIRE(!rates->rates.empty());
      std::int64_t fired_at = server.is_chief() ? halve->fired_at : 0;
      server.replicas().bcast(std::span<std::int64_t>(&fired_at, 1), 0);  // replica 0: the chief
      if (mode == Mode::kSync || mode == Mode::kAllreduce) CHECK(fired_at == 3);
      if (mode == Mode::kAllreduce) {  // every replica's parameters the same, bit for bit
        std::vector<float> mine(graph.values().begin(), graph.values().end()), chief = mine;
        server.replicas().bcast(std::span<float>(chief), 0);
        CHECK(mine == chief);
      }
      bool halved = false;
      for (const auto& [step, rate] : rates->rates) {
        CAPTURE(step);
        if (rate != kRate) {
          CHECK(rate == doctest::Approx(kRate / 2));
          halved = true;
        } else {
          CHECK(!halved);
        }
        if (server.is_chief() || mode == Mode::kAllreduce)
          CHECK(rate == doctest::Approx(step <= fired_at + (before ? 1 : 0) ? kRate : kRate / 2));
        if (!server.is_chief() && mode == Mode::kSync && (step <= 3 || step >= 5))
          CHECK(rate == doctest::Approx(step <= 3 ? kRate : kRate / 2));
      }
    });
  }
}

COHORT_MPI_TEST_CASE("evaluate_across: each replica its part, of the chief's averages, as the chief's evaluation of the whole", 3) {
  for (Mode mode : {Mode::kAllreduce, Mode::kAsync}) {
    on_two_workers(comm, mode, [&](Server& server, bool ps) {
      TrainerOptions options = test::trainer_options(mode);
      options.moving_average_decay = 0.5;
      Graph graph{ReplicaDeviceSetter(ps ? on_one_ps() : ReplicaDeviceSetterOptions{})};
      // With an AUC, whose bins' counts are summed over the replicas as they are over batches.
      const auto with_auc = [](Graph& g) {
        Model m = mlp(g, {8});
        m.add_metric(std::make_unique<Auc>(3));
        return m;
      };
      Trainer trainer(&server, graph, with_auc, data::synthetic(128, 5).shard(server.task_index(), 2),
                      test::sgd(0.2), options);
      MonitoredSession session(trainer, {.master = server.target(), .is_chief = server.is_chief(),
                                         .hooks = {StopAtStepHook::last(6)}, .stop_on_signals = false});
      // Between steps, async replicas are at steps of their own: refused on each, before any
      // message, rather than matched with another's call of another step.
      if (mode == Mode::kAsync)
        CHECK_THROWS_WITH_AS(trainer.evaluate_across(data::synthetic(8, 7), 16),
                             doctest::Contains("in async mode call it after finish()"), InvalidArgument);
      test::train(session);
      session.close();
      CHECK((trainer.moving_average() != nullptr) == server.is_chief());
      REQUIRE(trainer.model().metric_names() == std::vector<std::string>{"accuracy", "auc@3"});
      // The other worker's parameters and state are its own, not the chief's: they are not
      // what is evaluated, and they are what it holds again after.
      if (!server.is_chief())
        for (float& v : graph.values()) v *= -2;
      const std::vector<float> own(graph.values().begin(), graph.values().end());
      // 101 examples, in batches of 16 (parts of 51 and 50, partial last batches); and 1, which
      // leaves the other worker's part empty.
      for (const std::int64_t n : {101, 1}) {
        CAPTURE(n);
        const data::Dataset whole = data::synthetic(n, 7);
        const data::Dataset part = whole.shard(server.replica_index(), 2);
        double chief[3] = {0, 0, 0};
        if (server.is_chief()) {
          const StepMetrics m = trainer.evaluate(whole, 16);
          chief[0] = m.accuracy;
          chief[1] = m.loss;
          chief[2] = m.metrics[1];
        }
        server.replicas().bcast(std::span<double>(chief, 3), 0);
        const StepMetrics shared = trainer.evaluate_across(part, 16);
        CHECK(shared.accuracy == static_cast<float>(chief[0]));
        CHECK(shared.loss == doctest::Approx(chief[1]).epsilon(1e-6));
        CHECK(shared.metrics[1] == static_cast<float>(chief[2]));
        CHECK(std::vector<float>(graph.values().begin(), graph.values().end()) == own);
      }
    });
  }
}

COHORT_MPI_TEST_CASE("ValidationHook shared in allreduce mode: every worker its part, the chief's results", 2) {
  Worker w(comm);
  const data::Dataset whole = data::synthetic(101, 7);
  // The same evaluations made twice: shared out (every worker its part), and by the chief alone.
  auto shared = std::make_shared<ValidationHook>(ValidationHookOptions{
      .data = whole.shard(w.server.replica_index(), 2), .every_steps = 2, .batch_size = 16,
      .log = false, .shared = true});
  auto own = std::make_shared<ValidationHook>(
      ValidationHookOptions{.data = whole, .every_steps = 2, .batch_size = 16, .log = false, .name = "own"});
  // One example: the other worker's part is empty.
  auto tiny = std::make_shared<ValidationHook>(ValidationHookOptions{
      .data = data::synthetic(1, 7).shard(w.server.replica_index(), 2), .every_steps = 2,
      .log = false, .name = "tiny", .shared = true});
  {
    MonitoredSessionOptions options;
    options.master = w.server.target();
    options.is_chief = w.server.is_chief();
    options.hooks = {shared, tiny, StopAtStepHook::last(kSteps)};
    options.chief_only_hooks = {own};
    options.stop_on_signals = false;
    MonitoredSession session(w.trainer, options);
    test::train(session);
  }
  // At steps 2, 4 and at the end (5), on both workers; the chief's own evaluations alike.
  REQUIRE(shared->history().size() == 3);
  REQUIRE(tiny->history().size() == 3);
  std::vector<double> chief;
  for (const Validation& v : shared->history()) chief.insert(chief.end(), {v.loss, v.metrics.at(0)});
  for (const Validation& v : tiny->history()) chief.push_back(v.loss);
  comm.bcast(std::span<double>(chief), 0);
  const std::int64_t steps[] = {2, 4, kSteps};
  for (std::size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    const Validation& v = shared->history()[i];
    CHECK(v.global_step == steps[i]);
    CHECK(v.loss == chief[2 * i]);
    CHECK(v.metrics.at(0) == chief[2 * i + 1]);
    CHECK(tiny->history()[i].loss == chief[6 + i]);
    CHECK(tiny->history()[i].loss > 0);
    if (w.server.is_chief()) {
      REQUIRE(own->history().size() == 3);
      CHECK(own->history()[i].global_step == v.global_step);
      CHECK(own->history()[i].metrics.at(0) == v.metrics.at(0));
      CHECK(own->history()[i].loss == doctest::Approx(v.loss).epsilon(1e-6));
    } else {
      CHECK(own->history().empty());
    }
  }
}

COHORT_MPI_TEST_CASE("a shared ValidationHook whose patience ran out before a restart stops every worker at once", 2) {
  Worker w(comm);
  const bool chief = w.server.is_chief();
  const std::string dir = shared_dir(comm, "shared_validation_restart");
  const auto run = [&] {
    // Never better by 1e9: the second evaluation runs out of patience.
    auto hook = std::make_shared<ValidationHook>(ValidationHookOptions{
        .data = data::synthetic(20, 3).shard(w.server.replica_index(), 2), .every_steps = 1, .at_end = false,
        .min_delta = 1e9, .patience = 1, .log = false, .shared = true});
    MonitoredSessionOptions options;
    options.master = w.server.target();
    options.is_chief = chief;
    options.checkpoint_dir = chief ? dir : "";
    options.hooks = {hook, StopAtStepHook::last(50)};
    options.stop_on_signals = false;
    MonitoredSession session(w.trainer, options);
    test::train(session);
    if (chief) session.save_checkpoint();  // with the hook's state: no patience left
    session.close();
    return hook->history().size();
  };
  // Evaluations at steps 1 and 2, then the stop.
  CHECK(run() == 2);
  CHECK(w.trainer.global_step() == 2);
  // Restored at step 2 with no patience left: every worker stops before a step (none waits in
  // an evaluation the chief does not join).
  CHECK(run() == 0);
  CHECK(w.trainer.global_step() == 2);
  comm.barrier();
  if (chief) std::filesystem::remove_all(dir);
}

COHORT_MPI_TEST_CASE("each worker draws its batches from a seed of its own; worker 0 draws as local mode", 2) {
  // Both workers hold the same data: with one seed they would take the same batches.
  const data::Dataset data = data::synthetic(128, 5);
  const ClusterSpec cluster = ClusterSpec::from_counts(comm, 0);
  Server server(cluster);
  Graph graph;
  Trainer trainer(&server, graph, [](Graph& g) { return mlp(g, {8}); }, data, test::sgd(),
                  test::trainer_options(Mode::kAllreduce));
  trainer.start();
  std::vector<float> losses;
  for (int step = 0; step < 3; ++step) losses.push_back(trainer.step().loss);
  trainer.finish();
  // Every step starts from the same parameters on both workers: different losses mean
  // different batches.
  const std::vector<float> all = comm.allgather(std::span<const float>(losses));
  for (std::size_t step = 0; step < losses.size(); ++step) {
    CAPTURE(step);
    CHECK(all[step] != all[losses.size() + step]);
  }
  if (comm.rank() != 0) return;
  // Local mode at the same seed: worker 0's first batch (the parameters part after it, as the
  // update averages both workers' gradients).
  test::LocalTraining local;
  local.trainer.start();
  CHECK(local.trainer.step().loss == losses.front());
  local.trainer.finish();
}

COHORT_MPI_TEST_CASE("async mode: the chief's final checkpoint is named by the store's count of every worker's pushes", 3) {
  const std::string dir = shared_dir(comm, "async_final");
  if (comm.rank() == 0) std::filesystem::remove_all(dir);
  comm.barrier();
  {
    const ClusterSpec cluster = ClusterSpec::from_counts(comm, 1);  // rank 0 the ps, 2 workers
    Server server(cluster);
    if (server.job_name() == "ps") {
      server.join(std::chrono::seconds(60));
    } else {
      AsyncWorker w(server);
      Trainer& trainer = w.trainer;
      // Both workers run 7 steps; then the other worker runs 3 more, which the chief's last
      // step cannot have counted, before the chief closes: the store counts 17 pushes.
      const bool chief = server.is_chief();
      auto session = MonitoredTrainingSession(
          trainer, {.master = server.target(), .is_chief = chief, .checkpoint_dir = dir,
                    .save_checkpoint_steps = 1000, .log_step_count_steps = 0, .stop_on_signals = false});
      for (int i = 0; i < 7; ++i) session->run();
      server.replicas().barrier();
      if (!chief)
        for (int i = 0; i < 3; ++i) session->run();
      server.replicas().barrier();  // the other worker's pushes are all in
      std::int64_t pushes = chief ? 7 : 10;
      server.replicas().allreduce(std::span(&pushes, 1));
      session->close();
      // The store is closed to this worker: another session on the trainer is refused at once.
      CHECK_THROWS_WITH_AS(
          MonitoredSession(trainer, {.master = server.target(), .is_chief = chief, .stop_on_signals = false}),
          doctest::Contains("async mode: this worker has left the ps tasks' store"), InvalidArgument);
      if (chief) {
        CHECK(pushes == 17);
        CHECK(std::filesystem::exists(dir + "/model.ckpt-17.safetensors"));
        const auto latest = CheckpointManager(dir).restore_latest();
        REQUIRE(latest);
        CHECK(latest->metadata.at("global_step") == "17");
      }
    }
  }
  comm.barrier();
  if (comm.rank() == 0) std::filesystem::remove_all(dir);
}

COHORT_MPI_TEST_CASE("replicas given different batch sizes are refused, naming both", 2) {
  const ClusterSpec cluster = ClusterSpec::from_counts(comm, 0);
  Server server(cluster);
  Graph graph;
  TrainerOptions options = test::trainer_options(Mode::kAllreduce);
  options.batch_size = server.is_chief() ? 32 : 16;
  const auto build = [&] {
    Trainer trainer(&server, graph, [](Graph& g) { return mlp(g, {8}); },
                    data::synthetic(128, 5).shard(server.task_index(), 2), test::sgd(), options);
  };
  if (server.is_chief())
    CHECK_THROWS_WITH_AS(build(), doctest::Contains("replica 1 differs from the chief"), InvalidArgument);
  else
    CHECK_THROWS_WITH_AS(build(), doctest::Contains("here 'batch 16 per worker, trainable '', "
                                                    "accumulation 1, synchronised batch norm off', on "
                                                    "the chief 'batch 32 per worker"),
                         InvalidArgument);
}

COHORT_MPI_TEST_CASE("a Trainer built on a ps task is refused, naming the task", 3) {
  const ClusterSpec cluster = ClusterSpec::from_counts(comm, 1);  // rank 0 the ps, 2 workers
  Server server(cluster);
  if (server.job_name() == "ps") {
    CHECK_THROWS_WITH_AS(AsyncWorker{server},
                         "Trainer: built on ps:0, which does not train (a ps task serves the "
                         "variables in server.join()); build the Trainer on the workers only",
                         InvalidArgument);
    server.join(std::chrono::seconds(60));
  }
}

namespace {

// Async mode, 1 ps + 2 workers: the chief trains `chief_steps` steps, the other worker waits for
// global step `wait_for` (GlobalStepWaiterHook) and then trains until the chief stops. Returns
// the other worker's first global step (-1 on the chief and the ps).
std::int64_t wait_in_async_mode(const mpi::Comm& comm, std::int64_t chief_steps, std::int64_t wait_for) {
  const ClusterSpec cluster = ClusterSpec::from_counts(comm, 1);  // rank 0 the ps, 2 workers
  Server server(cluster);
  if (server.job_name() == "ps") {
    server.join(std::chrono::seconds(60));
    return -1;
  }
  const bool chief = server.is_chief();
  AsyncWorker w(server);
  Trainer& trainer = w.trainer;
  MonitoredSessionOptions options;
  options.master = server.target();
  options.is_chief = chief;
  options.stop_on_signals = false;
  if (chief)
    options.hooks = {StopAtStepHook::last(chief_steps)};
  else
    options.hooks = {std::make_shared<GlobalStepWaiterHook>(wait_for, std::chrono::seconds(30),
                                                            std::chrono::milliseconds(5))};
  MonitoredSession session(trainer, options);
  std::int64_t first = -1;
  while (!session.should_stop()) {
    const auto step = static_cast<std::int64_t>(session.run({"global_step"}).get("global_step"));
    if (first < 0) first = step;
  }
  session.close();
  return chief ? -1 : first;
}

}  // namespace

COHORT_MPI_TEST_CASE("async mode: GlobalStepWaiterHook holds a worker back until the global step comes", 3) {
  // The other worker's first step comes after the chief's tenth.
  const std::int64_t first = wait_in_async_mode(comm, 40, 10);
  if (comm.rank() == 2) CHECK(first > 10);
}

COHORT_MPI_TEST_CASE("async mode: GlobalStepWaiterHook stops waiting when the chief stops training", 3) {
  // A step the run never reaches: the wait ends with the chief's stop, long before its timeout.
  const auto began = std::chrono::steady_clock::now();
  wait_in_async_mode(comm, 5, 1000000);
  CHECK(std::chrono::steady_clock::now() - began < std::chrono::seconds(20));
}

COHORT_MPI_TEST_CASE("a learning-rate scale set on another worker than the chief is refused, not dropped", 2) {
  Worker w(comm);
  MonitoredSession session(w.trainer, {.master = w.server.target(), .is_chief = w.server.is_chief(),
                                       .hooks = {StopAtStepHook::last(2)}, .stop_on_signals = false});
  if (w.server.is_chief()) {
    CHECK_NOTHROW(w.trainer.set_learning_rate_scale(0.5));
  } else {
    CHECK_THROWS_WITH_AS(w.trainer.set_learning_rate_scale(0.5),
                         doctest::Contains("which is not the chief: the chief sets the scale"),
                         InvalidArgument);
  }
  test::train(session);
  session.close();
  CHECK(w.trainer.learning_rate_scale() == 0.5);  // the chief's, on every worker
}

}  // namespace cohort
