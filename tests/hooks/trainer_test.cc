// Trainer options on a real local-mode session: gradient accumulation and its checkpoints, and
// the moving average of the parameters.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "cohort/core/io/safetensors.h"
#include "cohort/core/io/saver.h"
#include "cohort/core/nn/evaluation.h"
#include "cohort/core/nn/gradient_check.h"
#include "cohort/core/nn/ops/ops.h"
#include "cohort/hooks/stop_at_step_hook.h"
#include "hooks/hook_test_support.h"

namespace cohort {

namespace {

// Examples made on use, from a source that fails once, at its fail_at-th read (the batch loader
// reads ahead and tries a failed batch again: only the one read fails).
class FailingOnce : public data::ExampleSource {
 public:
  FailingOnce() : all_(data::synthetic(64, 5)) {}
  void read(std::int64_t i, float* out) const override {
    if (++reads_ == fail_at) throw data::DataError("a read failed");
    const auto x = all_.example(i);
    std::copy(x.begin(), x.end(), out);
  }
  std::int32_t label(std::int64_t i) const { return all_.label(i); }
  std::atomic<std::int64_t> fail_at{-1};

 private:
  data::Dataset all_;
  mutable std::atomic<std::int64_t> reads_{0};
};

}  // namespace

TEST_CASE("accumulating 4 batches of 8 is one step of the same 32 examples") {
  // 32 examples in all, no shuffle between the two: both see examples 0-31 in their first step.
  const data::Dataset data = data::synthetic(32, 5);
  TrainerOptions accumulated = test::trainer_options();
  accumulated.batch_size = 8;
  accumulated.accumulation_steps = 4;
  TrainerOptions large = test::trainer_options();
  large.batch_size = 32;
  CHECK(accumulated.examples_per_global_step(1) == 32);
  Graph graph_a, graph_b;
  const auto model = [](Graph& g) { return mlp(g, {8}); };
  Trainer a(nullptr, graph_a, model, data, test::sgd(0.1), accumulated);
  Trainer b(nullptr, graph_b, model, data, test::sgd(0.1), large);
  for (Trainer* trainer : {&a, &b}) {
    MonitoredSession session(*trainer, test::with_hooks({StopAtStepHook::last(1)}));
    test::train(session);
  }
  CHECK(a.global_step() == 1);
  const auto va = graph_a.values(), vb = graph_b.values();
  double worst = 0;
  for (std::size_t i = 0; i < va.size(); ++i) worst = std::max(worst, double(std::abs(va[i] - vb[i])));
  CHECK(worst < 1e-6);
  CHECK(a.examples_trained() == 32);
  // An epoch of 4 batches of 8 is one step: a second would need batches of the next epoch.
  TrainerOptions one_epoch = accumulated;
  one_epoch.epochs = 1;
  Graph graph_c;
  Trainer c(nullptr, graph_c, model, data, test::sgd(0.1), one_epoch);
  MonitoredSession session(c, test::with_hooks({StopAtStepHook::last(10)}));
  test::train(session);
  CHECK(c.global_step() == 1);
}

TEST_CASE("a step's metrics over towers and accumulated batches are those of all its examples") {
  // Recall and AUC are no means of their examples: over pieces of the batch, the step's value is
  // counted over them all (Metric::counts), as one batch of the same examples gives it.
  const data::Dataset data = data::synthetic(32, 5);
  const auto model = [](Graph& g) {
    Model m = mlp(g, {8});
    m.add_metric(std::make_unique<Recall>(1));
    m.add_metric(std::make_unique<Auc>(1));
    return m;
  };
  const auto first_step = [&](std::int64_t batch, int accumulation, int towers) {
    TrainerOptions options = test::trainer_options();
    options.batch_size = batch;
    options.accumulation_steps = accumulation;
    options.towers = towers;
    Graph graph;
    Trainer trainer(nullptr, graph, model, data, test::sgd(0.1), options);
    MonitoredSession session(trainer, test::with_hooks({}));
    const SessionRunValues values = session.run({"recall", "auc", "accuracy"});
    CHECK(values.counts("recall").size() == 2);
    CHECK(values.counts("loss").empty());
    // Counted where asked (a session asks where some fetch is of a metric).
    CHECK(trainer.step(false).metric_counts.empty());
    CHECK(trainer.step().metric_counts.size() == 3);
    return values;
  };
  const SessionRunValues whole = first_step(32, 1, 1);
  for (const auto& [accumulation, towers] : {std::pair{4, 1}, std::pair{1, 2}, std::pair{2, 2}}) {
    CAPTURE(accumulation);
    CAPTURE(towers);
    const SessionRunValues pieces = first_step(32 / accumulation, accumulation, towers);
    for (const char* name : {"recall", "auc", "accuracy"}) {
      CAPTURE(name);
      CHECK(pieces.get(name) == doctest::Approx(whole.get(name)).epsilon(1e-6));
      const std::span<const double> a = whole.counts(name), b = pieces.counts(name);
      CHECK(std::vector<double>(a.begin(), a.end()) == std::vector<double>(b.begin(), b.end()));
    }
  }
}

TEST_CASE("a checkpoint counts its examples: a resume at another accumulation takes up its data and epochs there") {
  test::TempDir dir("resume_examples");
  const data::Dataset data = data::synthetic(64, 5);  // 8 batches an epoch
  const auto model = [](Graph& g) { return mlp(g, {8}); };
  const auto run = [&](int accumulation, std::int64_t last_step) {
    TrainerOptions options = test::trainer_options();
    options.accumulation_steps = accumulation;
    options.epochs = 1;
    Graph graph;
    Trainer trainer(nullptr, graph, model, data, test::sgd(), options);
    MonitoredSessionOptions session_options = test::with_hooks({StopAtStepHook::last(last_step)});
    session_options.checkpoint_dir = dir.str();
    MonitoredSession session(trainer, session_options);
    test::train(session);
    session.save_checkpoint();
    session.close();
    return std::make_pair(trainer.global_step(), trainer.checkpoint().metadata.at("examples"));
  };
  // One step of 2 batches: 16 examples, 2 batches into the epoch.
  const auto [first_step, first_examples] = run(2, 1);
  CHECK(first_step == 1);
  CHECK(first_examples == "16");
  // Resumed one batch a step: the 6 batches left of the epoch, not the 7 that counting its one
  // step as one batch would leave.
  const auto [step, examples] = run(1, 100);
  CHECK(step == 7);
  CHECK(examples == "64");
}

TEST_CASE("a resume at another batch size takes up the data at the first whole batch where the checkpoint left it") {
  // Example i's first pixel is i: a step of one's own records the examples each batch holds.
  constexpr std::int64_t n = 64, pixels = 28 * 28;
  Tensor x({n, 28, 28, 1});
  std::vector<std::int32_t> labels(n);
  for (std::int64_t i = 0; i < n; ++i) {
    x.data()[pixels * i] = static_cast<float>(i);
    labels[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i % 5);
  }
  const data::Dataset data = data::Dataset::from_arrays(x, labels, 5);
  test::TempDir dir("resume_batch_size");
  const auto run = [&](std::int64_t batch, std::int64_t last_step, bool keep) {
    std::vector<std::int64_t> seen;
    TrainerOptions options = test::trainer_options();
    options.batch_size = batch;
    options.step = [&](Model& model, int, const Tensor& features, const Targets& targets,
                       std::span<float> grads, const OpContext& context) {
      for (std::int64_t i = 0; i < features.dim(0); ++i)
        seen.push_back(static_cast<std::int64_t>(features.data()[pixels * i]));
      return model.train_step(features, targets, grads, context);
    };
    Graph graph;
    Trainer trainer(nullptr, graph, [](Graph& g) { return mlp(g, {8}); }, data, test::sgd(), options);
    MonitoredSessionOptions session_options = test::with_hooks({StopAtStepHook::last(last_step)});
    if (keep) session_options.checkpoint_dir = dir.str();
    MonitoredSession session(trainer, session_options);
    test::train(session);
    if (keep) session.save_checkpoint();
    session.close();
    return seen;
  };
  const std::vector<std::int64_t> straight = run(4, 8, false);  // 32 examples, 4 a step
  REQUIRE(straight.size() == 32);
  const std::vector<std::int64_t> first = run(4, 5, true);      // 20 examples
  REQUIRE(first.size() == 20);
  // Resumed 8 a step: its first step takes the first whole batch past the 20 examples, 24-31 of
  // the order (20-23 left out, less than a batch), not 16-23 again.
  const std::vector<std::int64_t> resumed = run(8, 6, true);
  REQUIRE(resumed.size() == 8);
  CHECK(resumed == std::vector<std::int64_t>(straight.begin() + 24, straight.begin() + 32));
}

TEST_CASE("an accumulating step that fails part way gives its batches back: the retry sees the same ones") {
  // Each trainer its own source: a trainer's loader reads ahead while the other one runs.
  const auto made_on_use = [](const std::shared_ptr<FailingOnce>& source) {
    auto storage = std::make_shared<data::Storage>();
    storage->source = source;
    storage->source_shape = {64, 28, 28, 1};
    for (std::int64_t i = 0; i < 64; ++i) storage->labels.push_back(source->label(i));
    return data::Dataset(storage);
  };
  const auto source = std::make_shared<FailingOnce>();
  const auto model = [](Graph& g) { return mlp(g, {8}); };
  TrainerOptions two = test::trainer_options();
  two.accumulation_steps = 2;
  // Two steps straight, and two with the second failing in its second batch, then retried.
  Graph straight_graph, retried_graph;
  Trainer straight(nullptr, straight_graph, model, made_on_use(std::make_shared<FailingOnce>()),
                   test::sgd(), two);
  Trainer retried(nullptr, retried_graph, model, made_on_use(source), test::sgd(), two);
  {
    MonitoredSession session(straight, test::with_hooks({StopAtStepHook::last(2)}));
    test::train(session);
  }
  source->fail_at = 3 * test::kBatch + test::kBatch / 2;  // in step 2's second batch
  MonitoredSession session(retried, test::with_hooks({}));
  session.run();
  CHECK_THROWS_AS(retried.step(), data::DataError);
  retried.step();
  CHECK(retried.global_step() == 2);
  const auto a = straight_graph.values(), b = retried_graph.values();
  CHECK(std::equal(a.begin(), a.end(), b.begin()));
}

TEST_CASE("accumulation is refused with buckets sent during the backward pass, and below 1") {
  TrainerOptions options = test::trainer_options(Mode::kLocal);
  options.accumulation_steps = 0;
  Graph graph;
  const auto model = [](Graph& g) { return mlp(g, {8}); };
  CHECK_THROWS_AS(Trainer(nullptr, graph, model, data::synthetic(32, 5), test::sgd(), options), InvalidArgument);
  options.accumulation_steps = 2;
  options.replication.bucket_bytes = 1 << 20;
  Graph graph2;
  CHECK_THROWS_WITH_AS(Trainer(nullptr, graph2, model, data::synthetic(32, 5), test::sgd(), options),
                       doctest::Contains("gradient accumulation (2 batches a step) with buckets"),
                       InvalidArgument);
}

}  // namespace cohort

namespace cohort {

namespace {

// Records the parameters each step starts from and the global step it starts at, and the chief's
// moving average as the session was made.
class ParametersBefore : public SessionRunHook {
 public:
  explicit ParametersBefore(Trainer& trainer) : trainer_(trainer) {}
  void after_create_session(MonitoredSession&) override {
    if (const ExponentialMovingAverage* average = trainer_.moving_average())
      at_start.assign(average->values().begin(), average->values().end());
  }
  SessionRunArgs before_run(RunContext&) override {
    const auto values = trainer_.graph().values();
    seen.emplace_back(values.begin(), values.end());
    steps.push_back(trainer_.global_step());
    return {};
  }
  std::vector<float> at_start;
  std::vector<std::vector<float>> seen;
  std::vector<std::int64_t> steps;

 private:
  Trainer& trainer_;
};

std::vector<float> copy(std::span<const float> values) { return {values.begin(), values.end()}; }

}  // namespace

TEST_CASE("the chief's moving average: of the parameters each step starts from, evaluated, checkpointed, restored") {
  test::TempDir dir("trainer_test");
  const data::Dataset data = data::synthetic(64, 5);
  const auto model = [](Graph& g) { return mlp(g, {8}); };
  TrainerOptions options = test::trainer_options();
  options.moving_average_decay = 0.9;
  Graph graph;
  Trainer trainer(nullptr, graph, model, data, test::sgd(0.2), options);
  // Before the first start there is no average yet, and no values to evaluate (their zeros would
  // score as a model): the parameters are saved as they are.
  CHECK(trainer.moving_average() == nullptr);
  CHECK_THROWS_WITH_AS(trainer.evaluate(data),
                       "Trainer::evaluate: the variables have no values yet: start a session (which "
                       "initialises or restores them) or load_parameters() from a checkpoint first",
                       InvalidArgument);
  CHECK_THROWS_AS(trainer.predict(Tensor({1, 28, 28, 1})), InvalidArgument);
  const Checkpoint before = trainer.checkpoint();
  CHECK(before.find("hidden1/kernel") != nullptr);
  CHECK(before.find("hidden1/kernel/ExponentialMovingAverage") == nullptr);
  const auto recorder = std::make_shared<ParametersBefore>(trainer);
  MonitoredSessionOptions session_options = test::with_hooks({StopAtStepHook::last(6), recorder});
  session_options.checkpoint_dir = dir / "ckpt";
  {
    MonitoredSession session(trainer, session_options);
    test::train(session);
    session.save_checkpoint();
  }
  // From the initial parameters, then TensorFlow's update at each step's global step.
  REQUIRE(recorder->seen.size() == 6);
  ExponentialMovingAverage expected(0.9);
  expected.reset(recorder->seen.front());
  CHECK(recorder->at_start == recorder->seen.front());
  for (std::size_t i = 0; i < recorder->seen.size(); ++i) {
    CHECK(recorder->steps[i] == static_cast<std::int64_t>(i));
    expected.apply(recorder->seen[i], recorder->steps[i]);
  }
  const ExponentialMovingAverage* average = trainer.moving_average();
  REQUIRE(average != nullptr);
  double worst = 0;
  for (std::size_t i = 0; i < expected.values().size(); ++i)
    worst = std::max(worst, double(std::abs(expected.values()[i] - average->values()[i])));
  CHECK(worst < 1e-6);
  CHECK(copy(average->values()) != copy(graph.values()));

  // evaluate() is of the averages, and leaves the parameters as they were; a model loaded with
  // the checkpoint's averages answers the same.
  const std::vector<float> parameters = copy(graph.values());
  const StepMetrics averaged = trainer.evaluate(data);
  CHECK(copy(graph.values()) == parameters);
  const Checkpoint checkpoint = trainer.checkpoint();
  Graph eval_graph;
  Model eval_model = model(eval_graph);
  CHECK(restore_variables(checkpoint, eval_graph, /*moving_averages=*/true) == 4);
  CHECK(copy(eval_graph.values()) == copy(average->values()));
  CHECK(evaluate_dataset(eval_model, data).loss == averaged.loss);
  restore_variables(checkpoint, eval_graph);
  CHECK(evaluate_dataset(eval_model, data).loss != averaged.loss);

  // The average a chief resuming from `checkpoint_dir` starts with.
  const auto average_at_resume = [&](const std::string& checkpoint_dir) {
    Graph resumed_graph;
    Trainer resumed(nullptr, resumed_graph, model, data, test::sgd(0.2), options);
    const auto resumed_recorder = std::make_shared<ParametersBefore>(resumed);
    MonitoredSessionOptions resumed_options = test::with_hooks({resumed_recorder});
    resumed_options.checkpoint_dir = checkpoint_dir;
    const MonitoredSession session(resumed, resumed_options);
    return resumed_recorder->at_start;
  };
  // From the checkpoint's averages.
  CHECK(average_at_resume(session_options.checkpoint_dir) == copy(average->values()));

  // A checkpoint written without them: the averages start at its variables.
  TrainerOptions plain_options = test::trainer_options();
  Graph graph_c;
  Trainer plain(nullptr, graph_c, model, data, test::sgd(0.2), plain_options);
  CHECK(plain.moving_average() == nullptr);
  MonitoredSessionOptions plain_session = test::with_hooks({StopAtStepHook::last(2)});
  plain_session.checkpoint_dir = dir / "plain";
  {
    MonitoredSession session(plain, plain_session);
    test::train(session);
    session.save_checkpoint();
  }
  CHECK(average_at_resume(plain_session.checkpoint_dir) == copy(graph_c.values()));

  options.moving_average_decay = 1;
  Graph graph_e;
  CHECK_THROWS_WITH_AS(Trainer(nullptr, graph_e, model, data, test::sgd(), options),
                       "moving average decay 1 is not in (0, 1)", InvalidArgument);
}

TEST_CASE("Trainer::load_parameters: after training, a checkpoint's parameters and averages are evaluated") {
  const data::Dataset data = data::synthetic(64, 5);
  const auto model = [](Graph& g) { return mlp(g, {8}); };
  TrainerOptions options = test::trainer_options();
  options.moving_average_decay = 0.9;
  // A checkpoint of step 3, taken during training (a best_dir's), and its evaluation.
  Checkpoint at_3;
  StepMetrics evaluated_at_3;
  class Snapshot : public SessionRunHook {
   public:
    Snapshot(Trainer& trainer, Checkpoint& checkpoint, StepMetrics& metrics, const data::Dataset& data)
        : trainer_(trainer), checkpoint_(checkpoint), metrics_(metrics), data_(data) {}
    void after_run(RunContext&, const SessionRunValues&) override {
      if (trainer_.global_step() != 3) return;
      checkpoint_ = trainer_.checkpoint();
      metrics_ = trainer_.evaluate(data_);
    }

   private:
    Trainer& trainer_;
    Checkpoint& checkpoint_;
    StepMetrics& metrics_;
    const data::Dataset& data_;
  };
  Graph graph;
  Trainer trainer(nullptr, graph, model, data, test::sgd(0.2), options);
  CHECK_THROWS_WITH_AS(trainer.load_parameters(trainer.checkpoint()),
                       "Trainer::load_parameters: after finish() (training would overwrite the parameters it loads)",
                       InvalidArgument);
  {
    MonitoredSession session(trainer, test::with_hooks({StopAtStepHook::last(8),
                                                        std::make_shared<Snapshot>(trainer, at_3, evaluated_at_3, data)}));
    test::train(session);
  }
  REQUIRE(at_3.find("hidden1/kernel/ExponentialMovingAverage") != nullptr);
  const StepMetrics last = trainer.evaluate(data);
  CHECK(last.loss != evaluated_at_3.loss);
  trainer.load_parameters(at_3);
  CHECK(trainer.global_step() == 8);
  CHECK(trainer.evaluate(data).loss == evaluated_at_3.loss);  // the averages of step 3, not 8
  // Its checkpoint now holds step 3's parameters and averages.
  const Checkpoint again = trainer.checkpoint();
  for (const char* name : {"hidden1/kernel", "hidden1/kernel/ExponentialMovingAverage"}) {
    CAPTURE(name);
    const CheckpointTensor* was = at_3.find(name);
    const CheckpointTensor* is = again.find(name);
    REQUIRE((was != nullptr && is != nullptr));
    CHECK(is->values == was->values);
  }
  // A checkpoint of another model is refused, naming the mismatch.
  Graph other_graph;
  Trainer other(nullptr, other_graph, [](Graph& g) { return mlp(g, {4}); }, data, test::sgd(0.2), test::trainer_options());
  CHECK_THROWS_AS(trainer.load_parameters(other.checkpoint()), CheckpointError);
}

TEST_CASE("Trainer::predict: new examples as evaluate() sees data, normalised, with the averages") {
  const data::Dataset data = data::synthetic(64, 5);
  const auto model = [](Graph& g) { return mlp(g, {8}); };
  TrainerOptions options = test::trainer_options();
  options.moving_average_decay = 0.9;
  options.image.mean = {0.5f};
  options.image.std = {2.0f};
  Graph graph;
  Trainer trainer(nullptr, graph, model, data, test::sgd(0.2), options);
  {
    MonitoredSession session(trainer, test::with_hooks({StopAtStepHook::last(4)}));
    test::train(session);
  }
  // Ten examples, predicted three at a time.
  Shape shape = data.example_shape();
  shape.insert(shape.begin(), 10);
  Tensor features(shape);
  for (std::int64_t i = 0; i < 10; ++i)
    std::ranges::copy(data.example(i), features.data() + i * data.example_size());
  const std::vector<float> parameters = copy(graph.values());
  const Tensor logits = trainer.predict(features, 3);
  const Tensor probabilities = trainer.predict_probabilities(features, 3);
  CHECK(copy(graph.values()) == parameters);
  // The same as the averages' model on (x - 0.5) / 2, all ten at once.
  Graph averaged;
  Model averaged_model = model(averaged);
  restore_variables(trainer.checkpoint(), averaged, /*moving_averages=*/true);
  Tensor normalised = features;
  for (std::int64_t i = 0; i < normalised.size(); ++i) normalised.data()[i] = (normalised.data()[i] - 0.5f) / 2.0f;
  const Tensor expected = averaged_model.predict(normalised);
  REQUIRE(logits.shape() == expected.shape());
  REQUIRE(probabilities.shape() == expected.shape());
  for (std::int64_t i = 0; i < expected.size(); ++i) CHECK(logits.data()[i] == doctest::Approx(expected.data()[i]).epsilon(1e-5));
  const Tensor expected_probabilities = averaged_model.predict_probabilities(normalised);
  for (std::int64_t i = 0; i < expected.size(); ++i)
    CHECK(probabilities.data()[i] == doctest::Approx(expected_probabilities.data()[i]).epsilon(1e-5));
  // Not the parameters' own answers.
  Graph plain;
  Model plain_model = model(plain);
  restore_variables(trainer.checkpoint(), plain);
  CHECK(copy(plain_model.predict(normalised).span()) != copy(expected.span()));
  CHECK_THROWS_AS(trainer.predict(features, 0), InvalidArgument);
}

}  // namespace cohort

namespace cohort {

TEST_CASE("a checkpoint of diverged parameters is not written, and the last finite one stays") {
  test::TempDir dir("trainer_test_diverged");
  const data::Dataset data = data::synthetic(64, 5);
  Graph graph;
  Trainer trainer(nullptr, graph, [](Graph& g) { return mlp(g, {8}); }, data, test::sgd(0.2), test::trainer_options());
  MonitoredSessionOptions options = test::with_hooks({StopAtStepHook::last(3)});
  options.checkpoint_dir = dir / "ckpt";
  MonitoredSession session(trainer, options);
  test::train(session);
  const std::string finite = session.save_checkpoint();
  graph.values(*graph.find("hidden1/bias"))[2] = std::nanf("");
  CHECK_THROWS_WITH_AS(session.save_checkpoint(),
                       ("not writing the checkpoint of global step 3: hidden1/bias holds nan (training diverged); " +
                        options.checkpoint_dir + " keeps its last finite checkpoint")
                           .c_str(),
                       CheckpointError);
  CHECK(CheckpointManager(options.checkpoint_dir).latest_path() == finite);
  graph.values(*graph.find("hidden1/bias"))[2] = std::numeric_limits<float>::infinity();
  CHECK_THROWS_AS(session.save_checkpoint(), CheckpointError);
  graph.values(*graph.find("hidden1/bias"))[2] = 0.0f;
}

}  // namespace cohort

namespace cohort {

TEST_CASE("learning-rate factors by variable: each variable's step at its factor, the first pattern's") {
  const data::Dataset data = data::synthetic(64, 5);
  const auto model = [](Graph& g) { return mlp(g, {8}); };
  // One SGD step from the same start and batch, with and without factors: the change of a
  // variable is its factor times the change at the base rate.
  const auto step = [&](std::vector<std::pair<std::string, double>> factors) {
    TrainerOptions options = test::trainer_options();
    options.learning_rate_factors = std::move(factors);
    Graph graph;
    Trainer trainer(nullptr, graph, model, data, test::sgd(0.2), options);
    trainer.start();
    const std::vector<float> before(graph.values().begin(), graph.values().end());
    trainer.step();
    std::vector<float> change(before.size());
    for (std::size_t i = 0; i < before.size(); ++i) change[i] = graph.values()[i] - before[i];
    return change;
  };
  const std::vector<float> plain = step({});
  const std::vector<float> factored = step({{"hidden1/kernel", 0.5}, {"hidden1", 0.25}, {"logits/bias", 2.0}});
  Graph names;
  Trainer probe(nullptr, names, model, data, test::sgd(0.2), test::trainer_options());
  for (const Variable& v : names.variables()) {
    CAPTURE(v.name);
    const double factor = v.name == "hidden1/kernel" ? 0.5 : v.name == "hidden1/bias" ? 0.25 : v.name == "logits/bias" ? 2.0 : 1.0;
    for (std::int64_t i = v.offset; i < v.offset + v.size; ++i)
      CHECK(factored[static_cast<std::size_t>(i)] ==
            doctest::Approx(factor * plain[static_cast<std::size_t>(i)]).epsilon(1e-3).scale(1e-5));
  }
  TrainerOptions options = test::trainer_options();
  options.learning_rate_factors = {{"backbone", 0.1}};
  Graph graph;
  CHECK_THROWS_WITH_AS(Trainer(nullptr, graph, model, data, test::sgd(0.2), options),
                       doctest::Contains("variables of learning-rate factor 0.1 'backbone' match no variable of the model"),
                       InvalidArgument);
  options.learning_rate_factors = {{"hidden1", 0.0}};
  Graph graph2;
  CHECK_THROWS_WITH_AS(Trainer(nullptr, graph2, model, data, test::sgd(0.2), options),
                       "learning-rate factor 0 of the variables 'hidden1': expected a finite factor above 0 (to "
                       "hold variables as they are, leave them out of the variables to train)",
                       InvalidArgument);
  // A pattern that never applies is refused as one that matches nothing is: every variable it
  // matches taken by an earlier pattern, or held as it is.
  options.learning_rate_factors = {{"hidden1", 0.5}, {"hidden1/kernel", 0.1}};
  Graph graph3;
  CHECK_THROWS_WITH_AS(Trainer(nullptr, graph3, model, data, test::sgd(0.2), options),
                       doctest::Contains("'hidden1/kernel': an earlier pattern takes every trainable variable"),
                       InvalidArgument);
  options.learning_rate_factors = {{"hidden1", 0.5}};
  options.trainable_vars = "logits";
  Graph graph4;
  CHECK_THROWS_WITH_AS(Trainer(nullptr, graph4, model, data, test::sgd(0.2), options),
                       doctest::Contains("'hidden1': every variable it gives a factor is held as it is (not "
                                         "among the variables to train 'logits')"),
                       InvalidArgument);
}

TEST_CASE("steps_for_epochs: the global steps of whole passes; no epochs or examples is refused") {
  TrainerOptions options;
  options.batch_size = 32;
  options.replication.mode = Mode::kAllreduce;  // every worker's batch a global step
  CHECK(options.steps_for_epochs(2, 100, 2) == 4);  // 200 examples, 64 a global step: 3.1 -> 4
  CHECK_THROWS_WITH_AS(options.steps_for_epochs(-1, 100, 2),
                       "steps_for_epochs: -1 epochs of 100 examples: both must be >= 1", InvalidArgument);
  CHECK_THROWS_AS(options.steps_for_epochs(1, 0, 2), InvalidArgument);
  // Resumed from a checkpoint of 96 examples at step 1 (3 batches a step then): 104 left, 2 steps.
  CHECK(options.steps_for_epochs(2, 100, 2, {.global_step = 1, .examples = 96}) == 3);
  // Past the end: no step left.
  CHECK(options.steps_for_epochs(1, 100, 2, {.global_step = 9, .examples = 300}) == 9);
}

TEST_CASE("a model function that builds on another Graph than the trainer's is refused at once") {
  const data::Dataset data = data::synthetic(64, 5);
  Graph graph, other;
  CHECK_THROWS_WITH_AS(
      Trainer(nullptr, graph, [&](Graph&) { return mlp(other, {8}); }, data, test::sgd(0.2), test::trainer_options()),
      "Trainer: the model function built its model on another Graph than the trainer's: build it on the "
      "Graph& it is given",
      InvalidArgument);
}

TEST_CASE("a crop's target padding that the loss refuses is found as the trainer is made") {
  // 4 x 4 images of 2 channels and a mask of 0s and 1s each: a 1 x 1 convolution's logit per
  // pixel under a sigmoid, whose targets must be in [0, 1].
  const Tensor x = random_tensor({8, 4, 4, 2}, 3);
  Tensor y({8, 4, 4, 1});
  for (std::int64_t i = 0; i < y.size(); ++i) y[i] = x[2 * i] > 0 ? 1.0f : 0.0f;
  const data::Dataset data = data::Dataset::from_arrays(x, y);
  const auto model = [](Graph& g) {
    Model m(g, {4, 4, 2});
    m.add(conv2d("mask", 1, 1));
    m.set_loss(make_loss("sigmoid_cross_entropy"));
    return m;
  };
  TrainerOptions options = test::trainer_options();
  options.image.crop_padding = 1;
  options.image.target_padding = -1;  // a class-index mask's "no target", which a sigmoid refuses
  Graph graph;
  CHECK_THROWS_WITH_AS(Trainer(nullptr, graph, model, data, test::sgd(), options),
                       doctest::Contains("ImageOptions::target_padding -1, which a crop pads the targets with, "
                                         "does not fit the loss: loss sigmoid_cross_entropy: target -1"),
                       InvalidArgument);
  options.image.target_padding = 0;
  Graph fine;
  CHECK_NOTHROW(Trainer(nullptr, fine, model, data, test::sgd(), options));
}

}  // namespace cohort
