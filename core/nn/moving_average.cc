#include "cohort/core/nn/moving_average.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/graph.h"

namespace cohort {

ExponentialMovingAverage::ExponentialMovingAverage(double decay) : decay_(decay) {
  if (!(decay > 0 && decay < 1)) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", decay);
    throw InvalidArgument(std::string("moving average decay ") + text + " is not in (0, 1)");
  }
}

double ExponentialMovingAverage::decay_at(std::int64_t num_updates) const {
  const double n = static_cast<double>(std::max<std::int64_t>(num_updates, 0));
  return std::min(decay_, (1 + n) / (10 + n));
}

void ExponentialMovingAverage::reset(std::span<const float> values) {
  average_.assign(values.begin(), values.end());
}

void ExponentialMovingAverage::apply(std::span<const float> values, std::int64_t num_updates) {
  if (values.size() != average_.size())
    throw InvalidArgument("ExponentialMovingAverage::apply: " + std::to_string(values.size()) +
                          " values for an average of " + std::to_string(average_.size()));
  const auto rate = static_cast<float>(1 - decay_at(num_updates));
  float* average = average_.data();
  const float* value = values.data();
  for (std::size_t i = 0; i < average_.size(); ++i) average[i] -= rate * (average[i] - value[i]);
}

MovingAverageSwap::MovingAverageSwap(Graph& graph, const ExponentialMovingAverage& average)
    : graph_(graph) {
  const std::span<float> values = graph.values();
  const std::span<const float> averaged = average.values();
  if (averaged.size() != values.size())
    throw InvalidArgument("MovingAverageSwap: an average of " + std::to_string(averaged.size()) +
                          " values for a graph of " + std::to_string(values.size()) +
                          " parameters");
  parameters_.assign(values.begin(), values.end());
  std::copy(averaged.begin(), averaged.end(), values.begin());
}

MovingAverageSwap::~MovingAverageSwap() {
  std::copy(parameters_.begin(), parameters_.end(), graph_.values().begin());
}

}  // namespace cohort
