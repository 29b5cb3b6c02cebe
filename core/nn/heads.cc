#include "cohort/core/nn/heads.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <utility>

#include "cohort/core/base/error.h"

namespace cohort {
namespace {

// Floats per example of a batch [N, ...].
std::int64_t row_size(const Tensor& batch) { return batch.dim(0) > 0 ? batch.size() / batch.dim(0) : 0; }

// Whether a label column's value is a class label: a whole number >= 0 that an int32 holds.
bool whole(float x) { return x >= 0.0f && x < 2147483648.0f && std::floor(x) == x; }

TargetSpec head_spec(const HeadColumns& c) {
  return c.labels ? TargetSpec::classes(static_cast<int>(c.outputs)) : TargetSpec::values({c.targets});
}

// Head `c`'s part of a batch: its columns of the predictions into `p` ([N, outputs]), and its
// targets: `labels` read from its label column, or its columns of the values into `v`.
Targets take(const HeadColumns& c, const Tensor& predictions, const Targets& targets, Tensor& p,
             Tensor& v, std::vector<std::int32_t>& labels, const std::string& what) {
  if (targets.values == nullptr)
    throw InvalidArgument(what + ": the heads take float targets (their columns side by side), not class labels");
  const Tensor& t = *targets.values;
  const std::int64_t n = predictions.dim(0);
  if (t.dim(0) != n)
    throw InvalidArgument(what + ": " + std::to_string(n) + " predictions and " + std::to_string(t.dim(0)) +
                          " targets");
  const std::int64_t prow = row_size(predictions), trow = row_size(t);
  if (prow < c.output_begin + c.outputs || trow < c.target_begin + c.targets)
    throw InvalidArgument(what + ": head \"" + c.name + "\" reads output columns [" +
                          std::to_string(c.output_begin) + ", " + std::to_string(c.output_begin + c.outputs) +
                          ") and target columns [" + std::to_string(c.target_begin) + ", " +
                          std::to_string(c.target_begin + c.targets) + "), given " + std::to_string(prow) +
                          " and " + std::to_string(trow));
  p.resize({n, c.outputs});
  for (std::int64_t i = 0; i < n; ++i)
    std::copy_n(predictions.data() + i * prow + c.output_begin, c.outputs, p.data() + i * c.outputs);
  if (c.labels) {
    labels.resize(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) {
      const float x = t.data()[i * trow + c.target_begin];
      if (!whole(x))
        throw InvalidArgument(what + ": head \"" + c.name + "\": example " + std::to_string(i) +
                              " of the batch has " + std::to_string(x) +
                              " in its label column, not a class label (a whole number >= 0)");
      labels[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(x);
    }
    return Targets{labels, nullptr};
  }
  v.resize({n, c.targets});
  for (std::int64_t i = 0; i < n; ++i)
    std::copy_n(t.data() + i * trow + c.target_begin, c.targets, v.data() + i * c.targets);
  return Targets{{}, &v};
}

// A metric of one head's columns: "<head>/<metric>".
class HeadMetric final : public Metric {
 public:
  HeadMetric(HeadColumns columns, std::unique_ptr<Metric> metric)
      : columns_(std::move(columns)), metric_(std::move(metric)) {}

  std::string name() const override { return columns_.name + "/" + metric_->name(); }
  void check(const Shape& prediction, const TargetSpec& targets) const override {
    const std::string what = "metric " + name();
    if (targets.labels)
      throw InvalidArgument(what + ": the heads take float targets (their columns side by side), given " +
                            targets.to_string());
    if (num_elements(prediction) < columns_.output_begin + columns_.outputs ||
        num_elements(targets.shape) < columns_.target_begin + columns_.targets)
      throw InvalidArgument(what + ": predictions " + to_string(prediction) + " and " + targets.to_string() +
                            " per example are too few columns for head \"" + columns_.name + "\"");
    try {
      metric_->check({columns_.outputs}, head_spec(columns_));
    } catch (const InvalidArgument& e) {
      throw InvalidArgument("head \"" + columns_.name + "\": " + e.what());
    }
  }
  float compute(const Tensor& predictions, const Targets& targets) override {
    return metric_->compute(p_, take(columns_, predictions, targets, p_, v_, labels_, "metric " + name()));
  }
  std::vector<double> counts(const Tensor& predictions, const Targets& targets, float batch_value) override {
    return metric_->counts(p_, take(columns_, predictions, targets, p_, v_, labels_, "metric " + name()),
                           batch_value);
  }
  double from_counts(std::span<const double> counts) const override { return metric_->from_counts(counts); }
  std::optional<bool> higher_is_better() const override { return metric_->higher_is_better(); }

 private:
  HeadColumns columns_;
  std::unique_ptr<Metric> metric_;
  Tensor p_, v_;
  std::vector<std::int32_t> labels_;
};

}  // namespace

HeadsLoss::HeadsLoss(std::vector<Head> heads) : heads_(std::move(heads)) {
  if (heads_.empty()) throw InvalidArgument("HeadsLoss: no heads");
  std::set<std::string> names;
  for (const Head& head : heads_) {
    const std::string what = "HeadsLoss: head \"" + head.name + "\"";
    if (head.name.empty()) throw InvalidArgument("HeadsLoss: a head without a name");
    // Its metrics are "<head>/<metric>@<class>": a '/' or '@' in it would be misread.
    if (head.name.find_first_of("/@") != std::string::npos)
      throw InvalidArgument(what + ": a head's name holds no '/' or '@'");
    if (!names.insert(head.name).second) throw InvalidArgument(what + " is named twice");
    if (!head.loss) throw InvalidArgument(what + " has no loss");
    if (head.outputs < 1 || head.targets < 0)
      throw InvalidArgument(what + " takes " + std::to_string(head.outputs) + " output and " +
                            std::to_string(head.targets) +
                            " target columns: outputs must be >= 1, targets >= 0");
    if (head.labels && head.targets != 1)
      throw InvalidArgument(what + ": a head of class labels takes one target column, not " +
                            std::to_string(head.targets));
    if (!std::isfinite(head.weight) || head.weight < 0.0f)
      throw InvalidArgument(what + ": weight " + std::to_string(head.weight) + " (must be finite and >= 0)");
    columns_.push_back({head.name, outputs_, head.outputs, targets_, head.targets, head.labels});
    outputs_ += head.outputs;
    targets_ += head.targets;
  }
  head_losses_.assign(heads_.size(), 0.0f);
  predictions_.resize(heads_.size());
  values_.resize(heads_.size());
  grads_.resize(heads_.size());
  labels_.resize(heads_.size());
}

void GaussianKlLoss::check(const Shape& prediction, const TargetSpec&) const {
  const std::int64_t values = num_elements(prediction);
  if (values < 2 || values % 2 != 0)
    throw InvalidArgument("loss gaussian_kl: predictions " + to_string(prediction) +
                          " per example; it needs 2 L values, L means then L log-variances");
}

float GaussianKlLoss::forward(const Tensor& predictions, const Targets&) {
  const std::int64_t n = predictions.rank() > 0 ? predictions.dim(0) : 0;
  if (n < 1)
    throw InvalidArgument("loss gaussian_kl: predictions " + to_string(predictions.shape()) + " have no batch");
  const std::int64_t latent = row_size(predictions) / 2;
  if (latent < 1 || row_size(predictions) != 2 * latent)
    throw InvalidArgument("loss gaussian_kl: " + std::to_string(row_size(predictions)) +
                          " values per example; it needs 2 L, L means then L log-variances");
  grad_.resize(predictions.shape());
  const double scale = 1.0 / static_cast<double>(n);
  double total = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    const float* mean = predictions.data() + i * 2 * latent;
    const float* log_var = mean + latent;
    float* grad_mean = grad_.data() + i * 2 * latent;
    float* grad_log_var = grad_mean + latent;
    for (std::int64_t j = 0; j < latent; ++j) {
      const double mu = mean[j], v = log_var[j], variance = std::exp(v);
      total += 0.5 * (mu * mu + variance - 1.0 - v);
      grad_mean[j] = static_cast<float>(mu * scale);
      grad_log_var[j] = static_cast<float>(0.5 * (variance - 1.0) * scale);
    }
  }
  return static_cast<float>(total * scale);
}

void HeadsLoss::check(const Shape& prediction, const TargetSpec& targets) const {
  std::string layout;
  for (const HeadColumns& c : columns_)
    layout += (layout.empty() ? "" : ", ") + c.name + " " + std::to_string(c.outputs) + "/" + std::to_string(c.targets);
  const std::string what = "loss heads (output/target columns: " + layout + ")";
  if (targets.labels)
    throw InvalidArgument(what + ": takes float targets of " + std::to_string(targets_) +
                          " columns, the heads' side by side, not " + targets.to_string());
  if (num_elements(prediction) != outputs_ || num_elements(targets.shape) != targets_)
    throw InvalidArgument(what + ": predictions " + to_string(prediction) + " and " + targets.to_string() +
                          " per example, where the heads take " + std::to_string(outputs_) + " and " +
                          std::to_string(targets_));
  for (std::size_t h = 0; h < heads_.size(); ++h) {
    try {
      heads_[h].loss->check({columns_[h].outputs}, head_spec(columns_[h]));
    } catch (const InvalidArgument& e) {
      throw InvalidArgument("head \"" + columns_[h].name + "\": " + e.what());
    }
  }
}

void HeadsLoss::check_target(std::span<const float> target) const {
  if (static_cast<std::int64_t>(target.size()) != targets_) return;  // check() refuses the shape
  for (std::size_t h = 0; h < heads_.size(); ++h) {
    const HeadColumns& c = columns_[h];
    const auto part = target.subspan(static_cast<std::size_t>(c.target_begin), static_cast<std::size_t>(c.targets));
    if (c.labels) {
      if (!whole(part[0]) || part[0] >= static_cast<float>(c.outputs))
        throw InvalidArgument("head \"" + c.name + "\": " + std::to_string(part[0]) +
                              " in its label column, not a class in [0, " + std::to_string(c.outputs) + ")");
      continue;
    }
    try {
      heads_[h].loss->check_target(part);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument("head \"" + c.name + "\": " + e.what());
    }
  }
}

float HeadsLoss::forward(const Tensor& predictions, const Targets& targets) {
  if (targets.values != nullptr && (row_size(predictions) != outputs_ || row_size(*targets.values) != targets_))
    throw InvalidArgument("loss heads: " + std::to_string(row_size(predictions)) + " outputs and " +
                          std::to_string(row_size(*targets.values)) + " targets per example, where the heads take " +
                          std::to_string(outputs_) + " and " + std::to_string(targets_));
  shape_ = predictions.shape();
  double total = 0.0;
  for (std::size_t h = 0; h < heads_.size(); ++h) {
    const Targets part = take(columns_[h], predictions, targets, predictions_[h], values_[h], labels_[h], "loss heads");
    try {
      head_losses_[h] = heads_[h].loss->forward(predictions_[h], part);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument("head \"" + columns_[h].name + "\": " + e.what());
    }
    total += static_cast<double>(heads_[h].weight) * head_losses_[h];
  }
  return static_cast<float>(total);
}

void HeadsLoss::backward(Tensor& grad) {
  grad.resize(shape_);
  const std::int64_t n = shape_.empty() ? 0 : shape_[0];
  for (std::size_t h = 0; h < heads_.size(); ++h) {
    const HeadColumns& c = columns_[h];
    heads_[h].loss->backward(grads_[h]);
    const float weight = heads_[h].weight;
    for (std::int64_t i = 0; i < n; ++i) {
      const float* from = grads_[h].data() + i * c.outputs;
      float* to = grad.data() + i * outputs_ + c.output_begin;
      for (std::int64_t j = 0; j < c.outputs; ++j) to[j] = weight * from[j];
    }
  }
}

Tensor HeadsLoss::probabilities(const Tensor& output) const {
  if (row_size(output) != outputs_)
    throw InvalidArgument("loss heads: " + std::to_string(row_size(output)) +
                          " outputs per example, where the heads take " + std::to_string(outputs_));
  Tensor result = output;
  const std::int64_t n = output.dim(0);
  Tensor part;
  for (std::size_t h = 0; h < heads_.size(); ++h) {
    const HeadColumns& c = columns_[h];
    if (heads_[h].loss->output_activation().empty()) continue;  // values, as they are
    part.resize({n, c.outputs});
    for (std::int64_t i = 0; i < n; ++i)
      std::copy_n(output.data() + i * outputs_ + c.output_begin, c.outputs, part.data() + i * c.outputs);
    const Tensor p = heads_[h].loss->probabilities(part);
    for (std::int64_t i = 0; i < n; ++i)
      std::copy_n(p.data() + i * c.outputs, c.outputs, result.data() + i * outputs_ + c.output_begin);
  }
  return result;
}

std::unique_ptr<Metric> HeadsLoss::metric(const std::string& head, std::unique_ptr<Metric> metric) const {
  if (!metric) throw InvalidArgument("HeadsLoss::metric: no metric for head \"" + head + "\"");
  for (const HeadColumns& c : columns_)
    if (c.name == head) return std::make_unique<HeadMetric>(c, std::move(metric));
  std::string names;
  for (const HeadColumns& c : columns_) names += (names.empty() ? "" : ", ") + c.name;
  throw InvalidArgument("HeadsLoss::metric: no head \"" + head + "\" (the heads: " + names + ")");
}

std::vector<std::unique_ptr<Metric>> HeadsLoss::default_metrics() const {
  std::vector<std::unique_ptr<Metric>> metrics;
  for (std::size_t h = 0; h < heads_.size(); ++h)
    for (auto& m : cohort::default_metrics(*heads_[h].loss))
      metrics.push_back(std::make_unique<HeadMetric>(columns_[h], std::move(m)));
  return metrics;
}

}  // namespace cohort
