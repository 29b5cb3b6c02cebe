#include "cohort/core/base/error.h"
#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/moving_average.h"
#include "cohort/core/nn/optimizer.h"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <span>
#include <stdexcept>
#include <vector>

using cohort::LearningRateSchedule;
using cohort::Optimizer;
using cohort::OptimizerOptions;

namespace {

OptimizerOptions options(const std::string& name, double lr) {
  OptimizerOptions o;
  o.name = name;
  o.learning_rate.base = lr;
  return o;
}

}  // namespace

TEST_CASE("sgd: var -= lr * g") {
  auto sgd = Optimizer::create(options("sgd", 0.5));
  std::vector<float> values{1.0f, -2.0f, 3.0f};
  const std::vector<float> grads{0.5f, 1.0f, -4.0f};
  sgd->apply(values, grads, 0);
  CHECK(values[0] == doctest::Approx(0.75));
  CHECK(values[1] == doctest::Approx(-2.5));
  CHECK(values[2] == doctest::Approx(5.0));
}

TEST_CASE("a learning-rate scale multiplies the schedule's rate, in whole and piecewise updates") {
  OptimizerOptions o = options("adam", 0.01);
  o.learning_rate.kind = LearningRateSchedule::Kind::kCosine;
  o.learning_rate.decay_steps = 10;
  auto scaled = Optimizer::create(o);
  auto plain = Optimizer::create(options("adam", 0.005));
  CHECK(scaled->learning_rate_scale() == 1.0);
  scaled->set_learning_rate_scale(0.25);
  CHECK(scaled->learning_rate(4) == doctest::Approx(0.25 * o.learning_rate.at(4)));
  // A scale of 0.5 on 0.01 moves as far as 0.005 does (0.01 / 2 is 0.005's double exactly).
  auto half = Optimizer::create(options("adam", 0.01));
  half->set_learning_rate_scale(0.5);
  const std::vector<float> grads{0.5f, -1.0f, 2.0f, 0.25f};
  std::vector<float> a{1, 2, 3, 4}, b = a, c = a;
  half->apply(a, grads, 0);
  plain->apply(b, grads, 0);
  CHECK(a == b);
  CHECK(a != std::vector<float>{1, 2, 3, 4});
  auto pieces = Optimizer::create(options("adam", 0.01));
  pieces->set_learning_rate_scale(0.5);
  pieces->begin_pieces(0, c.size());
  pieces->apply_piece(2, std::span<float>(c).subspan(2), std::span<const float>(grads).subspan(2));
  pieces->apply_piece(0, std::span<float>(c).first(2), std::span<const float>(grads).first(2));
  CHECK(c == b);
  for (const double bad : {0.0, -0.5, 1.5, std::numeric_limits<double>::quiet_NaN()})
    CHECK_THROWS_AS(scaled->set_learning_rate_scale(bad), cohort::InvalidArgument);
  CHECK(scaled->learning_rate_scale() == 0.25);
}

TEST_CASE("momentum follows TensorFlow's accumulator, plain and Nesterov") {
  auto o = options("momentum", 0.1);
  o.momentum = 0.9;
  auto momentum = Optimizer::create(o);
  std::vector<float> v{1.0f};
  momentum->apply(v, std::vector<float>{1.0f}, 0);  // accum 1    -> v = 1 - 0.1
  CHECK(v[0] == doctest::Approx(0.9));
  momentum->apply(v, std::vector<float>{1.0f}, 1);  // accum 1.9  -> v = 0.9 - 0.19
  CHECK(v[0] == doctest::Approx(0.71));

  o.nesterov = true;
  auto nesterov = Optimizer::create(o);
  std::vector<float> w{1.0f};
  nesterov->apply(w, std::vector<float>{1.0f}, 0);  // accum 1: w -= 0.1 * (1 + 0.9 * 1)
  CHECK(w[0] == doctest::Approx(1.0 - 0.19));
  nesterov->apply(w, std::vector<float>{1.0f}, 1);  // accum 1.9: w -= 0.1 * (1 + 0.9 * 1.9)
  CHECK(w[0] == doctest::Approx(0.81 - 0.271));
}

TEST_CASE("adam's first steps match the bias-corrected formula") {
  auto o = options("adam", 0.001);
  auto adam = Optimizer::create(o);
  std::vector<float> v{0.5f};
  adam->apply(v, std::vector<float>{2.0f}, 0);
  // t=1: m = 0.2, v = 0.004; lr_t = 0.001 * sqrt(0.001) / 0.1; step = lr_t * m / (sqrt(v) + eps)
  const double lr1 = 0.001 * std::sqrt(1 - 0.999) / (1 - 0.9);
  const double step1 = lr1 * 0.2 / (std::sqrt(0.004) + 1e-8);
  CHECK(v[0] == doctest::Approx(0.5 - step1).epsilon(1e-5));
  adam->apply(v, std::vector<float>{-1.0f}, 1);
  const double m2 = 0.9 * 0.2 + 0.1 * -1.0, v2 = 0.999 * 0.004 + 0.001 * 1.0;
  const double lr2 = 0.001 * std::sqrt(1 - 0.999 * 0.999) / (1 - 0.81);
  CHECK(v[0] == doctest::Approx(0.5 - step1 - lr2 * m2 / (std::sqrt(v2) + 1e-8)).epsilon(1e-5));
}

TEST_CASE("rmsprop follows TensorFlow 1: mean square from 1, centered, with momentum") {
  // ms = 0.9 * 1 + 0.1 * g^2; var -= lr * g / sqrt(ms + eps).
  auto o = options("rmsprop", 0.1);
  o.epsilon = 1e-10;
  auto plain = Optimizer::create(o);
  std::vector<float> v{1.0f};
  plain->apply(v, std::vector<float>{2.0f}, 0);  // ms = 0.9 + 0.4 = 1.3
  double ms = 1.3, want = 1.0 - 0.1 * 2.0 / std::sqrt(1.3);
  CHECK(v[0] == doctest::Approx(want));
  plain->apply(v, std::vector<float>{-1.0f}, 1);  // ms = 1.17 + 0.1
  ms = 0.9 * ms + 0.1;
  want += 0.1 / std::sqrt(ms);
  CHECK(v[0] == doctest::Approx(want));

  o.centered = true;
  o.rmsprop_momentum = 0.5;
  auto centered = Optimizer::create(o);
  std::vector<float> w{0.0f};
  centered->apply(w, std::vector<float>{2.0f}, 0);
  // ms 1.3, mg 0.2: step = 0.1 * 2 / sqrt(1.3 - 0.04); mom = step.
  const double step1 = 0.2 / std::sqrt(1.26);
  CHECK(w[0] == doctest::Approx(-step1));
  centered->apply(w, std::vector<float>{2.0f}, 1);
  // ms 1.57, mg 0.38: mom = 0.5 * step1 + 0.2 / sqrt(1.57 - 0.1444).
  const double mom2 = 0.5 * step1 + 0.2 / std::sqrt(1.57 - 0.38 * 0.38);
  CHECK(w[0] == doctest::Approx(-step1 - mom2));
  std::vector<std::string> names;
  for (auto& [name, slot] : centered->slots()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"rms", "rms_mg", "rms_momentum"});
  // A reset starts the mean square at 1 again, the others at 0.
  centered->reset();
  for (auto& [name, slot] : centered->slots()) CHECK(slot[0] == (name == "rms" ? 1.0f : 0.0f));
}

TEST_CASE("adagrad follows TensorFlow 1: the sum of squares from its initial value") {
  auto o = options("adagrad", 0.5);
  auto adagrad = Optimizer::create(o);
  std::vector<float> v{1.0f, 1.0f};
  adagrad->apply(v, std::vector<float>{1.0f, -3.0f}, 0);  // accum 1.1, 9.1
  CHECK(v[0] == doctest::Approx(1.0 - 0.5 / std::sqrt(1.1)));
  CHECK(v[1] == doctest::Approx(1.0 + 1.5 / std::sqrt(9.1)));
  adagrad->apply(v, std::vector<float>{1.0f, 0.0f}, 1);  // accum 2.1, 9.1
  CHECK(v[0] == doctest::Approx(1.0 - 0.5 / std::sqrt(1.1) - 0.5 / std::sqrt(2.1)));
  adagrad->reset();
  CHECK(adagrad->slots()[0].second[1] == doctest::Approx(0.1));
  o.initial_accumulator = 0;
  CHECK_THROWS_WITH_AS(Optimizer::create(o), "optimizer: adagrad initial accumulator must be > 0, got 0",
                       cohort::InvalidArgument);
}

TEST_CASE("compute_delta equals what apply would add, for every optimizer") {
  for (const char* name : {"sgd", "momentum", "adam", "rmsprop", "adagrad"}) {
    CAPTURE(name);
    auto a = Optimizer::create(options(name, 0.05));
    auto b = Optimizer::create(options(name, 0.05));
    std::vector<float> values{0.3f, -0.7f, 1.1f, 2.0f};
    std::vector<float> mirror = values;
    std::vector<float> delta(values.size());
    for (int step = 0; step < 5; ++step) {
      const std::vector<float> grads{0.1f * step, -0.2f, 0.3f, -0.05f * step};
      a->apply(values, grads, step);
      b->compute_delta(grads, step, delta);
      for (std::size_t i = 0; i < mirror.size(); ++i) mirror[i] += delta[i];
    }
    for (std::size_t i = 0; i < values.size(); ++i) CHECK(mirror[i] == doctest::Approx(values[i]));
  }
}

// Async pushes leave during the backward pass in pieces, and a sync step's update is applied
// in pieces; each must be the matching range of the whole, bit for bit, with the state
// (momentum, Adam moments and step count) advancing as one whole update would advance it, and
// the decayed ranges cut where the pieces cut them.
TEST_CASE("an update in pieces equals the whole update bit for bit, for every optimizer") {
  for (const char* name : {"sgd", "momentum", "nesterov", "adam", "adamw", "l2", "rmsprop",
                           "rmsprop_centered", "adagrad"}) {
    CAPTURE(name);
    const std::string n = name;
    auto o = options(n == "nesterov" ? "momentum" : n == "l2" ? "sgd"
                     : n == "rmsprop_centered" ? "rmsprop" : name, 0.05);
    o.nesterov = n == "nesterov";
    o.centered = n == "rmsprop_centered";
    if (o.centered) o.rmsprop_momentum = 0.7;
    if (n == "adamw" || n == "l2") o.weight_decay = 0.1;
    // A rate that changes every step: the pieces must take the step's.
    o.learning_rate.kind = LearningRateSchedule::Kind::kExponential;
    o.learning_rate.decay_rate = 0.5;
    o.learning_rate.decay_steps = 1;
    auto whole = Optimizer::create(o);
    auto pieces = Optimizer::create(o);
    auto whole_apply = Optimizer::create(o);
    auto pieces_apply = Optimizer::create(o);
    auto whole_sum = Optimizer::create(o);
    auto pieces_plus = Optimizer::create(o);
    for (auto* opt : {whole.get(), pieces.get(), whole_apply.get(), pieces_apply.get(),
                      whole_sum.get(), pieces_plus.get()}) {
      opt->set_decay_ranges({{2, 9}, {12, 17}});
      opt->set_frozen_ranges({{5, 7}, {15, 16}});  // cut by pieces too
    }
    constexpr std::size_t kSize = 17;
    std::vector<float> values(kSize), grads(kSize), want(kSize), got(kSize);
    std::vector<float> applied_whole(kSize), applied_pieces(kSize);
    // A second gradient added as the pieces read it, against the whole update of the sum.
    std::vector<float> plus(kSize), sum(kSize), summed_whole(kSize), summed_pieces(kSize);
    for (std::size_t i = 0; i < kSize; ++i)
      applied_whole[i] = applied_pieces[i] = summed_whole[i] = summed_pieces[i] =
          0.2f - 0.05f * static_cast<float>(i);
    for (int step = 0; step < 4; ++step) {
      for (std::size_t i = 0; i < kSize; ++i) {
        values[i] = 0.1f * static_cast<float>(i) - 0.7f;
        grads[i] = 0.03f * static_cast<float>((i * 7 + step * 3) % 11) - 0.15f;
        plus[i] = 0.017f * static_cast<float>((i * 5 + step) % 7) - 0.05f;
        sum[i] = grads[i] + plus[i];
      }
      whole->compute_delta(grads, step, want, values);
      whole_apply->apply(applied_whole, grads, step, 0.5f);
      whole_sum->apply(summed_whole, sum, step, 0.5f);
      // From the end down, as backward finishes them, in uneven pieces that cut both ranges.
      pieces->begin_pieces(step, kSize);
      pieces_apply->begin_pieces(step, kSize);
      pieces_plus->begin_pieces(step, kSize);
      std::size_t end = kSize;
      for (std::size_t size : {3u, 5u, 1u, 6u, 2u}) {
        const std::size_t first = end - size;
        const auto part = [&](std::vector<float>& v) {
          return std::span<float>(v).subspan(first, size);
        };
        const auto at = static_cast<std::int64_t>(first);
        pieces->delta_piece(at, part(grads), part(got), part(values));
        pieces_apply->apply_piece(at, part(applied_pieces), part(grads), 0.5f);
        pieces_plus->apply_piece(at, part(summed_pieces), part(grads), 0.5f, part(plus));
        end = first;
      }
      REQUIRE(end == 0);
      CHECK(got == want);
      CHECK(applied_pieces == applied_whole);
      CHECK(summed_pieces == summed_whole);
    }
    CHECK(pieces->iterations() == whole->iterations());
    CHECK(pieces_apply->iterations() == whole_apply->iterations());
    std::vector<float> g(2), d(2);
    CHECK_THROWS_AS(pieces->delta_piece(16, g, d, g), cohort::InvalidArgument);
    CHECK_THROWS_AS(pieces_apply->apply_piece(16, d, g), cohort::InvalidArgument);
    std::vector<float> three(3);
    CHECK_THROWS_AS(pieces_apply->apply_piece(0, three, g), cohort::InvalidArgument);
    CHECK_THROWS_AS(pieces_plus->apply_piece(0, d, g, 1.0f, three), cohort::InvalidArgument);
  }
  auto o = options("sgd", 0.1);
  o.clip_norm = 1.0;
  CHECK_THROWS_WITH_AS(Optimizer::create(o)->begin_pieces(0, 4),
                       "optimizer: an update in pieces cannot be clipped (clipping needs the "
                       "norm of the whole gradient before any piece)",
                       cohort::InvalidArgument);
}

TEST_CASE("learning-rate schedules on the global step") {
  LearningRateSchedule s;
  s.base = 0.1;
  CHECK(s.at(12345) == doctest::Approx(0.1));
  s.kind = LearningRateSchedule::Kind::kStep;
  s.decay_rate = 0.5;
  s.decay_steps = 100;
  CHECK(s.at(99) == doctest::Approx(0.1));
  CHECK(s.at(100) == doctest::Approx(0.05));
  CHECK(s.at(250) == doctest::Approx(0.025));
  s.kind = LearningRateSchedule::Kind::kExponential;
  CHECK(s.at(50) == doctest::Approx(0.1 * std::pow(0.5, 0.5)));
  s.staircase = true;
  CHECK(s.at(50) == doctest::Approx(0.1));
  CHECK_THROWS_WITH_AS(LearningRateSchedule::parse_kind("linear"),
                       "unknown learning-rate schedule 'linear' (known: constant, step, "
                       "exponential, cosine, polynomial, piecewise)",
                       cohort::InvalidArgument);
}

TEST_CASE("learning-rate factors: a range's update is the one at its factor times the rate") {
  for (const std::string name : {"sgd", "momentum", "adam", "adamw", "rmsprop"}) {
    CAPTURE(name);
    OptimizerOptions full = options(name, 0.1), quarter = options(name, 0.025);
    full.weight_decay = quarter.weight_decay = 0.1;
    auto factored = Optimizer::create(full);
    factored->set_rate_factors({{2, 5, 0.25}});
    auto at_full = Optimizer::create(full), at_quarter = Optimizer::create(quarter);
    std::vector<float> v(8), a(8), b(8);
    for (std::size_t i = 0; i < 8; ++i) v[i] = a[i] = b[i] = 0.3f * static_cast<float>(i) - 1.0f;
    for (int step = 0; step < 3; ++step) {
      std::vector<float> g(8);
      for (std::size_t i = 0; i < 8; ++i) g[i] = std::sin(static_cast<float>(i + 7 * step));
      factored->apply(v, g, step);
      at_full->apply(a, g, step);
      at_quarter->apply(b, g, step);
    }
    for (std::size_t i = 0; i < 8; ++i) {
      CAPTURE(i);
      CHECK(v[i] == doctest::Approx(i >= 2 && i < 5 ? b[i] : a[i]).epsilon(1e-6));
    }
    CHECK(v[3] != doctest::Approx(a[3]).epsilon(1e-4));  // the factor did something
  }
  auto sgd = Optimizer::create(options("sgd", 0.1));
  CHECK_THROWS_AS(sgd->set_rate_factors({{0, 4, 0.0}}), cohort::InvalidArgument);
  CHECK_THROWS_AS(sgd->set_rate_factors({{0, 4, -1.0}}), cohort::InvalidArgument);
  CHECK_THROWS_AS(sgd->set_rate_factors({{0, 4, std::nan("")}}), cohort::InvalidArgument);
  CHECK_THROWS_AS(sgd->set_rate_factors({{0, 4, 0.5}, {3, 6, 2.0}}), cohort::InvalidArgument);
  CHECK_THROWS_AS(sgd->set_rate_factors({{4, 2, 0.5}}), cohort::InvalidArgument);
}

TEST_CASE("the linear scaling rule: the base times the batches, a warm-up where there is none") {
  const LearningRateSchedule one = LearningRateSchedule::for_run("cosine", 0.01, 1000);
  const LearningRateSchedule eight = one.linearly_scaled(8, 100);
  CHECK(eight.base == doctest::Approx(0.08));
  CHECK(eight.warmup_steps == 100);
  // Goyal et al.'s warm-up: from one batch's rate up to eight's.
  CHECK(eight.at(0) == doctest::Approx(0.01 + 0.07 / 100));
  CHECK(eight.at(49) == doctest::Approx(0.01 + 0.07 * 0.5));
  CHECK(eight.at(99) == doctest::Approx(0.08));
  // The cosine then runs over the rest of the run, to the same floor at the same step.
  CHECK(eight.decay_steps == 900);
  CHECK(eight.at(100 + 450) == doctest::Approx(0.08 * (0.1 + 0.9 * 0.5)));  // halfway down
  CHECK(eight.at(1000) == doctest::Approx(8 * one.at(1000)));
  // A step decay keeps its period.
  LearningRateSchedule step = one;
  step.kind = LearningRateSchedule::Kind::kStep;
  step.decay_steps = 300;
  CHECK(step.linearly_scaled(2, 100).decay_steps == 300);
  // One batch a step (async): unchanged; a warm-up of its own is kept.
  CHECK(one.linearly_scaled(1, 100).base == one.base);
  CHECK(one.linearly_scaled(1, 100).warmup_steps == 0);
  CHECK(LearningRateSchedule::for_run("cosine", 0.01, 1000, 50).linearly_scaled(4, 100).warmup_steps == 50);
  CHECK_THROWS_AS(one.linearly_scaled(0, 10), cohort::InvalidArgument);
  CHECK_THROWS_AS(one.linearly_scaled(2, -1), cohort::InvalidArgument);
}

TEST_CASE("settings out of range, NaN among them, are refused with the setting named") {
  using Kind = LearningRateSchedule::Kind;
  const double nan = std::nan("");
  // The optimizer `name` with one setting changed.
  const auto with = [](const std::string& name, auto change) {
    OptimizerOptions o;
    o.name = name;
    change(o);
    return o;
  };
  const auto refused = [](const OptimizerOptions& o, const std::string& words) {
    CAPTURE(words);
    try {
      Optimizer::create(o);
      FAIL("accepted");
    } catch (const cohort::InvalidArgument& e) {
      CHECK(std::string(e.what()).find(words) != std::string::npos);
    }
  };
  refused(with("momentum", [&](auto& o) { o.momentum = nan; }), "momentum must be in [0, 1), got nan");
  refused(with("adam", [&](auto& o) { o.beta1 = nan; }), "adam betas must be in [0, 1), got nan and 0.999");
  refused(with("adam", [&](auto& o) { o.epsilon = 0; }), "adam epsilon must be > 0, got 0");
  refused(with("adamw", [&](auto& o) { o.epsilon = nan; }), "adam epsilon must be > 0");
  refused(with("rmsprop", [&](auto& o) { o.rho = nan; }), "rmsprop rho must be in [0, 1)");
  refused(with("rmsprop", [&](auto& o) { o.rmsprop_momentum = nan; }), "rmsprop momentum must be in [0, 1)");
  refused(with("sgd", [&](auto& o) { o.clip_norm = nan; }), "clip norm must be >= 0, got nan");
  const auto schedule = [&](Kind kind, double decay_rate) {
    return with("sgd", [&](auto& o) {
      o.learning_rate.kind = kind;
      o.learning_rate.decay_rate = decay_rate;
    });
  };
  refused(schedule(Kind::kStep, -0.5), "the decay rate must be > 0, got -0.5");
  refused(schedule(Kind::kExponential, nan), "the decay rate must be > 0");
  refused(schedule(Kind::kCosine, 2), "must be in [0, 1], got 2");
  refused(schedule(Kind::kPolynomial, -1), "must be in [0, 1], got -1");
  refused(with("sgd", [&](auto& o) {
            o.learning_rate.warmup_steps = 10;
            o.learning_rate.warmup_from = 1;
          }),
          "the warm-up's start must be in [0, 1)");
  // A kind that does not read the decay rate takes any; an infinite clip norm clips nothing.
  CHECK_NOTHROW(Optimizer::create(schedule(Kind::kConstant, -1)));
  CHECK_NOTHROW(Optimizer::create(with("sgd", [](auto& o) { o.clip_norm = std::numeric_limits<double>::infinity(); })));
}

TEST_CASE("polynomial, piecewise and function schedules, with warm-up") {
  LearningRateSchedule s;
  s.base = 0.1;
  s.kind = LearningRateSchedule::parse_kind("polynomial");
  s.decay_rate = 0.01;
  s.decay_steps = 100;
  s.power = 2.0;  // TensorFlow: (0.1 - 0.001) * (1 - step / 100)^2 + 0.001
  CHECK(s.at(0) == doctest::Approx(0.1));
  CHECK(s.at(50) == doctest::Approx(0.099 * 0.25 + 0.001));
  CHECK(s.at(100) == doctest::Approx(0.001));
  CHECK(s.at(1000) == doctest::Approx(0.001));

  // ResNet's recipe: x0.1 at each boundary, with a warm-up the boundaries count in.
  s.kind = LearningRateSchedule::parse_kind("piecewise");
  s.boundaries = {30, 60, 80};
  s.factors = {0.1, 0.01, 0.001};
  s.warmup_steps = 5;
  CHECK(s.at(0) == doctest::Approx(0.02));
  CHECK(s.at(4) == doctest::Approx(0.1));
  CHECK(s.at(29) == doctest::Approx(0.1));
  CHECK(s.at(30) == doctest::Approx(0.01));
  CHECK(s.at(79) == doctest::Approx(0.001));
  CHECK(s.at(80) == doctest::Approx(0.0001));
  s.check();
  s.factors.pop_back();
  CHECK_THROWS_WITH_AS(s.check(), "learning-rate schedule: 3 boundaries but 2 factors (one each)",
                       cohort::InvalidArgument);
  s.factors = {0.1, 0.01, 0.001};
  s.boundaries = {30, 30, 80};
  CHECK_THROWS_WITH_AS(s.check(), "learning-rate schedule: piecewise boundaries must be positive "
                       "and increasing, got 30 after 30", cohort::InvalidArgument);

  // A function multiplies the base (PyTorch's LambdaLR), after the warm-up.
  s.kind = LearningRateSchedule::Kind::kFunction;
  CHECK_THROWS_AS(s.check(), cohort::InvalidArgument);
  s.function = [](std::int64_t step) { return 1.0 / static_cast<double>(step + 1); };
  s.check();
  CHECK(s.at(5) == doctest::Approx(0.1));
  CHECK(s.at(6) == doctest::Approx(0.05));
  OptimizerOptions o = options("sgd", 0.1);
  o.learning_rate = s;
  CHECK(Optimizer::create(o)->learning_rate(9) == doctest::Approx(0.02));
  // The rate a step uses is checked: a negative or non-finite one names the global step. (The
  // function sees the steps after the warm-up, 5 here.) The schedule's own value is as it is.
  s.function = [](std::int64_t step) { return step < 8 ? 1.0 : step == 8 ? -0.5 : std::nan(""); };
  REQUIRE(s.warmup_steps == 5);
  o.learning_rate = s;
  const auto checked = Optimizer::create(o);
  CHECK(checked->learning_rate(12) == doctest::Approx(0.1));
  CHECK(s.at(13) == doctest::Approx(-0.05));
  CHECK_THROWS_WITH_AS(checked->learning_rate(13),
                       "learning-rate schedule: the function gives a rate of -0.05 at global step 13 (0.1 "
                       "times its value); a rate must be a finite number >= 0",
                       cohort::InvalidArgument);
  CHECK_THROWS_WITH_AS(checked->learning_rate(14), doctest::Contains("a rate of nan at global step 14"),
                       cohort::InvalidArgument);
}

TEST_CASE("clipping by global norm scales every gradient by clip / norm") {
  auto o = options("sgd", 1.0);
  o.clip_norm = 1.0;
  auto sgd = Optimizer::create(o);
  std::vector<float> v{0.0f, 0.0f};
  sgd->apply(v, std::vector<float>{3.0f, 4.0f}, 0);  // norm 5 -> scaled to (0.6, 0.8)
  CHECK(sgd->last_gradient_norm() == doctest::Approx(5.0));
  CHECK(v[0] == doctest::Approx(-0.6));
  CHECK(v[1] == doctest::Approx(-0.8));
  sgd->apply(v, std::vector<float>{0.3f, 0.4f}, 1);  // norm 0.5: untouched
  CHECK(v[0] == doctest::Approx(-0.9));
}

TEST_CASE("apply's gradient scale equals scaling the gradients first, with clipping and decay") {
  // A sum of 4 replicas' gradients scaled by 1/4: every optimizer, plain, clipped (the clip sees
  // the mean's norm) and with each kind of weight decay, over three steps of state.
  const std::vector<float> sum{2.0f, -6.0f, 0.4f, 10.0f};
  std::vector<float> mean;
  for (float g : sum) mean.push_back(g * 0.25f);
  for (const char* name : {"sgd", "momentum", "adam", "adamw", "rmsprop", "adagrad"}) {
    for (int variant = 0; variant < 3; ++variant) {
      CAPTURE(name);
      CAPTURE(variant);
      auto o = options(name, 0.1);
      o.momentum = 0.9;
      if (variant == 1) o.clip_norm = 1.0;     // the mean's norm is about 3: clipped
      if (variant == 2) o.weight_decay = 0.01;  // L2, or decoupled for adamw
      auto scaled = Optimizer::create(o);
      auto reference = Optimizer::create(o);
      std::vector<float> a{1.0f, 2.0f, -3.0f, 0.5f}, b = a;
      for (std::int64_t step = 0; step < 3; ++step) {
        scaled->apply(a, sum, step, 0.25f);
        reference->apply(b, mean, step);
        for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == doctest::Approx(b[i]).epsilon(1e-6));
      }
      CHECK(scaled->last_gradient_norm() == doctest::Approx(reference->last_gradient_norm()));
    }
  }
}

TEST_CASE("bad optimizer options are refused by name") {
  CHECK_THROWS_WITH_AS(Optimizer::create(options("adadelta", 0.1)),
                       "unknown optimizer 'adadelta' (known: sgd, momentum, adam, adamw, rmsprop, adagrad)",
                       cohort::InvalidArgument);
  auto rms = options("rmsprop", 0.1);
  rms.rho = 1.0;
  CHECK_THROWS_WITH_AS(Optimizer::create(rms), "optimizer: rmsprop rho must be in [0, 1), got 1",
                       cohort::InvalidArgument);
  CHECK_THROWS_AS(Optimizer::create(options("sgd", -1.0)), cohort::InvalidArgument);
  auto o = options("momentum", 0.1);
  o.momentum = 1.5;
  CHECK_THROWS_AS(Optimizer::create(o), cohort::InvalidArgument);
  for (const char* name : {"sgd", "adam", "adamw", "rmsprop", "adagrad"}) {
    auto nesterov = options(name, 0.1);
    nesterov.nesterov = true;
    CHECK_THROWS_WITH_AS(Optimizer::create(nesterov),
                         ("optimizer: Nesterov momentum needs the momentum optimizer, not " + std::string(name)).c_str(),
                         cohort::InvalidArgument);
  }
}

TEST_CASE("weight decay: L2 adds wd * w to the gradient, on the decayed ranges only") {
  auto o = options("sgd", 0.5);
  o.weight_decay = 0.1;
  auto sgd = Optimizer::create(o);
  sgd->set_decay_ranges({{1, 2}});  // only the middle parameter is a kernel
  std::vector<float> values{1.0f, 2.0f, 3.0f};
  const std::vector<float> grads{1.0f, 1.0f, 1.0f};
  sgd->apply(values, grads, 0);
  CHECK(values[0] == doctest::Approx(0.5));
  CHECK(values[1] == doctest::Approx(2.0 - 0.5 * (1.0 + 0.1 * 2.0)));
  CHECK(values[2] == doctest::Approx(2.5));
  // compute_delta needs the parameters the gradient was taken at.
  std::vector<float> delta(3);
  CHECK_THROWS_AS(sgd->compute_delta(grads, 1, delta), cohort::InvalidArgument);
  sgd->compute_delta(grads, 1, delta, values);
  CHECK(delta[1] == doctest::Approx(-0.5 * (1.0 + 0.1 * values[1])));
}

TEST_CASE("adamw decays the parameters apart from the Adam step, as apply and as a delta") {
  auto o = options("adamw", 0.01);
  o.weight_decay = 0.5;
  auto apply = Optimizer::create(o);
  auto delta = Optimizer::create(o);
  auto plain = Optimizer::create(options("adam", 0.01));
  std::vector<float> w{2.0f}, d(1), p{2.0f};
  apply->apply(w, std::vector<float>{1.0f}, 0);
  delta->compute_delta(std::vector<float>{1.0f}, 0, d, std::vector<float>{2.0f});
  plain->apply(p, std::vector<float>{1.0f}, 0);
  const double adam_step = p[0] - 2.0;  // the same Adam step without decay
  CHECK(w[0] == doctest::Approx(2.0 - 0.01 * 0.5 * 2.0 + adam_step));
  CHECK(d[0] == doctest::Approx(-0.01 * 0.5 * 2.0 + adam_step));
  CHECK_THROWS_AS(Optimizer::create([] {
                    auto bad = options("sgd", 0.1);
                    bad.weight_decay = -1;
                    return bad;
                  }()),
                  cohort::InvalidArgument);
}

TEST_CASE("cosine schedule with warmup: linear rise, half a cosine down to the floor, then flat") {
  LearningRateSchedule s;
  s.kind = LearningRateSchedule::parse_kind("cosine");
  s.base = 1.0;
  s.decay_rate = 0.1;
  s.decay_steps = 100;
  s.warmup_steps = 10;
  CHECK(s.at(0) == doctest::Approx(0.1));
  CHECK(s.at(9) == doctest::Approx(1.0));
  CHECK(s.at(10) == doctest::Approx(1.0));
  CHECK(s.at(60) == doctest::Approx(0.1 + 0.9 * 0.5));
  CHECK(s.at(110) == doctest::Approx(0.1));
  CHECK(s.at(500) == doctest::Approx(0.1));
  CHECK_THROWS_AS(LearningRateSchedule::parse_kind("linear"), cohort::InvalidArgument);
  // The same for a run of 110 steps by its length: the rest after the warm-up is the decay.
  const LearningRateSchedule run = LearningRateSchedule::for_run("cosine", 1.0, 110, 10);
  for (const std::int64_t step : {0, 9, 10, 60, 110, 500}) CHECK(run.at(step) == doctest::Approx(s.at(step)));
  const LearningRateSchedule linear = LearningRateSchedule::for_run("polynomial", 2.0, 100);
  CHECK(linear.at(50) == doctest::Approx(2.0 * (0.1 + 0.9 * 0.5)));
  CHECK(LearningRateSchedule::for_run("constant", 0.5, 100).at(99) == 0.5);
  for (const char* kind : {"piecewise", "step"})
    CHECK_THROWS_WITH_AS(LearningRateSchedule::for_run(kind, 1.0, 100), doctest::Contains("needs its boundaries"),
                         cohort::InvalidArgument);
  CHECK_THROWS_WITH_AS(LearningRateSchedule::for_run("cosine", 1.0, 100, 100),
                       "learning-rate schedule: a warm-up of 100 steps is not shorter than the run of 100",
                       cohort::InvalidArgument);
  CHECK(LearningRateSchedule::for_run("exponential", 1.0, 100, 10).at(100) == doctest::Approx(0.1));  // at the end
  CHECK_THROWS_AS(LearningRateSchedule::for_run("cosine", 0.0, 100), cohort::InvalidArgument);
}

TEST_CASE("frozen parameters: untouched by every optimizer, a zero delta, out of the clipping norm") {
  for (const char* name : {"sgd", "momentum", "adam", "adamw", "rmsprop", "adagrad"}) {
    CAPTURE(name);
    auto o = options(name, 0.1);
    o.weight_decay = 0.01;
    o.clip_norm = 1.0;
    auto frozen = Optimizer::create(o);
    frozen->set_frozen_ranges({{6, 9}, {1, 3}, {2, 4}});  // overlapping: [1, 4) and [6, 9)
    // The same optimizer on the trainable parameters alone, packed together, as reference.
    auto packed = Optimizer::create(o);
    const std::vector<std::size_t> trainable{0, 4, 5, 9};
    std::vector<float> values{0.5f, 1, 2, 3, -1, -2, 7, 8, 9, 0.25f};
    std::vector<float> reference;
    for (std::size_t i : trainable) reference.push_back(values[i]);
    const std::vector<float> frozen_values = values;
    for (int step = 0; step < 3; ++step) {
      std::vector<float> grads(values.size()), packed_grads;
      for (std::size_t i = 0; i < grads.size(); ++i) grads[i] = 0.3f * static_cast<float>(i + step) - 1.0f;
      for (std::size_t i : trainable) packed_grads.push_back(grads[i]);
      std::vector<float> delta(values.size(), 5.0f);
      auto twin = Optimizer::create(o);  // compute_delta's state must not matter here
      twin->set_frozen_ranges({{1, 4}, {6, 9}});
      twin->compute_delta(grads, step, delta, values);
      for (std::size_t i : {1u, 2u, 3u, 6u, 7u, 8u}) CHECK(delta[i] == 0.0f);
      frozen->apply(values, grads, step);
      packed->apply(reference, packed_grads, step);
      CHECK(frozen->last_gradient_norm() == doctest::Approx(packed->last_gradient_norm()));
    }
    for (std::size_t k = 0; k < trainable.size(); ++k)
      CHECK(values[trainable[k]] == doctest::Approx(reference[k]).epsilon(1e-6));
    for (std::size_t i : {1u, 2u, 3u, 6u, 7u, 8u}) CHECK(values[i] == frozen_values[i]);
    // Their slots keep their starting values.
    auto fresh = Optimizer::create(o);
    fresh->prepare(values.size());
    const auto start = fresh->slots();
    const auto after = frozen->slots();
    REQUIRE(after.size() == start.size());
    for (std::size_t k = 0; k < after.size(); ++k) {
      CAPTURE(after[k].first);
      for (std::size_t i : {1u, 2u, 3u, 6u, 7u, 8u}) CHECK(after[k].second[i] == start[k].second[i]);
      CHECK(after[k].second[0] != start[k].second[0]);  // a trainable one's moved
    }
  }
  auto sgd = Optimizer::create(options("sgd", 0.1));
  CHECK_THROWS_AS(sgd->set_frozen_ranges({{3, 2}}), cohort::InvalidArgument);
  // A frozen gradient that overflowed leaves the clipping of the others as it was.
  auto clipped = options("sgd", 0.1);
  clipped.clip_norm = 1.0;
  auto frozen_inf = Optimizer::create(clipped);
  frozen_inf->set_frozen_ranges({{1, 2}});
  std::vector<float> w{0.0f, 0.0f, 0.0f};
  frozen_inf->apply(w, std::vector<float>{3.0f, std::numeric_limits<float>::infinity(), 4.0f}, 0);
  CHECK(frozen_inf->last_gradient_norm() == doctest::Approx(5.0));
  CHECK(w[0] == doctest::Approx(-0.06));
  CHECK(w[1] == 0.0f);
  // A trainable one that overflowed leaves no direction to clip to: every value takes NaN (as
  // TensorFlow and PyTorch give), none the others' unclipped step.
  for (const float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    auto all = Optimizer::create(clipped);
    std::vector<float> v{0.0f, 0.0f, 0.0f};
    all->apply(v, std::vector<float>{3.0f, bad, 4.0f}, 0);
    CHECK(std::isnan(v[0]));
    CHECK(std::isnan(v[2]));
  }
}

TEST_CASE("an update in place: SGD alone, apply()'s rate, the rest by finish()") {
  CHECK(cohort::InPlaceUpdate::create(*Optimizer::create(options("momentum", 0.1))) == nullptr);
  CHECK(cohort::InPlaceUpdate::create(*Optimizer::create(options("adam", 0.1))) == nullptr);
  auto clipped = options("sgd", 0.1);
  clipped.clip_norm = 1.0;
  CHECK(cohort::InPlaceUpdate::create(*Optimizer::create(clipped)) == nullptr);

  auto o = options("sgd", 0.5);
  o.learning_rate.warmup_steps = 4;  // the rate depends on the step: 0.5 * (step + 1) / 4
  o.weight_decay = 0.1;
  auto sgd = Optimizer::create(o);
  sgd->set_decay_ranges({{2, 5}});
  auto in_place = cohort::InPlaceUpdate::create(*sgd);
  REQUIRE(in_place != nullptr);
  CHECK_FALSE(in_place->rate(5, 8).has_value());  // outside a step
  std::vector<float> values_in_place(8);
  CHECK_THROWS_WITH_AS(in_place->finish(values_in_place, values_in_place),
                       "InPlaceUpdate: finish() without begin()", cohort::InvalidArgument);
  in_place->begin(1, 8);
  const auto rate = in_place->rate(5, 8);
  REQUIRE(rate.has_value());
  CHECK(*rate == doctest::Approx(-0.25));
  CHECK_FALSE(in_place->rate(1, 3).has_value());  // weight decay applies to part of it
  CHECK_FALSE(in_place->rate(6, 9).has_value());  // beyond the parameters
  CHECK_THROWS_AS(in_place->applied(2, 5), cohort::InvalidArgument);  // decayed: not in place

  // One range updated as a layer would; finish() updates the others, once.
  std::vector<float> values{1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<float> expected = values;
  const std::vector<float> grads{1, -1, 2, -2, 3, -3, 4, -4};
  auto reference = Optimizer::create(o);
  reference->set_decay_ranges({{2, 5}});
  reference->apply(expected, grads, 1);
  for (int i = 5; i < 8; ++i) values[i] += *rate * grads[i];
  in_place->applied(5, 8);
  CHECK_FALSE(in_place->rate(4, 6).has_value());  // updated already
  std::vector<float> poisoned = grads;
  for (int i : {5, 6, 7}) poisoned[i] = std::nanf("");  // never read
  in_place->finish(values, poisoned);
  for (std::size_t i = 0; i < values.size(); ++i) {
    CAPTURE(i);
    CHECK(values[i] == doctest::Approx(expected[i]));
  }
  CHECK(sgd->iterations() == reference->iterations());
  CHECK_FALSE(in_place->rate(5, 8).has_value());  // the step is over
}

TEST_CASE("describe names the optimizer and every setting that changes its update") {
  CHECK(cohort::describe(options("sgd", 0.1)) == "sgd");
  OptimizerOptions o = options("momentum", 0.1);
  o.nesterov = true;
  o.weight_decay = 5e-4;
  CHECK(cohort::describe(o) == "momentum 0.9 (Nesterov), weight decay 0.0005");
  o.nesterov = false;
  o.momentum = 0.95;
  o.weight_decay = 0;
  o.clip_norm = 5;
  CHECK(cohort::describe(o) == "momentum 0.95, gradients clipped to norm 5");
  o = options("adamw", 0.001);
  o.weight_decay = 0.01;
  CHECK(cohort::describe(o) == "adamw (beta1 0.9, beta2 0.999, epsilon 1e-08), decoupled weight decay 0.01");
  o.name = "adam";
  CHECK(cohort::describe(o) == "adam (beta1 0.9, beta2 0.999, epsilon 1e-08), weight decay 0.01");
  o = options("rmsprop", 0.001);
  o.centered = true;
  CHECK(cohort::describe(o) == "rmsprop centered (rho 0.9, momentum 0, epsilon 1e-08)");
  CHECK(cohort::describe(options("adagrad", 0.1)) == "adagrad (initial accumulator 0.1)");
}

TEST_CASE("the moving average of the parameters: TensorFlow's decay with num_updates, and a swap") {
  using cohort::ExponentialMovingAverage;
  ExponentialMovingAverage average(0.999);
  // min(decay, (1 + n) / (10 + n)): the average leaves the initial values early in training.
  CHECK(average.decay_at(0) == doctest::Approx(0.1));
  CHECK(average.decay_at(10) == doctest::Approx(11.0 / 20.0));
  CHECK(average.decay_at(1000000) == doctest::Approx(0.999));
  CHECK(ExponentialMovingAverage(0.5).decay_at(1000) == 0.5);

  ExponentialMovingAverage half(0.5);
  half.reset(std::vector<float>{1.0f, 2.0f});
  half.apply(std::vector<float>{3.0f, 6.0f}, 1000);  // d = 0.5: halfway
  CHECK(half.values()[0] == 2.0f);
  CHECK(half.values()[1] == 4.0f);
  half.apply(std::vector<float>{3.0f, 6.0f}, 0);  // d = 0.1: nine tenths of the way
  CHECK(half.values()[0] == doctest::Approx(2.9));
  CHECK(half.values()[1] == doctest::Approx(5.8));
  CHECK_THROWS_WITH_AS(half.apply(std::vector<float>{1.0f}, 0),
                       "ExponentialMovingAverage::apply: 1 values for an average of 2",
                       cohort::InvalidArgument);
  for (double bad : {0.0, 1.0, -0.5, std::numeric_limits<double>::quiet_NaN()})
    CHECK_THROWS_WITH_AS(ExponentialMovingAverage{bad}, doctest::Contains("is not in (0, 1)"),
                         cohort::InvalidArgument);

  // The swap puts the averages in for its lifetime and the parameters back, on an exception too.
  cohort::Graph graph;
  graph.get_variable("w", {2}, cohort::Initializer::zeros());
  graph.values()[0] = 7;
  graph.values()[1] = 8;
  try {
    const cohort::MovingAverageSwap swap(graph, half);
    CHECK(graph.values()[0] == half.values()[0]);
    CHECK(graph.values()[1] == half.values()[1]);
    throw std::runtime_error("an evaluation failed");
  } catch (const std::runtime_error&) {
  }
  CHECK(graph.values()[0] == 7);
  CHECK(graph.values()[1] == 8);
  CHECK_THROWS_WITH_AS(cohort::MovingAverageSwap(graph, average),
                       "MovingAverageSwap: an average of 0 values for a graph of 2 parameters",
                       cohort::InvalidArgument);
}
