#pragma once
// The shared tail of Dense's and Conv2D's backward pass. Internal to the ops.

#include <cstdint>

#include "cohort/core/nn/ops/simd.h"

namespace cohort::ops_detail {

/// For a [rows, cols] row-major output gradient `dy`: when `relu`, writes dz = dy where the
/// activation's output y > 0, else 0 (dz = dy otherwise, and `dz` is not touched); and sets (or,
/// with `accumulate`, adds to) grad_bias the column sums of dz. One pass over the data, 16
/// columns at a time with the sums in a register (Eigen's colwise().sum() on a row-major matrix
/// walks each column with a stride).
inline void relu_and_bias_grad(const float* __restrict dy, const float* __restrict y,
                               float* __restrict dz, std::int64_t rows, std::int64_t cols,
                               bool relu, float* __restrict grad_bias, bool accumulate) {
  using simd::Floats;
  std::int64_t c0 = 0;
  for (; c0 + simd::kLanes <= cols; c0 += simd::kLanes) {
    Floats sum = {};
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t at = r * cols + c0;
      Floats g = simd::at(dy + at);
      if (relu) {
        const Floats out = simd::at(y + at);
        g = out > 0.0f ? g : Floats{};
        simd::at(dz + at) = g;
      }
      sum += g;
    }
    if (accumulate) sum += simd::at(grad_bias + c0);
    simd::at(grad_bias + c0) = sum;
  }
  for (std::int64_t c = c0; c < cols; ++c) {  // the last cols % kLanes columns
    float sum = 0.0f;
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t at = r * cols + c;
      const float g = !relu || y[at] > 0.0f ? dy[at] : 0.0f;
      if (relu) dz[at] = g;
      sum += g;
    }
    grad_bias[c] = accumulate ? grad_bias[c] + sum : sum;
  }
}

}  // namespace cohort::ops_detail
