// StopAtStepHook, NanTensorHook, FinalOpsHook, GlobalStepWaiterHook, EarlyStoppingHook and the
// timer, on a real local session.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

#include "cohort/core/io/checkpoint.h"
#include "cohort/hooks/early_stopping_hook.h"
#include "cohort/hooks/final_ops_hook.h"
#include "cohort/hooks/global_step_waiter_hook.h"
#include "cohort/hooks/nan_tensor_hook.h"
#include "cohort/hooks/second_or_step_timer.h"
#include "cohort/hooks/stop_at_step_hook.h"
#include "hooks/hook_test_support.h"
#include "hooks/mean_iou_metric.h"

namespace cohort {
namespace {

using test::LocalTraining;

using test::with_hooks;

SessionRunValues values_of(std::initializer_list<std::pair<const char*, double>> items) {
  SessionRunValues values;
  for (const auto& [name, value] : items) values.set(name, value);
  return values;
}

}  // namespace

TEST_CASE("SecondOrStepTimer fires at once, then every N steps, never twice for a step") {
  SecondOrStepTimer timer(3, 0, "test");
  CHECK(timer.should_trigger_for_step(0));
  CHECK_FALSE(timer.update_last_triggered_step(0).has_value());
  CHECK_FALSE(timer.should_trigger_for_step(0));
  CHECK_FALSE(timer.should_trigger_for_step(2));
  CHECK(timer.should_trigger_for_step(3));
  const auto elapsed = timer.update_last_triggered_step(4);
  REQUIRE(elapsed.has_value());
  CHECK(elapsed->steps == 4);
  CHECK(timer.last_triggered_step() == 4);
  timer.reset();
  CHECK(timer.should_trigger_for_step(4));

  SecondOrStepTimer seconds(0, 0.05, "test");
  seconds.update_last_triggered_step(1);
  CHECK_FALSE(seconds.should_trigger_for_step(100));
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  CHECK(seconds.should_trigger_for_step(2));
  CHECK_FALSE(seconds.should_trigger_for_step(1));

  CHECK_THROWS_AS(SecondOrStepTimer(0, 0, "MyHook"), InvalidArgument);
  CHECK_THROWS_AS(SecondOrStepTimer(5, 1.0, "MyHook"), InvalidArgument);
  CHECK_THROWS_WITH(SecondOrStepTimer(-1, 0, "MyHook"), doctest::Contains("MyHook"));
}

TEST_CASE("StopAtStepHook::last stops at that global step") {
  LocalTraining t;
  auto hook = StopAtStepHook::last(5);
  MonitoredSession session(t.trainer, with_hooks({hook}));
  CHECK(test::train(session) == 5);
  CHECK(session.global_step() == 5);
  CHECK(hook->last_step() == 5);
  CHECK_THROWS_AS(StopAtStepHook::last(-1), InvalidArgument);
}

TEST_CASE("StopAtStepHook::num counts from the step the session starts at") {
  LocalTraining t;
  auto hook = StopAtStepHook::num(3);
  CHECK_FALSE(hook->last_step().has_value());
  MonitoredSession session(t.trainer, with_hooks({hook}));
  CHECK(hook->last_step() == 3);
  CHECK(test::train(session) == 3);
  CHECK_THROWS_AS(StopAtStepHook::num(-2), InvalidArgument);
}

TEST_CASE("StopAtStepHook at a step already reached stops before any step") {
  // A finished run restarted trains no further (TensorFlow's hook ran one more step; its
  // Estimator skipped training instead, as this does).
  LocalTraining t;
  MonitoredSession session(t.trainer, with_hooks({StopAtStepHook::last(0)}));
  CHECK(session.should_stop());
  CHECK(test::train(session) == 0);
  CHECK(t.trainer.global_step() == 0);
}

TEST_CASE("TrainerOptions::epochs: the session stops at the end of the input, as at TensorFlow's OutOfRangeError") {
  // 128 examples in batches of 8: 16 a pass.
  Graph graph;
  TrainerOptions options = test::trainer_options();
  options.epochs = 2;
  Trainer trainer(nullptr, graph, [](Graph& g) { return mlp(g, {8}); }, data::synthetic(128, 5), test::sgd(),
                  options);
  {
    MonitoredSession session(trainer, with_hooks({}));
    CHECK_FALSE(trainer.end_of_input());
    CHECK(test::train(session) == 32);
    CHECK(session.should_stop());
    CHECK(trainer.end_of_input());
    CHECK(session.global_step() == 32);
    CHECK_THROWS_WITH_AS(trainer.step(), "Trainer::step: the input has ended (2 epochs of 16 batches; a session stops there)",
                         InvalidArgument);
    session.close();
  }
  {
    // A hook's stop that comes first wins; a new session starts the data again.
    MonitoredSession session(trainer, with_hooks({StopAtStepHook::last(5)}));
    CHECK(test::train(session) == 5);
    CHECK_FALSE(trainer.end_of_input());
    session.close();
  }
  // Resumed past the end (a restored step): nothing to train.
  test::TempDir dir("epochs_resumed");
  Checkpoint past = trainer.checkpoint();
  past.metadata.erase("examples");  // one without a count: its 32 steps' worth
  CheckpointManager(dir.str()).save(32, past);
  MonitoredSessionOptions resumed = with_hooks({});
  resumed.checkpoint_dir = dir.str();
  MonitoredSession session(trainer, resumed);
  CHECK(session.should_stop());
  CHECK(session.global_step() == 32);
}

TEST_CASE("NanTensorHook raises NanLossError with the global step") {
  LocalTraining t;
  auto hook = std::make_shared<NanTensorHook>();
  MonitoredSession session(t.trainer, with_hooks({hook}));
  session.run();  // a real step: finite loss passes
  CHECK_FALSE(session.should_stop());

  RunContext context(session, {});
  const SessionRunArgs args = hook->before_run(context);
  CHECK(std::find(args.fetches.begin(), args.fetches.end(), "loss") != args.fetches.end());
  CHECK_NOTHROW(hook->after_run(context, values_of({{"loss", 0.5}, {"global_step", 7}})));
  CHECK_NOTHROW(hook->after_run(context, values_of({{"loss", std::numeric_limits<double>::infinity()}, {"global_step", 7}})));
  try {
    hook->after_run(context, values_of({{"loss", std::nan("")}, {"global_step", 42}}));
    FAIL("no NanLossError");
  } catch (const NanLossError& e) {
    CHECK(std::string(e.what()) == "NaN loss during training at global step 42");
    CHECK(e.global_step() == 42);
  }
  // Without a fetched global step, the session's.
  CHECK_THROWS_WITH_AS(hook->after_run(context, values_of({{"loss", std::nan("")}})),
                       "NaN loss during training at global step 1", NanLossError);
  CHECK_FALSE(context.stop_requested());
}

TEST_CASE("NanTensorHook with fail_on_nan = false requests a stop instead") {
  LocalTraining t;
  auto hook = std::make_shared<NanTensorHook>("loss", false);
  MonitoredSession session(t.trainer, with_hooks({hook}));
  RunContext context(session, {});
  hook->after_run(context, values_of({{"loss", 1.0}, {"global_step", 3}}));
  CHECK_FALSE(context.stop_requested());
  CHECK_NOTHROW(hook->after_run(context, values_of({{"loss", std::nan("")}, {"global_step", 4}})));
  CHECK(context.stop_requested());
}

TEST_CASE("FinalOpsHook keeps the values of the last step") {
  LocalTraining t;
  auto hook = std::make_shared<FinalOpsHook>(std::vector<std::string>{"global_step", "loss"});
  {
    MonitoredSession session(t.trainer, with_hooks({hook, StopAtStepHook::last(4)}));
    CHECK(hook->final_values().empty());
    test::train(session);
  }
  REQUIRE(hook->final_values().size() == 2);
  CHECK(hook->final_values().at("global_step") == 4);
  CHECK(std::isfinite(hook->final_values().at("loss")));
  CHECK_THROWS_AS(FinalOpsHook(std::vector<std::string>{}), InvalidArgument);
}

TEST_CASE("GlobalStepWaiterHook does not wait where the global step cannot move without this worker") {
  LocalTraining t;
  // Were it to wait for step 1000, which cannot come, the step would throw at the timeout.
  auto hook = std::make_shared<GlobalStepWaiterHook>(1000, std::chrono::milliseconds(200));
  MonitoredSession session(t.trainer, with_hooks({hook}));
  CHECK_NOTHROW(session.run());
  CHECK(hook->started());
}

TEST_CASE("EarlyStoppingHook stops after `patience` checks without improvement") {
  LocalTraining t;
  MonitoredSession session(t.trainer, with_hooks({}));
  EarlyStoppingHook hook({.metric = "loss", .mode = EarlyStoppingMode::kMin, .patience = 2, .min_delta = 0.01,
                          .every_n_steps = 2});
  hook.begin();
  // Averages over pairs: 1.0, 0.8 (better), 0.795 (not by min_delta), 0.9 (worse) -> stop.
  const double losses[] = {1.1, 0.9, 0.7, 0.9, 0.8, 0.79, 0.8, 1.0};
  int stopped_at = -1;
  for (int i = 0; i < 8; ++i) {
    RunContext context(session, {});
    CHECK(hook.before_run(context).fetches == std::vector<std::string>{"loss"});
    hook.after_run(context, values_of({{"loss", losses[i]}}));
    if (context.stop_requested() && stopped_at < 0) stopped_at = i;
    if (i == 3) {
      REQUIRE(hook.best().has_value());
      CHECK(*hook.best() == doctest::Approx(0.8));
    }
    if (i == 5) CHECK(hook.checks_without_improvement() == 1);
  }
  CHECK(stopped_at == 7);
  CHECK(hook.stopped());
  CHECK(*hook.best() == doctest::Approx(0.8));

  // Higher is better, asked for or (the default, kAuto) by the metric's name.
  for (const EarlyStoppingMode mode : {EarlyStoppingMode::kMax, EarlyStoppingMode::kAuto}) {
    EarlyStoppingHook max_hook({.metric = "accuracy", .mode = mode, .patience = 1, .every_n_steps = 1});
    RunContext context(session, {});
    max_hook.after_run(context, values_of({{"accuracy", 0.5}}));
    max_hook.after_run(context, values_of({{"accuracy", 0.6}}));
    CHECK_FALSE(context.stop_requested());
    CHECK(*max_hook.best() == doctest::Approx(0.6));
    max_hook.after_run(context, values_of({{"accuracy", 0.6}}));
    CHECK(context.stop_requested());
  }
  for (const char* higher : {"accuracy", "top5_accuracy", "binary_accuracy", "precision", "recall", "auc"}) {
    CAPTURE(higher);
    CHECK_FALSE(lower_is_better(EarlyStoppingMode::kAuto, higher));
    CHECK(lower_is_better(EarlyStoppingMode::kMin, higher));
  }
  for (const char* lower : {"loss", "mse", "mae"}) {
    CAPTURE(lower);
    CHECK(lower_is_better(EarlyStoppingMode::kAuto, lower));
    CHECK_FALSE(lower_is_better(EarlyStoppingMode::kMax, lower));
  }

  CHECK_THROWS_AS(EarlyStoppingHook({.patience = 0}), InvalidArgument);
  CHECK_THROWS_AS(EarlyStoppingHook({.every_n_steps = 0}), InvalidArgument);
}

TEST_CASE("EarlyStoppingHook judges a metric of the user's own as it says, and refuses to guess") {
  // kAuto asks the session's model: a mean IoU that says higher is better improves by rising.
  test::LocalTrainingWith<test::DirectedMeanIou> t;
  MonitoredSession session(t.trainer, with_hooks({}));
  EarlyStoppingHook hook({.metric = "mean_iou", .patience = 1, .every_n_steps = 1});
  hook.begin();
  hook.after_create_session(session);
  RunContext context(session, {});
  hook.after_run(context, values_of({{"mean_iou", 0.5}}));
  hook.after_run(context, values_of({{"mean_iou", 0.6}}));
  CHECK_FALSE(context.stop_requested());
  CHECK(*hook.best() == doctest::Approx(0.6));
  hook.after_run(context, values_of({{"mean_iou", 0.4}}));
  CHECK(context.stop_requested());
  CHECK(*hook.best() == doctest::Approx(0.6));
  CHECK_FALSE(lower_is_better(EarlyStoppingMode::kAuto, "mean_iou", &t.trainer.model()));
  CHECK_FALSE(lower_is_better(EarlyStoppingMode::kAuto, "accuracy", &t.trainer.model()));
  CHECK(lower_is_better(EarlyStoppingMode::kAuto, "loss", &t.trainer.model()));
  // One that does not say is refused when the session starts; a mode given, it is not asked.
  test::LocalTrainingWith<test::MeanIou> silent;
  const auto with = [](EarlyStoppingMode mode) {
    return with_hooks({std::make_shared<EarlyStoppingHook>(
        EarlyStoppingHookOptions{.metric = "mean_iou", .mode = mode, .patience = 1})});
  };
  CHECK_THROWS_WITH_AS(MonitoredSession(silent.trainer, with(EarlyStoppingMode::kAuto)),
                       "EarlyStoppingHook: metric 'mean_iou' does not say whether higher or lower "
                       "is better: set mode kMax or kMin, or override Metric::higher_is_better",
                       InvalidArgument);
  CHECK_NOTHROW(MonitoredSession(silent.trainer, with(EarlyStoppingMode::kMin)));
}

TEST_CASE("EarlyStoppingHook takes a metric over its runs' examples, from the metric's counts") {
  // A rare class's IoU: the first run's batch has one example of class 0, missed; the second's
  // nine of ten found. Over both, 9 of 11; the mean of the two runs' values would be 0.45.
  test::LocalTrainingWith<test::DirectedMeanIou> t;
  MonitoredSession session(t.trainer, with_hooks({}));
  EarlyStoppingHook hook({.metric = "mean_iou", .patience = 1, .every_n_steps = 2});
  hook.begin();
  hook.after_create_session(session);
  const auto run = [&](double value, double intersection, double union_) {
    SessionRunValues values = values_of({{"mean_iou", value}});
    std::vector<double> counts(10, 0.0);  // 5 classes: intersection, union
    counts[0] = intersection;
    counts[1] = union_;
    values.set_counts("mean_iou", counts);
    RunContext context(session, {});
    hook.after_run(context, values);
    return context.stop_requested();
  };
  run(0.0, 0, 1);
  run(0.9, 9, 10);
  REQUIRE(hook.best().has_value());
  CHECK(*hook.best() == doctest::Approx(9.0 / 11.0));
  // Where a run gives no counts (a program's own step), the mean of the values it is.
  run(0.5, 1, 2);
  RunContext context(session, {});
  hook.after_run(context, values_of({{"mean_iou", 0.7}}));
  CHECK(context.stop_requested());  // (0.5 + 0.7) / 2 = 0.6 < 9 / 11
  CHECK(hook.checks_without_improvement() == 1);
}

TEST_CASE("EarlyStoppingHook ends a real run whose metric cannot improve") {
  LocalTraining t;
  // With a min_delta far above any loss, nothing counts as an improvement after the first check.
  auto hook = std::make_shared<EarlyStoppingHook>(
      EarlyStoppingHookOptions{.metric = "loss", .patience = 3, .min_delta = 100.0, .every_n_steps = 2});
  MonitoredSession session(t.trainer, with_hooks({hook}));
  CHECK(test::train(session, 100) == 8);  // checks at 2 (best), 4, 6, 8 -> stop
  CHECK(hook->stopped());
}

}  // namespace cohort
