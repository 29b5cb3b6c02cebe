#pragma once
// Average pooling: AvgPool2D over windows and GlobalAveragePooling2D over the whole image;
// GlobalMaxPooling2D. (MaxPool2D and the windows' base, Pool2D, are in ops.h.)

#include <cstdint>
#include <span>
#include <string>

#include "cohort/core/nn/layer.h"
#include "cohort/core/nn/ops/masking.h"
#include "cohort/core/nn/ops/ops.h"
#include "cohort/core/nn/tensor.h"

namespace cohort {

/// Average pooling over NHWC windows. With SAME padding a window's average is over the input
/// elements it covers (padding is not counted, as TensorFlow does).
class AvgPool2D : public Pool2D {
 public:
  AvgPool2D(std::string name, std::int64_t window_h, std::int64_t window_w, std::int64_t stride_h,
            std::int64_t stride_w, Padding padding);

  void forward(const Tensor& input, Tensor& output, const OpContext& context) override;
  void backward(const Tensor& input, const Tensor& output, const Tensor& grad_output,
                Tensor* grad_input, std::span<float> grads) override;
  double flops_per_example() const override;
};

/// [H, W, C] -> [C]: one value per channel from every position of it, of an image or of a
/// sequence [T, C] (Keras's GlobalAveragePooling1D and GlobalMaxPooling1D); with a sequence's
/// mask (masking.h), from the steps read (zeros where an example has none). The base of the two
/// below.
class GlobalPooling2D : public MaskableLayer {
 public:
  const std::string& name() const override { return name_; }
  Shape build(Graph& graph, const Shape& input) override;
  double flops_per_example() const override;

 protected:
  GlobalPooling2D(std::string name, const char* kind) : name_(std::move(name)), kind_(kind) {}
  std::string name_;
  const char* kind_;  // the class's name, for messages
  std::int64_t positions_ = 0, channels_ = 0;
};

/// The mean over every position of each channel.
class GlobalAveragePooling2D : public GlobalPooling2D {
 public:
  explicit GlobalAveragePooling2D(std::string name)
      : GlobalPooling2D(std::move(name), "GlobalAveragePooling2D") {}
  void forward(const Tensor& input, Tensor& output, const OpContext& context) override;
  void backward(const Tensor& input, const Tensor& output, const Tensor& grad_output,
                Tensor* grad_input, std::span<float> grads) override;
};

/// The largest value over every position of each channel; its gradient is shared evenly by the
/// positions that hold it (TensorFlow's reduce_max, as Keras's GlobalMaxPooling).
class GlobalMaxPooling2D : public GlobalPooling2D {
 public:
  explicit GlobalMaxPooling2D(std::string name) : GlobalPooling2D(std::move(name), "GlobalMaxPooling2D") {}
  void forward(const Tensor& input, Tensor& output, const OpContext& context) override;
  void backward(const Tensor& input, const Tensor& output, const Tensor& grad_output,
                Tensor* grad_input, std::span<float> grads) override;
};

}  // namespace cohort
