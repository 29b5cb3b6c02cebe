#include "cohort/core/nn/layer_graph.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include <cxxabi.h>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/composite.h"
#include "cohort/core/nn/ops/ops.h"
#include "cohort/core/nn/tensor_eigen.h"

namespace cohort {
namespace {

// Whether variable `name` is under `scope`: "<scope>/...".
bool under(const std::string& name, const std::string& scope) {
  return name.size() > scope.size() && name[scope.size()] == '/' &&
         name.compare(0, scope.size(), scope) == 0;
}

std::atomic<std::uint64_t> next_serial{1};

// The layer a node applies: a shared() node's, the layer it applies again.
const Layer& unwrapped(const Layer& layer) {
  const auto* again = dynamic_cast<const SharedLayer*>(&layer);
  return again != nullptr ? again->layer() : layer;
}

}  // namespace

LayerGraph::LayerGraph(Graph& graph) : graph_(&graph), serial_(next_serial++) {}

// A layer owns the variables under its scope, whether it created them or a tower or a sharer
// did, unless a layer of a longer scope here owns them ("p/aux/kernel" is "p/aux"'s, not "p"'s).
bool LayerGraph::owns(const Layer& layer, std::size_t v) const {
  const std::string& scope = layer.variable_scope();
  return v < owner_scope_.size() && owner_scope_[v] == scope.size() &&
         under(graph_->variables()[v].name, scope);
}

Shape MergeLayer::build(Graph&, const Shape&) {
  throw InvalidArgument("layer \"" + name() + "\" joins several inputs; apply it to two or more");
}
void MergeLayer::forward(const Tensor&, Tensor&, const OpContext&) {
  throw InvalidArgument("layer \"" + name() + "\" joins several inputs; apply it to two or more");
}
void MergeLayer::backward(const Tensor&, const Tensor&, const Tensor&, Tensor*, std::span<float>) {
  throw InvalidArgument("layer \"" + name() + "\" joins several inputs; apply it to two or more");
}

void LayerGraph::check_node(Node node, const char* what) const {
  if (node.graph != serial_ && node.graph != 0 && node.id >= 0)
    throw InvalidArgument(std::string(what) + ": node " + std::to_string(node.id) +
                          " is a node of another model");
  if (node.graph != serial_ || node.id < 0 || node.id >= static_cast<int>(nodes_.size()))
    throw InvalidArgument(std::string(what) + ": node " + std::to_string(node.id) +
                          " is not a node of this model");
}

Node LayerGraph::input(Shape shape, std::string name) {
  for (std::int64_t d : shape)
    if (d < 1) throw InvalidArgument("input \"" + name + "\": bad example shape " + to_string(shape));
  if (std::any_of(nodes_.begin(), nodes_.end(), [&](const NodeInfo& n) { return n.name == name; }))
    throw InvalidArgument("input \"" + name + "\": the name is already used in this model");
  NodeInfo info;
  info.name = std::move(name);
  info.shape = std::move(shape);
  nodes_.push_back(std::move(info));
  inputs_.push_back(static_cast<int>(nodes_.size()) - 1);
  refresh();
  return node(nodes_.size() - 1);
}

Node LayerGraph::apply(std::unique_ptr<Layer> layer, std::span<const Node> inputs) {
  if (!layer) throw InvalidArgument("Model: null layer");
  const std::string& name = layer->name();
  for (const NodeInfo& n : nodes_)
    if (n.name == name)
      throw InvalidArgument("Model: a layer or input named \"" + name + "\" is already in the model");
  const int arity = layer->num_inputs();
  const bool masked =
      arity > 0 && layer->takes_mask() && static_cast<int>(inputs.size()) == arity + 1;
  if (inputs.empty() || (arity > 0 && static_cast<int>(inputs.size()) != arity && !masked) ||
      (arity == 0 && inputs.size() < 2))
    throw InvalidArgument("layer \"" + name + "\" takes " +
                          (arity > 0 ? std::to_string(arity) : std::string("two or more")) +
                          " input" + (arity == 1 ? "" : "s") +
                          (layer->takes_mask() ? " (and optionally a mask)" : "") + ", given " +
                          std::to_string(inputs.size()));
  std::vector<Shape> shapes;
  NodeInfo info;
  for (Node in : inputs) {
    check_node(in, ("layer \"" + name + "\"").c_str());
    shapes.push_back(nodes_[static_cast<std::size_t>(in.id)].shape);
    info.inputs.push_back(in.id);
  }
  const std::size_t before = graph_->variables().size();
  info.shape = layer->build_node(*graph_, shapes);
  // A variable outside the layer's scope would be nobody's: its gradient never written.
  const std::string& scope = layer->variable_scope();
  for (std::size_t v = before; v < graph_->variables().size(); ++v)
    if (!under(graph_->variables()[v].name, scope))
      throw InvalidArgument("layer \"" + name + "\" made the variable \"" + graph_->variables()[v].name +
                            "\": a layer's variables must be named \"" + scope + "/...\"");
  // Layers of one scope apply the same variables: they must compute alike.
  for (const auto& other : layers_)
    if (other->variable_scope() == scope && typeid(unwrapped(*other)) != typeid(unwrapped(*layer)))
      throw InvalidArgument("layer \"" + name + "\" applies the variables of layer \"" + other->name() +
                            "\", a layer of another class");
  // A shared() node applies variables made before it; one that made its own (a misspelt name)
  // would train a second copy of the layer without a word.
  if (dynamic_cast<const SharedLayer*>(layer.get()) != nullptr && graph_->variables().size() > before)
    throw InvalidArgument("shared \"" + name + "\": there are no variables of a layer \"" +
                          unwrapped(*layer).name() + "\" to apply again (it made \"" +
                          graph_->variables()[before].name +
                          "\"): apply the layer of that name first, or name it as that layer is named");
  info.name = name;
  info.layer = static_cast<int>(layers_.size());
  layers_.push_back(std::move(layer));
  nodes_.push_back(std::move(info));
  refresh();
  return node(nodes_.size() - 1);
}

void LayerGraph::set_output(Node output) {
  check_node(output, "Model::set_output");
  output_ = output.id;
  output_set_ = true;
  refresh();
}

Node LayerGraph::output() const { return output_ < 0 ? Node{} : node(static_cast<std::size_t>(output_)); }

void LayerGraph::refresh() {
  if (!output_set_) output_ = static_cast<int>(nodes_.size()) - 1;
  const std::size_t n = nodes_.size();
  outputs_.resize(n);
  slot_.assign(n, -1);
  values_.assign(n, nullptr);
  grad_targets_.assign(n, nullptr);
  grad_written_.assign(n, 0);
  needs_.assign(n, 0);
  for (NodeInfo& node : nodes_) node.live = false;
  if (output_ >= 0) nodes_[static_cast<std::size_t>(output_)].live = true;
  for (std::size_t i = n; i-- > 0;)
    if (nodes_[i].live)
      for (int in : nodes_[i].inputs) nodes_[static_cast<std::size_t>(in)].live = true;
  unused_ranges_for_ = -1;
  owners_for_ = -1;

  // Which layer owns each variable: the longest scope it is under.
  const std::vector<Variable>& variables = graph_->variables();
  owner_scope_.assign(variables.size(), std::string::npos);
  for (std::size_t v = 0; v < variables.size(); ++v)
    for (const auto& layer : layers_) {
      const std::string& scope = layer->variable_scope();
      if ((owner_scope_[v] == std::string::npos || scope.size() > owner_scope_[v]) &&
          under(variables[v].name, scope))
        owner_scope_[v] = scope.size();
    }
  for (NodeInfo& node : nodes_) {
    node.has_variables = false;
    if (node.layer < 0) continue;
    const Layer& layer = *layers_[static_cast<std::size_t>(node.layer)];
    for (std::size_t v = 0; v < variables.size() && !node.has_variables; ++v)
      node.has_variables = variables[v].trainable && owns(layer, v);
  }
  // Layers of one scope (shared()) form a group, whose gradients backward adds up.
  group_.assign(layers_.size(), -1);
  group_ranges_.clear();
  for (std::size_t a = 0; a < layers_.size(); ++a)
    for (std::size_t b = 0; b < a && group_[a] < 0; ++b)
      if (layers_[b]->variable_scope() == layers_[a]->variable_scope()) {
        if (group_[b] < 0) {
          group_[b] = static_cast<int>(group_ranges_.size());
          group_ranges_.emplace_back();
          for (std::size_t v = 0; v < variables.size(); ++v)
            if (variables[v].trainable && variables[v].size > 0 && owns(*layers_[b], v))
              group_ranges_.back().emplace_back(variables[v].offset, variables[v].offset + variables[v].size);
        }
        group_[a] = group_[b];
      }
  if (group_ranges_.empty()) group_.clear();
  group_written_.assign(group_ranges_.size(), 0);
}

const Tensor& LayerGraph::forward(std::span<const Tensor* const> inputs, const OpContext& context) {
  if (layers_.empty() && inputs_.empty()) throw InvalidArgument("Model: no layers");
  if (inputs.size() != inputs_.size())
    throw InvalidArgument("Model: " + std::to_string(inputs.size()) + " input batches for " +
                          std::to_string(inputs_.size()) + " inputs");
  std::int64_t batch = -1;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const NodeInfo& node = nodes_[static_cast<std::size_t>(inputs_[k])];
    const Tensor& x = *inputs[k];
    const Shape& example = node.shape;
    const bool ok = x.rank() == static_cast<int>(example.size()) + 1 && x.dim(0) > 0 &&
                    std::equal(example.begin(), example.end(), x.shape().begin() + 1);
    if (!ok)
      throw InvalidArgument("Model: input \"" + node.name + "\" is given " + to_string(x.shape()) +
                            ", not a batch of examples of shape " + to_string(example));
    if (batch >= 0 && x.dim(0) != batch)
      throw InvalidArgument("Model: the input batches differ in size (" + std::to_string(batch) +
                            " and " + std::to_string(x.dim(0)) + ")");
    batch = x.dim(0);
    values_[static_cast<std::size_t>(inputs_[k])] = &x;
  }
  // A layer applied twice (shared()) must not update its variables in place: its other
  // application's backward pass still reads them, and adds its gradient to the first's.
  OpContext shared_context = context;
  shared_context.update_in_place = nullptr;
  for (std::size_t n = 0; n < nodes_.size(); ++n) {
    const NodeInfo& node = nodes_[n];
    if (node.layer < 0 || !node.live) continue;
    in_.clear();
    for (int i : node.inputs) in_.push_back(values_[static_cast<std::size_t>(i)]);
    const Tensor& out = outputs_[n];
    const bool shared = !group_.empty() && group_[static_cast<std::size_t>(node.layer)] >= 0;
    layers_[static_cast<std::size_t>(node.layer)]->forward_node(in_, outputs_[n],
                                                                shared ? shared_context : context);
    // A layer of the user's whose forward() writes another shape than its build() declared
    // would be blamed on the layers after it, or on the labels.
    if (out.rank() != static_cast<int>(node.shape.size()) + 1 || out.dim(0) != batch ||
        !std::equal(node.shape.begin(), node.shape.end(), out.shape().begin() + 1))
      throw InvalidArgument("Model: layer \"" + node.name + "\" wrote " + to_string(out.shape()) +
                            " for a batch of " + std::to_string(batch) + ", where it declared examples of " +
                            to_string(node.shape) + " (its build())");
    values_[n] = &outputs_[n];
  }
  return *values_[static_cast<std::size_t>(output_)];
}

void LayerGraph::backward(const Tensor& grad_output, std::span<Tensor* const> grad_inputs,
                          std::span<float> grads, GradientListener* listener) {
  if (grad_inputs.size() != inputs_.size())
    throw InvalidArgument("LayerGraph::backward: " + std::to_string(grad_inputs.size()) +
                          " input gradients for " + std::to_string(inputs_.size()) + " inputs");
  const std::size_t count = nodes_.size();
  // Which nodes' gradients are needed: an input's when asked for, a layer's when it reaches the
  // output and it or something before it has variables (or an input whose gradient is asked).
  std::fill(grad_written_.begin(), grad_written_.end(), 0);
  for (std::size_t k = 0; k < inputs_.size(); ++k) {
    const auto id = static_cast<std::size_t>(inputs_[k]);
    needs_[id] = grad_inputs[k] != nullptr;
    grad_targets_[id] = grad_inputs[k];
  }
  for (std::size_t n = 0; n < count; ++n) {
    const NodeInfo& node = nodes_[n];
    if (node.layer < 0) continue;
    bool needs = node.live && node.has_variables;
    for (int i : node.inputs) needs = needs || (node.live && needs_[static_cast<std::size_t>(i)]);
    needs_[n] = needs;
    grad_targets_[n] = nullptr;  // a pool buffer, once its first gradient arrives
    slot_[n] = -1;
  }
  free_.clear();
  for (int b = static_cast<int>(pool_.size()); b-- > 0;) free_.push_back(b);
  const auto take = [&](std::size_t node) {
    if (free_.empty()) {
      pool_.emplace_back();
      free_.push_back(static_cast<int>(pool_.size()) - 1);
    }
    slot_[node] = free_.back();
    free_.pop_back();
    grad_targets_[node] = &pool_[static_cast<std::size_t>(slot_[node])];
  };
  // The listener's frontier: every gradient at [ready_from, end) is final once the variables
  // owners()[0, next) are.
  const std::vector<Owned>* order = listener != nullptr ? &owners() : nullptr;
  std::size_t next = 0;
  std::int64_t ready_from = graph_->num_parameters();
  const auto tell = [&](std::size_t done_down_to) {
    if (order == nullptr) return;
    const std::int64_t before = ready_from;
    for (; next < order->size() && (*order)[next].first_owner >= done_down_to; ++next)
      ready_from = (*order)[next].offset;
    if (ready_from < before) listener->ready(ready_from);
  };
  // An input whose gradient is asked for and that the output does not depend on: zeros.
  const auto zero_unreached_inputs = [&] {
    for (std::size_t k = 0; k < inputs_.size(); ++k) {
      const auto id = static_cast<std::size_t>(inputs_[k]);
      if (grad_inputs[k] == nullptr || grad_written_[id] || values_[id] == nullptr) continue;
      grad_inputs[k]->resize(values_[id]->shape());
      flat(*grad_inputs[k]).setZero();
    }
  };
  const auto out = static_cast<std::size_t>(output_);
  if (nodes_[out].layer < 0) {  // the output is an input itself
    if (grad_targets_[out] != nullptr) {
      *grad_targets_[out] = grad_output;
      grad_written_[out] = 1;
    }
    zero_unreached_inputs();
    if (listener != nullptr) listener->ready(0);
    return;
  }
  tell(count);  // variables no live node owns
  // A layer that applies variables a later node's layer already wrote gradients to this pass
  // (shared()) writes its own to a scratch buffer, which is added.
  std::fill(group_written_.begin(), group_written_.end(), 0);
  if (!group_.empty() && shared_grads_.size() < grads.size()) shared_grads_.resize(grads.size());
  for (std::size_t n = count; n-- > 0; tell(n)) {
    const NodeInfo& node = nodes_[n];
    if (node.layer < 0 || !needs_[n] || (n != out && !grad_written_[n])) continue;
    const Tensor& grad = n == out ? grad_output : *grad_targets_[n];
    in_.clear();
    grad_in_.clear();
    if (scratch_.size() < node.inputs.size()) scratch_.resize(node.inputs.size());
    // The first gradient a node receives is written in place; later ones (fan-out, or the same
    // node twice among one layer's inputs) go to scratch and are added.
    for (std::size_t j = 0; j < node.inputs.size(); ++j) {
      const auto i = static_cast<std::size_t>(node.inputs[j]);
      in_.push_back(values_[i]);
      Tensor* target = nullptr;
      if (needs_[i]) {
        const bool taken = grad_written_[i] ||
                           std::find(node.inputs.begin(), node.inputs.begin() + static_cast<long>(j),
                                     node.inputs[j]) != node.inputs.begin() + static_cast<long>(j);
        if (!taken && nodes_[i].layer >= 0) take(i);
        target = taken ? &scratch_[j] : grad_targets_[i];
      }
      grad_in_.push_back(target);
    }
    const int group = group_.empty() ? -1 : group_[static_cast<std::size_t>(node.layer)];
    const bool again = group >= 0 && group_written_[static_cast<std::size_t>(group)];
    std::span<float> into = grads;
    if (again) {
      into = std::span<float>(shared_grads_).first(grads.size());
      for (const auto& [begin, end] : group_ranges_[static_cast<std::size_t>(group)])
        std::fill(into.begin() + begin, into.begin() + end, 0.0f);
    }
    layers_[static_cast<std::size_t>(node.layer)]->backward_node(in_, *values_[n], grad, grad_in_,
                                                                 into);
    if (again) {
      for (const auto& [begin, end] : group_ranges_[static_cast<std::size_t>(group)])
        for (std::int64_t i = begin; i < end; ++i) grads[static_cast<std::size_t>(i)] += into[static_cast<std::size_t>(i)];
    } else if (group >= 0 && node.has_variables) {
      group_written_[static_cast<std::size_t>(group)] = 1;
    }
    for (std::size_t j = 0; j < node.inputs.size(); ++j) {
      if (grad_in_[j] == nullptr) continue;
      // As for forward(): a gradient of another shape would be read past its end by the layer
      // before, and show up only as a NaN loss.
      if (grad_in_[j]->shape() != in_[j]->shape())
        throw InvalidArgument("Model: layer \"" + node.name + "\" wrote an input gradient of shape " +
                              to_string(grad_in_[j]->shape()) + " for its input " +
                              (node.inputs.size() == 1 ? "" : std::to_string(j) + " ") + "of shape " +
                              to_string(in_[j]->shape()) + " (its backward())");
      const auto i = static_cast<std::size_t>(node.inputs[j]);
      if (grad_in_[j] == &scratch_[j])
        flat(*grad_targets_[i]) += flat(scratch_[j]);
      else
        grad_written_[i] = 1;
    }
    if (slot_[n] >= 0) {  // this node's gradient is used up
      free_.push_back(slot_[n]);
      slot_[n] = -1;
    }
  }
  zero_unreached_inputs();
  if (listener != nullptr && ready_from > 0) listener->ready(0);
}

const std::vector<LayerGraph::Owned>& LayerGraph::owners() {
  if (owners_for_ != graph_->num_parameters()) {
    owners_.clear();
    const std::vector<Variable>& variables = graph_->variables();
    for (std::size_t i = 0; i < variables.size(); ++i) {
      const Variable& v = variables[i];
      if (!v.trainable || v.size == 0) continue;
      std::size_t first = std::numeric_limits<std::size_t>::max();
      for (std::size_t n = nodes_.size(); n-- > 0;) {
        const NodeInfo& node = nodes_[n];
        if (node.layer >= 0 && node.live && owns(*layers_[static_cast<std::size_t>(node.layer)], i))
          first = n;
      }
      owners_.push_back({v.offset, first});
    }
    std::sort(owners_.begin(), owners_.end(),
              [](const Owned& a, const Owned& b) { return a.offset > b.offset; });
    owners_for_ = graph_->num_parameters();
  }
  return owners_;
}

const Tensor* LayerGraph::value(const std::string& name) const {
  for (std::size_t n = 0; n < nodes_.size(); ++n)
    if (nodes_[n].name == name) return values_.size() > n ? values_[n] : nullptr;
  return nullptr;
}

const Shape& LayerGraph::shape(Node node) const {
  check_node(node, "Model");
  return nodes_[static_cast<std::size_t>(node.id)].shape;
}

const Layer* LayerGraph::layer(Node node) const {
  check_node(node, "Model");
  const int index = nodes_[static_cast<std::size_t>(node.id)].layer;
  return index < 0 ? nullptr : layers_[static_cast<std::size_t>(index)].get();
}

std::string LayerGraph::summary() const {
  // The class's name without its namespace, demangled where the compiler's ABI says how.
  const auto class_name = [](const Layer& layer) {
    const char* mangled = typeid(layer).name();
    int status = 0;
    std::unique_ptr<char, void (*)(void*)> demangled(abi::__cxa_demangle(mangled, nullptr, nullptr, &status),
                                                    std::free);
    std::string name = status == 0 && demangled ? demangled.get() : mangled;
    const std::size_t colons = name.rfind("::");
    return colons == std::string::npos ? name : name.substr(colons + 2);
  };
  struct Row {
    std::string node, shape, params, inputs;
  };
  std::vector<Row> rows{{"node (layer)", "output shape", "parameters", "takes"}};
  const bool chain = is_chain();
  std::int64_t trainable = 0, state = 0;
  std::vector<std::string> group_first(group_ranges_.size());  // a shared group's first node
  const std::vector<Variable>& variables = graph_->variables();
  for (const NodeInfo& node : nodes_) {
    Row row{node.name, to_string(node.shape), "0", ""};
    if (node.layer >= 0) {
      const Layer& layer = *layers_[static_cast<std::size_t>(node.layer)];
      row.node += " (" + class_name(unwrapped(layer)) + ")";
      std::int64_t mine = 0, held = 0;
      for (std::size_t v = 0; v < variables.size(); ++v)
        if (owns(layer, v)) (variables[v].trainable ? mine : held) += variables[v].size;
      const int group = group_.empty() ? -1 : group_[static_cast<std::size_t>(node.layer)];
      std::string* first = group >= 0 ? &group_first[static_cast<std::size_t>(group)] : nullptr;
      if (first != nullptr && !first->empty()) {  // counted at its group's first node
        row.params = "shares " + *first;
        mine = held = 0;
      } else {
        if (first != nullptr) *first = node.name;
        row.params = std::to_string(mine) + (held > 0 ? " + " + std::to_string(held) + " state" : "");
      }
      trainable += mine;
      state += held;
      if (!chain)
        for (int in : node.inputs)
          row.inputs += (row.inputs.empty() ? "" : ", ") + nodes_[static_cast<std::size_t>(in)].name;
    } else {
      row.node += " (input)";
    }
    rows.push_back(std::move(row));
  }
  std::size_t w0 = 0, w1 = 0, w2 = 0;
  for (const Row& r : rows) w0 = std::max(w0, r.node.size()), w1 = std::max(w1, r.shape.size()), w2 = std::max(w2, r.params.size());
  std::string out;
  for (const Row& r : rows) {
    std::string line = r.node + std::string(w0 - r.node.size() + 2, ' ') + r.shape +
                       std::string(w1 - r.shape.size() + 2, ' ') + std::string(w2 - r.params.size(), ' ') + r.params;
    if (!chain) line += "  " + r.inputs;
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  out += "parameters: " + std::to_string(trainable) + (state > 0 ? ", state: " + std::to_string(state) : "") + "\n";
  return out;
}

bool LayerGraph::is_chain() const {
  if (inputs_.size() != 1 || inputs_[0] != 0 || output_ != static_cast<int>(nodes_.size()) - 1)
    return false;
  for (std::size_t n = 1; n < nodes_.size(); ++n)
    if (nodes_[n].layer < 0 || nodes_[n].inputs != std::vector<int>{static_cast<int>(n) - 1})
      return false;
  return true;
}

bool LayerGraph::layer_has_variables(std::size_t i) const {
  for (const NodeInfo& node : nodes_)
    if (node.layer == static_cast<int>(i)) return node.has_variables;
  return false;
}

const std::vector<std::pair<std::int64_t, std::int64_t>>& LayerGraph::unused_ranges() {
  update_ranges();
  return unused_ranges_;
}

const std::vector<std::pair<std::int64_t, std::int64_t>>& LayerGraph::dead_ranges() {
  update_ranges();
  return dead_ranges_;
}

void LayerGraph::update_ranges() {
  if (unused_ranges_for_ == graph_->num_parameters()) return;
  unused_ranges_.clear();
  dead_ranges_.clear();
  const auto extend = [](std::vector<std::pair<std::int64_t, std::int64_t>>& ranges, const Variable& v) {
    if (!ranges.empty() && ranges.back().second == v.offset)
      ranges.back().second = v.offset + v.size;
    else
      ranges.emplace_back(v.offset, v.offset + v.size);
  };
  const std::vector<Variable>& variables = graph_->variables();
  for (std::size_t i = 0; i < variables.size(); ++i) {
    const Variable& v = variables[i];
    if (!v.trainable || v.size == 0) continue;
    bool owned = false, used = false;
    for (const NodeInfo& node : nodes_)
      if (node.layer >= 0 && owns(*layers_[static_cast<std::size_t>(node.layer)], i)) {
        owned = true;
        used = used || node.live;
      }
    if (used) continue;
    extend(unused_ranges_, v);
    if (owned) extend(dead_ranges_, v);
  }
  unused_ranges_for_ = graph_->num_parameters();
}

std::int64_t LayerGraph::activation_floats_per_example() const {
  std::int64_t floats = 0;
  for (const NodeInfo& node : nodes_)
    if (node.live || node.layer < 0) floats += num_elements(node.shape);
  return floats;
}

double LayerGraph::flops_per_example(bool inputs_need_grad) const {
  // Whether anything at or before each node has variables: a layer whose inputs have none
  // computes no input gradient.
  std::vector<char> upstream(nodes_.size(), 0);
  if (inputs_need_grad)
    for (int i : inputs_) upstream[static_cast<std::size_t>(i)] = 1;
  double flops = 0.0;
  for (std::size_t n = 0; n < nodes_.size(); ++n) {
    const NodeInfo& node = nodes_[n];
    if (node.layer < 0 || !node.live) continue;
    bool before = false;
    for (int i : node.inputs) before = before || upstream[static_cast<std::size_t>(i)];
    upstream[n] = before || node.has_variables;
    const Layer& layer = *layers_[static_cast<std::size_t>(node.layer)];
    flops += layer.flops_per_example();
    if (!before) flops -= layer.input_grad_flops_per_example();
  }
  return flops;
}

}  // namespace cohort
