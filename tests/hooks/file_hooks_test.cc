// CheckpointSaverHook and SummarySaverHook cadence, and the MonitoredTrainingSession factory,
// with real files in a temporary directory.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "cohort/hooks/checkpoint_saver_hook.h"
#include "cohort/hooks/monitored_training_session.h"
#include "cohort/hooks/step_counter_hook.h"
#include "cohort/hooks/stop_at_step_hook.h"
#include "cohort/hooks/summary_saver_hook.h"
#include "cohort/core/io/checkpoint.h"
#include "hooks/hook_test_support.h"

namespace cohort {
namespace {

using test::LocalTraining;
using test::Row;
using test::read_csv;
using test::steps_of;

class CountingListener : public CheckpointSaverListener {
 public:
  void begin() override { ++begins; }
  void before_save(MonitoredSession&, std::int64_t step) override { before.push_back(step); }
  bool after_save(MonitoredSession&, std::int64_t step, const std::string& path) override {
    after.push_back(step);
    paths.push_back(path);
    return stop_after_save;
  }
  void end(MonitoredSession&, std::int64_t step) override { ends.push_back(step); }

  int begins = 0;
  std::vector<std::int64_t> before, after, ends;
  std::vector<std::string> paths;
  bool stop_after_save = false;
};

MonitoredSessionOptions session_options(const std::string& dir, HookList hooks) {
  MonitoredSessionOptions options;
  options.checkpoint_dir = dir;
  options.hooks = std::move(hooks);
  options.stop_on_signals = false;
  return options;
}

}  // namespace

TEST_CASE("CheckpointSaverHook saves at the start, every N global steps and at the end; not again after a restore") {
  test::TempDir dir("ckpt");
  auto listener = std::make_shared<CountingListener>();
  {
    LocalTraining t;
    auto saver = std::make_shared<CheckpointSaverHook>(CheckpointSaverHookOptions{.every_steps = 3, .listeners = {listener}});
    MonitoredSession session(t.trainer, session_options(dir.str(), {saver, StopAtStepHook::last(7)}));
    test::train(session);
    session.close();
    CHECK(saver->saves() == 4);
    CHECK(saver->last_path() == dir.str() + "/model.ckpt-7.safetensors");
  }
  CHECK(listener->begins == 1);
  CHECK(listener->before == std::vector<std::int64_t>{0, 3, 6, 7});
  CHECK(listener->after == std::vector<std::int64_t>{0, 3, 6, 7});
  CHECK(listener->ends == std::vector<std::int64_t>{7});
  for (const auto& path : listener->paths) CHECK(std::filesystem::exists(path));
  CHECK(std::filesystem::exists(dir.str() + "/model.ckpt-7.safetensors"));

  // A second run restores step 7: no save at the start, num() counts from 7.
  auto second = std::make_shared<CountingListener>();
  LocalTraining t;
  auto stop = StopAtStepHook::num(2);
  auto saver = std::make_shared<CheckpointSaverHook>(CheckpointSaverHookOptions{.every_steps = 3, .listeners = {second}});
  MonitoredSession session(t.trainer, session_options(dir.str(), {saver, stop}));
  CHECK(session.restored_step() == 7);
  CHECK(stop->last_step() == 9);
  CHECK(second->before.empty());
  CHECK(test::train(session) == 2);
  session.close();
  CHECK(second->before == std::vector<std::int64_t>{9});  // 10 was never reached; the end save
  CHECK(second->ends == std::vector<std::int64_t>{9});
}

TEST_CASE("a session holds its checkpoint directory from start to close(), not to its destruction") {
  test::TempDir dir("ckpt_lock");
  LocalTraining t;
  auto saver = std::make_shared<CheckpointSaverHook>(CheckpointSaverHookOptions{.every_steps = 5});
  MonitoredSession first(t.trainer, session_options(dir.str(), {saver, StopAtStepHook::last(2)}));
  // While the first session is open, nobody else may write there.
  CheckpointManager other(dir.str());
  CHECK_THROWS_WITH_AS(other.lock_for_writing(std::chrono::seconds(0)),
                       doctest::Contains("another job is writing checkpoints there"), CheckpointError);
  test::train(first);
  first.close();
  // Closed (though not yet destroyed), it has let go: a next session takes the directory.
  LocalTraining u;
  MonitoredSession second(u.trainer, session_options(dir.str(), {StopAtStepHook::last(3)}));
  CHECK(second.restored_step() == 2);
}

TEST_CASE("a checkpoint keeps the session's settings, and one trained under others is not resumed") {
  test::TempDir dir("ckpt_settings");
  const auto run = [&](std::map<std::string, std::string> settings, std::int64_t last) {
    LocalTraining t;
    auto saver = std::make_shared<CheckpointSaverHook>(CheckpointSaverHookOptions{.every_steps = 100});
    MonitoredSessionOptions options = session_options(dir.str(), {saver, StopAtStepHook::last(last)});
    options.settings = std::move(settings);
    MonitoredSession session(t.trainer, options);
    test::train(session);
    session.close();
    return session.restored_step().value_or(0);
  };
  CHECK(run({{"--standardize", "true"}, {"classes", "cat,dog"}}, 2) == 0);
  CHECK(read_checkpoint(dir.str() + "/model.ckpt-2.safetensors").metadata.at("settings/classes") == "cat,dog");
  // The same settings resume, and so do settings the checkpoint does not know of.
  CHECK(run({{"--standardize", "true"}, {"classes", "cat,dog"}, {"--horizon", "1"}}, 3) == 2);
  CHECK_THROWS_WITH_AS(run({{"--standardize", "false"}, {"classes", "cat,dog"}}, 4),
                       (dir.str() + ", global step 3: its parameters were trained with --standardize=true, this "
                                    "job has --standardize=false: give the same (or another checkpoint directory)")
                           .c_str(),
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(run({{"classes", "dog,cat"}}, 4), doctest::Contains("trained with classes=cat,dog"),
                       InvalidArgument);
  // A session with none resumes any (a program that does not say what its parameters mean).
  CHECK(run({}, 4) == 3);
}

TEST_CASE("CheckpointSaverHook: a listener's after_save can stop training; every_secs; bad options") {
  test::TempDir dir("ckpt_stop");
  auto listener = std::make_shared<CountingListener>();
  listener->stop_after_save = true;
  LocalTraining t;
  auto saver = std::make_shared<CheckpointSaverHook>(CheckpointSaverHookOptions{.every_secs = 3600, .listeners = {listener}});
  MonitoredSession session(t.trainer, session_options(dir.str(), {saver}));
  CHECK(test::train(session) == 1);  // the start save asked to stop: effective after one step
  session.close();
  CHECK(listener->before == std::vector<std::int64_t>{0, 1});  // start, end

  CHECK_THROWS_AS(CheckpointSaverHook(CheckpointSaverHookOptions{}), InvalidArgument);
  CHECK_THROWS_AS(CheckpointSaverHook({.every_steps = 1, .every_secs = 1}), InvalidArgument);
  CHECK_THROWS_AS(CheckpointSaverHook({.every_steps = 1, .listeners = {nullptr}}), InvalidArgument);
}

TEST_CASE("CheckpointSaverHook without a checkpoint_dir, its own or the session's, is an InvalidArgument") {
  LocalTraining t;
  auto saver = std::make_shared<CheckpointSaverHook>(CheckpointSaverHookOptions{.every_steps = 3});
  CHECK_THROWS_WITH_AS(MonitoredSession(t.trainer, session_options("", {saver})),
                       doctest::Contains("neither the hook nor the session has a checkpoint_dir"), InvalidArgument);
}

TEST_CASE("CheckpointSaverHook with a directory of its own saves there, locks it, and keeps the session's count") {
  test::TempDir own("ckpt_own");
  const std::string dir = own / "nested";  // made by the hook
  auto saver = std::make_shared<CheckpointSaverHook>(
      CheckpointSaverHookOptions{.checkpoint_dir = dir, .every_steps = 2});
  {
    // TensorFlow's common form: the saver hook names the directory, the session none.
    LocalTraining t;
    MonitoredSessionOptions options = session_options("", {saver, StopAtStepHook::last(7)});
    options.keep_checkpoint_max = 2;
    MonitoredSession session(t.trainer, options);
    CheckpointManager other(dir);
    CHECK_THROWS_WITH_AS(other.lock_for_writing(std::chrono::seconds(0)),
                         doctest::Contains("another job is writing checkpoints there"), CheckpointError);
    test::train(session);
    session.close();
    CHECK(saver->last_path() == dir + "/model.ckpt-7.safetensors");
    CHECK(saver->saves() == 5);  // 0, 2, 4, 6, 7
    CHECK_FALSE(std::filesystem::exists(dir + "/model.ckpt-4.safetensors"));  // two kept
    CHECK(std::filesystem::exists(dir + "/model.ckpt-6.safetensors"));
    CheckpointManager after(dir);
    after.lock_for_writing(std::chrono::seconds(0));  // released at end()
  }
  {
    // The session restores from its own checkpoint_dir only; the hook saves into the other.
    test::TempDir session_dir("ckpt_session");
    LocalTraining t;
    MonitoredSession session(t.trainer, session_options(session_dir.str(), {saver, StopAtStepHook::last(3)}));
    CHECK_FALSE(session.restored_step());
    test::train(session);
    session.close();
    for (const auto& entry : std::filesystem::directory_iterator(session_dir.path))
      CHECK(entry.path().extension() != ".safetensors");
    CHECK(CheckpointManager(dir).restore_latest()->global_step() == 3);
  }
  {
    // The same directory as the session's (another spelling of it): saved once, by the session.
    LocalTraining t;
    MonitoredSession session(t.trainer, session_options(dir, {saver, StopAtStepHook::last(5)}));
    CHECK(session.restored_step() == 3);
    test::train(session);
    session.close();
    CHECK(saver->last_path() == dir + "/model.ckpt-5.safetensors");
  }
  {
    LocalTraining t;
    auto same = std::make_shared<CheckpointSaverHook>(
        CheckpointSaverHookOptions{.checkpoint_dir = dir + "/.", .every_steps = 2});
    MonitoredSession session(t.trainer, session_options(dir, {same, StopAtStepHook::last(6)}));
    test::train(session);
    session.close();
    CHECK(same->last_path() == dir + "/model.ckpt-6.safetensors");
  }
  // Restored from the session's directory, a hook saving elsewhere writes that step there at
  // once (a run already at its last step trains no further, and the copy still exists).
  test::TempDir elsewhere("ckpt_elsewhere");
  auto copy = std::make_shared<CheckpointSaverHook>(
      CheckpointSaverHookOptions{.checkpoint_dir = elsewhere.str(), .every_steps = 100});
  {
    LocalTraining t;
    MonitoredSession session(t.trainer, session_options(dir, {copy, StopAtStepHook::last(6)}));
    CHECK(session.restored_step() == 6);
    session.close();
    CHECK(copy->last_path() == elsewhere.str() + "/model.ckpt-6.safetensors");
  }
  // After a failed step (end() is not called), closing the session still lets the directory go.
  struct FailAtSecond : SessionRunHook {
    int runs = 0;
    void after_run(RunContext&, const SessionRunValues&) override {
      if (++runs == 2) throw Error("failed on purpose");
    }
  };
  LocalTraining t;
  MonitoredSession session(t.trainer, session_options("", {copy, std::make_shared<FailAtSecond>()}));
  session.run();
  CHECK_THROWS_AS(session.run(), Error);
  session.close();
  CheckpointManager(elsewhere.str()).lock_for_writing(std::chrono::seconds(0));
}

TEST_CASE("SummarySaverHook writes at the first step and every N global steps") {
  test::TempDir dir("summaries");
  LocalTraining t;
  auto hook = std::make_shared<SummarySaverHook>(SummarySaverHookOptions{.every_steps = 5, .output_dir = dir.str()});
  {
    MonitoredSession session(t.trainer, session_options("", {hook, StopAtStepHook::last(12)}));
    test::train(session);
  }
  CHECK(hook->writes() == 3);
  CHECK(std::filesystem::exists(hook->event_file()));
  const auto rows = read_csv(dir.str() + "/metrics.csv");
  CHECK(steps_of(rows, "loss") == std::vector<std::int64_t>{1, 6, 11});
  CHECK(steps_of(rows, "accuracy") == std::vector<std::int64_t>{1, 6, 11});
  CHECK(steps_of(rows, "learning_rate") == std::vector<std::int64_t>{1, 6, 11});
  CHECK(steps_of(rows, "examples/sec") == std::vector<std::int64_t>{6, 11});
  CHECK(steps_of(rows, "global_step/sec") == std::vector<std::int64_t>{6, 11});
  std::map<std::int64_t, double> steps_per_sec;
  for (const Row& row : rows) {
    if (row.tag == "learning_rate") CHECK(row.value == doctest::Approx(0.05));
    if (row.tag == "global_step/sec") steps_per_sec[row.step] = row.value;
  }
  // Local mode: a global step is one batch of test::kBatch examples.
  for (const Row& row : rows)
    if (row.tag == "examples/sec") {
      CHECK(row.value > 0);
      CHECK(row.value == doctest::Approx(steps_per_sec.at(row.step) * test::kBatch));
    }
  CHECK_THROWS_AS(SummarySaverHook({.every_steps = 5}), InvalidArgument);  // no output_dir
  CHECK_THROWS_AS(SummarySaverHook({.output_dir = dir.str()}), InvalidArgument);  // no cadence
}

TEST_CASE("a regression's summaries hold its metrics, and fetching a metric it lacks is an error") {
  test::TempDir dir("regression_summaries");
  const data::Dataset data = data::Dataset::from_arrays(Tensor({64, 28, 28, 1}), Tensor({64, 10}));
  const auto regression = [](Graph& g) {
    Model model = mlp(g, {8});
    model.set_loss(std::make_unique<MeanSquaredErrorLoss>());
    return model;
  };
  auto hook = std::make_shared<SummarySaverHook>(
      SummarySaverHookOptions{.every_steps = 2, .output_dir = dir.str()});
  {
    Graph graph;
    Trainer trainer(nullptr, graph, regression, data, test::sgd(), test::trainer_options());
    MonitoredSession session(trainer, session_options("", {hook, StopAtStepHook::last(3)}));
    CHECK_THROWS_WITH_AS(session.run({"accuracy"}), doctest::Contains("cannot fetch 'accuracy'"),
                         InvalidArgument);
  }
  Graph graph;
  Trainer trainer(nullptr, graph, regression, data, test::sgd(), test::trainer_options());
  MonitoredSession session(trainer, session_options("", {hook, StopAtStepHook::last(3)}));
  test::train(session);
  const auto rows = read_csv(dir.str() + "/metrics.csv");
  CHECK(!steps_of(rows, "mse").empty());
  CHECK(steps_of(rows, "accuracy").empty());
}

TEST_CASE("MonitoredTrainingSession adds the checkpoint, summary and step-counter hooks on the chief") {
  test::TempDir dir("mts");
  LocalTraining t;
  auto session = MonitoredTrainingSession(
      t.trainer, {.checkpoint_dir = dir.str(), .hooks = {StopAtStepHook::last(5)}, .save_checkpoint_steps = 2,
                  .save_summaries_steps = 2, .log_step_count_steps = 2, .stop_on_signals = false});
  CHECK(test::train(*session) == 5);
  session->close();
  for (int step : {0, 2, 4, 5})
    CHECK(std::filesystem::exists(dir.str() + "/model.ckpt-" + std::to_string(step) + ".safetensors"));
  CHECK(steps_of(read_csv(dir.str() + "/metrics.csv"), "loss") == std::vector<std::int64_t>{1, 3, 5});

  // Without a checkpoint_dir: no files, no default hooks.
  LocalTraining plain;
  auto bare = MonitoredTrainingSession(plain.trainer, {.hooks = {StopAtStepHook::last(2)}, .stop_on_signals = false});
  CHECK(bare->options().chief_only_hooks.empty());
  CHECK(bare->options().hooks.size() == 1);
  CHECK(test::train(*bare) == 2);

  CHECK_THROWS_AS(MonitoredTrainingSession(plain.trainer, {.save_checkpoint_secs = -1}), InvalidArgument);
}

TEST_CASE("warm_start_from: the chief starts from another run's variables at step 0, unless checkpoint_dir has one") {
  test::TempDir first("warm_first"), second("warm_second");
  std::vector<float> trained;
  {
    LocalTraining t;
    MonitoredSession session(t.trainer, session_options(first.str(), {StopAtStepHook::last(6)}));
    test::train(session);
    session.close();
    CheckpointManager(first.str()).save(6, t.trainer.checkpoint());
    trained.assign(t.graph.values().begin(), t.graph.values().end());
  }
  for (const std::string& from : {first.str(), first / "model.ckpt-6.safetensors"}) {
    CAPTURE(from);
    LocalTraining t;
    MonitoredSessionOptions options = session_options(second.str(), {StopAtStepHook::last(2)});
    options.warm_start_from = from;
    MonitoredSession session(t.trainer, options);
    CHECK_FALSE(session.restored_step());
    CHECK(session.global_step() == 0);
    CHECK(std::vector<float>(t.graph.values().begin(), t.graph.values().end()) == trained);
    CHECK(session.run({"global_step"}).get("global_step") == 1);
    session.close();
  }
  {
    // A checkpoint of its own wins: a restarted job resumes rather than starting over.
    LocalTraining t;
    MonitoredSessionOptions options = session_options(second.str(), {StopAtStepHook::last(3)});
    CheckpointManager(second.str()).save(2, t.trainer.checkpoint());
    options.warm_start_from = first.str();
    MonitoredSession session(t.trainer, options);
    CHECK(session.restored_step() == 2);
  }
  LocalTraining t;
  MonitoredSessionOptions options = session_options("", {});
  options.warm_start_from = first / "nothing_here";
  CHECK_THROWS_WITH_AS(MonitoredSession(t.trainer, options),
                       ("warm_start_from " + (first / "nothing_here") + ": no such file or directory").c_str(),
                       CheckpointError);
  Graph graph;
  Trainer other(nullptr, graph, [](Graph& g) { return mlp(g, {16}); }, data::synthetic(128, 5), test::sgd(),
                test::trainer_options());
  options.warm_start_from = first.str();
  CHECK_THROWS_WITH_AS(MonitoredSession(other, options),
                       doctest::Contains(("warm_start_from " + first.str() + ": checkpoint does not fit the model").c_str()),
                       CheckpointError);
}

TEST_CASE("warm_start_vars: a fine-tuned model takes the variables chosen, the others start from their initialisers") {
  test::TempDir first("warm_vars_first");
  std::map<std::string, std::vector<float>> trained;
  {
    LocalTraining t;  // mlp with hidden1 of 8 units
    MonitoredSession session(t.trainer, session_options(first.str(), {StopAtStepHook::last(6)}));
    test::train(session);
    session.close();
    CheckpointManager(first.str()).save(6, t.trainer.checkpoint());
    for (const Variable& v : t.graph.variables())
      trained[v.name].assign(t.graph.values(v).begin(), t.graph.values(v).end());
  }
  // Another layer and a new head: hidden1 fits the checkpoint, hidden2 is new, logits changed.
  const auto make = [](Graph& graph) {
    return Trainer(nullptr, graph, [](Graph& g) { return mlp(g, {8, 4}); }, data::synthetic(128, 5), test::sgd(),
                   test::trainer_options());
  };
  const auto values_of = [](const Graph& graph) {
    std::map<std::string, std::vector<float>> values;
    for (const Variable& v : graph.variables()) values[v.name].assign(graph.values(v).begin(), graph.values(v).end());
    return values;
  };
  Graph fresh;
  Trainer fresh_trainer = make(fresh);
  fresh.initialize(test::trainer_options().seed);
  const auto initial = values_of(fresh);

  MonitoredSessionOptions options = session_options("", {StopAtStepHook::last(2)});
  options.warm_start_from = first.str();
  options.warm_start_vars = "hidden1/";
  Graph graph;
  Trainer trainer = make(graph);
  {
    MonitoredSession session(trainer, options);
    CHECK(session.global_step() == 0);
    const auto now = values_of(graph);
    CHECK(now.at("hidden1/kernel") == trained.at("hidden1/kernel"));
    CHECK(now.at("hidden1/bias") == trained.at("hidden1/bias"));
    for (const char* name : {"hidden2/kernel", "hidden2/bias", "logits/kernel", "logits/bias"}) {
      CAPTURE(name);
      CHECK(now.at(name) == initial.at(name));
    }
    CHECK(test::train(session) == 2);
    session.close();
  }
  // Matched from the start of the name: "hidden" takes hidden2 too, which the checkpoint lacks.
  options.warm_start_vars = "hidden";
  CHECK_THROWS_WITH_AS(MonitoredSession(trainer, options),
                       ("warm_start_from " + first.str() +
                        ": checkpoint does not fit the variables to warm-start 'hidden': hidden2/kernel [8, 4] is "
                        "missing from the checkpoint; hidden2/bias [4] is missing from the checkpoint")
                           .c_str(),
                       CheckpointError);
  options.warm_start_vars = "idden1";
  CHECK_THROWS_WITH_AS(MonitoredSession(trainer, options),
                       doctest::Contains("variables to warm-start 'idden1' match no variable of the model (its "
                                         "variables: hidden1/kernel, hidden1/bias, hidden2/kernel"),
                       CheckpointError);
  options.warm_start_vars = "hidden1/(";
  CHECK_THROWS_WITH_AS(MonitoredSession(trainer, options),
                       doctest::Contains("variables to warm-start 'hidden1/(': not a regular expression"),
                       InvalidArgument);
  options.warm_start_vars = "hidden1/";
  options.warm_start_from = "";
  CHECK_THROWS_WITH_AS(MonitoredSession(trainer, options),
                       "MonitoredSession: warm_start_vars 'hidden1/' without warm_start_from: name the checkpoint "
                       "to load them from",
                       InvalidArgument);
}

TEST_CASE("MonitoredTrainingSession's summary_dir takes the summaries; alone, it brings no checkpoints") {
  test::TempDir checkpoints("mts_ckpt"), summaries("mts_summary");
  {
    LocalTraining t;
    auto session = MonitoredTrainingSession(
        t.trainer, {.checkpoint_dir = checkpoints.str(), .hooks = {StopAtStepHook::last(3)}, .save_checkpoint_steps = 2,
                    .save_summaries_steps = 2, .summary_dir = summaries.str(), .stop_on_signals = false});
    test::train(*session);
    session->close();
  }
  CHECK(std::filesystem::exists(checkpoints / "model.ckpt-3.safetensors"));
  CHECK_FALSE(std::filesystem::exists(checkpoints / "metrics.csv"));
  CHECK(steps_of(read_csv(summaries / "metrics.csv"), "loss") == std::vector<std::int64_t>{1, 3});

  // TensorFlow's rule: either directory brings the summary and step-counter hooks.
  test::TempDir only("mts_summary_only");
  LocalTraining t;
  auto session = MonitoredTrainingSession(
      t.trainer, {.hooks = {StopAtStepHook::last(3)}, .save_checkpoint_steps = 2, .save_summaries_steps = 2,
                  .log_step_count_steps = 2, .summary_dir = only.str(), .stop_on_signals = false});
  int counters = 0, savers = 0;
  for (const auto& hook : session->options().chief_only_hooks) {
    counters += std::dynamic_pointer_cast<StepCounterHook>(hook) != nullptr;
    savers += std::dynamic_pointer_cast<CheckpointSaverHook>(hook) != nullptr;
  }
  CHECK(counters == 1);
  CHECK(savers == 0);
  test::train(*session);
  session->close();
  CHECK(steps_of(read_csv(only / "metrics.csv"), "loss") == std::vector<std::int64_t>{1, 3});
  for (const auto& entry : std::filesystem::directory_iterator(only.path))
    CHECK(entry.path().extension() != ".safetensors");
}

TEST_CASE("MonitoredTrainingSession's summary cadence follows TensorFlow's: steps if given, else seconds, else 100 steps") {
  // The options of the SummarySaverHook the factory adds, or none.
  const auto summaries = [](SessionOptions options) -> std::optional<SummarySaverHookOptions> {
    test::TempDir dir("mts_summaries");
    LocalTraining t;
    options.checkpoint_dir = dir.str();
    options.stop_on_signals = false;
    auto session = MonitoredTrainingSession(t.trainer, std::move(options));
    std::optional<SummarySaverHookOptions> found;
    for (const auto& hook : session->options().chief_only_hooks)
      if (const auto saver = std::dynamic_pointer_cast<SummarySaverHook>(hook)) found = saver->options();
    session->close();
    return found;
  };
  const auto by_default = summaries({});
  REQUIRE(by_default);
  CHECK(by_default->every_steps == 100);
  const auto by_seconds = summaries({.save_summaries_secs = 30});
  REQUIRE(by_seconds);
  CHECK(by_seconds->every_steps == 0);
  CHECK(by_seconds->every_secs == 30);
  const auto by_steps = summaries({.save_summaries_steps = 7});
  REQUIRE(by_steps);
  CHECK(by_steps->every_steps == 7);
  CHECK_FALSE(summaries({.save_summaries_steps = 0}));
  CHECK_THROWS_AS(summaries({.save_summaries_steps = 7, .save_summaries_secs = 30}), InvalidArgument);
  CHECK_THROWS_AS(summaries({.save_summaries_steps = 0, .save_summaries_secs = 30}), InvalidArgument);
}

}  // namespace cohort
