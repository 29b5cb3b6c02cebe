#pragma once
// A model of several outputs (Keras's multi-output models): its heads are joined into one output,
// each with its own loss, weight and metrics over its own columns of the output and the targets.
//
//   auto loss = std::make_unique<cohort::HeadsLoss>(std::vector<cohort::Head>{
//       {.name = "class", .outputs = 10, .targets = 1,
//        .loss = std::make_unique<cohort::SoftmaxCrossEntropyLoss>(), .labels = true},
//       {.name = "box", .outputs = 4, .targets = 4, .loss = std::make_unique<cohort::HuberLoss>(),
//        .weight = 0.5f}});
//   model.apply(cohort::concatenate("heads"), {class_logits, box});   // [14] per example
//   auto box_mae = loss->metric("box", cohort::make_metric("mae"));    // "box/mae"
//   model.set_loss(std::move(loss));  // 1 x class's loss + 0.5 x box's; metrics class/accuracy, box/mse
//   model.add_metric(std::move(box_mae));

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cohort/core/nn/loss.h"

namespace cohort {

/// One head: the next `outputs` columns of the model's output (an example's values, read as one
/// row), compared by `loss` with the next `targets` columns of the float targets (read alike).
/// A head of no target columns holds a loss of the outputs alone (GaussianKlLoss: a VAE's KL
/// term beside its reconstruction, Keras's add_loss).
struct Head {
  std::string name;
  std::int64_t outputs = 0;
  std::int64_t targets = 0;
  std::unique_ptr<Loss> loss;
  /// Its one target column holds a class label (0, 1, ... as a float) for a loss of class labels
  /// (softmax cross-entropy), rather than values.
  bool labels = false;
  /// Its loss's weight in the model's: the loss is the sum of weight x head's loss (Keras's
  /// loss_weights).
  float weight = 1.0f;
};

/// Where a head's columns are: what its metrics and the loss take from a batch.
struct HeadColumns {
  std::string name;
  std::int64_t output_begin = 0, outputs = 0;
  std::int64_t target_begin = 0, targets = 0;
  bool labels = false;
};

/// The KL divergence of a diagonal Gaussian from the standard normal, as a VAE's encoder gives
/// it (Kingma and Welling, appendix B): of each example's 2 L values, the first L the means mu,
/// the last L the log-variances v; its loss 0.5 sum_j (mu_j^2 + exp(v_j) - 1 - v_j), averaged
/// over the examples. It reads no targets (a head of 0 target columns), and has no metrics or
/// probabilities. InvalidArgument at check() for an odd number of values per example.
///
///   {.name = "pixels", .outputs = 784, .targets = 784,
///    .loss = std::make_unique<cohort::SigmoidCrossEntropyLoss>(), .weight = 784},  // a sum over pixels
///   {.name = "kl", .outputs = 2 * latent, .targets = 0,
///    .loss = std::make_unique<cohort::GaussianKlLoss>()}
class GaussianKlLoss final : public Loss {
 public:
  std::string name() const override { return "gaussian_kl"; }
  void check(const Shape& prediction, const TargetSpec& targets) const override;
  float forward(const Tensor& predictions, const Targets& targets) override;
  void backward(Tensor& grad) override { grad = grad_; }

 private:
  Tensor grad_;
};

/// The loss of a model of several heads: the weighted sum of theirs, over float targets of all
/// the heads' target columns. The heads' columns are taken in their order. InvalidArgument at
/// construction for no heads, a head without a name (or one holding '/' or '@', which its
/// metrics' names use), a loss or output columns, a name given twice, a
/// weight that is negative or not finite, and `labels` with other than one target column; at
/// forward(), for a label column that holds no whole number >= 0, naming the head and example.
class HeadsLoss final : public Loss {
 public:
  explicit HeadsLoss(std::vector<Head> heads);

  std::string name() const override { return "heads"; }
  void check(const Shape& prediction, const TargetSpec& targets) const override;
  /// Each head's part of one example's targets: its loss's check_target, or a class label.
  void check_target(std::span<const float> target) const override;
  float forward(const Tensor& predictions, const Targets& targets) override;
  void backward(Tensor& grad) override;
  /// The output with each head's columns as its loss reads them: the probabilities of a head
  /// whose loss has them (softmax cross-entropy's softmax, a sigmoid's), the values of others.
  Tensor probabilities(const Tensor& output) const override;

  /// `metric` over head `head`'s columns, named "<head>/<metric's name>". InvalidArgument for
  /// an unknown head, naming the heads.
  std::unique_ptr<Metric> metric(const std::string& head, std::unique_ptr<Metric> metric) const;
  /// Each head's loss's default metrics (default_metrics()), over its columns.
  std::vector<std::unique_ptr<Metric>> default_metrics() const;

  std::int64_t outputs() const { return outputs_; }
  std::int64_t targets() const { return targets_; }
  const std::vector<HeadColumns>& columns() const { return columns_; }
  /// Each head's loss in the last forward(), unweighted, in the order of the heads.
  const std::vector<float>& head_losses() const { return head_losses_; }

 private:
  std::vector<Head> heads_;
  std::vector<HeadColumns> columns_;
  std::int64_t outputs_ = 0, targets_ = 0;
  std::vector<float> head_losses_;
  std::vector<Tensor> predictions_, values_, grads_;     // per head, the last batch's
  std::vector<std::vector<std::int32_t>> labels_;
  Shape shape_;  // of the last batch's predictions
};

}  // namespace cohort
