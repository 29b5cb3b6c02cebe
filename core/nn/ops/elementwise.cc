#include "cohort/core/nn/ops/elementwise.h"

#include <Eigen/Core>
#include <unsupported/Eigen/SpecialFunctions>  // Array::erf(), vectorised

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/ops/ops.h"
#include "cohort/core/nn/ops/simd.h"
#include "cohort/core/nn/tensor_eigen.h"

namespace cohort {
namespace {

using RowArray = Eigen::Map<Eigen::ArrayXf>;
using ConstRowArray = Eigen::Map<const Eigen::ArrayXf>;

constexpr float kSqrtHalf = 0.70710678118654752440f;       // 1 / sqrt(2)
constexpr float kInvSqrtTwoPi = 0.39894228040143267794f;   // 1 / sqrt(2 pi)

const char* kind_name(ElementwiseActivation::Kind kind) {
  switch (kind) {
    case ElementwiseActivation::Kind::kLeakyRelu: return "LeakyReLU";
    case ElementwiseActivation::Kind::kSigmoid: return "Sigmoid";
    case ElementwiseActivation::Kind::kTanh: return "Tanh";
    case ElementwiseActivation::Kind::kGelu: return "GELU";
    case ElementwiseActivation::Kind::kSoftmax: return "Softmax";
    case ElementwiseActivation::Kind::kSilu: return "SiLU";
    case ElementwiseActivation::Kind::kSoftplus: return "Softplus";
    case ElementwiseActivation::Kind::kElu: return "ELU";
  }
  return "ElementwiseActivation";
}

// Eigen 3.4's select() has no packet path: an expression that holds one runs a float at a time,
// its exp() and expm1() included. The activations below are written without it: branch-free in
// Eigen (max, min and abs vectorise, as do exp(), log1p() and expm1()), or, where a side must be
// chosen, through blend().

// f(out[i], x[i], y[i], dy[i]) over n floats, f generic over float and simd::Floats: on GCC's
// vectors a comparison and ?: make one blend, a vector at a time. (Vectors by reference, as in
// simd.h, not returned by value.)
template <typename F>
void blend(const float* x, const float* y, const float* dy, float* out, std::int64_t n, F&& f) {
  std::int64_t i = 0;
  for (; i + simd::kLanes <= n; i += simd::kLanes) {
    const simd::Floats xv = simd::at(x + i), yv = simd::at(y + i), dyv = simd::at(dy + i);
    simd::Floats result;
    f(result, xv, yv, dyv);
    simd::at(out + i) = result;
  }
  for (; i < n; ++i) f(out[i], x[i], y[i], dy[i]);
}

// Runs f(begin, count) over [0, n) in chunks of a few KB: what f computes into the output for a
// chunk (a sigmoid) is still in L1 when its next expression reads it back.
template <typename F>
void in_chunks(std::int64_t n, F&& f) {
  constexpr std::int64_t kChunk = 2048;
  for (std::int64_t i = 0; i < n; i += kChunk) f(i, std::min(kChunk, n - i));
}

}  // namespace

ElementwiseActivation::ElementwiseActivation(std::string name, Kind kind, float alpha)
    : name_(std::move(name)), kind_(kind), alpha_(alpha) {}

Shape ElementwiseActivation::build(Graph&, const Shape& input) {
  if (kind_ == Kind::kSoftmax && (input.empty() || input.back() < 1))
    throw InvalidArgument(std::string(kind_name(kind_)) + " \"" + name_ + "\": input " +
                          to_string(input) + " has no last axis to normalise over");
  size_ = num_elements(input);
  last_ = input.empty() ? 1 : input.back();
  return input;
}

void ElementwiseActivation::forward(const Tensor& input, Tensor& output, const OpContext&) {
  output.resize(input.shape());
  const auto x = flat(input).array();
  auto y = flat(output).array();
  switch (kind_) {
    case Kind::kLeakyRelu: {
      const float alpha = alpha_;
      blend(input.data(), input.data(), input.data(), output.data(), input.size(),
            [alpha](auto& y_i, const auto& x_i, const auto&, const auto&) {
              y_i = x_i > 0.0f ? x_i : alpha * x_i;
            });
      break;
    }
    case Kind::kSigmoid:
      // 1 / (1 + e^-x) is as exact as its exp() on either side of 0: far below it, e^-x grows
      // to inf and the quotient to 0, never NaN.
      y = (1.0f + (-x).exp()).inverse();
      break;
    case Kind::kSilu:
      y = x / (1.0f + (-x).exp());
      break;
    case Kind::kSoftplus:
      // log(1 + e^x) = max(x, 0) + log1p(e^-|x|): no overflow for large x.
      y = x.max(0.0f) + (-x.abs()).exp().log1p();
      break;
    case Kind::kElu:
      // One of the two terms is 0: x above 0, alpha (e^x - 1) at or below it.
      y = x.max(0.0f) + alpha_ * x.min(0.0f).expm1();
      break;
    case Kind::kTanh:
      y = x.tanh();
      break;
    case Kind::kGelu:
      y = 0.5f * x * (1.0f + (x * kSqrtHalf).erf());
      break;
    case Kind::kSoftmax: {
      const std::int64_t rows = input.size() / last_;
      for (std::int64_t r = 0; r < rows; ++r) {
        ConstRowArray xr(input.data() + r * last_, last_);
        RowArray yr(output.data() + r * last_, last_);
        // Shifted by the row max, every exponent is <= 0: no overflow, and the sum is >= 1.
        yr = (xr - xr.maxCoeff()).exp();
        yr *= 1.0f / yr.sum();
      }
      break;
    }
  }
}

void ElementwiseActivation::backward(const Tensor& input, const Tensor& output,
                                     const Tensor& grad_output, Tensor* grad_input,
                                     std::span<float>) {
  if (grad_input == nullptr) return;
  grad_input->resize(input.shape());
  const auto x = flat(input).array();
  const auto y = flat(output).array();
  const auto dy = flat(grad_output).array();
  auto dx = flat(*grad_input).array();
  switch (kind_) {
    case Kind::kLeakyRelu: {
      // From the input: with alpha <= 0 the output's sign does not tell the side.
      const float alpha = alpha_;
      blend(input.data(), output.data(), grad_output.data(), grad_input->data(), input.size(),
            [alpha](auto& dx_i, const auto& x_i, const auto&, const auto& dy_i) {
              dx_i = x_i > 0.0f ? dy_i : alpha * dy_i;
            });
      break;
    }
    case Kind::kSigmoid:
      dx = dy * y * (1.0f - y);
      break;
    case Kind::kSilu:
      // d/dx [x s(x)] = s(x) (1 + x (1 - s(x))), s the sigmoid, from the input: s computed once
      // into dx, chunk by chunk, then read back from L1.
      in_chunks(input.size(), [&](std::int64_t i, std::int64_t n) {
        auto s = dx.segment(i, n);
        const auto xs = x.segment(i, n);
        s = (1.0f + (-xs).exp()).inverse();
        s = dy.segment(i, n) * s * (1.0f + xs * (1.0f - s));
      });
      break;
    case Kind::kSoftplus:
      dx = dy / (1.0f + (-x).exp());  // the sigmoid
      break;
    case Kind::kElu: {
      // Below 0, alpha e^x = y + alpha.
      const float alpha = alpha_;
      blend(input.data(), output.data(), grad_output.data(), grad_input->data(), input.size(),
            [alpha](auto& dx_i, const auto& x_i, const auto& y_i, const auto& dy_i) {
              dx_i = x_i > 0.0f ? dy_i : dy_i * (y_i + alpha);
            });
      break;
    }
    case Kind::kTanh:
      dx = dy * (1.0f - y.square());
      break;
    case Kind::kGelu:
      // d/dx [x Phi(x)] = Phi(x) + x phi(x).
      dx = dy * (0.5f * (1.0f + (x * kSqrtHalf).erf()) +
                 x * kInvSqrtTwoPi * (-0.5f * x.square()).exp());
      break;
    case Kind::kSoftmax: {
      const std::int64_t rows = input.size() / last_;
      for (std::int64_t r = 0; r < rows; ++r) {
        ConstRowArray yr(output.data() + r * last_, last_);
        ConstRowArray dyr(grad_output.data() + r * last_, last_);
        RowArray dxr(grad_input->data() + r * last_, last_);
        const float dot = (dyr * yr).sum();
        dxr = yr * (dyr - dot);
      }
      break;
    }
  }
}

double ElementwiseActivation::flops_per_example() const {
  // Forward and backward per element, a transcendental function counted as one.
  double per_element = 0.0;
  switch (kind_) {
    case Kind::kLeakyRelu: per_element = 4.0; break;
    case Kind::kSigmoid: per_element = 8.0; break;
    case Kind::kTanh: per_element = 4.0; break;
    case Kind::kGelu: per_element = 14.0; break;
    case Kind::kSoftmax: per_element = 8.0; break;
    case Kind::kSilu: per_element = 12.0; break;
    case Kind::kSoftplus: per_element = 10.0; break;
    case Kind::kElu: per_element = 4.0; break;
  }
  return per_element * static_cast<double>(size_);
}

Shape Reshape::build(Graph&, const Shape& input) {
  const std::int64_t count = num_elements(input);
  std::int64_t known = 1;
  int free_dims = 0;
  for (std::int64_t d : target_) {
    if (d == -1) {
      ++free_dims;
    } else if (d < 1) {
      throw InvalidArgument("Reshape \"" + name_ + "\": target " + to_string(target_) +
                            " has a dimension < 1 other than -1");
    } else {
      known *= d;
    }
  }
  if (free_dims > 1)
    throw InvalidArgument("Reshape \"" + name_ + "\": target " + to_string(target_) +
                          " has more than one -1");
  if ((free_dims == 0 && known != count) || (free_dims == 1 && count % known != 0))
    throw InvalidArgument("Reshape \"" + name_ + "\": input " + to_string(input) + " (" +
                          std::to_string(count) + " elements) cannot become " +
                          to_string(target_));
  output_ = target_;
  for (std::int64_t& d : output_)
    if (d == -1) d = count / known;
  batch_output_.assign(output_.size() + 1, 0);
  std::copy(output_.begin(), output_.end(), batch_output_.begin() + 1);
  return output_;
}

// Tensors own their storage, so the reshape is a copy (one pass over the activation).
void Reshape::forward(const Tensor& input, Tensor& output, const OpContext&) {
  batch_output_[0] = input.dim(0);
  output.resize(batch_output_);
  if (output.size() != input.size())
    throw InvalidArgument("Reshape \"" + name_ + "\": input " + to_string(input.shape()) +
                          " is not a batch of the examples it was built for");
  flat(output) = flat(input);
}

void Reshape::backward(const Tensor& input, const Tensor&, const Tensor& grad_output,
                       Tensor* grad_input, std::span<float>) {
  if (grad_input == nullptr) return;
  grad_input->resize(input.shape());
  flat(*grad_input) = flat(grad_output);
}

std::unique_ptr<Layer> activation(std::string name, const std::string& function, float alpha) {
  using Kind = ElementwiseActivation::Kind;
  Kind kind;
  if (function == "relu") return relu(std::move(name));
  if (function == "leaky_relu") {
    kind = Kind::kLeakyRelu;
    if (std::isnan(alpha)) alpha = 0.2f;
  } else if (function == "elu") {
    kind = Kind::kElu;
    if (std::isnan(alpha)) alpha = 1.0f;
  } else if (function == "silu" || function == "swish") {
    kind = Kind::kSilu;
  } else if (function == "softplus") {
    kind = Kind::kSoftplus;
  } else if (function == "sigmoid") {
    kind = Kind::kSigmoid;
  } else if (function == "tanh") {
    kind = Kind::kTanh;
  } else if (function == "gelu") {
    kind = Kind::kGelu;
  } else if (function == "softmax") {
    kind = Kind::kSoftmax;
  } else {
    throw InvalidArgument("activation \"" + name + "\": unknown function \"" + function +
                          "\" (known: relu, leaky_relu, sigmoid, tanh, gelu, softmax, silu or "
                          "swish, softplus, elu)");
  }
  return std::make_unique<ElementwiseActivation>(std::move(name), kind, alpha);
}

std::unique_ptr<Layer> reshape(std::string name, Shape shape) {
  return std::make_unique<Reshape>(std::move(name), std::move(shape));
}

}  // namespace cohort
