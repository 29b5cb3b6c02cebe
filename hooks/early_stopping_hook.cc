#include "cohort/hooks/early_stopping_hook.h"

#include <cmath>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/loss.h"
#include "cohort/core/nn/model.h"
#include "cohort/core/train/trainer.h"

namespace cohort {

bool lower_is_better(EarlyStoppingMode mode, const std::string& metric, const Model* model) {
  switch (mode) {
    case EarlyStoppingMode::kMin:
      return true;
    case EarlyStoppingMode::kMax:
      return false;
    case EarlyStoppingMode::kAuto:
      break;
  }
  if (metric == "loss") return true;
  const Metric* m = model != nullptr ? model->metric(metric) : nullptr;
  if (m == nullptr) return !higher_is_better(metric);
  // A guess from the name would judge a mean IoU, named as no built-in metric, backwards.
  const std::optional<bool> higher = m->higher_is_better();
  if (!higher)
    throw InvalidArgument("metric '" + metric +
                          "' does not say whether higher or lower is better: set mode kMax or "
                          "kMin, or override Metric::higher_is_better");
  return !*higher;
}

EarlyStoppingHook::EarlyStoppingHook(EarlyStoppingHookOptions options) : options_(std::move(options)) {
  if (options_.metric.empty()) throw InvalidArgument("EarlyStoppingHook: metric is empty");
  if (options_.patience < 1)
    throw InvalidArgument("EarlyStoppingHook: patience must be >= 1, got " + std::to_string(options_.patience));
  if (options_.every_n_steps < 1)
    throw InvalidArgument("EarlyStoppingHook: every_n_steps must be >= 1, got " + std::to_string(options_.every_n_steps));
  if (!(options_.min_delta >= 0))
    throw InvalidArgument("EarlyStoppingHook: min_delta must be >= 0, got " + std::to_string(options_.min_delta));
}

void EarlyStoppingHook::begin() {
  runs_ = 0;
  sum_ = 0;
  count_ = 0;
  counts_.clear();
  counts_ok_ = true;
  best_.reset();
  bad_checks_ = 0;
  stopped_ = false;
}

void EarlyStoppingHook::after_create_session(MonitoredSession& session) {
  const Model& model = session.trainer().model();
  try {
    lower_ = lower_is_better(options_.mode, options_.metric, &model);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(std::string("EarlyStoppingHook: ") + e.what());
  }
  metric_ = model.metric(options_.metric);
}

SessionRunArgs EarlyStoppingHook::before_run(RunContext&) { return {{options_.metric}}; }

void EarlyStoppingHook::after_run(RunContext& context, const SessionRunValues& values) {
  sum_ += values.get(options_.metric);
  ++count_;
  // A metric's counts, where the step has them, sum to its value over all the runs' examples.
  const std::span<const double> counts = values.counts(options_.metric);
  counts_ok_ = counts_ok_ && metric_ != nullptr && !counts.empty() &&
               (counts_.empty() || counts_.size() == counts.size());
  if (counts_ok_) {
    if (counts_.empty()) counts_.assign(counts.size(), 0.0);
    for (std::size_t k = 0; k < counts.size(); ++k) counts_[k] += counts[k];
  }
  if (++runs_ % options_.every_n_steps != 0) return;
  const double mean = counts_ok_ && !counts_.empty() ? metric_->from_counts(counts_)
                                                      : sum_ / static_cast<double>(count_);
  sum_ = 0;
  count_ = 0;
  counts_.clear();
  counts_ok_ = true;
  // A NaN average never improves, so a diverged run runs out of patience.
  const bool lower = lower_ ? *lower_ : lower_is_better(options_.mode, options_.metric);
  const bool improved = !std::isnan(mean) && (!best_ || (lower ? mean < *best_ - options_.min_delta
                                                               : mean > *best_ + options_.min_delta));
  if (improved) {
    best_ = mean;
    bad_checks_ = 0;
    return;
  }
  if (++bad_checks_ >= options_.patience) {
    stopped_ = true;
    context.request_stop();
    std::printf("EarlyStoppingHook: %s has not improved on %.6g for %lld check%s in a row, every "
                "%lld runs (the last: %.6g): stopping at global step %lld\n",
                options_.metric.c_str(), best_ ? *best_ : mean, static_cast<long long>(bad_checks_),
                bad_checks_ == 1 ? "" : "s", static_cast<long long>(options_.every_n_steps), mean,
                static_cast<long long>(context.session().trainer().global_step()));
    std::fflush(stdout);
  }
}

}  // namespace cohort
