#include "cohort/core/nn/model.h"

#include <algorithm>
#include <utility>

#include "cohort/core/base/error.h"

namespace cohort {
namespace {

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.size() >= prefix.size() && text.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

Model::Model(Graph& graph, Shape example_shape, int num_classes)
    : graph_(&graph), num_classes_(num_classes), loss_value_(Shape{}), accuracy_value_(Shape{}) {
  if (num_classes < 1)
    throw InvalidArgument("Model: num_classes = " + std::to_string(num_classes) + ", must be >= 1");
  for (std::int64_t d : example_shape)
    if (d < 1) throw InvalidArgument("Model: bad example shape " + to_string(example_shape));
  shapes_.push_back(std::move(example_shape));
}

Model& Model::add(std::unique_ptr<Layer> layer) {
  if (!layer) throw InvalidArgument("Model::add: null layer");
  if (gpu_)
    throw InvalidArgument("Model::add: the model is on GPU " + std::to_string(gpu_device_) +
                          "; add every layer before set_gpu()");
  for (const auto& existing : layers_)
    if (existing->name() == layer->name())
      throw InvalidArgument("Model::add: a layer named \"" + layer->name() + "\" is already in the model");
  Shape output = layer->build(*graph_, shapes_.back());
  // A layer owns the variables named "<layer>/...", whether it created them or a tower did.
  const std::string prefix = layer->name() + "/";
  has_variables_.push_back(std::any_of(graph_->variables().begin(), graph_->variables().end(),
                                       [&](const Variable& v) { return starts_with(v.name, prefix); }));
  shapes_.push_back(std::move(output));
  layers_.push_back(std::move(layer));
  outputs_.emplace_back();
  return *this;
}

void Model::check_batch(const Tensor& images, std::span<const std::int32_t> labels) const {
  if (layers_.empty()) throw InvalidArgument("Model: no layers");
  if (shapes_.back() != Shape{num_classes_})
    throw InvalidArgument("Model: the last layer outputs " + to_string(shapes_.back()) +
                          " per example, expected [" + std::to_string(num_classes_) + "] logits");
  const Shape& example = shapes_.front();
  const bool shape_ok = images.rank() == static_cast<int>(example.size()) + 1 && images.dim(0) > 0 &&
                        std::equal(example.begin(), example.end(), images.shape().begin() + 1);
  if (!shape_ok)
    throw InvalidArgument("Model: images " + to_string(images.shape()) +
                          " are not a batch of examples of shape " + to_string(example));
  if (static_cast<std::int64_t>(labels.size()) != images.dim(0))
    throw InvalidArgument("Model: " + std::to_string(labels.size()) + " labels for " +
                          std::to_string(images.dim(0)) + " images");
}

void Model::forward(const Tensor& images, const OpContext& context) {
  const Tensor* input = &images;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    layers_[i]->forward(*input, outputs_[i], context);
    input = &outputs_[i];
  }
}

StepMetrics Model::metrics(const Tensor& logits, std::span<const std::int32_t> labels) {
  StepMetrics m;
  m.loss = loss_.forward(logits, labels);
  m.accuracy = accuracy(logits, labels);
  loss_value_[0] = m.loss;
  accuracy_value_[0] = m.accuracy;
  return m;
}

StepMetrics Model::train_step(const Tensor& images, std::span<const std::int32_t> labels,
                              std::span<float> grads, const OpContext& context) {
  check_batch(images, labels);
  if (static_cast<std::int64_t>(grads.size()) != graph_->num_parameters())
    throw InvalidArgument("Model::train_step: " + std::to_string(grads.size()) +
                          " gradient slots for " + std::to_string(graph_->num_parameters()) +
                          " parameters");
  if (gpu_) return gpu_step(images, labels, grads, context);
  forward(images, context);
  const StepMetrics m = metrics(outputs_.back(), labels);

  // Layers before the first one with variables need no backward pass at all, and that first one
  // needs no input gradient.
  const auto first = static_cast<std::size_t>(
      std::find(has_variables_.begin(), has_variables_.end(), true) - has_variables_.begin());
  Tensor* grad_output = &grad_a_;
  Tensor* grad_input = &grad_b_;
  loss_.backward(*grad_output);
  for (std::size_t i = layers_.size(); i-- > first;) {
    const Tensor& input = i == 0 ? images : outputs_[i - 1];
    layers_[i]->backward(input, outputs_[i], *grad_output, i == first ? nullptr : grad_input, grads);
    std::swap(grad_output, grad_input);
  }
  zero_unused_gradients(grads);
  return m;
}

StepMetrics Model::evaluate(const Tensor& images, std::span<const std::int32_t> labels) {
  check_batch(images, labels);
  OpContext context;
  context.training = false;
  if (gpu_) return gpu_step(images, labels, {}, context);
  forward(images, context);
  return metrics(outputs_.back(), labels);
}

void Model::zero_unused_gradients(std::span<float> grads) {
  if (unused_ranges_for_ != graph_->num_parameters()) {
    unused_ranges_.clear();
    for (const Variable& v : graph_->variables()) {
      const bool used = std::any_of(layers_.begin(), layers_.end(), [&](const auto& layer) {
        return starts_with(v.name, layer->name() + "/");
      });
      if (used || v.size == 0) continue;
      if (!unused_ranges_.empty() && unused_ranges_.back().second == v.offset)
        unused_ranges_.back().second = v.offset + v.size;
      else
        unused_ranges_.emplace_back(v.offset, v.offset + v.size);
    }
    unused_ranges_for_ = graph_->num_parameters();
  }
  for (const auto& [begin, end] : unused_ranges_)
    std::fill(grads.begin() + begin, grads.begin() + end, 0.0f);
}

const Tensor* Model::fetch(const std::string& name) const {
  if (name == "loss") return &loss_value_;
  if (name == "accuracy") return &accuracy_value_;
  if (name == "logits") return outputs_.empty() ? nullptr : &outputs_.back();
  if (gpu_) return nullptr;
  for (std::size_t i = 0; i < layers_.size(); ++i)
    if (layers_[i]->name() == name) return &outputs_[i];
  return nullptr;
}

double Model::flops_per_example() const {
  double flops = 0.0;
  bool first = true;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    flops += layers_[i]->flops_per_example();
    if (has_variables_[i] && first) {
      flops -= input_grad_flops_per_example(*layers_[i]);
      first = false;
    }
  }
  return flops;
}

}  // namespace cohort
