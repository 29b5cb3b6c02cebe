#pragma once
// The library's gradient checker (core/nn/gradient_check.h) as doctest assertions, for the op and
// model tests.

#include <doctest/doctest.h>

#include <span>

#include "cohort/core/nn/gradient_check.h"
#include "cohort/core/nn/threads.h"

namespace cohort::testing {

using cohort::GradientCheckOptions;
using cohort::random_tensor;
using cohort::spaced_tensor;

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

}  // namespace cohort::testing
