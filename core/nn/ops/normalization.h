#pragma once
// Normalisation layers: BatchNormalization (with synchronised statistics across replicas),
// LayerNormalization and GroupNormalization.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/layer.h"
#include "cohort/core/nn/tensor.h"

namespace cohort {

/// Batch normalisation over every axis but the last (the channels of NHWC images, the features
/// of [N, F] rows): y = gamma * (x - mean) / sqrt(var + epsilon) + beta, per channel.
///
/// Variables: "<name>/gamma" (ones) and "<name>/beta" (zeros), trainable, no weight decay; state
/// "<name>/moving_mean" (zeros) and "<name>/moving_variance" (ones), non-trainable. In training
/// (OpContext::training) it normalises with the batch's mean and (biased) variance and, when
/// context.update_state, moves the state toward them: moving = momentum * moving + (1 - momentum)
/// * batch, the variance with Bessel's correction (n / (n - 1)). At inference it normalises with
/// the moving statistics. With Options::activation kRelu, y = max(0, ...): the ReLU that usually
/// follows, in the same pass. Training on one value per channel (a batch of one [N, F] row, or
/// of one pixel) is an InvalidArgument: each would normalise to 0 and pass no gradient.
///
/// Synchronised (Options::synchronized, with a context.cross_replica): the batch statistics are
/// those of every replica's batch together, summed through cross_replica in forward (sum, sum of
/// squares, count) and, in backward, the two sums the input gradient needs (of dy and of
/// dy * x_hat), so W replicas at batch B compute what one process at W * B does.
class BatchNormalization : public Layer {
 public:
  struct Options {
    float momentum = 0.9f;
    float epsilon = 1e-3f;
    bool synchronized = false;
    Activation activation = Activation::kNone;  ///< kRelu: ReLU fused into the output pass
  };
  BatchNormalization(std::string name, Options options);

  const std::string& name() const override { return name_; }
  Shape build(Graph& graph, const Shape& input) override;
  void forward(const Tensor& input, Tensor& output, const OpContext& context) override;
  void backward(const Tensor& input, const Tensor& output, const Tensor& grad_output,
                Tensor* grad_input, std::span<float> grads) override;
  double flops_per_example() const override;
  const Options& options() const { return options_; }

 private:
  std::string name_;
  Options options_;
  Graph* graph_ = nullptr;
  std::int64_t channels_ = 0;
  std::int64_t per_example_ = 0;  // elements of one example
  std::int64_t gamma_offset_ = 0, beta_offset_ = 0;
  std::int64_t mean_offset_ = 0, variance_offset_ = 0;  // in the graph's state
  // Kept from forward for backward.
  bool last_training_ = false;
  CrossReplicaSum* last_cross_replica_ = nullptr;
  double last_count_ = 0;  // elements per channel the statistics were taken over (all replicas)
  std::vector<float> inv_std_;       // per channel
  std::vector<float> mean_;          // per channel, the mean forward normalised with
  std::vector<double> sums_;         // reduction scratch: [2 * C sums, count], what replicas sum
  std::vector<double> partials_;     // per intra-op thread, [2 * C] partial sums each
  std::vector<float> pivot_;         // per channel: what forward's sums subtract first
  std::vector<float> shared_pivot_;  // per channel: the last synchronised batch mean, alike on
                                     // every replica (the pivot of the next synchronised step)
  bool shared_pivot_set_ = false;    // a synchronised step has set shared_pivot_
  std::vector<float> coefficients_;  // per channel: forward's scale, or the input
                                     // gradient's 3 coefficients
};

/// Layer normalisation over the last axis of each example (each row of [..., F]):
/// y = gamma * (x - mean) / sqrt(var + epsilon) + beta, with "<name>/gamma" (ones) and
/// "<name>/beta" (zeros) of [F]. No state; the same in training and inference.
class LayerNormalization : public Layer {
 public:
  explicit LayerNormalization(std::string name, float epsilon = 1e-3f);

  const std::string& name() const override { return name_; }
  Shape build(Graph& graph, const Shape& input) override;
  void forward(const Tensor& input, Tensor& output, const OpContext& context) override;
  void backward(const Tensor& input, const Tensor& output, const Tensor& grad_output,
                Tensor* grad_input, std::span<float> grads) override;
  double flops_per_example() const override;

 private:
  std::string name_;
  float epsilon_;
  Graph* graph_ = nullptr;
  std::int64_t features_ = 0;
  std::int64_t per_example_ = 0;
  std::int64_t gamma_offset_ = 0, beta_offset_ = 0;
  Tensor x_hat_;
  std::vector<float> inv_std_;    // per row
  std::vector<double> partials_;  // per intra-op thread, [2 * F] parameter gradient sums each
};

/// Group normalisation (Keras's GroupNormalization, PyTorch's GroupNorm): each example's channels
/// (the last axis, C) split into `groups` groups of C / groups, each group normalised over its
/// channels at every position, y = gamma * (x - mean) / sqrt(var + epsilon) + beta, with
/// "<name>/gamma" (ones) and "<name>/beta" (zeros) of [C]. Statistics of one example alone:
/// the same in training and inference, and for any batch size (a U-Net's or a detector's batches
/// of a few images, where batch normalisation's estimates are poor). groups = C is instance
/// normalisation; groups = 1 normalises the whole example.
class GroupNormalization : public Layer {
 public:
  GroupNormalization(std::string name, std::int64_t groups = 32, float epsilon = 1e-3f);

  const std::string& name() const override { return name_; }
  Shape build(Graph& graph, const Shape& input) override;
  void forward(const Tensor& input, Tensor& output, const OpContext& context) override;
  void backward(const Tensor& input, const Tensor& output, const Tensor& grad_output,
                Tensor* grad_input, std::span<float> grads) override;
  double flops_per_example() const override;

 private:
  std::string name_;
  std::int64_t groups_;
  float epsilon_;
  Graph* graph_ = nullptr;
  std::int64_t channels_ = 0, positions_ = 0;  // per example: C, and the elements / C
  std::int64_t gamma_offset_ = 0, beta_offset_ = 0;
  Tensor x_hat_;
  std::vector<float> inv_std_;    // per example and group
  std::vector<double> partials_;  // per intra-op thread, [2 * C] parameter gradient sums each
};

}  // namespace cohort
