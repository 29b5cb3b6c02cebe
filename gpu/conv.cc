// Conv2D on cuDNN's convolution API, NHWC throughout.
//
// cuDNN pads both sides of a dimension alike, TensorFlow's SAME padding puts the odd one after:
// the common part is cuDNN's padding, the rest (one row or column at most for SAME) an explicitly
// zero-padded copy of the input, as TensorFlow's own cuDNN path does. The filter goes to cuDNN as
// OHWI (its KRSC, the only filter layout it takes with NHWC float images).
#include <cudnn.h>

#include <algorithm>
#include <climits>
#include <stdexcept>
#include <string>
#include <utility>

#include "cohort/gpu/error.h"
#include "cohort/gpu/ops.h"

namespace cohort::gpu {
namespace {

std::string describe(const ConvGeometry& g) {
  return "input " + std::to_string(g.batch) + "x" + std::to_string(g.height) + "x" +
         std::to_string(g.width) + "x" + std::to_string(g.channels) + ", filter " +
         std::to_string(g.kernel_h) + "x" + std::to_string(g.kernel_w) + "x" +
         std::to_string(g.filters) + ", stride " + std::to_string(g.stride_h) + "x" +
         std::to_string(g.stride_w) + ", padding " + std::to_string(g.pad_top) + "/" +
         std::to_string(g.pad_bottom) + "/" + std::to_string(g.pad_left) + "/" +
         std::to_string(g.pad_right);
}

void validate(const ConvGeometry& g) {
  const bool sizes = g.batch >= 1 && g.height >= 1 && g.width >= 1 && g.channels >= 1 &&
                     g.filters >= 1 && g.kernel_h >= 1 && g.kernel_w >= 1 && g.stride_h >= 1 &&
                     g.stride_w >= 1;
  const bool pads = g.pad_top >= 0 && g.pad_bottom >= 0 && g.pad_left >= 0 && g.pad_right >= 0;
  if (!sizes || !pads || g.height + g.pad_top + g.pad_bottom < g.kernel_h ||
      g.width + g.pad_left + g.pad_right < g.kernel_w)
    throw std::invalid_argument("ConvPlan: " + describe(g) +
                                ": sizes must be >= 1, paddings >= 0, and the padded input at "
                                "least the filter");
  // cuDNN's 4-d descriptors use int strides.
  const auto elements = [](long long a, long long b, long long c, long long d) {
    return a * b * c * d;
  };
  if (elements(g.batch, g.height + g.pad_top + g.pad_bottom, g.width + g.pad_left + g.pad_right,
               g.channels) > INT_MAX ||
      elements(g.batch, g.out_height(), g.out_width(), g.filters) > INT_MAX)
    throw std::invalid_argument("ConvPlan: " + describe(g) + ": tensors of 2^31 elements or more");
}

[[noreturn]] void no_algorithm(const char* pass, const ConvGeometry& g) {
  throw CudaError(Library::kCudnn, CUDNN_STATUS_NOT_SUPPORTED,
                  std::string("ConvPlan: no FP32 ") + pass + " algorithm for " + describe(g),
                  __FILE__, __LINE__);
}

// Picks from cuDNN's heuristic results (best first): the first that works, in rounds that prefer
// deterministic algorithms (so a run repeats exactly) and results reported with FMA math. Unless
// TF32 is allowed, only plain FP32 math is taken: a result reported with the default math type is
// run with FMA math forced on the descriptor, which on Ampere and later keeps TF32 out. "Works"
// means the math type can be set and `workspace_of(algo, &bytes)` (the pass's workspace query,
// made with that math type) succeeds; the choice records the bytes.
template <typename Perf, typename Choice, typename Query>
bool choose(const Perf* results, int count, bool allow_tf32, cudnnConvolutionDescriptor_t conv,
            Query workspace_of, Choice& choice) {
  for (int round = 0; round < 4; ++round) {
    const bool deterministic_only = round < 2;
    const bool default_math = round % 2 == 1;
    for (int k = 0; k < count; ++k) {
      const Perf& r = results[k];
      if (r.status != CUDNN_STATUS_SUCCESS) continue;
      if (deterministic_only && r.determinism != CUDNN_DETERMINISTIC) continue;
      cudnnMathType_t math = r.mathType;
      if (!allow_tf32) {
        if (r.mathType != CUDNN_FMA_MATH && !(default_math && r.mathType == CUDNN_DEFAULT_MATH))
          continue;
        math = CUDNN_FMA_MATH;
      }
      std::size_t bytes = 0;
      if (cudnnSetConvolutionMathType(conv, math) != CUDNN_STATUS_SUCCESS) continue;
      if (workspace_of(r.algo, &bytes) != CUDNN_STATUS_SUCCESS) continue;
      choice.algo = r.algo;
      choice.math = math;
      choice.workspace = bytes;
      return true;
    }
  }
  return false;
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

ConvPlan::ConvPlan(const CudnnHandle& cudnn, const ConvGeometry& geometry, bool allow_tf32)
    : geometry_(geometry) {
  validate(geometry);
  const ConvGeometry& g = geometry_;
  const int sym_h = std::min(g.pad_top, g.pad_bottom), sym_w = std::min(g.pad_left, g.pad_right);
  extra_top_ = g.pad_top - sym_h;
  extra_bottom_ = g.pad_bottom - sym_h;
  extra_left_ = g.pad_left - sym_w;
  extra_right_ = g.pad_right - sym_w;
  const int in_h = g.height + extra_top_ + extra_bottom_;
  const int in_w = g.width + extra_left_ + extra_right_;
  try {
    COHORT_CUDNN_CALL(cudnnCreateTensorDescriptor(&x_desc_));
    COHORT_CUDNN_CALL(cudnnCreateTensorDescriptor(&y_desc_));
    COHORT_CUDNN_CALL(cudnnCreateFilterDescriptor(&w_desc_));
    COHORT_CUDNN_CALL(cudnnCreateConvolutionDescriptor(&conv_desc_));
    COHORT_CUDNN_CALL(cudnnSetTensor4dDescriptor(x_desc_, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT,
                                                 g.batch, g.channels, in_h, in_w));
    COHORT_CUDNN_CALL(cudnnSetFilter4dDescriptor(w_desc_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC,
                                                 g.filters, g.channels, g.kernel_h, g.kernel_w));
    COHORT_CUDNN_CALL(cudnnSetConvolution2dDescriptor(conv_desc_, sym_h, sym_w, g.stride_h,
                                                      g.stride_w, 1, 1, CUDNN_CROSS_CORRELATION,
                                                      CUDNN_DATA_FLOAT));
    COHORT_CUDNN_CALL(cudnnSetConvolutionMathType(
        conv_desc_, allow_tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
    int n = 0, c = 0, h = 0, w = 0;
    COHORT_CUDNN_CALL(
        cudnnGetConvolution2dForwardOutputDim(conv_desc_, x_desc_, w_desc_, &n, &c, &h, &w));
    if (n != g.batch || c != g.filters || h != g.out_height() || w != g.out_width())
      throw std::logic_error("ConvPlan: cuDNN's output " + std::to_string(h) + "x" +
                             std::to_string(w) + " differs from " + std::to_string(g.out_height()) +
                             "x" + std::to_string(g.out_width()) + " for " + describe(g));
    COHORT_CUDNN_CALL(cudnnSetTensor4dDescriptor(y_desc_, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, n,
                                                 c, h, w));

    cudnnHandle_t handle = cudnn.get();
    int count = 0;
    cudnnConvolutionFwdAlgoPerf_t fwd[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    COHORT_CUDNN_CALL(cudnnGetConvolutionForwardAlgorithm_v7(
        handle, x_desc_, w_desc_, conv_desc_, y_desc_, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count,
        fwd));
    const auto fwd_workspace = [&](cudnnConvolutionFwdAlgo_t algo, std::size_t* bytes) {
      return cudnnGetConvolutionForwardWorkspaceSize(handle, x_desc_, w_desc_, conv_desc_,
                                                     y_desc_, algo, bytes);
    };
    if (!choose(fwd, count, allow_tf32, conv_desc_, fwd_workspace, fwd_))
      no_algorithm("forward", g);

    cudnnConvolutionBwdDataAlgoPerf_t data[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    COHORT_CUDNN_CALL(cudnnSetConvolutionMathType(
        conv_desc_, allow_tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
    COHORT_CUDNN_CALL(cudnnGetConvolutionBackwardDataAlgorithm_v7(
        handle, w_desc_, y_desc_, conv_desc_, x_desc_, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
        &count, data));
    const auto data_workspace = [&](cudnnConvolutionBwdDataAlgo_t algo, std::size_t* bytes) {
      return cudnnGetConvolutionBackwardDataWorkspaceSize(handle, w_desc_, y_desc_, conv_desc_,
                                                          x_desc_, algo, bytes);
    };
    if (!choose(data, count, allow_tf32, conv_desc_, data_workspace, bwd_data_))
      no_algorithm("backward-data", g);

    cudnnConvolutionBwdFilterAlgoPerf_t filter[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    COHORT_CUDNN_CALL(cudnnSetConvolutionMathType(
        conv_desc_, allow_tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
    COHORT_CUDNN_CALL(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        handle, x_desc_, y_desc_, conv_desc_, w_desc_, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
        &count, filter));
    const auto filter_workspace = [&](cudnnConvolutionBwdFilterAlgo_t algo, std::size_t* bytes) {
      return cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, x_desc_, y_desc_, conv_desc_,
                                                            w_desc_, algo, bytes);
    };
    if (!choose(filter, count, allow_tf32, conv_desc_, filter_workspace, bwd_filter_))
      no_algorithm("backward-filter", g);

    // One workspace for the three passes, allocated here, so no step waits for an allocation.
    workspace_ = DeviceBuffer<char>(
        std::max({fwd_.workspace, bwd_data_.workspace, bwd_filter_.workspace}));

    filter_ = DeviceBuffer<float>(static_cast<std::size_t>(g.kernel_h) * g.kernel_w * g.channels *
                                  g.filters);
    if (uneven())
      padded_ = DeviceBuffer<float>(static_cast<std::size_t>(g.batch) * in_h * in_w * g.channels);
  } catch (...) {
    release();
    throw;
  }
}

ConvPlan::ConvPlan(ConvPlan&& other) noexcept
    : geometry_(other.geometry_),
      extra_top_(other.extra_top_),
      extra_bottom_(other.extra_bottom_),
      extra_left_(other.extra_left_),
      extra_right_(other.extra_right_),
      x_desc_(std::exchange(other.x_desc_, nullptr)),
      y_desc_(std::exchange(other.y_desc_, nullptr)),
      w_desc_(std::exchange(other.w_desc_, nullptr)),
      conv_desc_(std::exchange(other.conv_desc_, nullptr)),
      fwd_(other.fwd_),
      bwd_data_(other.bwd_data_),
      bwd_filter_(other.bwd_filter_),
      workspace_(std::move(other.workspace_)),
      filter_(std::move(other.filter_)),
      padded_(std::move(other.padded_)) {}

ConvPlan& ConvPlan::operator=(ConvPlan&& other) noexcept {
  if (this != &other) {
    release();
    geometry_ = other.geometry_;
    extra_top_ = other.extra_top_;
    extra_bottom_ = other.extra_bottom_;
    extra_left_ = other.extra_left_;
    extra_right_ = other.extra_right_;
    x_desc_ = std::exchange(other.x_desc_, nullptr);
    y_desc_ = std::exchange(other.y_desc_, nullptr);
    w_desc_ = std::exchange(other.w_desc_, nullptr);
    conv_desc_ = std::exchange(other.conv_desc_, nullptr);
    fwd_ = other.fwd_;
    bwd_data_ = other.bwd_data_;
    bwd_filter_ = other.bwd_filter_;
    workspace_ = std::move(other.workspace_);
    filter_ = std::move(other.filter_);
    padded_ = std::move(other.padded_);
  }
  return *this;
}

ConvPlan::~ConvPlan() { release(); }

void ConvPlan::release() noexcept {
  // Destroy calls only fail for a null or broken handle; nothing to report from here.
  if (x_desc_ != nullptr) cudnnDestroyTensorDescriptor(x_desc_);
  if (y_desc_ != nullptr) cudnnDestroyTensorDescriptor(y_desc_);
  if (w_desc_ != nullptr) cudnnDestroyFilterDescriptor(w_desc_);
  if (conv_desc_ != nullptr) cudnnDestroyConvolutionDescriptor(conv_desc_);
  x_desc_ = y_desc_ = nullptr;
  w_desc_ = nullptr;
  conv_desc_ = nullptr;
  workspace_ = {};
  filter_ = {};
  padded_ = {};
}

void ConvPlan::check() const {
  if (conv_desc_ == nullptr) throw std::logic_error("ConvPlan: used after being moved from");
}

void* ConvPlan::workspace(std::size_t bytes) {
  // The constructor sized it for every pass; growing would only happen for a pass it did not plan.
  if (workspace_.size() < bytes) workspace_ = DeviceBuffer<char>(bytes);
  return bytes == 0 ? nullptr : workspace_.data();
}

const float* ConvPlan::padded_input(const float* x, cudaStream_t stream) {
  if (!uneven()) return x;
  const ConvGeometry& g = geometry_;
  detail::pad_nhwc(stream, g.batch, g.height, g.width, g.channels, extra_top_, extra_bottom_,
                   extra_left_, extra_right_, 0.0f, x, padded_.data());
  return padded_.data();
}

void conv2d_forward(const CudnnHandle& cudnn, ConvPlan& plan, const float* x, const float* w,
                    const float* bias, float* y) {
  plan.check();
  require(x, "conv2d_forward", "x");
  require(w, "conv2d_forward", "w");
  require(y, "conv2d_forward", "y");
  const ConvGeometry& g = plan.geometry_;
  const cudaStream_t stream = stream_of(cudnn);
  detail::transpose_filter(stream, true, g.kernel_h, g.kernel_w, g.channels, g.filters, w,
                           plan.filter_.data());
  const float* input = plan.padded_input(x, stream);
  void* workspace = plan.workspace(plan.fwd_.workspace);
  const float one = 1.0f, zero = 0.0f;
  COHORT_CUDNN_CALL(cudnnSetConvolutionMathType(plan.conv_desc_, plan.fwd_.math));
  COHORT_CUDNN_CALL(cudnnConvolutionForward(cudnn.get(), &one, plan.x_desc_, input, plan.w_desc_,
                                            plan.filter_.data(), plan.conv_desc_, plan.fwd_.algo,
                                            workspace, plan.fwd_.workspace, &zero, plan.y_desc_,
                                            y));
  if (bias != nullptr)
    detail::bias_add(stream,
                     static_cast<std::size_t>(g.batch) * g.out_height() * g.out_width(),
                     static_cast<std::size_t>(g.filters), bias, y);
}

void conv2d_backward_data(const CudnnHandle& cudnn, ConvPlan& plan, const float* dy,
                          const float* w, float* dx) {
  plan.check();
  require(dy, "conv2d_backward_data", "dy");
  require(w, "conv2d_backward_data", "w");
  require(dx, "conv2d_backward_data", "dx");
  const ConvGeometry& g = plan.geometry_;
  const cudaStream_t stream = stream_of(cudnn);
  detail::transpose_filter(stream, true, g.kernel_h, g.kernel_w, g.channels, g.filters, w,
                           plan.filter_.data());
  float* grad = plan.uneven() ? plan.padded_.data() : dx;
  void* workspace = plan.workspace(plan.bwd_data_.workspace);
  const float one = 1.0f, zero = 0.0f;
  COHORT_CUDNN_CALL(cudnnSetConvolutionMathType(plan.conv_desc_, plan.bwd_data_.math));
  COHORT_CUDNN_CALL(cudnnConvolutionBackwardData(
      cudnn.get(), &one, plan.w_desc_, plan.filter_.data(), plan.y_desc_, dy, plan.conv_desc_,
      plan.bwd_data_.algo, workspace, plan.bwd_data_.workspace, &zero, plan.x_desc_, grad));
  // The explicit padding's gradient is dropped: it belongs to no input element.
  if (plan.uneven())
    detail::crop_nhwc(stream, g.batch, g.height, g.width, g.channels, plan.extra_top_,
                      plan.extra_bottom_, plan.extra_left_, plan.extra_right_, grad, dx);
}

void conv2d_backward_filter(const CudnnHandle& cudnn, ConvPlan& plan, const float* x,
                            const float* dy, float* dw, float* db) {
  plan.check();
  require(x, "conv2d_backward_filter", "x");
  require(dy, "conv2d_backward_filter", "dy");
  require(dw, "conv2d_backward_filter", "dw");
  const ConvGeometry& g = plan.geometry_;
  const cudaStream_t stream = stream_of(cudnn);
  const float* input = plan.padded_input(x, stream);
  void* workspace = plan.workspace(plan.bwd_filter_.workspace);
  const float one = 1.0f, zero = 0.0f;
  COHORT_CUDNN_CALL(cudnnSetConvolutionMathType(plan.conv_desc_, plan.bwd_filter_.math));
  COHORT_CUDNN_CALL(cudnnConvolutionBackwardFilter(
      cudnn.get(), &one, plan.x_desc_, input, plan.y_desc_, dy, plan.conv_desc_,
      plan.bwd_filter_.algo, workspace, plan.bwd_filter_.workspace, &zero, plan.w_desc_,
      plan.filter_.data()));
  detail::transpose_filter(stream, false, g.kernel_h, g.kernel_w, g.channels, g.filters,
                           plan.filter_.data(), dw);
  if (db != nullptr)
    detail::bias_grad(stream, static_cast<std::size_t>(g.batch) * g.out_height() * g.out_width(),
                      static_cast<std::size_t>(g.filters), dy, db);
}

}  // namespace cohort::gpu
