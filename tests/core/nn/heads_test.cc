// A model of two heads (a class and two values) under one loss: the weighted sum of the heads'
// losses, their gradients, their metrics, and the refusals.
#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/heads.h"
#include "cohort/core/nn/model.h"
#include "cohort/core/nn/ops/ops.h"
#include "core/nn/gradient_check.h"

using namespace cohort;
using cohort::testing::expect_model_gradients;

namespace {

std::unique_ptr<HeadsLoss> class_and_values(float values_weight) {
  std::vector<Head> heads;
  heads.push_back({.name = "class", .outputs = 3, .targets = 1,
                   .loss = std::make_unique<SoftmaxCrossEntropyLoss>(), .labels = true});
  heads.push_back({.name = "values", .outputs = 2, .targets = 2,
                   .loss = std::make_unique<MeanSquaredErrorLoss>(), .weight = values_weight});
  return std::make_unique<HeadsLoss>(std::move(heads));
}

// Features [n, 4]; targets [n, 3]: a class (which of the first three features is largest) and
// two values (the sum and the difference of the last two).
void make_data(std::int64_t n, std::uint32_t seed, Tensor& features, Tensor& targets) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  features.resize({n, 4});
  targets.resize({n, 3});
  for (std::int64_t i = 0; i < n; ++i) {
    float* x = features.data() + i * 4;
    for (int j = 0; j < 4; ++j) x[j] = normal(rng);
    float* t = targets.data() + i * 3;
    t[0] = static_cast<float>(x[1] > x[0] && x[1] > x[2] ? 1 : (x[2] > x[0] ? 2 : 0));
    t[1] = x[2] + x[3];
    t[2] = x[2] - x[3];
  }
}

Model two_heads(Graph& graph, float values_weight) {
  Model model(graph);
  Node x = model.input({4});
  Node h = model.apply(dense("hidden", 16, Activation::kRelu), x);
  Node logits = model.apply(dense("class_logits", 3), h);
  Node values = model.apply(dense("values", 2), h);
  model.apply(concatenate("heads"), {logits, values});
  model.set_loss(class_and_values(values_weight));
  return model;
}

}  // namespace

TEST_CASE("the heads' loss is the weighted sum of theirs, with their gradients and metrics") {
  Graph graph;
  Model model = two_heads(graph, 0.5f);
  CHECK(model.metric_names() == std::vector<std::string>{"class/accuracy", "values/mse"});
  CHECK_NOTHROW(model.check_data({4}, TargetSpec::values({3})));
  graph.initialize(2);
  Tensor features, targets;
  make_data(8, 1, features, targets);
  std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()));
  const StepMetrics m = model.train_step(features, Targets{{}, &targets}, grads, {});

  // The same numbers from the two losses and metrics on the output's and targets' columns.
  const Tensor& out = *model.fetch("heads");
  Tensor logits({8, 3}), values({8, 2}), value_targets({8, 2});
  std::vector<std::int32_t> labels;
  for (std::int64_t i = 0; i < 8; ++i) {
    for (int j = 0; j < 3; ++j) logits.data()[i * 3 + j] = out.data()[i * 5 + j];
    for (int j = 0; j < 2; ++j) {
      values.data()[i * 2 + j] = out.data()[i * 5 + 3 + j];
      value_targets.data()[i * 2 + j] = targets.data()[i * 3 + 1 + j];
    }
    labels.push_back(static_cast<std::int32_t>(targets.data()[i * 3]));
  }
  SoftmaxCrossEntropyLoss ce;
  MeanSquaredErrorLoss mse;
  const float class_loss = ce.forward(logits, Targets{labels, nullptr});
  const float values_loss = mse.forward(values, Targets{{}, &value_targets});
  CHECK(m.loss == doctest::Approx(class_loss + 0.5f * values_loss).epsilon(1e-6));
  Accuracy accuracy;
  MeanSquaredError mse_metric;
  CHECK(m.metrics[0] == doctest::Approx(accuracy.compute(logits, Targets{labels, nullptr})));
  CHECK(m.metrics[1] == doctest::Approx(mse_metric.compute(values, Targets{{}, &value_targets})));
  const auto& loss = dynamic_cast<const HeadsLoss&>(model.loss());
  CHECK(loss.head_losses()[0] == doctest::Approx(class_loss));
  CHECK(loss.head_losses()[1] == doctest::Approx(values_loss));
  // "accuracy" is the first head's; a head's metric is better higher or lower as the metric is.
  CHECK(m.accuracy == m.metrics[0]);
  CHECK(model.fetch("accuracy")->data()[0] == model.fetch("class/accuracy")->data()[0]);
  CHECK(higher_is_better("class/precision@2"));
  CHECK(higher_is_better("class/auc"));
  CHECK(higher_is_better("class/precision@n/a"));  // a class named "n/a"
  CHECK(higher_is_better("recall@n/a"));
  CHECK_FALSE(higher_is_better("values/mse"));
  // Probabilities: the class head's softmax, the values as they are.
  const Tensor p = loss.probabilities(out);
  const Tensor softmax = ce.probabilities(logits);
  for (std::int64_t i = 0; i < 8; ++i) {
    for (int j = 0; j < 3; ++j) CHECK(p.data()[i * 5 + j] == doctest::Approx(softmax.data()[i * 3 + j]));
    for (int j = 3; j < 5; ++j) CHECK(p.data()[i * 5 + j] == out.data()[i * 5 + j]);
  }

  GradientCheckOptions options;
  options.step = 1e-3;
  expect_model_gradients(model, features, Targets{{}, &targets}, {}, options);
}

TEST_CASE("a model of two heads learns both") {
  Graph graph;
  Model model = two_heads(graph, 1.0f);
  graph.initialize(4);
  Tensor features, targets, test_features, test_targets;
  make_data(256, 5, features, targets);
  make_data(256, 6, test_features, test_targets);
  std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()));
  const StepMetrics before = model.train_step(test_features, Targets{{}, &test_targets}, grads, {});
  for (int step = 0; step < 600; ++step) {
    model.train_step(features, Targets{{}, &targets}, grads, {});
    std::span<float> values = graph.values();
    for (std::size_t i = 0; i < grads.size(); ++i) values[i] -= 0.1f * grads[i];
  }
  const StepMetrics after = model.train_step(test_features, Targets{{}, &test_targets}, grads, {});
  CHECK(after.metrics[0] > 0.9f);                    // class/accuracy
  CHECK(after.metrics[1] < 0.05f * before.metrics[1]);  // values/mse
}

TEST_CASE("the heads refuse what does not fit, naming the head") {
  std::vector<Head> none;
  CHECK_THROWS_WITH_AS(HeadsLoss(std::move(none)), "HeadsLoss: no heads", InvalidArgument);
  const auto one = [](Head head) {
    std::vector<Head> heads;
    heads.push_back(std::move(head));
    return HeadsLoss(std::move(heads));
  };
  CHECK_THROWS_WITH_AS(one({.name = "c", .outputs = 3, .targets = 2, .loss = std::make_unique<SoftmaxCrossEntropyLoss>(),
                            .labels = true}),
                       "HeadsLoss: head \"c\": a head of class labels takes one target column, not 2",
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(one({.name = "a@b", .outputs = 2, .targets = 2, .loss = std::make_unique<MeanSquaredErrorLoss>()}),
                       "HeadsLoss: head \"a@b\": a head's name holds no '/' or '@'", InvalidArgument);
  CHECK_THROWS_WITH_AS(one({.name = "v", .outputs = 2, .targets = 2, .loss = nullptr}),
                       "HeadsLoss: head \"v\" has no loss", InvalidArgument);
  CHECK_THROWS_AS(one({.name = "v", .outputs = 2, .targets = 2, .loss = std::make_unique<MeanSquaredErrorLoss>(),
                       .weight = -1.0f}),
                  InvalidArgument);

  auto loss = class_and_values(1.0f);
  CHECK_THROWS_WITH_AS(loss->metric("box", make_metric("mae")),
                       "HeadsLoss::metric: no head \"box\" (the heads: class, values)", InvalidArgument);
  CHECK(loss->metric("values", make_metric("mae"))->name() == "values/mae");
  CHECK_THROWS_WITH_AS(loss->check({5}, TargetSpec::classes(3)),
                       "loss heads (output/target columns: class 3/1, values 2/2): takes float targets "
                       "of 3 columns, the heads' side by side, not class labels in [0, 3)",
                       InvalidArgument);
  CHECK_THROWS_AS(loss->check({6}, TargetSpec::values({3})), InvalidArgument);
  CHECK_NOTHROW(loss->check({5}, TargetSpec::values({3})));

  Tensor predictions({2, 5}), targets({2, 3});
  targets.data()[3] = 1.5f;  // the second example's label
  CHECK_THROWS_WITH_AS(loss->forward(predictions, Targets{{}, &targets}),
                       "loss heads: head \"class\": example 1 of the batch has 1.500000 in its label "
                       "column, not a class label (a whole number >= 0)",
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(loss->check_target(std::vector<float>{1.5f, 0.0f, 0.0f}),
                       "head \"class\": 1.500000 in its label column, not a class in [0, 3)", InvalidArgument);
  CHECK_THROWS_WITH_AS(loss->check_target(std::vector<float>{3.0f, 0.0f, 0.0f}),
                       "head \"class\": 3.000000 in its label column, not a class in [0, 3)", InvalidArgument);
  CHECK_NOTHROW(loss->check_target(std::vector<float>{2.0f, -3.0f, 1e6f}));
  std::vector<Head> sigmoid_head;
  sigmoid_head.push_back({.name = "tags", .outputs = 2, .targets = 2, .loss = std::make_unique<SigmoidCrossEntropyLoss>()});
  const HeadsLoss tags(std::move(sigmoid_head));
  CHECK_THROWS_WITH_AS(tags.check_target(std::vector<float>{1.0f, 2.0f}), doctest::Contains("head \"tags\": "),
                       InvalidArgument);
  targets.data()[3] = 7.0f;  // a class the head has no logit for
  CHECK_THROWS_AS(loss->forward(predictions, Targets{{}, &targets}), InvalidArgument);
}

TEST_CASE("a head of no targets: a VAE's KL term beside its reconstruction") {
  // Encoder statistics [mean (2), log-variance (2)] and a reconstruction of 3 values, joined; the
  // targets hold the reconstruction's 3 columns alone.
  std::vector<Head> heads;
  heads.push_back({.name = "values", .outputs = 3, .targets = 3, .loss = std::make_unique<MeanSquaredErrorLoss>()});
  heads.push_back({.name = "kl", .outputs = 4, .targets = 0, .loss = std::make_unique<GaussianKlLoss>(), .weight = 0.5f});
  auto loss = std::make_unique<HeadsLoss>(std::move(heads));
  CHECK_NOTHROW(loss->check({7}, TargetSpec::values({3})));
  CHECK(loss->default_metrics().size() == 1);  // values/mse; the KL term has none
  Tensor out({2, 7}, std::vector<float>{0.1f, -0.2f, 0.3f, 0.5f, -1.0f, 0.2f, -0.4f,
                                        1.0f, 0.0f, -1.0f, 0.0f, 2.0f, -3.0f, 1.5f});
  Tensor targets({2, 3}, std::vector<float>{0, 0, 0, 1, 1, 1});
  double mse = 0, kl = 0;
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) mse += std::pow(double(out[i * 7 + j]) - targets[i * 3 + j], 2) / 6;
    for (int j = 0; j < 2; ++j) {
      const double mu = out[i * 7 + 3 + j], v = out[i * 7 + 5 + j];
      kl += 0.5 * (mu * mu + std::exp(v) - 1 - v) / 2;
    }
  }
  CHECK(loss->forward(out, Targets{{}, &targets}) == doctest::Approx(mse + 0.5 * kl).epsilon(1e-6));
  CHECK(loss->head_losses()[1] == doctest::Approx(kl).epsilon(1e-6));
  CHECK(GaussianKlLoss().forward(Tensor({1, 2}, std::vector<float>{0, 0}), Targets{}) == 0.0f);  // N(0, 1) itself

  // Its gradients through a model, by central differences.
  Graph graph;
  Model model(graph);
  Node x = model.input({4});
  Node h = model.apply(dense("hidden", 8, Activation::kRelu), x);
  model.apply(concatenate("out"), {model.apply(dense("values", 3), h), model.apply(dense("stats", 4), h)});
  model.set_loss(std::move(loss));
  graph.initialize(5);
  Tensor features, labelled;
  make_data(6, 3, features, labelled);
  GradientCheckOptions options;
  options.step = 1e-3;  // ReLUs: a smaller step straddles fewer kinks
  expect_model_gradients(model, features, Targets{{}, &labelled}, {}, options);

  CHECK_THROWS_WITH_AS(GaussianKlLoss().check({3}, TargetSpec::values({0})),
                       "loss gaussian_kl: predictions [3] per example; it needs 2 L values, L means then "
                       "L log-variances",
                       InvalidArgument);
  std::vector<Head> bad;
  bad.push_back({.name = "kl", .outputs = 0, .targets = 0, .loss = std::make_unique<GaussianKlLoss>()});
  CHECK_THROWS_WITH_AS(HeadsLoss(std::move(bad)),
                       "HeadsLoss: head \"kl\" takes 0 output and 0 target columns: outputs must be >= 1, "
                       "targets >= 0",
                       InvalidArgument);
}
