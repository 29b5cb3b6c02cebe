#pragma once
// Direct convolution for the layers whose receptive field is a handful of values: the first layer
// of an image model, a 3x3 or 5x5 filter over 1 to 3 channels. There im2col's matrix product has
// an inner dimension of 9 to 25, too short for a BLAS kernel to pay for packing its operands, and
// the patch columns are written out only to be read once. Here each output pixel's filters are
// summed in registers, a few pixels and up to four vectors of filters at a time, with the bias
// and the ReLU applied before the single store; the filter gradient sums over the pixels the same
// way. Padding is a zero border around a copy of each image, so the inner loops have no bounds
// checks; strides and dilations are any.
//
// Internal to Conv2D (which keeps im2col for the input gradient, which first layers do not take).

#include <cstdint>

#include "cohort/core/nn/ops/im2col.h"

namespace cohort::direct_conv {

/// Whether the kernels serve `g` with `filters` filters: a patch of at most 32 values whose
/// kernel rows are narrow (kernel_w * in_c < 16, the layers im2col lays out as patch columns),
/// and a filter count that is a multiple of the vector width (8, or 16 with AVX-512); and
/// kernels compiled with AVX (x86-64-v3 and up), whose vectors each fit one register.
bool suitable(const im2col::Geometry& g, std::int64_t filters);

/// Floats of one padded image: forward() needs one as scratch, add_kernel_grad() one per image.
std::int64_t scratch_size(const im2col::Geometry& g);

/// output[count images, out_h, out_w, filters] = conv(images, kernel) + bias, then the ReLU when
/// `relu`. kernel is HWIO ([kernel_h, kernel_w, in_c, filters]).
void forward(const im2col::Geometry& g, std::int64_t filters, const float* images,
             std::int64_t count, const float* kernel, const float* bias, bool relu, float* output,
             float* scratch);

/// grad_kernel[kernel_h, kernel_w, in_c, filters] += the filter gradient of `count` images given
/// dz, the gradient of the pre-activation output [count, out_h, out_w, filters].
void add_kernel_grad(const im2col::Geometry& g, std::int64_t filters, const float* images,
                     std::int64_t count, const float* dz, float* grad_kernel, float* scratch);

}  // namespace cohort::direct_conv
