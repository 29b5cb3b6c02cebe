// MaxPool2D on cuDNN's pooling API, NHWC. Any padding is done explicitly with -inf, and cuDNN
// pools the padded copy without padding of its own: then no padded position can win a window
// whatever cuDNN does at borders, and TensorFlow's uneven SAME padding needs nothing special.
#include <cudnn.h>

#include <climits>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

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
    throw std::invalid_argument("PoolPlan: " + describe(g) +
                                ": sizes must be >= 1, paddings in [0, window), and the padded "
                                "input at least the window");
  const long long padded = static_cast<long long>(g.batch) * (g.height + g.pad_top + g.pad_bottom) *
                           (g.width + g.pad_left + g.pad_right) * g.channels;
  if (padded > INT_MAX)
    throw std::invalid_argument("PoolPlan: " + describe(g) + ": tensors of 2^31 elements or more");
}

cudaStream_t stream_of(const CudnnHandle& cudnn) {
  cudaStream_t stream = nullptr;
  COHORT_CUDNN_CALL(cudnnGetStream(cudnn.get(), &stream));
  return stream;
}

void require(const void* pointer, const char* what, const char* name) {
  if (pointer == nullptr)
    throw std::invalid_argument(std::string(what) + ": " + name + " is a null device pointer");
}

}  // namespace

PoolPlan::PoolPlan(const PoolGeometry& geometry) : geometry_(geometry) {
  validate(geometry);
  const PoolGeometry& g = geometry_;
  const int in_h = g.height + g.pad_top + g.pad_bottom;
  const int in_w = g.width + g.pad_left + g.pad_right;
  try {
    COHORT_CUDNN_CALL(cudnnCreateTensorDescriptor(&x_desc_));
    COHORT_CUDNN_CALL(cudnnCreateTensorDescriptor(&y_desc_));
    COHORT_CUDNN_CALL(cudnnCreatePoolingDescriptor(&pool_desc_));
    COHORT_CUDNN_CALL(cudnnSetTensor4dDescriptor(x_desc_, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT,
                                                 g.batch, g.channels, in_h, in_w));
    // Deterministic: overlapping windows' gradients are added without atomics.
    COHORT_CUDNN_CALL(cudnnSetPooling2dDescriptor(pool_desc_, CUDNN_POOLING_MAX_DETERMINISTIC,
                                                  CUDNN_NOT_PROPAGATE_NAN, g.window_h,
                                                  g.window_w, 0, 0, g.stride_h, g.stride_w));
    int n = 0, c = 0, h = 0, w = 0;
    COHORT_CUDNN_CALL(cudnnGetPooling2dForwardOutputDim(pool_desc_, x_desc_, &n, &c, &h, &w));
    if (n != g.batch || c != g.channels || h != g.out_height() || w != g.out_width())
      throw std::logic_error("PoolPlan: cuDNN's output " + std::to_string(h) + "x" +
                             std::to_string(w) + " differs from " + std::to_string(g.out_height()) +
                             "x" + std::to_string(g.out_width()) + " for " + describe(g));
    COHORT_CUDNN_CALL(cudnnSetTensor4dDescriptor(y_desc_, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, n,
                                                 c, h, w));
    if (padded()) {
      const auto size = static_cast<std::size_t>(g.batch) * in_h * in_w * g.channels;
      padded_x_ = DeviceBuffer<float>(size);
      padded_dx_ = DeviceBuffer<float>(size);
    }
  } catch (...) {
    release();
    throw;
  }
}

PoolPlan::PoolPlan(PoolPlan&& other) noexcept
    : geometry_(other.geometry_),
      x_desc_(std::exchange(other.x_desc_, nullptr)),
      y_desc_(std::exchange(other.y_desc_, nullptr)),
      pool_desc_(std::exchange(other.pool_desc_, nullptr)),
      padded_x_(std::move(other.padded_x_)),
      padded_dx_(std::move(other.padded_dx_)) {}

PoolPlan& PoolPlan::operator=(PoolPlan&& other) noexcept {
  if (this != &other) {
    release();
    geometry_ = other.geometry_;
    x_desc_ = std::exchange(other.x_desc_, nullptr);
    y_desc_ = std::exchange(other.y_desc_, nullptr);
    pool_desc_ = std::exchange(other.pool_desc_, nullptr);
    padded_x_ = std::move(other.padded_x_);
    padded_dx_ = std::move(other.padded_dx_);
  }
  return *this;
}

PoolPlan::~PoolPlan() { release(); }

void PoolPlan::release() noexcept {
  if (x_desc_ != nullptr) cudnnDestroyTensorDescriptor(x_desc_);
  if (y_desc_ != nullptr) cudnnDestroyTensorDescriptor(y_desc_);
  if (pool_desc_ != nullptr) cudnnDestroyPoolingDescriptor(pool_desc_);
  x_desc_ = y_desc_ = nullptr;
  pool_desc_ = nullptr;
  padded_x_ = {};
  padded_dx_ = {};
}

void PoolPlan::check() const {
  if (pool_desc_ == nullptr) throw std::logic_error("PoolPlan: used after being moved from");
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
  require(x, "max_pool_forward", "x");
  require(y, "max_pool_forward", "y");
  const float* input = plan.padded_input(x, stream_of(cudnn));
  const float one = 1.0f, zero = 0.0f;
  COHORT_CUDNN_CALL(cudnnPoolingForward(cudnn.get(), plan.pool_desc_, &one, plan.x_desc_, input,
                                        &zero, plan.y_desc_, y));
}

void max_pool_backward(const CudnnHandle& cudnn, PoolPlan& plan, const float* x, const float* y,
                       const float* dy, float* dx) {
  plan.check();
  require(x, "max_pool_backward", "x");
  require(y, "max_pool_backward", "y");
  require(dy, "max_pool_backward", "dy");
  require(dx, "max_pool_backward", "dx");
  const cudaStream_t stream = stream_of(cudnn);
  const float* input = plan.padded_input(x, stream);
  float* grad = plan.padded() ? plan.padded_dx_.data() : dx;
  const float one = 1.0f, zero = 0.0f;
  COHORT_CUDNN_CALL(cudnnPoolingBackward(cudnn.get(), plan.pool_desc_, &one, plan.y_desc_, y,
                                         plan.y_desc_, dy, plan.x_desc_, input, &zero,
                                         plan.x_desc_, grad));
  if (plan.padded()) {
    const PoolGeometry& g = plan.geometry_;
    detail::crop_nhwc(stream, g.batch, g.height, g.width, g.channels, g.pad_top, g.pad_bottom,
                      g.pad_left, g.pad_right, grad, dx);
  }
}

}  // namespace cohort::gpu
