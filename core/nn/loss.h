#pragma once
// Losses and metrics as objects: what a model's output is compared with, and how.
//
//   model.set_loss(std::make_unique<SoftmaxCrossEntropyLoss>(/*label_smoothing=*/0.1f));
//   model.add_metric(std::make_unique<TopKAccuracy>(5));
//
// A user's loss derives from Loss (forward and backward) and a user's metric from Metric.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cohort/core/nn/ops/ops.h"
#include "cohort/core/nn/tensor.h"

namespace cohort {

/// What a batch of predictions is compared with: a class label per example, or float targets.
struct Targets {
  std::span<const std::int32_t> labels;  ///< one per example (classification), or empty
  const Tensor* values = nullptr;        ///< [N, ...] (regression, multi-label), or null

  /// The number of examples (labels or the targets' first dimension).
  std::int64_t size() const;
};

/// What a dataset gives per example, to check a loss or metric against the data before training.
struct TargetSpec {
  bool labels = true;   ///< class labels, else float targets
  int num_classes = 0;  ///< labels: in [0, num_classes)
  Shape shape;          ///< float targets: one example's shape

  static TargetSpec classes(int n) { return {true, n, {}}; }
  static TargetSpec values(Shape shape) { return {false, 0, std::move(shape)}; }
  /// "class labels in [0, 10)", "float targets [3]".
  std::string to_string() const;
};

/// A training loss. forward() gives the batch mean; backward() writes dLoss/dPredictions for the
/// last forward(). Keeps what backward needs and reuses its buffers. Not thread-safe (one per
/// model).
class Loss {
 public:
  virtual ~Loss() = default;
  virtual std::string name() const = 0;
  /// Throws InvalidArgument, naming the loss, the predictions and the targets, when predictions
  /// of `prediction` shape per example cannot be compared with `targets`.
  virtual void check(const Shape& prediction, const TargetSpec& targets) const = 0;
  /// The mean loss of the batch. Throws InvalidArgument for targets that do not fit (a label out
  /// of range, a size mismatch), naming what.
  virtual float forward(const Tensor& predictions, const Targets& targets) = 0;
  /// One example's float targets, checked for every example of a dataset before training and
  /// evaluation (check_dataset), so that a fault names the file and the example: an
  /// InvalidArgument naming the value this loss can never take (sigmoid cross-entropy, focal,
  /// Dice: one outside [0, 1]; categorical cross-entropy: a row that is no distribution; sparse
  /// categorical cross-entropy: no class index). Any, by default.
  virtual void check_target(std::span<const float> /*target*/) const {}
  virtual void backward(Tensor& grad) = 0;
  /// The probabilities a model's output stands for under this loss (softmax cross-entropy: the
  /// softmax of each row of logits; sigmoid cross-entropy: each logit's sigmoid). A loss of
  /// values (regression) has none: InvalidArgument naming it.
  virtual Tensor probabilities(const Tensor& output) const;
  /// The activation this loss applies to the model's output itself, whose output is then logits:
  /// "softmax", "sigmoid", or empty (the loss compares the output as it is).
  virtual std::string output_activation() const { return {}; }
};

/// Softmax cross-entropy of logits [N, classes] against class labels, with label smoothing: the
/// target is (1 - s) one-hot + s / classes (TensorFlow's label_smoothing); with class weights
/// (one per class, >= 0), each example's loss times its class's weight, so that a rare class
/// counts for more (Keras's class_weight; see data::class_weights). The weighted loss is the one
/// reported, in training and evaluation alike; the metrics are not weighted.
class SoftmaxCrossEntropyLoss final : public Loss {
 public:
  explicit SoftmaxCrossEntropyLoss(float label_smoothing = 0.0f, std::vector<float> class_weights = {});
  std::string name() const override { return "softmax_cross_entropy"; }
  void check(const Shape& prediction, const TargetSpec& targets) const override;
  float forward(const Tensor& predictions, const Targets& targets) override;
  void backward(Tensor& grad) override { op_.backward(grad); }
  Tensor probabilities(const Tensor& output) const override;
  std::string output_activation() const override { return "softmax"; }
  float label_smoothing() const { return op_.label_smoothing(); }
  const std::vector<float>& class_weights() const { return op_.class_weights(); }

 private:
  SoftmaxCrossEntropy op_;
};

/// Sigmoid cross-entropy of logits against float targets in [0, 1] of the same shape, averaged
/// over every element (multi-label classification), computed stably:
/// max(x, 0) - x t + log(1 + exp(-|x|)). With positive weights, an output's positive targets
/// weigh pw times more: (1 - t) x + (1 + (pw - 1) t) (log(1 + exp(-|x|)) + max(-x, 0))
/// (TensorFlow's weighted_cross_entropy_with_logits, PyTorch's BCEWithLogitsLoss pos_weight), for
/// labels that are rarely 1 (see data::positive_weights).
class SigmoidCrossEntropyLoss final : public Loss {
 public:
  /// One weight per output of an example, or one for every output; empty: 1. Each finite and
  /// >= 0, else InvalidArgument.
  explicit SigmoidCrossEntropyLoss(std::vector<float> pos_weight = {});
  const std::vector<float>& pos_weight() const { return pos_weight_; }
  std::string name() const override { return "sigmoid_cross_entropy"; }
  void check(const Shape& prediction, const TargetSpec& targets) const override;
  float forward(const Tensor& predictions, const Targets& targets) override;
  void check_target(std::span<const float> target) const override;
  void backward(Tensor& grad) override;
  Tensor probabilities(const Tensor& output) const override;
  std::string output_activation() const override { return "sigmoid"; }

 private:
  std::vector<float> pos_weight_;
  Tensor grad_;
};

/// Softmax cross-entropy of logits against float targets of the same shape whose last axis is a
/// distribution over the classes (one-hot, or soft: label smoothing of your own, distillation),
/// averaged over every row of that axis: Keras's CategoricalCrossentropy(from_logits=True). A
/// class per step of a sequence is targets [steps, classes], a one-hot row per step (tagging,
/// next-token prediction); a model's output of [steps * classes] values is read by the targets'
/// rows too. A row of zeros is a step without a target (a padded one): it is left out of the
/// mean, and of CategoricalAccuracy's. Any other row (a value outside [0, 1], a sum off 1 by more
/// than 0.01: two ones, a -1, a row scaled by a weight) is an InvalidArgument naming it. The
/// gradient is softmax - t per row (softmax * sum(t) - t, exactly), over the rows with a target.
class CategoricalCrossEntropyLoss final : public Loss {
 public:
  std::string name() const override { return "categorical_cross_entropy"; }
  void check(const Shape& prediction, const TargetSpec& targets) const override;
  float forward(const Tensor& predictions, const Targets& targets) override;
  /// Each row of classes (as check() last saw them) a distribution or zeros, as forward() has
  /// it, naming the row ("position 7 of the example's 1024"): before training, with the file.
  void check_target(std::span<const float> target) const override;
  void backward(Tensor& grad) override { grad = grad_; }
  /// The softmax of each row of classes: rows of the targets' last axis as check() last saw
  /// them (a flat output of [steps * classes] too), else of the output's last axis.
  Tensor probabilities(const Tensor& output) const override;
  std::string output_activation() const override { return "softmax"; }

 private:
  Tensor grad_;
  mutable std::int64_t classes_ = 0;  // the targets' last axis, from check()
};

/// Softmax cross-entropy of logits against a class index per row of classes: float targets
/// [steps] holding each step's class (a token id, for next-token prediction), for an output of
/// [steps, classes] (or [steps * classes]) per example; PyTorch's CrossEntropyLoss over a
/// sequence, Keras's SparseCategoricalCrossentropy(from_logits=True), without the one-hot rows
/// CategoricalCrossEntropyLoss takes (a vocabulary of 30,000 is 120 KB a step there, 4 bytes
/// here). A negative target (-1, or PyTorch's ignore_index -100) is a step without a target (a
/// padded one), left out of the mean and of SparseCategoricalAccuracy's; any other must be a
/// class index, or an InvalidArgument names it. The gradient is softmax - one-hot per row, over
/// the rows with a target. With class weights (one per class, finite and >= 0), each row's loss
/// and gradient times its class's weight, so that a rare class of a mask's pixels counts for
/// more; the mean is still over the rows with a target (Keras's class_weight; PyTorch's weight
/// divides by the weights' sum instead). The weighted loss is the one reported.
class SparseCategoricalCrossEntropyLoss final : public Loss {
 public:
  explicit SparseCategoricalCrossEntropyLoss(std::vector<float> class_weights = {});
  const std::vector<float>& class_weights() const { return weights_; }
  std::string name() const override { return "sparse_categorical_cross_entropy"; }
  void check(const Shape& prediction, const TargetSpec& targets) const override;
  float forward(const Tensor& predictions, const Targets& targets) override;
  /// Each target a class index in [0, classes) (as check() last saw them) or negative (none),
  /// as forward() has it, naming the position ("position 165 of the example's 1024"): a mask's
  /// pixel of class 3 for 3 classes is found before training, with the file and the example.
  void check_target(std::span<const float> target) const override;
  void backward(Tensor& grad) override { grad = grad_; }
  /// The softmax of each row of classes (as check() last saw them, else the output's last axis).
  Tensor probabilities(const Tensor& output) const override;
  std::string output_activation() const override { return "softmax"; }

 private:
  // InvalidArgument unless the class weights, if any, are one per class of `classes`.
  void check_weights(std::int64_t classes) const;

  std::vector<float> weights_;  // per class; empty: none
  Tensor grad_;
  mutable std::int64_t classes_ = 0;  // from check()
};

/// Mean squared error against float targets of the prediction's shape, averaged over every
/// element.
class MeanSquaredErrorLoss final : public Loss {
 public:
  std::string name() const override { return "mean_squared_error"; }
  void check(const Shape& prediction, const TargetSpec& targets) const override;
  float forward(const Tensor& predictions, const Targets& targets) override;
  void backward(Tensor& grad) override;

 private:
  Tensor grad_;
};

/// Mean absolute error against float targets of the prediction's shape, averaged over every
/// element; its gradient at a zero difference is 0, as TensorFlow's.
class MeanAbsoluteErrorLoss final : public Loss {
 public:
  std::string name() const override { return "mean_absolute_error"; }
  void check(const Shape& prediction, const TargetSpec& targets) const override;
  float forward(const Tensor& predictions, const Targets& targets) override;
  void backward(Tensor& grad) override;

 private:
  Tensor grad_;
};

/// Huber loss against float targets, averaged over every element (TensorFlow's and Keras's
/// huber): 0.5 d^2 where |d| <= delta, delta (|d| - 0.5 delta) beyond, d = prediction - target.
/// Squared near the target, linear far from it: robust to outliers.
class HuberLoss final : public Loss {
 public:
  /// delta > 0, else InvalidArgument.
  explicit HuberLoss(float delta = 1.0f);
  std::string name() const override { return "huber"; }
  void check(const Shape& prediction, const TargetSpec& targets) const override;
  float forward(const Tensor& predictions, const Targets& targets) override;
  void backward(Tensor& grad) override;
  float delta() const { return delta_; }

 private:
  float delta_;
  Tensor grad_;
};

/// Focal loss of logits against float targets in [0, 1] of the same shape (Lin et al., 2017):
/// sigmoid cross-entropy times (1 - p_t)^gamma, p_t = p t + (1 - p)(1 - t) the probability the
/// model gives the target, and times alpha t + (1 - alpha)(1 - t) where alpha >= 0, averaged over
/// every element: an easy example's loss fades, so the many easy negatives of a rare class do not
/// rule the gradient (torchvision's sigmoid_focal_loss with reduction "mean", Keras's
/// BinaryFocalCrossentropy with apply_class_balancing when alpha >= 0). gamma 0 and alpha < 0 is
/// sigmoid cross-entropy. Its probabilities are the sigmoids.
class FocalLoss final : public Loss {
 public:
  /// gamma >= 0 and alpha < 0 (none) or in [0, 1], else InvalidArgument.
  explicit FocalLoss(float gamma = 2.0f, float alpha = 0.25f);
  std::string name() const override { return "focal"; }
  void check(const Shape& prediction, const TargetSpec& targets) const override;
  float forward(const Tensor& predictions, const Targets& targets) override;
  void check_target(std::span<const float> target) const override;
  void backward(Tensor& grad) override { grad = grad_; }
  Tensor probabilities(const Tensor& output) const override;
  std::string output_activation() const override { return "sigmoid"; }
  float gamma() const { return gamma_; }
  float alpha() const { return alpha_; }

 private:
  float gamma_, alpha_;
  Tensor grad_;
};

/// Soft Dice loss of logits against float targets in [0, 1] of the same shape (segmentation
/// masks): each example's 1 - (2 sum(p t) + s) / (sum(p) + sum(t) + s) over all its values, p the
/// logits' sigmoids, averaged over the examples; s (1 by default) keeps an example without
/// object or prediction from dividing by 0, the common form of Keras and PyTorch code. Each
/// example's overlap counts whatever share of the image its object covers, where a per-pixel
/// cross-entropy is ruled by the background. Its probabilities are the sigmoids.
class DiceLoss final : public Loss {
 public:
  /// smooth > 0, else InvalidArgument.
  explicit DiceLoss(float smooth = 1.0f);
  std::string name() const override { return "dice"; }
  void check(const Shape& prediction, const TargetSpec& targets) const override;
  float forward(const Tensor& predictions, const Targets& targets) override;
  void check_target(std::span<const float> target) const override;
  void backward(Tensor& grad) override { grad = grad_; }
  Tensor probabilities(const Tensor& output) const override;
  std::string output_activation() const override { return "sigmoid"; }
  float smooth() const { return smooth_; }

 private:
  float smooth_;
  Tensor grad_;
};

/// A quantity reported beside the loss (not differentiated). compute() gives the batch mean.
class Metric {
 public:
  virtual ~Metric() = default;
  /// How it is fetched: "accuracy", "top5_accuracy", "mse", ...
  virtual std::string name() const = 0;
  virtual void check(const Shape& prediction, const TargetSpec& targets) const = 0;
  virtual float compute(const Tensor& predictions, const Targets& targets) = 0;
  /// Over many batches (an evaluation): numbers whose sums over the batches give the metric of
  /// all their examples through from_counts(). The default is a mean of per-example values, as
  /// accuracy is: the batch's value (`batch_value`, compute()'s) times its examples, and its
  /// examples. Precision, recall and AUC count instead, since a mean of their batch values is
  /// not their value over the whole set.
  virtual std::vector<double> counts(const Tensor& predictions, const Targets& targets, float batch_value);
  virtual double from_counts(std::span<const double> counts) const;
  /// Whether a higher value is the better one, which ValidationHook and EarlyStoppingHook ask
  /// in their kAuto mode (as Keras's metrics carry a direction). By the name (direction_by_name),
  /// which every built-in metric's answers (true for the accuracies, precision, recall, f1, auc
  /// and pr_auc, false for mse, mae and perplexity); none for a name it does not know: a metric of
  /// one's own (a mean IoU, a Dice score) says which here, or the hook is given kMin or kMax,
  /// else kAuto refuses it.
  virtual std::optional<bool> higher_is_better() const { return direction_by_name(name()); }
  /// Whether a higher value of a metric named `name` is the better one, by the name alone: true
  /// for an accuracy ("top5_accuracy"), "precision", "recall", "f1", "auc" and "pr_auc" (of any
  /// class, "recall@3"; of a head, "class/auc"), false for a name ending in "loss" or "error",
  /// "mse", "mae", "rmse" and "perplexity", none for any other.
  static std::optional<bool> direction_by_name(const std::string& name);
};

/// Precision, recall and the area under the ROC curve of a yes/no decision, counted over every
/// example an evaluation sees. Of multi-label outputs against 0/1 float targets: every logit is
/// a decision, positive above 0 (a sigmoid above 0.5), micro-averaged over all of them, as
/// Keras's metrics on sigmoid outputs. Of a classifier's logits against class labels: class
/// `positive_class` against the rest, an example predicted positive when that class has its
/// largest logit (its arg max; Keras's class_id thresholds the probability at 0.5 instead, the
/// same for two classes), scored by that class's log-odds against the rest for the AUC.
class BinaryDecisionMetric : public Metric {
 public:
  void check(const Shape& prediction, const TargetSpec& targets) const override;
  float compute(const Tensor& predictions, const Targets& targets) override;
  /// Precision's and recall's: the first count's fraction of the two (0 when both are 0).
  double from_counts(std::span<const double> counts) const override;
  int positive_class() const { return positive_class_; }
  /// Where the classes have names (a CSV file's label column of names): the positive class's,
  /// which the metric's name then gives in place of its number ("precision@legit"), so that a
  /// report never leaves open which class was scored. Empty: by number.
  void set_class_name(std::string name) { class_name_ = std::move(name); }

 protected:
  /// `positive_class` >= 0 (used with class labels only), else InvalidArgument; `class_named`:
  /// the name gives the class even when it is 1 ("recall@1", as asked for by that name).
  BinaryDecisionMetric(int positive_class, bool class_named);
  /// `base` ("precision"), with "@<class>" for a positive class other than 1 ("precision@3"),
  /// or where the class was named; "@<name>" where the class has a name (set_class_name).
  std::string named(const char* base) const;
  /// Calls f(log_odds, predicted_positive, positive) for each decision of the batch: the
  /// positive's log-odds log(p / (1 - p)) as a double, from the logits (NaN for a row with a NaN
  /// logit).
  template <typename F>
  void each_decision(const Tensor& predictions, const Targets& targets, F&& f) const;

 private:
  int positive_class_;
  bool class_named_;
  std::string class_name_;
};

/// Of the examples predicted positive, the fraction that are ("precision"; 0 when none is).
class Precision final : public BinaryDecisionMetric {
 public:
  explicit Precision(int positive_class = 1, bool class_named = false)
      : BinaryDecisionMetric(positive_class, class_named) {}
  std::string name() const override { return named("precision"); }
  std::vector<double> counts(const Tensor& predictions, const Targets& targets, float) override;
};

/// Of the positive examples, the fraction predicted so ("recall"; 0 when there is none).
class Recall final : public BinaryDecisionMetric {
 public:
  explicit Recall(int positive_class = 1, bool class_named = false)
      : BinaryDecisionMetric(positive_class, class_named) {}
  std::string name() const override { return named("recall"); }
  std::vector<double> counts(const Tensor& predictions, const Targets& targets, float) override;
};

/// The harmonic mean of precision and recall ("f1"), 2 tp / (2 tp + fp + fn), counted over
/// every decision (micro-averaged, as Keras's F1Score with average="micro"; 0 when there is no
/// positive, predicted or true).
class F1Score final : public BinaryDecisionMetric {
 public:
  explicit F1Score(int positive_class = 1, bool class_named = false)
      : BinaryDecisionMetric(positive_class, class_named) {}
  std::string name() const override { return named("f1"); }
  std::vector<double> counts(const Tensor& predictions, const Targets& targets, float) override;
  double from_counts(std::span<const double> counts) const override;
};

/// The area under the ROC curve ("auc"): the positives' and negatives' scores counted in bins
/// of their log-odds log(p / (1 - p)), the curve through the bins' edges integrated by
/// trapezoids (a positive and a negative in one bin count as a tie, a half). The log-odds come
/// from the logits (a sigmoid's logit; a class's logit less the log-sum-exp of the others'), so
/// that confident scores keep their order where a float probability would round to 1 (from
/// log-odds of about 17). kBins bins spread evenly over [-kMaxLogOdds, kMaxLogOdds], each 1/128
/// of log-odds wide (p within 0.8% of each other near 0 or 1, 0.002 near 0.5): even bins of the
/// log-odds resolve both ends of [0, 1] alike, where a rare class's scores crowd (1e-4 to 1e-2;
/// Keras's 200 thresholds evenly over [0, 1] put most of them below the first and its AUC far
/// below the exact one). Beyond them, on each side, kTailBins bins of 1/16 of an octave each
/// (log-odds 16 to 16.7, ..., up to 16 * 2^16; further: the last), so that a very confident
/// model's scores (log-odds of 20 and 40) are not all ties. Within 1e-3 of the exact, rank-based
/// area on such data. 0.5 is chance, 1 a perfect ranking; 0 when a class is missing.
class Auc : public BinaryDecisionMetric {
 public:
  static constexpr int kBins = 4096;
  static constexpr double kMaxLogOdds = 16;
  static constexpr int kTailBins = 256;
  explicit Auc(int positive_class = 1, bool class_named = false)
      : BinaryDecisionMetric(positive_class, class_named) {}
  std::string name() const override { return named("auc"); }
  std::vector<double> counts(const Tensor& predictions, const Targets& targets, float) override;
  double from_counts(std::span<const double> counts) const override;
};

/// The area under the precision-recall curve ("pr_auc"), as average precision (scikit-learn's
/// average_precision_score): over the thresholds from the highest score down, the precision at
/// each times the recall it adds. Counted in Auc's bins (a bin's scores one threshold). Where
/// positives are rare, it says what the ROC curve's area does not: how many of the examples
/// ranked first are positives (a random ranking scores the positives' share, not 0.5). 0 when
/// there is no positive.
class PrAuc final : public Auc {
 public:
  explicit PrAuc(int positive_class = 1, bool class_named = false)
      : Auc(positive_class, class_named) {}
  std::string name() const override { return named("pr_auc"); }
  double from_counts(std::span<const double> counts) const override;
};

/// Fraction of examples whose top prediction is the label (the first maximum on ties); a row
/// with a logit that is not finite predicts no class.
class Accuracy final : public Metric {
 public:
  std::string name() const override { return "accuracy"; }
  void check(const Shape& prediction, const TargetSpec& targets) const override;
  float compute(const Tensor& predictions, const Targets& targets) override;
};

/// Fraction of examples whose label is among the k largest predictions ("top<k>_accuracy").
class TopKAccuracy final : public Metric {
 public:
  explicit TopKAccuracy(int k);
  std::string name() const override { return "top" + std::to_string(k_) + "_accuracy"; }
  void check(const Shape& prediction, const TargetSpec& targets) const override;
  float compute(const Tensor& predictions, const Targets& targets) override;

 private:
  int k_;
};

/// Fraction of rows (of the float targets' last axis: a step's classes) whose largest logit is
/// where the target's largest value is, the first of each on ties ("categorical_accuracy", for
/// categorical cross-entropy); rows of zeros (steps without a target) are not counted.
class CategoricalAccuracy final : public Metric {
 public:
  std::string name() const override { return "categorical_accuracy"; }
  void check(const Shape& prediction, const TargetSpec& targets) const override;
  float compute(const Tensor& predictions, const Targets& targets) override;
  /// Hits and rows with a target, so that a padded step counts in no batch.
  std::vector<double> counts(const Tensor& predictions, const Targets& targets,
                             float batch_value) override;
};

/// Fraction of rows with a target whose largest logit is at the target's class index
/// ("sparse_categorical_accuracy", for sparse categorical cross-entropy; the first maximum on
/// ties); negative targets (steps without one) are not counted.
class SparseCategoricalAccuracy final : public Metric {
 public:
  std::string name() const override { return "sparse_categorical_accuracy"; }
  void check(const Shape& prediction, const TargetSpec& targets) const override;
  float compute(const Tensor& predictions, const Targets& targets) override;
  std::vector<double> counts(const Tensor& predictions, const Targets& targets,
                             float batch_value) override;
};

/// A language model's perplexity ("perplexity"): the exponential of the mean cross-entropy of the
/// softmax of each row of logits, over the rows with a target, against a class index per row
/// (targets with fewer values than the predictions: sparse categorical cross-entropy's) or
/// one-hot rows (as many values: categorical cross-entropy's). Counted over every row an
/// evaluation sees, not averaged over batches; lower is better, 1 is certainty. NaN over no row
/// with a target, where there is nothing to measure (0 would read as better than certain).
class Perplexity final : public Metric {
 public:
  std::string name() const override { return "perplexity"; }
  void check(const Shape& prediction, const TargetSpec& targets) const override;
  float compute(const Tensor& predictions, const Targets& targets) override;
  /// The rows' summed cross-entropy and their count.
  std::vector<double> counts(const Tensor& predictions, const Targets& targets,
                             float batch_value) override;
  double from_counts(std::span<const double> counts) const override;
};

/// Fraction of elements whose logit and 0/1 target agree (logit > 0 against target > 0.5): the
/// accuracy of multi-label predictions ("binary_accuracy"). A NaN logit agrees with none.
class BinaryAccuracy final : public Metric {
 public:
  std::string name() const override { return "binary_accuracy"; }
  void check(const Shape& prediction, const TargetSpec& targets) const override;
  float compute(const Tensor& predictions, const Targets& targets) override;
};

/// Mean squared error against float targets ("mse").
class MeanSquaredError final : public Metric {
 public:
  std::string name() const override { return "mse"; }
  void check(const Shape& prediction, const TargetSpec& targets) const override;
  float compute(const Tensor& predictions, const Targets& targets) override;
};

/// Mean absolute error against float targets ("mae").
class MeanAbsoluteError final : public Metric {
 public:
  std::string name() const override { return "mae"; }
  void check(const Shape& prediction, const TargetSpec& targets) const override;
  float compute(const Tensor& predictions, const Targets& targets) override;
};

/// The loss named `name` ("softmax_cross_entropy", "sigmoid_cross_entropy",
/// "categorical_cross_entropy", "sparse_categorical_cross_entropy", "mean_squared_error" or
/// "mse", "mean_absolute_error" or "mae",
/// "huber" with delta 1, "dice" with smooth 1, "focal" with gamma 2 and alpha 0.25);
/// InvalidArgument naming the known ones otherwise.
std::unique_ptr<Loss> make_loss(const std::string& name, float label_smoothing = 0.0f);
/// The metric named `name`: "accuracy", "top<k>_accuracy" (e.g. "top5_accuracy"),
/// "binary_accuracy", "categorical_accuracy", "sparse_categorical_accuracy", "perplexity", "mse",
/// "mae", "precision", "recall", "f1", "auc" or "pr_auc"
/// (positive class 1 where the targets are class labels; "precision@3" and the like: class 3);
/// InvalidArgument naming the known ones otherwise. `class_names`: the classes' names in class
/// order, where the labels were names (a CSV file's, sorted): "precision@fraud" is then of the
/// class so named (a name before a number: "@1" is the class named "1" where there is one), an
/// unknown name an InvalidArgument listing the names, and a decision metric of a named class is
/// named by it ("precision" of class 1 becomes "precision@legit"; "recall@0" keeps its number).
std::unique_ptr<Metric> make_metric(const std::string& name, std::span<const std::string> class_names = {});
/// Whether a higher value of the loss or metric `name` is the better one, by the name alone: the
/// accuracies ("accuracy", "top<k>_accuracy", "binary_accuracy", "categorical_accuracy", ...),
/// "precision", "recall", "f1", "auc" and "pr_auc" (of any class, "recall@3"; of a head,
/// "class/precision"); a loss, "mse", "mae" and any other name: lower is better. A model's own
/// metric knows better (Metric::higher_is_better), as the hooks' kAuto mode asks it.
bool higher_is_better(const std::string& name);
/// Where among a model's metric `names` is the one StepMetrics::accuracy reports: "accuracy",
/// else "categorical_accuracy", "sparse_categorical_accuracy" or "binary_accuracy" (the first),
/// as Keras's "accuracy" stands for the accuracy of the loss's kind, else the first head's
/// accuracy of any kind ("class/accuracy", HeadsLoss); -1 for none.
int accuracy_metric(std::span<const std::string> names);
/// The metrics that go with a loss by default: accuracy for softmax cross-entropy,
/// binary_accuracy for sigmoid cross-entropy, categorical_accuracy and
/// sparse_categorical_accuracy for the categorical cross-entropies, mse for mean squared error,
/// mse and mae for mean absolute error and Huber, each head's own for HeadsLoss (heads.h), none
/// for others.
std::vector<std::unique_ptr<Metric>> default_metrics(const Loss& loss);

}  // namespace cohort
