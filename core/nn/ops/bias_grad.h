#pragma once
// A bias: its broadcast onto the rows of an output, and its gradient, the column sums of the
// output's gradient (the shared tail of Dense's and Conv2D's backward pass, and the recurrent and
// attention layers'). Internal to the ops.

#include <algorithm>
#include <cstdint>

#include "cohort/core/nn/ops/simd.h"

namespace cohort::ops_detail {

/// Columns [c0, c0 + kBlocks * kLanes) of relu_and_bias_grad below, in one pass over the rows
/// with a running sum per vector of columns in a register.
template <int kBlocks>
inline void relu_and_bias_grad_columns(const float* __restrict dy, const float* __restrict y,
                                       float* __restrict dz, std::int64_t rows, std::int64_t cols,
                                       std::int64_t c0, bool relu, float* __restrict grad_bias,
                                       bool accumulate) {
  using simd::Floats;
  Floats sum[kBlocks] = {};
  for (std::int64_t r = 0; r < rows; ++r) {
    for (int j = 0; j < kBlocks; ++j) {
      const std::int64_t at = r * cols + c0 + j * simd::kLanes;
      Floats g = simd::at(dy + at);
      if (relu) {
        const Floats out = simd::at(y + at);
        g = out > 0.0f ? g : Floats{};
        simd::at(dz + at) = g;
      }
      sum[j] += g;
    }
  }
  for (int j = 0; j < kBlocks; ++j) {
    float* bias = grad_bias + c0 + j * simd::kLanes;
    if (accumulate) sum[j] += simd::at(bias);
    simd::at(bias) = sum[j];
  }
}

/// For a [rows, cols] row-major output gradient `dy`: when `relu`, writes dz = dy where the
/// activation's output y > 0, else 0 (dz = dy otherwise, and `dz` is not touched); and sets (or,
/// with `accumulate`, adds to) grad_bias the column sums of dz. The sums stay in registers (Eigen's
/// colwise().sum() on a row-major matrix walks each column with a stride), up to four vectors of
/// columns per pass over the rows: a convolution's 16 or 32 filters take one pass whatever the
/// vector width, where one pass per vector read each cache line of a tall output twice or four
/// times with AVX2's 8-float vectors.
inline void relu_and_bias_grad(const float* __restrict dy, const float* __restrict y,
                               float* __restrict dz, std::int64_t rows, std::int64_t cols,
                               bool relu, float* __restrict grad_bias, bool accumulate) {
  constexpr std::int64_t kWide = 4 * simd::kLanes;
  std::int64_t c0 = 0;
  for (; c0 + kWide <= cols; c0 += kWide)
    relu_and_bias_grad_columns<4>(dy, y, dz, rows, cols, c0, relu, grad_bias, accumulate);
  switch ((cols - c0) / simd::kLanes) {
    case 3: relu_and_bias_grad_columns<3>(dy, y, dz, rows, cols, c0, relu, grad_bias, accumulate);
            break;
    case 2: relu_and_bias_grad_columns<2>(dy, y, dz, rows, cols, c0, relu, grad_bias, accumulate);
            break;
    case 1: relu_and_bias_grad_columns<1>(dy, y, dz, rows, cols, c0, relu, grad_bias, accumulate);
            break;
    default: break;
  }
  c0 += (cols - c0) / simd::kLanes * simd::kLanes;
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

/// Each of the `rows` rows of `m` ([rows, cols], row-major) := `bias` [cols].
inline void broadcast_rows(const float* bias, std::int64_t rows, std::int64_t cols, float* m) {
  for (std::int64_t i = 0; i < rows; ++i) std::copy_n(bias, cols, m + i * cols);
}

/// grad_bias [cols] := the column sums of `dy` [rows, cols] (no activation).
inline void bias_grad(const float* dy, std::int64_t rows, std::int64_t cols, float* grad_bias) {
  relu_and_bias_grad(dy, nullptr, nullptr, rows, cols, /*relu=*/false, grad_bias,
                     /*accumulate=*/false);
}

}  // namespace cohort::ops_detail
