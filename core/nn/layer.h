#pragma once
// The op interface. Each op (Dense, Conv2D, MaxPool2D, ReLU, ...) is a Layer with a CPU path in
// its own file under core/nn/ops/ and, in a build with CUDA, a GPU path beside it (<op>_gpu.cc,
// a GpuLayer); the CPU path is the oracle the GPU path is tested against. Most layers take one
// input (Layer); layers that join several (Add, Concatenate) derive from MergeLayer; layers over
// sequences that can skip padding take a mask beside their input (MaskableLayer, ops/masking.h).

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/tensor.h"

namespace cohort {

/// An elementwise function fused into the output pass of a layer (Dense, Conv2D,
/// BatchNormalization): one pass over the output instead of two.
enum class Activation { kNone, kRelu };

class InPlaceUpdate;  // nn/optimizer.h

/// Sums small vectors over every replica of a training job (collective: each replica calls it
/// with the same sizes in the same order). What synchronised batch normalisation reduces its
/// statistics with; the trainer provides it (over MPI) in the modes where every replica computes
/// every step. Implementations live above nn/, which knows no MPI.
class CrossReplicaSum {
 public:
  virtual ~CrossReplicaSum() = default;
  /// values := the element-wise sum of every replica's `values`. Blocking.
  virtual void sum(std::span<double> values) = 0;
  /// How many replicas take part.
  virtual int replicas() const = 0;
};

/// Told during a backward pass as parameter gradients become final, so that they can leave (be
/// reduced over the replicas) while the layers before them still compute. The trainer provides
/// it in the modes that overlap communication with the backward pass; nn/ knows no MPI.
class GradientListener {
 public:
  virtual ~GradientListener() = default;
  /// Every gradient at [begin, number of parameters) of the flat buffer is final. Within one
  /// backward pass each call has a lower begin than the one before, down to 0 (when there are
  /// parameters).
  virtual void ready(std::int64_t begin) = 0;
};

/// What a forward pass needs to know beyond its input (and what a layer keeps of it for the
/// backward pass that follows: the update in place).
struct OpContext {
  bool training = true;     ///< dropout is active, batch norm uses batch statistics
  std::uint64_t seed = 0;   ///< per-step seed (dropout masks are a function of seed and layer)
  /// Layers with non-trainable state (batch norm's moving statistics) update it only when set:
  /// the first tower of a replica does, the others compute with the same parameters but leave
  /// the shared state alone (TensorFlow's multi-tower rule).
  bool update_state = true;
  /// For synchronised batch norm: batch statistics are summed over the replicas through it.
  /// Null: statistics are this batch's alone.
  CrossReplicaSum* cross_replica = nullptr;
  /// Told as the backward pass of a training step finishes each part of the gradients (CPU
  /// models; a GPU model's pass tells nothing). Null: nobody listens.
  GradientListener* gradients_ready = nullptr;
  /// Plain SGD made inside the products that compute the parameters' gradients
  /// (nn/optimizer.h), for the backward pass that follows this forward pass: a layer that can
  /// (Dense) keeps the pointer, updates a parameter in its backward pass where rate() allows,
  /// and leaves that parameter's gradient unwritten. Null: the layers write every gradient.
  InPlaceUpdate* update_in_place = nullptr;
};

class GpuTensor;   // core/nn/ops/gpu_layer.h (CUDA builds only)
struct GpuContext;

/// The GPU path of one layer, for one tower on one device: the same contract as Layer::forward()
/// and Layer::backward(), on device memory and the tower's stream. `context` holds the device copy
/// of the graph's parameters, and `grads` is the device copy of the flat gradient buffer (graph
/// layout). Defined, like GpuTensor and GpuContext, in core/nn/ops/gpu_layer.h.
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
/// running on several threads each have their own layers over the shared graph. A layer is
/// applied once in a model (a node of its graph); layers that share weights are separate
/// objects naming the same variables: in different models (towers), or in one model through
/// shared() (composite.h), whose gradients the model adds up.
///
/// The single-input methods below are what a layer of one input implements. The graph calls the
/// general forms further down (build_node, forward_node, backward_node), which by default forward
/// to them; MergeLayer implements the general forms instead.
class Layer {
 public:
  virtual ~Layer() = default;

  /// Unique within a model; variables are named "<variable_scope()>/<variable>".
  virtual const std::string& name() const = 0;
  /// The prefix of the variables the layer owns (whose gradients its backward writes): its name,
  /// unless it applies another layer's variables again (shared()). Within a model, a variable
  /// belongs to the layers of the longest scope it is under ("p/aux/kernel" to "p/aux", not
  /// "p").
  virtual const std::string& variable_scope() const { return name(); }

  /// Creates or reuses variables; returns the output shape for one example of shape `input`
  /// (shapes here exclude the batch dimension).
  virtual Shape build(Graph& graph, const Shape& input) = 0;

  /// output = f(input). `input` has the batch as dimension 0; `output` is resized as needed.
  virtual void forward(const Tensor& input, Tensor& output, const OpContext& context) = 0;

  /// Given `grad_output` = dLoss/dOutput for the last forward(), overwrites this layer's slices
  /// of `grads` (the graph's flat layout) with dLoss/dVariable, and writes dLoss/dInput into
  /// `grad_input` unless it is null (the first layer skips that work). A layer that updated a
  /// variable in place (the forward context's update_in_place) leaves that slice alone.
  virtual void backward(const Tensor& input, const Tensor& output, const Tensor& grad_output,
                        Tensor* grad_input, std::span<float> grads) = 0;

  /// Floating-point operations of forward + backward for one example (for benchmarks).
  virtual double flops_per_example() const { return 0.0; }
  /// The part of flops_per_example() spent on the input's gradient, which a first layer skips.
  virtual double input_grad_flops_per_example() const { return 0.0; }

  /// A new GPU path for this built layer, on the calling thread's current device; null when the
  /// layer has none, or Cohort was built without CUDA (a model with such a layer cannot be placed
  /// on a GPU). The GpuLayer refers to this layer, which must outlive it.
  virtual std::unique_ptr<GpuLayer> make_gpu_layer() const { return nullptr; }

  // The general forms the graph calls, for any number of inputs.

  /// How many inputs the layer takes: 1 for most; 0 for any number from 2 up (Add, Concatenate).
  virtual int num_inputs() const { return 1; }
  /// Whether the layer may also be applied to {inputs..., mask}, the mask [steps] of its
  /// sequence input [steps, features] (the last, or the one the layer names) saying which steps
  /// to read (MaskableLayer, ops/masking.h).
  virtual bool takes_mask() const { return false; }
  virtual Shape build_node(Graph& graph, std::span<const Shape> inputs) {
    return build(graph, inputs[0]);
  }
  virtual void forward_node(std::span<const Tensor* const> inputs, Tensor& output,
                            const OpContext& context) {
    forward(*inputs[0], output, context);
  }
  /// grad_inputs[i] is null where input i needs no gradient.
  virtual void backward_node(std::span<const Tensor* const> inputs, const Tensor& output,
                             const Tensor& grad_output, std::span<Tensor* const> grad_inputs,
                             std::span<float> grads) {
    backward(*inputs[0], output, grad_output, grad_inputs[0], grads);
  }
};

/// A layer that joins two or more inputs (Add, Concatenate, a user's). It implements the general
/// forms; the single-input ones are not for it and throw.
class MergeLayer : public Layer {
 public:
  int num_inputs() const override { return 0; }
  Shape build_node(Graph& graph, std::span<const Shape> inputs) override = 0;
  void forward_node(std::span<const Tensor* const> inputs, Tensor& output,
                    const OpContext& context) override = 0;
  void backward_node(std::span<const Tensor* const> inputs, const Tensor& output,
                     const Tensor& grad_output, std::span<Tensor* const> grad_inputs,
                     std::span<float> grads) override = 0;

  Shape build(Graph&, const Shape&) final;
  void forward(const Tensor&, Tensor&, const OpContext&) final;
  void backward(const Tensor&, const Tensor&, const Tensor&, Tensor*, std::span<float>) final;
};

}  // namespace cohort
