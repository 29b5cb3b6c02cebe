#include "cohort/core/nn/ops/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include <Eigen/Core>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/initializer.h"
#include "cohort/core/nn/ops/bias_grad.h"
#include "cohort/core/nn/ops/gemm.h"
#include "cohort/core/nn/ops/ops.h"
#include "cohort/core/nn/ops/parallel.h"
#include "cohort/core/nn/threads.h"

namespace cohort {
namespace {

using ops_detail::bias_grad;
using ops_detail::broadcast_rows;
using ops_detail::gemm;
using ops_detail::in_ranges;
using RowArray = Eigen::Map<Eigen::ArrayXf>;
using ConstRowArray = Eigen::Map<const Eigen::ArrayXf>;

}  // namespace

MultiHeadAttention::MultiHeadAttention(std::string name, std::int64_t heads, std::int64_t key_dim,
                                       bool causal, float dropout, bool cross)
    : name_(std::move(name)),
      heads_(heads),
      requested_key_dim_(key_dim),
      causal_(causal),
      dropout_(dropout),
      cross_(cross) {
  if (!(dropout >= 0.0f && dropout < 1.0f))
    throw InvalidArgument("MultiHeadAttention \"" + name_ + "\": dropout " +
                          std::to_string(dropout) + ", must be in [0, 1)");
  if (heads_ < 1 || key_dim < 0)
    throw InvalidArgument("MultiHeadAttention \"" + name_ + "\": heads " + std::to_string(heads_) +
                          ", key_dim " + std::to_string(key_dim) +
                          ": heads must be >= 1 and key_dim >= 1 (or 0: features / heads)");
}

Shape MultiHeadAttention::build(Graph& graph, const Shape& input) {
  if (cross_)
    throw InvalidArgument("MultiHeadAttention \"" + name_ + "\": cross-attention takes two "
                          "inputs, the query and the value");
  return build_inputs(graph, std::span(&input, 1));
}

Shape MultiHeadAttention::build_inputs(Graph& graph, std::span<const Shape> inputs) {
  const Shape& query = inputs[0];
  const Shape& value = inputs[cross_ ? 1 : 0];
  const std::string what = "MultiHeadAttention \"" + name_ + "\": ";
  for (const Shape& s : {query, value})
    if (s.size() != 2 || s[0] < 1 || s[1] < 1)
      throw InvalidArgument(what + "input " + to_string(s) + " is not [steps, features]");
  steps_ = query[0];
  features_ = query[1];
  value_steps_ = value[0];
  value_features_ = value[1];
  if (causal_ && value_steps_ != steps_)
    throw InvalidArgument(what + "causal, but the query's " + std::to_string(steps_) +
                          " steps are not the value's " + std::to_string(value_steps_));
  key_dim_ = requested_key_dim_;
  if (key_dim_ == 0) {
    if (features_ % heads_ != 0)
      throw InvalidArgument(what + "input " + to_string(query) + ": " +
                            std::to_string(features_) + " features do not split into " +
                            std::to_string(heads_) + " heads; give key_dim");
    key_dim_ = features_ / heads_;
  }
  width_ = heads_ * key_dim_;
  graph_ = &graph;
  auto projection = [&](const std::string& part, std::int64_t in, std::int64_t out) {
    Projection p;
    p.kernel = graph.get_variable(name_ + "/" + part + "/kernel", {in, out},
                                  Initializer::glorot_uniform(), VariableOptions{.decay = true})
                   .offset;
    p.bias = graph.get_variable(name_ + "/" + part + "/bias", {out}, Initializer::zeros()).offset;
    return p;
  };
  query_ = projection("query", features_, width_);
  key_ = projection("key", value_features_, width_);
  value_ = projection("value", value_features_, width_);
  output_ = projection("attention_output", width_, features_);
  return query;
}

// The products split their rows (or, for a kernel's gradient, the kernel's rows) over the
// intra-op threads; the attention splits its (example, head) pairs.
void MultiHeadAttention::project(const Projection& p, const float* input, std::int64_t rows,
                                 std::int64_t in, std::int64_t out, float* result) const {
  const float* values = graph_->values().data();
  in_ranges(rows, [&](std::int64_t r0, std::int64_t count) {
    broadcast_rows(values + p.bias, count, out, result + r0 * out);
    gemm(false, false, count, out, in, 1.0f, input + r0 * in, in, values + p.kernel, out, 1.0f,
         result + r0 * out, out);
  });
}

void MultiHeadAttention::project_back(const Projection& p, const float* input,
                                      const float* grad_result, std::int64_t rows,
                                      std::int64_t in, std::int64_t out, std::span<float> grads,
                                      float* grad_input, float beta) const {
  float* grad_kernel = grads.data() + p.kernel;
  in_ranges(in, [&](std::int64_t i0, std::int64_t count) {
    gemm(true, false, count, out, rows, 1.0f, input + i0, in, grad_result, out, 0.0f,
         grad_kernel + i0 * out, out);
  });
  bias_grad(grad_result, rows, out, grads.data() + p.bias);
  if (grad_input == nullptr) return;
  const float* kernel = graph_->values().data() + p.kernel;
  in_ranges(rows, [&](std::int64_t r0, std::int64_t count) {
    gemm(false, true, count, in, out, 1.0f, grad_result + r0 * out, out, kernel, out, beta,
         grad_input + r0 * in, in);
  });
}

void MultiHeadAttention::forward(const Tensor& input, Tensor& output, const OpContext& context) {
  run(input, input, output, context);
}

void MultiHeadAttention::forward_inputs(std::span<const Tensor* const> inputs, Tensor& output,
                                        const OpContext& context) {
  run(*inputs[0], *inputs[cross_ ? 1 : 0], output, context);
}

void MultiHeadAttention::backward(const Tensor& input, const Tensor&, const Tensor& grad_output,
                                  Tensor* grad_input, std::span<float> grads) {
  run_back(input, input, grad_output, grad_input, grad_input, grads);
}

void MultiHeadAttention::backward_inputs(std::span<const Tensor* const> inputs, const Tensor&,
                                         const Tensor& grad_output,
                                         std::span<Tensor* const> grad_inputs,
                                         std::span<float> grads) {
  if (!cross_) return run_back(*inputs[0], *inputs[0], grad_output, grad_inputs[0],
                               grad_inputs[0], grads);
  run_back(*inputs[0], *inputs[1], grad_output, grad_inputs[0], grad_inputs[1], grads);
}

// Rows of the batch are (example, step); a head's queries, keys, values and results are the
// key_dim columns from head * key_dim of those rows, read in place with a row stride of width.
// A head's weights are [steps, value steps]: a row per query step, a column per key.
void MultiHeadAttention::run(const Tensor& query, const Tensor& value, Tensor& output,
                             const OpContext& context) {
  const std::int64_t n = query.dim(0), tq = steps_, tk = value_steps_, w = width_;
  const std::int64_t square = tq * tk;
  q_.resize({n * tq, w});
  k_.resize({n * tk, w});
  v_.resize({n * tk, w});
  project(query_, query.data(), n * tq, features_, w, q_.data());
  project(key_, value.data(), n * tk, value_features_, w, k_.data());
  project(value_, value.data(), n * tk, value_features_, w, v_.data());
  weights_.resize({n, heads_, tq, tk});
  context_.resize({n * tq, w});
  dropped_ = context.training && dropout_ > 0.0f;
  if (dropped_) {
    dropout_mask_.resize(weights_.shape());
    dropout_mask(Graph::variable_seed(context.seed, name_), dropout_, dropout_mask_.span());
    kept_.resize({intra_op_threads(), square});
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(key_dim_));
  in_ranges(n * heads_, [&](std::int64_t first, std::int64_t count) {
    float* kept = dropped_ ? kept_.data() + intra_op_thread_index() * square : nullptr;
    for (std::int64_t bh = first; bh < first + count; ++bh) {
      const std::int64_t example = bh / heads_, column = bh % heads_ * key_dim_;
      const std::int64_t at_q = example * tq * w + column, at_k = example * tk * w + column;
      float* a = weights_.data() + bh * square;
      gemm(false, true, tq, tk, key_dim_, scale, q_.data() + at_q, w, k_.data() + at_k, w, 0.0f,
           a, tk);
      const float* keys = mask() != nullptr ? mask()->data() + example * tk : nullptr;
      for (std::int64_t i = 0; i < tq; ++i) {
        // Each row's softmax over the steps it sees, vectorised; the others weigh 0.
        const std::int64_t seen = causal_ ? i + 1 : tk;
        float* ai = a + i * tk;
        if (keys != nullptr) {  // padded keys drop out of the softmax
          bool any = false;
          for (std::int64_t j = 0; j < seen; ++j) {
            if (keys[j] == 0.0f) {
              ai[j] = -std::numeric_limits<float>::infinity();
            } else {
              any = true;
            }
          }
          if (!any) {
            std::fill_n(ai, tk, 0.0f);
            continue;
          }
        }
        RowArray row(ai, seen);
        row = (row - row.maxCoeff()).exp();
        if (keys != nullptr)  // exactly 0 (the vectorised exp of -inf may leave a denormal)
          for (std::int64_t j = 0; j < seen; ++j)
            if (keys[j] == 0.0f) ai[j] = 0.0f;
        row /= row.sum();
        std::fill(ai + seen, ai + tk, 0.0f);
      }
      const float* used = a;  // the weights the values are summed with
      if (kept != nullptr) {
        RowArray(kept, square) =
            ConstRowArray(a, square) * ConstRowArray(dropout_mask_.data() + bh * square, square);
        used = kept;
      }
      gemm(false, false, tq, key_dim_, tk, 1.0f, used, tk, v_.data() + at_k, w, 0.0f,
           context_.data() + at_q, w);
    }
  }, 1);
  output.resize(query.shape());
  project(output_, context_.data(), n * tq, w, features_, output.data());
}

void MultiHeadAttention::run_back(const Tensor& query, const Tensor& value,
                                  const Tensor& grad_output, Tensor* grad_query,
                                  Tensor* grad_value, std::span<float> grads) {
  const std::int64_t n = query.dim(0), tq = steps_, tk = value_steps_, w = width_;
  const std::int64_t square = tq * tk;
  dcontext_.resize({n * tq, w});
  project_back(output_, context_.data(), grad_output.data(), n * tq, w, features_, grads,
               dcontext_.data(), 0.0f);
  dq_.resize({n * tq, w});
  dk_.resize({n * tk, w});
  dv_.resize({n * tk, w});
  const int threads = intra_op_threads();
  dweights_.resize({threads, square});
  if (dropped_) kept_.resize({threads, square});
  const float scale = 1.0f / std::sqrt(static_cast<float>(key_dim_));
  in_ranges(n * heads_, [&](std::int64_t first, std::int64_t count) {
    const int thread = intra_op_thread_index();
    float* da = dweights_.data() + thread * square;
    for (std::int64_t bh = first; bh < first + count; ++bh) {
      const std::int64_t example = bh / heads_, column = bh % heads_ * key_dim_;
      const std::int64_t at_q = example * tq * w + column, at_k = example * tk * w + column;
      const float* a = weights_.data() + bh * square;
      const float* dc = dcontext_.data() + at_q;
      // Through context = K V, K the kept weights (A, or A times the dropout mask):
      // dK = dC V^T, dV = K^T dC, and dA = dK times the mask.
      const float* used = a;
      const float* dropped = dropped_ ? dropout_mask_.data() + bh * square : nullptr;
      if (dropped != nullptr) {
        float* kept = kept_.data() + thread * square;
        RowArray(kept, square) = ConstRowArray(a, square) * ConstRowArray(dropped, square);
        used = kept;
      }
      gemm(false, true, tq, tk, key_dim_, 1.0f, dc, w, v_.data() + at_k, w, 0.0f, da, tk);
      gemm(true, false, tk, key_dim_, tq, 1.0f, used, tk, dc, w, 0.0f, dv_.data() + at_k, w);
      if (dropped != nullptr) RowArray(da, square) *= ConstRowArray(dropped, square);
      // Through each row's softmax: dS = A (dA - <dA, A>); masked entries have A = 0.
      for (std::int64_t i = 0; i < tq; ++i) {
        ConstRowArray ai(a + i * tk, tk);
        RowArray di(da + i * tk, tk);
        di = ai * (di - (di * ai).sum());
      }
      // Through S = scale Q K^T: dQ = scale dS K, dK = scale dS^T Q.
      gemm(false, false, tq, key_dim_, tk, scale, da, tk, k_.data() + at_k, w, 0.0f,
           dq_.data() + at_q, w);
      gemm(true, false, tk, key_dim_, tq, scale, da, tk, q_.data() + at_q, w, 0.0f,
           dk_.data() + at_k, w);
    }
  }, 1);
  float* dx_query = nullptr;
  if (grad_query != nullptr) {
    grad_query->resize(query.shape());
    dx_query = grad_query->data();
  }
  float* dx_value = nullptr;
  if (grad_value != nullptr) {
    grad_value->resize(value.shape());
    dx_value = grad_value->data();
  }
  // The key's input gradient is the first written into the value's, unless that is the query's.
  const float key_beta = grad_value == grad_query ? 1.0f : 0.0f;
  project_back(query_, query.data(), dq_.data(), n * tq, features_, w, grads, dx_query, 0.0f);
  project_back(key_, value.data(), dk_.data(), n * tk, value_features_, w, grads, dx_value,
               key_beta);
  project_back(value_, value.data(), dv_.data(), n * tk, value_features_, w, grads, dx_value,
               1.0f);
}

double MultiHeadAttention::flops_per_example() const {
  // Forward: four projections and two products per head; backward twice that.
  const double tq = static_cast<double>(steps_), tk = static_cast<double>(value_steps_);
  const double w = static_cast<double>(width_);
  const double projections =
      2.0 * w * (2.0 * tq * static_cast<double>(features_) +
                 2.0 * tk * static_cast<double>(value_features_));
  const double attention = 2.0 * 2.0 * tq * tk * w;
  return 3.0 * (projections + attention);
}

double MultiHeadAttention::input_grad_flops_per_example() const {
  return 2.0 * static_cast<double>(width_) *
         static_cast<double>(steps_ * features_ + 2 * value_steps_ * value_features_);
}

Shape PositionEmbedding::build(Graph& graph, const Shape& input) {
  if (input.size() != 2 || input[0] < 1 || input[1] < 1)
    throw InvalidArgument("PositionEmbedding \"" + name_ + "\": input " + to_string(input) +
                          " is not [steps, features]");
  graph_ = &graph;
  size_ = input[0] * input[1];
  offset_ = graph.get_variable(name_ + "/embeddings", input, Initializer::normal(0.02f)).offset;
  return input;
}

void PositionEmbedding::forward(const Tensor& input, Tensor& output, const OpContext&) {
  const std::int64_t n = input.dim(0);
  const float* table = graph_->values().data() + offset_;
  output.resize(input.shape());
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t i = 0; i < size_; ++i)
      output[b * size_ + i] = input[b * size_ + i] + table[i];
}

void PositionEmbedding::backward(const Tensor& input, const Tensor&, const Tensor& grad_output,
                                 Tensor* grad_input, std::span<float> grads) {
  const std::int64_t n = input.dim(0);
  bias_grad(grad_output.data(), n, size_, grads.data() + offset_);
  if (grad_input == nullptr) return;
  grad_input->resize(input.shape());
  std::copy_n(grad_output.data(), grad_output.size(), grad_input->data());
}

std::unique_ptr<Layer> multi_head_attention(std::string name, std::int64_t heads,
                                            std::int64_t key_dim, bool causal, float dropout) {
  return std::make_unique<MultiHeadAttention>(std::move(name), heads, key_dim, causal, dropout);
}

std::unique_ptr<Layer> cross_attention(std::string name, std::int64_t heads,
                                       std::int64_t key_dim, float dropout) {
  return std::make_unique<MultiHeadAttention>(std::move(name), heads, key_dim, false, dropout,
                                              true);
}

std::unique_ptr<Layer> position_embedding(std::string name) {
  return std::make_unique<PositionEmbedding>(std::move(name));
}

}  // namespace cohort
