#pragma once
// The exponential moving average of a model's parameters (TensorFlow 1's
// tf.train.ExponentialMovingAverage, applied with num_updates; Keras's use_ema): a shadow copy
// that follows the parameters slowly, and that late in training often evaluates better than
// the parameters themselves, whose last steps are noisy.
//
//   ExponentialMovingAverage average(0.999);
//   average.reset(graph.values());                  // at the start: the parameters as they are
//   average.apply(graph.values(), global_step);     // at each step
//   { MovingAverageSwap swap(graph, average);  ... evaluate ... }  // the averages, then back
//
// A Trainer keeps one on its chief (TrainerOptions::moving_average_decay), evaluates with it and
// saves it in checkpoints, each variable's average as "<variable>/ExponentialMovingAverage".

#include <cstdint>
#include <span>
#include <vector>

namespace cohort {

class Graph;

/// The average of a flat parameter buffer (Graph::values()). Not thread-safe.
class ExponentialMovingAverage {
 public:
  /// `decay` in (0, 1); InvalidArgument otherwise, naming the value.
  explicit ExponentialMovingAverage(double decay);

  double decay() const { return decay_; }
  /// The decay of an update at `num_updates` (the global step): min(decay, (1 + n) / (10 + n)),
  /// as TensorFlow's with num_updates, so that the average soon leaves the initial values.
  double decay_at(std::int64_t num_updates) const;

  /// Starts the average at `values`.
  void reset(std::span<const float> values);
  /// average -= (1 - d) (average - values), d = decay_at(num_updates), as TensorFlow's
  /// assign_moving_average. InvalidArgument when `values` is not of the average's size (reset()
  /// sets it).
  void apply(std::span<const float> values, std::int64_t num_updates);

  /// The average, in the layout of the buffer it follows (empty before reset()); writable for a
  /// restore.
  std::span<const float> values() const { return average_; }
  std::span<float> values() { return average_; }

 private:
  double decay_;
  std::vector<float> average_;
};

/// For its lifetime, the graph's parameters are the average's (for an evaluation or an export);
/// the parameters are put back when it ends, whatever happened meanwhile. The state buffer
/// (batch normalisation's moving statistics) is left as it is.
class MovingAverageSwap {
 public:
  /// InvalidArgument when the average is not of the graph's parameters' size.
  MovingAverageSwap(Graph& graph, const ExponentialMovingAverage& average);
  ~MovingAverageSwap();
  MovingAverageSwap(const MovingAverageSwap&) = delete;
  MovingAverageSwap& operator=(const MovingAverageSwap&) = delete;

 private:
  Graph& graph_;
  std::vector<float> parameters_;
};

}  // namespace cohort
