// ValidationHook on a real local-mode session: when it evaluates, what it writes and keeps, when
// it stops training, and when it reduces the learning rate.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "cohort/hooks/checkpoint_saver_hook.h"
#include "cohort/hooks/stop_at_step_hook.h"
#include "cohort/hooks/summary_saver_hook.h"
#include "cohort/hooks/validation_hook.h"
#include "hooks/hook_test_support.h"
#include "hooks/mean_iou_metric.h"
#include "support/event_decoder.h"

namespace cohort {
namespace {

using test::LocalTraining;

data::Dataset held_out() { return data::synthetic(64, 9); }

// Trains `trainer` in a session of its own to global step `last`, `hook` on the chief.
void train_with_chief_hook(Trainer& trainer, std::shared_ptr<SessionRunHook> hook, std::int64_t last) {
  MonitoredSessionOptions options = test::with_hooks({StopAtStepHook::last(last)});
  options.chief_only_hooks = {std::move(hook)};
  MonitoredSession session(trainer, options);
  test::train(session);
}

}  // namespace

TEST_CASE("ValidationHook evaluates every N global steps and at the end, and writes an eval run") {
  test::TempDir dir("validation");
  LocalTraining t;
  auto hook = std::make_shared<ValidationHook>(
      ValidationHookOptions{.data = held_out(), .every_steps = 5, .log = false});
  {
    MonitoredSessionOptions options = test::with_hooks({StopAtStepHook::last(12)});
    options.chief_only_hooks = {hook};
    options.summary_dir = dir.str();
    MonitoredSession session(t.trainer, options);
    test::train(session);
  }
  // Steps 5 and 10, and the last one, 12.
  REQUIRE(hook->history().size() == 3);
  CHECK(hook->history()[0].global_step == 5);
  CHECK(hook->history()[1].global_step == 10);
  CHECK(hook->history()[2].global_step == 12);
  // Each is Trainer::evaluate's at its step: the last one is the final parameters'.
  const StepMetrics final_metrics = t.trainer.evaluate(held_out());
  CHECK(hook->history()[2].loss == doctest::Approx(final_metrics.loss));
  CHECK(hook->history()[2].metrics.at(0) == doctest::Approx(final_metrics.accuracy));
  const auto rows = test::read_csv(dir.str() + "/eval/metrics.csv");
  CHECK(test::steps_of(rows, "loss") == std::vector<std::int64_t>{5, 10, 12});
  CHECK(test::steps_of(rows, "accuracy") == std::vector<std::int64_t>{5, 10, 12});
  // The best is the lowest loss of the three.
  const Validation* best = hook->best();
  REQUIRE(best != nullptr);
  for (const Validation& v : hook->history()) CHECK(best->loss <= v.loss);
}

TEST_CASE("ValidationHook writing into the training summaries' directory is refused, naming it") {
  // The evaluations' loss would join the training loss's curve, and the two writers would cut
  // each other's CSV rows.
  test::TempDir dir("validation_same_dir");
  LocalTraining t;
  MonitoredSessionOptions options = test::with_hooks({StopAtStepHook::last(2)});
  options.chief_only_hooks = {
      std::make_shared<SummarySaverHook>(SummarySaverHookOptions{.every_steps = 1, .output_dir = dir.str()}),
      std::make_shared<ValidationHook>(
          ValidationHookOptions{.data = held_out(), .every_steps = 1, .output_dir = dir.str(), .log = false})};
  // Found at the first step, where both write first.
  const auto train = [&] {
    MonitoredSession session(t.trainer, options);
    test::train(session);
  };
  CHECK_THROWS_WITH_AS(train(),
                       (dir.str() + ": another summary writer of this process is writing there; give "
                                    "each writer a directory of its own")
                           .c_str(),
                       Error);
}

TEST_CASE("A session that fails to start holds no summary directory: the next one takes it") {
  test::TempDir dir("validation_failed_start");
  LocalTraining t;
  MonitoredSessionOptions options = test::with_hooks({StopAtStepHook::last(2)});
  options.summary_dir = dir.str();
  options.chief_only_hooks = {
      std::make_shared<SummarySaverHook>(SummarySaverHookOptions{.every_steps = 1, .output_dir = dir.str()}),
      std::make_shared<ValidationHook>(ValidationHookOptions{.data = held_out(), .monitor = "nonsense"})};
  CHECK_THROWS_AS(MonitoredSession(t.trainer, options), InvalidArgument);
  // The hooks of the failed start live on (in `options`); new ones write where they would have.
  MonitoredSessionOptions again = test::with_hooks({StopAtStepHook::last(2)});
  again.chief_only_hooks = {
      std::make_shared<SummarySaverHook>(SummarySaverHookOptions{.every_steps = 1, .output_dir = dir.str()}),
      std::make_shared<ValidationHook>(ValidationHookOptions{.data = held_out(), .every_steps = 1, .log = false})};
  again.summary_dir = dir.str();
  MonitoredSession session(t.trainer, again);
  test::train(session);
  session.close();
  CHECK(test::steps_of(test::read_csv(dir.str() + "/metrics.csv"), "loss") == std::vector<std::int64_t>{1, 2});
  CHECK(test::steps_of(test::read_csv(dir.str() + "/eval/metrics.csv"), "loss") == std::vector<std::int64_t>{1, 2});
}

TEST_CASE("ValidationHook judges an accuracy by its highest value unless told otherwise") {
  // Evaluations at 2, 4, ..., 12 of a model learning: with the default mode (kAuto) an accuracy
  // improves when it rises; with kMin (as a loss) when it falls.
  for (const EarlyStoppingMode mode : {EarlyStoppingMode::kAuto, EarlyStoppingMode::kMin}) {
    CAPTURE(static_cast<int>(mode));
    LocalTraining t;
    auto hook = std::make_shared<ValidationHook>(ValidationHookOptions{
        .data = held_out(), .every_steps = 2, .monitor = "accuracy", .mode = mode, .log = false});
    train_with_chief_hook(t.trainer, hook, 12);
    const std::vector<Validation>& history = hook->history();
    REQUIRE(history.size() == 6);
    bool changed = false;
    for (std::size_t i = 1; i < history.size(); ++i) {
      CAPTURE(i);
      changed |= history[i].monitored != history[0].monitored;
      double best = history[0].monitored;
      for (std::size_t j = 1; j < i; ++j)
        best = mode == EarlyStoppingMode::kMin ? std::min(best, history[j].monitored)
                                               : std::max(best, history[j].monitored);
      CHECK(history[i].improved ==
            (mode == EarlyStoppingMode::kMin ? history[i].monitored < best : history[i].monitored > best));
      CHECK(history[i].monitored == history[i].metrics.at(0));
    }
    CHECK(changed);  // else both modes would agree
    for (const Validation& v : history)
      CHECK((mode == EarlyStoppingMode::kMin ? hook->best()->monitored <= v.monitored
                                             : hook->best()->monitored >= v.monitored));
  }
}

TEST_CASE("ValidationHook judges a metric of the user's own as it says, and refuses to guess") {
  // A mean IoU, higher the better, which its name does not tell: kAuto asks the metric.
  test::LocalTrainingWith<test::DirectedMeanIou> t;
  auto hook = std::make_shared<ValidationHook>(ValidationHookOptions{
      .data = held_out(), .every_steps = 2, .monitor = "mean_iou", .log = false});
  train_with_chief_hook(t.trainer, hook, 12);
  const std::vector<Validation>& history = hook->history();
  REQUIRE(history.size() == 6);
  bool changed = false;
  double best = history[0].monitored;
  CHECK(history[0].improved);
  for (std::size_t i = 1; i < history.size(); ++i) {
    CAPTURE(i);
    CHECK(history[i].monitored == history[i].metrics.at(1));  // accuracy, then mean_iou
    changed |= history[i].monitored != best;
    CHECK(history[i].improved == (history[i].monitored > best));
    best = std::max(best, history[i].monitored);
  }
  CHECK(changed);  // else either direction would do
  CHECK(hook->best()->monitored == best);

  // One that does not say, whose name tells nothing, is refused at the start, naming it and the
  // ways out; told the mode, it runs.
  test::LocalTrainingWith<test::MeanIou> silent;
  MonitoredSessionOptions options = test::with_hooks({StopAtStepHook::last(2)});
  options.chief_only_hooks = {std::make_shared<ValidationHook>(
      ValidationHookOptions{.data = held_out(), .monitor = "mean_iou", .log = false})};
  CHECK_THROWS_WITH_AS(MonitoredSession(silent.trainer, options),
                       "ValidationHook: metric 'mean_iou' does not say whether higher or lower is "
                       "better: set mode kMax or kMin, or override Metric::higher_is_better",
                       InvalidArgument);
  options.chief_only_hooks = {std::make_shared<ValidationHook>(ValidationHookOptions{
      .data = held_out(), .monitor = "mean_iou", .mode = EarlyStoppingMode::kMax, .log = false})};
  MonitoredSession session(silent.trainer, options);
  CHECK(test::train(session) == 2);
}

TEST_CASE("ValidationHook keeps the best parameters and stops after `patience` evaluations without improvement") {
  test::TempDir dir("validation_best");
  LocalTraining t;
  // No later evaluation can beat the first by 1e9: the second and third do not improve, and the
  // third ends training at step 6, long before the 100 steps asked for.
  auto hook = std::make_shared<ValidationHook>(ValidationHookOptions{
      .data = held_out(), .every_steps = 2, .min_delta = 1e9, .patience = 2, .best_dir = dir.str() + "/best",
      .log = false});
  train_with_chief_hook(t.trainer, hook, 100);
  CHECK(hook->stopped());
  REQUIRE(hook->history().size() == 3);
  CHECK(hook->history().back().global_step == 6);
  CHECK(t.trainer.global_step() == 6);
  CHECK(hook->best()->global_step == 2);
  // The best checkpoint holds the parameters of step 2.
  CHECK(hook->best_checkpoint() == dir.str() + "/best/model.ckpt-2.safetensors");
  CHECK(std::filesystem::exists(hook->best_checkpoint()));
  int checkpoints = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.str() + "/best"))
    checkpoints += entry.path().extension() == ".safetensors" ? 1 : 0;
  CHECK(checkpoints == 1);  // written at improvements only
}

namespace {

// The learning rate each step trained with, by the global step it reached.
class LearningRates : public SessionRunHook {
 public:
  SessionRunArgs before_run(RunContext&) override { return {{"global_step", "learning_rate"}}; }
  void after_run(RunContext&, const SessionRunValues& values) override {
    rates[static_cast<std::int64_t>(values.get("global_step"))] = values.get("learning_rate");
  }
  std::map<std::int64_t, double> rates;
};

}  // namespace

TEST_CASE("ValidationHook reduces the learning rate on a plateau, with a cooldown and a floor") {
  // Evaluations at steps 2, 4, ..., 16; none after the first improves (min_delta 1e9). With
  // patience 2 and a cooldown of 1: the evaluations at 4 and 6 do not improve, and the rate
  // halves from step 7; the one at 8 is the cooldown's; 10 and 12 halve it again from step 13.
  LocalTraining t;
  auto rates = std::make_shared<LearningRates>();
  auto hook = std::make_shared<ValidationHook>(ValidationHookOptions{
      .data = held_out(), .every_steps = 2, .min_delta = 1e9, .reduce_lr_factor = 0.5,
      .reduce_lr_patience = 2, .reduce_lr_cooldown = 1, .log = false});
  {
    MonitoredSessionOptions options = test::with_hooks({StopAtStepHook::last(16), rates});
    options.chief_only_hooks = {hook};
    MonitoredSession session(t.trainer, options);
    test::train(session);
  }
  CHECK(hook->reductions() == 2);
  CHECK(t.trainer.learning_rate_scale() == 0.25);
  REQUIRE(rates->rates.size() == 16);
  for (const auto& [step, rate] : rates->rates) {
    CAPTURE(step);
    CHECK(rate == doctest::Approx(0.05 * (step <= 6 ? 1.0 : step <= 12 ? 0.5 : 0.25)));
  }
  // The scale is kept in the checkpoint, and a restore brings it back; the same model without
  // one in its checkpoint trains at the schedule's rate again.
  const Checkpoint checkpoint = t.trainer.checkpoint();
  CHECK(checkpoint.metadata.at("learning_rate_scale") == "0.25");
  LocalTraining restored;
  restored.trainer.restore(checkpoint);
  CHECK(restored.trainer.learning_rate_scale() == 0.25);
  LocalTraining fresh;
  restored.trainer.restore(fresh.trainer.checkpoint());
  CHECK(restored.trainer.learning_rate_scale() == 1.0);
  Checkpoint bad = checkpoint;
  bad.metadata["learning_rate_scale"] = "2";
  CHECK_THROWS_WITH_AS(restored.trainer.restore(bad),
                       "the checkpoint at global step 16 has learning_rate_scale '2', not a factor in (0, 1]",
                       CheckpointError);
  // A new session on the first trainer, restoring nothing, starts from the initialisers and at
  // the schedule's rate.
  {
    MonitoredSession again(t.trainer, test::with_hooks({}));
    CHECK(t.trainer.learning_rate_scale() == 1.0);
  }

  // Patience 1, no cooldown: every evaluation after the first reduces it, to the floor of 0.2
  // (0.5, 0.25, then 0.2 rather than 0.125) and no further.
  LocalTraining u;
  auto floor = std::make_shared<ValidationHook>(ValidationHookOptions{
      .data = held_out(), .every_steps = 2, .min_delta = 1e9, .reduce_lr_factor = 0.5,
      .reduce_lr_patience = 1, .min_learning_rate_scale = 0.2, .log = false});
  {
    MonitoredSessionOptions options = test::with_hooks({StopAtStepHook::last(12)});
    options.chief_only_hooks = {floor};
    MonitoredSession session(u.trainer, options);
    test::train(session);
  }
  CHECK(floor->reductions() == 3);
  CHECK(u.trainer.learning_rate_scale() == doctest::Approx(0.2));
}

TEST_CASE("ValidationHook's counts go on in a job restarted from its checkpoints") {
  test::TempDir dir("validation_restart");
  // Nothing can beat the first evaluation (step 2) by 1e9. Patience 3, a reduction after 2, a
  // checkpoint at the start and at the end (after the evaluation at the end, which one run of the
  // whole job would make only once, and which therefore does not count). The first run
  // evaluates at 2 and 4 (and 5, its end); the second, restored at step 5, reduces the rate at 6
  // and stops at 8, as one run would have; a third, restored there, stops before its first step.
  std::int64_t first_run_steps = 0;
  const auto run = [&]() {
    auto hook = std::make_shared<ValidationHook>(ValidationHookOptions{
        .data = held_out(), .every_steps = 2, .min_delta = 1e9, .patience = 3,
        .reduce_lr_factor = 0.5, .reduce_lr_patience = 2, .log = false});
    LocalTraining t;
    MonitoredSessionOptions options = test::with_hooks({StopAtStepHook::last(first_run_steps)});
    options.chief_only_hooks = {hook, std::make_shared<CheckpointSaverHook>(
                                          CheckpointSaverHookOptions{.every_steps = 1000})};
    options.checkpoint_dir = dir.str() + "/ckpt";
    {
      MonitoredSession session(t.trainer, options);
      test::train(session);
    }
    return std::make_pair(hook, t.trainer.global_step());
  };
  first_run_steps = 5;
  const auto [first, first_step] = run();
  CHECK(first_step == 5);
  CHECK(first->history().size() == 3);
  first_run_steps = 100;
  const auto [resumed, resumed_step] = run();
  CHECK(resumed_step == 8);
  CHECK(resumed->stopped());
  CHECK(resumed->reductions() == 1);
  REQUIRE(resumed->best() != nullptr);
  CHECK(resumed->best()->global_step == 2);
  CHECK(resumed->best()->monitored == first->best()->monitored);
  const auto [again, again_step] = run();
  CHECK(again_step == 8);  // no step, so the latest checkpoint is still the one at 8
  CHECK(again->stopped());
  CHECK(again->history().size() == 1);  // the evaluation at the end alone
  // Each run's eval event file starts its session at its first step, after the file's version
  // (TensorBoard drops what an earlier run wrote from there on).
  std::vector<std::int64_t> starts;
  for (const auto& entry : std::filesystem::directory_iterator(dir.str() + "/ckpt/eval")) {
    if (!entry.path().filename().string().starts_with("events.out.tfevents.")) continue;
    const auto events = test::events::decode(entry.path().string());
    REQUIRE(events.size() >= 3);
    CHECK(!events[0].file_version.empty());
    CHECK(events[1].session_status == 1);
    CHECK(events[2].has_summary);
    starts.push_back(events[1].step);
  }
  std::sort(starts.begin(), starts.end());
  CHECK(starts == std::vector<std::int64_t>{1, 6, 8});  // the third trains no step: its point is at 8
  // A bad count in the checkpoint is named.
  ValidationHook hook({.data = held_out()});
  CHECK_THROWS_WITH_AS(hook.restore_state({{"validation/loss/plateau", "-1"}}),
                       "the checkpoint's validation/loss/plateau is '-1', not a count", CheckpointError);
  CHECK_THROWS_WITH_AS(hook.restore_state({{"validation/loss/best", "x"}}),
                       "the checkpoint's validation/loss/best is 'x', not a number", CheckpointError);
}

TEST_CASE("ValidationHook after a CheckpointSaverHook: the evaluation a checkpoint left out comes after the restart") {
  test::TempDir dir("validation_saver_first");
  // Nothing beats the first evaluation (step 2) by 1e9; patience 2: one run stops at step 6.
  // The saver, ahead of the hook, saves at step 4 before the hook evaluates there: the counts in
  // that checkpoint are step 2's, and the evaluation at 4 still due. Restored, the hook makes it
  // at the first step (5) and stops at 6, as one run would; the next one only at 6 would stop at 8.
  const auto run = [&](std::int64_t last) {
    auto hook = std::make_shared<ValidationHook>(ValidationHookOptions{
        .data = held_out(), .every_steps = 2, .min_delta = 1e9, .patience = 2, .log = false});
    LocalTraining t;
    MonitoredSessionOptions options = test::with_hooks({StopAtStepHook::last(last)});
    options.chief_only_hooks = {std::make_shared<CheckpointSaverHook>(CheckpointSaverHookOptions{.every_steps = 2}),
                                hook};
    options.checkpoint_dir = dir.str() + "/ckpt";
    {
      MonitoredSession session(t.trainer, options);
      test::train(session);
    }
    return std::make_pair(hook, t.trainer.global_step());
  };
  const auto [first, first_step] = run(4);
  CHECK(first_step == 4);
  const auto [resumed, resumed_step] = run(100);
  CHECK(resumed->stopped());
  CHECK(resumed_step == 6);
  REQUIRE(resumed->history().size() == 2);
  CHECK(resumed->history()[0].global_step == 5);
  CHECK(resumed->history()[1].global_step == 6);
}

TEST_CASE("Two named ValidationHooks evaluate, write and keep their states apart") {
  test::TempDir dir("validation_named");
  const data::Dataset other = data::synthetic(48, 11);
  const auto run = [&](std::int64_t last) {
    // Nothing beats the first evaluation by 1e9: each hook counts its evaluations without one.
    auto validation = std::make_shared<ValidationHook>(ValidationHookOptions{
        .data = held_out(), .every_steps = 2, .min_delta = 1e9, .log = false});
    auto named = std::make_shared<ValidationHook>(ValidationHookOptions{
        .data = other, .every_steps = 3, .min_delta = 1e9, .log = false, .name = "test"});
    LocalTraining t;
    MonitoredSessionOptions options = test::with_hooks({StopAtStepHook::last(last)});
    options.chief_only_hooks = {validation, named, std::make_shared<CheckpointSaverHook>(
                                                     CheckpointSaverHookOptions{.every_steps = 1000})};
    options.checkpoint_dir = dir.str() + "/ckpt";
    {
      MonitoredSession session(t.trainer, options);
      test::train(session);
    }
    return std::make_pair(validation, named);
  };
  const auto [validation, named] = run(6);
  CHECK(test::steps_of(test::read_csv(dir.str() + "/ckpt/eval/metrics.csv"), "loss") ==
        std::vector<std::int64_t>{2, 4, 6});
  CHECK(test::steps_of(test::read_csv(dir.str() + "/ckpt/eval_test/metrics.csv"), "loss") ==
        std::vector<std::int64_t>{3, 6});
  CHECK(validation->history().back().loss != named->history().back().loss);  // other data
  // Restored from the checkpoint at step 6: each goes on from its own best and count (as of
  // its last evaluation in training, 4 and 3), which another's would have overwritten.
  const auto [validation2, named2] = run(6);
  REQUIRE(validation2->best() != nullptr);
  REQUIRE(named2->best() != nullptr);
  CHECK(validation2->best()->global_step == 2);
  CHECK(validation2->best()->monitored == validation->best()->monitored);
  CHECK(named2->best()->global_step == 3);
  CHECK(named2->best()->monitored == named->best()->monitored);
  // Two hooks of the same name would write to the same keys and directory: refused, whatever
  // they monitor. One hook given twice would run twice a step (evaluate twice, count its
  // patience twice): refused too.
  LocalTraining t;
  MonitoredSessionOptions options = test::with_hooks({});
  const auto one = std::make_shared<ValidationHook>(ValidationHookOptions{.data = held_out(), .log = false});
  options.hooks.push_back(one);
  options.chief_only_hooks = {one};
  CHECK_THROWS_WITH_AS(MonitoredSession(t.trainer, options),
                       "MonitoredSession: a hook given twice (in hooks and chief_only_hooks, or twice in "
                       "one): it would run twice a step",
                       InvalidArgument);
  options.chief_only_hooks = {nullptr};
  CHECK_THROWS_WITH_AS(MonitoredSession(t.trainer, options),
                       "MonitoredSession: an empty hook pointer among chief_only_hooks", InvalidArgument);
  options.chief_only_hooks = {
      std::make_shared<ValidationHook>(ValidationHookOptions{.data = other, .monitor = "accuracy"})};
  LocalTraining u;
  CHECK_THROWS_WITH_AS(MonitoredSession(u.trainer, options),
                       "MonitoredSession: two hooks keep their state in checkpoints under 'validation/': "
                       "give them different names",
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(ValidationHook({.data = held_out(), .name = "a/b"}),
                       "ValidationHook: name 'a/b' must be letters, digits, '_', '-' and '.'", InvalidArgument);
}

TEST_CASE("ValidationHook refuses bad options, a monitor the model lacks and data that does not fit") {
  CHECK_THROWS_WITH_AS(ValidationHook({}), "ValidationHook: the validation data is empty", InvalidArgument);
  CHECK_THROWS_AS(ValidationHook({.data = held_out(), .every_steps = 0}), InvalidArgument);
  CHECK_THROWS_AS(ValidationHook({.data = held_out(), .patience = -1}), InvalidArgument);
  CHECK_THROWS_WITH_AS(ValidationHook({.data = held_out(), .reduce_lr_factor = 1}),
                       "ValidationHook: reduce_lr_factor must be in (0, 1) (0: no reduction), got 1.000000",
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(ValidationHook({.data = held_out(), .reduce_lr_factor = 0.1}),
                       "ValidationHook: reduce_lr_patience must be >= 1 with a reduce_lr_factor, got 0",
                       InvalidArgument);
  CHECK_THROWS_AS(ValidationHook({.data = held_out(), .reduce_lr_factor = 0.1, .reduce_lr_patience = 1,
                                  .reduce_lr_cooldown = -1}),
                  InvalidArgument);
  CHECK_THROWS_AS(ValidationHook({.data = held_out(), .min_learning_rate_scale = 1}), InvalidArgument);
  LocalTraining t;
  MonitoredSessionOptions options = test::with_hooks({});
  options.chief_only_hooks = {std::make_shared<ValidationHook>(
      ValidationHookOptions{.data = held_out(), .monitor = "mse"})};
  // Found at the first step, where both write first.
  CHECK_THROWS_WITH_AS(
      [&] {
        MonitoredSession session(t.trainer, options);
        test::train(session);
      }(),
                       "ValidationHook: monitor 'mse' is not the loss or a metric of the model (loss, accuracy)",
                       InvalidArgument);
  LocalTraining u;
  options.chief_only_hooks = {std::make_shared<ValidationHook>(
      ValidationHookOptions{.data = data::Dataset::from_arrays(Tensor({4, 3}), Tensor({4, 2}))})};
  CHECK_THROWS_AS(MonitoredSession(u.trainer, options), InvalidArgument);
  // A hook that shares its evaluations among the workers runs on every one of them.
  LocalTraining v;
  options.chief_only_hooks = {std::make_shared<ValidationHook>(
      ValidationHookOptions{.data = held_out(), .shared = true})};
  CHECK_THROWS_WITH_AS(MonitoredSession(v.trainer, options),
                       "MonitoredSession: a ValidationHook that shares its evaluations among the workers "
                       "is among chief_only_hooks, but every replica must run it: give it in hooks",
                       InvalidArgument);
}

TEST_CASE("ValidationHook shared in local mode evaluates as the chief's own") {
  LocalTraining a, b;
  auto own = std::make_shared<ValidationHook>(ValidationHookOptions{.data = held_out(), .every_steps = 4});
  auto shared = std::make_shared<ValidationHook>(
      ValidationHookOptions{.data = held_out(), .every_steps = 4, .shared = true});
  MonitoredSessionOptions own_options = test::with_hooks({StopAtStepHook::last(8)});
  own_options.chief_only_hooks = {own};
  for (auto* t : {&a, &b}) {
    MonitoredSession session(t->trainer, t == &a ? own_options
                                                 : test::with_hooks({StopAtStepHook::last(8), shared}));
    test::train(session);
  }
  REQUIRE(shared->history().size() == 2);
  REQUIRE(own->history().size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(shared->history()[i].global_step == own->history()[i].global_step);
    CHECK(shared->history()[i].loss == own->history()[i].loss);
  }
}

}  // namespace cohort
