#include "cohort/core/nn/ops/im2col.h"

#include <algorithm>
#include <cstring>

namespace cohort::im2col {
namespace {

void zero(float* dst, std::int64_t n) {
  if (n > 0) std::memset(dst, 0, static_cast<std::size_t>(n) * sizeof(float));
}

void copy(float* dst, const float* src, std::int64_t n) {
  if (n > 0) std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(float));
}

void add(float* __restrict dst, const float* __restrict src, std::int64_t n) {
  for (std::int64_t j = 0; j < n; ++j) dst[j] += src[j];
}

// The outputs [lo, hi) along one axis whose tap `offset` lands inside the input: 0 <= o * stride
// - pad + offset < in.
struct Range {
  std::int64_t lo, hi;
};
Range valid_outputs(std::int64_t in, std::int64_t out, std::int64_t stride, std::int64_t pad,
                    std::int64_t offset) {
  auto first_at_least = [&](std::int64_t position) {  // smallest o with o * stride - pad + offset >= position
    const std::int64_t num = position + pad - offset;
    return num <= 0 ? 0 : (num + stride - 1) / stride;
  };
  return {std::min(out, first_at_least(0)), std::min(out, first_at_least(in))};
}

// The taps [lo, hi) of a kernel of `kernel` taps `dilation` apart, the first at `start`, that land
// inside [0, in). With dilation the taps can straddle the input and none may land in it.
Range taps_inside(std::int64_t start, std::int64_t in, std::int64_t kernel,
                  std::int64_t dilation) {
  auto first_at_least = [&](std::int64_t position) {  // smallest t with start + t * d >= position
    const std::int64_t num = position - start;
    return num <= 0 ? 0 : (num + dilation - 1) / dilation;
  };
  return {std::min(kernel, first_at_least(0)), std::min(kernel, first_at_least(in))};
}

}  // namespace

void to_rows(const Geometry& g, const float* images, std::int64_t count, float* columns) {
  const std::int64_t c = g.in_c;
  const std::int64_t row_len = g.kernel_w * c;
  const std::int64_t patch = g.patch();
  float* dst_row = columns;
  for (std::int64_t b = 0; b < count; ++b) {
    const float* image = images + b * g.image_size();
    for (std::int64_t oh = 0; oh < g.out_h; ++oh) {
      const std::int64_t ih0 = oh * g.stride_h - g.pad_top;
      const Range rh = taps_inside(ih0, g.in_h, g.kernel_h, g.dilation_h);
      for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
        const std::int64_t iw0 = ow * g.stride_w - g.pad_left;
        const Range rw = taps_inside(iw0, g.in_w, g.kernel_w, g.dilation_w);
        // Floats [lo, hi) of each kernel row come from the image, the rest is padding.
        const std::int64_t lo = rw.lo * c, hi = rw.hi * c;
        zero(dst_row, rh.lo * row_len);
        for (std::int64_t i = rh.lo; i < rh.hi; ++i) {
          float* dst = dst_row + i * row_len;
          const std::int64_t base = ((ih0 + i * g.dilation_h) * g.in_w + iw0) * c;
          zero(dst, lo);
          if (g.dilation_w == 1) {
            copy(dst + lo, image + base + lo, hi - lo);
          } else {
            for (std::int64_t j = rw.lo; j < rw.hi; ++j)
              copy(dst + j * c, image + base + j * g.dilation_w * c, c);
          }
          zero(dst + hi, row_len - hi);
        }
        zero(dst_row + rh.hi * row_len, (g.kernel_h - rh.hi) * row_len);
        dst_row += patch;
      }
    }
  }
}

void add_rows(const Geometry& g, const float* columns, std::int64_t count, float* grad_images) {
  const std::int64_t c = g.in_c;
  const std::int64_t row_len = g.kernel_w * c;
  const std::int64_t patch = g.patch();
  const float* src_row = columns;
  for (std::int64_t b = 0; b < count; ++b) {
    float* image = grad_images + b * g.image_size();
    for (std::int64_t oh = 0; oh < g.out_h; ++oh) {
      const std::int64_t ih0 = oh * g.stride_h - g.pad_top;
      const Range rh = taps_inside(ih0, g.in_h, g.kernel_h, g.dilation_h);
      for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
        const std::int64_t iw0 = ow * g.stride_w - g.pad_left;
        const Range rw = taps_inside(iw0, g.in_w, g.kernel_w, g.dilation_w);
        const std::int64_t lo = rw.lo * c, hi = rw.hi * c;
        for (std::int64_t i = rh.lo; i < rh.hi; ++i) {
          const std::int64_t base = ((ih0 + i * g.dilation_h) * g.in_w + iw0) * c;
          const float* src = src_row + i * row_len;
          if (g.dilation_w == 1) {
            add(image + base + lo, src + lo, hi - lo);
          } else {
            for (std::int64_t j = rw.lo; j < rw.hi; ++j)
              add(image + base + j * g.dilation_w * c, src + j * c, c);
          }
        }
        src_row += patch;
      }
    }
  }
}

void to_columns(const Geometry& g, const float* images, std::int64_t count, float* columns) {
  const std::int64_t rows = count * g.rows_per_image();
  for (std::int64_t i = 0; i < g.kernel_h; ++i) {
    const Range rh = valid_outputs(g.in_h, g.out_h, g.stride_h, g.pad_top, i * g.dilation_h);
    for (std::int64_t j = 0; j < g.kernel_w; ++j) {
      const Range rw = valid_outputs(g.in_w, g.out_w, g.stride_w, g.pad_left, j * g.dilation_w);
      for (std::int64_t c = 0; c < g.in_c; ++c) {
        float* tap = columns + ((i * g.kernel_w + j) * g.in_c + c) * rows;
        for (std::int64_t b = 0; b < count; ++b) {
          const float* image = images + b * g.image_size();
          float* dst_image = tap + b * g.rows_per_image();
          zero(dst_image, rh.lo * g.out_w);
          for (std::int64_t oh = rh.lo; oh < rh.hi; ++oh) {
            float* dst = dst_image + oh * g.out_w;
            const std::int64_t ih = oh * g.stride_h - g.pad_top + i * g.dilation_h;
            // Output ow reads input column ow * stride_w - pad_left + j * dilation_w (in range for
            // ow in rw).
            const std::int64_t base = (ih * g.in_w - g.pad_left + j * g.dilation_w) * g.in_c + c;
            const std::int64_t step = g.stride_w * g.in_c;
            zero(dst, rw.lo);
            if (step == 1) {
              copy(dst + rw.lo, image + base + rw.lo, rw.hi - rw.lo);
            } else {
              for (std::int64_t ow = rw.lo; ow < rw.hi; ++ow) dst[ow] = image[base + ow * step];
            }
            zero(dst + rw.hi, g.out_w - rw.hi);
          }
          zero(dst_image + rh.hi * g.out_w, (g.out_h - rh.hi) * g.out_w);
        }
      }
    }
  }
}

void add_columns(const Geometry& g, const float* columns, std::int64_t count, float* grad_images) {
  const std::int64_t rows = count * g.rows_per_image();
  for (std::int64_t i = 0; i < g.kernel_h; ++i) {
    const Range rh = valid_outputs(g.in_h, g.out_h, g.stride_h, g.pad_top, i * g.dilation_h);
    for (std::int64_t j = 0; j < g.kernel_w; ++j) {
      const Range rw = valid_outputs(g.in_w, g.out_w, g.stride_w, g.pad_left, j * g.dilation_w);
      for (std::int64_t c = 0; c < g.in_c; ++c) {
        const float* tap = columns + ((i * g.kernel_w + j) * g.in_c + c) * rows;
        for (std::int64_t b = 0; b < count; ++b) {
          float* image = grad_images + b * g.image_size();
          const float* src_image = tap + b * g.rows_per_image();
          for (std::int64_t oh = rh.lo; oh < rh.hi; ++oh) {
            const float* src = src_image + oh * g.out_w;
            const std::int64_t ih = oh * g.stride_h - g.pad_top + i * g.dilation_h;
            const std::int64_t base = (ih * g.in_w - g.pad_left + j * g.dilation_w) * g.in_c + c;
            const std::int64_t step = g.stride_w * g.in_c;
            if (step == 1) {
              add(image + base + rw.lo, src + rw.lo, rw.hi - rw.lo);
            } else {
              for (std::int64_t ow = rw.lo; ow < rw.hi; ++ow) image[base + ow * step] += src[ow];
            }
          }
        }
      }
    }
  }
}

}  // namespace cohort::im2col
