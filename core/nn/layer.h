#pragma once
// The op interface. Each op (Dense, Conv2D, MaxPool2D, ReLU, ...) is a Layer with a CPU path in
// its own file under core/ops/ and, in a build with CUDA, a GPU path beside it (<op>_gpu.cc, a
// GpuLayer); the CPU path is the oracle the GPU path is tested against.

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/tensor.h"

namespace cohort {

/// What a forward pass needs to know beyond its input.
struct OpContext {
  bool training = true;     ///< dropout is active only when training
  std::uint64_t seed = 0;   ///< per-step seed (dropout masks are a function of seed and layer)
};

class GpuTensor;   // core/ops/gpu_layer.h (CUDA builds only)
struct GpuContext;

/// The GPU path of one layer, for one tower on one device: the same contract as Layer::forward()
/// and Layer::backward(), on device memory and the tower's stream. `context` holds the device copy
/// of the graph's parameters, and `grads` is the device copy of the flat gradient buffer (graph
/// layout). Defined, like GpuTensor and GpuContext, in core/ops/gpu_layer.h.
class GpuLayer {
 public:
  virtual ~GpuLayer() = default;
  virtual void forward(const GpuTensor& input, GpuTensor& output, const OpContext& op,
                       GpuContext& context) = 0;
  virtual void backward(const GpuTensor& input, const GpuTensor& output,
                        const GpuTensor& grad_output, GpuTensor* grad_input, float* grads,
                        GpuContext& context) = 0;
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

  /// A new GPU path for this built layer, on the calling thread's current device; null when the
  /// layer has none, or Cohort was built without CUDA (a model with such a layer cannot be placed
  /// on a GPU). The GpuLayer refers to this layer, which must outlive it.
  virtual std::unique_ptr<GpuLayer> make_gpu_layer() const { return nullptr; }
};

}  // namespace cohort
