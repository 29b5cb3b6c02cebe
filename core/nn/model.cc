#include "cohort/core/nn/model.h"

#include <algorithm>
#include <utility>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/composite.h"
#include "cohort/core/nn/ops/elementwise.h"

namespace cohort {

Model::Model(Graph& graph) : layers_(graph), loss_value_(Shape{}) {
  set_loss(std::make_unique<SoftmaxCrossEntropyLoss>());
}

Model::Model(Graph& graph, Shape example_shape, int num_classes) : Model(graph) {
  if (num_classes < 0)
    throw InvalidArgument("Model: num_classes = " + std::to_string(num_classes) + ", must be >= 0 (0: not declared)");
  declared_classes_ = num_classes;
  input(std::move(example_shape));
}

Node Model::input(Shape shape, std::string name) {
  if (gpu_) throw InvalidArgument("Model::input: the model is on a GPU");
  forward_pending_ = false;  // a changed graph has no pass to take the gradient of
  return layers_.input(std::move(shape), std::move(name));
}

Node Model::apply(std::unique_ptr<Layer> layer, std::span<const Node> inputs) {
  if (gpu_)
    throw InvalidArgument("Model: the model is on GPU " + std::to_string(gpu_device_) +
                          "; apply every layer before set_gpu()");
  forward_pending_ = false;
  const Node node = layers_.apply(std::move(layer), inputs);
  layers_.set_output(node);
  return node;
}

Node Model::apply(std::unique_ptr<Layer> layer, Node input) {
  return apply(std::move(layer), std::span<const Node>(&input, 1));
}

Node Model::apply(std::unique_ptr<Layer> layer, std::initializer_list<Node> inputs) {
  return apply(std::move(layer), std::span<const Node>(inputs.begin(), inputs.size()));
}

Model& Model::add(std::unique_ptr<Layer> layer) {
  if (layers_.num_inputs() == 0) throw InvalidArgument("Model::add: the model has no input");
  apply(std::move(layer), layers_.output());
  return *this;
}

void Model::set_output(Node output) {
  forward_pending_ = false;
  layers_.set_output(output);
}

Model& Model::set_loss(std::unique_ptr<Loss> loss) {
  if (!loss) throw InvalidArgument("Model::set_loss: null loss");
  // The caller's own metrics stay, and each default whose name they do not take comes in; the
  // room is checked first, so that a refusal changes nothing.
  auto defaults = default_metrics(*loss);
  std::erase_if(defaults, [&](const std::unique_ptr<Metric>& metric) {
    const auto at = std::find(metric_names_.begin(), metric_names_.end(), metric->name());
    return at != metric_names_.end() &&
           !loss_metric_[static_cast<std::size_t>(at - metric_names_.begin())];
  });
  const auto after = static_cast<std::size_t>(
                         std::count(loss_metric_.begin(), loss_metric_.end(), false)) +
                     defaults.size();
  if (after > static_cast<std::size_t>(StepMetrics::kMaxMetrics))
    throw InvalidArgument("Model::set_loss: with its default metrics the model would have " +
                          std::to_string(after) + ", more than " +
                          std::to_string(StepMetrics::kMaxMetrics));
  loss_ = std::move(loss);
  for (std::size_t i = metrics_.size(); i-- > 0;) {
    if (!loss_metric_[i]) continue;
    metrics_.erase(metrics_.begin() + static_cast<std::ptrdiff_t>(i));
    metric_names_.erase(metric_names_.begin() + static_cast<std::ptrdiff_t>(i));
    metric_values_.erase(metric_values_.begin() + static_cast<std::ptrdiff_t>(i));
    loss_metric_.erase(loss_metric_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  for (auto& metric : defaults) add_metric(std::move(metric), /*from_loss=*/true);
  return *this;
}

Model& Model::add_metric(std::unique_ptr<Metric> metric) {
  return add_metric(std::move(metric), /*from_loss=*/false);
}

Model& Model::add_metric(std::unique_ptr<Metric> metric, bool from_loss) {
  if (!metric) throw InvalidArgument("Model::add_metric: null metric");
  const std::string name = metric->name();
  if (const auto same = std::find(metric_names_.begin(), metric_names_.end(), name);
      same != metric_names_.end()) {
    const auto i = static_cast<std::size_t>(same - metric_names_.begin());
    if (!loss_metric_[i])
      throw InvalidArgument("Model::add_metric: the model already has a metric named \"" + name +
                            "\"");
    metrics_[i] = std::move(metric);  // the caller's own takes the default's place
    loss_metric_[i] = from_loss;
    return *this;
  }
  if (name == "loss" || name == "logits")
    throw InvalidArgument("Model::add_metric: \"" + name + "\" is a reserved name");
  if (metrics_.size() >= static_cast<std::size_t>(StepMetrics::kMaxMetrics))
    throw InvalidArgument("Model::add_metric: at most " +
                          std::to_string(StepMetrics::kMaxMetrics) + " metrics");
  metrics_.push_back(std::move(metric));
  metric_names_.push_back(name);
  metric_values_.emplace_back(Shape{});
  loss_metric_.push_back(from_loss);
  return *this;
}

Tensor Model::predict_probabilities(const Tensor& features) { return loss_->probabilities(predict(features)); }

std::vector<std::int32_t> Model::predict_classes(const Tensor& features) {
  if (!dynamic_cast<const SoftmaxCrossEntropyLoss*>(loss_.get()))
    throw InvalidArgument("Model::predict_classes: the loss " + loss_->name() +
                          " does not choose one class per example (softmax_cross_entropy does)");
  const Tensor& logits = predict(features);
  const std::int64_t rows = logits.dim(0), classes = rows > 0 ? logits.size() / rows : 0;
  std::vector<std::int32_t> chosen(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* row = logits.data() + r * classes;
    chosen[static_cast<std::size_t>(r)] = static_cast<std::int32_t>(std::max_element(row, row + classes) - row);
  }
  return chosen;
}

std::string Model::summary() const {
  std::string text = layers_.summary() + "loss: " + (loss_ ? loss_->name() : std::string("none"));
  for (std::size_t i = 0; i < metric_names_.size(); ++i)
    text += (i == 0 ? ", metrics: " : ", ") + metric_names_[i];
  return text + "\n";
}

int Model::num_classes() const {
  if (layers_.layers().empty()) return 0;
  const Shape& out = layers_.shape(layers_.output());
  return out.size() == 1 ? static_cast<int>(out[0]) : 0;
}

void Model::check_ready() const {
  if (layers_.layers().empty()) throw InvalidArgument("Model: no layers");
  if (declared_classes_ > 0 && layers_.shape(layers_.output()) != Shape{declared_classes_})
    throw InvalidArgument("Model: the last layer outputs " +
                          to_string(layers_.shape(layers_.output())) + " per example, expected [" +
                          std::to_string(declared_classes_) +
                          "] logits: Model(graph, example_shape, num_classes) declares " +
                          std::to_string(declared_classes_) +
                          " classes; give what the last layer outputs, or leave it out");
}

const Metric* Model::metric(const std::string& name) const {
  const auto at = std::find(metric_names_.begin(), metric_names_.end(), name);
  if (at != metric_names_.end()) return metrics_[static_cast<std::size_t>(at - metric_names_.begin())].get();
  const int accuracy = name == "accuracy" ? accuracy_metric(metric_names_) : -1;
  return accuracy >= 0 ? metrics_[static_cast<std::size_t>(accuracy)].get() : nullptr;
}

void Model::check_data(const Shape& example, const TargetSpec& targets) const {
  check_ready();
  if (layers_.num_inputs() != 1)
    throw InvalidArgument("the data gives one input per example, the model takes " +
                          std::to_string(layers_.num_inputs()));
  if (example != example_shape())
    throw InvalidArgument("the data's examples are " + to_string(example) +
                          ", the model's input takes " + to_string(example_shape()));
  const Shape& prediction = layers_.shape(layers_.output());
  loss_->check(prediction, targets);
  // Keras's habit, a softmax (or sigmoid) as the last layer, would apply it twice where the loss
  // takes logits: the last layer, or the last of a composite's (dense(..., "softmax")).
  const Layer* output_layer = layers_.layer(layers_.output());
  while (const auto* composite = dynamic_cast<const CompositeLayer*>(output_layer))
    output_layer = composite->layers().empty() ? nullptr : composite->layers().back().get();
  if (const auto* last = dynamic_cast<const ElementwiseActivation*>(output_layer)) {
    const std::string applied = loss_->output_activation();
    const bool twice = (applied == "softmax" && last->kind() == ElementwiseActivation::Kind::kSoftmax) ||
                       (applied == "sigmoid" && last->kind() == ElementwiseActivation::Kind::kSigmoid);
    if (twice)
      throw InvalidArgument("the model ends in a " + applied + " (layer \"" + last->name() + "\"), and loss " +
                            loss_->name() + " applies its own to the model's output: remove that layer (the loss "
                            "takes logits, as Keras's with from_logits=True)");
  }
  for (const auto& metric : metrics_) metric->check(prediction, targets);
}

void Model::check_targets(const Targets& targets, std::int64_t batch) const {
  if (targets.size() != batch)
    throw InvalidArgument("Model: " + std::to_string(targets.size()) +
                          (targets.values ? " targets" : " labels") + " for a batch of " +
                          std::to_string(batch));
}

StepMetrics Model::measure(const Tensor& output, const Targets& targets) {
  StepMetrics m;
  m.loss = loss_->forward(output, targets);
  loss_value_[0] = m.loss;
  record_metrics(output, targets, m);
  return m;
}

void Model::record_metrics(const Tensor& output, const Targets& targets, StepMetrics& m) {
  if (metric_totals_ != nullptr) metric_totals_->resize(metrics_.size());
  const int accuracy = accuracy_metric(metric_names_);
  for (std::size_t i = 0; i < metrics_.size(); ++i) {
    m.metrics[i] = metrics_[i]->compute(output, targets);
    metric_values_[i][0] = m.metrics[i];
    if (static_cast<int>(i) == accuracy) m.accuracy = m.metrics[i];
    if (metric_totals_ == nullptr) continue;
    const std::vector<double> counts = metrics_[i]->counts(output, targets, m.metrics[i]);
    std::vector<double>& total = (*metric_totals_)[i];
    if (total.empty()) total.assign(counts.size(), 0.0);
    if (total.size() != counts.size())
      throw InvalidArgument("metric " + metric_names_[i] + ": " + std::to_string(counts.size()) +
                            " counts for a batch, " + std::to_string(total.size()) + " before");
    for (std::size_t k = 0; k < counts.size(); ++k) total[k] += counts[k];
  }
}

StepMetrics Model::run(std::span<const Tensor* const> inputs, const Targets& targets,
                       std::span<float> grads, const OpContext& context) {
  check_ready();
  forward_pending_ = false;
  if (!inputs.empty() && inputs[0]->rank() > 0) check_targets(targets, inputs[0]->dim(0));
  const Tensor& output = layers_.forward(inputs, context);
  const StepMetrics m = measure(output, targets);
  if (grads.empty()) return m;
  loss_->backward(grad_output_);
  input_grads_.assign(layers_.num_inputs(), nullptr);  // a step asks for none
  // Zeroed first: a listener may send them as soon as the backward pass begins.
  for (const auto& [begin, end] : layers_.unused_ranges())
    std::fill(grads.begin() + begin, grads.begin() + end, 0.0f);
  layers_.backward(grad_output_, input_grads_, grads, context.gradients_ready);
  return m;
}

StepMetrics Model::train_step(std::span<const Tensor* const> inputs, const Targets& targets,
                              std::span<float> grads, const OpContext& context) {
  if (graph().num_parameters() == 0)
    throw InvalidArgument("Model::train_step: the model has no parameters to train (its graph holds "
                          "no trainable variable)");
  if (static_cast<std::int64_t>(grads.size()) != graph().num_parameters())
    throw InvalidArgument("Model::train_step: " + std::to_string(grads.size()) +
                          " gradient slots for " + std::to_string(graph().num_parameters()) +
                          " parameters");
  if (gpu_) {
    if (inputs.size() != 1 || targets.values != nullptr)
      throw InvalidArgument("Model: on a GPU, a model takes one input and class labels");
    return gpu_step(*inputs[0], targets.labels, grads, context);
  }
  return run(inputs, targets, grads, context);
}

StepMetrics Model::train_step(const Tensor& features, const Targets& targets,
                              std::span<float> grads, const OpContext& context) {
  const Tensor* inputs[] = {&features};
  return train_step(inputs, targets, grads, context);
}

StepMetrics Model::train_step(const Tensor& images, std::span<const std::int32_t> labels,
                              std::span<float> grads, const OpContext& context) {
  return train_step(images, Targets{labels, nullptr}, grads, context);
}

StepMetrics Model::evaluate(std::span<const Tensor* const> inputs, const Targets& targets) {
  OpContext context;
  context.training = false;
  context.update_state = false;
  if (gpu_) {
    if (inputs.size() != 1 || targets.values != nullptr)
      throw InvalidArgument("Model: on a GPU, a model takes one input and class labels");
    return gpu_step(*inputs[0], targets.labels, {}, context);
  }
  return run(inputs, targets, {}, context);
}

StepMetrics Model::evaluate(const Tensor& features, const Targets& targets) {
  const Tensor* inputs[] = {&features};
  return evaluate(inputs, targets);
}

StepMetrics Model::evaluate(const Tensor& images, std::span<const std::int32_t> labels) {
  return evaluate(images, Targets{labels, nullptr});
}

const Tensor& Model::predict(std::span<const Tensor* const> inputs) {
  if (gpu_)
    throw InvalidArgument("Model::predict: the model is on GPU " + std::to_string(gpu_device_) +
                          "; predict runs on the host");
  check_ready();
  forward_pending_ = false;
  OpContext context;  // the inputs' count and shapes are checked by the forward pass
  context.training = false;
  context.update_state = false;
  return layers_.forward(inputs, context);
}

const Tensor& Model::forward(std::span<const Tensor* const> inputs, const OpContext& context) {
  if (gpu_)
    throw InvalidArgument("Model::forward: the model is on GPU " + std::to_string(gpu_device_) +
                          "; a step of one's own runs on the host");
  check_ready();
  forward_pending_ = false;
  const Tensor& output = layers_.forward(inputs, context);
  forward_pending_ = true;
  return output;
}

const Tensor& Model::forward(const Tensor& features, const OpContext& context) {
  const Tensor* inputs[] = {&features};
  return forward(inputs, context);
}

void Model::backward(const Tensor& grad_output, std::span<float> grads,
                     std::span<Tensor* const> input_grads) {
  // Set by forward() alone, which a GPU model refuses; cleared by every other pass, a changed
  // graph and set_gpu(): the output's value is forward()'s.
  if (!forward_pending_)
    throw InvalidArgument("Model::backward: no forward() to take the gradient of (the model's last "
                          "pass was another step, evaluate() or predict(), or there was none)");
  const Tensor& output = *layers_.output_value();
  if (grad_output.shape() != output.shape())
    throw InvalidArgument("Model::backward: a gradient of shape " + to_string(grad_output.shape()) +
                          " for an output of shape " + to_string(output.shape()));
  if (static_cast<std::int64_t>(grads.size()) != graph().num_parameters())
    throw InvalidArgument("Model::backward: " + std::to_string(grads.size()) +
                          " gradient slots for " + std::to_string(graph().num_parameters()) +
                          " parameters");
  if (!input_grads.empty() && input_grads.size() != layers_.num_inputs())
    throw InvalidArgument("Model::backward: " + std::to_string(input_grads.size()) +
                          " input gradients for a model of " +
                          std::to_string(layers_.num_inputs()) + " inputs");
  input_grads_.assign(layers_.num_inputs(), nullptr);
  std::copy(input_grads.begin(), input_grads.end(), input_grads_.begin());
  for (const auto& [begin, end] : layers_.unused_ranges())
    std::fill(grads.begin() + begin, grads.begin() + end, 0.0f);
  layers_.backward(grad_output, input_grads_, grads);
}

const Tensor& Model::predict(const Tensor& features) {
  const Tensor* inputs[] = {&features};
  return predict(inputs);
}

const Tensor* Model::fetch(const std::string& name) const {
  if (name == "loss") return &loss_value_;
  for (std::size_t i = 0; i < metric_names_.size(); ++i)
    if (metric_names_[i] == name) return &metric_values_[i];
  // "accuracy" also names a categorical or binary one, as StepMetrics::accuracy does.
  if (const int accuracy = accuracy_metric(metric_names_); name == "accuracy" && accuracy >= 0)
    return &metric_values_[static_cast<std::size_t>(accuracy)];
  if (name == "logits") return gpu_ ? &gpu_logits_ : layers_.output_value();
  if (gpu_) return nullptr;
  return layers_.value(name);
}

}  // namespace cohort
