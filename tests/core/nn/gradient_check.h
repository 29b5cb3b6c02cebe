#pragma once
// A numerical gradient checker in the spirit of Caffe's GradientChecker: the analytic gradients a
// layer's (or a model's) backward pass produces are compared with central differences of its
// forward pass.
//
// For a layer the scalar under test is L = sum_i w_i * output_i with fixed random weights w, so
// every output element takes part; its gradient with respect to the output is w itself. The
// difference quotient is computed from float forward passes with the sum in double, and compared
// with a relative criterion: |analytic - numeric| <= threshold * max(|analytic|, |numeric|, floor).

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/layer.h"
#include "cohort/core/nn/model.h"
#include "cohort/core/nn/tensor.h"
#include "cohort/core/nn/threads.h"

namespace cohort::testing {

// The op and model tests run single-threaded unless a test says otherwise: OpenMP's default is a
// thread per core, and its spinning threads crawl on a loaded machine.
inline const bool kSingleThreadedTests = (set_intra_op_threads(1), true);

struct GradientCheckOptions {
  double step = 1e-2;       ///< finite-difference step h: (L(x + h) - L(x - h)) / 2h
  double threshold = 1e-2;  ///< relative error allowed
  double floor = 1e-1;      ///< smallest scale the relative error is taken against
  std::uint64_t seed = 1;   ///< for the output weights and the sampled entries
  /// Check at most this many entries of the input and of each variable (evenly spread random
  /// picks); 0 checks them all.
  std::int64_t max_per_tensor = 0;
  bool check_input = true;
  /// Model checks: variables whose name contains one of these are not checked.
  std::vector<std::string> skip_variables;
};

/// Tensor of `shape` with entries uniform in [lo, hi), from `seed`.
inline Tensor random_tensor(const Shape& shape, std::uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  Tensor t(shape);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  for (float& x : t.span()) x = u(rng);
  return t;
}

/// Tensor of `shape` whose entries are distinct and at least `spacing` apart (a shuffled ramp
/// centred on 0): max pooling and ReLU see no ties and no value within `spacing` / 2 of a kink.
inline Tensor spaced_tensor(const Shape& shape, std::uint64_t seed, float spacing = 0.05f) {
  Tensor t(shape);
  std::vector<std::int64_t> order(static_cast<std::size_t>(t.size()));
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int64_t>(i);
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  const double centre = 0.5 * static_cast<double>(t.size()) - 0.25;  // keeps 0 off the ramp
  for (std::int64_t i = 0; i < t.size(); ++i)
    t[i] = static_cast<float>((static_cast<double>(order[static_cast<std::size_t>(i)]) - centre) * spacing);
  return t;
}

namespace detail {

/// Indices of `size` entries to check: all of them, or `limit` distinct random ones.
inline std::vector<std::int64_t> pick(std::int64_t size, std::int64_t limit, std::mt19937_64& rng) {
  std::vector<std::int64_t> all(static_cast<std::size_t>(size));
  for (std::int64_t i = 0; i < size; ++i) all[static_cast<std::size_t>(i)] = i;
  if (limit > 0 && limit < size) {
    std::shuffle(all.begin(), all.end(), rng);
    all.resize(static_cast<std::size_t>(limit));
    std::sort(all.begin(), all.end());
  }
  return all;
}

/// Counts and reports mismatches; one doctest CHECK at the end keeps the output readable.
class Comparison {
 public:
  explicit Comparison(const GradientCheckOptions& options) : options_(options) {}

  void compare(const std::string& what, std::int64_t index, double analytic, double numeric) {
    ++checked_;
    const double scale = std::max({std::abs(analytic), std::abs(numeric), options_.floor});
    max_abs_ = std::max(max_abs_, std::abs(analytic));
    if (std::abs(analytic - numeric) <= options_.threshold * scale) return;
    if (++failures_ <= 10)
      report_ << what << "[" << index << "]: analytic " << analytic << ", numeric " << numeric << "\n";
  }

  /// Asserts that every entry matched and that the gradients were not all (near) zero, which
  /// would make the comparison vacuous.
  void finish() {
    INFO(report_.str());
    CHECK(checked_ > 0);
    CHECK(failures_ == 0);
    CHECK(max_abs_ > options_.floor * options_.threshold);
  }

 private:
  GradientCheckOptions options_;
  std::int64_t checked_ = 0;
  std::int64_t failures_ = 0;
  double max_abs_ = 0.0;
  std::ostringstream report_;
};

/// (f(x + h) - f(x - h)) / 2h for a float x, divided by the step actually taken in float.
template <typename F>
double central_difference(float& x, double step, F&& f) {
  const float saved = x;
  const auto up = static_cast<float>(saved + step);
  const auto down = static_cast<float>(saved - step);
  x = up;
  const double plus = f();
  x = down;
  const double minus = f();
  x = saved;
  return (plus - minus) / (static_cast<double>(up) - static_cast<double>(down));
}

}  // namespace detail

/// Checks `layer` (already built on `graph`, whose values are initialised) at `input`: the input
/// gradient (unless options.check_input is false) and the gradient of every variable named
/// "<layer name>/...". `input` is perturbed in place and restored.
inline void check_layer_gradients(Layer& layer, Graph& graph, Tensor& input,
                                  const OpContext& context = {},
                                  const GradientCheckOptions& options = {}) {
  Tensor output;
  layer.forward(input, output, context);
  const Tensor weights = random_tensor(output.shape(), options.seed ^ 0x5eedull);
  auto objective = [&]() {
    Tensor out;
    layer.forward(input, out, context);
    double sum = 0.0;
    for (std::int64_t i = 0; i < out.size(); ++i)
      sum += static_cast<double>(out[i]) * static_cast<double>(weights[i]);
    return sum;
  };
  // Analytic gradients, from a forward pass at the unperturbed point.
  layer.forward(input, output, context);
  std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()), 0.0f);
  Tensor grad_input;
  layer.backward(input, output, weights, options.check_input ? &grad_input : nullptr, grads);

  std::mt19937_64 rng(options.seed);
  detail::Comparison comparison(options);
  auto difference = [&](float& x) { return detail::central_difference(x, options.step, objective); };
  if (options.check_input) {
    REQUIRE(grad_input.shape() == input.shape());
    for (std::int64_t i : detail::pick(input.size(), options.max_per_tensor, rng))
      comparison.compare("input", i, grad_input[i], difference(input[i]));
  }
  const std::string prefix = layer.name() + "/";
  std::span<float> values = graph.values();
  for (const Variable& v : graph.variables()) {
    if (v.name.compare(0, prefix.size(), prefix) != 0) continue;
    for (std::int64_t i : detail::pick(v.size, options.max_per_tensor, rng))
      comparison.compare(v.name, i, grads[static_cast<std::size_t>(v.offset + i)],
                         difference(values[static_cast<std::size_t>(v.offset + i)]));
  }
  comparison.finish();
}

/// Checks a whole model's parameter gradients (train_step's) against central differences of its
/// training loss, for `options.max_per_tensor` random entries of every variable (all when 0).
/// The loss is evaluated with train_step itself and the same context, so dropout masks are fixed.
inline void check_model_gradients(Model& model, const Tensor& images,
                                  std::span<const std::int32_t> labels, const OpContext& context,
                                  const GradientCheckOptions& options = {}) {
  Graph& graph = model.graph();
  std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()));
  std::vector<float> scratch(grads.size());
  model.train_step(images, labels, grads, context);
  std::span<float> values = graph.values();
  auto loss = [&]() {
    model.train_step(images, labels, scratch, context);
    return static_cast<double>(model.fetch("loss")->data()[0]);
  };
  std::mt19937_64 rng(options.seed);
  detail::Comparison comparison(options);
  for (const Variable& v : graph.variables()) {
    if (std::any_of(options.skip_variables.begin(), options.skip_variables.end(),
                    [&](const std::string& s) { return v.name.find(s) != std::string::npos; }))
      continue;
    for (std::int64_t i : detail::pick(v.size, options.max_per_tensor, rng)) {
      const std::size_t at = static_cast<std::size_t>(v.offset + i);
      comparison.compare(v.name, i, grads[at],
                         detail::central_difference(values[at], options.step, loss));
    }
  }
  comparison.finish();
}

}  // namespace cohort::testing
