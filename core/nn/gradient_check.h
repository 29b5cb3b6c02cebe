#pragma once
// A numerical gradient checker in the spirit of Caffe's GradientChecker, for the user's own
// layers as for Cohort's: the analytic gradients a layer's (or a model's) backward pass produces
// are compared with central differences of its forward pass.
//
//   cohort::Graph graph;
//   MyLayer layer("mine");
//   layer.build(graph, {8});
//   graph.initialize(1);
//   cohort::Tensor x = cohort::random_tensor({4, 8}, /*seed=*/2);
//   const auto result = cohort::check_layer_gradients(layer, graph, x);
//   if (!result.ok()) std::fputs(result.report.c_str(), stderr);
//
// For a layer the scalar under test is L = sum_i w_i * output_i with fixed random weights w, so
// every output element takes part; its gradient with respect to the output is w itself. The
// difference quotient is computed from float forward passes with the sum in double, and compared
// with a relative criterion: |analytic - numeric| <= threshold * max(|analytic|, |numeric|, floor).

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/layer.h"
#include "cohort/core/nn/loss.h"
#include "cohort/core/nn/model.h"
#include "cohort/core/nn/tensor.h"

namespace cohort {

struct GradientCheckOptions {
  double step = 1e-2;       ///< finite-difference step h: (L(x + h) - L(x - h)) / 2h
  double threshold = 1e-2;  ///< relative error allowed
  double floor = 1e-1;      ///< smallest scale the relative error is taken against
  std::uint64_t seed = 1;   ///< for the output weights and the sampled entries
  /// Check at most this many entries of each input and of each variable (evenly spread random
  /// picks); 0 checks them all.
  std::int64_t max_per_tensor = 0;
  bool check_input = true;
  /// Variables whose name contains one of these are not checked.
  std::vector<std::string> skip_variables;
};

/// What a check found.
struct GradientCheckResult {
  std::int64_t checked = 0;   ///< entries compared
  std::int64_t failures = 0;  ///< entries outside the threshold
  double max_abs = 0;         ///< the largest analytic gradient seen
  double worst = 0;           ///< the largest error relative to the entry's scale
  /// check_model_gradients: how far a numeric gradient may be off from the float rounding of
  /// the loss alone, 2 * FLT_EPSILON * |loss| / (2 * step), allowed beside the threshold (the
  /// check resolves no finer: scale a large loss down, or take a larger step, for a finer one).
  double rounding = 0;
  /// The first failures, one line each ("mine/kernel[3]: analytic 0.12, numeric 0.31").
  std::string report;
  /// Something was checked, nothing failed, and the gradients were not all (near) zero, which
  /// would make the comparison vacuous.
  bool ok(const GradientCheckOptions& options = {}) const {
    return checked > 0 && failures == 0 && max_abs > options.floor * options.threshold;
  }
};

/// Checks `layer` (built on `graph`, whose values are initialised) at `inputs` (one tensor per
/// input of the layer; perturbed in place and restored): the input gradients (unless
/// options.check_input is false) and the gradients of the trainable variables named
/// "<layer name>/...". Runs forward and backward with `context` (use a fixed seed for a layer
/// with randomness).
GradientCheckResult check_layer_gradients(Layer& layer, Graph& graph,
                                          std::span<Tensor* const> inputs,
                                          const OpContext& context = {},
                                          const GradientCheckOptions& options = {});
/// The same for a layer of one input.
GradientCheckResult check_layer_gradients(Layer& layer, Graph& graph, Tensor& input,
                                          const OpContext& context = {},
                                          const GradientCheckOptions& options = {});

/// Checks a whole model's parameter gradients (train_step's) against central differences of
/// its training loss, for options.max_per_tensor random entries of every trainable variable (all
/// when 0). The loss is evaluated with train_step and the same context, so dropout masks are
/// fixed. The loss is a float, so its rounding is allowed beside the threshold
/// (GradientCheckResult::rounding): about 7e-3 for a loss of 600 at a step of 1e-2.
GradientCheckResult check_model_gradients(Model& model, const Tensor& features,
                                          const Targets& targets, const OpContext& context = {},
                                          const GradientCheckOptions& options = {});

/// (f(x + h) - f(x - h)) / 2h, x perturbed in place and restored, divided by the step actually
/// taken in float: the numerical derivative of f with respect to one float (a loss's input, say).
double central_difference(float& x, double step, const std::function<double()>& f);

/// Tensor of `shape` with entries uniform in [lo, hi), from `seed`.
Tensor random_tensor(const Shape& shape, std::uint64_t seed, float lo = -1.0f, float hi = 1.0f);

/// Tensor of `shape` whose entries are distinct and at least `spacing` apart (a shuffled ramp
/// centred on 0): max pooling and ReLU see no ties and no value within `spacing` / 2 of a kink.
Tensor spaced_tensor(const Shape& shape, std::uint64_t seed, float spacing = 0.05f);

}  // namespace cohort
