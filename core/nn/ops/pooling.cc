#include "cohort/core/nn/ops/pooling.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/threads.h"

namespace cohort {
namespace {

// Threads for a loop over `n` images: no more than there are images.
int threads_for(std::int64_t n) {
  return static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(intra_op_threads(), n)));
}

}  // namespace

Pool2D::Pool2D(const char* kind, std::string name, std::int64_t window_h, std::int64_t window_w,
               std::int64_t stride_h, std::int64_t stride_w, Padding padding)
    : kind_(kind),
      name_(std::move(name)),
      window_h_(window_h),
      window_w_(window_w),
      stride_h_(stride_h),
      stride_w_(stride_w),
      padding_(padding) {
  if (window_h < 1 || window_w < 1 || stride_h < 1 || stride_w < 1)
    throw InvalidArgument(what() + ": window " + std::to_string(window_h) + "x" +
                          std::to_string(window_w) + ", stride " + std::to_string(stride_h) + "x" +
                          std::to_string(stride_w) + ": each must be >= 1");
  if (padding == Padding::kCausal)
    throw InvalidArgument(what() + ": causal padding is for convolutions; use SAME or VALID");
}

std::string Pool2D::what() const { return std::string(kind_) + " \"" + name_ + "\""; }

Shape Pool2D::build(Graph&, const Shape& input) {
  if (input.size() != 3 || input[0] < 1 || input[1] < 1 || input[2] < 1)
    throw InvalidArgument(what() + ": input " + to_string(input) +
                          " is not [height, width, channels]");
  try {
    dim_h_ = spatial_dim(input[0], window_h_, stride_h_, padding_);
    dim_w_ = spatial_dim(input[1], window_w_, stride_w_, padding_);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(what() + ": input " + to_string(input) + ": " + e.what());
  }
  in_h_ = input[0];
  in_w_ = input[1];
  channels_ = input[2];
  return {dim_h_.out, dim_w_.out, channels_};
}

std::pair<std::int64_t, std::int64_t> Pool2D::rows(std::int64_t oh) const {
  const std::int64_t first = oh * stride_h_ - dim_h_.pad_before;
  return {std::max<std::int64_t>(0, first), std::min(in_h_, first + window_h_)};
}

std::pair<std::int64_t, std::int64_t> Pool2D::cols(std::int64_t ow) const {
  const std::int64_t first = ow * stride_w_ - dim_w_.pad_before;
  return {std::max<std::int64_t>(0, first), std::min(in_w_, first + window_w_)};
}

AvgPool2D::AvgPool2D(std::string name, std::int64_t window_h, std::int64_t window_w,
                     std::int64_t stride_h, std::int64_t stride_w, Padding padding)
    : Pool2D("AvgPool2D", std::move(name), window_h, window_w, stride_h, stride_w, padding) {}

// Each window sums whole pixels (c contiguous floats) at a time, so the inner loops run over the
// channels and vectorise. A window's divisor is the number of input pixels it covers: with SAME
// padding the border windows average fewer (TensorFlow's rule).
void AvgPool2D::forward(const Tensor& input, Tensor& output, const OpContext&) {
  const std::int64_t n = input.dim(0), c = channels_;
  const std::int64_t in_size = in_h_ * in_w_ * c;
  const std::int64_t out_size = dim_h_.out * dim_w_.out * c;
  output.resize({n, dim_h_.out, dim_w_.out, c});
  const int threads = threads_for(n);
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (std::int64_t b = 0; b < n; ++b) {
    const float* in = input.data() + b * in_size;
    float* out = output.data() + b * out_size;
    for (std::int64_t oh = 0; oh < dim_h_.out; ++oh) {
      const auto [ih_lo, ih_hi] = rows(oh);
      for (std::int64_t ow = 0; ow < dim_w_.out; ++ow) {
        const auto [iw_lo, iw_hi] = cols(ow);
        float* __restrict o = out + (oh * dim_w_.out + ow) * c;
        std::fill_n(o, c, 0.0f);
        for (std::int64_t ih = ih_lo; ih < ih_hi; ++ih) {
          // The window's pixels on one input row are contiguous: one run of (iw_hi - iw_lo) * c.
          const float* __restrict row = in + (ih * in_w_ + iw_lo) * c;
          for (std::int64_t iw = 0; iw < iw_hi - iw_lo; ++iw)
            for (std::int64_t k = 0; k < c; ++k) o[k] += row[iw * c + k];
        }
        const float scale = 1.0f / static_cast<float>((ih_hi - ih_lo) * (iw_hi - iw_lo));
        for (std::int64_t k = 0; k < c; ++k) o[k] *= scale;
      }
    }
  }
}

void AvgPool2D::backward(const Tensor& input, const Tensor&, const Tensor& grad_output,
                         Tensor* grad_input, std::span<float>) {
  if (grad_input == nullptr) return;
  const std::int64_t n = input.dim(0), c = channels_;
  const std::int64_t in_size = in_h_ * in_w_ * c;
  const std::int64_t out_size = dim_h_.out * dim_w_.out * c;
  grad_input->resize(input.shape());
  const int threads = threads_for(n);
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (std::int64_t b = 0; b < n; ++b) {
    // Windows can overlap (stride < window) and can miss pixels (stride > window): zero, then
    // scatter-add each window's share.
    float* dx = grad_input->data() + b * in_size;
    std::fill_n(dx, in_size, 0.0f);
    const float* dy = grad_output.data() + b * out_size;
    for (std::int64_t oh = 0; oh < dim_h_.out; ++oh) {
      const auto [ih_lo, ih_hi] = rows(oh);
      for (std::int64_t ow = 0; ow < dim_w_.out; ++ow) {
        const auto [iw_lo, iw_hi] = cols(ow);
        const float* __restrict g = dy + (oh * dim_w_.out + ow) * c;
        const float scale = 1.0f / static_cast<float>((ih_hi - ih_lo) * (iw_hi - iw_lo));
        for (std::int64_t ih = ih_lo; ih < ih_hi; ++ih) {
          float* __restrict row = dx + (ih * in_w_ + iw_lo) * c;
          for (std::int64_t iw = 0; iw < iw_hi - iw_lo; ++iw)
            for (std::int64_t k = 0; k < c; ++k) row[iw * c + k] += g[k] * scale;
        }
      }
    }
  }
}

double AvgPool2D::flops_per_example() const {
  // A window's adds forward, and as many backward.
  return 2.0 * static_cast<double>(dim_h_.out * dim_w_.out * channels_ * window_h_ * window_w_);
}

Shape GlobalPooling2D::build(Graph&, const Shape& input) {
  if ((input.size() != 2 && input.size() != 3) ||
      std::ranges::any_of(input, [](std::int64_t d) { return d < 1; }))
    throw InvalidArgument(std::string(kind_) + " \"" + name_ + "\": input " + to_string(input) +
                          " is not [height, width, channels] or [steps, channels]");
  channels_ = input.back();
  positions_ = num_elements(input) / channels_;
  if (positions_ > std::numeric_limits<std::int32_t>::max())
    throw InvalidArgument(std::string(kind_) + " \"" + name_ + "\": input " + to_string(input) +
                          " has more positions than it counts");
  return {channels_};
}

double GlobalPooling2D::flops_per_example() const {
  return 2.0 * static_cast<double>(positions_ * channels_);
}

namespace {

// How many of an example's positions a global pool reads: each of them without a mask, the steps
// the mask reads with one.
std::int64_t positions_read(const Tensor* mask, std::int64_t b, std::int64_t positions) {
  if (mask == nullptr) return positions;
  const float* m = mask->data() + b * positions;
  return std::count_if(m, m + positions, [](float v) { return v != 0.0f; });
}

}  // namespace

void GlobalAveragePooling2D::forward(const Tensor& input, Tensor& output, const OpContext&) {
  const std::int64_t n = input.dim(0), c = channels_;
  output.resize({n, c});
  const Tensor* m = mask();
  const int threads = threads_for(n);
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (std::int64_t b = 0; b < n; ++b) {
    // Pixel after pixel, each a contiguous row of c channels added onto the running sums.
    const float* __restrict in = input.data() + b * positions_ * c;
    float* __restrict out = output.data() + b * c;
    std::fill_n(out, c, 0.0f);
    const std::int64_t count = positions_read(m, b, positions_);
    if (count == 0) continue;
    for (std::int64_t p = 0; p < positions_; ++p) {
      if (!mask_reads(m, b, p)) continue;
      for (std::int64_t k = 0; k < c; ++k) out[k] += in[p * c + k];
    }
    const float scale = 1.0f / static_cast<float>(count);
    for (std::int64_t k = 0; k < c; ++k) out[k] *= scale;
  }
}

void GlobalAveragePooling2D::backward(const Tensor& input, const Tensor&, const Tensor& grad_output,
                                      Tensor* grad_input, std::span<float>) {
  if (grad_input == nullptr) return;
  const std::int64_t n = input.dim(0), c = channels_;
  grad_input->resize(input.shape());
  const Tensor* m = mask();
  const int threads = threads_for(n);
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (std::int64_t b = 0; b < n; ++b) {
    const float* __restrict dy = grad_output.data() + b * c;
    float* __restrict dx = grad_input->data() + b * positions_ * c;
    const std::int64_t count = positions_read(m, b, positions_);
    const float scale = count == 0 ? 0.0f : 1.0f / static_cast<float>(count);
    for (std::int64_t p = 0; p < positions_; ++p) {
      const float s = mask_reads(m, b, p) ? scale : 0.0f;
      for (std::int64_t k = 0; k < c; ++k) dx[p * c + k] = dy[k] * s;
    }
  }
}

void GlobalMaxPooling2D::forward(const Tensor& input, Tensor& output, const OpContext&) {
  const std::int64_t n = input.dim(0), c = channels_;
  output.resize({n, c});
  const Tensor* m = mask();
  const int threads = threads_for(n);
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (std::int64_t b = 0; b < n; ++b) {
    const float* __restrict in = input.data() + b * positions_ * c;
    float* __restrict out = output.data() + b * c;
    std::int64_t first = 0;  // the first position read
    while (first < positions_ && !mask_reads(m, b, first)) ++first;
    if (first == positions_) {  // nothing read: zeros
      std::fill_n(out, c, 0.0f);
      continue;
    }
    std::copy_n(in + first * c, c, out);
    for (std::int64_t p = first + 1; p < positions_; ++p) {
      if (!mask_reads(m, b, p)) continue;
      for (std::int64_t k = 0; k < c; ++k) out[k] = std::max(out[k], in[p * c + k]);
    }
  }
}

// TensorFlow's gradient of reduce_max (Keras's GlobalMaxPooling): shared evenly by the positions
// that hold the maximum.
void GlobalMaxPooling2D::backward(const Tensor& input, const Tensor& output,
                                  const Tensor& grad_output, Tensor* grad_input, std::span<float>) {
  if (grad_input == nullptr) return;
  const std::int64_t n = input.dim(0), c = channels_;
  grad_input->resize(input.shape());
  std::fill_n(grad_input->data(), grad_input->size(), 0.0f);
  const Tensor* m = mask();
  std::vector<std::int32_t> holders(static_cast<std::size_t>(c));
  for (std::int64_t b = 0; b < n; ++b) {
    const float* in = input.data() + b * positions_ * c;
    const float* out = output.data() + b * c;
    float* dx = grad_input->data() + b * positions_ * c;
    std::fill(holders.begin(), holders.end(), 0);
    for (std::int64_t p = 0; p < positions_; ++p)
      if (mask_reads(m, b, p))
        for (std::int64_t k = 0; k < c; ++k) holders[k] += in[p * c + k] == out[k] ? 1 : 0;
    for (std::int64_t p = 0; p < positions_; ++p)
      if (mask_reads(m, b, p))
        for (std::int64_t k = 0; k < c; ++k)
          if (in[p * c + k] == out[k])
            dx[p * c + k] = grad_output[b * c + k] / static_cast<float>(holders[k]);
  }
}

std::unique_ptr<Layer> global_max_pool2d(std::string name) {
  return std::make_unique<GlobalMaxPooling2D>(std::move(name));
}

std::unique_ptr<Layer> avg_pool2d(std::string name, std::int64_t window, std::int64_t stride,
                                  Padding padding) {
  const std::int64_t s = stride == 0 ? window : stride;
  return std::make_unique<AvgPool2D>(std::move(name), window, window, s, s, padding);
}

std::unique_ptr<Layer> global_avg_pool2d(std::string name) {
  return std::make_unique<GlobalAveragePooling2D>(std::move(name));
}

}  // namespace cohort
