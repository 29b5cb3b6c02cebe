// Prints, as JSON, the variables of an LSTM, a GRU, a bidirectional LSTM, multi-head attention
// (plain and causal), an LSTM and a GRU under a padding mask, a masked cross-attention,
// transposed, depthwise and separable convolutions, an upsampling and a group normalisation, the
// inputs, the output, a gradient of the output and the gradients each layer computes from it:
// what torch_parity_test.py checks against PyTorch's LSTM, GRU, MultiheadAttention,
// ConvTranspose2d, Conv2d, Upsample and GroupNorm, implementations independent of Cohort's.
#include <cstdio>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "cohort/core/nn/gradient_check.h"
#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/ops/attention.h"
#include "cohort/core/nn/ops/depthwise.h"
#include "cohort/core/nn/ops/normalization.h"
#include "cohort/core/nn/ops/recurrent.h"
#include "cohort/core/nn/ops/upsampling.h"

using namespace cohort;

namespace {

void print(const char* name, std::span<const float> values) {
  std::printf("\"%s\": [", name);
  for (std::size_t i = 0; i < values.size(); ++i) std::printf("%s%.9g", i ? ", " : "", values[i]);
  std::printf("]");
}

// One layer's case: its variables (in the graph's order), inputs, output and gradients, and the
// shapes of the input and the output. The layer takes an example of shape `example` ("x": a
// sequence [steps, features], or an image), and, where `value` is given, a second input
// ("value": a cross-attention's value, a recurrent layer's initial state); where `lengths` are
// given, a mask of each example's first lengths[b] steps of its last sequence input ("mask").
void run(const char* name, Layer& layer, const Shape& example, std::int64_t batch,
         const Shape& value = {}, const std::vector<std::int64_t>& lengths = {}) {
  Graph graph;
  std::vector<Shape> shapes = {example};
  if (!value.empty()) shapes.push_back(value);
  const std::int64_t mask_steps = shapes.back()[0];
  if (!lengths.empty()) shapes.push_back({mask_steps});
  layer.build_node(graph, shapes);
  graph.initialize(3);
  // Biases (and a normalisation's scale and shift) that are not their initial zeros and ones, so
  // that their places in the sums are checked too.
  std::uint64_t seed = 17;
  for (const Variable& v : graph.variables())
    if (v.name.ends_with("bias") || v.name.ends_with("gamma") || v.name.ends_with("beta")) {
      const Tensor random = random_tensor({v.size}, seed++);
      std::copy(random.span().begin(), random.span().end(), graph.values(v).begin());
    }
  std::vector<Tensor> inputs;
  for (std::size_t i = 0; i < (value.empty() ? 1 : 2); ++i) {
    Shape shape = shapes[i];
    shape.insert(shape.begin(), batch);
    inputs.push_back(random_tensor(shape, 5 + i, -2.0f, 2.0f));
  }
  if (!lengths.empty()) {
    Tensor mask({batch, mask_steps});
    for (std::int64_t b = 0; b < batch; ++b)
      for (std::int64_t t = 0; t < lengths[static_cast<std::size_t>(b)]; ++t)
        mask[b * mask_steps + t] = 1.0f;
    inputs.push_back(mask);
  }
  std::vector<const Tensor*> given;
  for (const Tensor& t : inputs) given.push_back(&t);
  Tensor y;
  layer.forward_node(given, y, {});
  const Tensor grad_y = random_tensor(y.shape(), 8);
  std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()));
  std::vector<Tensor> grad_inputs(inputs.size());
  std::vector<Tensor*> targets;
  for (Tensor& t : grad_inputs) targets.push_back(&t);
  layer.backward_node(given, y, grad_y, targets, grads);
  std::printf(",\n\"%s\": {", name);
  const char* separator = "";
  for (const Variable& v : graph.variables()) {
    std::printf("%s", separator);
    separator = ", ";
    print(v.name.substr(v.name.find('/') + 1).c_str(), graph.values(v));
    std::printf(", ");
    print(("grad:" + v.name.substr(v.name.find('/') + 1)).c_str(),
          std::span<const float>(grads).subspan(static_cast<std::size_t>(v.offset),
                                                 static_cast<std::size_t>(v.size)));
  }
  std::vector<std::pair<const char*, const Tensor*>> tensors = {
      {"x", &inputs[0]}, {"y", &y}, {"grad_y", &grad_y}, {"grad_x", &grad_inputs[0]}};
  if (!value.empty()) {
    tensors.push_back({"value", &inputs[1]});
    tensors.push_back({"grad_value", &grad_inputs[1]});
  }
  if (!lengths.empty()) tensors.push_back({"mask", &inputs.back()});
  for (auto [key, t] : tensors) {
    std::printf("%s", separator);
    separator = ", ";
    print(key, t->span());
  }
  for (auto [key, t] : {std::pair{"x_shape", &inputs[0]}, std::pair{"y_shape", &y}}) {
    const std::vector<float> dims(t->shape().begin(), t->shape().end());
    std::printf(", ");
    print(key, dims);
  }
  std::printf("}");
}

}  // namespace

int main() {
  const std::int64_t batch = 2, steps = 7, features = 8, units = 4, heads = 2;
  std::printf("{\"batch\": %ld, \"steps\": %ld, \"features\": %ld, \"units\": %ld, \"heads\": %ld",
              static_cast<long>(batch), static_cast<long>(steps), static_cast<long>(features),
              static_cast<long>(units), static_cast<long>(heads));
  LSTM lstm("rnn", units, /*return_sequences=*/true);
  run("lstm", lstm, {steps, features}, batch);
  GRU gru("rnn", units, /*return_sequences=*/true);
  run("gru", gru, {steps, features}, batch);
  // From a given initial state to the final state (PyTorch's (h_0, c_0) and (h_n, c_n)).
  LSTM lstm_state("rnn", units, {.initial_state = true, .return_state = true});
  run("lstm_state", lstm_state, {steps, features}, batch, {2 * units});
  GRU gru_state("rnn", units, {.initial_state = true, .return_state = true});
  run("gru_state", gru_state, {steps, features}, batch, {units});
  Bidirectional bilstm("rnn", std::make_unique<LSTM>("rnn/forward", units, true),
                       std::make_unique<LSTM>("rnn/backward", units, true));
  run("bidirectional_lstm", bilstm, {steps, features}, batch);
  MultiHeadAttention attention("mha", heads);
  run("attention", attention, {steps, features}, batch);
  MultiHeadAttention causal("mha", heads, 0, /*causal=*/true);
  run("causal_attention", causal, {steps, features}, batch);
  // Padding masks: the first example reads every step, the second its first 4.
  const std::vector<std::int64_t> lengths = {steps, 4};
  LSTM masked_lstm("rnn", units, /*return_sequences=*/true);
  run("masked_lstm", masked_lstm, {steps, features}, batch, {}, lengths);
  GRU masked_gru("rnn", units, /*return_sequences=*/true);
  run("masked_gru", masked_gru, {steps, features}, batch, {}, lengths);
  // Cross-attention of 5 query steps to a value of 7 steps of 6 features, masked.
  MultiHeadAttention cross("mha", heads, 0, false, 0.0f, /*cross=*/true);
  run("cross_attention", cross, {5, features}, batch, {steps, 6}, lengths);
  // Transposed convolutions of a [5, 6, 3] image to 4 filters: SAME with an odd padding (the
  // extra row after) and an even one, VALID with overlapping windows and with gaps, a ReLU,
  // dilation (_d) and output_padding (_op).
  struct TransposeCase {
    const char* name;
    std::int64_t kernel_h, kernel_w, stride_h, stride_w;
    Padding padding;
    Activation activation;
    std::int64_t dilation = 1;
    std::optional<std::int64_t> output_padding = std::nullopt;
  };
  for (const TransposeCase& c : {
           TransposeCase{"conv_transpose_same_3x3_2x2", 3, 3, 2, 2, Padding::kSame, Activation::kNone},
           TransposeCase{"conv_transpose_same_4x4_2x2_relu", 4, 4, 2, 2, Padding::kSame, Activation::kRelu},
           TransposeCase{"conv_transpose_same_3x2_2x1", 3, 2, 2, 1, Padding::kSame, Activation::kNone},
           TransposeCase{"conv_transpose_valid_3x3_2x2", 3, 3, 2, 2, Padding::kValid, Activation::kNone},
           TransposeCase{"conv_transpose_valid_1x1_3x3", 1, 1, 3, 3, Padding::kValid, Activation::kNone},
           TransposeCase{"conv_transpose_same_3x3_1x1_d2", 3, 3, 1, 1, Padding::kSame, Activation::kNone, 2},
           TransposeCase{"conv_transpose_valid_2x3_2x2_d2", 2, 3, 2, 2, Padding::kValid, Activation::kNone, 2},
           TransposeCase{"conv_transpose_same_3x3_2x2_op0", 3, 3, 2, 2, Padding::kSame, Activation::kNone, 1, 0},
           TransposeCase{"conv_transpose_same_4x4_2x2_op1", 4, 4, 2, 2, Padding::kSame, Activation::kNone, 1, 1},
           TransposeCase{"conv_transpose_valid_3x3_2x2_d2_op1_relu", 3, 3, 2, 2, Padding::kValid, Activation::kRelu, 2, 1}}) {
    Conv2DTranspose::Options o;
    o.filters = 4;
    o.kernel_h = c.kernel_h;
    o.kernel_w = c.kernel_w;
    o.stride_h = c.stride_h;
    o.stride_w = c.stride_w;
    o.padding = c.padding;
    o.activation = c.activation;
    o.dilation_h = o.dilation_w = c.dilation;
    o.output_padding_h = o.output_padding_w = c.output_padding;
    Conv2DTranspose layer("up", o);
    run(c.name, layer, {5, 6, 3}, batch);
  }
  UpSampling2D upsampling("up", 2, 3);
  run("upsampling_nearest", upsampling, {5, 6, 3}, batch);
  UpSampling2D bilinear("up", 3, 2, Interpolation::kBilinear);
  run("upsampling_bilinear", bilinear, {5, 6, 3}, batch);
  // Depthwise and separable convolutions of the same image, named
  // {depthwise,separable}_{same,valid}_{kernel}_{stride}_{depth multiplier}[_d{dilation}][_relu].
  DepthwiseConv2D depthwise("dw", {.kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2,
                                   .depth_multiplier = 2, .activation = Activation::kRelu});
  run("depthwise_same_3_2_2_relu", depthwise, {5, 6, 3}, batch);
  DepthwiseConv2D valid("dw", {.kernel_h = 2, .kernel_w = 2, .padding = Padding::kValid});
  run("depthwise_valid_2_1_1", valid, {5, 6, 3}, batch);
  DepthwiseConv2D dilated("dw", {.kernel_h = 3, .kernel_w = 3, .dilation_h = 2, .dilation_w = 2,
                                 .depth_multiplier = 2});
  run("depthwise_same_3_1_2_d2", dilated, {5, 6, 3}, batch);
  auto separable = separable_conv2d("sep", 4, 3, Activation::kRelu, 1, Padding::kSame, 2);
  run("separable_same_3_1_2_relu", *separable, {5, 6, 3}, batch);
  GroupNormalization group_norm("gn", 2);
  run("group_norm", group_norm, {5, 6, 4}, batch);
  std::printf("}\n");
}
