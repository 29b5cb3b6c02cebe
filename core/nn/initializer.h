#pragma once
// Variable initializers.

#include <cstdint>
#include <span>

#include "cohort/core/nn/tensor.h"

namespace cohort {

/// Fan-in and fan-out of a variable, read off its shape as Keras does: a scalar has 1 and 1; a
/// rank-1 [n] has n and n; a rank-2 [in, out] kernel has in and out; higher ranks (HWIO filters)
/// have receptive field * in and receptive field * out, the receptive field being the product of
/// all but the last two dimensions (h*w*i and h*w*o for HWIO).
struct Fans {
  std::int64_t in = 1;
  std::int64_t out = 1;
};
Fans compute_fans(const Shape& shape);

/// How a variable's first values are drawn. A small value type; fill() is const and thread-safe.
struct Initializer {
  enum class Kind { kZeros, kConstant, kGlorotUniform, kHeNormal, kNormal, kOrthogonal };
  Kind kind = Kind::kZeros;
  float value = 0.0f;  // kConstant: the value; kNormal: the standard deviation; kOrthogonal: gain

  static Initializer zeros() { return {Kind::kZeros, 0.0f}; }
  static Initializer constant(float v) { return {Kind::kConstant, v}; }
  /// Uniform on [-limit, limit), limit = sqrt(6 / (fan_in + fan_out)).
  static Initializer glorot_uniform() { return {Kind::kGlorotUniform, 0.0f}; }
  /// Normal with mean 0 and stddev sqrt(2 / fan_in) (He et al. 2015; not truncated, unlike
  /// Keras's he_normal).
  static Initializer he_normal() { return {Kind::kHeNormal, 0.0f}; }
  /// Normal with mean 0 and the given standard deviation.
  static Initializer normal(float stddev) { return {Kind::kNormal, stddev}; }
  /// A (semi-)orthogonal matrix times `gain` (Saxe et al. 2014; Keras's Orthogonal, the default
  /// of its recurrent kernels): the variable read as [all but the last dimension, last], its
  /// rows orthonormal where there are no more rows than columns, its columns otherwise; the Q of
  /// the QR decomposition of a normal matrix, with R's diagonal made positive.
  static Initializer orthogonal(float gain = 1.0f) { return {Kind::kOrthogonal, gain}; }

  /// Fills `out` (a variable of shape `shape`) deterministically from `seed`: the same seed gives
  /// the same values with every compiler and standard library (std::mt19937_64, whose sequence
  /// the standard fixes, mapped to uniforms and normals by our own code; only libm's log, sin and
  /// cos rounding can differ). Throws InvalidArgument when out.size() is not the shape's number
  /// of elements or a normal stddev is negative.
  void fill(const Shape& shape, std::uint64_t seed, std::span<float> out) const;

  friend bool operator==(const Initializer&, const Initializer&) = default;
};

}  // namespace cohort
