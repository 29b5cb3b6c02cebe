#pragma once
// bfloat16: float32's sign, its 8 exponent bits and the top 7 of its 23 mantissa bits, the
// upper half of a float's bit pattern. Same range as float32, about 3 significant decimal
// digits; what gradients travel as when --compression=bf16. Values are carried as their bit
// patterns (std::uint16_t), which is also how MPI sees them.

#include <bit>
#include <cstdint>
#include <span>

namespace cohort::bf16 {

/// The nearest bfloat16, ties to even; NaN stays NaN (quiet), infinities stay infinite.
inline std::uint16_t from_float(float value) {
  const auto bits = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  const std::uint32_t quiet_nan = (bits >> 16) | 0x0040u;  // NaN keeps its sign, stays NaN
  // A select, not a branch, so that loops over arrays vectorise.
  return static_cast<std::uint16_t>((bits & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

/// Exact: every bfloat16 is a float32.
inline float to_float(std::uint16_t value) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(value) << 16);
}

/// out[i] = from_float(in[i]); the spans have the same size.
inline void from_float(std::span<const float> in, std::span<std::uint16_t> out) {
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = from_float(in[i]);
}

/// out[i] = to_float(in[i]); the spans have the same size.
inline void to_float(std::span<const std::uint16_t> in, std::span<float> out) {
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = to_float(in[i]);
}

}  // namespace cohort::bf16
