#pragma once
// Padding masks for sequences of different lengths in one batch. A mask is a node of shape
// [steps], 1 for a step to read and 0 for padding, that a layer over sequences takes as a second
// input beside its sequence [steps, features]: made from token ids (or from steps of features)
// by PaddingMask, and applied explicitly where it matters, as Keras's `mask=` argument:
//
//   Node ids = model.input({200});
//   Node mask = model.apply(padding_mask("mask"), ids);          // id 0 is padding
//   Node x = model.apply(embedding("embed", 20000, 64), ids);
//   x = model.apply(lstm("lstm", 64), {x, mask});                 // reads each text's own steps
//
// The layers that take one (MaskableLayer): LSTM, GRU and Bidirectional (a padded step leaves
// the state as it was and gives zeros), MultiHeadAttention (no step attends to a padded one),
// and the global pools of a sequence (over the steps read). Layers that work step by step (Dense
// over the last axis, LayerNormalization, Dropout, PositionEmbedding) need none: their padded
// steps are left for the masked layers after them to skip.

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "cohort/core/nn/layer.h"
#include "cohort/core/nn/tensor.h"

namespace cohort {

/// A layer over sequences [steps, features] that may be applied to {sequence, mask} as well as
/// to the sequence alone (or, for a layer of several inputs, to them and the mask of one of
/// them, by default the last: cross-attention's {query, value, value's mask}; a recurrent
/// layer's {sequence, initial state, sequence's mask}). It implements the general forms; a subclass
/// implements the single-input ones (or the *_inputs forms below) and reads the pass's mask
/// through mask(). The mask gets no gradient (a zero one where the graph asks).
class MaskableLayer : public Layer {
 public:
  bool takes_mask() const final { return true; }
  Shape build_node(Graph& graph, std::span<const Shape> inputs) final;
  void forward_node(std::span<const Tensor* const> inputs, Tensor& output,
                    const OpContext& context) final;
  void backward_node(std::span<const Tensor* const> inputs, const Tensor& output,
                     const Tensor& grad_output, std::span<Tensor* const> grad_inputs,
                     std::span<float> grads) final;

 protected:
  /// The general forms of the inputs without the mask: by default the single-input forms.
  virtual Shape build_inputs(Graph& graph, std::span<const Shape> inputs) {
    return build(graph, inputs[0]);
  }
  virtual void forward_inputs(std::span<const Tensor* const> inputs, Tensor& output,
                              const OpContext& context) {
    forward(*inputs[0], output, context);
  }
  virtual void backward_inputs(std::span<const Tensor* const> inputs, const Tensor& output,
                               const Tensor& grad_output, std::span<Tensor* const> grad_inputs,
                               std::span<float> grads) {
    backward(*inputs[0], output, grad_output, grad_inputs[0], grads);
  }

  /// Which input (of those before the mask) the mask is of: by default the last.
  virtual int masked_input() const { return num_inputs() - 1; }
  /// Whether the layer was built with a mask.
  bool masked() const { return masked_; }
  /// The mask of the forward or backward pass under way, [batch, steps] (non-zero: read), or
  /// null when the layer runs without one.
  const Tensor* mask() const { return mask_; }

 private:
  bool masked_ = false;
  const Tensor* mask_ = nullptr;
};

/// The mask of a sequence: [steps] of token ids, or [steps, features], to [steps] holding 0 where
/// a step is padding (its id, or every one of its features, equals `value`) and 1 elsewhere:
/// Keras's Embedding(mask_zero=True) and Masking(mask_value) as a node of its own. No variables.
class PaddingMask : public Layer {
 public:
  PaddingMask(std::string name, float value);

  const std::string& name() const override { return name_; }
  Shape build(Graph& graph, const Shape& input) override;
  void forward(const Tensor& input, Tensor& output, const OpContext& context) override;
  void backward(const Tensor& input, const Tensor& output, const Tensor& grad_output,
                Tensor* grad_input, std::span<float> grads) override;

 private:
  std::string name_;
  float value_;
  std::int64_t steps_ = 0, features_ = 0;
};

/// padding_mask("mask") over token ids: id 0 is padding (TextVectorizer's).
std::unique_ptr<Layer> padding_mask(std::string name, float value = 0.0f);

namespace ops_detail {

/// Points `slot` at `value` while it lives, then back at null, also where an exception ends the
/// call: what a layer is given for one pass (a mask, an initial state) is never kept beyond it.
template <typename T>
class ForCall {
 public:
  ForCall(T*& slot, T* value) : slot_(slot) { slot_ = value; }
  ~ForCall() { slot_ = nullptr; }
  ForCall(const ForCall&) = delete;
  ForCall& operator=(const ForCall&) = delete;

 private:
  T*& slot_;
};

}  // namespace ops_detail

/// Whether step t of example b is read under `mask` [batch, steps] (null: every step is).
inline bool mask_reads(const Tensor* mask, std::int64_t b, std::int64_t t) {
  return mask == nullptr || (*mask)[b * mask->dim(1) + t] != 0.0f;
}

}  // namespace cohort
