#include "cohort/core/nn/models.h"

#include <string>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/ops/ops.h"

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

Model build_model(const std::string& name, Graph& graph, const std::vector<std::int64_t>& hidden) {
  if (name == "mlp") return mlp(graph, hidden);
  if (name == "cnn") return cnn(graph);
  if (name == "small_cnn") return small_cnn(graph);
  throw InvalidArgument("unknown model \"" + name + "\"; known models: mlp, cnn, small_cnn");
}

}  // namespace cohort
