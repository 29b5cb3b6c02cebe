// The GPU paths of the element-wise layers ReLU, Flatten and Dropout (kernels in
// gpu/elementwise.cu).

#include <cuda_runtime_api.h>

#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/ops/gpu_layer.h"
#include "cohort/core/nn/ops/ops.h"
#include "cohort/gpu/error.h"
#include "cohort/gpu/ops.h"

namespace cohort {

void copy_on_device(const GpuTensor& src, const Shape& shape, GpuTensor& dst,
                    const GpuContext& context) {
  dst.resize(shape);
  if (dst.size() == 0) return;
  COHORT_CUDA_CALL(cudaMemcpyAsync(dst.data(), src.data(),
                                   static_cast<std::size_t>(dst.size()) * sizeof(float),
                                   cudaMemcpyDeviceToDevice, context.stream.get()));
}

class ReLUGpu final : public GpuLayer {
 public:
  explicit ReLUGpu(const ReLU&) {}
  void forward(const GpuTensor& input, GpuTensor& output, const OpContext&,
               GpuContext& context) override {
    output.resize(input.shape());
    gpu::relu_forward(static_cast<std::size_t>(input.size()), input.data(), output.data(),
                      context.stream);
  }
  void backward(const GpuTensor& input, const GpuTensor& output, const GpuTensor& grad_output,
                GpuTensor* grad_input, float*, GpuContext& context) override {
    if (grad_input == nullptr) return;
    grad_input->resize(input.shape());
    gpu::relu_backward(static_cast<std::size_t>(output.size()), output.data(), grad_output.data(),
                       grad_input->data(), context.stream);
  }
};

class FlattenGpu final : public GpuLayer {
 public:
  explicit FlattenGpu(const Flatten& layer) : layer_(layer) {}
  // GpuTensors own their memory, so the reshape is a device-to-device copy, as on the host.
  void forward(const GpuTensor& input, GpuTensor& output, const OpContext&,
               GpuContext& context) override {
    copy_on_device(input, {input.dim(0), layer_.size_}, output, context);
  }
  void backward(const GpuTensor& input, const GpuTensor&, const GpuTensor& grad_output,
                GpuTensor* grad_input, float*, GpuContext& context) override {
    if (grad_input != nullptr) copy_on_device(grad_output, input.shape(), *grad_input, context);
  }

 private:
  const Flatten& layer_;
};

class DropoutGpu final : public GpuLayer {
 public:
  explicit DropoutGpu(const Dropout& layer) : layer_(layer) {}
  // The mask is the CPU path's, bit for bit: the same key and per-element draw.
  void forward(const GpuTensor& input, GpuTensor& output, const OpContext& op,
               GpuContext& context) override {
    training_ = op.training;
    if (!training_) {
      copy_on_device(input, input.shape(), output, context);
      return;
    }
    output.resize(input.shape());
    mask_.resize(input.shape());
    gpu::dropout_forward(static_cast<std::size_t>(input.size()), layer_.rate_,
                         Graph::variable_seed(op.seed, layer_.name_), input.data(), output.data(),
                         mask_.data(), context.stream);
  }
  void backward(const GpuTensor&, const GpuTensor&, const GpuTensor& grad_output,
                GpuTensor* grad_input, float*, GpuContext& context) override {
    if (grad_input == nullptr) return;
    if (!training_) {
      copy_on_device(grad_output, grad_output.shape(), *grad_input, context);
      return;
    }
    grad_input->resize(grad_output.shape());
    gpu::dropout_backward(static_cast<std::size_t>(grad_output.size()), mask_.data(),
                          grad_output.data(), grad_input->data(), context.stream);
  }

 private:
  const Dropout& layer_;
  bool training_ = false;
  GpuTensor mask_;
};

std::unique_ptr<GpuLayer> ReLU::make_gpu_layer() const { return std::make_unique<ReLUGpu>(*this); }
std::unique_ptr<GpuLayer> Flatten::make_gpu_layer() const {
  return std::make_unique<FlattenGpu>(*this);
}
std::unique_ptr<GpuLayer> Dropout::make_gpu_layer() const {
  return std::make_unique<DropoutGpu>(*this);
}

}  // namespace cohort
