#pragma once
// The built-in models, for 28x28x1 images (Fashion-MNIST) and 10 classes, and the sequence
// encoders they and the examples are made of (transformer_block, sequence_encoder), for any
// sequence.

#include <cstdint>
#include <string>
#include <vector>

#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/model.h"

namespace cohort {

/// Multilayer perceptron: one ReLU Dense per entry of `hidden`, then 10 logits (the first Dense
/// flattens the images).
/// Variables "hidden1/...", "hidden2/...", ..., "logits/...".
Model mlp(Graph& graph, std::vector<std::int64_t> hidden = {256, 128});

/// TensorFlow's "Deep MNIST" tutorial network: conv 5x5x32 SAME + ReLU, max-pool 2, conv 5x5x64
/// SAME + ReLU, max-pool 2, Dense 1024 + ReLU, dropout, Dense 10.
Model cnn(Graph& graph, float dropout_rate = 0.5f);

/// A small, fast CNN: conv 3x3x16 SAME + ReLU, max-pool 2, conv 3x3x32 SAME + ReLU, max-pool 2,
/// Dense 10.
Model small_cnn(Graph& graph);

/// How resnet() is built.
struct ResNetOptions {
  /// Filters of each stage; every stage after the first halves the image (stride 2).
  std::vector<std::int64_t> widths = {16, 32, 64};
  /// Residual blocks per stage.
  int blocks_per_stage = 2;
  /// Batch normalisation with statistics synchronised over the replicas.
  bool sync_batch_norm = false;
};

/// A small residual network (He et al. 2016, the CIFAR ResNets) for 28x28x1 images: conv 3x3 +
/// batch norm + ReLU, then per stage `blocks_per_stage` basic blocks (conv 3x3, BN, ReLU, conv
/// 3x3, BN, added to the block's input — through a 1x1 convolution and BN where the shape
/// changes — then ReLU), global average pooling and Dense 10. Variables "stem/...",
/// "stage<s>_block<b>/...", "logits/...". With the defaults, 14 weighted layers and 175k
/// parameters.
Model resnet(Graph& graph, const ResNetOptions& options = {});

/// A MobileNet (Howard et al. 2017) for 28x28x1 images: conv 3x3 of 32 filters + batch norm +
/// ReLU, then five depthwise-separable blocks (a 3x3 depthwise convolution, then a 1x1
/// convolution, each followed by batch norm and ReLU) to 64, 128 (stride 2), 128, 256 (stride 2)
/// and 256 channels, global average pooling and Dense 10. Variables "stem/...",
/// "block<b>/depthwise...", "block<b>/pointwise...", "logits/..."; 137k parameters. CPU only
/// (DepthwiseConv2D has no GPU path). `sync_batch_norm`: its statistics synchronised over the
/// replicas, as resnet()'s.
Model mobilenet(Graph& graph, bool sync_batch_norm = false);

/// A recurrent classifier that reads each image row by row, as a sequence of 28 steps of 28
/// pixels: Reshape, an LSTM (`cell` "lstm") or a GRU ("gru") of `units`, Dense 10. Variables
/// "<cell>/...", "logits/...".
Model rnn(Graph& graph, const std::string& cell = "lstm", std::int64_t units = 128);

/// A pre-norm Transformer encoder block on a sequence node x [steps, dim]: x + attention(norm(x)),
/// then that plus ffn(norm(.)), the feed-forward network Dense(ffn_units, ReLU) and Dense(dim)
/// at every step. Layers "<name>/norm1", "<name>/attention", "<name>/residual1", "<name>/norm2",
/// "<name>/ffn1", "<name>/ffn2", "<name>/residual2". With a `dropout` above 0, the attention
/// weights and each sublayer's output before its residual are dropped at that rate (the
/// Transformer's own placement; "<name>/dropout1", "<name>/dropout2"). `causal`: a decoder's
/// mask. `mask`: x's padding mask (padding_mask()), if it has one: no step attends to padding.
/// Returns the block's output node.
Node transformer_block(Model& model, Node x, const std::string& name, std::int64_t heads,
                       std::int64_t ffn_units, float dropout = 0.0f, bool causal = false,
                       Node mask = {});

/// A pre-norm Transformer decoder block on a sequence node x [steps, dim] that reads `memory`
/// [memory steps, memory features] (an encoder's output): x + causal self-attention(norm(x)),
/// then that plus cross-attention(norm(.), memory) (masked by `memory_mask`, if valid), then
/// that plus ffn(norm(.)) as transformer_block()'s. Layers "<name>/norm1", "<name>/attention",
/// "<name>/residual1", "<name>/norm2", "<name>/cross_attention", "<name>/residual2",
/// "<name>/norm3", "<name>/ffn1", "<name>/ffn2", "<name>/residual3" (and "<name>/dropout1" to
/// "3" with a dropout). x takes no mask: pad a shorter target after its tokens, where no step
/// before the padding reads it (causal attention) and a loss of zero targets skips it. Returns
/// the block's output node.
Node transformer_decoder_block(Model& model, Node x, Node memory, const std::string& name,
                               std::int64_t heads, std::int64_t ffn_units, float dropout = 0.0f,
                               Node memory_mask = {});

/// Greedy decoding with a decoder trained by teacher forcing (transformer_decoder_block's
/// models), whose examples hold the decoder's input at [begin, begin + steps) of each row: the
/// start token, then the target but its last token. Fills that input step by step with the
/// model's most probable token (the output's rows of classes, [steps, classes]: one pass of the
/// model per step) and returns the tokens, [rows, steps]. `rows` is the model's input with the
/// other parts (the source) filled; what it holds at the decoder's positions is ignored. The
/// output holds the decoder's steps alone, [steps, classes], or a row per position of the rows,
/// [width, classes]: a decoder-only model (a causal language model) continues a prompt at
/// [0, p) of each row with begin = p - 1 and start_token -1 (a negative start token keeps each
/// row's own token at begin: here its prompt's last), up to steps = width - p + 1, the last of
/// them past the row's end.
Tensor greedy_decode(Model& model, const Tensor& rows, std::int64_t begin, std::int64_t steps,
                     float start_token);

/// How beam_decode searches.
struct BeamOptions {
  /// The sequences kept open at each step (1 without an end token: greedy_decode's tokens).
  int beam_width = 4;
  /// A token that ends a sequence (its later steps then hold it and add nothing to its score);
  /// -1: none, every sequence is `steps` long.
  int end_token = -1;
  /// GNMT's length penalty alpha (Wu et al. 2016): the sequences compared at the end by their
  /// log-probability over ((5 + length) / 6)^alpha, so that ended ones are not favoured for
  /// being short; 0: by their log-probability.
  double length_penalty = 0.0;
};

/// Beam search with the same decoder and rows as greedy_decode: at each step every open
/// sequence is extended by each token, scored by the sum of its tokens' log-probabilities (a
/// softmax of the output's logits over the classes), and the `beam_width` best stay open; one
/// that emits the end token leaves the beam for its row's ended sequences (the beam_width best by
/// the penalised score), as in GNMT's search. Returns each row's best sequence, open or ended, by
/// the penalised score, [rows, steps], and where `log_probabilities` is given, its score (before
/// the penalty) per row. One pass of the model per step over rows x beam_width examples. With a
/// beam as wide as every sequence of steps - 1 tokens, the search is exhaustive. InvalidArgument
/// as greedy_decode's, for a beam_width below 1, an end_token that is not a class, and logits
/// that are not finite.
Tensor beam_decode(Model& model, const Tensor& rows, std::int64_t begin, std::int64_t steps,
                   float start_token, const BeamOptions& options = {},
                   std::vector<double>* log_probabilities = nullptr);

/// How sample_decode draws.
struct SampleOptions {
  /// The logits are divided by it before the softmax: below 1 sharper, above 1 flatter; > 0.
  float temperature = 1.0f;
  /// Each step draws from its k likeliest tokens alone (0: from all).
  int top_k = 0;
  /// Each step draws from the fewest likeliest tokens whose probabilities reach top_p (nucleus
  /// sampling, Holtzman et al. 2020), in (0, 1]; 1: from all.
  float top_p = 1.0f;
  /// The draws' seed: the same seed, model and rows give the same tokens; row b draws from an
  /// engine of the seed and b, so its tokens are the same whatever the rows after it.
  std::uint64_t seed = 0;
  /// Tokens never drawn, as if their logits were -infinity: a vocabulary's padding and unknown
  /// ids, say ({0, 1} for TextVectorizer's).
  std::vector<int> excluded{};
};

/// Sampling with the same decoder and rows as greedy_decode: each step's token is drawn from the
/// softmax of its logits over the temperature, among the top_k likeliest and then the top_p
/// nucleus of those, and fed to the next step; one pass of the model per step. Returns the
/// tokens, [rows, steps]. A top_k of 1 (or a temperature near 0) is greedy decoding.
/// InvalidArgument as greedy_decode's, for a temperature that is not above 0 and finite, a top_k
/// below 0, a top_p outside (0, 1], every token excluded, and logits that are not finite.
Tensor sample_decode(Model& model, const Tensor& rows, std::int64_t begin, std::int64_t steps,
                     float start_token, const SampleOptions& options = {});

/// A sequence x [steps, features] encoded as one vector, by `kind`: "conv1d" (a 1-D convolution
/// of `units` filters, kernel 5, ReLU; a max pool of 2 where there are 4 steps or more; another
/// such convolution; the max over the steps), "lstm", "gru", "bilstm" (an LSTM each way, 2 units
/// out) or "transformer" (Dense to `units` at every step, a position embedding, two
/// transformer_block()s of 4 heads (or the most up to 4 that divide units) and 2 units of
/// feed-forward, a layer normalisation, the mean over the steps). `mask`: x's padding mask
/// (padding_mask()), if it has one: the recurrent layers, the attention and the mean skip the
/// padded steps (the convolutions read them as they are). What example_tabular and example_text
/// put between their inputs and their outputs. InvalidArgument for another kind.
///
/// Its layers are named after their part: conv1, pool1, conv2, pool2; lstm; gru; bilstm
/// (bilstm/forward, bilstm/backward); embed, position, block1, block2 (transformer_block's
/// names under each), norm, pool. A `name` puts them under it ("encoder/embed", ...), for a
/// model that has layers of those names of its own, or two encoders.
Node sequence_encoder(Model& model, Node x, const std::string& kind, std::int64_t units,
                      Node mask = {}, const std::string& name = "");

/// How transformer() is built.
struct TransformerOptions {
  std::int64_t dim = 64;  ///< features per step inside the blocks
  std::int64_t heads = 4;
  int blocks = 2;
};

/// A small Transformer encoder (Vaswani et al. 2017, with the norms first, as ViT) over each
/// image's rows: 28 steps of 28 pixels projected to `dim` (Dense over the last axis), a learned
/// position embedding, `blocks` blocks of multi-head self-attention and a feed-forward network
/// of 2 dim (ReLU), each behind a layer normalisation and added back; a last normalisation, the
/// mean over the steps, Dense 10. Variables "embed/...", "position/...", "block<b>/...",
/// "norm/...", "logits/...".
Model transformer(Graph& graph, const TransformerOptions& options = {});

/// The built-in model `name` ("mlp", "cnn", "small_cnn", "resnet", "mobilenet", "lstm" and "gru"
/// (rnn()'s two cells) or "transformer"); `hidden` is used by mlp only, `resnet_options` by
/// resnet only, but for its sync_batch_norm, which mobilenet (the other model with batch
/// normalisation) takes too.
/// Throws InvalidArgument naming the known models for any other name.
Model build_model(const std::string& name, Graph& graph,
                  const std::vector<std::int64_t>& hidden = {256, 128},
                  const ResNetOptions& resnet_options = {});

}  // namespace cohort
