// Prints, as JSON, an LSTM's and a GRU's variables, an input, every step's output, a gradient of
// the outputs and the gradients the layers compute from it: what recurrent_torch_test.py checks
// against PyTorch's LSTM and GRU, an implementation independent of Cohort's.
#include <cstdio>
#include <memory>
#include <span>
#include <vector>

#include "cohort/core/nn/gradient_check.h"
#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/ops/recurrent.h"

namespace {

void print(const char* name, std::span<const float> values) {
  std::printf("\"%s\": [", name);
  for (std::size_t i = 0; i < values.size(); ++i) std::printf("%s%.9g", i ? ", " : "", values[i]);
  std::printf("]");
}

}  // namespace

int main() {
  using namespace cohort;
  const std::int64_t batch = 2, steps = 7, features = 5, units = 4;
  std::printf("{\"batch\": %ld, \"steps\": %ld, \"features\": %ld, \"units\": %ld",
              static_cast<long>(batch), static_cast<long>(steps), static_cast<long>(features),
              static_cast<long>(units));
  for (const char* cell : {"lstm", "gru"}) {
    Graph graph;
    std::unique_ptr<Recurrent> layer;
    if (cell[0] == 'g') {
      layer = std::make_unique<GRU>("rnn", units, /*return_sequences=*/true);
    } else {
      layer = std::make_unique<LSTM>("rnn", units, /*return_sequences=*/true);
    }
    layer->build(graph, {steps, features});
    graph.initialize(3);
    auto bias = graph.values(*graph.find("rnn/bias"));
    const Tensor random_bias = random_tensor({static_cast<std::int64_t>(bias.size())}, 17);
    std::copy(random_bias.span().begin(), random_bias.span().end(), bias.begin());
    const Tensor x = random_tensor({batch, steps, features}, 5, -2.0f, 2.0f);
    Tensor y, grad_x;
    layer->forward(x, y, {});
    const Tensor grad_y = random_tensor(y.shape(), 8);
    std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()));
    layer->backward(x, y, grad_y, &grad_x, grads);
    std::printf(",\n\"%s\": {", cell);
    print("kernel", graph.values(*graph.find("rnn/kernel")));
    std::printf(", ");
    print("recurrent_kernel", graph.values(*graph.find("rnn/recurrent_kernel")));
    std::printf(", ");
    print("bias", bias);
    for (auto [name, t] : {std::pair{"x", &x}, {"y", &y}, {"grad_y", &grad_y}, {"grad_x", &grad_x}}) {
      std::printf(", ");
      print(name, t->span());
    }
    std::printf(", ");
    print("grads", grads);
    std::printf("}");
  }
  std::printf("}\n");
}
