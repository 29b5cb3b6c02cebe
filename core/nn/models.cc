#include "cohort/core/nn/models.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <utility>
#include <string>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/ops/attention.h"
#include "cohort/core/nn/ops/depthwise.h"
#include "cohort/core/nn/ops/merge.h"
#include "cohort/core/nn/ops/normalization.h"
#include "cohort/core/nn/ops/ops.h"
#include "cohort/core/nn/ops/recurrent.h"
#include "cohort/core/nn/ops/sequence.h"

namespace cohort {
namespace {

const Shape kImageShape = {28, 28, 1};
constexpr int kClasses = 10;

}  // namespace

Model mlp(Graph& graph, std::vector<std::int64_t> hidden) {
  // Dense flattens its input itself: no Flatten layer, no copy of the images.
  Model model(graph, kImageShape, kClasses);
  for (std::size_t i = 0; i < hidden.size(); ++i)
    model.add(dense("hidden" + std::to_string(i + 1), hidden[i], Activation::kRelu));
  model.add(dense("logits", kClasses));
  return model;
}

Model cnn(Graph& graph, float dropout_rate) {
  Model model(graph, kImageShape, kClasses);
  model.add(conv2d("conv1", 32, 5, Activation::kRelu))
      .add(max_pool2d("pool1", 2))
      .add(conv2d("conv2", 64, 5, Activation::kRelu))
      .add(max_pool2d("pool2", 2))
      .add(dense("fc1", 1024, Activation::kRelu))
      .add(dropout("dropout", dropout_rate))
      .add(dense("logits", kClasses));
  return model;
}

Model small_cnn(Graph& graph) {
  Model model(graph, kImageShape, kClasses);
  model.add(conv2d("conv1", 16, 3, Activation::kRelu))
      .add(max_pool2d("pool1", 2))
      .add(conv2d("conv2", 32, 3, Activation::kRelu))
      .add(max_pool2d("pool2", 2))
      .add(dense("logits", kClasses));
  return model;
}

namespace {

// conv 3x3 (stride), BN and ReLU, conv 3x3, BN; the shortcut (1x1 conv and BN when the shape
// changes) added; ReLU. Each ReLU is fused into the BN or the Add before it.
Node basic_block(Model& model, Node x, const std::string& name, std::int64_t in,
                 std::int64_t filters, std::int64_t stride, bool sync) {
  Node y = model.apply(conv2d(name + "/conv1", filters, 3, Activation::kNone, stride), x);
  y = model.apply(batch_norm(name + "/bn1", sync, Activation::kRelu), y);
  y = model.apply(conv2d(name + "/conv2", filters, 3), y);
  y = model.apply(batch_norm(name + "/bn2", sync), y);
  Node shortcut = x;
  if (stride != 1 || in != filters) {
    shortcut = model.apply(conv2d(name + "/shortcut", filters, 1, Activation::kNone, stride), x);
    shortcut = model.apply(batch_norm(name + "/shortcut_bn", sync), shortcut);
  }
  return model.apply(add(name + "/add", Activation::kRelu), {y, shortcut});
}

}  // namespace

Model resnet(Graph& graph, const ResNetOptions& options) {
  if (options.widths.empty() || options.blocks_per_stage < 1)
    throw InvalidArgument("resnet: needs at least one stage and one block per stage");
  Model model(graph);
  Node x = model.input(kImageShape);
  const bool sync = options.sync_batch_norm;
  x = model.apply(conv2d("stem/conv", options.widths.front(), 3), x);
  x = model.apply(batch_norm("stem/bn", sync, Activation::kRelu), x);
  std::int64_t channels = options.widths.front();
  for (std::size_t s = 0; s < options.widths.size(); ++s) {
    for (int b = 0; b < options.blocks_per_stage; ++b) {
      const std::int64_t stride = s > 0 && b == 0 ? 2 : 1;
      const std::string name =
          "stage" + std::to_string(s + 1) + "_block" + std::to_string(b + 1);
      x = basic_block(model, x, name, channels, options.widths[s], stride, sync);
      channels = options.widths[s];
    }
  }
  x = model.apply(global_avg_pool2d("pool"), x);
  model.apply(dense("logits", kClasses), x);
  return model;
}

Model mobilenet(Graph& graph, bool sync_batch_norm) {
  Model model(graph);
  Node x = model.input(kImageShape);
  x = model.apply(conv2d("stem/conv", 32, 3), x);
  x = model.apply(batch_norm("stem/bn", sync_batch_norm, Activation::kRelu), x);
  struct Block {
    std::int64_t filters, stride;
  };
  int b = 0;
  for (const Block& block : {Block{64, 1}, Block{128, 2}, Block{128, 1}, Block{256, 2}, Block{256, 1}}) {
    const std::string name = "block" + std::to_string(++b);
    x = model.apply(std::make_unique<DepthwiseConv2D>(
                        name + "/depthwise", DepthwiseConv2D::Options{.stride_h = block.stride,
                                                                      .stride_w = block.stride,
                                                                      .use_bias = false}),
                    x);
    x = model.apply(batch_norm(name + "/depthwise_bn", sync_batch_norm, Activation::kRelu), x);
    x = model.apply(conv2d(name + "/pointwise", block.filters, 1), x);
    x = model.apply(batch_norm(name + "/pointwise_bn", sync_batch_norm, Activation::kRelu), x);
  }
  x = model.apply(global_avg_pool2d("pool"), x);
  model.apply(dense("logits", kClasses), x);
  return model;
}

Model rnn(Graph& graph, const std::string& cell, std::int64_t units) {
  if (cell != "lstm" && cell != "gru")
    throw InvalidArgument("rnn: cell \"" + cell + "\" is not lstm or gru");
  Model model(graph, kImageShape, kClasses);
  model.add(reshape("rows", {kImageShape[0], kImageShape[1] * kImageShape[2]}))
      .add(cell == "lstm" ? lstm(cell, units) : gru(cell, units))
      .add(dense("logits", kClasses));
  return model;
}

// Pre-norm (the norm before each sublayer, as GPT-2 and ViT place it).
namespace {

// The inputs of a layer over sequences: `inputs`, then the (last) sequence's mask where it has
// one.
std::vector<Node> with_mask(std::vector<Node> inputs, Node mask) {
  if (mask.valid()) inputs.push_back(mask);
  return inputs;
}

// x + a dropout of y, the residual connection around a sublayer.
Node residual(Model& model, Node x, Node y, const std::string& name, const std::string& part,
              float dropout) {
  if (dropout > 0) y = model.apply(cohort::dropout(name + "/dropout" + part, dropout), y);
  return model.apply(add(name + "/residual" + part), {x, y});
}

// x + the feed-forward network of norm(x): Dense(ffn_units, ReLU), Dense(x's width), a dropout;
// the layers "<name>/norm<part>", "<name>/ffn1", "<name>/ffn2", "<name>/dropout<part>",
// "<name>/residual<part>".
Node feed_forward(Model& model, Node x, const std::string& name, const std::string& part,
                  std::int64_t ffn_units, float dropout) {
  const std::int64_t dim = model.shape(x).back();
  Node y = model.apply(layer_norm(name + "/norm" + part), x);
  y = model.apply(dense(name + "/ffn1", ffn_units, Activation::kRelu, /*flatten=*/false), y);
  y = model.apply(dense(name + "/ffn2", dim, Activation::kNone, /*flatten=*/false), y);
  return residual(model, x, y, name, part, dropout);
}

}  // namespace

Node transformer_block(Model& model, Node x, const std::string& name, std::int64_t heads,
                       std::int64_t ffn_units, float dropout, bool causal, Node mask) {
  Node y = model.apply(layer_norm(name + "/norm1"), x);
  y = model.apply(multi_head_attention(name + "/attention", heads, 0, causal, dropout),
                  with_mask({y}, mask));
  x = residual(model, x, y, name, "1", dropout);
  return feed_forward(model, x, name, "2", ffn_units, dropout);
}

Node transformer_decoder_block(Model& model, Node x, Node memory, const std::string& name,
                               std::int64_t heads, std::int64_t ffn_units, float dropout,
                               Node memory_mask) {
  Node y = model.apply(layer_norm(name + "/norm1"), x);
  y = model.apply(multi_head_attention(name + "/attention", heads, 0, /*causal=*/true, dropout),
                  y);
  x = residual(model, x, y, name, "1", dropout);
  y = model.apply(layer_norm(name + "/norm2"), x);
  y = model.apply(cross_attention(name + "/cross_attention", heads, 0, dropout),
                  with_mask({y, memory}, memory_mask));
  x = residual(model, x, y, name, "2", dropout);
  return feed_forward(model, x, name, "3", ffn_units, dropout);
}

namespace {

// A Transformer encoder over a sequence node, down to one vector: every step projected to `dim`,
// a position embedding, `blocks` pre-norm blocks (feed-forward 2 dim), a last normalisation, the
// mean over the steps.
// `prefix` comes before each layer's name ("" or "encoder/").
Node transformer_encoder(Model& model, Node x, std::int64_t dim, std::int64_t heads, int blocks,
                         Node mask = {}, const std::string& prefix = "") {
  x = model.apply(dense(prefix + "embed", dim, Activation::kNone, /*flatten=*/false), x);
  x = model.apply(position_embedding(prefix + "position"), x);
  for (int b = 1; b <= blocks; ++b)
    x = transformer_block(model, x, prefix + "block" + std::to_string(b), heads, 2 * dim, 0.0f,
                          false, mask);
  x = model.apply(layer_norm(prefix + "norm"), x);
  return model.apply(global_avg_pool1d(prefix + "pool"), with_mask({x}, mask));
}

}  // namespace

namespace {

// The decoder's input of each of `rows`, `copies` times over (row b's copies together): the
// rows with [begin, begin + steps) emptied but for the start token (the row's own where it is
// negative). InvalidArgument, naming
// `caller`, where that range is not within the rows.
Tensor decoder_input(const char* caller, const Tensor& rows, std::int64_t begin,
                     std::int64_t steps, float start_token, std::int64_t copies) {
  if (rows.rank() != 2 || begin < 0 || steps < 1 || begin + steps > rows.dim(1))
    throw InvalidArgument(std::string(caller) + ": the decoder's input [" + std::to_string(begin) +
                          ", " + std::to_string(begin + steps) + ") is not within rows " +
                          to_string(rows.shape()));
  const std::int64_t n = rows.dim(0), width = rows.dim(1);
  Tensor input({n * copies, width});
  for (std::int64_t i = 0; i < n * copies; ++i) {
    float* row = input.data() + i * width;
    std::copy_n(rows.data() + (i / copies) * width, width, row);
    const float own = row[begin];  // kept for a negative start token
    std::fill_n(row + begin, steps, 0.0f);
    row[begin] = start_token < 0 ? own : start_token;
  }
  return input;
}

// Where a decoder's logits are in the model's output for n examples: `steps` rows of classes per
// example (the decoder's steps alone, a teacher-forced decoder's) or, in an output of rank 3 or
// more, one row per position of the `width` of the rows (a decoder-only model's), of which the
// decoder's are those from `begin`.
struct DecoderOutput {
  std::int64_t classes = 0, rows = 0, first = 0;
  // The logits of example i at the decoder's step t.
  const float* logits(const Tensor& output, std::int64_t i, std::int64_t t) const {
    return output.data() + (i * rows + first + t) * classes;
  }
};

// The model's output for `input` (n examples), checked to hold the decoder's logits as
// DecoderOutput says; InvalidArgument naming `caller` otherwise.
DecoderOutput decoder_output(const char* caller, const Tensor& output, std::int64_t n,
                             std::int64_t steps, std::int64_t width, std::int64_t begin) {
  DecoderOutput d{0, steps, 0};
  if (output.rank() >= 3 && output.dim(1) == width && width != steps) d = {0, width, begin};
  d.classes = output.size() / std::max<std::int64_t>(1, n * d.rows);
  if (output.rank() == 0 || output.dim(0) != n || (output.rank() >= 3 && output.dim(1) != d.rows) ||
      d.classes < 2 || d.classes * n * d.rows != output.size())
    throw InvalidArgument(std::string(caller) + ": output " + to_string(output.shape()) +
                          " is not " + std::to_string(steps) +
                          " rows of classes per example (the decoder's steps) nor " +
                          std::to_string(width) + " (one per position of the rows)");
  return d;
}

}  // namespace

Tensor greedy_decode(Model& model, const Tensor& rows, std::int64_t begin, std::int64_t steps,
                     float start_token) {
  Tensor input = decoder_input("greedy_decode", rows, begin, steps, start_token, 1);
  const std::int64_t n = rows.dim(0), width = rows.dim(1);
  Tensor tokens({n, steps});
  if (n == 0) return tokens;
  for (std::int64_t t = 0; t < steps; ++t) {
    // A causal decoder's output at step t reads its input up to t alone: the tokens so far.
    const Tensor& output = model.predict(input);
    const DecoderOutput d = decoder_output("greedy_decode", output, n, steps, width, begin);
    const std::int64_t classes = d.classes;
    for (std::int64_t b = 0; b < n; ++b) {
      const float* row = d.logits(output, b, t);
      const auto token = static_cast<float>(std::max_element(row, row + classes) - row);
      tokens[b * steps + t] = token;
      if (t + 1 < steps) input[b * width + begin + t + 1] = token;
    }
  }
  return tokens;
}

Tensor sample_decode(Model& model, const Tensor& rows, std::int64_t begin, std::int64_t steps,
                     float start_token, const SampleOptions& options) {
  if (!(options.temperature > 0.0f && std::isfinite(options.temperature)) || options.top_k < 0 ||
      !(options.top_p > 0.0f && options.top_p <= 1.0f))
    throw InvalidArgument("sample_decode: temperature " + std::to_string(options.temperature) + ", top_k " +
                          std::to_string(options.top_k) + ", top_p " + std::to_string(options.top_p) +
                          ": the temperature must be above 0, top_k 0 (all) or more, top_p in (0, 1]");
  Tensor input = decoder_input("sample_decode", rows, begin, steps, start_token, 1);
  const std::int64_t n = rows.dim(0), width = rows.dim(1);
  Tensor tokens({n, steps});
  if (n == 0) return tokens;
  // Each row's own engine, of the seed and its index, so that its tokens do not depend on what
  // the other rows draw.
  std::vector<std::mt19937_64> engines;
  for (std::int64_t b = 0; b < n; ++b)
    engines.emplace_back(options.seed * 0x9e3779b97f4a7c15ULL + static_cast<std::uint64_t>(b) + 1);
  std::vector<std::pair<double, std::int64_t>> ranked;  // a step's tokens, likeliest first
  for (std::int64_t t = 0; t < steps; ++t) {
    const Tensor& output = model.predict(input);
    const DecoderOutput d = decoder_output("sample_decode", output, n, steps, width, begin);
    for (std::int64_t b = 0; b < n; ++b) {
      const float* logits = d.logits(output, b, t);
      ranked.clear();
      for (std::int64_t c = 0; c < d.classes; ++c) {
        if (!std::isfinite(logits[c]))
          throw InvalidArgument("sample_decode: the output of row " + std::to_string(b) +
                                " holds logits that are not finite at step " + std::to_string(t));
        if (std::find(options.excluded.begin(), options.excluded.end(), c) == options.excluded.end())
          ranked.emplace_back(static_cast<double>(logits[c]) / options.temperature, c);
      }
      if (ranked.empty())
        throw InvalidArgument("sample_decode: every one of the output's " + std::to_string(d.classes) +
                              " tokens is excluded");
      // Likeliest first, ties to the lower token; the top_k kept, then their softmax.
      std::stable_sort(ranked.begin(), ranked.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
      if (options.top_k > 0 && static_cast<std::size_t>(options.top_k) < ranked.size())
        ranked.resize(static_cast<std::size_t>(options.top_k));
      const double top = ranked.front().first;
      double total = 0.0;
      for (auto& [weight, token] : ranked) total += weight = std::exp(weight - top);
      // The nucleus: the fewest of them whose probabilities reach top_p.
      double kept = 0.0;
      std::size_t count = 0;
      while (count < ranked.size() && (count == 0 || kept < options.top_p * total)) kept += ranked[count++].first;
      // A draw in [0, kept), by 53 random bits.
      const double u = static_cast<double>(engines[static_cast<std::size_t>(b)]() >> 11) * 0x1p-53 * kept;
      std::size_t pick = 0;
      for (double sum = ranked[0].first; pick + 1 < count && sum <= u;) sum += ranked[++pick].first;
      const auto token = static_cast<float>(ranked[pick].second);
      tokens[b * steps + t] = token;
      if (t + 1 < steps) input[b * width + begin + t + 1] = token;
    }
  }
  return tokens;
}

Tensor beam_decode(Model& model, const Tensor& rows, std::int64_t begin, std::int64_t steps,
                   float start_token, const BeamOptions& options,
                   std::vector<double>* log_probabilities) {
  const std::int64_t k_count = options.beam_width;
  if (k_count < 1)
    throw InvalidArgument("beam_decode: beam_width " + std::to_string(k_count) + ": must be >= 1");
  Tensor input = decoder_input("beam_decode", rows, begin, steps, start_token, k_count);
  const std::int64_t n = rows.dim(0), width = rows.dim(1), beams = n * k_count;
  Tensor result({n, steps});
  if (log_probabilities != nullptr) log_probabilities->assign(static_cast<std::size_t>(n), 0.0);
  if (n == 0) return result;
  const auto penalised = [&](double score, std::int64_t length) {
    return score / std::pow((5.0 + static_cast<double>(length)) / 6.0, options.length_penalty);
  };
  // The open sequences: beam i = b * beam_width + k of row b, its tokens so far and score
  // (-infinity: no sequence). A sequence that emits the end token leaves the beam for its row's
  // ended ones (the beam_width best by their penalised score), as in GNMT's search, so that the
  // open ones keep every place.
  constexpr double kNone = -std::numeric_limits<double>::infinity();
  std::vector<std::int64_t> tokens(static_cast<std::size_t>(beams * steps), 0), next_tokens = tokens;
  std::vector<double> score(static_cast<std::size_t>(beams), kNone), next_score = score;
  for (std::int64_t b = 0; b < n; ++b) score[static_cast<std::size_t>(b * k_count)] = 0.0;
  struct Ended {
    double score;
    std::int64_t length;
    std::vector<std::int64_t> tokens;
  };
  std::vector<std::vector<Ended>> ended(static_cast<std::size_t>(n));
  struct Candidate {
    double score;
    std::int64_t parent, token;
  };
  std::vector<Candidate> candidates;
  for (std::int64_t t = 0; t < steps; ++t) {
    const Tensor& output = model.predict(input);
    const DecoderOutput d = decoder_output("beam_decode", output, beams, steps, width, begin);
    const std::int64_t classes = d.classes;
    if (options.end_token >= classes)
      throw InvalidArgument("beam_decode: end_token " + std::to_string(options.end_token) +
                            " is not one of the output's " + std::to_string(classes) + " classes");
    for (std::int64_t b = 0; b < n; ++b) {
      candidates.clear();
      for (std::int64_t k = 0; k < k_count; ++k) {
        const auto i = static_cast<std::size_t>(b * k_count + k);
        if (score[i] == kNone) continue;
        // log softmax of the step's logits, in double.
        const float* logits = d.logits(output, static_cast<std::int64_t>(i), t);
        const double most = *std::max_element(logits, logits + classes);
        double sum = 0.0;
        for (std::int64_t c = 0; c < classes; ++c) sum += std::exp(double(logits[c]) - most);
        const double log_sum = most + std::log(sum);
        if (!std::isfinite(log_sum))
          throw InvalidArgument("beam_decode: the output of row " + std::to_string(b) +
                                " holds logits that are not finite at step " + std::to_string(t));
        for (std::int64_t c = 0; c < classes; ++c)
          candidates.push_back({score[i] + double(logits[c]) - log_sum, k, c});
      }
      // Best first, ties to the earlier beam and then the lower token. An ended candidate joins
      // the ended ones; the first beam_width others stay open.
      std::sort(candidates.begin(), candidates.end(), [](const Candidate& x, const Candidate& y) {
        if (x.score != y.score) return x.score > y.score;
        return x.parent != y.parent ? x.parent < y.parent : x.token < y.token;
      });
      std::int64_t open = 0;
      std::vector<Ended>& done = ended[static_cast<std::size_t>(b)];
      for (const Candidate& c : candidates) {
        const auto parent = static_cast<std::ptrdiff_t>(b * k_count + c.parent) * steps;
        if (c.token == options.end_token) {
          Ended e{c.score, t + 1, std::vector<std::int64_t>(tokens.begin() + parent,
                                                             tokens.begin() + parent + steps)};
          std::fill(e.tokens.begin() + t, e.tokens.end(), c.token);
          done.push_back(std::move(e));
          continue;
        }
        if (open == k_count) continue;
        const auto i = static_cast<std::ptrdiff_t>(b * k_count + open++);
        std::copy_n(tokens.begin() + parent, t, next_tokens.begin() + i * steps);
        next_tokens[static_cast<std::size_t>(i * steps + t)] = c.token;
        next_score[static_cast<std::size_t>(i)] = c.score;
      }
      for (std::int64_t k = open; k < k_count; ++k) next_score[static_cast<std::size_t>(b * k_count + k)] = kNone;
      // The beam_width best ended ones.
      std::stable_sort(done.begin(), done.end(), [&](const Ended& x, const Ended& y) {
        return penalised(x.score, x.length) > penalised(y.score, y.length);
      });
      if (static_cast<std::int64_t>(done.size()) > k_count) done.resize(static_cast<std::size_t>(k_count));
    }
    std::swap(tokens, next_tokens);
    std::swap(score, next_score);
    // Each open sequence's tokens so far into its decoder input, after the start token.
    if (t + 1 < steps)
      for (std::int64_t i = 0; i < beams; ++i)
        for (std::int64_t s = 0; s <= t; ++s)
          input[i * width + begin + s + 1] =
              static_cast<float>(tokens[static_cast<std::size_t>(i * steps + s)]);
  }
  // Each row's best of its ended and open sequences, by the penalised score.
  for (std::int64_t b = 0; b < n; ++b) {
    const std::int64_t* best = nullptr;
    double best_value = kNone, best_score = kNone;
    const auto consider = [&](double s, std::int64_t length, const std::int64_t* sequence) {
      if (s == kNone || (best != nullptr && !(penalised(s, length) > best_value))) return;
      best = sequence;
      best_value = penalised(s, length);
      best_score = s;
    };
    for (const Ended& e : ended[static_cast<std::size_t>(b)]) consider(e.score, e.length, e.tokens.data());
    for (std::int64_t k = 0; k < k_count; ++k) {
      const auto i = static_cast<std::size_t>(b * k_count + k);
      consider(score[i], steps, tokens.data() + i * static_cast<std::size_t>(steps));
    }
    if (best == nullptr) throw Error("beam_decode: row " + std::to_string(b) + " kept no sequence");
    for (std::int64_t t = 0; t < steps; ++t) result[b * steps + t] = static_cast<float>(best[t]);
    if (log_probabilities != nullptr) (*log_probabilities)[static_cast<std::size_t>(b)] = best_score;
  }
  return result;
}

Node sequence_encoder(Model& model, Node x, const std::string& kind, std::int64_t units,
                      Node mask, const std::string& name) {
  const std::string prefix = name.empty() ? "" : name + "/";
  if (kind == "conv1d") {  // reads every step: its pooled steps have no mask
    x = model.apply(conv1d(prefix + "conv1", units, 5, Activation::kRelu), x);
    if (model.shape(x)[0] >= 4) x = model.apply(max_pool1d(prefix + "pool1", 2), x);
    x = model.apply(conv1d(prefix + "conv2", units, 5, Activation::kRelu), x);
    return model.apply(global_max_pool1d(prefix + "pool2"), x);
  }
  if (kind == "lstm") return model.apply(lstm(prefix + "lstm", units), with_mask({x}, mask));
  if (kind == "gru") return model.apply(gru(prefix + "gru", units), with_mask({x}, mask));
  if (kind == "bilstm")
    return model.apply(bidirectional(prefix + "bilstm", lstm(prefix + "bilstm/forward", units),
                                     lstm(prefix + "bilstm/backward", units)),
                       with_mask({x}, mask));
  if (kind != "transformer")
    throw InvalidArgument("sequence_encoder: \"" + kind +
                          "\" is not conv1d, lstm, gru, bilstm or transformer");
  std::int64_t heads = 4;
  while (units % heads != 0) --heads;
  return transformer_encoder(model, x, units, heads, 2, mask, prefix);
}

Model transformer(Graph& graph, const TransformerOptions& options) {
  if (options.dim < 1 || options.heads < 1 || options.blocks < 1 ||
      options.dim % options.heads != 0)
    throw InvalidArgument("transformer: dim " + std::to_string(options.dim) + ", heads " +
                          std::to_string(options.heads) + ", blocks " +
                          std::to_string(options.blocks) +
                          ": each must be >= 1, and dim a multiple of heads");
  Model model(graph);
  Node x = model.input(kImageShape);
  x = model.apply(reshape("rows", {kImageShape[0], kImageShape[1] * kImageShape[2]}), x);
  x = transformer_encoder(model, x, options.dim, options.heads, options.blocks);
  model.apply(dense("logits", kClasses), x);
  return model;
}

Model build_model(const std::string& name, Graph& graph, const std::vector<std::int64_t>& hidden,
                  const ResNetOptions& resnet_options) {
  if (name == "mlp") return mlp(graph, hidden);
  if (name == "cnn") return cnn(graph);
  if (name == "small_cnn") return small_cnn(graph);
  if (name == "resnet") return resnet(graph, resnet_options);
  if (name == "mobilenet") return mobilenet(graph, resnet_options.sync_batch_norm);
  if (name == "lstm" || name == "gru") return rnn(graph, name);
  if (name == "transformer") return transformer(graph);
  throw InvalidArgument("unknown model \"" + name +
                        "\"; known models: mlp, cnn, small_cnn, resnet, mobilenet, lstm, gru, "
                        "transformer");
}

}  // namespace cohort
