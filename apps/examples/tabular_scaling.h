#pragma once
// example_tabular's standardisation (apps/examples/tabular.cc): the training data's statistics
// kept with the checkpoints and taken from them, and --standardize_targets' loss of the targets
// scaled and metrics of the outputs scaled back.
#include <cohort/cohort.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace tabular {

// A float as text that reads back as the float it was ("%.9g"; a stream's default 6 digits
// would write a price of 51234.57 as 51234.6).
inline std::string exact_text(float value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", static_cast<double>(value));
  return text;
}

// Values as a setting's text, each exact.
inline std::string values_text(const std::vector<float>& values) {
  std::string text;
  for (const float v : values) text += (text.empty() ? "" : ",") + exact_text(v);
  return text;
}

// --standardize_targets: the model learns the float targets scaled to mean 0 and deviation 1 by
// the training data's mean and deviation of each target value (empty: not scaled). Its outputs
// are in those units; its predictions and metrics are of them scaled back, in the targets' own.
struct TargetScale {
  std::vector<float> mean, std;

  // `values` [n, target...] scaled (`back`: the outputs' units to the targets', else the other way).
  cohort::Tensor convert(const cohort::Tensor& values, bool back) const {
    cohort::Tensor out = values;
    const auto k = static_cast<std::int64_t>(mean.size());
    for (std::int64_t i = 0; i < out.size(); ++i) {
      const auto j = static_cast<std::size_t>(i % k);
      out[i] = back ? out[i] * std[j] + mean[j] : (out[i] - mean[j]) / std[j];
    }
    return out;
  }
};

// A loss of the targets as `scale` scales them: the model learns values near 0 and 1 whatever
// the targets' units (a price of 5e4 +- 4e3 it would hardly reach from outputs near 0).
class ScaledTargetsLoss final : public cohort::Loss {
 public:
  ScaledTargetsLoss(std::unique_ptr<cohort::Loss> loss, std::shared_ptr<const TargetScale> scale)
      : loss_(std::move(loss)), scale_(std::move(scale)) {}
  std::string name() const override { return loss_->name(); }
  void check(const cohort::Shape& prediction, const cohort::TargetSpec& targets) const override {
    loss_->check(prediction, targets);
  }
  float forward(const cohort::Tensor& predictions, const cohort::Targets& targets) override {
    if (targets.values == nullptr) return loss_->forward(predictions, targets);  // which names the fault
    scaled_ = scale_->convert(*targets.values, false);
    return loss_->forward(predictions, cohort::Targets{{}, &scaled_});
  }
  void backward(cohort::Tensor& grad) override { loss_->backward(grad); }

 private:
  std::unique_ptr<cohort::Loss> loss_;
  std::shared_ptr<const TargetScale> scale_;
  cohort::Tensor scaled_;
};

// A metric of the model's outputs scaled back to the targets' units: the mse and mae of the
// targets as they are, from the same outputs.
class ScaledOutputsMetric final : public cohort::Metric {
 public:
  ScaledOutputsMetric(std::unique_ptr<cohort::Metric> metric, std::shared_ptr<const TargetScale> scale)
      : metric_(std::move(metric)), scale_(std::move(scale)) {}
  std::string name() const override { return metric_->name(); }
  void check(const cohort::Shape& prediction, const cohort::TargetSpec& targets) const override {
    metric_->check(prediction, targets);
  }
  float compute(const cohort::Tensor& predictions, const cohort::Targets& targets) override {
    return metric_->compute(scale_->convert(predictions, true), targets);
  }
  std::vector<double> counts(const cohort::Tensor& predictions, const cohort::Targets& targets,
                             float batch_value) override {
    return metric_->counts(scale_->convert(predictions, true), targets, batch_value);
  }
  double from_counts(std::span<const double> counts) const override { return metric_->from_counts(counts); }
  std::optional<bool> higher_is_better() const override { return metric_->higher_is_better(); }

 private:
  std::unique_ptr<cohort::Metric> metric_;
  std::shared_ptr<const TargetScale> scale_;
};

// Where `checkpoint_dir`'s (--checkpoint_dir's) latest checkpoint recorded the training data's mean and deviation of
// each `what` ("feature", "target": of --`flag`), they replace `mean` and `std` (this run's
// --train's, `train`): a job that resumes or predicts from it standardises as its training did, whichever
// file --train names now. A checkpoint of --standardize that recorded none (written before they
// were kept) is told of; one that predates --standardize_targets is refused, its model having
// learnt the targets as they are. Collective over the replicas: the chief reads the checkpoint,
// every worker takes its word.
inline void restore_moments(const cohort::Server& server, const std::string& checkpoint_dir, const std::string& train,
                            const std::string& what, const std::string& flag, std::vector<float>& mean,
                            std::vector<float>& std) {
  std::string text;  // "MEAN\nSTD"; "?" from a checkpoint without them; empty without a checkpoint
  std::string path;
  if (server.is_chief() && !checkpoint_dir.empty() && std::filesystem::is_directory(checkpoint_dir)) {
    try {
      if (const auto latest = cohort::CheckpointManager(checkpoint_dir, 0).latest_path()) {
        path = *latest;
        const std::map<std::string, std::string> metadata = cohort::read_checkpoint_header(path).metadata;
        const auto m = metadata.find("settings/" + what + " mean"), d = metadata.find("settings/" + what + " std");
        const auto recorded = metadata.find("settings/--" + flag);
        if (m != metadata.end() && d != metadata.end())
          text = m->second + "\n" + d->second;
        else if (recorded == metadata.end() ? what == "target" : recorded->second == "true")
          text = "?";
      }
    } catch (const std::exception&) {
      text.clear();  // the session's restore says what is wrong
    }
  }
  if (server.num_replicas() > 1) text = server.replicas().bcast_string(text, 0);
  if (text == "?" && what == "target")
    throw cohort::InvalidArgument("--standardize_targets with --checkpoint_dir=" + checkpoint_dir +
                                  ": its checkpoint was trained without it (it records no target mean and "
                                  "deviation); give a new --checkpoint_dir");
  if (text == "?" && server.is_chief())
    std::fprintf(stderr, "warning: %s records no %s mean and deviation (written before checkpoints kept them): "
                 "standardising by --train=%s's, which gives the trained model's predictions only if it is "
                 "the file the model was trained on\n", path.c_str(), what.c_str(), train.c_str());
  if (text.empty() || text == "?") return;
  const std::size_t split = text.find('\n');
  std::vector<float> saved[2];
  for (int i = 0; i < 2; ++i) {
    const std::string values = i == 0 ? text.substr(0, split) : text.substr(split + 1);
    for (const char* at = values.c_str(); *at != '\0';) {
      char* end = nullptr;
      const float value = std::strtof(at, &end);
      if (end == at) break;  // not a number: the count below refuses it
      saved[i].push_back(value);
      at = *end == ',' ? end + 1 : end;
    }
  }
  if (saved[0].size() != mean.size() || saved[1].size() != mean.size())
    throw cohort::InvalidArgument("--checkpoint_dir=" + checkpoint_dir + ": its checkpoint standardised " +
                                  std::to_string(saved[0].size()) + " " + what + " values, --train=" + train +
                                  " has " + std::to_string(mean.size()));
  mean = std::move(saved[0]);
  std = std::move(saved[1]);
}


}  // namespace tabular
