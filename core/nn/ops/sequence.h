#pragma once
// The 1-D layers over sequences [steps, channels] (text after an embedding, a time series, an
// image's rows): Conv1D, MaxPool1D and AvgPool1D. A sequence [T, C] is laid out in memory as the
// image [1, T, C], so each is its 2-D layer with a window one row high, built on that image and
// giving its output back as a sequence; the computation, the variables' layout and the backward
// pass are the 2-D layer's. GlobalAveragePooling2D and GlobalMaxPooling2D (pooling.h) take
// sequences as they are. The 1-D layers have no GPU path.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "cohort/core/nn/ops/ops.h"
#include "cohort/core/nn/ops/pooling.h"

namespace cohort {

/// Convolution along a sequence [steps, channels] with the filter "<name>/kernel" [1, kernel,
/// channels, filters] (He normal; Keras's [kernel, channels, filters] has the same layout) and
/// "<name>/bias" [filters]; SAME, VALID or CAUSAL padding (Keras's causal: each output sees its
/// step and the ones before), stride and dilation.
class Conv1D final : public Conv2D {
 public:
  struct Options {
    std::int64_t filters = 1;
    std::int64_t kernel = 3;
    std::int64_t stride = 1;
    Padding padding = Padding::kSame;
    Activation activation = Activation::kNone;
    std::int64_t dilation = 1;
    Initializer kernel_initializer = Initializer::he_normal();
  };
  Conv1D(std::string name, Options options);

  Shape build(Graph& graph, const Shape& input) override;
  void forward(const Tensor& input, Tensor& output, const OpContext& context) override;
  std::unique_ptr<GpuLayer> make_gpu_layer() const override { return nullptr; }

 private:
  std::int64_t extent_;  // the filter's span in steps, dilation included
  Padding padding_;
};

/// A 2-D pool (MaxPool2D, AvgPool2D) along a sequence, its window one row high: the 1-D pools'
/// shared part (sequence.cc instantiates it for the two).
template <typename Pool>
class Pool1D : public Pool {
 public:
  Shape build(Graph& graph, const Shape& input) override;
  void forward(const Tensor& input, Tensor& output, const OpContext& context) override;
  std::unique_ptr<GpuLayer> make_gpu_layer() const override { return nullptr; }

 protected:
  /// `kind` names the 1-D class in messages ("MaxPool1D").
  Pool1D(const char* kind, std::string name, std::int64_t window, std::int64_t stride,
         Padding padding);
};

/// Max pooling along a sequence [steps, channels], SAME or VALID.
class MaxPool1D final : public Pool1D<MaxPool2D> {
 public:
  MaxPool1D(std::string name, std::int64_t window, std::int64_t stride, Padding padding)
      : Pool1D("MaxPool1D", std::move(name), window, stride, padding) {}
};

/// Average pooling along a sequence [steps, channels], SAME (the covered steps' mean) or VALID.
class AvgPool1D final : public Pool1D<AvgPool2D> {
 public:
  AvgPool1D(std::string name, std::int64_t window, std::int64_t stride, Padding padding)
      : Pool1D("AvgPool1D", std::move(name), window, stride, padding) {}
};

/// Terse constructors (stride 0: = window for the pools).
std::unique_ptr<Layer> conv1d(std::string name, std::int64_t filters, std::int64_t kernel,
                              Activation activation = Activation::kNone, std::int64_t stride = 1,
                              Padding padding = Padding::kSame, std::int64_t dilation = 1);
std::unique_ptr<Layer> max_pool1d(std::string name, std::int64_t window, std::int64_t stride = 0,
                                  Padding padding = Padding::kValid);
std::unique_ptr<Layer> avg_pool1d(std::string name, std::int64_t window, std::int64_t stride = 0,
                                  Padding padding = Padding::kValid);
/// Keras's GlobalAveragePooling1D and GlobalMaxPooling1D: [steps, channels] to [channels], by
/// GlobalAveragePooling2D and GlobalMaxPooling2D, which take sequences as they are.
std::unique_ptr<Layer> global_avg_pool1d(std::string name);
std::unique_ptr<Layer> global_max_pool1d(std::string name);

}  // namespace cohort
