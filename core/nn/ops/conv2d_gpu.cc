// Conv2D's GPU path: forward, backward data and backward filter by cuDNN (gpu/conv.cc), the
// fused ReLU by a kernel. cuDNN's plans depend on the batch size; one is kept per size seen (a
// training and an evaluation batch, typically).

#include <map>

#include "cohort/core/nn/ops/gpu_layer.h"
#include "cohort/core/nn/ops/ops.h"
#include "cohort/gpu/ops.h"

namespace cohort {

class Conv2DGpu final : public GpuLayer {
 public:
  explicit Conv2DGpu(const Conv2D& layer) : layer_(layer) {}

  void forward(const GpuTensor& input, GpuTensor& output, const OpContext&,
               GpuContext& context) override {
    const im2col::Geometry& g = layer_.geometry_;
    const std::int64_t n = input.dim(0);
    output.resize({n, g.out_h, g.out_w, layer_.options_.filters});
    const float* values = context.values.data();
    gpu::conv2d_forward(context.cudnn, plan(n, context), input.data(),
                        values + layer_.kernel_offset_,
                        layer_.options_.use_bias ? values + layer_.bias_offset_ : nullptr,
                        output.data());
    if (layer_.options_.activation == Activation::kRelu)
      gpu::relu_forward(static_cast<std::size_t>(output.size()), output.data(), output.data(),
                        context.stream);
  }

  void backward(const GpuTensor& input, const GpuTensor& output, const GpuTensor& grad_output,
                GpuTensor* grad_input, float* grads, GpuContext& context) override {
    const float* dy = grad_output.data();
    if (layer_.options_.activation == Activation::kRelu) {
      grad_pre_.resize(output.shape());
      gpu::relu_backward(static_cast<std::size_t>(output.size()), output.data(), dy,
                         grad_pre_.data(), context.stream);
      dy = grad_pre_.data();
    }
    gpu::ConvPlan& p = plan(input.dim(0), context);
    gpu::conv2d_backward_filter(context.cudnn, p, input.data(), dy,
                                grads + layer_.kernel_offset_,
                                layer_.options_.use_bias ? grads + layer_.bias_offset_ : nullptr);
    if (grad_input != nullptr) {
      grad_input->resize(input.shape());
      gpu::conv2d_backward_data(context.cudnn, p, dy,
                                context.values.data() + layer_.kernel_offset_, grad_input->data());
    }
  }

 private:
  gpu::ConvPlan& plan(std::int64_t batch, const GpuContext& context) {
    auto it = plans_.find(batch);
    if (it != plans_.end()) return it->second;
    const im2col::Geometry& g = layer_.geometry_;
    gpu::ConvGeometry c;
    c.batch = static_cast<int>(batch);
    c.height = static_cast<int>(g.in_h);
    c.width = static_cast<int>(g.in_w);
    c.channels = static_cast<int>(g.in_c);
    c.filters = static_cast<int>(layer_.options_.filters);
    c.kernel_h = static_cast<int>(g.kernel_h);
    c.kernel_w = static_cast<int>(g.kernel_w);
    c.stride_h = static_cast<int>(g.stride_h);
    c.stride_w = static_cast<int>(g.stride_w);
    const SpatialDim h = spatial_dim(g.in_h, g.kernel_h, g.stride_h, layer_.options_.padding);
    const SpatialDim w = spatial_dim(g.in_w, g.kernel_w, g.stride_w, layer_.options_.padding);
    c.pad_top = static_cast<int>(h.pad_before);
    c.pad_bottom = static_cast<int>(h.pad_after);
    c.pad_left = static_cast<int>(w.pad_before);
    c.pad_right = static_cast<int>(w.pad_after);
    return plans_.emplace(batch, gpu::ConvPlan(context.cudnn, c, context.allow_tf32)).first->second;
  }

  const Conv2D& layer_;
  std::map<std::int64_t, gpu::ConvPlan> plans_;  // by batch size
  GpuTensor grad_pre_;
};

std::unique_ptr<GpuLayer> Conv2D::make_gpu_layer() const {
  // The GPU path has no dilated convolution and pads at most one more after than before: such a
  // layer cannot be placed on a GPU.
  if (options_.dilation_h != 1 || options_.dilation_w != 1) return nullptr;
  if (options_.padding == Padding::kCausal) return nullptr;
  return std::make_unique<Conv2DGpu>(*this);
}

}  // namespace cohort
