#pragma once
// Layers that make an image larger or change its frame, the decoder half of an autoencoder, a
// U-Net or a GAN's generator: Conv2DTranspose (a learned upsampling), UpSampling2D (repeated or
// interpolated pixels), ZeroPadding2D and Cropping2D (rows and columns added or taken off at the
// edges, as a U-Net's skip connections need to match sizes). On NHWC images [height, width,
// channels]; the last three also on sequences [steps, channels] (their 1-D forms).
//
//   x = model.apply(conv2d_transpose("up1", 64, 4, Activation::kRelu, 2), x);  // [7, 7] -> [14, 14]
//   x = model.apply(upsampling2d("up2", 2), x);                                // [14, 14] -> [28, 28]
//   x = model.apply(upsampling2d("up3", 2, Interpolation::kBilinear), x);      // [28, 28] -> [56, 56]

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cohort/core/nn/initializer.h"
#include "cohort/core/nn/layer.h"
#include "cohort/core/nn/ops/im2col.h"
#include "cohort/core/nn/ops/ops.h"
#include "cohort/core/nn/tensor.h"

namespace cohort {

/// The transpose of a 2-D convolution (Keras's Conv2DTranspose; also called a fractionally
/// strided convolution or, loosely, a deconvolution): each input pixel scatters its channels
/// through the filter onto a window of the output, windows `stride` apart, so an [H, W, C] input
/// becomes [H * stride, W * stride, filters] with SAME padding and [H * stride + max(k' - stride,
/// 0), ...] with VALID (k' the filter's extent, k with no dilation), as Keras computes them, or
/// the size `output_padding` picks. It is exactly the input gradient of the Conv2D of
/// the same kernel, stride, padding and dilation from the output's size to the input's
/// (TensorFlow's conv2d_transpose), computed the same way (matrix product and col2im). Variables
/// "<name>/kernel" [kh, kw, filters, in] (Keras's layout; Glorot uniform, Keras's default) and
/// "<name>/bias" [filters] (zeros); the kernel is decayed.
class Conv2DTranspose : public Layer {
 public:
  struct Options {
    std::int64_t filters = 1;
    std::int64_t kernel_h = 3, kernel_w = 3;
    std::int64_t stride_h = 1, stride_w = 1;
    Padding padding = Padding::kSame;  ///< kSame or kValid (SAME by default, as Conv2D's; Keras's is VALID)
    /// The filter's taps this far apart (an atrous transpose; Keras's dilation_rate).
    std::int64_t dilation_h = 1, dilation_w = 1;
    /// Keras's output_padding, 0 to stride - 1, for the other sizes a strided Conv2D maps to the
    /// input's: the output [(H - 1) * stride + k' - 2 p + output_padding, ...], k' = (k - 1) *
    /// dilation + 1, p = k' / 2 (SAME) or 0 (VALID), the size of PyTorch's ConvTranspose2d with
    /// padding p. Its rows are placed as TensorFlow pads: with SAME, max(2 p - output_padding,
    /// 0) / 2 rows (rounded down) are taken off before, where PyTorch takes off p, so that the
    /// image sits up to ceil(output_padding / 2) rows lower than PyTorch's. Unset: the sizes
    /// above.
    std::optional<std::int64_t> output_padding_h, output_padding_w;
    Activation activation = Activation::kNone;
    Initializer kernel_initializer = Initializer::glorot_uniform();
  };
  Conv2DTranspose(std::string name, Options options);

  const std::string& name() const override { return name_; }
  Shape build(Graph& graph, const Shape& input) override;
  void forward(const Tensor& input, Tensor& output, const OpContext& context) override;
  void backward(const Tensor& input, const Tensor& output, const Tensor& grad_output,
                Tensor* grad_input, std::span<float> grads) override;
  double flops_per_example() const override;
  double input_grad_flops_per_example() const override;

 private:
  std::string name_;
  Options options_;
  Graph* graph_ = nullptr;
  // The convolution this layer is the transpose of: its input is this layer's output, its output
  // this layer's input, its filters this layer's input channels.
  im2col::Geometry geometry_;
  std::int64_t in_c_ = 0;  // the input's channels
  std::int64_t kernel_offset_ = 0, bias_offset_ = 0;
  std::int64_t chunk_ = 1;  // images per matrix product, so that the columns stay in cache
  Tensor columns_, grad_pre_;
  std::vector<float> partials_;  // the kernel gradient's sums of the threads after the first
};

/// How UpSampling2D fills the pixels between the input's.
enum class Interpolation {
  kNearest,   ///< each pixel repeated (Keras's default)
  kBilinear,  ///< linear in each axis, half-pixel centres (Keras's "bilinear", PyTorch's align_corners=False)
};

/// Makes each image `size_h` times taller and `size_w` times wider (Keras's UpSampling2D):
/// [H, W, C] -> [H * size_h, W * size_w, C]. kNearest (the default) repeats each pixel; kBilinear
/// interpolates between the four nearest, the edges held (tf.image.resize's bilinear, PyTorch's
/// Upsample with align_corners=False). Its gradient sends each output's back to the pixels it
/// read, by their weights. No variables. Its 1-D form (`sequences`, upsampling1d) takes a
/// sequence [T, C] to [T * size_h, C] (Keras's UpSampling1D; kBilinear is then linear).
class UpSampling2D : public Layer {
 public:
  /// `sequences`: the 1-D form, for inputs [T, C] (size_w must be 1); else images.
  UpSampling2D(std::string name, std::int64_t size_h, std::int64_t size_w,
               Interpolation interpolation = Interpolation::kNearest, bool sequences = false);

  const std::string& name() const override { return name_; }
  Shape build(Graph& graph, const Shape& input) override;
  void forward(const Tensor& input, Tensor& output, const OpContext& context) override;
  void backward(const Tensor& input, const Tensor& output, const Tensor& grad_output,
                Tensor* grad_input, std::span<float> grads) override;

 private:
  const char* kind() const;  // "UpSampling1D" or "UpSampling2D", for messages

  std::string name_;
  std::int64_t size_h_, size_w_;
  Interpolation interpolation_;
  bool sequences_;                      // the 1-D form: inputs [steps, channels]
  std::int64_t h_ = 0, w_ = 0, c_ = 0;  // the input's (a sequence's width 1)
  // The input pixels each output pixel of an image reads (indices within the image) and their
  // weights, those of weight 0 left out (so a nearest-neighbour output is its pixel exactly,
  // whatever the others hold); output pixels row by row, fixed by build().
  struct Reads {
    std::int64_t pixel[4];
    float weight[4];
    int count = 0;
  };
  std::vector<Reads> reads_;
};

/// The rows and columns an image gains (ZeroPadding2D) or loses (Cropping2D) at each edge.
struct Border {
  std::int64_t top = 0, bottom = 0, left = 0, right = 0;
  /// The same on every edge.
  static Border all(std::int64_t n) { return {n, n, n, n}; }
};

/// Adds rows and columns of zeros around each image (Keras's ZeroPadding2D) when `sign` is +1,
/// or takes them off (Keras's Cropping2D) when it is -1: the two are each other's gradient.
/// No variables. Its 1-D form (`sequences`, zero_padding1d and cropping1d) takes a sequence
/// [T, C], its steps the rows (Keras's ZeroPadding1D and Cropping1D).
class Reframe2D : public Layer {
 public:
  /// `sequences`: the 1-D form, for inputs [T, C] (left and right must be 0); else images.
  Reframe2D(std::string name, Border border, int sign, bool sequences = false);

  const std::string& name() const override { return name_; }
  Shape build(Graph& graph, const Shape& input) override;
  void forward(const Tensor& input, Tensor& output, const OpContext& context) override;
  void backward(const Tensor& input, const Tensor& output, const Tensor& grad_output,
                Tensor* grad_input, std::span<float> grads) override;

 private:
  const char* kind() const;  // "ZeroPadding2D", "Cropping1D", ..., for messages

  std::string name_;
  Border border_;
  int sign_;
  bool sequences_;  // the 1-D form: inputs [steps, channels]
  Shape in_, out_;  // one example's, as images (a sequence's width 1)
};

/// Square kernel and stride.
std::unique_ptr<Layer> conv2d_transpose(std::string name, std::int64_t filters,
                                        std::int64_t kernel,
                                        Activation activation = Activation::kNone,
                                        std::int64_t stride = 1, Padding padding = Padding::kSame);
std::unique_ptr<Layer> upsampling2d(std::string name, std::int64_t size = 2,
                                    Interpolation interpolation = Interpolation::kNearest);
/// Sequences [steps, channels]: each step repeated `size` times; zero steps added, or steps taken
/// off, before the first and after the last.
std::unique_ptr<Layer> upsampling1d(std::string name, std::int64_t size = 2,
                                    Interpolation interpolation = Interpolation::kNearest);
std::unique_ptr<Layer> zero_padding1d(std::string name, std::int64_t before, std::int64_t after);
std::unique_ptr<Layer> cropping1d(std::string name, std::int64_t before, std::int64_t after);
std::unique_ptr<Layer> zero_padding2d(std::string name, Border border);
std::unique_ptr<Layer> cropping2d(std::string name, Border border);

}  // namespace cohort
