#pragma once
// What the ops' GPU paths (core/ops/<op>_gpu.cc) work on: activations in device memory
// (GpuTensor) and one tower's device, stream, library handles and parameters (GpuContext).
// CUDA builds only: this header includes gpu/, which a CPU-only build does not have.

#include <cstdint>
#include <utility>

#include "cohort/core/nn/layer.h"
#include "cohort/core/nn/tensor.h"
#include "cohort/gpu/buffer.h"
#include "cohort/gpu/handles.h"
#include "cohort/gpu/stream.h"

namespace cohort {

/// A float32 array in device memory with a shape (batch first, as Tensor). resize() keeps the
/// allocation when it is large enough, so a steady-state step allocates nothing; the contents
/// after a resize are undefined. Move-only; belongs to one tower.
class GpuTensor {
 public:
  GpuTensor() = default;
  explicit GpuTensor(const Shape& shape) { resize(shape); }

  void resize(const Shape& shape) {
    const auto n = static_cast<std::size_t>(num_elements(shape));
    if (n > buffer_.size()) buffer_ = gpu::DeviceBuffer<float>(n);
    shape_ = shape;
  }
  const Shape& shape() const { return shape_; }
  std::int64_t dim(int i) const { return shape_[static_cast<std::size_t>(i)]; }
  std::int64_t size() const { return num_elements(shape_); }
  float* data() { return buffer_.data(); }
  const float* data() const { return buffer_.data(); }

 private:
  Shape shape_;
  gpu::DeviceBuffer<float> buffer_;
};

/// One tower's GPU: the device, a stream with both library handles bound to it, and the device
/// copy of the graph's parameters that the layers read (graph layout, `parameters` floats).
/// Everything a tower queues goes on `stream`. Made with `device` current; used by one thread at a
/// time, which makes `device` current first (the Trainer makes it on the main thread and uses it
/// on the tower's).
struct GpuContext {
  GpuContext(int device, bool allow_tf32, std::int64_t parameters)
      : device(device),
        allow_tf32(allow_tf32),
        cublas(stream),
        cudnn(stream),
        values(static_cast<std::size_t>(parameters)) {}

  int device;
  bool allow_tf32;  ///< Dense and Conv2D may use TF32 tensor cores (--tf32)
  gpu::Stream stream;
  gpu::CublasHandle cublas;
  gpu::CudnnHandle cudnn;
  gpu::DeviceBuffer<float> values;
};

/// dst = src, shape and contents, on the context's stream (Flatten, and Dropout at inference).
void copy_on_device(const GpuTensor& src, const Shape& shape, GpuTensor& dst,
                    const GpuContext& context);

}  // namespace cohort
