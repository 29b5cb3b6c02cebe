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
                                       bool causal, float dropout)
    : name_(std::move(name)),
      heads_(heads),
      requested_key_dim_(key_dim),
      causal_(causal),
      dropout_(dropout) {
  if (!(dropout >= 0.0f && dropout < 1.0f))
    throw InvalidArgument("MultiHeadAttention \"" + name_ + "\": dropout " +
                          std::to_string(dropout) + ", must be in [0, 1)");
  if (heads_ < 1 || key_dim < 0)
    throw InvalidArgument("MultiHeadAttention \"" + name_ + "\": heads " + std::to_string(heads_) +
                          ", key_dim " + std::to_string(key_dim) +
                          ": heads must be >= 1 and key_dim >= 1 (or 0: features / heads)");
}

Shape MultiHeadAttention::build(Graph& graph, const Shape& input) {
  const std::string what = "MultiHeadAttention \"" + name_ + "\": input " + to_string(input);
  if (input.size() != 2 || input[0] < 1 || input[1] < 1)
    throw InvalidArgument(what + " is not [steps, features]");
  steps_ = input[0];
  features_ = input[1];
  key_dim_ = requested_key_dim_;
  if (key_dim_ == 0) {
    if (features_ % heads_ != 0)
      throw InvalidArgument(what + ": " + std::to_string(features_) + " features do not split " +
                            "into " + std::to_string(heads_) + " heads; give key_dim");
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
  key_ = projection("key", features_, width_);
  value_ = projection("value", features_, width_);
  output_ = projection("attention_output", width_, features_);
  return input;
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

// Rows of the batch are (example, step); a head's queries, keys, values and results are the
// key_dim columns from head * key_dim of those rows, read in place with a row stride of width.
void MultiHeadAttention::forward(const Tensor& input, Tensor& output, const OpContext& context) {
  const std::int64_t n = input.dim(0), t_count = steps_, rows = n * t_count, w = width_;
  const std::int64_t square = t_count * t_count;
  q_.resize({rows, w});
  k_.resize({rows, w});
  v_.resize({rows, w});
  project(query_, input.data(), rows, features_, w, q_.data());
  project(key_, input.data(), rows, features_, w, k_.data());
  project(value_, input.data(), rows, features_, w, v_.data());
  weights_.resize({n, heads_, t_count, t_count});
  context_.resize({rows, w});
  dropped_ = context.training && dropout_ > 0.0f;
  if (dropped_) {
    mask_.resize(weights_.shape());
    dropout_mask(Graph::variable_seed(context.seed, name_), dropout_, mask_.span());
    kept_.resize({intra_op_threads(), square});
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(key_dim_));
  in_ranges(n * heads_, [&](std::int64_t first, std::int64_t count) {
    float* kept = dropped_ ? kept_.data() + intra_op_thread_index() * square : nullptr;
    for (std::int64_t bh = first; bh < first + count; ++bh) {
      const std::int64_t at = bh / heads_ * t_count * w + bh % heads_ * key_dim_;
      float* a = weights_.data() + bh * square;
      gemm(false, true, t_count, t_count, key_dim_, scale, q_.data() + at, w, k_.data() + at, w,
           0.0f, a, t_count);
      const float* keys = mask() != nullptr ? mask()->data() + bh / heads_ * t_count : nullptr;
      for (std::int64_t i = 0; i < t_count; ++i) {
        // Each row's softmax over the steps it sees, vectorised; the others weigh 0.
        const std::int64_t seen = causal_ ? i + 1 : t_count;
        float* ai = a + i * t_count;
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
            std::fill_n(ai, t_count, 0.0f);
            continue;
          }
        }
        RowArray row(ai, seen);
        row = (row - row.maxCoeff()).exp();
        row /= row.sum();
        std::fill(a + i * t_count + seen, a + (i + 1) * t_count, 0.0f);
      }
      const float* used = a;  // the weights the values are summed with
      if (kept != nullptr) {
        RowArray(kept, square) =
            ConstRowArray(a, square) * ConstRowArray(mask_.data() + bh * square, square);
        used = kept;
      }
      gemm(false, false, t_count, key_dim_, t_count, 1.0f, used, t_count, v_.data() + at, w, 0.0f,
           context_.data() + at, w);
    }
  }, 1);
  output.resize(input.shape());
  project(output_, context_.data(), rows, w, features_, output.data());
}

void MultiHeadAttention::backward(const Tensor& input, const Tensor&, const Tensor& grad_output,
                                  Tensor* grad_input, std::span<float> grads) {
  const std::int64_t n = input.dim(0), t_count = steps_, rows = n * t_count, w = width_;
  const std::int64_t square = t_count * t_count;
  dcontext_.resize({rows, w});
  project_back(output_, context_.data(), grad_output.data(), rows, w, features_, grads,
               dcontext_.data(), 0.0f);
  dq_.resize({rows, w});
  dk_.resize({rows, w});
  dv_.resize({rows, w});
  const int threads = intra_op_threads();
  dweights_.resize({threads, square});
  if (dropped_) kept_.resize({threads, square});
  const float scale = 1.0f / std::sqrt(static_cast<float>(key_dim_));
  in_ranges(n * heads_, [&](std::int64_t first, std::int64_t count) {
    const int thread = intra_op_thread_index();
    float* da = dweights_.data() + thread * square;
    for (std::int64_t bh = first; bh < first + count; ++bh) {
      const std::int64_t at = bh / heads_ * t_count * w + bh % heads_ * key_dim_;
      const float* a = weights_.data() + bh * square;
      const float* dc = dcontext_.data() + at;
      // Through context = K V, K the kept weights (A, or A times the dropout mask):
      // dK = dC V^T, dV = K^T dC, and dA = dK times the mask.
      const float* used = a;
      const float* mask = dropped_ ? mask_.data() + bh * square : nullptr;
      if (mask != nullptr) {
        float* kept = kept_.data() + thread * square;
        RowArray(kept, square) = ConstRowArray(a, square) * ConstRowArray(mask, square);
        used = kept;
      }
      gemm(false, true, t_count, t_count, key_dim_, 1.0f, dc, w, v_.data() + at, w, 0.0f, da,
           t_count);
      gemm(true, false, t_count, key_dim_, t_count, 1.0f, used, t_count, dc, w, 0.0f,
           dv_.data() + at, w);
      if (mask != nullptr) RowArray(da, square) *= ConstRowArray(mask, square);
      // Through each row's softmax: dS = A (dA - <dA, A>); masked entries have A = 0.
      for (std::int64_t i = 0; i < t_count; ++i) {
        ConstRowArray ai(a + i * t_count, t_count);
        RowArray di(da + i * t_count, t_count);
        di = ai * (di - (di * ai).sum());
      }
      // Through S = scale Q K^T: dQ = scale dS K, dK = scale dS^T Q.
      gemm(false, false, t_count, key_dim_, t_count, scale, da, t_count, k_.data() + at, w, 0.0f,
           dq_.data() + at, w);
      gemm(true, false, t_count, key_dim_, t_count, scale, da, t_count, q_.data() + at, w, 0.0f,
           dk_.data() + at, w);
    }
  }, 1);
  float* dx = nullptr;
  if (grad_input != nullptr) {
    grad_input->resize(input.shape());
    dx = grad_input->data();
  }
  project_back(query_, input.data(), dq_.data(), rows, features_, w, grads, dx, 0.0f);
  project_back(key_, input.data(), dk_.data(), rows, features_, w, grads, dx, 1.0f);
  project_back(value_, input.data(), dv_.data(), rows, features_, w, grads, dx, 1.0f);
}

double MultiHeadAttention::flops_per_example() const {
  // Forward: four projections and two products per head; backward twice that.
  const double t = static_cast<double>(steps_), w = static_cast<double>(width_);
  const double projections = 4.0 * 2.0 * t * static_cast<double>(features_) * w;
  const double attention = 2.0 * 2.0 * t * t * w;
  return 3.0 * (projections + attention);
}

double MultiHeadAttention::input_grad_flops_per_example() const {
  return 3.0 * 2.0 * static_cast<double>(steps_ * features_ * width_);
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

std::unique_ptr<Layer> position_embedding(std::string name) {
  return std::make_unique<PositionEmbedding>(std::move(name));
}

}  // namespace cohort
