#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/ops/ops.h"
#include "cohort/core/nn/ops/simd.h"
#include "cohort/core/nn/threads.h"

namespace cohort {
namespace {

using simd::Floats;
using simd::Ints;
using simd::kIota;
constexpr std::int32_t kBlock = simd::kLanes;  // channels per step, max and argmax in registers

}  // namespace

MaxPool2D::MaxPool2D(std::string name, std::int64_t window, std::int64_t stride, Padding padding)
    : MaxPool2D(std::move(name), window, window, stride, stride, padding) {}

MaxPool2D::MaxPool2D(std::string name, std::int64_t window_h, std::int64_t window_w,
                     std::int64_t stride_h, std::int64_t stride_w, Padding padding)
    : Pool2D("MaxPool2D", std::move(name), window_h, window_w, stride_h, stride_w, padding) {}

Shape MaxPool2D::build(Graph& graph, const Shape& input) {
  Shape output = Pool2D::build(graph, input);
  if (num_elements(input) > std::numeric_limits<std::int32_t>::max())
    throw InvalidArgument(what() + ": input " + to_string(input) +
                          " is too large (argmax offsets are 32-bit)");
  return output;
}

void MaxPool2D::forward(const Tensor& input, Tensor& output, const OpContext&) {
  const std::int64_t n = input.dim(0), c = channels_;
  const std::int64_t in_size = in_h_ * in_w_ * c;
  const std::int64_t out_size = dim_h_.out * dim_w_.out * c;
  output.resize({n, dim_h_.out, dim_w_.out, c});
  argmax_.resize(static_cast<std::size_t>(n * out_size));
  const int threads = static_cast<int>(std::min<std::int64_t>(intra_op_threads(), n));
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (std::int64_t b = 0; b < n; ++b) {
    const float* in = input.data() + b * in_size;
    float* out = output.data() + b * out_size;
    std::int32_t* arg = argmax_.data() + b * out_size;
    for (std::int64_t oh = 0; oh < dim_h_.out; ++oh) {
      const auto [ih_lo, ih_hi] = rows(oh);
      for (std::int64_t ow = 0; ow < dim_w_.out; ++ow) {
        const auto [iw_lo, iw_hi] = cols(ow);
        float* o = out + (oh * dim_w_.out + ow) * c;
        std::int32_t* a = arg + (oh * dim_w_.out + ow) * c;
        // Padding never wins: the first in-range pixel (every window has one) seeds the max.
        const auto first = static_cast<std::int32_t>((ih_lo * in_w_ + iw_lo) * c);
        std::int32_t k0 = 0;
        for (; k0 + kBlock <= c; k0 += kBlock) {
          Floats best = simd::at(in + first + k0);
          Ints where = kIota + (first + k0);
          for (std::int64_t ih = ih_lo; ih < ih_hi; ++ih) {
            for (std::int64_t iw = iw_lo; iw < iw_hi; ++iw) {
              const auto at = static_cast<std::int32_t>((ih * in_w_ + iw) * c) + k0;
              const Floats x = simd::at(in + at);
              const Ints larger = x > best;
              best = larger ? x : best;
              where = larger ? kIota + at : where;
            }
          }
          simd::at(o + k0) = best;
          simd::at(a + k0) = where;
        }
        for (std::int32_t k = k0; k < c; ++k) {  // the last c % kBlock channels
          float best = in[first + k];
          std::int32_t where = first + k;
          for (std::int64_t ih = ih_lo; ih < ih_hi; ++ih) {
            for (std::int64_t iw = iw_lo; iw < iw_hi; ++iw) {
              const auto at = static_cast<std::int32_t>((ih * in_w_ + iw) * c) + k;
              if (in[at] > best) {
                best = in[at];
                where = at;
              }
            }
          }
          o[k] = best;
          a[k] = where;
        }
      }
    }
  }
}

void MaxPool2D::backward(const Tensor& input, const Tensor&, const Tensor& grad_output,
                         Tensor* grad_input, std::span<float>) {
  if (grad_input == nullptr) return;
  const std::int64_t n = input.dim(0), c = channels_;
  const std::int64_t in_size = in_h_ * in_w_ * c;
  const std::int64_t out_size = dim_h_.out * dim_w_.out * c;
  grad_input->resize(input.shape());
  // When the windows tile the input exactly (stride = window, no padding, no remainder), every
  // input pixel is in one window: write each one, its gradient or 0, with no scatter and no
  // zeroing pass.
  const bool tiles = stride_h_ == window_h_ && stride_w_ == window_w_ &&
                     dim_h_.out * stride_h_ == in_h_ && dim_w_.out * stride_w_ == in_w_ &&
                     dim_h_.pad_before == 0 && dim_w_.pad_before == 0;
  const int threads = static_cast<int>(std::min<std::int64_t>(intra_op_threads(), n));
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (std::int64_t b = 0; b < n; ++b) {
    float* dx = grad_input->data() + b * in_size;
    if (!tiles) std::fill_n(dx, in_size, 0.0f);
    const float* dy = grad_output.data() + b * out_size;
    const std::int32_t* arg = argmax_.data() + b * out_size;
    if (!tiles) {
      // += because overlapping windows (stride < window) can pick the same pixel.
      for (std::int64_t j = 0; j < out_size; ++j) dx[arg[j]] += dy[j];
      continue;
    }
    for (std::int64_t oh = 0; oh < dim_h_.out; ++oh) {
      for (std::int64_t ow = 0; ow < dim_w_.out; ++ow) {
        const std::int64_t o = (oh * dim_w_.out + ow) * c;
        for (std::int64_t ih = oh * window_h_; ih < (oh + 1) * window_h_; ++ih) {
          for (std::int64_t iw = ow * window_w_; iw < (ow + 1) * window_w_; ++iw) {
            const auto at = static_cast<std::int32_t>((ih * in_w_ + iw) * c);
            std::int32_t k = 0;
            for (; k + kBlock <= c; k += kBlock) {
              const Ints won = simd::at(arg + o + k) == kIota + (at + k);
              const Floats g = simd::at(dy + o + k);
              simd::at(dx + at + k) = won ? g : Floats{};
            }
            for (; k < c; ++k) dx[at + k] = arg[o + k] == at + k ? dy[o + k] : 0.0f;
          }
        }
      }
    }
  }
}

double MaxPool2D::flops_per_example() const {
  return static_cast<double>(dim_h_.out * dim_w_.out * channels_ * window_h_ * window_w_);
}

}  // namespace cohort
