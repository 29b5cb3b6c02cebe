#pragma once
// Attention over sequences [steps, features]: MultiHeadAttention (self-attention, as in the
// Transformer's encoder, or causal, as in its decoder; or cross-attention, a decoder's to its
// encoder) and PositionEmbedding, which tells the
// attention where each step is. With Dense over the last axis, LayerNormalization and Add they
// make a Transformer block:
//
//   Node y = model.apply(layer_norm("ln1"), x);
//   y = model.apply(multi_head_attention("attention", 4, 16), y);
//   x = model.apply(add("residual1"), {x, y});
//   y = model.apply(layer_norm("ln2"), x);
//   y = model.apply(dense("ffn1", 128, Activation::kRelu, /*flatten=*/false), y);
//   y = model.apply(dense("ffn2", 64, Activation::kNone, /*flatten=*/false), y);
//   x = model.apply(add("residual2"), {x, y});
//
// Neither has a GPU path.

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "cohort/core/nn/layer.h"
#include "cohort/core/nn/ops/masking.h"
#include "cohort/core/nn/tensor.h"

namespace cohort {

/// Multi-head scaled dot-product attention (Vaswani et al. 2017; Keras's MultiHeadAttention):
/// per head, softmax(Q K^T / sqrt(key_dim)) V, the heads' results concatenated and projected
/// back to the query's features. Self-attention (one input [steps, features]: the query, key and
/// value all the input), or cross-attention (`cross`: two inputs, the query [steps, features] and
/// the value [value steps, value features], which is the key too: a decoder attending to its
/// encoder's output). Variables "<name>/query/kernel" [features, heads * key_dim],
/// "<name>/key/kernel" and "<name>/value/kernel" [value features, heads * key_dim] (Keras's
/// [features, heads, key_dim], the same layout; Glorot uniform, decayed) with biases [heads *
/// key_dim], and "<name>/attention_output/kernel" [heads * key_dim, features] with its bias
/// [features]. `causal`: step i attends to steps 0 to i only (a decoder's mask). `dropout`: in
/// training, each attention weight is zeroed with this probability and the others scaled by 1 /
/// (1 - dropout), as Keras's and PyTorch's attention dropout (the mask a function of the step's
/// seed and the layer, as Dropout's). With a mask of the value's steps (masking.h), no step
/// attends to a padded one (Keras's attention_mask of the keys); a step that sees none, padded
/// or causal, gives the output's bias alone.
class MultiHeadAttention : public MaskableLayer {
 public:
  /// key_dim 0: features / heads. InvalidArgument for a dropout outside [0, 1).
  MultiHeadAttention(std::string name, std::int64_t heads, std::int64_t key_dim = 0,
                     bool causal = false, float dropout = 0.0f, bool cross = false);

  const std::string& name() const override { return name_; }
  int num_inputs() const override { return cross_ ? 2 : 1; }
  Shape build(Graph& graph, const Shape& input) override;
  void forward(const Tensor& input, Tensor& output, const OpContext& context) override;
  void backward(const Tensor& input, const Tensor& output, const Tensor& grad_output,
                Tensor* grad_input, std::span<float> grads) override;
  double flops_per_example() const override;
  double input_grad_flops_per_example() const override;

 protected:
  Shape build_inputs(Graph& graph, std::span<const Shape> inputs) override;
  void forward_inputs(std::span<const Tensor* const> inputs, Tensor& output,
                      const OpContext& context) override;
  void backward_inputs(std::span<const Tensor* const> inputs, const Tensor& output,
                       const Tensor& grad_output, std::span<Tensor* const> grad_inputs,
                       std::span<float> grads) override;

 private:
  // A projection's variables: kernel [in, out] and bias [out] at these offsets.
  struct Projection {
    std::int64_t kernel = 0, bias = 0;
  };
  // rows x out := input rows x kernel + bias.
  void project(const Projection& p, const float* input, std::int64_t rows, std::int64_t in,
               std::int64_t out, float* result) const;
  // The gradients of a projection: kernel and bias gradients written, input gradient added
  // (beta 1) or written (beta 0).
  void project_back(const Projection& p, const float* input, const float* grad_result,
                    std::int64_t rows, std::int64_t in, std::int64_t out, std::span<float> grads,
                    float* grad_input, float beta) const;
  void run(const Tensor& query, const Tensor& value, Tensor& output, const OpContext& context);
  // grad_value may be grad_query (self-attention: the two gradients summed), or null.
  void run_back(const Tensor& query, const Tensor& value, const Tensor& grad_output,
                Tensor* grad_query, Tensor* grad_value, std::span<float> grads);

  std::string name_;
  std::int64_t heads_;
  std::int64_t requested_key_dim_;  // as given: 0 for features / heads
  std::int64_t key_dim_ = 0;        // as built
  bool causal_;
  float dropout_;
  bool cross_;
  bool dropped_ = false;  // the last forward pass dropped weights (training with a dropout)
  Graph* graph_ = nullptr;
  std::int64_t steps_ = 0, features_ = 0;              // the query's
  std::int64_t value_steps_ = 0, value_features_ = 0;  // the value's (self: the query's)
  std::int64_t width_ = 0;                             // heads * key_dim
  Projection query_, key_, value_, output_;
  Tensor q_;           // [batch * steps, width]
  Tensor k_, v_;       // [batch * value steps, width]
  Tensor weights_;     // [batch, heads, steps, value steps]: the attention weights
  Tensor dropout_mask_;  // the same: the dropout's mask of the last training pass
  Tensor kept_;        // [threads, steps * value steps]: a thread's head's weights after dropout
  Tensor context_;     // [batch * steps, width]: the heads' results
  Tensor dq_, dk_, dv_, dcontext_;
  Tensor dweights_;    // [threads, steps * value steps]: a thread's head's weights' gradient
};

/// Adds a learned vector to each step of a sequence [steps, features]: "<name>/embeddings"
/// [steps, features] (normal, standard deviation 0.02), as KerasNLP's PositionEmbedding. Without
/// it, attention sees a set, not a sequence.
class PositionEmbedding : public Layer {
 public:
  explicit PositionEmbedding(std::string name) : name_(std::move(name)) {}

  const std::string& name() const override { return name_; }
  Shape build(Graph& graph, const Shape& input) override;
  void forward(const Tensor& input, Tensor& output, const OpContext& context) override;
  void backward(const Tensor& input, const Tensor& output, const Tensor& grad_output,
                Tensor* grad_input, std::span<float> grads) override;

 private:
  std::string name_;
  Graph* graph_ = nullptr;
  std::int64_t size_ = 0;  // steps * features
  std::int64_t offset_ = 0;
};

/// Terse constructors.
std::unique_ptr<Layer> multi_head_attention(std::string name, std::int64_t heads,
                                            std::int64_t key_dim = 0, bool causal = false,
                                            float dropout = 0.0f);
/// Applied to {query, value} (or {query, value, value's mask}).
std::unique_ptr<Layer> cross_attention(std::string name, std::int64_t heads,
                                       std::int64_t key_dim = 0, float dropout = 0.0f);
std::unique_ptr<Layer> position_embedding(std::string name);

}  // namespace cohort
