#pragma once
// The op interface. Each op (Dense, Conv2D, MaxPool2D, ReLU, ...) is a Layer with a CPU path in
// its own file under core/ops/; that path is the oracle a GPU path is tested against.

#include <cstdint>
#include <span>
#include <string>

#include "cohort/core/graph.h"
#include "cohort/core/tensor.h"

namespace cohort {

/// What a forward pass needs to know beyond its input.
struct OpContext {
  bool training = true;     ///< dropout is active only when training
  std::uint64_t seed = 0;   ///< per-step seed (dropout masks are a function of seed and layer)
};

/// One op of a model, with its forward and backward pass.
///
/// build() creates (or, for another tower, reuses) the layer's variables in the graph and fixes
/// the shapes; forward() and backward() then run once per step on any batch size. A layer keeps
/// whatever it needs between forward and backward (a dropout mask, pooling argmax) and reuses its
/// buffers, so a steady-state step allocates nothing. A layer object belongs to one tower: towers
/// running on several threads each have their own layers over the shared graph.
class Layer {
 public:
  virtual ~Layer() = default;

  /// Unique within a model; variables are named "<layer name>/<variable>".
  virtual const std::string& name() const = 0;

  /// Creates or reuses variables; returns the output shape for one example of shape `input`
  /// (shapes here exclude the batch dimension).
  virtual Shape build(Graph& graph, const Shape& input) = 0;

  /// output = f(input). `input` has the batch as dimension 0; `output` is resized as needed.
  virtual void forward(const Tensor& input, Tensor& output, const OpContext& context) = 0;

  /// Given `grad_output` = dLoss/dOutput for the last forward(), overwrites this layer's slices
  /// of `grads` (the graph's flat layout) with dLoss/dVariable, and writes dLoss/dInput into
  /// `grad_input` unless it is null (the first layer skips that work).
  virtual void backward(const Tensor& input, const Tensor& output, const Tensor& grad_output,
                        Tensor* grad_input, std::span<float> grads) = 0;

  /// Floating-point operations of forward + backward for one example (for benchmarks).
  virtual double flops_per_example() const { return 0.0; }
};

}  // namespace cohort
