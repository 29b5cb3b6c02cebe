#include "cohort/core/nn/ops/normalization.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>

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

// One group of layer or group normalisation: `width` channels at each of `positions` positions,
// `stride` floats from one position to the next, read from x (and written to x_hat and y at the
// same places). Writes x_hat = (x - mean) / sqrt(var + epsilon) and y = gamma x_hat + beta (gamma
// and beta per channel) and returns 1 / sqrt(var + epsilon). Two passes: the variance about the
// mean, free of the cancellation of E[x^2] - E[x]^2.
float normalize_group(const float* __restrict x, float* __restrict x_hat, float* __restrict y,
                      const float* gamma, const float* beta, std::int64_t positions,
                      std::int64_t stride, std::int64_t width, float epsilon) {
  const double count = static_cast<double>(positions * width);
  double sum = 0;
  for (std::int64_t p = 0; p < positions; ++p)
    for (std::int64_t k = 0; k < width; ++k) sum += x[p * stride + k];
  const double mean = sum / count;
  double squares = 0;
  for (std::int64_t p = 0; p < positions; ++p)
    for (std::int64_t k = 0; k < width; ++k) {
      const double centred = x[p * stride + k] - mean;
      squares += centred * centred;
    }
  const auto inv_std = static_cast<float>(1.0 / std::sqrt(squares / count + epsilon));
  const auto mean_f = static_cast<float>(mean);
  for (std::int64_t p = 0; p < positions; ++p)
    for (std::int64_t k = 0; k < width; ++k) {
      const std::int64_t i = p * stride + k;
      const float h = (x[i] - mean_f) * inv_std;
      x_hat[i] = h;
      y[i] = h * gamma[k] + beta[k];
    }
  return inv_std;
}

// normalize_group's backward pass: adds each channel's sums of dy (to s) and dy x_hat (to s2),
// the gradients of beta and gamma, and writes dx = inv_std (g - mean(g) - x_hat mean(g x_hat)),
// g = dy gamma, unless dx is null.
void normalize_group_backward(const float* __restrict dy, const float* __restrict x_hat,
                              const float* gamma, float inv_std, std::int64_t positions,
                              std::int64_t stride, std::int64_t width, double* __restrict s,
                              double* __restrict s2, float* __restrict dx) {
  const double count = static_cast<double>(positions * width);
  double sum_g = 0, sum_g_x_hat = 0;
  for (std::int64_t p = 0; p < positions; ++p)
    for (std::int64_t k = 0; k < width; ++k) {
      const std::int64_t i = p * stride + k;
      s[k] += dy[i];
      s2[k] += static_cast<double>(dy[i]) * x_hat[i];
      const float g = dy[i] * gamma[k];
      sum_g += g;
      sum_g_x_hat += static_cast<double>(g) * x_hat[i];
    }
  if (dx == nullptr) return;
  const auto mean_g = static_cast<float>(sum_g / count);
  const auto mean_g_x_hat = static_cast<float>(sum_g_x_hat / count);
  for (std::int64_t p = 0; p < positions; ++p)
    for (std::int64_t k = 0; k < width; ++k) {
      const std::int64_t i = p * stride + k;
      dx[i] = inv_std * (dy[i] * gamma[k] - mean_g - x_hat[i] * mean_g_x_hat);
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

// Per-channel sums of two terms over rows [begin, end) of `width` channels, added into
// sums[0, width) and sums[width, 2 * width). f(r, k, s, s2) adds row r's two terms for channels
// from k on into s and s2: simd::Floats for a vector of channels (k a multiple of kLanes), floats
// for the last width % kLanes. Each block of kBlockRows rows is summed in registers, in float, on
// two chains of alternate rows (an add's latency is longer than a load's throughput), then
// added to the sums in double.
template <typename F>
void accumulate_blocks(std::int64_t begin, std::int64_t end, std::int64_t width, double* sums,
                       F&& f) {
  constexpr std::int64_t kBlockRows = 16;
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
          normalize_group(input.data() + r * f, x_hat_.data() + r * f, output.data() + r * f, gamma,
                          beta, 1, f, f, epsilon_);
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
    for (std::int64_t r = begin; r < end; ++r)
      normalize_group_backward(grad_output.data() + r * f, x_hat_.data() + r * f, gamma,
                               inv_std_[static_cast<std::size_t>(r)], 1, f, f, sums, sums + f,
                               grad_input != nullptr ? grad_input->data() + r * f : nullptr);
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

void GroupNormalization::forward(const Tensor& input, Tensor& output, const OpContext&) {
  const std::int64_t c = channels_, width = c / groups_, p_count = positions_;
  const std::int64_t units = input.dim(0) * groups_;  // (example, group) pairs
  const float* gamma = graph_->values().data() + gamma_offset_;
  const float* beta = graph_->values().data() + beta_offset_;
  output.resize(input.shape());
  x_hat_.resize(input.shape());
  inv_std_.resize(static_cast<std::size_t>(units));
  in_row_ranges(units, threads_for(units, p_count * width), [&](int, std::int64_t begin, std::int64_t end) {
    for (std::int64_t u = begin; u < end; ++u) {
      // The group's channels [c0, c0 + width) at every position of example b.
      const std::int64_t b = u / groups_, c0 = (u % groups_) * width, at = b * p_count * c + c0;
      inv_std_[static_cast<std::size_t>(u)] =
          normalize_group(input.data() + at, x_hat_.data() + at, output.data() + at, gamma + c0,
                          beta + c0, p_count, c, width, epsilon_);
    }
  });
}

void GroupNormalization::backward(const Tensor& input, const Tensor&, const Tensor& grad_output,
                                  Tensor* grad_input, std::span<float> grads) {
  const std::int64_t c = channels_, width = c / groups_, p_count = positions_;
  const std::int64_t units = input.dim(0) * groups_;
  const float* gamma = graph_->values().data() + gamma_offset_;
  const int threads = threads_for(units, p_count * width);
  if (grad_input != nullptr) grad_input->resize(input.shape());
  // Per thread: [dbeta (C), dgamma (C)] partials, summed over its groups.
  partials_.assign(static_cast<std::size_t>(threads * 2 * c), 0.0);
  in_row_ranges(units, threads, [&](int t, std::int64_t begin, std::int64_t end) {
    double* sums = partials_.data() + t * 2 * c;
    for (std::int64_t u = begin; u < end; ++u) {
      const std::int64_t b = u / groups_, c0 = (u % groups_) * width, at = b * p_count * c + c0;
      normalize_group_backward(grad_output.data() + at, x_hat_.data() + at, gamma + c0,
                               inv_std_[static_cast<std::size_t>(u)], p_count, c, width, sums + c0,
                               sums + c + c0, grad_input != nullptr ? grad_input->data() + at : nullptr);
    }
  });
  write_scale_shift_grads(partials_, threads, c, grads.data() + gamma_offset_, grads.data() + beta_offset_);
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
