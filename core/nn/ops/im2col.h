#pragma once
// im2col and its adjoint for Conv2D (NHWC images, HWIO filters), in two layouts:
//
// - patch rows: a [images * out_h * out_w, kh * kw * in] matrix, one receptive field per row in
//   HWC order, so that (columns * filter) is the convolution with the filter viewed as a
//   [kh * kw * in, filters] matrix. Each (row, kernel row) is one contiguous copy of kw * in
//   values from the image: fast when kw * in spans a vector or more.
// - patch columns: the transpose, [kh * kw * in, images * out_h * out_w], one filter tap per row.
//   Each (tap, output row) is a copy of out_w values (contiguous when in = 1 and stride 1): fast
//   for the first layer of an image model, where kw * in is a handful of values.
//
// With a dilation d > 1 along the width, a kernel row's taps are d pixels apart, so patch rows copy
// one pixel (in values) per tap instead of the whole kernel row at once.
//
// Internal to the ops; not thread-safe only in the obvious way (each call writes its own output).

#include <cstdint>

namespace cohort::im2col {

/// The column buffer of one chunk of images is kept near this size by the layers that cut their
/// batch into chunks (Conv2D, Conv2DTranspose), so that im2col writes it into L2 and the matrix
/// product reads it back from there (2 MB of L2 per core on the machines this was tuned on; the
/// packed filter and output block need the rest).
inline constexpr std::int64_t kChunkBytes = 768 * 1024;

/// The shape of one convolution (per image), as Conv2D computes it.
struct Geometry {
  std::int64_t in_h = 0, in_w = 0, in_c = 0;
  std::int64_t kernel_h = 0, kernel_w = 0;
  std::int64_t stride_h = 1, stride_w = 1;
  std::int64_t pad_top = 0, pad_left = 0;
  std::int64_t out_h = 0, out_w = 0;
  /// Filter taps are this far apart in the image (1: adjacent; atrous convolution above).
  std::int64_t dilation_h = 1, dilation_w = 1;

  std::int64_t patch() const { return kernel_h * kernel_w * in_c; }
  std::int64_t rows_per_image() const { return out_h * out_w; }
  std::int64_t image_size() const { return in_h * in_w * in_c; }
};

/// Patch-row layout: writes `count` images' [count * rows_per_image, patch] matrix.
void to_rows(const Geometry& g, const float* images, std::int64_t count, float* columns);
/// Adds the patch-row matrix back onto the image gradient (which the caller zeroes first).
void add_rows(const Geometry& g, const float* columns, std::int64_t count, float* grad_images);

/// Patch-column layout: writes the [patch, count * rows_per_image] matrix.
void to_columns(const Geometry& g, const float* images, std::int64_t count, float* columns);
/// Adds the patch-column matrix back onto the image gradient (which the caller zeroes first).
void add_columns(const Geometry& g, const float* columns, std::int64_t count, float* grad_images);

}  // namespace cohort::im2col
