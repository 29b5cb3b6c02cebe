#include "cohort/core/nn/gradient_check.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>

#include "cohort/core/base/error.h"

namespace cohort {
namespace {

// Indices of `size` entries to check: all of them, or `limit` distinct random ones.
std::vector<std::int64_t> pick(std::int64_t size, std::int64_t limit, std::mt19937_64& rng) {
  std::vector<std::int64_t> all(static_cast<std::size_t>(size));
  for (std::int64_t i = 0; i < size; ++i) all[static_cast<std::size_t>(i)] = i;
  if (limit > 0 && limit < size) {
    std::shuffle(all.begin(), all.end(), rng);
    all.resize(static_cast<std::size_t>(limit));
    std::sort(all.begin(), all.end());
  }
  return all;
}

class Comparison {
 public:
  explicit Comparison(const GradientCheckOptions& options) : options_(options) {}

  // `rounding`: how far the numeric value may be off from rounding alone, allowed beside the
  // threshold.
  void compare(const std::string& what, std::int64_t index, double analytic, double numeric,
               double rounding = 0.0) {
    ++result_.checked;
    const double scale = std::max({std::abs(analytic), std::abs(numeric), options_.floor});
    result_.max_abs = std::max(result_.max_abs, std::abs(analytic));
    result_.rounding = std::max(result_.rounding, rounding);
    const double error = std::max(0.0, std::abs(analytic - numeric) - rounding) / scale;
    result_.worst = std::max(result_.worst, error);
    if (error <= options_.threshold) return;
    if (++result_.failures <= 10)
      report_ << what << "[" << index << "]: analytic " << analytic << ", numeric " << numeric
              << "\n";
  }

  GradientCheckResult finish() {
    result_.report = report_.str();
    return result_;
  }

 private:
  GradientCheckOptions options_;
  GradientCheckResult result_;
  std::ostringstream report_;
};

bool skipped(const std::string& name, const GradientCheckOptions& options) {
  return std::any_of(options.skip_variables.begin(), options.skip_variables.end(),
                     [&](const std::string& s) { return name.find(s) != std::string::npos; });
}

}  // namespace

GradientCheckResult check_layer_gradients(Layer& layer, Graph& graph,
                                          std::span<Tensor* const> inputs,
                                          const OpContext& context,
                                          const GradientCheckOptions& options) {
  std::vector<const Tensor*> in(inputs.begin(), inputs.end());
  Tensor output;
  layer.forward_node(in, output, context);
  const Tensor weights = random_tensor(output.shape(), options.seed ^ 0x5eedull);
  auto objective = [&]() {
    Tensor out;
    layer.forward_node(in, out, context);
    double sum = 0.0;
    for (std::int64_t i = 0; i < out.size(); ++i)
      sum += static_cast<double>(out[i]) * static_cast<double>(weights[i]);
    return sum;
  };
  // Analytic gradients, from a forward pass at the unperturbed point.
  layer.forward_node(in, output, context);
  std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()), 0.0f);
  std::vector<Tensor> grad_inputs(inputs.size());
  std::vector<Tensor*> grad_ptrs;
  for (Tensor& g : grad_inputs) grad_ptrs.push_back(options.check_input ? &g : nullptr);
  layer.backward_node(in, output, weights, grad_ptrs, grads);

  std::mt19937_64 rng(options.seed);
  Comparison comparison(options);
  auto difference = [&](float& x) { return central_difference(x, options.step, objective); };
  if (options.check_input) {
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      Tensor& input = *inputs[k];
      if (grad_inputs[k].shape() != input.shape())
        throw InvalidArgument("check_layer_gradients: layer \"" + layer.name() +
                              "\" wrote an input gradient of shape " +
                              to_string(grad_inputs[k].shape()) + " for input " +
                              to_string(input.shape()));
      const std::string what = inputs.size() == 1 ? "input" : "input" + std::to_string(k);
      for (std::int64_t i : pick(input.size(), options.max_per_tensor, rng))
        comparison.compare(what, i, grad_inputs[k][i], difference(input[i]));
    }
  }
  const std::string prefix = layer.variable_scope() + "/";
  std::span<float> values = graph.values();
  for (const Variable& v : graph.variables()) {
    if (!v.trainable || v.name.compare(0, prefix.size(), prefix) != 0 || skipped(v.name, options))
      continue;
    for (std::int64_t i : pick(v.size, options.max_per_tensor, rng))
      comparison.compare(v.name, i, grads[static_cast<std::size_t>(v.offset + i)],
                         difference(values[static_cast<std::size_t>(v.offset + i)]));
  }
  return comparison.finish();
}

GradientCheckResult check_layer_gradients(Layer& layer, Graph& graph, Tensor& input,
                                          const OpContext& context,
                                          const GradientCheckOptions& options) {
  Tensor* inputs[] = {&input};
  return check_layer_gradients(layer, graph, inputs, context, options);
}

GradientCheckResult check_model_gradients(Model& model, const Tensor& features,
                                          const Targets& targets, const OpContext& context,
                                          const GradientCheckOptions& options) {
  Graph& graph = model.graph();
  std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()));
  std::vector<float> scratch(grads.size());
  const float at_start = model.train_step(features, targets, grads, context).loss;
  std::span<float> values = graph.values();
  auto loss = [&]() {
    return static_cast<double>(model.train_step(features, targets, scratch, context).loss);
  };
  // The loss is a float: each of the two evaluations is off by about its last bit, so that a
  // large loss (a sum over an image's pixels: 600, say) leaves the difference quotient coarse
  // (7e-3 at a step of 1e-2), however right the gradient. That much is allowed.
  const double rounding = 2 * std::numeric_limits<float>::epsilon() *
                          std::abs(static_cast<double>(at_start)) / (2 * options.step);
  std::mt19937_64 rng(options.seed);
  Comparison comparison(options);
  for (const Variable& v : graph.variables()) {
    if (!v.trainable || skipped(v.name, options)) continue;
    for (std::int64_t i : pick(v.size, options.max_per_tensor, rng)) {
      const std::size_t at = static_cast<std::size_t>(v.offset + i);
      comparison.compare(v.name, i, grads[at], central_difference(values[at], options.step, loss),
                         rounding);
    }
  }
  return comparison.finish();
}

double central_difference(float& x, double step, const std::function<double()>& f) {
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

Tensor random_tensor(const Shape& shape, std::uint64_t seed, float lo, float hi) {
  Tensor t(shape);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  for (float& x : t.span()) x = u(rng);
  return t;
}

Tensor spaced_tensor(const Shape& shape, std::uint64_t seed, float spacing) {
  Tensor t(shape);
  std::vector<std::int64_t> order(static_cast<std::size_t>(t.size()));
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int64_t>(i);
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  const double centre = 0.5 * static_cast<double>(t.size()) - 0.25;  // keeps 0 off the ramp
  for (std::int64_t i = 0; i < t.size(); ++i)
    t[i] = static_cast<float>((static_cast<double>(order[static_cast<std::size_t>(i)]) - centre) *
                              spacing);
  return t;
}

}  // namespace cohort
