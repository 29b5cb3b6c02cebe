#include "cohort/core/nn/composite.h"

#include <algorithm>

#include "cohort/core/base/error.h"

namespace cohort {

Shape CompositeLayer::build(Graph& graph, const Shape& input) {
  if (graph_) throw InvalidArgument("CompositeLayer \"" + name_ + "\" is built once");
  graph_.emplace(graph);
  const Node in = graph_->input(input, name_ + "/input");
  graph_->set_output(compose(in));
  if (graph_->layers().empty())
    throw InvalidArgument("CompositeLayer \"" + name_ + "\": compose() applied no layer");
  return graph_->shape(graph_->output());
}

Node CompositeLayer::apply(std::unique_ptr<Layer> layer, Node input) {
  return apply(std::move(layer), {input});
}

Node CompositeLayer::apply(std::unique_ptr<Layer> layer, std::initializer_list<Node> inputs) {
  // The model gives the composite the variables under its name: a sublayer's elsewhere would be
  // nobody's (no gradient), or another layer's too.
  if (layer) {
    const std::string& scope = layer->variable_scope();
    if (scope != name_ && scope.rfind(name_ + "/", 0) != 0)
      throw InvalidArgument("CompositeLayer \"" + name_ + "\": its layer \"" + scope +
                            "\" must be named \"" + name_ + "/...\" (scoped(\"...\")), so that its "
                            "variables are the composite's");
  }
  return graph_->apply(std::move(layer), std::span<const Node>(inputs.begin(), inputs.size()));
}

void CompositeLayer::forward(const Tensor& input, Tensor& output, const OpContext& context) {
  const Tensor* inputs[] = {&input};
  // The inner graph keeps its output; the model wants it in its own tensor.
  output = graph_->forward(inputs, context);
}

void CompositeLayer::backward(const Tensor&, const Tensor&, const Tensor& grad_output,
                              Tensor* grad_input, std::span<float> grads) {
  Tensor* grad_inputs[] = {grad_input};
  graph_->backward(grad_output, grad_inputs, grads);
  // A sublayer that does not reach the output writes no gradient; the composite owns its
  // variables, so it zeroes them (the graph's other variables are not its to touch).
  for (const auto& [begin, end] : graph_->dead_ranges())
    std::fill(grads.begin() + begin, grads.begin() + end, 0.0f);
}

double CompositeLayer::flops_per_example() const {
  // As a layer of a model whose input gradient is computed; the model subtracts nothing for it.
  return graph_ ? graph_->flops_per_example(/*inputs_need_grad=*/true) : 0.0;
}

const std::vector<std::unique_ptr<Layer>>& CompositeLayer::layers() const {
  static const std::vector<std::unique_ptr<Layer>> none;
  return graph_ ? graph_->layers() : none;
}

SharedLayer::SharedLayer(std::string name, std::unique_ptr<Layer> layer)
    : name_(std::move(name)), layer_(std::move(layer)) {
  if (!layer_) throw InvalidArgument("shared \"" + name_ + "\": no layer");
  if (name_ == layer_->name())
    throw InvalidArgument("shared \"" + name_ + "\": the node needs a name of its own, not the "
                          "shared layer's");
}

OpContext SharedLayer::own(const OpContext& context) const {
  OpContext mine = context;
  mine.seed = Graph::variable_seed(context.seed, name_);
  return mine;
}

std::unique_ptr<Layer> shared(std::string name, std::unique_ptr<Layer> layer) {
  return std::make_unique<SharedLayer>(std::move(name), std::move(layer));
}

}  // namespace cohort
