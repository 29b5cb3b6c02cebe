// MaxPool2D on cuDNN's pooling API, NHWC. Any padding is done explicitly with -inf, and cuDNN
// pools the padded copy without padding of its own: then no padded position can win a window
// whatever cuDNN does at borders, and TensorFlow's uneven SAME padding needs nothing special.
#include <cudnn.h>

#include <climits>
#include <limits>
#include <string>

#include "cohort/gpu/error.h"
#include "cohort/gpu/ops.h"

namespace cohort::gpu {
namespace {

std::string describe(const PoolGeometry& g) {
  return "input " + std::to_string(g.batch) + "x" + std::to_string(g.height) + "x" +
         std::to_string(g.width) + "x" + std::to_string(g.channels) + ", window " +
         std::to_string(g.window_h) + "x" + std::to_string(g.window_w) + ", stride " +
         std::to_string(g.stride_h) + "x" + std::to_string(g.stride_w) + ", padding " +
         std::to_string(g.pad_top) + "/" + std::to_string(g.pad_bottom) + "/" +
         std::to_string(g.pad_left) + "/" + std::to_string(g.pad_right);
}

void validate(const PoolGeometry& g) {
  const bool sizes = g.batch >= 1 && g.height >= 1 && g.width >= 1 && g.channels >= 1 &&
                     g.window_h >= 1 && g.window_w >= 1 && g.stride_h >= 1 && g.stride_w >= 1;
  // Padding of a window or more on one side would give windows of padding only (-inf outputs).
  const bool pads = g.pad_top >= 0 && g.pad_bottom >= 0 && g.pad_left >= 0 && g.pad_right >= 0 &&
                    g.pad_top < g.window_h && g.pad_bottom < g.window_h &&
                    g.pad_left < g.window_w && g.pad_right < g.window_w;
  if (!sizes || !pads || g.height + g.pad_top + g.pad_bottom < g.window_h ||
      g.width + g.pad_left + g.pad_right < g.window_w)
    throw InvalidArgument("PoolPlan: " + describe(g) +
                          ": sizes must be >= 1, paddings in [0, window), and the padded "
                          "input at least the window");
  const long long padded = static_cast<long long>(g.batch) * (g.height + g.pad_top + g.pad_bottom) *
                           (g.width + g.pad_left + g.pad_right) * g.channels;
  if (padded > INT_MAX)
    throw InvalidArgument("PoolPlan: " + describe(g) + ": tensors of 2^31 elements or more");
}

}  // namespace

PoolPlan::PoolPlan(const PoolGeometry& geometry) : geometry_(geometry) {
  validate(geometry);
  const PoolGeometry& g = geometry_;
  const int in_h = g.height + g.pad_top + g.pad_bottom;
  const int in_w = g.width + g.pad_left + g.pad_right;
  COHORT_CUDNN_CALL(cudnnCreateTensorDescriptor(x_desc_.receive()));
  COHORT_CUDNN_CALL(cudnnCreateTensorDescriptor(y_desc_.receive()));
  COHORT_CUDNN_CALL(cudnnCreatePoolingDescriptor(pool_desc_.receive()));
  COHORT_CUDNN_CALL(cudnnSetTensor4dDescriptor(x_desc_.get(), CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT,
                                               g.batch, g.channels, in_h, in_w));
  // Deterministic: overlapping windows' gradients are added without atomics.
  COHORT_CUDNN_CALL(cudnnSetPooling2dDescriptor(pool_desc_.get(), CUDNN_POOLING_MAX_DETERMINISTIC,
                                                CUDNN_NOT_PROPAGATE_NAN, g.window_h, g.window_w,
                                                0, 0, g.stride_h, g.stride_w));
  int n = 0, c = 0, h = 0, w = 0;
  COHORT_CUDNN_CALL(
      cudnnGetPooling2dForwardOutputDim(pool_desc_.get(), x_desc_.get(), &n, &c, &h, &w));
  if (n != g.batch || c != g.channels || h != g.out_height() || w != g.out_width())
    throw Error("PoolPlan: cuDNN's output " + std::to_string(h) + "x" + std::to_string(w) +
                " differs from " + std::to_string(g.out_height()) + "x" +
                std::to_string(g.out_width()) + " for " + describe(g));
  COHORT_CUDNN_CALL(
      cudnnSetTensor4dDescriptor(y_desc_.get(), CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, n, c, h, w));
  if (padded()) {
    const auto size = static_cast<std::size_t>(g.batch) * in_h * in_w * g.channels;
    padded_x_ = DeviceBuffer<float>(size);
    padded_dx_ = DeviceBuffer<float>(size);
  }
}

void PoolPlan::check() const {
  if (!pool_desc_) throw Error("PoolPlan: used after being moved from");
}

bool PoolPlan::padded() const {
  const PoolGeometry& g = geometry_;
  return g.pad_top + g.pad_bottom + g.pad_left + g.pad_right > 0;
}

const float* PoolPlan::padded_input(const float* x, cudaStream_t stream) {
  if (!padded()) return x;
  const PoolGeometry& g = geometry_;
  detail::pad_nhwc(stream, g.batch, g.height, g.width, g.channels, g.pad_top, g.pad_bottom,
                   g.pad_left, g.pad_right, -std::numeric_limits<float>::infinity(), x,
                   padded_x_.data());
  return padded_x_.data();
}

void max_pool_forward(const CudnnHandle& cudnn, PoolPlan& plan, const float* x, float* y) {
  plan.check();
  require_device_pointer(x, "max_pool_forward", "x");
  require_device_pointer(y, "max_pool_forward", "y");
  const float* input = plan.padded_input(x, cudnn.stream());
  const float one = 1.0f, zero = 0.0f;
  COHORT_CUDNN_CALL(cudnnPoolingForward(cudnn.get(), plan.pool_desc_.get(), &one,
                                        plan.x_desc_.get(), input, &zero, plan.y_desc_.get(), y));
}

void max_pool_backward(const CudnnHandle& cudnn, PoolPlan& plan, const float* x, const float* y,
                       const float* dy, float* dx) {
  plan.check();
  require_device_pointer(x, "max_pool_backward", "x");
  require_device_pointer(y, "max_pool_backward", "y");
  require_device_pointer(dy, "max_pool_backward", "dy");
  require_device_pointer(dx, "max_pool_backward", "dx");
  const cudaStream_t stream = cudnn.stream();
  const float* input = plan.padded_input(x, stream);
  float* grad = plan.padded() ? plan.padded_dx_.data() : dx;
  const float one = 1.0f, zero = 0.0f;
  COHORT_CUDNN_CALL(cudnnPoolingBackward(cudnn.get(), plan.pool_desc_.get(), &one,
                                         plan.y_desc_.get(), y, plan.y_desc_.get(), dy,
                                         plan.x_desc_.get(), input, &zero, plan.x_desc_.get(),
                                         grad));
  if (plan.padded()) {
    const PoolGeometry& g = plan.geometry_;
    detail::crop_nhwc(stream, g.batch, g.height, g.width, g.channels, g.pad_top, g.pad_bottom,
                      g.pad_left, g.pad_right, grad, dx);
  }
}

}  // namespace cohort::gpu
