#pragma once
// A graph of layers: symbolic inputs, layers applied to one or more nodes, one output; forward in
// the order the nodes were made (a topological order), backward in reverse, gradients summed where
// a node feeds several layers. The engine under Model and CompositeLayer.

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/layer.h"
#include "cohort/core/nn/tensor.h"

namespace cohort {

/// A symbolic value of a layer graph: one of its inputs, or the output of a layer applied to
/// other nodes. A small handle, valid for the graph that made it (another graph refuses it).
struct Node {
  int id = -1;
  std::uint64_t graph = 0;  ///< the serial number of the graph that made it
  bool valid() const { return id >= 0; }
};

/// The nodes and layers of one model (or of one composite layer), and their execution.
///
/// Built once (input(), apply(), set_output()), then run any number of times on batches of any
/// size. Every node keeps its last output and its gradient and reuses their storage, so steps
/// after the first allocate nothing (for a fixed batch size). Refers to `graph`, which must
/// outlive it. Movable, not copyable; not thread-safe (one thread per graph).
class LayerGraph {
 public:
  explicit LayerGraph(Graph& graph);
  LayerGraph(LayerGraph&&) noexcept = default;
  LayerGraph& operator=(LayerGraph&&) noexcept = default;

  /// A new input taking examples of `shape` (without the batch dimension). Throws InvalidArgument
  /// for a dimension < 1 or a name already used.
  Node input(Shape shape, std::string name);
  /// Applies `layer` to `inputs` (built at once: its variables are created or reused) and returns
  /// its output node. Throws InvalidArgument for a null layer, a name already used, a node not of
  /// this graph, the wrong number of inputs for the layer, and what the layer's build throws for
  /// input shapes it cannot take.
  Node apply(std::unique_ptr<Layer> layer, std::span<const Node> inputs);
  /// The node forward() returns; the last node made unless set.
  void set_output(Node output);
  Node output() const;

  /// Runs the layers the output depends on. `inputs` are batches for the inputs, in the order
  /// they were made, with matching example shapes (InvalidArgument otherwise). Returns the
  /// output's value, valid until the next forward().
  const Tensor& forward(std::span<const Tensor* const> inputs, const OpContext& context);
  /// Given dLoss/dOutput for the last forward(): overwrites the slices of `grads` (the graph's
  /// parameter layout) of every layer that reaches the output, and writes dLoss/dInput into each
  /// non-null grad_inputs[i] (one per input). Layers that need no gradient (nothing before them
  /// has variables, and no input gradient is asked for) are skipped; variables of layers that do
  /// not reach the output are left alone (see unused_ranges()).
  /// `listener`, if not null, hears ready(begin) each time a layer's backward completes every
  /// gradient from some offset up (layers run in reverse order of creation, variables lie in the
  /// buffer in that order), and ready(0) at the end.
  void backward(const Tensor& grad_output, std::span<Tensor* const> grad_inputs,
                std::span<float> grads, GradientListener* listener = nullptr);

  /// The last output of the node or layer named `name` (an input's name, or a layer's), else null.
  const Tensor* value(const std::string& name) const;
  /// The output's last value, null before the first forward().
  const Tensor* output_value() const {
    return output_ >= 0 && static_cast<std::size_t>(output_) < values_.size()
               ? values_[static_cast<std::size_t>(output_)]
               : nullptr;
  }
  /// One example's shape at a node.
  const Shape& shape(Node node) const;
  /// The layer whose output a node is; null for an input.
  const Layer* layer(Node node) const;
  /// A table of the nodes, as Keras's model.summary() prints it: each node's name and layer
  /// class, one example's output shape, the values of the variables it owns (trainable ones
  /// and state), and where the graph is not a stack the nodes it takes; then the totals.
  std::string summary() const;
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }
  std::size_t num_inputs() const { return inputs_.size(); }
  const Shape& input_shape(std::size_t i) const { return shape(node(static_cast<std::size_t>(inputs_.at(i)))); }
  /// True when every layer takes the node before it and the graph has one input: a stack.
  bool is_chain() const;
  /// Whether layer i (in layers() order) has variables, and whether backward() writes its
  /// gradients (it reaches the output).
  bool layer_has_variables(std::size_t i) const;
  /// The ranges [begin, end) of the parameter buffer that no layer of this graph writes a
  /// gradient to (their gradients must be zeroed by the caller).
  const std::vector<std::pair<std::int64_t, std::int64_t>>& unused_ranges();
  /// Of those, the ranges of variables that a layer of this graph owns (a branch that does not
  /// reach the output): what a composite zeroes, its other variables being no layer's of it.
  const std::vector<std::pair<std::int64_t, std::int64_t>>& dead_ranges();
  /// Training FLOPs per example of the layers the output depends on, as executed (the input
  /// gradient of a layer with nothing trainable before it is not computed, unless the inputs'
  /// gradients are asked for).
  double flops_per_example(bool inputs_need_grad = false) const;
  /// The floats of one example's activations in a forward pass: every node the output depends
  /// on (the inputs too), each of which keeps its output.
  std::int64_t activation_floats_per_example() const;
  Graph& graph() { return *graph_; }
  const Graph& graph() const { return *graph_; }

 private:
  struct NodeInfo {
    std::string name;
    int layer = -1;               // index in layers_; -1 for an input
    std::vector<int> inputs;      // node ids
    Shape shape;                  // one example's
    bool has_variables = false;   // its layer owns trainable variables
    bool live = false;            // the output depends on it
  };
  void check_node(Node node, const char* what) const;
  Node node(std::size_t id) const { return Node{static_cast<int>(id), serial_}; }
  void refresh();  // live flags, owners and sharing after a node was made or the output changed
  // Whether `layer` owns variable `v` (the v-th of the graph's): v is under its scope and under
  // no longer scope of this graph's layers.
  bool owns(const Layer& layer, std::size_t v) const;

  Graph* graph_;
  std::uint64_t serial_;  // this graph's number, in its nodes
  // Per variable of the graph, the length of the longest scope of a layer here it is under
  // (npos: none); recomputed when layers or variables are added.
  std::vector<std::size_t> owner_scope_;
  // Layers that apply the same variables (shared()): per layer, its group (layers of one scope
  // share a group); per group, the trainable ranges it owns. Empty when no two layers share.
  std::vector<int> group_;
  std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> group_ranges_;
  std::vector<char> group_written_;       // per group, this backward has written its gradients
  std::vector<float> shared_grads_;       // a later sharer's gradients, to add
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<NodeInfo> nodes_;
  std::vector<int> inputs_;  // node ids of the inputs, in order
  int output_ = -1;
  bool output_set_ = false;
  std::vector<Tensor> outputs_;           // per node (inputs: unused)
  std::vector<const Tensor*> values_;     // per node, the last forward's value
  // Gradients live in a pool: a node takes a buffer when its first gradient arrives and gives
  // it back once its own backward is done, so a stack of layers uses two buffers, as the same
  // sequence of takes each step hands each node the same buffer (no allocation after the first).
  std::deque<Tensor> pool_;
  std::vector<int> free_;                 // pool buffers not in use, taken from the back
  std::vector<int> slot_;                 // per node, its pool buffer (-1: none)
  std::vector<Tensor*> grad_targets_;     // per node, where its gradient goes (null: none)
  std::vector<char> grad_written_;        // per node, this backward has written its gradient
  std::vector<Tensor> scratch_;           // per input slot, a gradient to add to one already there
  std::vector<char> needs_;               // per node, this backward needs its gradient
  std::vector<const Tensor*> in_;         // per-call argument lists, reused
  std::vector<Tensor*> grad_in_;
  std::vector<std::pair<std::int64_t, std::int64_t>> unused_ranges_, dead_ranges_;
  void update_ranges();
  std::int64_t unused_ranges_for_ = -1;
  // For the listener: the trainable variables by offset, highest first, each with the lowest
  // node that owns it (its gradient is final once backward has run that node; a variable no live
  // node owns is final from the start, as the caller zeroes it).
  struct Owned {
    std::int64_t offset;
    std::size_t first_owner;
  };
  const std::vector<Owned>& owners();
  std::vector<Owned> owners_;
  std::int64_t owners_for_ = -1;
};

}  // namespace cohort
