// The categorical cross-entropies, of one-hot (or soft) rows of targets and of a class index
// per row, and their accuracies: the losses of sequences of classes (tagging, next-token
// prediction) as well as of one class an example.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/loss.h"
#include "cohort/core/nn/loss_checks.h"

namespace cohort {

using namespace loss_detail;

namespace {

// Where position `at` of an example of `steps` positions (rows of classes: a sequence's steps,
// an image's pixels) is, for messages: "example 3 of the batch, position 7 of its 10" of a batch
// (`example` >= 0), "position 7 of the example's 10" of one example's targets (`example` < 0);
// "example 3 of the batch" or "the example" where an example has one.
std::string position(std::int64_t example, std::int64_t at, std::int64_t steps) {
  std::string where = example >= 0 ? "example " + std::to_string(example) + " of the batch" : "";
  if (steps <= 1) return example >= 0 ? where : "the example";
  const std::string of = std::to_string(at) + " of " + (example >= 0 ? "its " : "the example's ");
  return where + (example >= 0 ? ", position " : "position ") + of + std::to_string(steps);
}

// Row `row` of a batch's rows of classes, `steps` rows an example.
std::string row_at(std::int64_t row, std::int64_t steps) {
  return position(row / steps, row % steps, steps);
}

// Throws InvalidArgument naming loss `name` and where the `classes` targets at `where` are not a
// distribution over the classes (each in [0, 1], summing to 1) or zeros (no target): a label
// that is not one-hot (two ones, a -1) would train on, its loss below 0 or doubled.
[[noreturn]] void not_a_distribution(const std::string& name, const float* targets,
                                     std::int64_t classes, const std::string& where) {
  double mass = 0.0;
  std::string values;
  for (std::int64_t c = 0; c < classes; ++c) {
    mass += targets[c];
    if (targets[c] != 0.0f && values.size() < 80) {
      char value[48];
      std::snprintf(value, sizeof value, "%s%g at class %lld", values.empty() ? "" : ", ",
                    static_cast<double>(targets[c]), static_cast<long long>(c));
      values += value;
    }
  }
  char sum[32];
  std::snprintf(sum, sizeof sum, "%g", mass);
  throw InvalidArgument("loss " + name + ": the targets of " + where + " (" + values +
                        ", summing to " + sum +
                        ") are not a distribution over the classes (one-hot, or values in [0, 1] "
                        "summing to 1) nor a row of zeros (a position without a target)");
}

// Whether a row of `classes` categorical targets is a distribution over the classes (each in
// [0, 1], summing to 1 within 0.01) or zeros (no target).
bool distribution_or_none(const float* row, std::int64_t classes) {
  double mass = 0.0;
  for (std::int64_t c = 0; c < classes; ++c) {
    if (!(row[c] >= 0.0f && row[c] <= 1.0f)) return false;
    mass += row[c];
  }
  return mass == 0.0 || std::abs(mass - 1.0) <= 1e-2;
}

// The classes of a row of categorical targets: their last axis, which must hold two or more.
std::int64_t categories(const std::string& what, const Shape& prediction,
                        const TargetSpec& targets) {
  if (targets.labels)
    mismatch(what, prediction, targets,
             std::string("it needs a row of class probabilities per example, not class labels (one-hot rows: "
                         "numpy's np.eye(classes, dtype=np.float32)[y]; class labels take ") +
                 (what.starts_with("loss") ? "softmax_cross_entropy, which is the same loss)" : "accuracy)"));
  check_values(what, prediction, targets);
  const std::int64_t classes = targets.shape.empty() ? 0 : targets.shape.back();
  if (classes < 2)
    mismatch(what, prediction, targets,
             "it needs targets whose last axis holds the classes (one-hot rows, two or more "
             "classes)");
  return classes;
}

// Whether a row of categorical targets holds one: a row of zeros is a step without (padding).
bool has_target(const float* row, std::int64_t classes) {
  return std::any_of(row, row + classes, [](float y) { return y != 0.0f; });
}

// The classes of a row of sparse categorical targets: the prediction's values per target (a
// class index per step), two or more.
std::int64_t sparse_categories(const std::string& what, const Shape& prediction,
                               const TargetSpec& targets) {
  if (targets.labels) mismatch(what, prediction, targets, "it needs float targets (a class index per step)");
  const std::int64_t steps = num_elements(targets.shape), values = num_elements(prediction);
  // The prediction's rows are the targets' shape and a last axis of classes, or one flat vector.
  const bool rows = prediction.size() < 2 || (num_elements(Shape(prediction.begin(), prediction.end() - 1)) == steps &&
                                               prediction.back() * steps == values);
  if (steps < 1 || values % steps != 0 || values / steps < 2 || !rows)
    mismatch(what, prediction, targets,
             "it needs a row of two or more logits per target (a class index per step: predictions "
             "[steps, classes] for targets [steps])");
  return values / steps;
}

// A batch's sparse targets for `predictions`, and the classes of a row (`rows` rows).
const Tensor& sparse_values_of(const std::string& what, const Tensor& predictions, const Targets& targets,
                               std::int64_t& rows, std::int64_t& classes) {
  if (targets.values == nullptr) throw InvalidArgument(what + ": the batch has no float targets");
  // A mean over no examples is no value (as every loss has it).
  if (predictions.rank() < 1 || predictions.dim(0) < 1)
    throw InvalidArgument(what + ": predictions " + to_string(predictions.shape()) + " have no batch");
  const Tensor& t = *targets.values;
  rows = t.size();
  classes = rows > 0 ? predictions.size() / rows : 0;
  if (t.rank() < 1 || t.dim(0) != predictions.dim(0) || classes < 2 || classes * rows != predictions.size())
    throw InvalidArgument(what + ": targets " + to_string(t.shape()) +
                          " are not a class index per row of classes of predictions " +
                          to_string(predictions.shape()));
  return t;
}

// The class of sparse target `value` (position `at` of example `example` of the batch, `steps`
// an example; `example` < 0: of one example's targets), or -1 for none (a negative one).
std::int64_t sparse_class(const std::string& what, float value, std::int64_t classes,
                          std::int64_t example, std::int64_t at, std::int64_t steps) {
  if (value < 0.0f && std::isfinite(value) && value == std::floor(value)) return -1;
  if (!(value >= 0.0f && value < static_cast<float>(classes) && value == std::floor(value))) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", static_cast<double>(value));
    throw InvalidArgument(what + ": target " + text + " (" + position(example, at, steps) +
                          ") is not a class index in [0, " + std::to_string(classes) +
                          ") nor negative (a position without a target)");
  }
  return static_cast<std::int64_t>(value);
}

// The class of row `row` of a batch's sparse targets, `steps` rows an example.
std::int64_t sparse_class(const std::string& what, float value, std::int64_t classes,
                          std::int64_t row, std::int64_t steps) {
  return sparse_class(what, value, classes, row / steps, row % steps, steps);
}

// The classes a probabilities() call reads the output's rows by: `checked` (check()'s) where it
// divides the output's examples, else the output's last axis.
std::int64_t output_classes(const std::string& what, const Tensor& output, std::int64_t checked) {
  const std::int64_t rows = output.rank() > 0 ? output.dim(0) : 0;
  const std::int64_t classes = checked > 0 && rows > 0 && (output.size() / rows) % checked == 0
                                   ? checked
                                   : (output.rank() > 1 ? output.shape().back() : 0);
  if (classes < 2)
    throw InvalidArgument(what + ": output " + to_string(output.shape()) + " has no last axis of classes");
  return classes;
}

}  // namespace

void CategoricalCrossEntropyLoss::check(const Shape& prediction, const TargetSpec& targets) const {
  classes_ = categories("loss " + name(), prediction, targets);
}

float CategoricalCrossEntropyLoss::forward(const Tensor& predictions, const Targets& targets) {
  const Tensor& t = values_of("loss " + name(), predictions, targets);
  const std::int64_t classes = t.shape().back();
  const std::int64_t rows = predictions.size() / classes;
  if (classes < 2 || rows * classes != predictions.size())
    throw InvalidArgument("loss " + name() + ": targets " + to_string(t.shape()) +
                          " have no rows of classes for predictions " +
                          to_string(predictions.shape()));
  grad_.resize(predictions.shape());
  // The rows with a target: a row of zeros is none (a padded step), left out of the mean.
  std::int64_t counted = 0;
  for (std::int64_t r = 0; r < rows; ++r) counted += has_target(t.data() + r * classes, classes);
  const float scale = counted > 0 ? 1.0f / static_cast<float>(counted) : 0.0f;
  double loss = 0.0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* x = predictions.data() + r * classes;
    const float* y = t.data() + r * classes;
    float* g = grad_.data() + r * classes;
    // -sum y log softmax(x) = sum(y) logsumexp(x) - sum y x, shifted by the row's largest logit.
    const float top = *std::max_element(x, x + classes);
    if (!distribution_or_none(y, classes))
      not_a_distribution(name(), y, classes, row_at(r, rows / predictions.dim(0)));
    double total = 0.0, mass = 0.0, dot = 0.0;
    for (std::int64_t c = 0; c < classes; ++c) {
      total += std::exp(static_cast<double>(x[c] - top));
      mass += y[c];
      dot += static_cast<double>(y[c]) * (x[c] - top);
    }
    loss += mass * std::log(total) - dot;
    for (std::int64_t c = 0; c < classes; ++c)
      g[c] = static_cast<float>(std::exp(static_cast<double>(x[c] - top)) / total * mass - y[c]) *
             scale;
  }
  return counted > 0 ? static_cast<float>(loss / static_cast<double>(counted)) : 0.0f;
}

void CategoricalCrossEntropyLoss::check_target(std::span<const float> target) const {
  const std::int64_t classes = classes_, size = static_cast<std::int64_t>(target.size());
  if (classes < 2 || size % classes != 0) return;  // check() refuses those
  for (std::int64_t r = 0; r < size / classes; ++r)
    if (!distribution_or_none(target.data() + r * classes, classes))
      not_a_distribution(name(), target.data() + r * classes, classes,
                         position(-1, r, size / classes));
}

Tensor CategoricalCrossEntropyLoss::probabilities(const Tensor& output) const {
  return row_softmax(output, output_classes("loss " + name(), output, classes_));
}

void CategoricalAccuracy::check(const Shape& prediction, const TargetSpec& targets) const {
  categories("metric " + name(), prediction, targets);
}

std::vector<double> CategoricalAccuracy::counts(const Tensor& predictions, const Targets& targets,
                                                float) {
  const Tensor& t = values_of("metric " + name(), predictions, targets);
  const std::int64_t classes = t.shape().back();
  const std::int64_t rows = predictions.size() / classes;
  std::vector<double> c(2);  // hits, rows with a target
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* x = predictions.data() + r * classes;
    const float* y = t.data() + r * classes;
    if (!has_target(y, classes)) continue;
    c[0] += predicts_a_class(x, classes) && std::max_element(x, x + classes) - x == std::max_element(y, y + classes) - y ? 1 : 0;
    c[1] += 1;
  }
  return c;
}

float CategoricalAccuracy::compute(const Tensor& predictions, const Targets& targets) {
  return static_cast<float>(from_counts(counts(predictions, targets, 0.0f)));
}


SparseCategoricalCrossEntropyLoss::SparseCategoricalCrossEntropyLoss(std::vector<float> class_weights)
    : weights_(std::move(class_weights)) {
  for (std::size_t c = 0; c < weights_.size(); ++c)
    if (!(std::isfinite(weights_[c]) && weights_[c] >= 0.0f))
      throw InvalidArgument("loss " + name() + ": the weight of class " + std::to_string(c) + ", " +
                            std::to_string(weights_[c]) + ", is not a finite number >= 0");
}

void SparseCategoricalCrossEntropyLoss::check(const Shape& prediction, const TargetSpec& targets) const {
  classes_ = sparse_categories("loss " + name(), prediction, targets);
  check_weights(classes_);
}

void SparseCategoricalCrossEntropyLoss::check_weights(std::int64_t classes) const {
  if (!weights_.empty() && static_cast<std::int64_t>(weights_.size()) != classes)
    throw InvalidArgument("loss " + name() + ": " + std::to_string(weights_.size()) +
                          " class weights for " + std::to_string(classes) + " classes");
}

float SparseCategoricalCrossEntropyLoss::forward(const Tensor& predictions, const Targets& targets) {
  const std::string what = "loss " + name();
  std::int64_t rows = 0, classes = 0;
  const Tensor& t = sparse_values_of(what, predictions, targets, rows, classes);
  check_weights(classes);
  grad_.resize(predictions.shape());
  std::vector<std::int64_t> label(static_cast<std::size_t>(rows));
  std::int64_t counted = 0;  // the rows with a target, whose mean the loss is
  for (std::int64_t r = 0; r < rows; ++r) {
    label[static_cast<std::size_t>(r)] = sparse_class(what, t[r], classes, r, rows / t.dim(0));
    counted += label[static_cast<std::size_t>(r)] >= 0 ? 1 : 0;
  }
  const double scale = counted > 0 ? 1.0 / static_cast<double>(counted) : 0.0;
  double loss = 0.0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* x = predictions.data() + r * classes;
    float* g = grad_.data() + r * classes;
    const std::int64_t y = label[static_cast<std::size_t>(r)];
    if (y < 0) {
      std::fill_n(g, classes, 0.0f);
      continue;
    }
    // log softmax(x)_y = x_y - logsumexp(x), shifted by the row's largest logit.
    const float top = *std::max_element(x, x + classes);
    double total = 0.0;
    for (std::int64_t c = 0; c < classes; ++c) total += std::exp(static_cast<double>(x[c] - top));
    const double weight = weights_.empty() ? 1.0 : static_cast<double>(weights_[static_cast<std::size_t>(y)]);
    loss += weight * (std::log(total) - static_cast<double>(x[y] - top));
    for (std::int64_t c = 0; c < classes; ++c)
      g[c] = static_cast<float>((std::exp(static_cast<double>(x[c] - top)) / total - (c == y ? 1.0 : 0.0)) *
                                weight * scale);
  }
  return static_cast<float>(loss * scale);
}

void SparseCategoricalCrossEntropyLoss::check_target(std::span<const float> target) const {
  if (classes_ < 2) return;  // check() has not seen the classes
  const std::string what = "loss " + name();
  const auto steps = static_cast<std::int64_t>(target.size());
  for (std::int64_t i = 0; i < steps; ++i)
    sparse_class(what, target[static_cast<std::size_t>(i)], classes_, -1, i, steps);
}

Tensor SparseCategoricalCrossEntropyLoss::probabilities(const Tensor& output) const {
  return row_softmax(output, output_classes("loss " + name(), output, classes_));
}

void SparseCategoricalAccuracy::check(const Shape& prediction, const TargetSpec& targets) const {
  sparse_categories("metric " + name(), prediction, targets);
}

std::vector<double> SparseCategoricalAccuracy::counts(const Tensor& predictions, const Targets& targets, float) {
  const std::string what = "metric " + name();
  std::int64_t rows = 0, classes = 0;
  const Tensor& t = sparse_values_of(what, predictions, targets, rows, classes);
  std::vector<double> c(2);  // hits, rows with a target
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t y = sparse_class(what, t[r], classes, r, rows / t.dim(0));
    if (y < 0) continue;
    const float* x = predictions.data() + r * classes;
    c[0] += predicts_a_class(x, classes) && std::max_element(x, x + classes) - x == y ? 1 : 0;
    c[1] += 1;
  }
  return c;
}

float SparseCategoricalAccuracy::compute(const Tensor& predictions, const Targets& targets) {
  return static_cast<float>(from_counts(counts(predictions, targets, 0.0f)));
}

void Perplexity::check(const Shape& prediction, const TargetSpec& targets) const {
  if (!targets.labels && num_elements(targets.shape) == num_elements(prediction))
    categories("metric " + name(), prediction, targets);
  else
    sparse_categories("metric " + name(), prediction, targets);
}

std::vector<double> Perplexity::counts(const Tensor& predictions, const Targets& targets, float) {
  const std::string what = "metric " + name();
  const bool one_hot = targets.values != nullptr && targets.values->size() == predictions.size();
  std::int64_t rows = 0, classes = 0;
  const Tensor& t = one_hot ? values_of(what, predictions, targets)
                            : sparse_values_of(what, predictions, targets, rows, classes);
  if (one_hot) {
    classes = t.shape().back();
    rows = t.size() / classes;
  }
  std::vector<double> c(2);  // cross-entropy summed over the rows with a target, those rows
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* x = predictions.data() + r * classes;
    const float* y = one_hot ? t.data() + r * classes : nullptr;
    const std::int64_t label = one_hot ? -1 : sparse_class(what, t[r], classes, r, rows / t.dim(0));
    if (one_hot ? !has_target(y, classes) : label < 0) continue;
    const float top = *std::max_element(x, x + classes);
    double total = 0.0, dot = 0.0, mass = 0.0;
    for (std::int64_t k = 0; k < classes; ++k) {
      total += std::exp(static_cast<double>(x[k] - top));
      const double target = one_hot ? y[k] : (k == label ? 1.0 : 0.0);
      mass += target;
      dot += target * (x[k] - top);
    }
    c[0] += mass * std::log(total) - dot;
    c[1] += 1;
  }
  return c;
}

double Perplexity::from_counts(std::span<const double> c) const {
  return c.size() == 2 && c[1] > 0 ? std::exp(c[0] / c[1]) : std::numeric_limits<double>::quiet_NaN();
}

float Perplexity::compute(const Tensor& predictions, const Targets& targets) {
  return static_cast<float>(from_counts(counts(predictions, targets, 0.0f)));
}

}  // namespace cohort
