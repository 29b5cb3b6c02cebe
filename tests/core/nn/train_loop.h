#pragma once
// A plain training loop for the tests that check a model learns: whole-batch steps with Adam.

#include <cstdint>
#include <vector>

#include "cohort/core/nn/loss.h"
#include "cohort/core/nn/model.h"
#include "cohort/core/nn/optimizer.h"
#include "cohort/core/nn/tensor.h"

namespace cohort::testing {

/// `steps` steps of Adam at `rate` on the whole of (features, targets), a step's dropout seed
/// its index.
inline void train_with_adam(Model& model, const Tensor& features, const Targets& targets,
                            int steps, double rate = 0.01) {
  OptimizerOptions options;
  options.name = "adam";
  options.learning_rate.base = rate;
  auto optimizer = Optimizer::create(options);
  Graph& graph = model.graph();
  std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()));
  for (int step = 0; step < steps; ++step) {
    model.train_step(features, targets, grads, {.seed = static_cast<std::uint64_t>(step)});
    optimizer->apply(graph.values(), grads, step);
  }
}

}  // namespace cohort::testing
