// Prints, as JSON, the variables of an LSTM, a GRU, a bidirectional LSTM and multi-head attention
// (plain and causal), an
// input, the output, a gradient of the output and the gradients each layer computes from it: what
// torch_parity_test.py checks against PyTorch's LSTM, GRU and MultiheadAttention, implementations
// independent of Cohort's.
#include <cstdio>
#include <memory>
#include <span>
#include <vector>

#include "cohort/core/nn/gradient_check.h"
#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/ops/attention.h"
#include "cohort/core/nn/ops/recurrent.h"

using namespace cohort;

namespace {

void print(const char* name, std::span<const float> values) {
  std::printf("\"%s\": [", name);
  for (std::size_t i = 0; i < values.size(); ++i) std::printf("%s%.9g", i ? ", " : "", values[i]);
  std::printf("]");
}

// One layer's case: its variables (in the graph's order), input, output and gradients.
void run(const char* name, Layer& layer, const Shape& example, std::int64_t batch) {
  Graph graph;
  layer.build(graph, example);
  graph.initialize(3);
  // Biases that are not zero, so that their places in the sums are checked too.
  std::uint64_t seed = 17;
  for (const Variable& v : graph.variables())
    if (v.name.ends_with("bias")) {
      const Tensor random = random_tensor({v.size}, seed++);
      std::copy(random.span().begin(), random.span().end(), graph.values(v).begin());
    }
  Shape shape = example;
  shape.insert(shape.begin(), batch);
  const Tensor x = random_tensor(shape, 5, -2.0f, 2.0f);
  Tensor y, grad_x;
  layer.forward(x, y, {});
  const Tensor grad_y = random_tensor(y.shape(), 8);
  std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()));
  layer.backward(x, y, grad_y, &grad_x, grads);
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
  for (auto [key, t] : {std::pair{"x", &x}, {"y", &y}, {"grad_y", &grad_y}, {"grad_x", &grad_x}}) {
    std::printf(", ");
    print(key, t->span());
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
  Bidirectional bilstm("rnn", std::make_unique<LSTM>("rnn/forward", units, true),
                       std::make_unique<LSTM>("rnn/backward", units, true));
  run("bidirectional_lstm", bilstm, {steps, features}, batch);
  MultiHeadAttention attention("mha", heads);
  run("attention", attention, {steps, features}, batch);
  MultiHeadAttention causal("mha", heads, 0, /*causal=*/true);
  run("causal_attention", causal, {steps, features}, batch);
  std::printf("}\n");
}
