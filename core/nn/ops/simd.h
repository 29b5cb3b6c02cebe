#pragma once
// 16-lane float and int32 vectors for the ops' elementwise loops, as GCC/Clang vector
// extensions: the compiler lowers them to the target's vector unit (one AVX-512 register, two AVX
// or four SSE ones) and keeps blends and running sums in registers, where plain loops over 16
// elements get unrolled to scalars or vectorised with masked stores behind branches. Internal to
// the ops.

#include <cstdint>

namespace cohort::simd {

constexpr std::int32_t kLanes = 16;
using Floats = float __attribute__((vector_size(kLanes * sizeof(float))));
using Ints = std::int32_t __attribute__((vector_size(kLanes * sizeof(std::int32_t))));
/// 0, 1, ..., 15.
constexpr Ints kIota = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

// The same vectors at any float alignment, allowed to alias the arrays they overlay.
using FloatsAt = float __attribute__((vector_size(kLanes * sizeof(float)), aligned(4), may_alias));
using IntsAt =
    std::int32_t __attribute__((vector_size(kLanes * sizeof(std::int32_t)), aligned(4), may_alias));

/// The 16 values at p, to read or assign (unaligned). References rather than values: a vector
/// passed by value trips GCC's ABI note (-Wpsabi) when AVX-512 is off.
inline FloatsAt& at(float* p) { return *reinterpret_cast<FloatsAt*>(p); }
inline const FloatsAt& at(const float* p) { return *reinterpret_cast<const FloatsAt*>(p); }
inline IntsAt& at(std::int32_t* p) { return *reinterpret_cast<IntsAt*>(p); }
inline const IntsAt& at(const std::int32_t* p) { return *reinterpret_cast<const IntsAt*>(p); }

}  // namespace cohort::simd
