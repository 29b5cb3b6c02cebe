// Conv2D on cuDNN's convolution API, NHWC throughout.
//
// cuDNN pads both sides of a dimension alike, TensorFlow's SAME padding puts the odd one after:
// the common part is cuDNN's padding, the rest (one row or column at most for SAME) an explicitly
// zero-padded copy of the input, as TensorFlow's own cuDNN path does. The filter goes to cuDNN as
// OHWI (its KRSC, the only filter layout it takes with NHWC float images).
#include <cudnn.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <string>
#include <vector>

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
    throw InvalidArgument("ConvPlan: " + describe(g) +
                          ": sizes must be >= 1, paddings >= 0, and the padded input at "
                          "least the filter");
  // cuDNN's 4-d descriptors use int strides.
  const auto elements = [](long long a, long long b, long long c, long long d) {
    return a * b * c * d;
  };
  if (elements(g.batch, g.height + g.pad_top + g.pad_bottom, g.width + g.pad_left + g.pad_right,
               g.channels) > INT_MAX ||
      elements(g.batch, g.out_height(), g.out_width(), g.filters) > INT_MAX)
    throw InvalidArgument("ConvPlan: " + describe(g) + ": tensors of 2^31 elements or more");
}

// The three passes of a convolution, and what cuDNN calls differ between them.
enum class Pass { kForward, kBackwardData, kBackwardFilter };

const char* pass_name(Pass pass) {
  switch (pass) {
    case Pass::kForward: return "forward";
    case Pass::kBackwardData: return "backward-data";
    case Pass::kBackwardFilter: return "backward-filter";
  }
  return "?";
}

// One heuristic result of any pass, its algorithm as an int (cuDNN's three enums).
struct Candidate {
  int algo = 0;
  cudnnStatus_t status = CUDNN_STATUS_NOT_SUPPORTED;
  cudnnDeterminism_t determinism = CUDNN_NON_DETERMINISTIC;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

template <typename Perf>
std::vector<Candidate> candidates(const Perf* results, int count) {
  std::vector<Candidate> out;
  for (int k = 0; k < count; ++k)
    out.push_back({static_cast<int>(results[k].algo), results[k].status, results[k].determinism,
                   results[k].mathType});
  return out;
}

// The descriptors a pass is asked about.
struct Descriptors {
  cudnnHandle_t handle;
  cudnnTensorDescriptor_t x, y;
  cudnnFilterDescriptor_t w;
  cudnnConvolutionDescriptor_t conv;
};

// cuDNN's heuristic results for `pass`, best first (cudnnGet*Algorithm_v7).
std::vector<Candidate> heuristics(Pass pass, const Descriptors& d) {
  int count = 0;
  switch (pass) {
    case Pass::kForward: {
      cudnnConvolutionFwdAlgoPerf_t r[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      COHORT_CUDNN_CALL(cudnnGetConvolutionForwardAlgorithm_v7(
          d.handle, d.x, d.w, d.conv, d.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, r));
      return candidates(r, count);
    }
    case Pass::kBackwardData: {
      cudnnConvolutionBwdDataAlgoPerf_t r[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
      COHORT_CUDNN_CALL(cudnnGetConvolutionBackwardDataAlgorithm_v7(
          d.handle, d.w, d.y, d.conv, d.x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, r));
      return candidates(r, count);
    }
    case Pass::kBackwardFilter: {
      cudnnConvolutionBwdFilterAlgoPerf_t r[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
      COHORT_CUDNN_CALL(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
          d.handle, d.x, d.y, d.conv, d.w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, r));
      return candidates(r, count);
    }
  }
  return {};
}

// The pass's workspace query for `algo`, with the math type currently set on d.conv.
cudnnStatus_t workspace_of(Pass pass, const Descriptors& d, int algo, std::size_t* bytes) {
  switch (pass) {
    case Pass::kForward:
      return cudnnGetConvolutionForwardWorkspaceSize(
          d.handle, d.x, d.w, d.conv, d.y, static_cast<cudnnConvolutionFwdAlgo_t>(algo), bytes);
    case Pass::kBackwardData:
      return cudnnGetConvolutionBackwardDataWorkspaceSize(
          d.handle, d.w, d.y, d.conv, d.x, static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), bytes);
    case Pass::kBackwardFilter:
      return cudnnGetConvolutionBackwardFilterWorkspaceSize(
          d.handle, d.x, d.y, d.conv, d.w, static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo),
          bytes);
  }
  return CUDNN_STATUS_NOT_SUPPORTED;
}

// The one algorithm chooser of the three passes. Picks from cuDNN's heuristic results (best
// first) the first that works, in rounds that prefer deterministic algorithms (so a run repeats
// exactly) and results reported with FMA math. Unless TF32 is allowed, only plain FP32 math is
// taken: a result reported with the default math type is run with FMA math forced on the
// descriptor, which on Ampere and later keeps TF32 out. "Works" means the math type can be set
// and the pass's workspace query (made with that math type) succeeds; the choice records the
// bytes. Algorithms in `refused` (cuDNN refused them when run) are passed over. Throws CudaError
// (not supported) naming the pass and geometry when nothing works.
ConvAlgorithm choose(Pass pass, const Descriptors& d, bool allow_tf32, const ConvGeometry& g,
                     const std::vector<int>& refused = {}) {
  COHORT_CUDNN_CALL(
      cudnnSetConvolutionMathType(d.conv, allow_tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
  const std::vector<Candidate> results = heuristics(pass, d);
  for (int round = 0; round < 4; ++round) {
    const bool deterministic_only = round < 2;
    const bool default_math = round % 2 == 1;
    for (const Candidate& r : results) {
      if (r.status != CUDNN_STATUS_SUCCESS) continue;
      if (std::find(refused.begin(), refused.end(), r.algo) != refused.end()) continue;
      if (deterministic_only && r.determinism != CUDNN_DETERMINISTIC) continue;
      cudnnMathType_t math = r.math;
      if (!allow_tf32) {
        if (r.math != CUDNN_FMA_MATH && !(default_math && r.math == CUDNN_DEFAULT_MATH)) continue;
        math = CUDNN_FMA_MATH;
      }
      std::size_t bytes = 0;
      if (cudnnSetConvolutionMathType(d.conv, math) != CUDNN_STATUS_SUCCESS) continue;
      if (workspace_of(pass, d, r.algo, &bytes) != CUDNN_STATUS_SUCCESS) continue;
      return {r.algo, math, bytes};
    }
  }
  throw CudaError(Library::kCudnn, CUDNN_STATUS_NOT_SUPPORTED,
                  std::string("ConvPlan: no FP32 ") + pass_name(pass) + " algorithm for " +
                      describe(g),
                  __FILE__, __LINE__);
}

}  // namespace

ConvPlan::ConvPlan(const CudnnHandle& cudnn, const ConvGeometry& geometry, bool allow_tf32)
    : geometry_(geometry), allow_tf32_(allow_tf32) {
  validate(geometry);
  const ConvGeometry& g = geometry_;
  const int sym_h = std::min(g.pad_top, g.pad_bottom), sym_w = std::min(g.pad_left, g.pad_right);
  extra_top_ = g.pad_top - sym_h;
  extra_bottom_ = g.pad_bottom - sym_h;
  extra_left_ = g.pad_left - sym_w;
  extra_right_ = g.pad_right - sym_w;
  const int in_h = g.height + extra_top_ + extra_bottom_;
  const int in_w = g.width + extra_left_ + extra_right_;
  COHORT_CUDNN_CALL(cudnnCreateTensorDescriptor(x_desc_.receive()));
  COHORT_CUDNN_CALL(cudnnCreateTensorDescriptor(y_desc_.receive()));
  COHORT_CUDNN_CALL(cudnnCreateFilterDescriptor(w_desc_.receive()));
  COHORT_CUDNN_CALL(cudnnCreateConvolutionDescriptor(conv_desc_.receive()));
  COHORT_CUDNN_CALL(cudnnSetTensor4dDescriptor(x_desc_.get(), CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT,
                                               g.batch, g.channels, in_h, in_w));
  COHORT_CUDNN_CALL(cudnnSetFilter4dDescriptor(w_desc_.get(), CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC,
                                               g.filters, g.channels, g.kernel_h, g.kernel_w));
  COHORT_CUDNN_CALL(cudnnSetConvolution2dDescriptor(conv_desc_.get(), sym_h, sym_w, g.stride_h,
                                                    g.stride_w, 1, 1, CUDNN_CROSS_CORRELATION,
                                                    CUDNN_DATA_FLOAT));
  int n = 0, c = 0, h = 0, w = 0;
  COHORT_CUDNN_CALL(cudnnGetConvolution2dForwardOutputDim(conv_desc_.get(), x_desc_.get(),
                                                          w_desc_.get(), &n, &c, &h, &w));
  if (n != g.batch || c != g.filters || h != g.out_height() || w != g.out_width())
    throw Error("ConvPlan: cuDNN's output " + std::to_string(h) + "x" + std::to_string(w) +
                " differs from " + std::to_string(g.out_height()) + "x" +
                std::to_string(g.out_width()) + " for " + describe(g));
  COHORT_CUDNN_CALL(
      cudnnSetTensor4dDescriptor(y_desc_.get(), CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, n, c, h, w));

  const Descriptors d{cudnn.get(), x_desc_.get(), y_desc_.get(), w_desc_.get(), conv_desc_.get()};
  fwd_ = choose(Pass::kForward, d, allow_tf32, g);
  bwd_data_ = choose(Pass::kBackwardData, d, allow_tf32, g);
  bwd_filter_ = choose(Pass::kBackwardFilter, d, allow_tf32, g);

  // One workspace for the three passes, allocated here, so no step waits for an allocation.
  workspace_ = DeviceBuffer<char>(
      std::max({fwd_.workspace, bwd_data_.workspace, bwd_filter_.workspace}));
  filter_ = DeviceBuffer<float>(static_cast<std::size_t>(g.kernel_h) * g.kernel_w * g.channels *
                                g.filters);
  if (uneven())
    padded_ = DeviceBuffer<float>(static_cast<std::size_t>(g.batch) * in_h * in_w * g.channels);
}

void ConvPlan::check() const {
  if (!conv_desc_) throw Error("ConvPlan: used after being moved from");
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

// Readies the descriptor for one pass: its math type set, its workspace returned.
void* ConvPlan::prepare(const ConvAlgorithm& pass) {
  check();
  COHORT_CUDNN_CALL(cudnnSetConvolutionMathType(conv_desc_.get(), pass.math));
  return workspace(pass.workspace);
}

ConvAlgorithm& ConvPlan::chosen(int pass) {
  switch (static_cast<Pass>(pass)) {
    case Pass::kForward: return fwd_;
    case Pass::kBackwardData: return bwd_data_;
    case Pass::kBackwardFilter: break;
  }
  return bwd_filter_;
}

bool ConvPlan::fall_back(const CudnnHandle& cudnn, int pass) {
  ConvAlgorithm& current = chosen(pass);
  std::vector<int>& refused = refused_[pass];
  refused.push_back(current.algo);
  const Descriptors d{cudnn.get(), x_desc_.get(), y_desc_.get(), w_desc_.get(), conv_desc_.get()};
  ConvAlgorithm next;
  try {
    next = choose(static_cast<Pass>(pass), d, allow_tf32_, geometry_, refused);
  } catch (const CudaError&) {
    return false;  // none left: the caller reports the refusal
  }
  std::fprintf(stderr, "note: cuDNN refused %s algorithm %d for %s when run; using algorithm %d\n",
               pass_name(static_cast<Pass>(pass)), current.algo, describe(geometry_).c_str(), next.algo);
  current = next;
  return true;
}

template <typename Call>
void ConvPlan::run(const CudnnHandle& cudnn, int pass, const char* what, Call call) {
  for (;;) {
    const ConvAlgorithm& algorithm = chosen(pass);
    void* workspace = prepare(algorithm);
    const cudnnStatus_t status = call(algorithm, workspace);
    if (status == CUDNN_STATUS_SUCCESS) {
      detail::check_library_work(what, __FILE__, __LINE__);
      return;
    }
    cudaGetLastError();  // whatever the refused call left is reported here, not at a later launch
    if (status != CUDNN_STATUS_NOT_SUPPORTED || !fall_back(cudnn, pass))
      throw CudaError(Library::kCudnn, static_cast<int>(status),
                      std::string(what) + " (" + pass_name(static_cast<Pass>(pass)) + " algorithm " +
                          std::to_string(algorithm.algo) + ", " + describe(geometry_) + ")",
                      __FILE__, __LINE__);
  }
}

void conv2d_forward(const CudnnHandle& cudnn, ConvPlan& plan, const float* x, const float* w,
                    const float* bias, float* y) {
  require_device_pointer(x, "conv2d_forward", "x");
  require_device_pointer(w, "conv2d_forward", "w");
  require_device_pointer(y, "conv2d_forward", "y");
  plan.check();
  const ConvGeometry& g = plan.geometry_;
  const cudaStream_t stream = cudnn.stream();
  detail::transpose_filter(stream, true, g.kernel_h, g.kernel_w, g.channels, g.filters, w,
                           plan.filter_.data());
  const float* input = plan.padded_input(x, stream);
  const float one = 1.0f, zero = 0.0f;
  plan.run(cudnn, static_cast<int>(Pass::kForward), "cudnnConvolutionForward",
           [&](const ConvAlgorithm& a, void* workspace) {
             return cudnnConvolutionForward(
                 cudnn.get(), &one, plan.x_desc_.get(), input, plan.w_desc_.get(),
                 plan.filter_.data(), plan.conv_desc_.get(),
                 static_cast<cudnnConvolutionFwdAlgo_t>(a.algo), workspace, a.workspace, &zero,
                 plan.y_desc_.get(), y);
           });
  if (bias != nullptr)
    detail::bias_add(stream, static_cast<std::size_t>(g.batch) * g.out_height() * g.out_width(),
                     static_cast<std::size_t>(g.filters), bias, y);
}

void conv2d_backward_data(const CudnnHandle& cudnn, ConvPlan& plan, const float* dy,
                          const float* w, float* dx) {
  require_device_pointer(dy, "conv2d_backward_data", "dy");
  require_device_pointer(w, "conv2d_backward_data", "w");
  require_device_pointer(dx, "conv2d_backward_data", "dx");
  plan.check();
  const ConvGeometry& g = plan.geometry_;
  const cudaStream_t stream = cudnn.stream();
  detail::transpose_filter(stream, true, g.kernel_h, g.kernel_w, g.channels, g.filters, w,
                           plan.filter_.data());
  float* grad = plan.uneven() ? plan.padded_.data() : dx;
  const float one = 1.0f, zero = 0.0f;
  plan.run(cudnn, static_cast<int>(Pass::kBackwardData), "cudnnConvolutionBackwardData",
           [&](const ConvAlgorithm& a, void* workspace) {
             return cudnnConvolutionBackwardData(
                 cudnn.get(), &one, plan.w_desc_.get(), plan.filter_.data(), plan.y_desc_.get(),
                 dy, plan.conv_desc_.get(), static_cast<cudnnConvolutionBwdDataAlgo_t>(a.algo),
                 workspace, a.workspace, &zero, plan.x_desc_.get(), grad);
           });
  // The explicit padding's gradient is dropped: it belongs to no input element.
  if (plan.uneven())
    detail::crop_nhwc(stream, g.batch, g.height, g.width, g.channels, plan.extra_top_,
                      plan.extra_bottom_, plan.extra_left_, plan.extra_right_, grad, dx);
}

void conv2d_backward_filter(const CudnnHandle& cudnn, ConvPlan& plan, const float* x,
                            const float* dy, float* dw, float* db) {
  require_device_pointer(x, "conv2d_backward_filter", "x");
  require_device_pointer(dy, "conv2d_backward_filter", "dy");
  require_device_pointer(dw, "conv2d_backward_filter", "dw");
  plan.check();
  const ConvGeometry& g = plan.geometry_;
  const cudaStream_t stream = cudnn.stream();
  const float* input = plan.padded_input(x, stream);
  const float one = 1.0f, zero = 0.0f;
  plan.run(cudnn, static_cast<int>(Pass::kBackwardFilter), "cudnnConvolutionBackwardFilter",
           [&](const ConvAlgorithm& a, void* workspace) {
             return cudnnConvolutionBackwardFilter(
                 cudnn.get(), &one, plan.x_desc_.get(), input, plan.y_desc_.get(), dy,
                 plan.conv_desc_.get(), static_cast<cudnnConvolutionBwdFilterAlgo_t>(a.algo),
                 workspace, a.workspace, &zero, plan.w_desc_.get(), plan.filter_.data());
           });
  detail::transpose_filter(stream, false, g.kernel_h, g.kernel_w, g.channels, g.filters,
                           plan.filter_.data(), dw);
  if (db != nullptr)
    detail::bias_grad(stream, static_cast<std::size_t>(g.batch) * g.out_height() * g.out_width(),
                      static_cast<std::size_t>(g.filters), dy, db);
}

}  // namespace cohort::gpu
