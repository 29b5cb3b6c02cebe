#pragma once
// A model: a graph of layers from inputs to an output, a loss on that output and metrics beside it.
//
// Sequential (a stack, the convenience):
//
//   Model model(graph, {28, 28, 1});                       // one input, 10-class classifier
//   model.add(flatten("flatten"))
//       .add(dense("hidden", 256, Activation::kRelu))
//       .add(dense("logits", 10));
//
// Functional (any graph; Keras's functional API):
//
//   Model model(graph);
//   Node x = model.input({28, 28, 16});
//   Node y = model.apply(conv2d("conv1", 16, 3), x);
//   y = model.apply(batch_norm("bn1"), y);
//   y = model.apply(add("residual"), {y, x});           // fan-in; x fans out (gradients summed)
//   ...
//   model.set_loss(std::make_unique<SoftmaxCrossEntropyLoss>());
//
//   graph.initialize(seed);
//   StepMetrics m = model.train_step(images, labels, grads, {.training = true, .seed = step});

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/layer.h"
#include "cohort/core/nn/layer_graph.h"
#include "cohort/core/nn/loss.h"
#include "cohort/core/nn/ops/ops.h"
#include "cohort/core/nn/tensor.h"

namespace cohort {

class ModelGpu;  // a model's device state (core/nn/model_gpu.cc)
struct ModelGpuDeleter {
  void operator()(ModelGpu* gpu) const noexcept;
};

/// What one step measured on its batch.
struct StepMetrics {
  static constexpr int kMaxMetrics = 16;
  float loss = 0;      ///< the loss (mean over the batch)
  /// The metric named "accuracy", else "categorical_accuracy" or "binary_accuracy"
  /// (accuracy_metric()); 0 when the model has none.
  float accuracy = 0;
  /// Every metric of the model, in Model::metric_names() order.
  std::array<float, kMaxMetrics> metrics{};
};

/// A graph of layers over a Graph's variables, with a loss and metrics.
///
/// Layers create their variables in the graph as they are applied; a second Model built the
/// same way on the same graph reuses them (a tower): it shares the parameters and has its own
/// activations and gradients. The model refers to the graph, which must outlive it. A model
/// keeps its activations between steps and reuses their storage: steps after the first allocate
/// nothing (for a fixed batch size). Movable, not copyable; not thread-safe (one thread per
/// model; models on other threads may share the graph).
class Model {
 public:
  /// An empty model: declare inputs with input(), apply layers, set a loss (softmax
  /// cross-entropy with accuracy when none is set).
  explicit Model(Graph& graph);
  /// A sequential model: one input of `example_shape` (without the batch dimension, e.g.
  /// {28, 28, 1}), layers appended with add(); softmax cross-entropy and accuracy until another
  /// loss is set. The last layer's output is what the loss checks against the data (a class's
  /// logits, a regression's values, an image); a `num_classes` above 0 also declares that it
  /// gives [num_classes] logits, checked at the first step.
  Model(Graph& graph, Shape example_shape, int num_classes = 0);
  Model(Model&&) noexcept = default;
  Model& operator=(Model&&) noexcept = default;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  /// A new input taking examples of `shape`. Inputs are fed in the order they are made.
  Node input(Shape shape, std::string name = "input");
  /// Applies `layer` (built at once, its variables created or reused) to one or more nodes and
  /// returns its output node, which becomes the model's output until another layer is applied
  /// or set_output() says otherwise. Throws InvalidArgument for a null layer, a name already
  /// used, the wrong number of inputs, a model already on a GPU, and what the layer's build
  /// throws for input shapes it cannot take.
  Node apply(std::unique_ptr<Layer> layer, Node input);
  Node apply(std::unique_ptr<Layer> layer, std::initializer_list<Node> inputs);
  Node apply(std::unique_ptr<Layer> layer, std::span<const Node> inputs);
  /// The sequential form: applies `layer` to the current output.
  Model& add(std::unique_ptr<Layer> layer);
  void set_output(Node output);
  /// The loss on the output, replacing the default (softmax cross-entropy), and the previous
  /// loss's default metrics by its own (see default_metrics()); metrics added with add_metric()
  /// stay, before or after.
  Model& set_loss(std::unique_ptr<Loss> loss);
  /// Adds a metric (at most StepMetrics::kMaxMetrics). One of the loss's default metrics of the
  /// same name gives way to it; a name added twice is InvalidArgument.
  Model& add_metric(std::unique_ptr<Metric> metric);

  /// Throws InvalidArgument, one line naming the data and the model, unless examples of
  /// `example` shape fit the model's (single) input and the loss and metrics fit `targets`.
  void check_data(const Shape& example, const TargetSpec& targets) const;

  /// Forward, loss and backward on a batch: `inputs` are [N, example...] for each input (in the
  /// order made), `targets` the labels or float targets of the N examples. Overwrites all of
  /// `grads` (graph().num_parameters() floats, the graph's layout) with dLoss/dParameters;
  /// variables this model does not use get 0. Reads the graph's values; layers with state update
  /// it (when context.update_state). Throws InvalidArgument on mismatched shapes or sizes.
  StepMetrics train_step(std::span<const Tensor* const> inputs, const Targets& targets,
                         std::span<float> grads, const OpContext& context);
  StepMetrics train_step(const Tensor& features, const Targets& targets, std::span<float> grads,
                         const OpContext& context);
  /// A classifier's step: `labels` has N entries in [0, classes).
  StepMetrics train_step(const Tensor& images, std::span<const std::int32_t> labels,
                         std::span<float> grads, const OpContext& context);

  /// A training step of one's own, where train_step()'s one loss on the output does not fit: a
  /// GAN's generator, trained through the discriminator's gradient with respect to its input; a
  /// gradient with respect to the input itself (a saliency map, an adversarial example); several
  /// models chained. Not a loss on that gradient (a WGAN-GP penalty), whose own gradient needs a
  /// second backward pass through the backward pass, which layers do not have. forward()
  /// runs the layers on a batch as train_step() does (`context`: training, the seed, whether
  /// layers with state update it) and returns the output, valid until the model's next pass.
  /// backward() then takes dLoss/dOutput for that batch (the output's shape), overwrites all of
  /// `grads` (graph().num_parameters() floats, as train_step()) and, for each input i with a
  /// non-null input_grads[i] (none, or one entry per input), writes dLoss/dInput into it (resized
  /// to the input's batch; zeros for an input the output does not depend on). train_step() is
  /// forward(), the loss, its gradient and backward(). backward() reads the tensors forward()
  /// was given: they must live, unchanged, until it returns. A second pass of a model with state
  /// (batch normalisation) in one step wants context.update_state = false, lest it update the
  /// moving statistics twice. Host only. InvalidArgument on a GPU, for backward() after anything
  /// but forward() (another step, evaluate(), predict(), a layer applied), or for sizes that do
  /// not fit.
  const Tensor& forward(std::span<const Tensor* const> inputs, const OpContext& context);
  const Tensor& forward(const Tensor& features, const OpContext& context);
  void backward(const Tensor& grad_output, std::span<float> grads,
                std::span<Tensor* const> input_grads = {});

  /// Forward pass, loss and metrics only, with training = false (dropout off, batch norm on its
  /// moving statistics).
  StepMetrics evaluate(std::span<const Tensor* const> inputs, const Targets& targets);
  StepMetrics evaluate(const Tensor& features, const Targets& targets);
  StepMetrics evaluate(const Tensor& images, std::span<const std::int32_t> labels);

  /// The model's output for new data (`features` [N, example...], as the model's input takes
  /// them): a classifier's logits, a regression's predictions; training = false, as evaluate().
  /// Host only (InvalidArgument on a GPU). The tensor is the model's, valid until its next step.
  const Tensor& predict(std::span<const Tensor* const> inputs);
  const Tensor& predict(const Tensor& features);
  /// predict()'s output as the probabilities it stands for under the model's loss
  /// (Loss::probabilities: a classifier's softmax, a multi-label model's sigmoids; what
  /// tf.nn.softmax of the logits gives). A regression has none: InvalidArgument.
  Tensor predict_probabilities(const Tensor& features);
  /// The class of each example: the largest output of its row (the first on ties), for a model
  /// trained on class labels (softmax cross-entropy); InvalidArgument for another loss.
  std::vector<std::int32_t> predict_classes(const Tensor& features);

  /// A value of the last step: "loss" and each metric's name (1-element tensors; "accuracy" also
  /// for the categorical or binary one, as StepMetrics::accuracy), "logits" (the output), or a
  /// layer's or input's name for its output (on the host only: nullptr on a GPU). nullptr for an
  /// unknown name.
  const Tensor* fetch(const std::string& name) const;
  /// The metrics' names, in StepMetrics::metrics order.
  const std::vector<std::string>& metric_names() const { return metric_names_; }
  /// While `totals` is set (not null), each step or evaluation adds every metric's
  /// Metric::counts to totals[i] (resized to the metrics), as evaluate_dataset sums them.
  /// Returns the totals set before, for the caller to set again.
  std::vector<std::vector<double>>* count_metrics(std::vector<std::vector<double>>* totals) {
    return std::exchange(metric_totals_, totals);
  }
  /// The metric named `name` (one of metric_names(); "accuracy" also names a categorical or
  /// binary one, as StepMetrics::accuracy does), or nullptr for none.
  const Metric* metric(const std::string& name) const;
  /// Metric i's value from counts summed over batches (Metric::from_counts).
  double metric_from_counts(std::size_t i, std::span<const double> counts) const {
    return metrics_.at(i)->from_counts(counts);
  }
  /// Keras's model.summary(): a table of the nodes (LayerGraph::summary), then the loss and the
  /// metrics. For a person to read; its layout may change.
  std::string summary() const;
  const Loss& loss() const { return *loss_; }

  /// Runs this model's steps on CUDA device `device` from now on, or on the host again with -1.
  /// The parameters stay in the graph, on the host: each train_step() copies them and the batch
  /// to the device, runs forward, loss and backward there (the layers' GPU paths, see
  /// Layer::make_gpu_layer), and copies back the gradients, the loss, the accuracy and the
  /// logits. `allow_tf32` lets Dense and Conv2D use TF32 tensor cores. Call after the last
  /// layer is applied (apply() on a model on a GPU throws). The calling thread's current device
  /// may change. Throws InvalidArgument when Cohort was built without CUDA, `device` is not a
  /// device this process sees, the model is not a stack of layers with a softmax cross-entropy
  /// loss, or a layer has no GPU path (naming it).
  void set_gpu(int device, bool allow_tf32 = false);
  /// The CUDA device this model runs on; -1 for the host.
  int gpu() const { return gpu_device_; }
  /// Page-locks host memory that GPU steps copy from or to (the graph's values, the gradients
  /// given to train_step()) while the returned handle lives, so that those copies run at the
  /// bus's speed (on an H200, in a separate CUDA program: 0.25 ms instead of 1 ms for the cnn's
  /// 13 MB each way). Never throws. The caller
  /// must keep `memory` allocated, at the same address, for longer than the handle (memory freed
  /// while registered would leave the driver copying to its old pages). Shared by everyone who
  /// pins the same span. nullptr, and nothing changes, without CUDA or where the driver refuses.
  static std::shared_ptr<const void> pin_for_gpu(std::span<const float> memory);

  /// Training (forward + backward) FLOPs per example, as executed: the first layer's input
  /// gradient is not computed and not counted.
  double flops_per_example() const { return layers_.flops_per_example(); }

  /// The floats of the nodes' outputs an inference pass (evaluation, prediction) may hold at
  /// once: 64M (256 MB; a layer's own scratch comes on top). Each node keeps its output for the
  /// next pass, so a batch of 1000 through a MobileNet of 224x224 images would otherwise hold
  /// tens of GB.
  static constexpr std::int64_t kInferenceActivationFloats = std::int64_t{1} << 26;
  /// The batch an inference pass asked to take `requested` examples at a time takes: fewer where
  /// their activations would exceed kInferenceActivationFloats, at least 1 (a `requested` below 1
  /// is returned for the caller to refuse). The results do not depend on it, up to the rounding
  /// of sums over batches: inference treats every example alike.
  std::int64_t inference_batch(std::int64_t requested) const {
    if (requested < 1) return requested;
    const std::int64_t per_example = std::max<std::int64_t>(layers_.activation_floats_per_example(), 1);
    return std::clamp<std::int64_t>(kInferenceActivationFloats / per_example, 1, requested);
  }

  /// The layers in the order they were applied.
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_.layers(); }
  Graph& graph() { return layers_.graph(); }
  const Graph& graph() const { return layers_.graph(); }
  /// The (first) input's example shape.
  const Shape& example_shape() const { return layers_.input_shape(0); }
  /// The shape of one example's values at `node` (an input, or a layer's output).
  const Shape& shape(Node node) const { return layers_.shape(node); }
  /// Classes of a classifier's output (its length), 0 for an output that is not a vector.
  int num_classes() const;

 private:
  // `from_loss`: one of the loss's default metrics, which set_loss replaces.
  Model& add_metric(std::unique_ptr<Metric> metric, bool from_loss);
  void check_ready() const;
  void check_targets(const Targets& targets, std::int64_t batch) const;
  StepMetrics measure(const Tensor& output, const Targets& targets);
  StepMetrics run(std::span<const Tensor* const> inputs, const Targets& targets,
                  std::span<float> grads, const OpContext& context);
  // train_step() and evaluate() on the GPU (`grads` empty: no backward pass).
  StepMetrics gpu_step(const Tensor& images, std::span<const std::int32_t> labels,
                       std::span<float> grads, const OpContext& context);

  LayerGraph layers_;
  int declared_classes_ = 0;  // the sequential constructor's num_classes, checked at the first step
  std::unique_ptr<Loss> loss_;
  std::vector<std::unique_ptr<Metric>> metrics_;
  std::vector<std::vector<double>>* metric_totals_ = nullptr;
  // Each metric of `output` against `targets` into `m` and the fetchable values (and the totals
  // being counted).
  void record_metrics(const Tensor& output, const Targets& targets, StepMetrics& m);
  std::vector<std::string> metric_names_;
  std::vector<bool> loss_metric_;  // per metric: one of the loss's defaults (set_loss replaces it)
  Tensor grad_output_;
  Tensor loss_value_;
  std::vector<Tensor> metric_values_;
  std::vector<Tensor*> input_grads_;  // where a backward pass writes dLoss/dInput (null: not asked)
  std::unique_ptr<ModelGpu, ModelGpuDeleter> gpu_;
  int gpu_device_ = -1;
  Tensor gpu_logits_;  // the last GPU step's output, copied back
  bool forward_pending_ = false;  // the last pass was forward(): backward() may follow
};

}  // namespace cohort
