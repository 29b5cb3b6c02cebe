// A training step of one's own: Model::forward and Model::backward chain models (a generator
// into a discriminator) and give the gradient with respect to an input. The chain must give
// what one model made of both gives, the input gradient what finite differences give, and a
// small GAN must learn the distribution it is shown.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/loss.h"
#include "cohort/core/nn/model.h"
#include "cohort/core/nn/optimizer.h"
#include "cohort/core/nn/ops/ops.h"

using namespace cohort;

namespace {

// The generator's layers, z [4] to a sample [3], applied to `x`.
Node generator_layers(Model& model, Node x) {
  x = model.apply(dense("g1", 8, "tanh"), x);
  return model.apply(dense("g2", 3), x);
}

// The discriminator's layers, a sample [3] to a logit [1], applied to `x`.
Node discriminator_layers(Model& model, Node x) {
  x = model.apply(dense("d1", 6, "tanh"), x);
  return model.apply(dense("d2", 1), x);
}

Tensor random_tensor(Shape shape, std::uint32_t seed) {
  Tensor t(std::move(shape));
  std::mt19937 random(seed);
  std::normal_distribution<float> normal;
  for (std::int64_t i = 0; i < t.size(); ++i) t[i] = normal(random);
  return t;
}

Tensor filled(Shape shape, float value) {
  Tensor t(std::move(shape));
  std::fill(t.data(), t.data() + t.size(), value);
  return t;
}

std::pair<double, double> mean_and_deviation(const Tensor& t) {
  double sum = 0, squares = 0;
  for (std::int64_t i = 0; i < t.size(); ++i) sum += t[i];
  const double mean = sum / static_cast<double>(t.size());
  for (std::int64_t i = 0; i < t.size(); ++i) squares += (t[i] - mean) * (t[i] - mean);
  return {mean, std::sqrt(squares / static_cast<double>(t.size()))};
}

}  // namespace

TEST_CASE("forward and backward chained through two models give the one model's gradients") {
  Graph graph;
  Model whole(graph);  // generator and discriminator as one model: the reference
  discriminator_layers(whole, generator_layers(whole, whole.input({4})));
  whole.set_loss(std::make_unique<SigmoidCrossEntropyLoss>());
  Model generator(graph);  // the same layers' names: the same variables
  generator_layers(generator, generator.input({4}));
  Model discriminator(graph);
  discriminator_layers(discriminator, discriminator.input({3}));
  graph.initialize(7);

  const Tensor z = random_tensor({5, 4}, 1);
  const Tensor ones = filled({5, 1}, 1.0f);
  const Targets targets{{}, &ones};
  const auto n = static_cast<std::size_t>(graph.num_parameters());
  std::vector<float> expected(n), from_discriminator(n, 9.0f), from_generator(n, 9.0f);
  const float expected_loss = whole.train_step(z, targets, expected, {.seed = 3}).loss;

  const Tensor fake = generator.forward(z, {.seed = 3});
  const Tensor& logits = discriminator.forward(fake, {.seed = 3});
  SigmoidCrossEntropyLoss loss;
  CHECK(loss.forward(logits, targets) == doctest::Approx(expected_loss).epsilon(1e-6));
  Tensor grad_logits, grad_fake;
  loss.backward(grad_logits);
  Tensor* input_grads[] = {&grad_fake};
  discriminator.backward(grad_logits, from_discriminator, input_grads);
  CHECK(grad_fake.shape() == fake.shape());
  generator.backward(grad_fake, from_generator);

  // Each model's gradients cover its own variables, zeros elsewhere; together, the whole's.
  const double scale = *std::max_element(expected.begin(), expected.end(),
                                         [](float a, float b) { return std::fabs(a) < std::fabs(b); });
  REQUIRE(std::fabs(scale) > 1e-4);
  for (const Variable& v : graph.variables()) {
    CAPTURE(v.name);
    const bool in_generator = v.name.rfind("g", 0) == 0;
    for (std::int64_t i = v.offset; i < v.offset + v.size; ++i) {
      const auto k = static_cast<std::size_t>(i);
      CHECK((in_generator ? from_discriminator[k] : from_generator[k]) == 0.0f);
      CHECK(std::fabs(from_discriminator[k] + from_generator[k] - expected[k]) <=
            1e-5 * std::fabs(scale));
    }
  }
}

TEST_CASE("backward's input gradient is the loss's derivative with respect to the input") {
  Graph graph;
  Model model(graph);
  discriminator_layers(model, model.input({3}));
  graph.initialize(11);
  Tensor x = random_tensor({4, 3}, 2);
  const Tensor ones = filled({4, 1}, 1.0f);
  const Targets targets{{}, &ones};
  SigmoidCrossEntropyLoss loss;
  const auto loss_at = [&](const Tensor& input) {
    return static_cast<double>(loss.forward(model.forward(input, {}), targets));
  };
  loss_at(x);
  Tensor grad_output, grad_x;
  loss.backward(grad_output);
  std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()));
  Tensor* input_grads[] = {&grad_x};
  model.backward(grad_output, grads, input_grads);
  REQUIRE(grad_x.shape() == x.shape());
  for (std::int64_t i = 0; i < x.size(); ++i) {
    CAPTURE(i);
    const float kept = x[i];
    const float h = 1e-2f;
    x[i] = kept + h;
    const double up = loss_at(x);
    x[i] = kept - h;
    const double down = loss_at(x);
    x[i] = kept;
    CHECK(grad_x[i] == doctest::Approx((up - down) / (2 * h)).epsilon(2e-3).scale(1e-3));
  }
}

TEST_CASE("backward refuses what does not follow a forward pass or does not fit") {
  Graph graph;
  Model model(graph);
  discriminator_layers(model, model.input({3}));
  model.set_loss(std::make_unique<SigmoidCrossEntropyLoss>());
  graph.initialize(1);
  const Tensor x = random_tensor({2, 3}, 3);
  std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()));
  const Tensor grad = filled({2, 1}, 1.0f);
  CHECK_THROWS_WITH_AS(model.backward(grad, grads), doctest::Contains("no forward()"),
                       InvalidArgument);
  model.forward(x, {});
  CHECK_THROWS_WITH_AS(model.backward(filled({2, 2}, 1.0f), grads),
                       doctest::Contains("a gradient of shape [2, 2] for an output of shape [2, 1]"),
                       InvalidArgument);
  std::vector<float> short_grads(grads.size() - 1);
  CHECK_THROWS_WITH_AS(model.backward(grad, short_grads), doctest::Contains("gradient slots"),
                       InvalidArgument);
  Tensor a, b;
  Tensor* two[] = {&a, &b};
  CHECK_THROWS_WITH_AS(model.backward(grad, grads, two),
                       doctest::Contains("2 input gradients for a model of 1 inputs"), InvalidArgument);
  CHECK_NOTHROW(model.backward(grad, grads));
  model.predict(x);  // a pass backward cannot take the gradient of
  CHECK_THROWS_WITH_AS(model.backward(grad, grads), doctest::Contains("no forward()"),
                       InvalidArgument);
  const Tensor ones = filled({2, 1}, 1.0f);
  model.train_step(x, Targets{{}, &ones}, grads, {});
  CHECK_THROWS_AS(model.backward(grad, grads), InvalidArgument);
  model.forward(x, {});
  model.add(relu("more"));  // the graph changed: its last pass is not the model's
  CHECK_THROWS_WITH_AS(model.backward(grad, grads), doctest::Contains("no forward()"),
                       InvalidArgument);
}

TEST_CASE("backward gives zeros for an input the output does not depend on") {
  Graph graph;
  Model model(graph);
  Node used = model.input({3}, "used");
  model.input({2}, "unused");
  model.set_output(discriminator_layers(model, used));
  graph.initialize(1);
  const Tensor a = random_tensor({4, 3}, 1), b = random_tensor({4, 2}, 2);
  const Tensor* inputs[] = {&a, &b};
  model.forward(inputs, {});
  std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()));
  Tensor grad_a, grad_b = filled({7}, 42.0f);
  Tensor* input_grads[] = {&grad_a, &grad_b};
  model.backward(filled({4, 1}, 1.0f), grads, input_grads);
  CHECK(grad_a.shape() == a.shape());
  REQUIRE(grad_b.shape() == b.shape());
  CHECK(std::all_of(grad_b.data(), grad_b.data() + grad_b.size(), [](float v) { return v == 0.0f; }));
}

TEST_CASE("a GAN learns a normal distribution: steps of its own through forward and backward") {
  // Goodfellow et al.'s GAN with the non-saturating generator loss, on N(3, 0.5): noise [1] to
  // a sample [1], each model in a graph of its own with its own Adam.
  Graph g_graph, d_graph;
  Model generator(g_graph);
  Node x = generator.input({1});
  x = generator.apply(dense("g1", 16, "tanh"), x);
  generator.apply(dense("g2", 1), x);
  Model discriminator(d_graph);
  Node y = discriminator.input({1});
  y = discriminator.apply(dense("d1", 32, "tanh"), y);
  discriminator.apply(dense("d2", 1), y);
  discriminator.set_loss(std::make_unique<SigmoidCrossEntropyLoss>());
  g_graph.initialize(1);
  d_graph.initialize(2);
  OptimizerOptions options;
  options.name = "adam";
  options.beta1 = 0.5;
  options.learning_rate.base = 0.001;
  auto g_optimizer = Optimizer::create(options);
  auto d_optimizer = Optimizer::create(options);
  std::vector<float> g_grads(static_cast<std::size_t>(g_graph.num_parameters()));
  std::vector<float> d_grads(static_cast<std::size_t>(d_graph.num_parameters()));

  const std::int64_t batch = 128;
  std::mt19937 random(5);
  std::normal_distribution<float> normal;
  Tensor z({batch, 1}), both({2 * batch, 1}), grad_fake;
  const Tensor real_fake_labels = [&] {
    Tensor t = filled({2 * batch, 1}, 0.0f);
    std::fill(t.data(), t.data() + batch, 1.0f);
    return t;
  }();
  const Tensor all_real = filled({batch, 1}, 1.0f);
  SigmoidCrossEntropyLoss g_loss;
  Tensor grad_logits;
  Tensor* input_grads[] = {&grad_fake};
  double measured_mean = 0, measured_deviation = 0;
  int measurements = 0;
  Tensor noise({1024, 1});
  for (int step = 0; step < 4000; ++step) {
    if (step >= 2000 && step % 100 == 0) {
      for (std::int64_t i = 0; i < noise.size(); ++i) noise[i] = normal(random);
      const auto [mean, deviation] = mean_and_deviation(generator.predict(noise));
      measured_mean += mean;
      measured_deviation += deviation;
      ++measurements;
    }
    for (std::int64_t i = 0; i < batch; ++i) {
      z[i] = normal(random);
      both[i] = 3.0f + 0.5f * normal(random);
    }
    // The discriminator: real samples as 1, the generator's as 0.
    const Tensor& fake = generator.forward(z, {.seed = static_cast<std::uint64_t>(step)});
    std::copy(fake.data(), fake.data() + batch, both.data() + batch);
    discriminator.train_step(both, Targets{{}, &real_fake_labels}, d_grads, {});
    d_optimizer->apply(d_graph.values(), d_grads, step);
    // The generator (its last pass still that batch's): its samples as the discriminator would
    // call real, the gradient through the discriminator's input (its own, d_grads, unused).
    const Tensor& logits = discriminator.forward(fake, {});
    g_loss.forward(logits, Targets{{}, &all_real});
    g_loss.backward(grad_logits);
    discriminator.backward(grad_logits, d_grads, input_grads);
    generator.backward(grad_fake, g_grads);
    g_optimizer->apply(g_graph.values(), g_grads, step);
  }
  // A GAN's samples wander about the data's distribution rather than settle on it: measured
  // every 100 steps over the last half of training, and averaged.
  const double mean = measured_mean / measurements, deviation = measured_deviation / measurements;
  MESSAGE("generated samples: mean " << mean << ", standard deviation " << deviation
                                     << " (averages of " << measurements << " measurements)");
  CHECK(std::fabs(mean - 3.0) < 0.15);
  CHECK(deviation > 0.25);
  CHECK(deviation < 0.75);
}
