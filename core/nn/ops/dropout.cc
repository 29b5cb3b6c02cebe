#include <cmath>
#include <string>
#include <utility>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/ops/ops.h"
#include "cohort/core/nn/tensor_eigen.h"

namespace cohort {
namespace {

// SplitMix64's finaliser over a counter: a stateless generator, so element i's draw depends on
// nothing but (key, i) and any batch size or thread split gives the same mask.
inline std::uint64_t mix(std::uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

void dropout_mask(std::uint64_t key, float rate, std::span<float> mask) {
  // Keep an element when its 24-bit uniform draw is >= floor(rate * 2^24).
  const auto threshold = static_cast<std::uint64_t>(static_cast<double>(rate) * (1 << 24));
  const float scale = 1.0f / (1.0f - rate);
  for (std::size_t i = 0; i < mask.size(); ++i) {
    const std::uint64_t draw =
        mix(key + static_cast<std::uint64_t>(i) * 0x9e3779b97f4a7c15ull) >> 40;
    mask[i] = draw >= threshold ? scale : 0.0f;
  }
}

void normal_noise(std::uint64_t key, std::span<float> noise) {
  // Box-Muller on two 53-bit uniform draws per element, u1 in (0, 1] so that its log is finite.
  constexpr double kUnit = 1.0 / 9007199254740992.0;  // 2^-53
  constexpr double kTwoPi = 6.283185307179586;
  for (std::size_t i = 0; i < noise.size(); ++i) {
    const std::uint64_t at = key + static_cast<std::uint64_t>(i) * 0x9e3779b97f4a7c15ull;
    const double u1 = static_cast<double>((mix(at) >> 11) + 1) * kUnit;
    const double u2 = static_cast<double>(mix(at ^ 0xd1b54a32d192ed03ull) >> 11) * kUnit;
    noise[i] = static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2));
  }
}

Dropout::Dropout(std::string name, float rate)
    : name_(std::move(name)), rate_(rate) {
  if (!(rate >= 0.0f && rate < 1.0f))
    throw InvalidArgument("Dropout \"" + name_ + "\": rate = " + std::to_string(rate) +
                          ", must be in [0, 1)");
}

Shape Dropout::build(Graph&, const Shape& input) {
  size_ = num_elements(input);
  return input;
}

void Dropout::forward(const Tensor& input, Tensor& output, const OpContext& context) {
  output.resize(input.shape());
  last_training_ = context.training;
  if (!context.training) {
    flat(output) = flat(input);
    return;
  }
  mask_.resize(input.shape());
  dropout_mask(Graph::variable_seed(context.seed, name_), rate_, mask_.span());
  flat(output) = flat(input).cwiseProduct(flat(mask_));
}

void Dropout::backward(const Tensor&, const Tensor&, const Tensor& grad_output,
                       Tensor* grad_input, std::span<float>) {
  if (grad_input == nullptr) return;
  grad_input->resize(grad_output.shape());
  if (last_training_)
    flat(*grad_input) = flat(grad_output).cwiseProduct(flat(mask_));
  else
    flat(*grad_input) = flat(grad_output);
}

GaussianNoise::GaussianNoise(std::string name, float stddev) : name_(std::move(name)), stddev_(stddev) {
  if (!(stddev >= 0.0f && std::isfinite(stddev)))
    throw InvalidArgument("GaussianNoise \"" + name_ + "\": stddev = " + std::to_string(stddev) +
                          ", must be finite and >= 0");
}

Shape GaussianNoise::build(Graph&, const Shape& input) {
  size_ = num_elements(input);
  return input;
}

void GaussianNoise::forward(const Tensor& input, Tensor& output, const OpContext& context) {
  output.resize(input.shape());
  if (!context.training || stddev_ == 0.0f) {
    flat(output) = flat(input);
    return;
  }
  normal_noise(Graph::variable_seed(context.seed, name_), output.span());
  flat(output) = flat(input) + stddev_ * flat(output);
}

void GaussianNoise::backward(const Tensor&, const Tensor&, const Tensor& grad_output,
                             Tensor* grad_input, std::span<float>) {
  if (grad_input == nullptr) return;
  grad_input->resize(grad_output.shape());
  flat(*grad_input) = flat(grad_output);
}

}  // namespace cohort
