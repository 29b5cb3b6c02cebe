#pragma once
// Portable random draws for the data pipeline (internal to core/data).
//
// std::mt19937_64's output sequence is fixed by the standard, but std::shuffle and the std::
// distributions are not: libstdc++ and libc++ give different results. Data order must not change
// with the standard library (a resumed job may run on another build), so the draws built on the
// engine are written out here.

#include <algorithm>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

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

/// Keras's validation_split over n positions: which `validation` of them are held out, chosen by
/// a Fisher-Yates shuffle seeded with `seed` (the last `validation` positions of the shuffled
/// order). Image folders and Dataset::split choose alike.
inline std::vector<char> held_out(std::size_t n, std::size_t validation, std::uint64_t seed) {
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  std::mt19937_64 engine(mix_seed(seed, 0x7661));
  for (std::size_t i = n; i > 1; --i) std::swap(order[i - 1], order[uniform_below(engine, i)]);
  std::vector<char> held(n, 0);
  for (std::size_t i = n - std::min(validation, n); i < n; ++i) held[order[i]] = 1;
  return held;
}

}  // namespace cohort::data::detail
