#pragma once
// The built-in models, for 28x28x1 images (Fashion-MNIST) and 10 classes.

#include <cstdint>
#include <string>
#include <vector>

#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/model.h"

namespace cohort {

/// Multilayer perceptron: one ReLU Dense per entry of `hidden`, then 10 logits (the first Dense
/// flattens the images).
/// Variables "hidden1/...", "hidden2/...", ..., "logits/...".
Model mlp(Graph& graph, std::vector<std::int64_t> hidden = {256, 128});

/// TensorFlow's "Deep MNIST" tutorial network: conv 5x5x32 SAME + ReLU, max-pool 2, conv 5x5x64
/// SAME + ReLU, max-pool 2, Dense 1024 + ReLU, dropout, Dense 10.
Model cnn(Graph& graph, float dropout_rate = 0.5f);

/// A small, fast CNN: conv 3x3x16 SAME + ReLU, max-pool 2, conv 3x3x32 SAME + ReLU, max-pool 2,
/// Dense 10.
Model small_cnn(Graph& graph);

/// The built-in model `name` ("mlp", "cnn" or "small_cnn"); `hidden` is used by mlp only. Throws
/// InvalidArgument naming the known models for any other name.
Model build_model(const std::string& name, Graph& graph,
                  const std::vector<std::int64_t>& hidden = {256, 128});

}  // namespace cohort
