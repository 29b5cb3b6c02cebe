// A build without CUDA (COHORT_WITH_CUDA=OFF, or no CUDA found): the ops have no GPU path and a
// model cannot be placed on a GPU. Compiled instead of core/model_gpu.cc and core/ops/*_gpu.cc.

#include <stdexcept>
#include <string>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/model.h"
#include "cohort/core/nn/ops/ops.h"

namespace cohort {

class ModelGpu {};
void ModelGpuDeleter::operator()(ModelGpu* gpu) const noexcept { delete gpu; }

void Model::set_gpu(int device, bool) {
  if (device >= 0)
    throw InvalidArgument("Model: cannot run on GPU " + std::to_string(device) +
                          ": this Cohort was built without CUDA (COHORT_WITH_CUDA=OFF)");
}

std::shared_ptr<const void> Model::pin_for_gpu(std::span<const float>) { return nullptr; }

StepMetrics Model::gpu_step(const Tensor&, std::span<const std::int32_t>, std::span<float>,
                            const OpContext&) {
  throw std::logic_error("Model::gpu_step in a build without CUDA");
}

std::unique_ptr<GpuLayer> Dense::make_gpu_layer() const { return nullptr; }
std::unique_ptr<GpuLayer> Conv2D::make_gpu_layer() const { return nullptr; }
std::unique_ptr<GpuLayer> MaxPool2D::make_gpu_layer() const { return nullptr; }
std::unique_ptr<GpuLayer> ReLU::make_gpu_layer() const { return nullptr; }
std::unique_ptr<GpuLayer> Flatten::make_gpu_layer() const { return nullptr; }
std::unique_ptr<GpuLayer> Dropout::make_gpu_layer() const { return nullptr; }

}  // namespace cohort
