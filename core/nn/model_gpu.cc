// A Model's steps on a GPU (CUDA builds only; core/no_gpu.cc stands in otherwise). Where things
// live: the parameters in the graph, on the host, where the optimizer and the replication mode
// update them; each step copies them to the device (one copy per tower), runs the layers' GPU
// paths there, and copies the gradients back, so towers average and modes exchange gradients on
// the host exactly as they do for CPU towers. The Trainer page-locks the host side of those copies
// (pin_for_gpu); in a separate CUDA program on an H200 such copies took a quarter of the time.

#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/model.h"
#include "cohort/core/nn/ops/gpu_layer.h"
#include "cohort/gpu/device.h"
#include "cohort/gpu/error.h"
#include "cohort/gpu/ops.h"
#include "cohort/gpu/pinned.h"

namespace cohort {

class ModelGpu {
 public:
  ModelGpu(int device, bool allow_tf32, std::int64_t parameters)
      : context(device, allow_tf32, parameters), grads(static_cast<std::size_t>(parameters)) {}

  GpuContext context;
  std::vector<std::unique_ptr<GpuLayer>> layers;
  std::vector<GpuTensor> outputs;  // per layer, the last forward's output
  GpuTensor images, grad_a, grad_b;
  gpu::DeviceBuffer<float> grads;  // the graph's layout
  gpu::DeviceBuffer<std::int32_t> labels;
  gpu::DeviceBuffer<float> loss{1};
};

// The streams, handles and buffers are destroyed with their own device current (cuBLAS's
// destructor synchronises the current device), and the caller's device is restored after.
void ModelGpuDeleter::operator()(ModelGpu* gpu) const noexcept {
  int current = -1;
  const bool known = cudaGetDevice(&current) == cudaSuccess;
  cudaSetDevice(gpu->context.device);
  delete gpu;
  if (known) cudaSetDevice(current);
}

namespace {

void copy_async(void* to, const void* from, std::size_t bytes, cudaMemcpyKind kind,
                const gpu::Stream& stream) {
  if (bytes > 0) COHORT_CUDA_CALL(cudaMemcpyAsync(to, from, bytes, kind, stream.get()));
}

}  // namespace

void Model::set_gpu(int device, bool allow_tf32) {
  forward_pending_ = false;
  gpu_.reset();
  gpu_device_ = -1;
  if (device < 0) return;
  const int visible = gpu::device_count();
  if (device >= visible)
    throw InvalidArgument("Model: GPU " + std::to_string(device) + " does not exist; this process sees " +
                          std::to_string(visible) + " CUDA device" + (visible == 1 ? "" : "s"));
  // The device path runs a stack of layers with the fused softmax cross-entropy.
  if (!layers_.is_chain())
    throw InvalidArgument("Model: GPU towers run a stack of layers; this model is a graph "
                          "(a layer with several inputs, or several inputs)");
  const auto* loss = dynamic_cast<const SoftmaxCrossEntropyLoss*>(loss_.get());
  if (loss == nullptr || loss->label_smoothing() != 0.0f || !loss->class_weights().empty())
    throw InvalidArgument("Model: GPU towers compute softmax cross-entropy without label "
                          "smoothing or class weights; this model's loss is " + loss_->name() +
                          (loss != nullptr && loss->label_smoothing() != 0.0f ? ", with label smoothing" : "") +
                          (loss != nullptr && !loss->class_weights().empty() ? ", with class weights" : ""));
  check_ready();
  gpu::set_device(device);
  std::unique_ptr<ModelGpu, ModelGpuDeleter> state(
      new ModelGpu(device, allow_tf32, graph().num_parameters()));
  for (const auto& layer : layers()) {
    std::unique_ptr<GpuLayer> gpu_layer = layer->make_gpu_layer();
    if (!gpu_layer)
      throw InvalidArgument("Model: layer \"" + layer->name() + "\" has no GPU path");
    state->layers.push_back(std::move(gpu_layer));
  }
  state->outputs.resize(layers().size());
  gpu_ = std::move(state);
  gpu_device_ = device;
}

std::shared_ptr<const void> Model::pin_for_gpu(std::span<const float> memory) {
  try {
    auto pin = std::make_shared<gpu::HostRegistration>(memory.data(), memory.size_bytes());
    if (pin->registered()) return pin;
  } catch (...) {  // no memory for the handle: the copies stay pageable
  }
  return nullptr;
}

StepMetrics Model::gpu_step(const Tensor& images, std::span<const std::int32_t> labels,
                            std::span<float> grads, const OpContext& context) {
  ModelGpu& g = *gpu_;
  const gpu::Stream& stream = g.context.stream;
  gpu::set_device(g.context.device);  // the tower's thread may not have made it current yet
  const bool train = !grads.empty();
  const std::vector<std::unique_ptr<Layer>>& host_layers = layers();
  const Shape& example = example_shape();
  const bool shape_ok = images.rank() == static_cast<int>(example.size()) + 1 && images.dim(0) > 0 &&
                        std::equal(example.begin(), example.end(), images.shape().begin() + 1);
  if (!shape_ok)
    throw InvalidArgument("Model: images " + to_string(images.shape()) +
                          " are not a batch of examples of shape " + to_string(example));
  const std::int64_t n = images.dim(0);
  check_targets(Targets{labels, nullptr}, n);
  // The host path's loss checks the labels; on the device a bad one would only make the loss NaN.
  const int classes_count = num_classes();
  for (std::int32_t label : labels)
    if (label < 0 || label >= classes_count)
      throw InvalidArgument("Model: label " + std::to_string(label) + " is outside [0, " +
                            std::to_string(classes_count) + ")");

  // Until the stream is synchronised below, copies into host memory may be in flight (into
  // page-locked memory they are truly asynchronous; `loss` lives in this frame): leaving early by
  // an exception waits for them first.
  float loss = 0;
  const gpu::SyncOnUnwind in_flight(stream);
  // Another tower may have added variables since set_gpu().
  const auto parameters = static_cast<std::size_t>(graph().num_parameters());
  if (g.context.values.size() != parameters) {
    g.context.values = gpu::DeviceBuffer<float>(parameters);
    g.grads = gpu::DeviceBuffer<float>(parameters);
  }
  copy_async(g.context.values.data(), graph().values().data(), parameters * sizeof(float),
             cudaMemcpyHostToDevice, stream);
  g.images.resize(images.shape());
  copy_async(g.images.data(), images.data(), static_cast<std::size_t>(images.size()) * sizeof(float),
             cudaMemcpyHostToDevice, stream);
  if (g.labels.size() < labels.size()) g.labels = gpu::DeviceBuffer<std::int32_t>(labels.size());
  copy_async(g.labels.data(), labels.data(), labels.size() * sizeof(std::int32_t),
             cudaMemcpyHostToDevice, stream);

  const GpuTensor* input = &g.images;
  for (std::size_t i = 0; i < host_layers.size(); ++i) {
    g.layers[i]->forward(*input, g.outputs[i], context, g.context);
    input = &g.outputs[i];
  }
  const GpuTensor& logits = g.outputs.back();
  const auto rows = static_cast<std::size_t>(n);
  const auto classes = static_cast<std::size_t>(classes_count);
  GpuTensor* grad_output = &g.grad_a;
  GpuTensor* grad_input = &g.grad_b;
  if (train) grad_output->resize(logits.shape());
  gpu::softmax_cross_entropy(rows, classes, logits.data(), g.labels.data(), g.loss.data(),
                             train ? grad_output->data() : nullptr, stream);

  if (train) {
    // As on the host: layers before the first with variables need no backward pass, and that
    // one needs no input gradient. Variables no layer of this model uses keep gradient 0.
    std::size_t first = 0;
    while (first < host_layers.size() && !layers_.layer_has_variables(first)) ++first;
    g.grads.zero_async(stream);
    for (std::size_t i = host_layers.size(); i-- > first;) {
      const GpuTensor& layer_input = i == 0 ? g.images : g.outputs[i - 1];
      g.layers[i]->backward(layer_input, g.outputs[i], *grad_output,
                            i == first ? nullptr : grad_input, g.grads.data(), g.context);
      std::swap(grad_output, grad_input);
    }
    copy_async(grads.data(), g.grads.data(), parameters * sizeof(float), cudaMemcpyDeviceToHost,
               stream);
  }
  Tensor& host_logits = gpu_logits_;
  host_logits.resize(logits.shape());
  copy_async(host_logits.data(), logits.data(), static_cast<std::size_t>(logits.size()) * sizeof(float),
             cudaMemcpyDeviceToHost, stream);
  copy_async(&loss, g.loss.data(), sizeof loss, cudaMemcpyDeviceToHost, stream);
  stream.synchronize();

  // The metrics from the copied logits, as on the host.
  StepMetrics m;
  m.loss = loss;
  loss_value_[0] = m.loss;
  record_metrics(host_logits, Targets{labels, nullptr}, m);
  return m;
}

}  // namespace cohort
