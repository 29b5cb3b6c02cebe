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
/// ("<name>/<sublayer>/..." when the sublayers are named with scoped()), so a model sees one
/// layer: its gradients, its GPU refusal (a composite has no GPU path), its FLOPs.
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
  /// For compose(): applies `layer` to one node or several.
  Node apply(std::unique_ptr<Layer> layer, Node input);
  Node apply(std::unique_ptr<Layer> layer, std::initializer_list<Node> inputs);
  /// "<composite name>/<sublayer>": the name to give a sublayer.
  std::string scoped(const std::string& sublayer) const { return name_ + "/" + sublayer; }

 private:
  std::string name_;
  std::optional<LayerGraph> graph_;
  // The composite's variables that no sublayer reaching its output writes a gradient to.
  std::vector<std::pair<std::int64_t, std::int64_t>> dead_ranges_;
  std::int64_t dead_ranges_for_ = -1;
};

}  // namespace cohort
