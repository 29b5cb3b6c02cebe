#pragma once
// A model: a stack of layers over a graph, with a softmax cross-entropy loss on its last output.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/layer.h"
#include "cohort/core/nn/ops/ops.h"
#include "cohort/core/nn/tensor.h"

namespace cohort {

class ModelGpu;  // a model's device state (core/model_gpu.cc)
struct ModelGpuDeleter {
  void operator()(ModelGpu* gpu) const noexcept;
};

/// What one step measured on its batch.
struct StepMetrics {
  float loss = 0;      ///< mean softmax cross-entropy
  float accuracy = 0;  ///< fraction of examples whose top logit is the label
};

/// A sequential classifier: layers applied in order to a batch of examples, the last producing
/// `num_classes` logits, trained with the mean softmax cross-entropy.
///
///   Graph graph;
///   Model model(graph, {28, 28, 1});
///   model.add(flatten("flatten")).add(dense("hidden", 256, Activation::kRelu)).add(dense("logits", 10));
///   graph.initialize(seed);
///   StepMetrics m = model.train_step(images, labels, grads, {.training = true, .seed = step});
///
/// Layers create their variables in the graph as they are added; a second Model built the same
/// way on the same graph reuses them (a tower): it shares the parameters and has its own
/// activations and gradients. The model refers to the graph, which must outlive it. A model
/// keeps its activations between steps and reuses their storage: steps after the first allocate
/// nothing (for a fixed batch size). Movable, not copyable; not thread-safe (one thread per
/// model; models on other threads may share the graph).
class Model {
 public:
  /// `example_shape` is one example's shape without the batch dimension, e.g. {28, 28, 1}.
  Model(Graph& graph, Shape example_shape, int num_classes = 10);
  Model(Model&&) noexcept = default;
  Model& operator=(Model&&) noexcept = default;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  /// Appends `layer` and builds it at once (creating or reusing its variables). Throws
  /// InvalidArgument for a null layer or a name already used in this model, and whatever the
  /// layer's build throws for an input shape it cannot take.
  Model& add(std::unique_ptr<Layer> layer);

  /// Forward, loss and backward on a batch: `images` is [N, example_shape...], `labels` has N
  /// entries in [0, num_classes). Overwrites all of `grads` (graph().num_parameters() floats, the
  /// graph's layout) with dLoss/dParameters; variables this model does not use get 0. Reads the
  /// graph's values. Throws InvalidArgument on mismatched shapes or sizes.
  StepMetrics train_step(const Tensor& images, std::span<const std::int32_t> labels,
                         std::span<float> grads, const OpContext& context);

  /// Forward pass and metrics only, with training = false (dropout off).
  StepMetrics evaluate(const Tensor& images, std::span<const std::int32_t> labels);

  /// A value of the last step: "loss", "accuracy" (1-element tensors), "logits" [N, classes], or
  /// a layer's name for its output (on the host only: nullptr on a GPU). nullptr for an unknown
  /// name.
  const Tensor* fetch(const std::string& name) const;

  /// Runs this model's steps on CUDA device `device` from now on, or on the host again with -1.
  /// The parameters stay in the graph, on the host: each train_step() copies them and the batch
  /// to the device, runs forward, loss and backward there (the layers' GPU paths, see
  /// Layer::make_gpu_layer), and copies back the gradients, the loss, the accuracy and the
  /// logits. `allow_tf32` lets Dense and Conv2D use TF32 tensor cores. Call after the last add()
  /// (add() on a model on a GPU throws). The calling thread's current device may change.
  /// Throws InvalidArgument when Cohort was built without CUDA, `device` is not a device this
  /// process sees, or a layer has no GPU path (naming it).
  void set_gpu(int device, bool allow_tf32 = false);
  /// The CUDA device this model runs on; -1 for the host.
  int gpu() const { return gpu_device_; }

  /// Training (forward + backward) FLOPs per example, as executed: the first layer's input
  /// gradient is not computed and not counted.
  double flops_per_example() const;

  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }
  Graph& graph() { return *graph_; }
  const Graph& graph() const { return *graph_; }
  const Shape& example_shape() const { return shapes_.front(); }
  int num_classes() const { return num_classes_; }

 private:
  void check_batch(const Tensor& images, std::span<const std::int32_t> labels) const;
  void forward(const Tensor& images, const OpContext& context);
  StepMetrics metrics(const Tensor& logits, std::span<const std::int32_t> labels);
  void zero_unused_gradients(std::span<float> grads);
  // train_step() and evaluate() on the GPU (`grads` empty: no backward pass).
  StepMetrics gpu_step(const Tensor& images, std::span<const std::int32_t> labels,
                       std::span<float> grads, const OpContext& context);

  Graph* graph_;
  int num_classes_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<Shape> shapes_;            // shapes_[0]: an example; shapes_[i + 1]: layer i's output
  std::vector<bool> has_variables_;      // per layer
  std::vector<Tensor> outputs_;          // per layer, the last forward's output
  Tensor grad_a_, grad_b_;               // gradients of consecutive activations, ping-ponged
  SoftmaxCrossEntropy loss_;
  Tensor loss_value_, accuracy_value_;
  // Parameter ranges [begin, end) of the graph that no layer of this model writes a gradient to,
  // recomputed when the graph has grown.
  std::vector<std::pair<std::int64_t, std::int64_t>> unused_ranges_;
  std::int64_t unused_ranges_for_ = -1;
  std::unique_ptr<ModelGpu, ModelGpuDeleter> gpu_;
  int gpu_device_ = -1;
};

}  // namespace cohort
