#pragma once
// Variable initializers.

#include <cstdint>
#include <span>

#include "cohort/core/tensor.h"

namespace cohort {

/// How a variable's first values are drawn. fan_in/fan_out are read off the shape: for a
/// [in, out] kernel they are in and out; for an HWIO filter, h*w*i and h*w*o.
struct Initializer {
  enum class Kind { kZeros, kConstant, kGlorotUniform, kHeNormal, kNormal };
  Kind kind = Kind::kZeros;
  float value = 0.0f;  // kConstant: the value; kNormal: the standard deviation

  static Initializer zeros() { return {Kind::kZeros, 0.0f}; }
  static Initializer constant(float v) { return {Kind::kConstant, v}; }
  static Initializer glorot_uniform() { return {Kind::kGlorotUniform, 0.0f}; }
  static Initializer he_normal() { return {Kind::kHeNormal, 0.0f}; }
  static Initializer normal(float stddev) { return {Kind::kNormal, stddev}; }

  /// Fills `out` (a variable of shape `shape`) deterministically from `seed`.
  void fill(const Shape& shape, std::uint64_t seed, std::span<float> out) const;
};

}  // namespace cohort
