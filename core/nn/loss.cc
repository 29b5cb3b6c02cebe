#include "cohort/core/nn/loss.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <string_view>
#include <system_error>
#include <utility>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/heads.h"
#include "cohort/core/nn/loss_checks.h"
#include "cohort/core/nn/tensor_eigen.h"

namespace cohort {
namespace loss_detail {

std::string per_example(const Shape& prediction) { return "predictions " + to_string(prediction); }

[[noreturn]] void mismatch(const std::string& what, const Shape& prediction,
                           const TargetSpec& targets, const std::string& why) {
  throw InvalidArgument(what + " does not fit the data: " + per_example(prediction) +
                        " per example, " + targets.to_string() + "; " + why);
}

bool predicts_a_class(const float* logits, std::int64_t classes) {
  return std::all_of(logits, logits + classes, [](float v) { return std::isfinite(v); });
}

std::int64_t classes_of(const Shape& prediction) {
  return prediction.size() == 1 ? prediction[0] : 0;
}

void check_labels(const std::string& what, const Shape& prediction, const TargetSpec& targets) {
  // Several values per example are a value per output whatever their type: integer one-hot or
  // multi-hot rows [N, K] too, which saving as integers would not change.
  const std::int64_t values = num_elements(targets.shape), outputs = num_elements(prediction);
  // As many rows of two or more logits as values: a class index per position (a mask [N, H, W]
  // for logits [N, H, W, classes]), which is sparse categorical cross-entropy's.
  if (!targets.labels && values > 1 && outputs % values == 0 && outputs / values >= 2)
    mismatch(what, prediction, targets,
             "it needs class labels, an integer per example ([N] or [N, 1]); a class index per "
             "position, as these look (a mask's pixel, a sequence's step: " +
                 std::to_string(outputs / values) +
                 " logits each), takes sparse_categorical_cross_entropy (a negative index: no "
                 "target there), one-hot rows of classes categorical_cross_entropy");
  if (!targets.labels && values > 1)
    mismatch(what, prediction, targets,
             "it needs class labels, an integer per example ([N] or [N, 1]); several values per example, "
             "integers or floats, are read as a target per output (one-hot or multi-hot rows): save one-hot "
             "rows' classes, as numpy's y.argmax(1).astype(np.int32) gives, or take one-hot rows with "
             "categorical_cross_entropy (multi-hot ones with sigmoid_cross_entropy; a class index "
             "per position, a mask's pixel or a sequence's step, with "
             "sparse_categorical_cross_entropy)");
  if (!targets.labels)
    mismatch(what, prediction, targets,
             "it needs class labels (integers: floats are targets; save the labels as integers, "
             "as numpy's y.astype(np.int32) gives)");
  const std::int64_t classes = classes_of(prediction);
  if (classes < 1) mismatch(what, prediction, targets, "it needs a vector of logits per example");
  if (targets.num_classes > classes)
    mismatch(what, prediction, targets,
             "there are " + std::to_string(targets.num_classes) + " classes but " +
                 std::to_string(classes) + " logits");
}

void check_values(const std::string& what, const Shape& prediction, const TargetSpec& targets) {
  // An integer per example ([N] or [N, 1]) is read as a class label, 0/1 ones too.
  if (targets.labels)
    mismatch(what, prediction, targets,
             "it needs float targets (an integer per example is read as a class label: save 0/1 or other "
             "targets as floats, as numpy's y.astype(np.float32) gives; class labels take a softmax loss)");
  if (targets.shape != prediction && num_elements(targets.shape) != num_elements(prediction))
    mismatch(what, prediction, targets, "targets and predictions differ in shape");
}

const Tensor& values_of(const std::string& what, const Tensor& predictions, const Targets& targets) {
  if (targets.values == nullptr) throw InvalidArgument(what + ": the batch has no float targets");
  // A mean over no examples is no value (softmax cross-entropy refuses it alike).
  if (predictions.rank() < 1 || predictions.dim(0) < 1)
    throw InvalidArgument(what + ": predictions " + to_string(predictions.shape()) + " have no batch");
  const Tensor& t = *targets.values;
  if (t.size() != predictions.size() || t.dim(0) != predictions.dim(0))
    throw InvalidArgument(what + ": targets " + to_string(t.shape()) + " for predictions " +
                          to_string(predictions.shape()));
  return t;
}

}  // namespace loss_detail

using namespace loss_detail;

namespace {

// A logit's probability, by a form that never overflows.
float sigmoid(float x) {
  const float e = std::exp(-std::abs(x));
  return x >= 0 ? 1.0f / (1.0f + e) : e / (1.0f + e);
}

// Each logit's sigmoid.
Tensor sigmoids(const Tensor& logits) {
  Tensor p(logits.shape());
  for (std::int64_t i = 0; i < logits.size(); ++i) p[i] = sigmoid(logits[i]);
  return p;
}

// InvalidArgument naming loss `name` unless every target is in [0, 1]: outside, a mask of 0 and
// 255 say, a sigmoid's loss has no lower bound and training would run on, its loss below 0.
// `where` says whose targets they are ("example 3 of the batch"), for the message.
void check_probabilities(const std::string& name, std::span<const float> targets, const std::string& where) {
  for (std::size_t i = 0; i < targets.size(); ++i)
    if (!(targets[i] >= 0.0f && targets[i] <= 1.0f)) {
      char value[32];
      std::snprintf(value, sizeof value, "%g", static_cast<double>(targets[i]));
      throw InvalidArgument("loss " + name + ": target " + value + " (value " + std::to_string(i) + " of " +
                            (where.empty() ? "the example" : where) + ") is not in [0, 1], a probability per "
                            "logit (bytes: divide by 255)");
    }
}

// The same of a batch's targets [b, ...], naming the example of the batch.
void check_probabilities(const std::string& name, const Tensor& targets) {
  const std::int64_t examples = targets.rank() > 0 ? targets.dim(0) : 0;
  const std::int64_t per = examples > 0 ? targets.size() / examples : 0;
  for (std::int64_t e = 0; e < examples; ++e)
    check_probabilities(name, targets.span().subspan(static_cast<std::size_t>(e * per), static_cast<std::size_t>(per)),
                        "example " + std::to_string(e) + " of the batch");
}

}  // namespace

void loss_detail::softmax(const float* x, std::int64_t n, float* y) {
  const float top = *std::max_element(x, x + n);
  double total = 0;
  for (std::int64_t c = 0; c < n; ++c) total += y[c] = std::exp(x[c] - top);
  for (std::int64_t c = 0; c < n; ++c) y[c] = static_cast<float>(y[c] / total);
}

Tensor loss_detail::row_softmax(const Tensor& output, std::int64_t classes) {
  Tensor p(output.shape());
  for (std::int64_t r = 0; classes > 0 && r < output.size() / classes; ++r)
    softmax(output.data() + r * classes, classes, p.data() + r * classes);
  return p;
}

std::int64_t Targets::size() const {
  if (values != nullptr) return values->rank() > 0 ? values->dim(0) : 0;
  return static_cast<std::int64_t>(labels.size());
}

std::string TargetSpec::to_string() const {
  if (labels) return "class labels in [0, " + std::to_string(num_classes) + ")";
  return "float targets " + cohort::to_string(shape);
}

SoftmaxCrossEntropyLoss::SoftmaxCrossEntropyLoss(float label_smoothing, std::vector<float> class_weights)
    : op_(label_smoothing, std::move(class_weights)) {}

void SoftmaxCrossEntropyLoss::check(const Shape& prediction, const TargetSpec& targets) const {
  check_labels("loss " + name(), prediction, targets);
  const std::size_t weights = class_weights().size();
  if (weights != 0 && static_cast<std::int64_t>(weights) != num_elements(prediction))
    throw InvalidArgument("loss " + name() + ": " + std::to_string(weights) +
                          " class weights for a model of " + std::to_string(num_elements(prediction)) +
                          " classes");
}

float SoftmaxCrossEntropyLoss::forward(const Tensor& predictions, const Targets& targets) {
  if (targets.values != nullptr && targets.labels.empty())
    throw InvalidArgument("loss " + name() + ": the batch has float targets, not class labels");
  return op_.forward(predictions, targets.labels);
}

SigmoidCrossEntropyLoss::SigmoidCrossEntropyLoss(std::vector<float> pos_weight)
    : pos_weight_(std::move(pos_weight)) {
  for (std::size_t j = 0; j < pos_weight_.size(); ++j)
    if (!(std::isfinite(pos_weight_[j]) && pos_weight_[j] >= 0.0f))
      throw InvalidArgument("loss " + name() + ": positive weight " + std::to_string(j) + ", " +
                            std::to_string(pos_weight_[j]) + ", is not a finite number >= 0");
}

void SigmoidCrossEntropyLoss::check(const Shape& prediction, const TargetSpec& targets) const {
  check_values("loss " + name(), prediction, targets);
  const auto weights = static_cast<std::int64_t>(pos_weight_.size());
  if (weights > 1 && weights != num_elements(prediction))
    throw InvalidArgument("loss " + name() + ": " + std::to_string(weights) +
                          " positive weights for a model of " + std::to_string(num_elements(prediction)) +
                          " outputs (give one for each, or one for all)");
}

void SigmoidCrossEntropyLoss::check_target(std::span<const float> target) const {
  check_probabilities(name(), target, "");
}

float SigmoidCrossEntropyLoss::forward(const Tensor& predictions, const Targets& targets) {
  const Tensor& t = values_of("loss " + name(), predictions, targets);
  grad_.resize(predictions.shape());
  const std::int64_t n = predictions.size();
  const std::int64_t outputs = predictions.rank() > 0 && predictions.dim(0) > 0 ? n / predictions.dim(0) : n;
  const auto weights = static_cast<std::int64_t>(pos_weight_.size());
  if (weights > 1 && n > 0 && weights != outputs)
    throw InvalidArgument("loss " + name() + ": " + std::to_string(weights) +
                          " positive weights for " + std::to_string(outputs) + " outputs an example");
  const float scale = 1.0f / static_cast<float>(n);
  const float* x = predictions.data();
  const float* y = t.data();
  float* g = grad_.data();
  check_probabilities(name(), t);
  double loss = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    const float xi = x[i];
    const float sigmoid = xi >= 0 ? 1.0f / (1.0f + std::exp(-xi)) : std::exp(xi) / (1.0f + std::exp(xi));
    if (weights == 0) {
      loss += std::max(xi, 0.0f) - xi * y[i] + std::log1p(std::exp(-std::abs(xi)));
      g[i] = (sigmoid - y[i]) * scale;
      continue;
    }
    // l = 1 + (pw - 1) t weighs the positive part; -log(sigmoid(x)) = log(1 + exp(-|x|)) + max(-x, 0).
    const float l = 1.0f + (pos_weight_[static_cast<std::size_t>(weights == 1 ? 0 : i % outputs)] - 1.0f) * y[i];
    loss += (1.0f - y[i]) * xi + l * (std::log1p(std::exp(-std::abs(xi))) + std::max(-xi, 0.0f));
    g[i] = ((1.0f - y[i]) - l * (1.0f - sigmoid)) * scale;
  }
  return static_cast<float>(loss / static_cast<double>(n));
}

void SigmoidCrossEntropyLoss::backward(Tensor& grad) { grad = grad_; }

void MeanSquaredErrorLoss::check(const Shape& prediction, const TargetSpec& targets) const {
  check_values("loss " + name(), prediction, targets);
}

float MeanSquaredErrorLoss::forward(const Tensor& predictions, const Targets& targets) {
  const Tensor& t = values_of("loss " + name(), predictions, targets);
  grad_.resize(predictions.shape());
  const std::int64_t n = predictions.size();
  flat(grad_) = flat(predictions) - flat(t);
  // Summed in double: squares of large targets (1e18) overflow a float sum whose mean fits.
  const double loss = flat(grad_).cast<double>().squaredNorm() / static_cast<double>(n);
  flat(grad_) *= 2.0f / static_cast<float>(n);
  return static_cast<float>(loss);
}

void MeanSquaredErrorLoss::backward(Tensor& grad) { grad = grad_; }

Tensor Loss::probabilities(const Tensor&) const {
  throw InvalidArgument("loss " + name() + " gives values, not probabilities");
}

Tensor SoftmaxCrossEntropyLoss::probabilities(const Tensor& output) const {
  const std::int64_t rows = output.dim(0);
  return row_softmax(output, rows > 0 ? output.size() / rows : 0);
}

Tensor SigmoidCrossEntropyLoss::probabilities(const Tensor& output) const { return sigmoids(output); }

void MeanAbsoluteErrorLoss::check(const Shape& prediction, const TargetSpec& targets) const {
  check_values("loss " + name(), prediction, targets);
}

float MeanAbsoluteErrorLoss::forward(const Tensor& predictions, const Targets& targets) {
  const Tensor& t = values_of("loss " + name(), predictions, targets);
  grad_.resize(predictions.shape());
  const auto n = static_cast<float>(predictions.size());
  flat(grad_) = flat(predictions) - flat(t);
  const double loss = flat(grad_).cast<double>().array().abs().sum() / static_cast<double>(n);  // as MSE's
  flat(grad_) = flat(grad_).array().sign().matrix() / n;
  return static_cast<float>(loss);
}

void MeanAbsoluteErrorLoss::backward(Tensor& grad) { grad = grad_; }

FocalLoss::FocalLoss(float gamma, float alpha) : gamma_(gamma), alpha_(alpha) {
  if (!(gamma >= 0.0f) || !std::isfinite(gamma) || !(alpha < 0.0f || alpha <= 1.0f))
    throw InvalidArgument("loss focal: gamma " + std::to_string(gamma) + " and alpha " + std::to_string(alpha) +
                          ": gamma must be a finite number >= 0, alpha in [0, 1] (or below 0: none)");
}

void FocalLoss::check(const Shape& prediction, const TargetSpec& targets) const {
  check_values("loss " + name(), prediction, targets);
}

void FocalLoss::check_target(std::span<const float> target) const {
  check_probabilities(name(), target, "");
}

float FocalLoss::forward(const Tensor& predictions, const Targets& targets) {
  const Tensor& t = values_of("loss " + name(), predictions, targets);
  check_probabilities(name(), t);
  grad_.resize(predictions.shape());
  const std::int64_t n = predictions.size();
  if (n == 0) return 0.0f;
  const double gamma = gamma_, scale = 1.0 / static_cast<double>(n);
  double loss = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double x = predictions[i], y = t[i];
    const double p = sigmoid(predictions[i]);
    const double ce = std::max(x, 0.0) - x * y + std::log1p(std::exp(-std::abs(x)));
    const double q = 1.0 - (p * y + (1.0 - p) * (1.0 - y));  // 1 - p_t
    const double weight = alpha_ >= 0.0f ? alpha_ * y + (1.0 - alpha_) * (1.0 - y) : 1.0;
    const double fade = gamma == 0.0 ? 1.0 : std::pow(q, gamma);
    loss += weight * ce * fade;
    // d/dx: (p - t) fade + ce gamma q^(gamma - 1) dq/dx, dq/dx = -(2t - 1) p (1 - p); the second
    // term is 0 where gamma is 0 or q is (p saturated: p (1 - p) = 0 too).
    const double dfade = gamma == 0.0 || q <= 0.0 ? 0.0 : gamma * std::pow(q, gamma - 1.0) * -(2.0 * y - 1.0) * p * (1.0 - p);
    grad_[i] = static_cast<float>(weight * ((p - y) * fade + ce * dfade) * scale);
  }
  return static_cast<float>(loss * scale);
}

Tensor FocalLoss::probabilities(const Tensor& output) const { return sigmoids(output); }

DiceLoss::DiceLoss(float smooth) : smooth_(smooth) {
  if (!(smooth > 0.0f) || !std::isfinite(smooth))
    throw InvalidArgument("loss dice: smooth " + std::to_string(smooth) + " is not a finite number > 0");
}

void DiceLoss::check(const Shape& prediction, const TargetSpec& targets) const {
  check_values("loss " + name(), prediction, targets);
}

void DiceLoss::check_target(std::span<const float> target) const {
  check_probabilities(name(), target, "");
}

float DiceLoss::forward(const Tensor& predictions, const Targets& targets) {
  const Tensor& t = values_of("loss " + name(), predictions, targets);
  check_probabilities(name(), t);
  grad_.resize(predictions.shape());
  const std::int64_t examples = predictions.rank() > 0 ? predictions.dim(0) : 1;
  if (examples == 0) return 0.0f;
  const std::int64_t size = predictions.size() / examples;
  const double s = smooth_;
  double loss = 0.0;
  for (std::int64_t b = 0; b < examples; ++b) {
    const float* x = predictions.data() + b * size;
    const float* y = t.data() + b * size;
    float* g = grad_.data() + b * size;
    double overlap = 0.0, total = 0.0;  // sum(p t), sum(p) + sum(t)
    for (std::int64_t i = 0; i < size; ++i) {
      const float p = sigmoid(x[i]);
      g[i] = p;  // kept for the gradient below
      overlap += double{p} * y[i];
      total += double{p} + y[i];
    }
    const double numerator = 2.0 * overlap + s, denominator = total + s;
    loss += 1.0 - numerator / denominator;
    // d(1 - N / D)/dp_i = -(2 t_i D - N) / D^2, times dp/dx = p (1 - p), over the examples.
    const double scale = 1.0 / (denominator * denominator * static_cast<double>(examples));
    for (std::int64_t i = 0; i < size; ++i) {
      const double p = g[i];
      g[i] = static_cast<float>(-(2.0 * y[i] * denominator - numerator) * scale * p * (1.0 - p));
    }
  }
  return static_cast<float>(loss / static_cast<double>(examples));
}

Tensor DiceLoss::probabilities(const Tensor& output) const { return sigmoids(output); }

HuberLoss::HuberLoss(float delta) : delta_(delta) {
  if (!(delta > 0) || !std::isfinite(delta)) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", static_cast<double>(delta));
    throw InvalidArgument(std::string("HuberLoss: delta = ") + text + ", must be > 0");
  }
}

void HuberLoss::check(const Shape& prediction, const TargetSpec& targets) const {
  check_values("loss " + name(), prediction, targets);
}

float HuberLoss::forward(const Tensor& predictions, const Targets& targets) {
  const Tensor& t = values_of("loss " + name(), predictions, targets);
  grad_.resize(predictions.shape());
  const std::int64_t n = predictions.size();
  const float* p = predictions.data();
  const float* y = t.data();
  float* g = grad_.data();
  const float delta = delta_, scale = 1.0f / static_cast<float>(n);
  double loss = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    const float d = p[i] - y[i];
    const float a = std::abs(d);
    const bool near = a <= delta;
    loss += near ? 0.5 * static_cast<double>(d) * d : static_cast<double>(delta) * (a - 0.5 * delta);
    g[i] = (near ? d : std::copysign(delta, d)) * scale;
  }
  return static_cast<float>(loss / static_cast<double>(n));
}

void HuberLoss::backward(Tensor& grad) { grad = grad_; }

void MeanAbsoluteError::check(const Shape& prediction, const TargetSpec& targets) const {
  check_values("metric " + name(), prediction, targets);
}

float MeanAbsoluteError::compute(const Tensor& predictions, const Targets& targets) {
  const Tensor& t = values_of("metric " + name(), predictions, targets);
  return static_cast<float>((flat(predictions) - flat(t)).cast<double>().array().abs().sum() /
                            static_cast<double>(predictions.size()));
}

void Accuracy::check(const Shape& prediction, const TargetSpec& targets) const {
  check_labels("metric " + name(), prediction, targets);
}

float Accuracy::compute(const Tensor& predictions, const Targets& targets) {
  return accuracy(predictions, targets.labels);
}

TopKAccuracy::TopKAccuracy(int k) : k_(k) {
  if (k < 1) throw InvalidArgument("TopKAccuracy: k = " + std::to_string(k) + ", must be >= 1");
}

void TopKAccuracy::check(const Shape& prediction, const TargetSpec& targets) const {
  check_labels("metric " + name(), prediction, targets);
  if (classes_of(prediction) < k_)
    mismatch("metric " + name(), prediction, targets, "k is larger than the number of logits");
}

float TopKAccuracy::compute(const Tensor& predictions, const Targets& targets) {
  const std::int64_t n = predictions.dim(0);
  const std::int64_t classes = predictions.size() / n;
  if (static_cast<std::int64_t>(targets.labels.size()) != n)
    throw InvalidArgument("metric " + name() + ": " + std::to_string(targets.labels.size()) +
                          " labels for a batch of " + std::to_string(n));
  std::int64_t hits = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const float* row = predictions.data() + i * classes;
    const std::int32_t label = targets.labels[static_cast<std::size_t>(i)];
    // TensorFlow's in_top_k: the label is in the top k when fewer than k logits are greater
    // than its own (classes tied with it at the boundary are all in), and never when any logit
    // is not finite (a diverged model scores no hit).
    const float own = row[label];
    std::int64_t better = 0;
    for (std::int64_t c = 0; c < classes; ++c) better += row[c] > own ? 1 : 0;
    hits += predicts_a_class(row, classes) && better < k_ ? 1 : 0;
  }
  return static_cast<float>(hits) / static_cast<float>(n);
}

void BinaryAccuracy::check(const Shape& prediction, const TargetSpec& targets) const {
  check_values("metric " + name(), prediction, targets);
}

float BinaryAccuracy::compute(const Tensor& predictions, const Targets& targets) {
  const Tensor& t = values_of("metric " + name(), predictions, targets);
  std::int64_t agree = 0;
  // A NaN logit (a diverged model's) predicts neither: it agrees with no target.
  for (std::int64_t i = 0; i < predictions.size(); ++i)
    agree += !std::isnan(predictions[i]) && (predictions[i] > 0.0f) == (t[i] > 0.5f) ? 1 : 0;
  return static_cast<float>(agree) / static_cast<float>(predictions.size());
}

void MeanSquaredError::check(const Shape& prediction, const TargetSpec& targets) const {
  check_values("metric " + name(), prediction, targets);
}

float MeanSquaredError::compute(const Tensor& predictions, const Targets& targets) {
  const Tensor& t = values_of("metric " + name(), predictions, targets);
  // In double, as the loss's.
  return static_cast<float>((flat(predictions) - flat(t)).cast<double>().squaredNorm() /
                            static_cast<double>(predictions.size()));
}

std::vector<double> Metric::counts(const Tensor& predictions, const Targets&, float batch_value) {
  const double n = predictions.rank() > 0 ? static_cast<double>(predictions.dim(0)) : 0.0;
  return {static_cast<double>(batch_value) * n, n};
}

double Metric::from_counts(std::span<const double> counts) const {
  return counts.size() == 2 && counts[1] > 0 ? counts[0] / counts[1] : 0.0;
}

BinaryDecisionMetric::BinaryDecisionMetric(int positive_class, bool class_named)
    : positive_class_(positive_class), class_named_(class_named) {
  if (positive_class < 0)
    throw InvalidArgument("positive_class = " + std::to_string(positive_class) + ", must be >= 0");
}

void BinaryDecisionMetric::check(const Shape& prediction, const TargetSpec& targets) const {
  if (!targets.labels) {
    // 0/1 targets: every output is a decision, counted together; a class picks none of them.
    if (positive_class_ != 1 || class_named_)
      mismatch("metric " + name(), prediction, targets,
               "a class is for class labels; of 0/1 targets every output counts (" +
                   name().substr(0, name().find('@')) + ")");
    return check_values("metric " + name(), prediction, targets);
  }
  check_labels("metric " + name(), prediction, targets);
  if (classes_of(prediction) <= positive_class_)
    mismatch("metric " + name(), prediction, targets,
             "its positive class " + std::to_string(positive_class_) + " has no logit");
}

template <typename F>
void BinaryDecisionMetric::each_decision(const Tensor& predictions, const Targets& targets, F&& f) const {
  if (targets.values != nullptr) {
    const Tensor& t = values_of("metric " + name(), predictions, targets);
    for (std::int64_t i = 0; i < predictions.size(); ++i)
      f(static_cast<double>(predictions[i]), predictions[i] > 0.0f, t[i] > 0.5f);
    return;
  }
  const std::int64_t n = predictions.dim(0), classes = n > 0 ? predictions.size() / n : 0;
  if (static_cast<std::int64_t>(targets.labels.size()) != n)
    throw InvalidArgument("metric " + name() + ": " + std::to_string(targets.labels.size()) +
                          " labels for a batch of " + std::to_string(n));
  if (classes <= positive_class_)
    throw InvalidArgument("metric " + name() + ": its positive class " + std::to_string(positive_class_) +
                          " has no logit among " + std::to_string(classes));
  for (std::int64_t r = 0; r < n; ++r) {
    const float* row = predictions.data() + r * classes;
    // log(p_c / (1 - p_c)) = x_c - log(sum of exp(x_j) over the other classes), in double.
    double top = -std::numeric_limits<double>::infinity(), sum = 0.0;
    bool nan = false;
    for (std::int64_t j = 0; j < classes; ++j) {
      nan = nan || std::isnan(row[j]);
      if (j != positive_class_) top = std::max(top, static_cast<double>(row[j]));
    }
    for (std::int64_t j = 0; j < classes; ++j)
      if (j != positive_class_ && std::isfinite(top)) sum += std::exp(static_cast<double>(row[j]) - top);
    const double others = std::isfinite(top) ? top + std::log(sum) : top;  // one class: -inf
    const double log_odds = nan ? std::numeric_limits<double>::quiet_NaN()
                                : static_cast<double>(row[positive_class_]) - others;
    f(log_odds,
      predicts_a_class(row, classes) && std::max_element(row, row + classes) - row == positive_class_,
      targets.labels[static_cast<std::size_t>(r)] == positive_class_);
  }
}

std::string BinaryDecisionMetric::named(const char* base) const {
  if (!class_name_.empty()) return std::string(base) + "@" + class_name_;
  return positive_class_ == 1 && !class_named_ ? std::string(base)
                                                : std::string(base) + "@" + std::to_string(positive_class_);
}

double BinaryDecisionMetric::from_counts(std::span<const double> c) const {
  return c[0] + c[1] > 0 ? c[0] / (c[0] + c[1]) : 0.0;
}

float BinaryDecisionMetric::compute(const Tensor& predictions, const Targets& targets) {
  return static_cast<float>(from_counts(counts(predictions, targets, 0.0f)));
}

std::vector<double> Precision::counts(const Tensor& predictions, const Targets& targets, float) {
  std::vector<double> c(2);  // true positives, false positives
  each_decision(predictions, targets, [&](double, bool predicted, bool positive) {
    if (predicted) c[positive ? 0 : 1] += 1;
  });
  return c;
}


std::vector<double> Recall::counts(const Tensor& predictions, const Targets& targets, float) {
  std::vector<double> c(2);  // true positives, false negatives
  each_decision(predictions, targets, [&](double, bool predicted, bool positive) {
    if (positive) c[predicted ? 0 : 1] += 1;
  });
  return c;
}


std::vector<double> F1Score::counts(const Tensor& predictions, const Targets& targets, float) {
  std::vector<double> c(3);  // true positives, false positives, false negatives
  each_decision(predictions, targets, [&](double, bool predicted, bool positive) {
    if (predicted || positive) c[predicted ? (positive ? 0 : 1) : 2] += 1;
  });
  return c;
}

double F1Score::from_counts(std::span<const double> c) const {
  const double denominator = 2 * c[0] + c[1] + c[2];
  return denominator > 0 ? 2 * c[0] / denominator : 0.0;
}

namespace {

// The bins of Auc's log-odds, lowest first: kTailBins below -kMaxLogOdds, kBins over
// [-kMaxLogOdds, kMaxLogOdds], kTailBins above.
constexpr int kAucBins = Auc::kBins + 2 * Auc::kTailBins;

// The bin of a (non-NaN) log-odds; infinities take the end bins.
int auc_bin(double log_odds) {
  constexpr double m = Auc::kMaxLogOdds;
  if (std::abs(log_odds) <= m)
    return Auc::kTailBins + std::min(Auc::kBins - 1, static_cast<int>((log_odds + m) / (2 * m) * Auc::kBins));
  // 16 bins an octave past m: 1/16 of log2(|log_odds| / m), the last holding all beyond.
  const double octaves = std::log2(std::min(std::abs(log_odds), 1e300) / m);
  const int tail = std::min(Auc::kTailBins - 1, static_cast<int>(octaves * 16));
  return log_odds > 0 ? Auc::kTailBins + Auc::kBins + tail : Auc::kTailBins - 1 - tail;
}

}  // namespace

// counts[1 + b] (positives) and counts[kAucBins + 2 + b] (negatives) count the scores of bin b,
// b = 0 the lowest log-odds; counts[0] and counts[kAucBins + 1] the NaN scores (a diverged
// model's), which are in no bin: never predicted positive, at any threshold.
std::vector<double> Auc::counts(const Tensor& predictions, const Targets& targets, float) {
  constexpr int B = kAucBins;
  std::vector<double> c(2 * (B + 1));
  each_decision(predictions, targets, [&](double score, bool, bool positive) {
    const std::size_t base = positive ? 0 : B + 1;
    if (std::isnan(score)) {
      c[base] += 1;
      return;
    }
    c[base + 1 + static_cast<std::size_t>(auc_bin(score))] += 1;
  });
  return c;
}

double Auc::from_counts(std::span<const double> c) const {
  constexpr int B = kAucBins;
  const std::span<const double> pos = c.subspan(1, B), neg = c.subspan(B + 2, B);
  double positives = 0, negatives = 0;
  for (int b = 0; b < B; ++b) {
    positives += pos[static_cast<std::size_t>(b)];
    negatives += neg[static_cast<std::size_t>(b)];
  }
  // With the NaN scores, which the curve never reaches: its end is below (1, 1).
  positives += c[0];
  negatives += c[B + 1];
  if (positives == 0 || negatives == 0) return 0.0;
  // The threshold lowered past one bin at a time, from the highest: its negatives move the
  // curve right, its positives up, the trapezoid between counting a tie within the bin a half.
  double tp = 0, area = 0;
  for (int b = B; b-- > 0;) {
    const double up = pos[static_cast<std::size_t>(b)];
    area += neg[static_cast<std::size_t>(b)] * (tp + up / 2);
    tp += up;
  }
  return area / (positives * negatives);
}

double PrAuc::from_counts(std::span<const double> c) const {
  constexpr int B = kAucBins;
  const std::span<const double> pos = c.subspan(1, B), neg = c.subspan(B + 2, B);
  double positives = c[0];  // a NaN score's positive is never found: it counts in the recall
  for (int b = 0; b < B; ++b) positives += pos[static_cast<std::size_t>(b)];
  if (positives == 0) return 0.0;
  // The threshold lowered past one bin at a time, from the highest: the recall it adds at the
  // precision there.
  double tp = 0, fp = 0, area = 0;
  for (int b = B; b-- > 0;) {
    const double up = pos[static_cast<std::size_t>(b)];
    tp += up;
    fp += neg[static_cast<std::size_t>(b)];
    if (up > 0) area += up / positives * (tp / (tp + fp));
  }
  return area;
}

std::unique_ptr<Loss> make_loss(const std::string& name, float label_smoothing) {
  if (name == "softmax_cross_entropy")
    return std::make_unique<SoftmaxCrossEntropyLoss>(label_smoothing);
  if (label_smoothing != 0.0f)
    throw InvalidArgument("label smoothing applies to softmax_cross_entropy, not " + name);
  if (name == "sigmoid_cross_entropy") return std::make_unique<SigmoidCrossEntropyLoss>();
  if (name == "categorical_cross_entropy") return std::make_unique<CategoricalCrossEntropyLoss>();
  if (name == "sparse_categorical_cross_entropy") return std::make_unique<SparseCategoricalCrossEntropyLoss>();
  if (name == "mean_squared_error" || name == "mse") return std::make_unique<MeanSquaredErrorLoss>();
  if (name == "mean_absolute_error" || name == "mae") return std::make_unique<MeanAbsoluteErrorLoss>();
  if (name == "huber") return std::make_unique<HuberLoss>();
  if (name == "dice") return std::make_unique<DiceLoss>();
  if (name == "focal") return std::make_unique<FocalLoss>();
  throw InvalidArgument("unknown loss '" + name +
                        "' (known: softmax_cross_entropy, sigmoid_cross_entropy, "
                        "categorical_cross_entropy, sparse_categorical_cross_entropy, "
                        "mean_squared_error, mean_absolute_error, huber, dice, focal)");
}

int accuracy_metric(std::span<const std::string> names) {
  const auto find = [&](const char* name) {
    const auto it = std::find(names.begin(), names.end(), name);
    return it == names.end() ? -1 : static_cast<int>(it - names.begin());
  };
  if (const int plain = find("accuracy"); plain >= 0) return plain;
  const auto is_accuracy = [](std::string_view metric) {
    return metric == "accuracy" || metric == "categorical_accuracy" || metric == "sparse_categorical_accuracy" ||
           metric == "binary_accuracy";
  };
  for (std::size_t i = 0; i < names.size(); ++i)
    if (is_accuracy(names[i])) return static_cast<int>(i);
  // A model of heads (HeadsLoss): its first head's accuracy of any kind ("class/accuracy").
  for (std::size_t i = 0; i < names.size(); ++i)
    if (const std::size_t slash = names[i].rfind('/');
        slash != std::string::npos && is_accuracy(std::string_view(names[i]).substr(slash + 1)))
      return static_cast<int>(i);
  return -1;
}

std::unique_ptr<Metric> make_metric(const std::string& name, std::span<const std::string> class_names) {
  if (name == "accuracy") return std::make_unique<Accuracy>();
  if (name == "binary_accuracy") return std::make_unique<BinaryAccuracy>();
  if (name == "categorical_accuracy") return std::make_unique<CategoricalAccuracy>();
  if (name == "sparse_categorical_accuracy") return std::make_unique<SparseCategoricalAccuracy>();
  if (name == "perplexity") return std::make_unique<Perplexity>();
  if (name == "mse") return std::make_unique<MeanSquaredError>();
  if (name == "mae") return std::make_unique<MeanAbsoluteError>();
  // A decision metric, of class 1 or of the class after '@' ("recall@3", "recall@fraud").
  const std::size_t at = name.find('@');
  const std::string base = name.substr(0, at);
  const bool decision =
      base == "precision" || base == "recall" || base == "f1" || base == "auc" || base == "pr_auc";
  int positive_class = 1;
  std::string class_name;  // the positive class's, where the classes have names and it was not asked by number
  if (at != std::string::npos) {
    const std::string after = name.substr(at + 1);
    const auto by_name = std::find(class_names.begin(), class_names.end(), after);
    if (decision && !after.empty() && by_name != class_names.end()) {
      positive_class = static_cast<int>(by_name - class_names.begin());
      class_name = after;
    } else {
      const auto [end, error] = std::from_chars(after.data(), after.data() + after.size(), positive_class);
      const bool number = !after.empty() && error == std::errc() && end == after.data() + after.size();
      if (decision && !number && !after.empty() && !class_names.empty()) {
        std::string known;
        for (const std::string& c : class_names) known += (known.empty() ? "" : ", ") + c;
        throw InvalidArgument("metric '" + name + "': no class named '" + after + "' (the classes: " + known + ")");
      }
      if (!number || positive_class < 0 || !decision)
        throw InvalidArgument("unknown metric '" + name + "' (a class after '@' is for precision, recall, f1, "
                              "auc and pr_auc: precision@3)");
    }
  } else if (decision && class_names.size() > 1) {
    class_name = class_names[1];  // "precision" alone scores class 1: say which that is
  }
  const bool named = at != std::string::npos;
  std::unique_ptr<BinaryDecisionMetric> metric;
  if (base == "precision") metric = std::make_unique<Precision>(positive_class, named);
  if (base == "recall") metric = std::make_unique<Recall>(positive_class, named);
  if (base == "f1") metric = std::make_unique<F1Score>(positive_class, named);
  if (base == "auc") metric = std::make_unique<Auc>(positive_class, named);
  if (base == "pr_auc") metric = std::make_unique<PrAuc>(positive_class, named);
  if (metric) {
    metric->set_class_name(class_name);
    return metric;
  }
  if (name.starts_with("top") && name.ends_with("_accuracy") && name.size() > 12) {
    const std::string k = name.substr(3, name.size() - 12);
    if (k.find_first_not_of("0123456789") == std::string::npos && k.size() < 6 && k[0] != '0')
      return std::make_unique<TopKAccuracy>(std::stoi(k));
  }
  throw InvalidArgument("unknown metric '" + name +
                        "' (known: accuracy, top<k>_accuracy, binary_accuracy, "
                        "categorical_accuracy, sparse_categorical_accuracy, perplexity, mse, mae, "
                        "precision, recall, f1, auc, pr_auc; of class k: "
                        "precision@k, recall@k, f1@k, auc@k, pr_auc@k, or of a named class: precision@<name>)");
}

std::optional<bool> Metric::direction_by_name(const std::string& name) {
  // A head's metric ("class/precision@n/a") as the metric itself; a class name may hold a '/'.
  const std::string before_class = name.substr(0, name.find('@'));
  const std::string base = before_class.substr(before_class.rfind('/') + 1);
  if (base.ends_with("accuracy") || base == "precision" || base == "recall" || base == "f1" ||
      base == "auc" || base == "pr_auc")
    return true;
  if (base.ends_with("loss") || base.ends_with("error") || base == "mse" || base == "mae" ||
      base == "rmse" || base == "perplexity")
    return false;
  return std::nullopt;
}

bool higher_is_better(const std::string& name) {
  return Metric::direction_by_name(name).value_or(false);
}

std::vector<std::unique_ptr<Metric>> default_metrics(const Loss& loss) {
  if (const auto* heads = dynamic_cast<const HeadsLoss*>(&loss)) return heads->default_metrics();
  std::vector<std::unique_ptr<Metric>> metrics;
  if (dynamic_cast<const SoftmaxCrossEntropyLoss*>(&loss))
    metrics.push_back(std::make_unique<Accuracy>());
  else if (loss.output_activation() == "sigmoid")  // sigmoid cross-entropy, focal, Dice
    metrics.push_back(std::make_unique<BinaryAccuracy>());
  else if (dynamic_cast<const CategoricalCrossEntropyLoss*>(&loss))
    metrics.push_back(std::make_unique<CategoricalAccuracy>());
  else if (dynamic_cast<const SparseCategoricalCrossEntropyLoss*>(&loss))
    metrics.push_back(std::make_unique<SparseCategoricalAccuracy>());
  else if (dynamic_cast<const MeanSquaredErrorLoss*>(&loss))
    metrics.push_back(std::make_unique<MeanSquaredError>());
  else if (dynamic_cast<const MeanAbsoluteErrorLoss*>(&loss) || dynamic_cast<const HuberLoss*>(&loss)) {
    metrics.push_back(std::make_unique<MeanSquaredError>());
    metrics.push_back(std::make_unique<MeanAbsoluteError>());
  }
  return metrics;
}

}  // namespace cohort
