// MaxPool2D's GPU path, by cuDNN (gpu/pool.cc), with one plan per batch size seen.

#include <map>

#include "cohort/core/nn/ops/gpu_layer.h"
#include "cohort/core/nn/ops/ops.h"
#include "cohort/gpu/ops.h"

namespace cohort {

class MaxPool2DGpu final : public GpuLayer {
 public:
  explicit MaxPool2DGpu(const MaxPool2D& layer) : layer_(layer) {}

  void forward(const GpuTensor& input, GpuTensor& output, const OpContext&,
               GpuContext& context) override {
    const std::int64_t n = input.dim(0);
    output.resize({n, layer_.dim_h_.out, layer_.dim_w_.out, layer_.channels_});
    gpu::max_pool_forward(context.cudnn, plan(n), input.data(), output.data());
  }

  void backward(const GpuTensor& input, const GpuTensor& output, const GpuTensor& grad_output,
                GpuTensor* grad_input, float*, GpuContext& context) override {
    if (grad_input == nullptr) return;
    grad_input->resize(input.shape());
    gpu::max_pool_backward(context.cudnn, plan(input.dim(0)), input.data(), output.data(),
                           grad_output.data(), grad_input->data());
  }

 private:
  gpu::PoolPlan& plan(std::int64_t batch) {
    auto it = plans_.find(batch);
    if (it != plans_.end()) return it->second;
    const MaxPool2D& l = layer_;
    gpu::PoolGeometry p;
    p.batch = static_cast<int>(batch);
    p.height = static_cast<int>(l.in_h_);
    p.width = static_cast<int>(l.in_w_);
    p.channels = static_cast<int>(l.channels_);
    p.window_h = static_cast<int>(l.window_h_);
    p.window_w = static_cast<int>(l.window_w_);
    p.stride_h = static_cast<int>(l.stride_h_);
    p.stride_w = static_cast<int>(l.stride_w_);
    p.pad_top = static_cast<int>(l.dim_h_.pad_before);
    p.pad_bottom = static_cast<int>(l.dim_h_.pad_after);
    p.pad_left = static_cast<int>(l.dim_w_.pad_before);
    p.pad_right = static_cast<int>(l.dim_w_.pad_after);
    return plans_.emplace(batch, gpu::PoolPlan(p)).first->second;
  }

  const MaxPool2D& layer_;
  std::map<std::int64_t, gpu::PoolPlan> plans_;  // by batch size
};

std::unique_ptr<GpuLayer> MaxPool2D::make_gpu_layer() const {
  return std::make_unique<MaxPool2DGpu>(*this);
}

}  // namespace cohort
