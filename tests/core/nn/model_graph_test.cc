// Models as graphs of layers: fan-out and fan-in, residual blocks, several inputs, composite
// layers, layer state, dead branches, and the refusal of data that does not fit.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/composite.h"
#include "cohort/core/nn/data/dataset.h"
#include "cohort/core/nn/evaluation.h"
#include "cohort/core/nn/model.h"
#include "cohort/core/nn/models.h"
#include "cohort/core/nn/optimizer.h"
#include "cohort/core/nn/ops/ops.h"
#include "core/nn/gradient_check.h"

using namespace cohort;
using cohort::testing::expect_model_gradients;

namespace {

std::vector<float> copy(std::span<const float> s) { return {s.begin(), s.end()}; }

// A residual block written with the functional API: conv, BN, ReLU, conv, BN, + x, ReLU.
Node residual(Model& model, Node x, const std::string& name, std::int64_t filters) {
  Node y = model.apply(conv2d(name + "/conv1", filters, 3), x);
  y = model.apply(batch_norm(name + "/bn1"), y);
  y = model.apply(relu(name + "/relu1"), y);
  y = model.apply(conv2d(name + "/conv2", filters, 3), y);
  y = model.apply(batch_norm(name + "/bn2"), y);
  y = model.apply(add(name + "/add"), {y, x});
  return model.apply(relu(name + "/relu2"), y);
}

// The same block as a composite layer: no backward written.
class ResidualBlock : public CompositeLayer {
 public:
  ResidualBlock(std::string name, std::int64_t filters)
      : CompositeLayer(std::move(name)), filters_(filters) {}

 protected:
  Node compose(Node x) override {
    Node y = apply(conv2d(scoped("conv1"), filters_, 3), x);
    y = apply(batch_norm(scoped("bn1")), y);
    y = apply(relu(scoped("relu1")), y);
    y = apply(conv2d(scoped("conv2"), filters_, 3), y);
    y = apply(batch_norm(scoped("bn2")), y);
    y = apply(add(scoped("add")), {y, x});
    return apply(relu(scoped("relu2")), y);
  }

 private:
  std::int64_t filters_;
};

}  // namespace

TEST_CASE("fan-out and fan-in: gradients are summed where a node feeds two layers") {
  Graph graph;
  Model model(graph);
  Node x = model.input({6});
  Node h = model.apply(dense("h", 5, Activation::kRelu), x);
  Node a = model.apply(dense("a", 4), h);             // h fans out to a, b and c
  Node b = model.apply(dense("b", 4), h);
  Node c = model.apply(concatenate("c"), {h, h});      // ... and twice into one layer
  Node sum = model.apply(add("sum"), {a, b});
  Node joined = model.apply(concatenate("joined"), {sum, c});
  model.apply(dense("logits", 3), joined);
  graph.initialize(3);
  Tensor features = random_tensor({4, 6}, 1);
  const std::vector<std::int32_t> labels = {0, 2, 1, 2};
  GradientCheckOptions options;
  options.step = 1e-3;
  expect_model_gradients(model, features, labels, {}, options);
  CHECK(model.fetch("joined")->shape() == Shape{4, 14});
}

TEST_CASE("a residual block's gradients match finite differences") {
  Graph graph;
  Model model(graph);
  Node x = model.input({5, 5, 3});
  x = model.apply(conv2d("stem", 4, 3), x);
  x = residual(model, x, "block", 4);
  x = model.apply(global_avg_pool2d("pool"), x);
  model.apply(dense("logits", 3), x);
  graph.initialize(7);
  Tensor images = random_tensor({4, 5, 5, 3}, 2);
  GradientCheckOptions options;
  options.step = 1e-3;
  options.threshold = 3e-2;
  options.max_per_tensor = 20;
  // ReLU kinks make a few quotients noisy at any step; convolution biases feeding a batch norm
  // have exactly zero gradient (the norm removes any shift), which the check reports as vacuous.
  options.skip_variables = {"/conv1/bias", "/conv2/bias", "stem/bias"};
  expect_model_gradients(model, images, std::vector<std::int32_t>{0, 1, 2, 1}, {}, options);
}

TEST_CASE("a composite layer equals the same layers wired in the model, and needs no backward") {
  Graph graph;
  Model functional(graph);
  Node x = functional.input({5, 5, 4});
  x = residual(functional, x, "block", 4);
  x = functional.apply(global_avg_pool2d("pool"), x);
  functional.apply(dense("logits", 3), x);
  // The composite names its sublayers "block/...": the same variables, so a tower of the other.
  Model composite(graph, {5, 5, 4}, 3);
  composite.add(std::make_unique<ResidualBlock>("block", 4))
      .add(global_avg_pool2d("pool"))
      .add(dense("logits", 3));
  CHECK(composite.layers().size() == 3);
  graph.initialize(9);
  Tensor images = random_tensor({3, 5, 5, 4}, 3);
  const std::vector<std::int32_t> labels = {2, 0, 1};
  std::vector<float> g1(static_cast<std::size_t>(graph.num_parameters()));
  std::vector<float> g2(g1.size());
  const StepMetrics m1 = functional.train_step(images, labels, g1, {});
  const StepMetrics m2 = composite.train_step(images, labels, g2, {});
  CHECK(m1.loss == m2.loss);
  CHECK(copy(functional.fetch("logits")->span()) == copy(composite.fetch("logits")->span()));
  CHECK(g1 == g2);
  GradientCheckOptions options;
  options.step = 1e-3;
  options.threshold = 3e-2;
  options.max_per_tensor = 15;
  options.skip_variables = {"/conv1/bias", "/conv2/bias"};
  expect_model_gradients(composite, images, labels, {}, options);
}

TEST_CASE("a model of two inputs takes a batch for each") {
  Graph graph;
  Model model(graph);
  Node a = model.input({3}, "a");
  Node b = model.input({2}, "b");
  Node joined = model.apply(concatenate("joined"), {a, b});
  model.apply(dense("logits", 2), joined);
  graph.initialize(1);
  Tensor xa = random_tensor({4, 3}, 1), xb = random_tensor({4, 2}, 2);
  const Tensor* inputs[] = {&xa, &xb};
  const std::vector<std::int32_t> labels = {0, 1, 1, 0};
  std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()));
  CHECK(std::isfinite(model.train_step(inputs, Targets{labels, nullptr}, grads, {}).loss));
  CHECK(model.fetch("b")->data() == xb.data());
  Tensor short_b = random_tensor({3, 2}, 3);
  const Tensor* mismatched[] = {&xa, &short_b};
  CHECK_THROWS_AS(model.train_step(mismatched, Targets{labels, nullptr}, grads, {}),
                  InvalidArgument);
  CHECK_THROWS_AS(model.train_step(xa, labels, grads, {}), InvalidArgument);  // one batch for two
  CHECK_THROWS_AS(model.apply(add("bad"), {a, b}), InvalidArgument);         // [3] + [2]
  CHECK_THROWS_AS(model.apply(add("alone"), a), InvalidArgument);            // needs two
  CHECK_THROWS_AS(model.apply(relu("two"), {a, b}), InvalidArgument);        // takes one
}

TEST_CASE("a layer whose output does not reach the model's output gets zero gradients") {
  Graph graph;
  Model model(graph);
  Node x = model.input({4});
  model.apply(dense("dead", 3), x);
  Node live = model.apply(dense("live", 2), x);
  model.set_output(live);
  graph.initialize(2);
  std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()), 7.0f);
  Tensor features = random_tensor({3, 4}, 4);
  model.train_step(features, std::vector<std::int32_t>{0, 1, 1}, grads, {});
  for (const Variable& v : graph.variables())
    for (std::int64_t i = 0; i < v.size; ++i) {
      CAPTURE(v.name);
      const float g = grads[static_cast<std::size_t>(v.offset + i)];
      if (v.name.rfind("dead/", 0) == 0) CHECK(g == 0.0f);
      else CHECK(g != 7.0f);
    }
  CHECK(model.fetch("dead") == nullptr);  // never computed
}

namespace {

// Keeps what each ready(begin) reported: begin and the gradients [begin, end) at that moment.
class Recorder : public GradientListener {
 public:
  explicit Recorder(std::span<const float> grads) : grads_(grads) {}
  void ready(std::int64_t begin) override {
    begins.push_back(begin);
    snapshots.emplace_back(grads_.begin() + begin, grads_.end());
  }
  std::vector<std::int64_t> begins;
  std::vector<std::vector<float>> snapshots;

 private:
  std::span<const float> grads_;
};

}  // namespace

TEST_CASE("the backward pass reports gradients final from the last layer down, and they are") {
  Graph graph;
  Model model(graph);
  Node x = model.input({5, 5, 3});
  x = model.apply(conv2d("stem", 4, 3), x);
  x = residual(model, x, "block", 4);
  Node pooled = model.apply(global_avg_pool2d("pool"), x);
  model.apply(dense("unused", 2), pooled);  // owns variables, reaches no output
  Node logits = model.apply(dense("logits", 3), pooled);
  model.set_output(logits);
  graph.initialize(7);
  Tensor images = random_tensor({4, 5, 5, 3}, 2);
  const std::vector<std::int32_t> labels = {0, 1, 2, 1};
  // Every slot starts as a value no gradient takes: a snapshot that still holds it, or that a
  // later layer changed, was reported too early.
  std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()), 1234.5f);
  Recorder recorder(grads);
  OpContext context;
  context.gradients_ready = &recorder;
  model.train_step(images, labels, grads, context);
  REQUIRE(recorder.begins.size() > 3);  // the dense layers, the block's layers, the stem
  CHECK(recorder.begins.back() == 0);
  for (std::size_t i = 1; i < recorder.begins.size(); ++i)
    CHECK(recorder.begins[i] < recorder.begins[i - 1]);
  for (std::size_t i = 0; i < recorder.begins.size(); ++i) {
    CAPTURE(recorder.begins[i]);
    const std::vector<float> final(grads.begin() + recorder.begins[i], grads.end());
    CHECK(recorder.snapshots[i] == final);
  }
  // The same step without a listener gives the same gradients.
  std::vector<float> again(grads.size(), 1234.5f);
  model.train_step(images, labels, again, {});
  CHECK(again == grads);
}

TEST_CASE("batch norm state lives beside the parameters, out of the gradients") {
  Graph graph;
  Model model = resnet(graph, {.widths = {4, 8}, .blocks_per_stage = 1});
  const Variable* mean = graph.find("stem/bn/moving_mean");
  REQUIRE(mean != nullptr);
  CHECK_FALSE(mean->trainable);
  CHECK(graph.find("stem/bn/gamma")->trainable);
  std::int64_t trainable = 0, state = 0;
  for (const Variable& v : graph.variables()) (v.trainable ? trainable : state) += v.size;
  CHECK(graph.num_parameters() == trainable);
  CHECK(graph.num_state() == state);
  CHECK(state > 0);
  graph.initialize(1);
  std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()));
  Tensor images = random_tensor({4, 28, 28, 1}, 5, 0.0f, 1.0f);
  const std::vector<std::int32_t> labels = {1, 2, 3, 4};
  const std::vector<float> before = copy(graph.state());
  OpContext frozen;
  frozen.update_state = false;  // a second tower: computes, leaves the state alone
  model.train_step(images, labels, grads, frozen);
  CHECK(copy(graph.state()) == before);
  model.train_step(images, labels, grads, {});
  CHECK(copy(graph.state()) != before);
  // Evaluation normalises with the moving statistics and does not move them.
  const std::vector<float> moved = copy(graph.state());
  model.evaluate(images, labels);
  CHECK(copy(graph.state()) == moved);
}

TEST_CASE("data that does not fit the model is refused in one line") {
  Graph graph;
  Model model = mlp(graph, {8});
  CHECK_NOTHROW(model.check_data({28, 28, 1}, TargetSpec::classes(10)));
  CHECK_THROWS_WITH_AS(model.check_data({32, 32, 3}, TargetSpec::classes(10)),
                       "the data's examples are [32, 32, 3], the model's input takes [28, 28, 1]",
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(model.check_data({28, 28, 1}, TargetSpec::values({10})),
                       doctest::Contains("loss softmax_cross_entropy does not fit the data"),
                       InvalidArgument);
  // More classes than logits: the message says where the largest label is.
  const data::Dataset twelve = data::Dataset::from_arrays(Tensor({4, 28, 28, 1}), {0, 11, 3, 11}, 12, "mine");
  CHECK_THROWS_WITH_AS(check_dataset(model, twelve),
                       doctest::Contains("mine: loss softmax_cross_entropy does not fit the data: "
                                         "predictions [10] per example, class labels in [0, 12); "
                                         "there are 12 classes but 10 logits (the largest label, "
                                         "11, first at example 1 of the examples this "
                                         "process holds)"),
                       InvalidArgument);
  // A target the loss can never take: named with the file and the example, before training.
  model.set_loss(std::make_unique<SigmoidCrossEntropyLoss>());
  Tensor targets({4, 10});
  targets[2 * 10 + 3] = 2;
  const data::Dataset masks = data::Dataset::from_arrays(Tensor({4, 28, 28, 1}), targets, "y.npy");
  CHECK_THROWS_WITH_AS(check_dataset(model, masks, /*whole=*/true),
                       "y.npy: example 2: loss sigmoid_cross_entropy: target 2 (value 3 of the example) is not "
                       "in [0, 1], a probability per logit (bytes: divide by 255)",
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(check_dataset(model, masks),
                       doctest::Contains("y.npy: example 2 of the examples this process holds: loss "),
                       InvalidArgument);
  model.set_loss(std::make_unique<MeanSquaredErrorLoss>());
  CHECK_NOTHROW(check_dataset(model, masks));
  CHECK(model.metric_names() == std::vector<std::string>{"mse"});
  CHECK_NOTHROW(model.check_data({28, 28, 1}, TargetSpec::values({10})));
  // A metric of the caller's own takes the place of the loss's default of its name, once.
  model.add_metric(std::make_unique<MeanSquaredError>());
  CHECK(model.metric_names() == std::vector<std::string>{"mse"});
  CHECK_THROWS_AS(model.add_metric(std::make_unique<MeanSquaredError>()), InvalidArgument);
}

TEST_CASE("predict gives the output evaluate computes, without targets") {
  Graph graph;
  Model model = mlp(graph, {8});
  graph.initialize(5);
  const Tensor x = random_tensor({4, 28, 28, 1}, /*seed=*/6);
  const std::vector<std::int32_t> labels = {0, 1, 2, 3};
  model.evaluate(x, labels);
  const Tensor logits = *model.fetch("logits");
  const Tensor& predicted = model.predict(x);
  CHECK(predicted.shape() == Shape{4, 10});
  CHECK(std::equal(predicted.span().begin(), predicted.span().end(), logits.span().begin()));
  CHECK_THROWS_WITH_AS(model.predict(random_tensor({4, 784}, 7)),
                       "Model: input \"input\" is given [4, 784], not a batch of examples of shape "
                       "[28, 28, 1]",
                       InvalidArgument);
}

TEST_CASE("metrics added by the caller outlive set_loss, before it or after") {
  Graph graph;
  Model model = mlp(graph, {8});
  CHECK(model.metric_names() == std::vector<std::string>{"accuracy"});
  model.add_metric(std::make_unique<TopKAccuracy>(5));
  model.set_loss(std::make_unique<SoftmaxCrossEntropyLoss>());
  CHECK(model.metric_names() == std::vector<std::string>{"top5_accuracy", "accuracy"});
  // The caller's accuracy, added before a loss whose defaults include one, is kept: no clash.
  Graph other;
  Model own = mlp(other, {8});
  own.add_metric(std::make_unique<Accuracy>());
  CHECK_NOTHROW(own.set_loss(std::make_unique<SoftmaxCrossEntropyLoss>()));
  CHECK(own.metric_names() == std::vector<std::string>{"accuracy"});
  // A regression loss drops the classifier's default accuracy, not the caller's top-5.
  model.set_loss(std::make_unique<MeanSquaredErrorLoss>());
  CHECK(model.metric_names() == std::vector<std::string>{"top5_accuracy", "mse"});
}

TEST_CASE("a regression model trains: its mean squared error falls") {
  Graph graph;
  Model model(graph);
  Node x = model.input({3});
  x = model.apply(dense("hidden", 16, Activation::kRelu), x);
  model.apply(dense("out", 2), x);
  model.set_loss(make_loss("mean_squared_error"));
  graph.initialize(4);
  Tensor features = random_tensor({64, 3}, 8);
  Tensor targets({64, 2});
  for (std::int64_t i = 0; i < 64; ++i) {  // y = (x0 - 2 x1, x1 * x2)
    targets[i * 2] = features[i * 3] - 2 * features[i * 3 + 1];
    targets[i * 2 + 1] = features[i * 3 + 1] * features[i * 3 + 2];
  }
  auto sgd = Optimizer::create({.name = "sgd", .learning_rate = {.base = 0.05}});
  std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()));
  const Targets t{{}, &targets};
  const float first = model.train_step(features, t, grads, {}).loss;
  float last = first;
  for (int step = 0; step < 300; ++step) {
    last = model.train_step(features, t, grads, {}).loss;
    sgd->apply(graph.values(), grads, step);
  }
  MESSAGE("mse " << first << " -> " << last);
  CHECK(last < 0.2f * first);
  CHECK(model.fetch("mse")->data()[0] == doctest::Approx(last));
}

namespace {

// A small encoder as a composite, for applying twice.
class Encoder : public CompositeLayer {
 public:
  explicit Encoder(std::string name) : CompositeLayer(std::move(name)) {}

 protected:
  Node compose(Node x) override {
    Node h = apply(dense(scoped("hidden"), 5, Activation::kRelu), x);
    return apply(dense(scoped("out"), 3), h);
  }
};

// A siamese model on one input of 8 features: its halves through one encoder (`twice`) or
// through two encoders "left" and "right", then |a - b| and logits.
Model siamese(Graph& graph, bool twice) {
  Model model(graph);
  Node x = model.input({8});
  Node a = model.apply(slice("first", 0, 4), x);
  Node b = model.apply(slice("second", 4, 4), x);
  a = model.apply(std::make_unique<Encoder>(twice ? "encoder" : "left"), a);
  b = model.apply(twice ? shared("encoder_again", std::make_unique<Encoder>("encoder"))
                        : std::make_unique<Encoder>("right"),
                  b);
  Node d = model.apply(subtract("difference"), {a, b});
  d = model.apply(multiply("squared"), {d, d});
  model.apply(dense("logits", 2), d);
  return model;
}

}  // namespace

TEST_CASE("a layer applied twice (shared) gets the sum of both applications' gradients") {
  Graph graph;
  Model model = siamese(graph, true);
  CHECK(graph.variables().size() == 6);  // one encoder's four, and the logits'
  graph.initialize(5);
  Tensor features = random_tensor({6, 8}, 7);
  const std::vector<std::int32_t> labels = {0, 1, 1, 0, 1, 0};
  GradientCheckOptions options;
  options.step = 1e-3;
  expect_model_gradients(model, features, labels, {}, options);
  CHECK(model.summary().find("shares encoder") != std::string::npos);
  CHECK(model.summary().find("parameters: " + std::to_string(graph.num_parameters()) + "\n") != std::string::npos);

  // Two encoders holding the same values: the shared one's gradient is the sum of theirs.
  Graph separate_graph;
  Model separate = siamese(separate_graph, false);
  separate_graph.initialize(5);
  for (const std::string side : {"left", "right"})
    for (const std::string var : {"/hidden/kernel", "/hidden/bias", "/out/kernel", "/out/bias"}) {
      const auto from = graph.values(*graph.find("encoder" + var));
      std::copy(from.begin(), from.end(), separate_graph.values(*separate_graph.find(side + var)).begin());
    }
  for (const std::string var : {"logits/kernel", "logits/bias"}) {
    const auto from = graph.values(*graph.find(var));
    std::copy(from.begin(), from.end(), separate_graph.values(*separate_graph.find(var)).begin());
  }
  std::vector<float> shared_grads(static_cast<std::size_t>(graph.num_parameters()), 9.0f);
  std::vector<float> separate_grads(static_cast<std::size_t>(separate_graph.num_parameters()), 9.0f);
  const StepMetrics m1 = model.train_step(features, labels, shared_grads, {});
  const StepMetrics m2 = separate.train_step(features, labels, separate_grads, {});
  CHECK(m1.loss == doctest::Approx(m2.loss).epsilon(1e-6));
  const auto grad_of = [](const Graph& g, const std::vector<float>& grads, const std::string& name) {
    const Variable& v = *g.find(name);
    return std::vector<float>(grads.begin() + v.offset, grads.begin() + v.offset + v.size);
  };
  for (const std::string var : {"/hidden/kernel", "/hidden/bias", "/out/kernel", "/out/bias"}) {
    CAPTURE(var);
    const std::vector<float> both = grad_of(graph, shared_grads, "encoder" + var);
    const std::vector<float> left = grad_of(separate_graph, separate_grads, "left" + var);
    const std::vector<float> right = grad_of(separate_graph, separate_grads, "right" + var);
    for (std::size_t i = 0; i < both.size(); ++i) CHECK(both[i] == doctest::Approx(left[i] + right[i]).epsilon(1e-5));
  }

  // Applied again to an input of another width, the variables do not fit.
  Graph misfit_graph;
  Model misfit(misfit_graph);
  Node x = misfit.input({8});
  misfit.apply(dense("encoder", 3), x);
  CHECK_THROWS_AS(misfit.apply(shared("again", dense("encoder", 3)), misfit.input({5}, "narrow")),
                  InvalidArgument);
  Graph other_class_graph;
  Model other_class(other_class_graph);
  Node in = other_class.input({8});
  other_class.apply(dense("encoder", 3), in);
  CHECK_THROWS_WITH_AS(other_class.apply(shared("again", std::make_unique<Encoder>("encoder")), in),
                       "layer \"again\" applies the variables of layer \"encoder\", a layer of another class",
                       InvalidArgument);
  // A misspelt name would make a second layer: refused, naming what it would have made.
  CHECK_THROWS_WITH_AS(other_class.apply(shared("again", dense("encodr", 3)), in),
                       "shared \"again\": there are no variables of a layer \"encodr\" to apply again (it "
                       "made \"encodr/kernel\"): apply the layer of that name first, or name it as that "
                       "layer is named",
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(shared("encoder", dense("encoder", 3)),
                       "shared \"encoder\": the node needs a name of its own, not the shared layer's",
                       InvalidArgument);
}

TEST_CASE("a shared dropout draws a mask of its own in each application, and summary names its class") {
  Graph graph;
  Model model(graph);
  Node x = model.input({64});
  Node a = model.apply(dropout("drop", 0.5f), x);
  Node b = model.apply(shared("drop_again", dropout("drop", 0.5f)), x);
  model.apply(concatenate("both"), {a, b});
  OpContext context;
  context.seed = 11;
  const Tensor out = model.forward(random_tensor({2, 64}, 3), context);
  int differ = 0;
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 64; ++j)
      differ += out.data()[i * 128 + j] != out.data()[i * 128 + 64 + j];
  CHECK(differ > 32);  // half the elements of each are dropped, independently
  CHECK(model.summary().find("drop_again (Dropout)") != std::string::npos);
}

TEST_CASE("a shared layer trains under in-place SGD as under the optimizer's own pass") {
  OptimizerOptions o;
  o.learning_rate.base = 0.1;
  Graph graph_a, graph_b;
  Model a = siamese(graph_a, true);
  Model b = siamese(graph_b, true);
  graph_a.initialize(3);
  graph_b.initialize(3);
  auto opt_a = Optimizer::create(o);
  auto opt_b = Optimizer::create(o);
  auto in_place = InPlaceUpdate::create(*opt_b);
  REQUIRE(in_place != nullptr);
  const std::vector<std::int32_t> labels = {0, 1, 1, 0, 1, 0};
  std::vector<float> grads_a(static_cast<std::size_t>(graph_a.num_parameters()));
  std::vector<float> grads_b(grads_a.size());
  for (std::int64_t step = 0; step < 3; ++step) {
    const Tensor x = random_tensor({6, 8}, 20 + static_cast<std::uint64_t>(step));
    a.train_step(x, labels, grads_a, {});
    opt_a->apply(graph_a.values(), grads_a, step);
    OpContext context;
    context.update_in_place = in_place.get();
    in_place->begin(step, grads_b.size());
    b.train_step(x, labels, grads_b, context);
    in_place->finish(graph_b.values(), grads_b);
  }
  for (std::size_t i = 0; i < grads_a.size(); ++i)
    CHECK(graph_a.values()[i] == doctest::Approx(graph_b.values()[i]).epsilon(1e-5));
}

TEST_CASE("a layer owns the variables of its name, not those of a longer name under it") {
  Graph graph;
  Model model(graph);
  Node x = model.input({4});
  Node p = model.apply(dense("p", 3), x);
  model.apply(dense("p/aux", 2), p);  // a head off the path to the output
  model.set_output(model.apply(dense("logits", 2), p));
  graph.initialize(1);
  std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()), 123.0f);
  model.train_step(random_tensor({3, 4}, 2), std::vector<std::int32_t>{0, 1, 1}, grads, {});
  for (const Variable& v : graph.variables())
    for (std::int64_t i = 0; i < v.size; ++i) {
      CAPTURE(v.name);
      const float g = grads[static_cast<std::size_t>(v.offset + i)];
      if (v.name.rfind("p/aux/", 0) == 0) CHECK(g == 0.0f);
      else CHECK(g != 123.0f);
    }
  CHECK(model.summary().find("parameters: " + std::to_string(graph.num_parameters()) + "\n") != std::string::npos);

  // The same beside a composite: "encoder/head" is not the composite "encoder"'s to zero.
  Graph graph2;
  Model beside(graph2);
  Node in = beside.input({4});
  Node e = beside.apply(std::make_unique<Encoder>("encoder"), in);
  beside.apply(dense("encoder/head", 2), e);
  graph2.initialize(1);
  std::vector<float> grads2(static_cast<std::size_t>(graph2.num_parameters()), 123.0f);
  beside.train_step(random_tensor({3, 4}, 2), std::vector<std::int32_t>{0, 1, 1}, grads2, {});
  const Variable& head = *graph2.find("encoder/head/kernel");
  bool any = false;
  for (std::int64_t i = 0; i < head.size; ++i) {
    CHECK(grads2[static_cast<std::size_t>(head.offset + i)] != 123.0f);
    any = any || grads2[static_cast<std::size_t>(head.offset + i)] != 0.0f;
  }
  CHECK(any);
}

namespace {

// A composite whose sublayer is not named under it: its variables would be nobody's.
class Unscoped : public CompositeLayer {
 public:
  explicit Unscoped(std::string name) : CompositeLayer(std::move(name)) {}

 protected:
  Node compose(Node x) override { return apply(dense("enc", 3), x); }
};

// A layer that names its variable outside its own name.
class Stray : public Layer {
 public:
  const std::string& name() const override { return name_; }
  Shape build(Graph& graph, const Shape& input) {
    graph.get_variable("elsewhere/kernel", {input[0]}, Initializer::zeros());
    return input;
  }
  void forward(const Tensor& input, Tensor& output, const OpContext&) override { output = input; }
  void backward(const Tensor&, const Tensor&, const Tensor& grad_output, Tensor* grad_input,
                std::span<float>) override {
    if (grad_input != nullptr) *grad_input = grad_output;
  }

 private:
  std::string name_ = "stray";
};

}  // namespace

TEST_CASE("nodes of another model, and variables outside a layer's name, are refused") {
  Graph graph;
  Model one(graph), other(graph);
  Node x = one.input({4});
  Node y = other.input({4});
  other.apply(dense("first", 4), y);
  Node deeper = other.apply(dense("second", 4), y);
  CHECK_THROWS_WITH_AS(one.apply(dense("a", 2), y), "layer \"a\": node 0 is a node of another model",
                       InvalidArgument);
  CHECK_THROWS_AS(one.apply(dense("b", 2), deeper), InvalidArgument);
  CHECK_THROWS_AS(one.set_output(deeper), InvalidArgument);
  CHECK_THROWS_WITH_AS(one.apply(dense("c", 2), Node{}), "layer \"c\": node -1 is not a node of this model",
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(one.apply(std::make_unique<Unscoped>("block"), x),
                       "CompositeLayer \"block\": its layer \"enc\" must be named \"block/...\" "
                       "(scoped(\"...\")), so that its variables are the composite's",
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(one.apply(std::make_unique<Stray>(), x),
                       "layer \"stray\" made the variable \"elsewhere/kernel\": a layer's variables "
                       "must be named \"stray/...\"",
                       InvalidArgument);
  CHECK(one.apply(dense("d", 2), x).valid());
}
