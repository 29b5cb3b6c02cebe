#include "cohort/core/nn/ops/normalization.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/ops/ops.h"
#include "cohort/core/nn/ops/simd.h"
#include "cohort/core/nn/threads.h"

namespace cohort {
namespace {

// Below this many elements per thread the OpenMP fork costs more than the pass it splits.
constexpr std::int64_t kMinElementsPerThread = std::int64_t{1} << 15;

std::string format(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

// How many intra-op threads a pass over `rows` rows of `width` floats is worth (at least 1).
int threads_for(std::int64_t rows, std::int64_t width) {
  const std::int64_t by_size = rows * width / kMinElementsPerThread;
  const std::int64_t most = std::max<std::int64_t>(1, std::min(rows, by_size));
  return static_cast<int>(std::clamp<std::int64_t>(intra_op_threads(), 1, most));
}

// Runs f(thread, begin, end) over [0, rows) cut into `threads` contiguous ranges, one per thread.
// Fixed ranges (not a dynamic schedule) so that per-thread partial sums, added in thread order,
// give the same result on every run.
template <typename F>
void in_row_ranges(std::int64_t rows, int threads, F&& f) {
  if (threads <= 1) {
    f(0, std::int64_t{0}, rows);
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int t = 0; t < threads; ++t) f(t, rows * t / threads, rows * (t + 1) / threads);
}

// sums[0, 2 * width) := the sum of the threads' partials (each 2 * width long), in thread order.
void add_partials(const std::vector<double>& partials, int threads, std::int64_t width,
                  double* sums) {
  std::fill_n(sums, 2 * width, 0.0);
  for (int t = 0; t < threads; ++t) {
    const double* p = partials.data() + t * 2 * width;
    for (std::int64_t i = 0; i < 2 * width; ++i) sums[i] += p[i];
  }
}

// The threads' [sum dy (C), sum dy x_hat (C)] partials added in thread order, in place in the
// first thread's, and written as beta's and gamma's gradients.
void write_scale_shift_grads(std::vector<double>& partials, int threads, std::int64_t c,
                             float* grad_gamma, float* grad_beta) {
  for (int t = 1; t < threads; ++t)
    for (std::int64_t i = 0; i < 2 * c; ++i) partials[i] += partials[t * 2 * c + i];
  for (std::int64_t k = 0; k < c; ++k) {
    grad_beta[k] = static_cast<float>(partials[k]);
    grad_gamma[k] = static_cast<float>(partials[c + k]);
  }
}

// Calls f with whether a ReLU is fused as a compile-time constant, so that the loops inside
// carry no branch.
template <typename F>
void with_relu(bool relu, F&& f) {
  if (relu)
    f(std::true_type());
  else
    f(std::false_type());
}

// A float, or simd::kLanes of them, at p: Load<V>::at(p). (Vectors are passed by reference here,
// not by value, which trips GCC's ABI note where AVX is off: see simd.h.) The vector's type is
// spelled out: a deduced one (auto) would drop FloatsAt's alignment of 4 and claim the vector's
// own, which p need not have.
template <typename V>
struct Load;
template <>
struct Load<float> {
  static const float& at(const float* p) { return *p; }
};
template <>
struct Load<simd::Floats> {
  static const simd::FloatsAt& at(const float* p) { return simd::at(p); }
};

// Turns the gradient after a fused ReLU (Relu) into the one before it, from the output y: a
// float, or a vector of them.
template <bool Relu, typename V>
inline void mask(V& grad, const V& y) {
  if constexpr (!Relu)
    return;
  else if constexpr (std::is_same_v<V, float>)
    grad = y > 0.0f ? grad : 0.0f;
  else
    grad = y > V{} ? grad : V{};
}

// Rows per block of accumulate_blocks.
constexpr std::int64_t kBlockRows = 16;

// Per-channel sums of two terms over rows [begin, end) of `width` channels, added into
// sums[0, width) and sums[width, 2 * width). f(r, k, s, s2) adds row r's two terms for channels
// from k on into s and s2: simd::Floats for a vector of channels (k a multiple of kLanes), floats
// for the last width % kLanes. Each block of kBlockRows rows is summed in registers, in float, on
// two chains of alternate rows (an add's latency is longer than a load's throughput), then
// added to the sums in double.
template <typename F>
void accumulate_blocks(std::int64_t begin, std::int64_t end, std::int64_t width, double* sums,
                       F&& f) {
  const auto block = [&]<typename V>(std::int64_t r0, std::int64_t r1, std::int64_t k,
                                     std::type_identity<V>) {
    V s{}, s2{}, t{}, t2{};
    std::int64_t r = r0;
    for (; r + 1 < r1; r += 2) {
      f(r, k, s, s2);
      f(r + 1, k, t, t2);
    }
    if (r < r1) f(r, k, s, s2);
    s += t;
    s2 += t2;
    if constexpr (std::is_same_v<V, float>) {
      sums[k] += s;
      sums[width + k] += s2;
    } else {
      // A whole vector widened at once, with no lane-by-lane extraction.
      using Doubles = double __attribute__((vector_size(simd::kLanes * sizeof(double))));
      using DoublesAt = double
          __attribute__((vector_size(simd::kLanes * sizeof(double)), aligned(8), may_alias));
      *reinterpret_cast<DoublesAt*>(sums + k) += __builtin_convertvector(s, Doubles);
      *reinterpret_cast<DoublesAt*>(sums + width + k) += __builtin_convertvector(s2, Doubles);
    }
  };
  for (std::int64_t r0 = begin; r0 < end; r0 += kBlockRows) {
    const std::int64_t r1 = std::min(end, r0 + kBlockRows);
    std::int64_t k = 0;
    for (; k + simd::kLanes <= width; k += simd::kLanes)
      block(r0, r1, k, std::type_identity<simd::Floats>());
    for (; k < width; ++k) block(r0, r1, k, std::type_identity<float>());
  }
}

// Sums of two terms over the n floats of one row, as accumulate_blocks sums columns: f(i, s, s2)
// adds the terms of the floats from i on into s and s2, simd::Floats for a vector (i a multiple
// of kLanes), floats for the last n % kLanes. Each lane sums a block of a few vectors in float;
// the blocks and the lanes are added in double.
template <typename F>
std::pair<double, double> row_sums(std::int64_t n, F&& f) {
  double lanes[2 * simd::kLanes] = {};
  accumulate_blocks(0, n / simd::kLanes, simd::kLanes, lanes,
                    [&](std::int64_t r, std::int64_t, auto& s, auto& s2) {
                      f(r * simd::kLanes, s, s2);
                    });
  double sum = 0, sum2 = 0;
  for (std::int64_t i = n - n % simd::kLanes; i < n; ++i) {
    float s = 0, s2 = 0;
    f(i, s, s2);
    sum += s;
    sum2 += s2;
  }
  for (std::int64_t k = 0; k < simd::kLanes; ++k) {
    sum += lanes[k];
    sum2 += lanes[simd::kLanes + k];
  }
  return {sum, sum2};
}

// The variance about a pivot near the mean from the sums of x - pivot (s1) and of its squares
// (s2) over `count` values: the second pass of the two-pass variance, whose s1 corrects for
// the pivot not being the mean exactly (it is the mean of the first pass, rounded to float).
double variance_about(double s1, double s2, double count) {
  const double d = s1 / count;
  return std::max(0.0, s2 / count - d * d);
}

// The mean and variance of `rows` rows of `width` values `stride` apart, in double throughout:
// for values whose sums or squares overflow the float lanes above (|x - mean| beyond about
// 1.8e19), which would make a finite row's variance infinite and its output beta alone.
std::pair<double, double> moments_in_double(const float* x, std::int64_t rows, std::int64_t stride,
                                            std::int64_t width) {
  const auto count = static_cast<double>(rows * width);
  double sum = 0, squares = 0;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t k = 0; k < width; ++k) sum += x[r * stride + k];
  const double mean = sum / count;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t k = 0; k < width; ++k) {
      const double d = x[r * stride + k] - mean;
      squares += d * d;
    }
  return {mean, squares / count};
}

// 1 / sqrt(variance + epsilon), as the layers store it.
float inverse_deviation(double variance, float epsilon) {
  return static_cast<float>(1.0 / std::sqrt(variance + epsilon));
}

// LayerNormalization of one row of n features: writes x_hat = (x - mean) / sqrt(var + epsilon)
// and y = gamma x_hat + beta, returns 1 / sqrt(var + epsilon). Two passes, the second about the
// first's mean, free of the cancellation of E[x^2] - E[x]^2.
float normalize_row(const float* __restrict x, float* __restrict x_hat, float* __restrict y,
                    const float* gamma, const float* beta, std::int64_t n, float epsilon) {
  const auto count = static_cast<double>(n);
  const auto pivot = static_cast<float>(
      row_sums(n, [&](std::int64_t i, auto& s, auto&) {
        s += Load<std::remove_reference_t<decltype(s)>>::at(x + i);
      }).first / count);
  const auto [s1, s2] = row_sums(n, [&](std::int64_t i, auto& s, auto& sq) {
    using V = std::remove_reference_t<decltype(s)>;
    const V d = Load<V>::at(x + i) - pivot;
    s += d;
    sq += d * d;
  });
  auto inv_std = inverse_deviation(variance_about(s1, s2, count), epsilon);
  auto mean = static_cast<float>(pivot + s1 / count);
  if (!std::isfinite(s1) || !std::isfinite(s2)) {
    const auto [m, variance] = moments_in_double(x, 1, n, n);
    mean = static_cast<float>(m);
    inv_std = inverse_deviation(variance, epsilon);
  }
  for (std::int64_t k = 0; k < n; ++k) {
    const float h = (x[k] - mean) * inv_std;
    x_hat[k] = h;
    y[k] = h * gamma[k] + beta[k];
  }
  return inv_std;
}

// normalize_row's backward pass: writes dx = inv_std (g - mean(g) - x_hat mean(g x_hat)),
// g = dy gamma.
void normalize_row_backward(const float* __restrict dy, const float* __restrict x_hat,
                            const float* gamma, float inv_std, std::int64_t n,
                            float* __restrict dx) {
  const auto count = static_cast<double>(n);
  const auto [sum_g, sum_g_x_hat] = row_sums(n, [&](std::int64_t i, auto& s, auto& s2) {
    using V = std::remove_reference_t<decltype(s)>;
    const V g = Load<V>::at(dy + i) * Load<V>::at(gamma + i);
    s += g;
    s2 += g * Load<V>::at(x_hat + i);
  });
  const auto mean_g = static_cast<float>(sum_g / count);
  const auto mean_g_x_hat = static_cast<float>(sum_g_x_hat / count);
  for (std::int64_t k = 0; k < n; ++k)
    dx[k] = inv_std * (dy[k] * gamma[k] - mean_g - x_hat[k] * mean_g_x_hat);
}

// GroupNormalization's work: each example's groups in `chunks` contiguous ranges, one unit of
// work each, for `threads` threads. One range per example (an example's positions walked row by
// row, all its channels at once) unless there are fewer examples than threads.
struct GroupSplit {
  std::int64_t chunks = 1, units = 0;
  int threads = 1;

  // Unit u's work: example b's groups [g0, g1), its channels [c0, c0 + w) at every position, the
  // first of them float `at` of the batch (examples of `example_floats`, groups of `width`).
  struct Range {
    std::int64_t b, g0, g1, c0, w, at;
  };
  Range range(std::int64_t u, std::int64_t groups, std::int64_t width, std::int64_t example_floats) const {
    const std::int64_t b = u / chunks, j = u % chunks;
    const std::int64_t g0 = groups * j / chunks, g1 = groups * (j + 1) / chunks;
    return {b, g0, g1, g0 * width, (g1 - g0) * width, b * example_floats + g0 * width};
  }
};

GroupSplit split_groups(std::int64_t examples, std::int64_t groups, std::int64_t per_group) {
  GroupSplit split;
  split.threads = threads_for(examples * groups, per_group);
  if (examples > 0)
    split.chunks = std::min<std::int64_t>(groups, (split.threads + examples - 1) / examples);
  split.units = examples * split.chunks;
  return split;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// BatchNormalization

BatchNormalization::BatchNormalization(std::string name, Options options)
    : name_(std::move(name)), options_(options) {
  // Written so that NaN fails too.
  if (!(options_.momentum >= 0.0f && options_.momentum < 1.0f))
    throw InvalidArgument("BatchNormalization \"" + name_ +
                          "\": momentum = " + format(options_.momentum) + ", must be in [0, 1)");
  if (!(options_.epsilon > 0.0f))
    throw InvalidArgument("BatchNormalization \"" + name_ +
                          "\": epsilon = " + format(options_.epsilon) + ", must be > 0");
}

Shape BatchNormalization::build(Graph& graph, const Shape& input) {
  if (input.empty())
    throw InvalidArgument("BatchNormalization \"" + name_ +
                          "\": input is a scalar, it needs a channel axis (the last)");
  if (input.back() < 1 || num_elements(input) < 1)
    throw InvalidArgument("BatchNormalization \"" + name_ + "\": bad input shape " +
                          to_string(input));
  graph_ = &graph;
  channels_ = input.back();
  per_example_ = num_elements(input);
  const Shape shape{channels_};
  const VariableOptions trainable{.trainable = true, .decay = false};
  const VariableOptions state{.trainable = false};
  gamma_offset_ =
      graph.get_variable(name_ + "/gamma", shape, Initializer::constant(1.0f), trainable).offset;
  beta_offset_ = graph.get_variable(name_ + "/beta", shape, Initializer::zeros(), trainable).offset;
  mean_offset_ =
      graph.get_variable(name_ + "/moving_mean", shape, Initializer::zeros(), state).offset;
  variance_offset_ =
      graph.get_variable(name_ + "/moving_variance", shape, Initializer::constant(1.0f), state)
          .offset;
  inv_std_.assign(static_cast<std::size_t>(channels_), 0.0f);
  mean_.assign(static_cast<std::size_t>(channels_), 0.0f);
  shared_pivot_.assign(static_cast<std::size_t>(channels_), 0.0f);
  shared_pivot_set_ = false;
  coefficients_.assign(static_cast<std::size_t>(3 * channels_), 0.0f);
  sums_.assign(static_cast<std::size_t>(2 * channels_ + 1), 0.0);
  return input;
}

void BatchNormalization::forward(const Tensor& input, Tensor& output, const OpContext& context) {
  const std::int64_t c = channels_;
  const std::int64_t rows = input.size() / c;
  const float* gamma = graph_->values().data() + gamma_offset_;
  const float* beta = graph_->values().data() + beta_offset_;
  float* moving_mean = graph_->state().data() + mean_offset_;
  float* moving_variance = graph_->state().data() + variance_offset_;
  float* mean = mean_.data();
  float* inv_std = inv_std_.data();
  const int threads = threads_for(rows, c);

  last_training_ = context.training;
  last_cross_replica_ = nullptr;
  if (context.training) {
    // Sum and sum of squares per channel, each thread over its rows into its own partials: in
    // float over blocks of a few rows (vector speed, a few roundings), then in double, as the
    // variance is taken as E[x^2] - E[x]^2, which is what can be summed over replicas. Of x
    // less a pivot near the mean, so that a channel whose mean dwarfs its spread (raw years,
    // prices) keeps the spread's digits: the batch's first example; where the replicas' sums
    // must add up, one every replica holds alike, the last synchronised step's mean (at the
    // first, the batch's mean from one more reduction, of the plain sums).
    const bool shared = options_.synchronized && context.cross_replica != nullptr;
    if (shared && !shared_pivot_set_) {
      std::vector<double> plain(static_cast<std::size_t>(c + 1), 0.0);
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t k = 0; k < c; ++k) plain[static_cast<std::size_t>(k)] += input.data()[r * c + k];
      plain[static_cast<std::size_t>(c)] = static_cast<double>(rows);
      context.cross_replica->sum(std::span<double>(plain));
      const double all = plain[static_cast<std::size_t>(c)];
      for (std::int64_t k = 0; k < c; ++k)
        shared_pivot_[static_cast<std::size_t>(k)] =
            all > 0 ? static_cast<float>(plain[static_cast<std::size_t>(k)] / all) : 0.0f;
      shared_pivot_set_ = true;
    }
    if (shared)
      pivot_ = shared_pivot_;
    else if (rows == 0)
      pivot_.assign(static_cast<std::size_t>(c), 0.0f);
    else
      pivot_.assign(input.data(), input.data() + c);
    const float* pivot = pivot_.data();
    partials_.assign(static_cast<std::size_t>(threads * 2 * c), 0.0);
    in_row_ranges(rows, threads, [&](int t, std::int64_t begin, std::int64_t end) {
      double* s = partials_.data() + t * 2 * c;
      accumulate_blocks(begin, end, c, s, [&](std::int64_t r, std::int64_t k, auto& b, auto& b2) {
        using V = std::remove_reference_t<decltype(b)>;
        const V x = Load<V>::at(input.data() + r * c + k) - Load<V>::at(pivot + k);
        b += x;
        b2 += x * x;
      });
    });
    add_partials(partials_, threads, c, sums_.data());
    sums_[2 * c] = static_cast<double>(rows);
    if (options_.synchronized && context.cross_replica != nullptr) {
      last_cross_replica_ = context.cross_replica;
      last_cross_replica_->sum(std::span<double>(sums_.data(), sums_.size()));
    }
    const double count = sums_[2 * c];
    // One value per channel normalises to 0, with no gradient below: nothing before it would
    // learn (PyTorch refuses it alike).
    if (count == 1)
      throw InvalidArgument("BatchNormalization \"" + name_ + "\": training on one value per channel " +
                            "(a batch of " + to_string(input.shape()) + ") normalises each to 0 and passes " +
                            "no gradient: give two or more examples a batch (a tower's share of it)");
    last_count_ = count;
    // Bessel's correction for the moving variance; one value per channel has no spread to correct.
    const double bessel = count > 1 ? count / (count - 1) : 1.0;
    const double momentum = options_.momentum;
    for (std::int64_t k = 0; k < c; ++k) {
      const double d = count > 0 ? sums_[k] / count : 0.0;  // the mean less the pivot
      const double m = pivot[k] + d;
      // Rounding can take E[x^2] - E[x]^2 a little below 0 for a constant channel.
      const double var = count > 0 ? std::max(0.0, sums_[c + k] / count - d * d) : 0.0;
      mean[k] = static_cast<float>(m);
      if (shared && count > 0) shared_pivot_[k] = mean[k];  // the pivot of the next step
      inv_std[k] = static_cast<float>(1.0 / std::sqrt(var + options_.epsilon));
      if (context.update_state && count > 0) {
        moving_mean[k] = static_cast<float>(momentum * moving_mean[k] + (1 - momentum) * m);
        moving_variance[k] =
            static_cast<float>(momentum * moving_variance[k] + (1 - momentum) * var * bessel);
      }
    }
  } else {
    for (std::int64_t k = 0; k < c; ++k) {
      mean[k] = moving_mean[k];
      inv_std[k] =
          static_cast<float>(1.0 / std::sqrt(double{moving_variance[k]} + options_.epsilon));
    }
  }

  // y = x_hat * gamma + beta = (x - mean) * scale + beta, then the fused activation: x - mean
  // first, as backward takes it, so that a mean far larger than the spread costs no digits.
  // x_hat is not kept: backward recomputes it from the input, which costs less than writing and
  // reading it back.
  float* scale = coefficients_.data();
  for (std::int64_t k = 0; k < c; ++k) scale[k] = gamma[k] * inv_std[k];
  output.resize(input.shape());
  with_relu(options_.activation == Activation::kRelu, [&](auto fused) {
    in_row_ranges(rows, threads, [&](int, std::int64_t begin, std::int64_t end) {
      for (std::int64_t r = begin; r < end; ++r) {
        const float* __restrict x = input.data() + r * c;
        float* __restrict y = output.data() + r * c;
        for (std::int64_t k = 0; k < c; ++k) {
          const float v = (x[k] - mean[k]) * scale[k] + beta[k];
          y[k] = fused ? std::max(0.0f, v) : v;
        }
      }
    });
  });
}

void BatchNormalization::backward(const Tensor& input, const Tensor& output,
                                  const Tensor& grad_output, Tensor* grad_input,
                                  std::span<float> grads) {
  const std::int64_t c = channels_;
  const std::int64_t rows = input.size() / c;
  const float* gamma = graph_->values().data() + gamma_offset_;
  const float* mean = mean_.data();
  const float* inv_std = inv_std_.data();
  const bool relu = options_.activation == Activation::kRelu;
  const int threads = threads_for(rows, c);

  // sum(dy) and sum(dy * x_hat) per channel over this batch: dbeta and dgamma, and (for a
  // training forward) the two sums the input gradient needs. dy is the gradient before the fused
  // ReLU, if any: grad_output where the output is positive.
  partials_.assign(static_cast<std::size_t>(threads * 2 * c), 0.0);
  with_relu(relu, [&](auto fused) {
    in_row_ranges(rows, threads, [&](int t, std::int64_t begin, std::int64_t end) {
      double* s = partials_.data() + t * 2 * c;
      accumulate_blocks(begin, end, c, s, [&](std::int64_t r, std::int64_t k, auto& b, auto& b2) {
        using V = std::remove_reference_t<decltype(b)>;
        const std::int64_t at = r * c + k;
        V dy = Load<V>::at(grad_output.data() + at);
        const V y = Load<V>::at(output.data() + at);  // a value: mask() takes an aligned V
        mask<fused>(dy, y);
        b += dy;
        b2 += dy * ((Load<V>::at(input.data() + at) - Load<V>::at(mean + k)) * Load<V>::at(inv_std + k));
      });
    });
  });
  double* sum_dy = sums_.data();
  double* sum_dy_x_hat = sums_.data() + c;
  add_partials(partials_, threads, c, sum_dy);
  // The parameter gradients are this replica's own: gradient averaging over the replicas does the
  // rest, as it does for every other variable.
  float* grad_gamma = grads.data() + gamma_offset_;
  float* grad_beta = grads.data() + beta_offset_;
  for (std::int64_t k = 0; k < c; ++k) {
    grad_gamma[k] = static_cast<float>(sum_dy_x_hat[k]);
    grad_beta[k] = static_cast<float>(sum_dy[k]);
  }
  // Every replica runs the same model, so all of them skip this together (and the collective
  // below with it) for a first layer.
  if (grad_input == nullptr) return;

  // dx = a * (dy - b - x_hat * d), per channel a, b, d.
  float* a = coefficients_.data();
  float* b = a + c;
  float* d = b + c;
  if (last_training_) {
    // The batch statistics depend on every element of the batch (every replica's, synchronised),
    // hence the two mean terms. Synchronised, the sums and the count are those of all replicas.
    if (last_cross_replica_ != nullptr)
      last_cross_replica_->sum(std::span<double>(sums_.data(), static_cast<std::size_t>(2 * c)));
    const double count = last_count_ > 0 ? last_count_ : 1.0;
    for (std::int64_t k = 0; k < c; ++k) {
      a[k] = gamma[k] * inv_std[k];
      b[k] = static_cast<float>(sum_dy[k] / count);
      d[k] = static_cast<float>(sum_dy_x_hat[k] / count);
    }
  } else {
    // The moving statistics are constants: the layer is an affine map per channel.
    for (std::int64_t k = 0; k < c; ++k) {
      a[k] = gamma[k] * inv_std[k];
      b[k] = 0.0f;
      d[k] = 0.0f;
    }
  }
  grad_input->resize(input.shape());
  with_relu(relu, [&](auto fused) {
    in_row_ranges(rows, threads, [&](int, std::int64_t begin, std::int64_t end) {
      for (std::int64_t r = begin; r < end; ++r) {
        const float* __restrict x = input.data() + r * c;
        const float* __restrict g = grad_output.data() + r * c;
        const float* __restrict y = output.data() + r * c;
        float* __restrict dx = grad_input->data() + r * c;
        for (std::int64_t k = 0; k < c; ++k) {
          const float x_hat = (x[k] - mean[k]) * inv_std[k];
          float dy = g[k];
          mask<fused>(dy, y[k]);
          dx[k] = a[k] * (dy - b[k] - x_hat * d[k]);
        }
      }
    });
  });
}

double BatchNormalization::flops_per_example() const {
  // Forward: sums (3), normalise (2), scale and shift (2); backward: sums (3), dx (4).
  return 14.0 * static_cast<double>(per_example_);
}

// ---------------------------------------------------------------------------------------------
// LayerNormalization

LayerNormalization::LayerNormalization(std::string name, float epsilon)
    : name_(std::move(name)), epsilon_(epsilon) {
  if (!(epsilon_ > 0.0f))
    throw InvalidArgument("LayerNormalization \"" + name_ + "\": epsilon = " + format(epsilon_) +
                          ", must be > 0");
}

Shape LayerNormalization::build(Graph& graph, const Shape& input) {
  if (input.empty())
    throw InvalidArgument("LayerNormalization \"" + name_ +
                          "\": input is a scalar, it needs a feature axis (the last)");
  if (input.back() < 1 || num_elements(input) < 1)
    throw InvalidArgument("LayerNormalization \"" + name_ + "\": bad input shape " +
                          to_string(input));
  graph_ = &graph;
  features_ = input.back();
  per_example_ = num_elements(input);
  const Shape shape{features_};
  const VariableOptions trainable{.trainable = true, .decay = false};
  gamma_offset_ =
      graph.get_variable(name_ + "/gamma", shape, Initializer::constant(1.0f), trainable).offset;
  beta_offset_ = graph.get_variable(name_ + "/beta", shape, Initializer::zeros(), trainable).offset;
  return input;
}

void LayerNormalization::forward(const Tensor& input, Tensor& output, const OpContext&) {
  const std::int64_t f = features_;
  const std::int64_t rows = input.size() / f;
  const float* gamma = graph_->values().data() + gamma_offset_;
  const float* beta = graph_->values().data() + beta_offset_;
  output.resize(input.shape());
  x_hat_.resize(input.shape());
  inv_std_.resize(static_cast<std::size_t>(rows));
  in_row_ranges(rows, threads_for(rows, f), [&](int, std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r)
      inv_std_[static_cast<std::size_t>(r)] =
          normalize_row(input.data() + r * f, x_hat_.data() + r * f, output.data() + r * f, gamma,
                        beta, f, epsilon_);
  });
}

void LayerNormalization::backward(const Tensor& input, const Tensor&, const Tensor& grad_output,
                                  Tensor* grad_input, std::span<float> grads) {
  const std::int64_t f = features_;
  const std::int64_t rows = input.size() / f;
  const float* gamma = graph_->values().data() + gamma_offset_;
  const int threads = threads_for(rows, f);
  if (grad_input != nullptr) grad_input->resize(input.shape());
  // Per thread: [dbeta (F), dgamma (F)] partials, summed over its rows.
  partials_.assign(static_cast<std::size_t>(threads * 2 * f), 0.0);
  in_row_ranges(rows, threads, [&](int t, std::int64_t begin, std::int64_t end) {
    double* sums = partials_.data() + t * 2 * f;
    // A block of rows at a time: its feature sums down the rows, then each row's dx while the
    // block is still in cache.
    for (std::int64_t r0 = begin; r0 < end; r0 += kBlockRows) {
      const std::int64_t r1 = std::min(end, r0 + kBlockRows);
      accumulate_blocks(r0, r1, f, sums, [&](std::int64_t r, std::int64_t k, auto& s, auto& s2) {
        using V = std::remove_reference_t<decltype(s)>;
        const V dy = Load<V>::at(grad_output.data() + r * f + k);
        s += dy;
        s2 += dy * Load<V>::at(x_hat_.data() + r * f + k);
      });
      if (grad_input == nullptr) continue;
      for (std::int64_t r = r0; r < r1; ++r)
        normalize_row_backward(grad_output.data() + r * f, x_hat_.data() + r * f, gamma,
                               inv_std_[static_cast<std::size_t>(r)], f,
                               grad_input->data() + r * f);
    }
  });
  write_scale_shift_grads(partials_, threads, f, grads.data() + gamma_offset_, grads.data() + beta_offset_);
}

double LayerNormalization::flops_per_example() const {
  // Forward: mean (1), variance (3), normalise (2), scale and shift (2); backward: parameter
  // sums (3), row sums (4), dx (5).
  return 20.0 * static_cast<double>(per_example_);
}

GroupNormalization::GroupNormalization(std::string name, std::int64_t groups, float epsilon)
    : name_(std::move(name)), groups_(groups), epsilon_(epsilon) {
  if (groups_ < 1)
    throw InvalidArgument("GroupNormalization \"" + name_ + "\": groups = " + std::to_string(groups_) +
                          ", must be >= 1");
  if (!(epsilon_ > 0.0f))
    throw InvalidArgument("GroupNormalization \"" + name_ + "\": epsilon = " + format(epsilon_) +
                          ", must be > 0");
}

Shape GroupNormalization::build(Graph& graph, const Shape& input) {
  if (input.empty() || num_elements(input) < 1)
    throw InvalidArgument("GroupNormalization \"" + name_ + "\": bad input shape " + to_string(input) +
                          ": it needs a channel axis (the last)");
  if (input.back() % groups_ != 0)
    throw InvalidArgument("GroupNormalization \"" + name_ + "\": " + std::to_string(input.back()) +
                          " channels (input " + to_string(input) + ") do not split into " +
                          std::to_string(groups_) + " groups");
  graph_ = &graph;
  channels_ = input.back();
  positions_ = num_elements(input) / channels_;
  const Shape shape{channels_};
  const VariableOptions trainable{.trainable = true, .decay = false};
  gamma_offset_ =
      graph.get_variable(name_ + "/gamma", shape, Initializer::constant(1.0f), trainable).offset;
  beta_offset_ = graph.get_variable(name_ + "/beta", shape, Initializer::zeros(), trainable).offset;
  return input;
}

// Both passes walk an example's positions row by row over a range of whole groups' channels,
// contiguous in NHWC, summing per channel (accumulate_blocks), then add the channels of each group.

void GroupNormalization::forward(const Tensor& input, Tensor& output, const OpContext&) {
  const std::int64_t c = channels_, width = c / groups_, p_count = positions_;
  const auto count = static_cast<double>(p_count * width);  // values per group
  const float* gamma = graph_->values().data() + gamma_offset_;
  const float* beta = graph_->values().data() + beta_offset_;
  const GroupSplit split = split_groups(input.dim(0), groups_, p_count * width);
  output.resize(input.shape());
  x_hat_.resize(input.shape());
  inv_std_.resize(static_cast<std::size_t>(input.dim(0) * groups_));
  in_row_ranges(split.units, split.threads, [&](int, std::int64_t begin, std::int64_t end) {
    std::vector<double> sums(static_cast<std::size_t>(2 * c));
    std::vector<float> mean(static_cast<std::size_t>(c)), scale(static_cast<std::size_t>(c));
    for (std::int64_t u = begin; u < end; ++u) {
      const auto [b, g0, g1, c0, w, at] = split.range(u, groups_, width, p_count * c);
      const float* x = input.data() + at;
      double* s = sums.data();
      // Two passes, the second about the first's mean, free of the cancellation of
      // E[x^2] - E[x]^2; the group's sums are its channels' in double.
      const auto group_sums = [&](std::int64_t g, std::int64_t offset) {
        double total = 0;
        const std::int64_t k0 = (g - g0) * width;
        for (std::int64_t k = k0; k < k0 + width; ++k) total += s[offset + k];
        return total;
      };
      std::fill_n(s, 2 * w, 0.0);
      accumulate_blocks(0, p_count, w, s, [&](std::int64_t r, std::int64_t k, auto& b1, auto&) {
        b1 += Load<std::remove_reference_t<decltype(b1)>>::at(x + r * c + k);
      });
      for (std::int64_t g = g0; g < g1; ++g)
        std::fill_n(mean.data() + (g - g0) * width, width,
                    static_cast<float>(group_sums(g, 0) / count));
      std::fill_n(s, 2 * w, 0.0);
      accumulate_blocks(0, p_count, w, s, [&](std::int64_t r, std::int64_t k, auto& b1, auto& b2) {
        using V = std::remove_reference_t<decltype(b1)>;
        const V d = Load<V>::at(x + r * c + k) - Load<V>::at(mean.data() + k);
        b1 += d;
        b2 += d * d;
      });
      for (std::int64_t g = g0; g < g1; ++g) {
        const double s1 = group_sums(g, 0), s2 = group_sums(g, w);
        auto inv_std = inverse_deviation(variance_about(s1, s2, count), epsilon_);
        const std::int64_t k0 = (g - g0) * width;
        auto m = static_cast<float>(mean[static_cast<std::size_t>(k0)] + s1 / count);
        if (!std::isfinite(s1) || !std::isfinite(s2)) {
          const auto [exact_mean, variance] = moments_in_double(x + k0, p_count, c, width);
          m = static_cast<float>(exact_mean);
          inv_std = inverse_deviation(variance, epsilon_);
        }
        inv_std_[static_cast<std::size_t>(b * groups_ + g)] = inv_std;
        std::fill_n(mean.data() + k0, width, m);
        std::fill_n(scale.data() + k0, width, inv_std);
      }
      for (std::int64_t p = 0; p < p_count; ++p) {
        const float* __restrict xr = x + p * c;
        float* __restrict hr = x_hat_.data() + at + p * c;
        float* __restrict yr = output.data() + at + p * c;
        for (std::int64_t k = 0; k < w; ++k) {
          const float h = (xr[k] - mean[k]) * scale[k];
          hr[k] = h;
          yr[k] = h * gamma[c0 + k] + beta[c0 + k];
        }
      }
    }
  });
}

void GroupNormalization::backward(const Tensor& input, const Tensor&, const Tensor& grad_output,
                                  Tensor* grad_input, std::span<float> grads) {
  const std::int64_t c = channels_, width = c / groups_, p_count = positions_;
  const auto count = static_cast<double>(p_count * width);
  const float* gamma = graph_->values().data() + gamma_offset_;
  const GroupSplit split = split_groups(input.dim(0), groups_, p_count * width);
  if (grad_input != nullptr) grad_input->resize(input.shape());
  // Per thread: [dbeta (C), dgamma (C)] partials, summed over its units.
  partials_.assign(static_cast<std::size_t>(split.threads * 2 * c), 0.0);
  in_row_ranges(split.units, split.threads, [&](int t, std::int64_t begin, std::int64_t end) {
    double* param_sums = partials_.data() + t * 2 * c;
    std::vector<double> sums(static_cast<std::size_t>(2 * c));
    // dx = inv_std (dy gamma - mean_g - x_hat mean_g_x_hat), g = dy gamma, per channel.
    std::vector<float> inv_std(static_cast<std::size_t>(c)), mean_g(static_cast<std::size_t>(c)),
        mean_g_x_hat(static_cast<std::size_t>(c));
    for (std::int64_t u = begin; u < end; ++u) {
      const auto [b, g0, g1, c0, w, at] = split.range(u, groups_, width, p_count * c);
      const float* dy = grad_output.data() + at;
      const float* x_hat = x_hat_.data() + at;
      // Per channel: sum dy and sum dy x_hat, the gradients of beta and gamma, and with gamma
      // the group's sums of g and g x_hat.
      double* s = sums.data();
      std::fill_n(s, 2 * w, 0.0);
      accumulate_blocks(0, p_count, w, s, [&](std::int64_t r, std::int64_t k, auto& b1, auto& b2) {
        using V = std::remove_reference_t<decltype(b1)>;
        const V d = Load<V>::at(dy + r * c + k);
        b1 += d;
        b2 += d * Load<V>::at(x_hat + r * c + k);
      });
      for (std::int64_t k = 0; k < w; ++k) {
        param_sums[c0 + k] += s[k];
        param_sums[c + c0 + k] += s[w + k];
      }
      if (grad_input == nullptr) continue;
      for (std::int64_t g = g0; g < g1; ++g) {
        double sum_g = 0, sum_g_x_hat = 0;
        const std::int64_t k0 = (g - g0) * width;
        for (std::int64_t k = k0; k < k0 + width; ++k) {
          sum_g += static_cast<double>(gamma[c0 + k]) * s[k];
          sum_g_x_hat += static_cast<double>(gamma[c0 + k]) * s[w + k];
        }
        std::fill_n(inv_std.data() + k0, width,
                    inv_std_[static_cast<std::size_t>(b * groups_ + g)]);
        std::fill_n(mean_g.data() + k0, width, static_cast<float>(sum_g / count));
        std::fill_n(mean_g_x_hat.data() + k0, width, static_cast<float>(sum_g_x_hat / count));
      }
      for (std::int64_t p = 0; p < p_count; ++p) {
        const float* __restrict dyr = dy + p * c;
        const float* __restrict hr = x_hat + p * c;
        float* __restrict dxr = grad_input->data() + at + p * c;
        for (std::int64_t k = 0; k < w; ++k)
          dxr[k] = inv_std[k] * (dyr[k] * gamma[c0 + k] - mean_g[k] - hr[k] * mean_g_x_hat[k]);
      }
    }
  });
  write_scale_shift_grads(partials_, split.threads, c, grads.data() + gamma_offset_,
                          grads.data() + beta_offset_);
}

double GroupNormalization::flops_per_example() const {
  return 20.0 * static_cast<double>(positions_ * channels_);  // as LayerNormalization's
}

// ---------------------------------------------------------------------------------------------
// The terse constructors (ops.h).

std::unique_ptr<Layer> batch_norm(std::string name, bool synchronized, Activation activation,
                                  float momentum, float epsilon) {
  BatchNormalization::Options options;
  options.activation = activation;
  options.momentum = momentum;
  options.epsilon = epsilon;
  options.synchronized = synchronized;
  return std::make_unique<BatchNormalization>(std::move(name), options);
}

std::unique_ptr<Layer> layer_norm(std::string name, float epsilon) {
  return std::make_unique<LayerNormalization>(std::move(name), epsilon);
}

std::unique_ptr<Layer> group_norm(std::string name, std::int64_t groups, float epsilon) {
  return std::make_unique<GroupNormalization>(std::move(name), groups, epsilon);
}

}  // namespace cohort
