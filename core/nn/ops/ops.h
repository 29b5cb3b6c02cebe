#pragma once
// The CPU ops: Dense, Conv2D, MaxPool2D, ReLU, Flatten, Dropout (Layers), the fused softmax
// cross-entropy loss and accuracy, declared here, and the terse constructors of the layers of
// these headers; the rest of the catalogue is declared in normalization.h (BatchNormalization,
// LayerNormalization), pooling.h (AvgPool2D, GlobalAveragePooling2D, GlobalMaxPooling2D),
// merge.h (Add, Multiply, Concatenate), elementwise.h (LeakyReLU, Sigmoid, Tanh, GELU, Softmax,
// SiLU, Softplus, ELU, Reshape) and embedding.h, and for sequences in sequence.h (Conv1D,
// MaxPool1D, AvgPool1D, the 1-D global pools), recurrent.h (LSTM, GRU, Bidirectional) and
// attention.h (MultiHeadAttention, PositionEmbedding), each with its terse constructors.
// Images are NHWC, filters HWIO, everything float32; each op's CPU path lives in its own .cc
// file beside its header.
//
// A model is a few lines of these (see core/model.h):
//
//   Model model(graph, {28, 28, 1});
//   model.add(conv2d("conv1", 32, 5, Activation::kRelu))
//       .add(max_pool2d("pool1", 2))
//       .add(dense("hidden", 128, Activation::kRelu))   // flattens its input
//       .add(dropout("dropout", 0.5f))
//       .add(dense("logits", 10));
//
// Every layer object belongs to one tower (one thread); layers of several towers share variables
// through the graph, whose values they read in forward and backward. Forward and backward keep
// and reuse their scratch buffers, so a steady-state step allocates nothing (beyond what Eigen's
// matrix product allocates internally).
//
// Intra-op threads (core/threads.h): Dense's products run on Eigen's threads; Conv2D and
// MaxPool2D split the batch among intra_op_threads() threads, each running single-threaded
// products on its own chunks.

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/initializer.h"
#include "cohort/core/nn/layer.h"
#include "cohort/core/nn/ops/im2col.h"
#include "cohort/core/nn/ops/winograd.h"
#include "cohort/core/nn/tensor.h"

namespace cohort {

/// TensorFlow's padding modes: kSame gives ceil(in / stride) outputs (zero or -inf padding split
/// evenly, the extra one after), kValid ceil((in - window + 1) / stride); kCausal (Keras's, for
/// convolutions over sequences) window - 1 zeros before the first element and then VALID:
/// ceil(in / stride) outputs, none of which sees a later step.
enum class Padding { kSame, kValid, kCausal };

/// Output length and padding before the first element and after the last of one spatial
/// dimension. Throws InvalidArgument when the window does not fit (kValid with window > in) or a
/// size is < 1.
struct SpatialDim {
  std::int64_t out = 0;
  std::int64_t pad_before = 0;
  std::int64_t pad_after = 0;
};
SpatialDim spatial_dim(std::int64_t in, std::int64_t window, std::int64_t stride, Padding padding);

/// The geometry of a 2-D convolution of an image [height, width, channels] by a kh x kw filter
/// (its taps `dilation` apart) at `stride`, with `padding` (spatial_dim's sizes for the filter's
/// extent). InvalidArgument "<kind> \"<name>\": input [..]: ..." where the filter does not fit.
im2col::Geometry conv_geometry(const char* kind, const std::string& name, const Shape& image,
                               std::int64_t kernel_h, std::int64_t kernel_w, std::int64_t stride_h,
                               std::int64_t stride_w, Padding padding, std::int64_t dilation_h = 1,
                               std::int64_t dilation_w = 1);

/// Fully connected layer: output = activation(flatten(input) * kernel + bias), with variables
/// "<name>/kernel" [in, units] (Glorot uniform by default) and "<name>/bias" [units] (zeros).
/// The input's non-batch dimensions are flattened, so a Flatten before a Dense is optional. With
/// `flatten` false the layer applies to the last axis at every position instead, as Keras's
/// Dense does: a sequence [steps, features] becomes [steps, units] through a kernel [features,
/// units] that every step shares.
class Dense : public Layer {
 public:
  Dense(std::string name, std::int64_t units, Activation activation = Activation::kNone,
        Initializer kernel_initializer = Initializer::glorot_uniform(), bool flatten = true);

  const std::string& name() const override { return name_; }
  Shape build(Graph& graph, const Shape& input) override;
  void forward(const Tensor& input, Tensor& output, const OpContext& context) override;
  void backward(const Tensor& input, const Tensor& output, const Tensor& grad_output,
                Tensor* grad_input, std::span<float> grads) override;
  std::unique_ptr<GpuLayer> make_gpu_layer() const override;
  double flops_per_example() const override;
  double input_grad_flops_per_example() const override;

 private:
  friend class DenseGpu;
  /// The output's shape for `input`'s, the batch included.
  Shape output_shape(const Shape& input) const;

  std::string name_;
  std::int64_t units_;
  Activation activation_;
  Initializer kernel_initializer_;
  bool flatten_;
  Graph* graph_ = nullptr;
  std::int64_t in_ = 0;         // values per row of the products
  std::int64_t positions_ = 1;  // rows per example: 1, or the positions over the last axis
  std::int64_t kernel_offset_ = 0;
  std::int64_t bias_offset_ = 0;
  Tensor grad_pre_;  // dLoss/d(pre-activation) when an activation is fused
  InPlaceUpdate* update_in_place_ = nullptr;  // the last forward pass's, for its backward pass
};

/// 2-D convolution over NHWC images with an HWIO filter "<name>/kernel" [kh, kw, in, filters]
/// (He normal by default) and, with use_bias, "<name>/bias" [filters] (zeros), then the
/// activation. Computed as
/// im2col + matrix product a few images at a time, so the column buffer stays in cache (the
/// backward pass recomputes each chunk's columns rather than keeping the whole batch's), or, for
/// stride-1 3x3 and 5x5 filters over enough channels, by Winograd's F(2x2, r x r), which needs
/// 2.25x (3x3) to 2.8x (5x5) fewer multiplications, or, for a receptive field of a few values (a
/// first layer over 1 to 3 channels), by direct convolution in registers. flops_per_example()
/// counts direct convolution whatever the algorithm.
class Conv2D : public Layer {
 public:
  struct Options {
    std::int64_t filters = 1;
    std::int64_t kernel_h = 3, kernel_w = 3;
    std::int64_t stride_h = 1, stride_w = 1;
    Padding padding = Padding::kSame;
    Activation activation = Activation::kNone;
    Initializer kernel_initializer = Initializer::he_normal();
    /// Dilation (atrous convolution): the filter taps are this far apart; 1 is the usual
    /// convolution. Dilated convolutions use im2col and have no GPU path.
    std::int64_t dilation_h = 1, dilation_w = 1;
    /// kAuto: Winograd F(2x2, r x r) where it serves (stride 1, 3x3 or 5x5, >= 8 channels in
    /// and out; see winograd.h), direct convolution for thin receptive fields (a first layer's
    /// few channels; see direct_conv.h), else im2col. kWinograd on a layer it cannot serve makes
    /// build() throw InvalidArgument.
    enum class Algorithm { kAuto, kIm2col, kWinograd } algorithm = Algorithm::kAuto;
    /// false: no bias variable, for a convolution that batch normalisation follows (its beta
    /// takes the bias's place; PyTorch's bias=False, Keras's use_bias=False).
    bool use_bias = true;
  };
  Conv2D(std::string name, Options options);
  /// Whether build() chose the Winograd path.
  bool uses_winograd() const { return winograd_.has_value(); }
  /// Whether build() chose direct convolution (a thin receptive field: see direct_conv.h).
  bool uses_direct() const { return direct_; }

  const std::string& name() const override { return name_; }
  Shape build(Graph& graph, const Shape& input) override;
  void forward(const Tensor& input, Tensor& output, const OpContext& context) override;
  void backward(const Tensor& input, const Tensor& output, const Tensor& grad_output,
                Tensor* grad_input, std::span<float> grads) override;
  std::unique_ptr<GpuLayer> make_gpu_layer() const override;
  double flops_per_example() const override;
  double input_grad_flops_per_example() const override;

 private:
  friend class Conv2DGpu;
  // How a batch is cut into chunks of images, and how many threads share them.
  struct Plan {
    std::int64_t chunk = 1;   // images per chunk
    std::int64_t chunks = 1;
    int threads = 1;
  };
  Plan plan(std::int64_t batch) const;

  std::string name_;
  Options options_;
  Graph* graph_ = nullptr;
  im2col::Geometry geometry_;
  bool patch_columns_ = false;  // im2col layout: patch columns for thin patch rows (see im2col.h)
  bool pointwise_ = false;      // 1x1, stride 1: the images are their own column buffer
  bool direct_ = false;         // direct convolution of a thin receptive field (direct_conv.h)
  // Without use_bias, the paths that add a bias add zeros, and its gradient goes to a sink.
  const float* bias(const float* values) const {
    return options_.use_bias ? values + bias_offset_ : no_bias_.data();
  }
  float* bias_grad(float* grads) { return options_.use_bias ? grads + bias_offset_ : bias_sink_.data(); }

  std::int64_t kernel_offset_ = 0;
  std::int64_t bias_offset_ = 0;
  std::vector<float> no_bias_;    // without use_bias: zeros, one per filter
  std::vector<float> bias_sink_;  // without use_bias: where its gradient goes
  Tensor columns_;    // per thread, im2col of one chunk of images, reused as its column gradient
  Tensor grad_pre_;   // per thread, dLoss/d(pre-activation) of one chunk
  Tensor partials_;   // per thread after the first, its filter and bias gradient sums
  Tensor padded_;     // per thread, one chunk of images with their zero border (direct_)
  std::optional<winograd::Convolution> winograd_;
};

/// The windows of a 2-D pooling layer over NHWC images: their size, stride and padding (checked
/// on construction) and, once built, the input and output geometry. MaxPool2D and AvgPool2D
/// derive from it.
class Pool2D : public Layer {
 public:
  const std::string& name() const override { return name_; }
  Shape build(Graph& graph, const Shape& input) override;

 protected:
  /// `kind` names the layer's class in messages ("MaxPool2D").
  Pool2D(const char* kind, std::string name, std::int64_t window_h, std::int64_t window_w,
         std::int64_t stride_h, std::int64_t stride_w, Padding padding);
  /// The input rows [first, second) that output row oh's windows cover (padding excluded).
  std::pair<std::int64_t, std::int64_t> rows(std::int64_t oh) const;
  /// The input columns [first, second) that output column ow's windows cover.
  std::pair<std::int64_t, std::int64_t> cols(std::int64_t ow) const;
  /// `MaxPool2D "pool1"`: the layer in messages.
  std::string what() const;

  const char* kind_;
  std::string name_;
  std::int64_t window_h_, window_w_, stride_h_, stride_w_;
  Padding padding_;
  std::int64_t in_h_ = 0, in_w_ = 0, channels_ = 0;
  SpatialDim dim_h_, dim_w_;
};

/// Max pooling over NHWC windows (padding never wins the max). The argmax of each output is kept
/// for the backward pass.
class MaxPool2D : public Pool2D {
 public:
  MaxPool2D(std::string name, std::int64_t window, std::int64_t stride,
            Padding padding = Padding::kValid);
  MaxPool2D(std::string name, std::int64_t window_h, std::int64_t window_w, std::int64_t stride_h,
            std::int64_t stride_w, Padding padding);

  Shape build(Graph& graph, const Shape& input) override;
  void forward(const Tensor& input, Tensor& output, const OpContext& context) override;
  void backward(const Tensor& input, const Tensor& output, const Tensor& grad_output,
                Tensor* grad_input, std::span<float> grads) override;
  std::unique_ptr<GpuLayer> make_gpu_layer() const override;
  double flops_per_example() const override;

 private:
  friend class MaxPool2DGpu;
  std::vector<std::int32_t> argmax_;  // per output element: its input's offset in the example
};

/// max(x, 0), elementwise.
class ReLU : public Layer {
 public:
  explicit ReLU(std::string name) : name_(std::move(name)) {}
  const std::string& name() const override { return name_; }
  Shape build(Graph& graph, const Shape& input) override;
  void forward(const Tensor& input, Tensor& output, const OpContext& context) override;
  void backward(const Tensor& input, const Tensor& output, const Tensor& grad_output,
                Tensor* grad_input, std::span<float> grads) override;
  std::unique_ptr<GpuLayer> make_gpu_layer() const override;
  double flops_per_example() const override { return 2.0 * static_cast<double>(size_); }

 private:
  friend class ReLUGpu;
  std::string name_;
  std::int64_t size_ = 0;
};

/// [N, d1, d2, ...] -> [N, d1 * d2 * ...].
class Flatten : public Layer {
 public:
  explicit Flatten(std::string name) : name_(std::move(name)) {}
  const std::string& name() const override { return name_; }
  Shape build(Graph& graph, const Shape& input) override;
  void forward(const Tensor& input, Tensor& output, const OpContext& context) override;
  void backward(const Tensor& input, const Tensor& output, const Tensor& grad_output,
                Tensor* grad_input, std::span<float> grads) override;
  std::unique_ptr<GpuLayer> make_gpu_layer() const override;

 private:
  friend class FlattenGpu;
  std::string name_;
  std::int64_t size_ = 0;
};

/// Inverted dropout: when training, each element is zeroed with probability `rate` and the rest
/// scaled by 1 / (1 - rate); the identity otherwise. The mask is a pure function of
/// (context.seed, layer name, element index), so a step is reproducible and towers given
/// different seeds draw different masks.
class Dropout : public Layer {
 public:
  /// 0 <= rate < 1, else InvalidArgument.
  Dropout(std::string name, float rate);
  const std::string& name() const override { return name_; }
  Shape build(Graph& graph, const Shape& input) override;
  void forward(const Tensor& input, Tensor& output, const OpContext& context) override;
  void backward(const Tensor& input, const Tensor& output, const Tensor& grad_output,
                Tensor* grad_input, std::span<float> grads) override;
  std::unique_ptr<GpuLayer> make_gpu_layer() const override;
  double flops_per_example() const override { return 2.0 * static_cast<double>(size_); }
  /// The mask of the last training forward() (0 or 1 / (1 - rate) per element).
  const Tensor& mask() const { return mask_; }

 private:
  friend class DropoutGpu;
  std::string name_;
  float rate_;
  std::int64_t size_ = 0;
  bool last_training_ = false;
  Tensor mask_;
};

/// The mask Dropout draws: mask[i] is 0 with probability `rate`, else 1 / (1 - rate), a pure
/// function of (key, i) (for a layer's own dropout: Graph::variable_seed(context.seed, name)).
void dropout_mask(std::uint64_t key, float rate, std::span<float> mask);

/// Standard normal draws: noise[i] ~ N(0, 1), a pure function of (key, i), as dropout_mask's.
/// For a layer of one's own that samples (a VAE's z = mean + exp(log_var / 2) * noise): key
/// Graph::variable_seed(context.seed, name()), which differs by worker, step, tower and batch of
/// an accumulated step, and is the same when a run is repeated.
void normal_noise(std::uint64_t key, std::span<float> noise);

/// Adds N(0, stddev^2) noise to every element in training, nothing in inference (Keras's
/// GaussianNoise): a regulariser, or a denoising autoencoder's corruption of its input. Its draws
/// are normal_noise()'s, keyed as Dropout's mask; the gradient passes through unchanged.
class GaussianNoise : public Layer {
 public:
  /// stddev >= 0 and finite, else InvalidArgument.
  GaussianNoise(std::string name, float stddev);
  const std::string& name() const override { return name_; }
  Shape build(Graph& graph, const Shape& input) override;
  void forward(const Tensor& input, Tensor& output, const OpContext& context) override;
  void backward(const Tensor& input, const Tensor& output, const Tensor& grad_output,
                Tensor* grad_input, std::span<float> grads) override;
  double flops_per_example() const override { return 2.0 * static_cast<double>(size_); }

 private:
  std::string name_;
  float stddev_;
  std::int64_t size_ = 0;
};

/// Mean softmax cross-entropy of a batch of logits [N, classes] against integer labels, computed
/// stably (log-sum-exp with the row max subtracted), with label smoothing s: the target is
/// (1 - s) onehot(label) + s / classes; with class weights, each example's loss is multiplied by
/// its label's weight before the mean over the N examples (Keras's class_weight). Not a Layer: it
/// takes the labels. Keeps the softmax of the last forward() for backward().
class SoftmaxCrossEntropy {
 public:
  /// 0 <= label_smoothing < 1, and class weights finite and >= 0 (empty: all 1), else
  /// InvalidArgument.
  explicit SoftmaxCrossEntropy(float label_smoothing = 0.0f, std::vector<float> class_weights = {});
  /// The mean loss. Throws InvalidArgument when labels.size() != N, a label is out of range, or
  /// there are class weights and not one for each class.
  float forward(const Tensor& logits, std::span<const std::int32_t> labels);
  /// grad_logits = weight(label) (softmax - target) / N for the last forward().
  void backward(Tensor& grad_logits) const;
  float label_smoothing() const { return smoothing_; }
  const std::vector<float>& class_weights() const { return weights_; }

 private:
  float smoothing_ = 0.0f;
  std::vector<float> weights_;
  Tensor probabilities_;
  std::vector<std::int32_t> labels_;
};

/// Fraction of rows whose largest logit (the first, on ties) is at the label. Throws
/// InvalidArgument when labels.size() != N.
float accuracy(const Tensor& logits, std::span<const std::int32_t> labels);

// Terse constructors for model definitions.
/// `flatten` false: at every position of the input's last axis (see Dense).
std::unique_ptr<Layer> dense(std::string name, std::int64_t units,
                             Activation activation = Activation::kNone, bool flatten = true);
/// Square kernel and stride.
std::unique_ptr<Layer> conv2d(std::string name, std::int64_t filters, std::int64_t kernel,
                              Activation activation = Activation::kNone, std::int64_t stride = 1,
                              Padding padding = Padding::kSame);
/// Keras's Dense(units, activation="tanh") and Conv2D(..., activation="sigmoid"): the layer under
/// `name` (its variables "<name>/kernel" and "<name>/bias", as without an activation), then the
/// activation() `function` names, as the sublayer "<name>/<function>" of a composite. "relu" is
/// fused as Activation::kRelu (no composite), "" and "linear" are none; another name that
/// activation() does not know is an InvalidArgument.
std::unique_ptr<Layer> dense(std::string name, std::int64_t units, const std::string& function,
                             bool flatten = true);
std::unique_ptr<Layer> conv2d(std::string name, std::int64_t filters, std::int64_t kernel,
                              const std::string& function, std::int64_t stride = 1,
                              Padding padding = Padding::kSame);
/// Any layer, then the activation() `function` names, in the same way: one layer of the layer's
/// name (its variables keep theirs), the activation its sublayer "<name>/<function>"; "" and
/// "linear" give the layer as it is. For the layers whose constructors take no activation by
/// name: activated(conv2d_transpose("up", 1, 4, Activation::kNone, 2), "tanh").
std::unique_ptr<Layer> activated(std::unique_ptr<Layer> layer, const std::string& function);
std::unique_ptr<Layer> max_pool2d(std::string name, std::int64_t window, std::int64_t stride = 0,
                                  Padding padding = Padding::kValid);  ///< stride 0: = window
std::unique_ptr<Layer> relu(std::string name);
std::unique_ptr<Layer> flatten(std::string name);
std::unique_ptr<Layer> dropout(std::string name, float rate);
std::unique_ptr<Layer> gaussian_noise(std::string name, float stddev);
/// Batch normalisation (normalization.h); `synchronized` reduces its statistics over replicas;
/// kRelu fuses the ReLU that usually follows.
std::unique_ptr<Layer> batch_norm(std::string name, bool synchronized = false,
                                  Activation activation = Activation::kNone,
                                  float momentum = 0.9f, float epsilon = 1e-3f);
std::unique_ptr<Layer> layer_norm(std::string name, float epsilon = 1e-3f);
/// normalization.h: `groups` groups of the channels, each normalised per example.
std::unique_ptr<Layer> group_norm(std::string name, std::int64_t groups = 32, float epsilon = 1e-3f);
/// Square window and stride (stride 0: = window), pooling.h.
std::unique_ptr<Layer> avg_pool2d(std::string name, std::int64_t window, std::int64_t stride = 0,
                                  Padding padding = Padding::kValid);
std::unique_ptr<Layer> global_avg_pool2d(std::string name);
std::unique_ptr<Layer> global_max_pool2d(std::string name);
/// merge.h: apply to two or more nodes.
std::unique_ptr<Layer> add(std::string name, Activation activation = Activation::kNone);
std::unique_ptr<Layer> concatenate(std::string name, int axis = -1);
std::unique_ptr<Layer> multiply(std::string name);
std::unique_ptr<Layer> subtract(std::string name);  ///< two inputs: the first less the second
std::unique_ptr<Layer> average(std::string name);
std::unique_ptr<Layer> maximum(std::string name);
std::unique_ptr<Layer> minimum(std::string name);
/// merge.h: [begin, begin + size) of each example along `axis` (the last by default).
std::unique_ptr<Layer> slice(std::string name, std::int64_t begin, std::int64_t size,
                             int axis = -1);
/// elementwise.h. `function`: "relu", "leaky_relu" (slope `alpha` below 0, default 0.2),
/// "sigmoid", "tanh", "gelu", "softmax" (over the last axis), "silu" or "swish" (x sigmoid(x)),
/// "softplus" (log(1 + e^x)) or "elu" (alpha (e^x - 1) below 0, alpha default 1);
/// InvalidArgument naming the known ones otherwise.
std::unique_ptr<Layer> activation(std::string name, const std::string& function,
                                  float alpha = std::numeric_limits<float>::quiet_NaN());
std::unique_ptr<Layer> reshape(std::string name, Shape shape);
/// embedding.h.
std::unique_ptr<Layer> embedding(std::string name, std::int64_t vocabulary, std::int64_t dim);

}  // namespace cohort
