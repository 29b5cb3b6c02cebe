#pragma once
// Portable random draws for the data pipeline (internal to core/data).
//
// std::mt19937_64's output sequence is fixed by the standard, but std::shuffle and the std::
// distributions are not: libstdc++ and libc++ give different results. Data order must not change
// with the standard library (a resumed job may run on another build), so the draws built on the
// engine are written out here.

#include <cstdint>
#include <random>

namespace cohort::data::detail {

/// SplitMix64's finaliser: spreads (seed, stream) pairs that differ in one bit over the whole
/// 64-bit seed space, so epoch e and e+1 start unrelated engines.
inline std::uint64_t mix_seed(std::uint64_t seed, std::uint64_t stream) {
  std::uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (stream + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// Uniform integer in [0, bound), bound > 0, without modulo bias (rejection of the short tail).
inline std::uint64_t uniform_below(std::mt19937_64& engine, std::uint64_t bound) {
  const std::uint64_t limit = -bound % bound;  // 2^64 mod bound: draws below it are rejected
  for (;;) {
    const std::uint64_t x = engine();
    if (x >= limit) return x % bound;
  }
}

/// Uniform float in [0, 1) from the top 24 bits of one draw (exactly representable).
inline float uniform_float(std::mt19937_64& engine) {
  return static_cast<float>(engine() >> 40) * (1.0f / 16777216.0f);
}

}  // namespace cohort::data::detail
