// The custom layer and loss of docs/MODELS.md ("A layer and a loss of your own"), kept here in
// the same words so that the page's code compiles and checks its gradients.
#include <algorithm>
#include <cmath>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/gradient_check.h"
#include "cohort/core/nn/layer.h"
#include "cohort/core/nn/loss.h"
#include "cohort/core/nn/model.h"
#include "cohort/core/nn/ops/ops.h"
#include "cohort/core/nn/tensor.h"

namespace {

// ---- as on the page ----
// y = x * scale: one learned scale per feature of [N, features] inputs.
class Scale : public cohort::Layer {
 public:
  explicit Scale(std::string name) : name_(std::move(name)) {}
  const std::string& name() const override { return name_; }

  cohort::Shape build(cohort::Graph& graph, const cohort::Shape& input) override {
    graph_ = &graph;
    features_ = cohort::num_elements(input);
    // Keep the offset, not the Variable&: the reference lasts only until the next variable.
    scale_ = graph.get_variable(name_ + "/scale", {features_}, cohort::Initializer::constant(1))
                 .offset;
    return input;
  }

  void forward(const cohort::Tensor& x, cohort::Tensor& y, const cohort::OpContext&) override {
    // Read the parameters at every step: the optimizer (or the ps) replaces them.
    const float* scale = graph_->values().data() + scale_;
    y.resize(x.shape());  // the layer sizes its output
    for (std::int64_t i = 0; i < x.size(); ++i) y.data()[i] = x.data()[i] * scale[i % features_];
  }

  void backward(const cohort::Tensor& x, const cohort::Tensor&, const cohort::Tensor& dy,
                cohort::Tensor* dx, std::span<float> grads) override {
    // `grads` is the whole model's flat gradient: overwrite this layer's slice, at its offset.
    float* dscale = grads.data() + scale_;
    std::fill(dscale, dscale + features_, 0.0f);
    for (std::int64_t i = 0; i < x.size(); ++i) dscale[i % features_] += dy.data()[i] * x.data()[i];
    if (dx == nullptr) return;  // the first layer's input needs no gradient
    const float* scale = graph_->values().data() + scale_;
    dx->resize(x.shape());
    for (std::int64_t i = 0; i < x.size(); ++i) dx->data()[i] = dy.data()[i] * scale[i % features_];
  }

 private:
  std::string name_;
  cohort::Graph* graph_ = nullptr;
  std::int64_t features_ = 0, scale_ = 0;
};

// Log-cosh, a regression loss that is squared error near the target and absolute error far
// from it: log(cosh(prediction - target)) averaged over every entry.
class LogCosh : public cohort::Loss {
 public:
  std::string name() const override { return "log_cosh"; }

  void check(const cohort::Shape& prediction, const cohort::TargetSpec& targets) const override {
    if (targets.labels || targets.shape != prediction)
      throw cohort::InvalidArgument("loss log_cosh: predictions " + cohort::to_string(prediction) +
                                    " per example need float targets of that shape");
  }

  float forward(const cohort::Tensor& predictions, const cohort::Targets& targets) override {
    const float* y = targets.values->data();
    const std::int64_t n = predictions.size();
    grad_.resize(predictions.shape());
    double sum = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const double d = predictions.data()[i] - y[i];
      // log(cosh(d)) without cosh's overflow past |d| = 710: |d| + log1p(exp(-2|d|)) - log(2).
      sum += std::abs(d) + std::log1p(std::exp(-2 * std::abs(d))) - std::log(2.0);
      // The mean's 1/n is part of the gradient.
      grad_.data()[i] = static_cast<float>(std::tanh(d) / static_cast<double>(n));
    }
    return static_cast<float>(sum / static_cast<double>(n));
  }

  void backward(cohort::Tensor& grad) override { grad = grad_; }  // dLoss/dPrediction

 private:
  cohort::Tensor grad_;
};
// ---- end of the page's code ----

}  // namespace

TEST_CASE("the page's Scale layer passes the gradient checker") {
  cohort::Graph graph;
  Scale layer("scale");
  CHECK(layer.build(graph, {6}) == cohort::Shape{6});
  graph.initialize(1);
  auto scale = graph.values();
  for (std::size_t i = 0; i < scale.size(); ++i) scale[i] = 0.5f + 0.25f * static_cast<float>(i);
  cohort::Tensor x = cohort::random_tensor({4, 6}, /*seed=*/2);
  const cohort::GradientCheckResult result = cohort::check_layer_gradients(layer, graph, x);
  INFO(result.report);
  CHECK(result.ok());
}

TEST_CASE("a model with the page's layer and loss checks its gradients and its data") {
  cohort::Graph graph;
  // ---- as on the page ----
  cohort::Model model(graph, {6}, /*num_classes=*/2);   // 2 outputs: the targets' shape
  model.add(cohort::dense("hidden", 16))
      .add(std::make_unique<Scale>("scale"))
      .add(cohort::dense("out", 2));
  model.set_loss(std::make_unique<LogCosh>());
  model.add_metric(std::make_unique<cohort::MeanSquaredError>());   // fetched as "mse"
  // ---- end of the page's code ----
  CHECK(model.metric_names() == std::vector<std::string>{"mse"});
  graph.initialize(3);
  // Targets: a fixed linear function of the features.
  const cohort::Tensor x = cohort::random_tensor({32, 6}, /*seed=*/4);
  cohort::Tensor y({32, 2});
  for (std::int64_t n = 0; n < 32; ++n)
    for (std::int64_t j = 0; j < 2; ++j) {
      float v = 0;
      for (std::int64_t i = 0; i < 6; ++i) v += x.data()[n * 6 + i] * static_cast<float>(i - j);
      y.data()[n * 2 + j] = 0.1f * v;
    }
  const cohort::Targets targets{.labels = {}, .values = &y};
  CHECK_NOTHROW(model.check_data({6}, cohort::TargetSpec{.labels = false, .shape = {2}}));
  CHECK_THROWS_WITH_AS(model.check_data({6}, cohort::TargetSpec::classes(2)),
                       doctest::Contains("loss log_cosh: predictions [2] per example"),
                       cohort::InvalidArgument);
  const cohort::GradientCheckResult result = cohort::check_model_gradients(model, x, targets);
  INFO(result.report);
  CHECK(result.ok());
}

TEST_CASE("a layer whose forward() writes another shape than its build() declared is named") {
  // Scale that declares its input's shape but writes one feature too few.
  class Short : public Scale {
   public:
    using Scale::Scale;
    void forward(const cohort::Tensor& x, cohort::Tensor& y, const cohort::OpContext& context) override {
      Scale::forward(x, y, context);
      y.resize({x.dim(0), x.dim(1) - 1});
    }
  };
  cohort::Graph graph;
  cohort::Model model(graph, {6}, /*num_classes=*/2);
  model.add(cohort::dense("hidden", 16)).add(std::make_unique<Short>("short")).add(cohort::dense("out", 2));
  graph.initialize(3);
  CHECK_THROWS_WITH_AS(model.predict(cohort::random_tensor({4, 6}, 1)),
                       "Model: layer \"short\" wrote [4, 15] for a batch of 4, where it declared examples "
                       "of [16] (its build())",
                       cohort::InvalidArgument);
}

TEST_CASE("a layer whose backward() writes an input gradient of another shape is named") {
  // Scale whose input gradient lacks the last feature: read past its end, it made NaN.
  class ShortGradient : public Scale {
   public:
    using Scale::Scale;
    void backward(const cohort::Tensor& x, const cohort::Tensor& y, const cohort::Tensor& dy,
                  cohort::Tensor* dx, std::span<float> grads) override {
      Scale::backward(x, y, dy, dx, grads);
      if (dx != nullptr) dx->resize({x.dim(0), x.dim(1) - 1});
    }
  };
  cohort::Graph graph;
  cohort::Model model(graph, {6}, /*num_classes=*/2);
  model.add(cohort::dense("hidden", 16)).add(std::make_unique<ShortGradient>("short")).add(cohort::dense("out", 2));
  graph.initialize(3);
  std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()));
  const std::vector<std::int32_t> labels = {0, 1, 1, 0};
  CHECK_THROWS_WITH_AS(model.train_step(cohort::random_tensor({4, 6}, 1), labels, grads, {}),
                       "Model: layer \"short\" wrote an input gradient of shape [4, 15] for its "
                       "input of shape [4, 16] (its backward())",
                       cohort::InvalidArgument);
}

TEST_CASE("the model checker allows a large loss's float rounding and still finds a wrong gradient") {
  // A loss in the hundreds (a VAE's sum over an image's pixels, or a constant term) with modest
  // gradients: float differences at a step of 1e-2 resolve them to a few 1e-3 only, and a right
  // gradient failed the check. An error far above that rounding is still found.
  class LargeLoss : public cohort::Loss {
   public:
    explicit LargeLoss(float slope) : slope_(slope) {}
    std::string name() const override { return "large"; }
    void check(const cohort::Shape& p, const cohort::TargetSpec& t) const override { mse_.check(p, t); }
    float forward(const cohort::Tensor& p, const cohort::Targets& t) override { return 600 + mse_.forward(p, t); }
    void backward(cohort::Tensor& grad) override {
      mse_.backward(grad);
      for (float& g : grad.span()) g *= slope_;  // 1: right; else off by that factor
    }

   private:
    mutable cohort::MeanSquaredErrorLoss mse_;
    float slope_;
  };
  for (const float slope : {1.0f, 2.0f}) {
    CAPTURE(slope);
    cohort::Graph graph;
    cohort::Model model(graph);
    model.apply(cohort::dense("d", 4), model.input({6}));
    model.set_loss(std::make_unique<LargeLoss>(slope));
    graph.initialize(3);
    const cohort::Tensor x = cohort::random_tensor({4, 6}, 4), y = cohort::random_tensor({4, 4}, 5);
    const cohort::Targets targets{.labels = {}, .values = &y};
    const cohort::GradientCheckResult result = cohort::check_model_gradients(model, x, targets);
    INFO(result.report);
    CHECK(result.rounding > 1e-3);
    CHECK(result.ok() == (slope == 1.0f));
  }
}

TEST_CASE("the page's log-cosh loss is log(cosh(d)) and stays finite far from the target") {
  LogCosh loss;
  const cohort::Tensor near({1, 2}, std::vector<float>{0.5f, -2.0f}), far({1, 2}, std::vector<float>{1000.0f, -3000.0f});
  const cohort::Tensor zeros({1, 2}, std::vector<float>{0.0f, 0.0f});
  const cohort::Targets targets{.labels = {}, .values = &zeros};
  CHECK(loss.forward(near, targets) == doctest::Approx((std::log(std::cosh(0.5)) + std::log(std::cosh(2.0))) / 2));
  // cosh(1000) overflows a double; the loss is 1000 - log 2 and 3000 - log 2, averaged.
  CHECK(loss.forward(far, targets) == doctest::Approx(2000.0 - std::log(2.0)));
}
