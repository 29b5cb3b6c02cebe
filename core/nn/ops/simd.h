#pragma once
// Float and int32 vectors of one register's width for the ops' elementwise loops, as GCC/Clang
// vector extensions: 16 lanes where the target has AVX-512, 8 otherwise (one AVX register, or two
// SSE ones). The compiler keeps blends and running sums in registers, where plain loops get
// unrolled to scalars or vectorised with masked stores behind branches. One register per vector
// matters most on AVX2's 16 registers: a Winograd tile row of six 16-float vectors spilled there
// (2x slower small convolutions). Internal to the ops.

#include <cstdint>

namespace cohort::simd {

#if defined(__AVX512F__)
constexpr std::int32_t kLanes = 16;
#else
constexpr std::int32_t kLanes = 8;
#endif
using Floats = float __attribute__((vector_size(kLanes * sizeof(float))));
using Ints = std::int32_t __attribute__((vector_size(kLanes * sizeof(std::int32_t))));
/// 0, 1, ..., kLanes - 1.
#if defined(__AVX512F__)
constexpr Ints kIota = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
#else
constexpr Ints kIota = {0, 1, 2, 3, 4, 5, 6, 7};
#endif

// The same vectors at any float alignment, allowed to alias the arrays they overlay.
using FloatsAt = float __attribute__((vector_size(kLanes * sizeof(float)), aligned(4), may_alias));
using IntsAt =
    std::int32_t __attribute__((vector_size(kLanes * sizeof(std::int32_t)), aligned(4), may_alias));

/// The kLanes values at p, to read or assign (unaligned). References rather than values: a vector
/// passed by value trips GCC's ABI note (-Wpsabi) when AVX-512 is off.
inline FloatsAt& at(float* p) { return *reinterpret_cast<FloatsAt*>(p); }
inline const FloatsAt& at(const float* p) { return *reinterpret_cast<const FloatsAt*>(p); }
inline IntsAt& at(std::int32_t* p) { return *reinterpret_cast<IntsAt*>(p); }
inline const IntsAt& at(const std::int32_t* p) { return *reinterpret_cast<const IntsAt*>(p); }

}  // namespace cohort::simd
