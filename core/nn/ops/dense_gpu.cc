// Dense's GPU path: the products by cuBLAS (gpu/dense.cc), the fused ReLU by a kernel.

#include "cohort/core/nn/ops/gpu_layer.h"
#include "cohort/core/nn/ops/ops.h"
#include "cohort/gpu/ops.h"

namespace cohort {

class DenseGpu final : public GpuLayer {
 public:
  explicit DenseGpu(const Dense& layer) : layer_(layer) {}

  void forward(const GpuTensor& input, GpuTensor& output, const OpContext&,
               GpuContext& context) override {
    const std::int64_t n = input.size() / layer_.in_;  // rows: examples, or positions
    output.resize(layer_.output_shape(input.shape()));
    const float* values = context.values.data();
    gpu::dense_forward(context.cublas, n, layer_.in_, layer_.units_, input.data(),
                       values + layer_.kernel_offset_, values + layer_.bias_offset_,
                       output.data(), context.allow_tf32);
    if (layer_.activation_ == Activation::kRelu)
      gpu::relu_forward(static_cast<std::size_t>(output.size()), output.data(), output.data(),
                        context.stream);
  }

  void backward(const GpuTensor& input, const GpuTensor& output, const GpuTensor& grad_output,
                GpuTensor* grad_input, float* grads, GpuContext& context) override {
    const float* dy = grad_output.data();
    if (layer_.activation_ == Activation::kRelu) {
      grad_pre_.resize(output.shape());
      gpu::relu_backward(static_cast<std::size_t>(output.size()), output.data(), dy,
                         grad_pre_.data(), context.stream);
      dy = grad_pre_.data();
    }
    if (grad_input != nullptr) grad_input->resize(input.shape());
    gpu::dense_backward(context.cublas, input.size() / layer_.in_, layer_.in_, layer_.units_,
                        input.data(),
                        context.values.data() + layer_.kernel_offset_, dy,
                        grads + layer_.kernel_offset_, grads + layer_.bias_offset_,
                        grad_input != nullptr ? grad_input->data() : nullptr, context.allow_tf32);
  }

 private:
  const Dense& layer_;
  GpuTensor grad_pre_;  // dLoss/d(pre-activation) when a ReLU is fused
};

std::unique_ptr<GpuLayer> Dense::make_gpu_layer() const { return std::make_unique<DenseGpu>(*this); }

}  // namespace cohort
