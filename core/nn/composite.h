#pragma once
// Layers made of layers: a subclass says how its layers are wired (compose()) and nothing else;
// forward and backward run the small graph it built, so it has no backward pass to write.
//
//   class ResidualBlock : public cohort::CompositeLayer {
//    public:
//     ResidualBlock(std::string name, std::int64_t filters)
//         : CompositeLayer(std::move(name)), filters_(filters) {}
//    protected:
//     cohort::Node compose(cohort::Node x) override {
//       cohort::Node y = apply(cohort::conv2d(scoped("conv1"), filters_, 3, cohort::Activation::kRelu), x);
//       y = apply(cohort::conv2d(scoped("conv2"), filters_, 3), y);
//       return apply(cohort::add(scoped("add")), {y, x});
//     }
//    private:
//     std::int64_t filters_;
//   };

#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cohort/core/nn/layer.h"
#include "cohort/core/nn/layer_graph.h"

namespace cohort {

/// A layer of one input built from other layers. The sublayers' variables are the composite's
/// ("<name>/<sublayer>/...": sublayers are named with scoped(), or with the composite's own
/// name), so a model sees one layer: its gradients, its GPU refusal (a composite has no GPU
/// path), its FLOPs.
class CompositeLayer : public Layer {
 public:
  explicit CompositeLayer(std::string name) : name_(std::move(name)) {}

  const std::string& name() const final { return name_; }
  /// Calls compose() once on an input node of `input` shape; returns its output's shape.
  Shape build(Graph& graph, const Shape& input) final;
  void forward(const Tensor& input, Tensor& output, const OpContext& context) final;
  void backward(const Tensor& input, const Tensor& output, const Tensor& grad_output,
                Tensor* grad_input, std::span<float> grads) final;
  double flops_per_example() const override;
  /// The sublayers, in the order compose() applied them.
  const std::vector<std::unique_ptr<Layer>>& layers() const;

 protected:
  /// Wires the composite: applies layers to `input` (and to the nodes they return) and returns
  /// the output node. Called once, from build().
  virtual Node compose(Node input) = 0;
  /// For compose(): applies `layer` to one node or several. InvalidArgument when the layer's
  /// variables would not be under the composite's name (a sublayer not named with scoped()).
  Node apply(std::unique_ptr<Layer> layer, Node input);
  Node apply(std::unique_ptr<Layer> layer, std::initializer_list<Node> inputs);
  /// "<composite name>/<sublayer>": the name to give a sublayer.
  std::string scoped(const std::string& sublayer) const { return name_ + "/" + sublayer; }

 private:
  std::string name_;
  std::optional<LayerGraph> graph_;
};

/// Applies the variables of another layer again, as a Keras layer called on two inputs does
/// (a siamese network's encoder, an embedding shared by two inputs): `layer` is made as that
/// layer is (same class, name and options; it reuses the variables of its name), and the node
/// is named `name`. The model adds the gradients of every application, and a dropout in it
/// draws a mask of its own in each. A shape that does not fit the variables is refused as the
/// layer's build refuses it (InvalidArgument naming the variable), as is a layer of another
/// class, and one whose variables are not there yet (a misspelt name, which would train a second
/// copy); other options are not compared: make both layers with one function. CPU only: a model
/// with a shared layer has no GPU path.
///
///   model.apply(encoder("encoder"), {left});                               // creates encoder/...
///   model.apply(cohort::shared("encoder_right", encoder("encoder")), {right});  // applies them again
class SharedLayer final : public Layer {
 public:
  SharedLayer(std::string name, std::unique_ptr<Layer> layer);

  const std::string& name() const override { return name_; }
  const std::string& variable_scope() const override { return layer_->variable_scope(); }
  Shape build(Graph& graph, const Shape& input) override { return layer_->build(graph, input); }
  void forward(const Tensor& input, Tensor& output, const OpContext& context) override {
    layer_->forward(input, output, own(context));
  }
  void backward(const Tensor& input, const Tensor& output, const Tensor& grad_output,
                Tensor* grad_input, std::span<float> grads) override {
    layer_->backward(input, output, grad_output, grad_input, grads);
  }
  double flops_per_example() const override { return layer_->flops_per_example(); }
  double input_grad_flops_per_example() const override { return layer_->input_grad_flops_per_example(); }
  int num_inputs() const override { return layer_->num_inputs(); }
  bool takes_mask() const override { return layer_->takes_mask(); }
  Shape build_node(Graph& graph, std::span<const Shape> inputs) override {
    return layer_->build_node(graph, inputs);
  }
  void forward_node(std::span<const Tensor* const> inputs, Tensor& output,
                    const OpContext& context) override {
    layer_->forward_node(inputs, output, own(context));
  }
  void backward_node(std::span<const Tensor* const> inputs, const Tensor& output,
                     const Tensor& grad_output, std::span<Tensor* const> grad_inputs,
                     std::span<float> grads) override {
    layer_->backward_node(inputs, output, grad_output, grad_inputs, grads);
  }
  const Layer& layer() const { return *layer_; }

 private:
  // The context with a seed of this node's own: a dropout in the layer draws another mask in
  // each application, as a Keras layer called twice does.
  OpContext own(const OpContext& context) const;

  std::string name_;
  std::unique_ptr<Layer> layer_;
};

std::unique_ptr<Layer> shared(std::string name, std::unique_ptr<Layer> layer);

}  // namespace cohort
