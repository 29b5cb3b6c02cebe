#pragma once
// The library's gradient checker (core/nn/gradient_check.h) as doctest assertions, for the op and
// model tests.

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cohort/core/nn/gradient_check.h"
#include "cohort/core/nn/threads.h"

namespace cohort::testing {

using cohort::GradientCheckOptions;
using cohort::random_tensor;
using cohort::spaced_tensor;

// Overwrites the graph's variable `name` with `values`, as many as it holds.
inline void set_variable(Graph& graph, const std::string& name, const std::vector<float>& values) {
  const Variable* v = graph.find(name);
  REQUIRE(v != nullptr);
  REQUIRE(v->size == static_cast<std::int64_t>(values.size()));
  std::copy(values.begin(), values.end(), graph.values(*v).begin());
}

// a + step * k for k = 0, 1, ...: distinct values per channel.
inline std::vector<float> ramp(std::int64_t n, float a, float step) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::size_t k = 0; k < v.size(); ++k) v[k] = a + step * static_cast<float>(k);
  return v;
}

// The shape of a batch of n examples of `example` shape.
inline Shape with_batch(std::int64_t n, const Shape& example) {
  Shape shape{n};
  shape.insert(shape.end(), example.begin(), example.end());
  return shape;
}

// The op and model tests run single-threaded unless a test says otherwise: OpenMP's default is a
// thread per core, and its spinning threads crawl on a loaded machine.
inline const bool kSingleThreadedTests = (set_intra_op_threads(1), true);

/// Asserts that every entry matched and that the gradients were not all (near) zero.
inline void expect_ok(const GradientCheckResult& result, const GradientCheckOptions& options) {
  INFO(result.report);
  CHECK(result.checked > 0);
  CHECK(result.failures == 0);
  CHECK(result.max_abs > options.floor * options.threshold);
}

inline void expect_layer_gradients(Layer& layer, Graph& graph, Tensor& input,
                                  const OpContext& context = {},
                                  const GradientCheckOptions& options = {}) {
  expect_ok(cohort::check_layer_gradients(layer, graph, input, context, options), options);
}

inline void expect_layer_gradients(Layer& layer, Graph& graph, std::span<Tensor* const> inputs,
                                  const OpContext& context = {},
                                  const GradientCheckOptions& options = {}) {
  expect_ok(cohort::check_layer_gradients(layer, graph, inputs, context, options), options);
}

inline void expect_model_gradients(Model& model, const Tensor& features, const Targets& targets,
                                  const OpContext& context = {},
                                  const GradientCheckOptions& options = {}) {
  expect_ok(cohort::check_model_gradients(model, features, targets, context, options), options);
}

inline void expect_model_gradients(Model& model, const Tensor& images,
                                  std::span<const std::int32_t> labels, const OpContext& context,
                                  const GradientCheckOptions& options = {}) {
  expect_model_gradients(model, images, Targets{labels, nullptr}, context, options);
}

/// Runs `layer` (built in `graph`) forward and backward on `x` with 1 intra-op thread, then with
/// `threads`: the outputs and the input's gradient must be equal, and the variables' gradients
/// equal but for the order of their sums (to 1e-5). The gradients start as NaN each time, so a
/// backward pass that adds to them instead of writing them fails.
inline void expect_same_on_threads(Layer& layer, Graph& graph, const Tensor& x, int threads) {
  std::vector<std::vector<float>> outputs, input_grads, grads;
  for (const int count : {1, threads}) {
    set_intra_op_threads(count);
    Tensor y, dx;
    layer.forward(x, y, {});
    std::vector<float> g(static_cast<std::size_t>(graph.num_parameters()),
                         std::numeric_limits<float>::quiet_NaN());
    layer.backward(x, y, random_tensor(y.shape(), 8), &dx, g);
    set_intra_op_threads(1);
    outputs.emplace_back(y.span().begin(), y.span().end());
    input_grads.emplace_back(dx.span().begin(), dx.span().end());
    grads.push_back(std::move(g));
  }
  CHECK(outputs[0] == outputs[1]);
  CHECK(input_grads[0] == input_grads[1]);
  for (std::size_t i = 0; i < grads[0].size(); ++i)
    REQUIRE(grads[1][i] == doctest::Approx(grads[0][i]).epsilon(1e-5));
}

}  // namespace cohort::testing
