#pragma once
// Convolutions that filter each channel on its own (MobileNet, Xception, EfficientNet):
// DepthwiseConv2D, and SeparableConv2D, a depthwise convolution followed by a 1x1 one that mixes
// the channels, for a fraction of a full convolution's parameters and work. NHWC images.
//
//   x = model.apply(separable_conv2d("sep1", 64, 3, Activation::kRelu), x);
//   x = model.apply(depthwise_conv2d("dw", 3, Activation::kRelu, /*stride=*/2), x);

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cohort/core/nn/composite.h"
#include "cohort/core/nn/initializer.h"
#include "cohort/core/nn/layer.h"
#include "cohort/core/nn/ops/im2col.h"
#include "cohort/core/nn/ops/ops.h"
#include "cohort/core/nn/tensor.h"

namespace cohort {

/// Keras's DepthwiseConv2D: each input channel c convolved with `depth_multiplier` filters of its
/// own, [H, W, C] -> [H', W', C x depth_multiplier], output channel c x depth_multiplier + m from
/// channel c's m-th filter (PyTorch's Conv2d with groups = C has the same order). Variables
/// "<name>/kernel" [kh, kw, C, depth_multiplier] (Keras's layout; Glorot uniform, Keras's
/// default; decayed) and, with `use_bias`, "<name>/bias" [C x depth_multiplier] (zeros). Sizes and
/// padding as Conv2D's, SAME or VALID, and dilation. Computed directly, a tap at a time over a
/// pixel's channels (contiguous in NHWC), the images shared out over the intra-op threads.
class DepthwiseConv2D : public Layer {
 public:
  struct Options {
    std::int64_t kernel_h = 3, kernel_w = 3;
    std::int64_t stride_h = 1, stride_w = 1;
    Padding padding = Padding::kSame;  ///< kSame or kValid (SAME by default, as Conv2D's; Keras's is VALID)
    /// The filter's taps this far apart (atrous, as DeepLab's; Keras's dilation_rate).
    std::int64_t dilation_h = 1, dilation_w = 1;
    std::int64_t depth_multiplier = 1;
    Activation activation = Activation::kNone;
    bool use_bias = true;
    Initializer kernel_initializer = Initializer::glorot_uniform();
  };
  DepthwiseConv2D(std::string name, Options options);

  const std::string& name() const override { return name_; }
  Shape build(Graph& graph, const Shape& input) override;
  void forward(const Tensor& input, Tensor& output, const OpContext& context) override;
  void backward(const Tensor& input, const Tensor& output, const Tensor& grad_output,
                Tensor* grad_input, std::span<float> grads) override;
  double flops_per_example() const override;
  double input_grad_flops_per_example() const override;

 private:
  // With a depth multiplier above 1, `parts` images of [pixels, channels] per thread of a pass
  // over `images` images, kept between passes; null for one filter per channel.
  float* scratch(std::int64_t images, int parts);

  std::string name_;
  Options options_;
  Graph* graph_ = nullptr;
  im2col::Geometry geometry_;  // sizes and padding (in_c: the input's channels)
  std::int64_t kernel_offset_ = 0, bias_offset_ = -1;  // -1: no bias
  Tensor grad_pre_, grad_bias_;
  std::vector<float> partials_;  // the kernel gradient's sums of the threads after the first
  std::vector<float> scratch_;   // the threads' expanded images (and their gradients)
};

/// Keras's SeparableConv2D: a DepthwiseConv2D without bias ("<name>/depthwise/kernel"), then a
/// 1x1 Conv2D to `filters` channels with the bias and the activation ("<name>/pointwise/kernel",
/// "<name>/pointwise/bias"; Keras names them depthwise_kernel, pointwise_kernel and bias). A
/// composite layer (composite.h).
class SeparableConv2D : public CompositeLayer {
 public:
  SeparableConv2D(std::string name, std::int64_t filters, DepthwiseConv2D::Options depthwise);

 protected:
  Node compose(Node input) override;

 private:
  std::int64_t filters_;
  DepthwiseConv2D::Options depthwise_;
};

/// Square kernel and stride.
std::unique_ptr<Layer> depthwise_conv2d(std::string name, std::int64_t kernel,
                                        Activation activation = Activation::kNone,
                                        std::int64_t stride = 1, Padding padding = Padding::kSame,
                                        std::int64_t depth_multiplier = 1);
std::unique_ptr<Layer> separable_conv2d(std::string name, std::int64_t filters, std::int64_t kernel,
                                        Activation activation = Activation::kNone,
                                        std::int64_t stride = 1, Padding padding = Padding::kSame,
                                        std::int64_t depth_multiplier = 1);

}  // namespace cohort
