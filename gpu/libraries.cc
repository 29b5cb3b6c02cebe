#include "cohort/gpu/libraries.h"

#include <cublas_v2.h>
#include <cudnn.h>
#include <dlfcn.h>

#include <cstring>
#include <mutex>

#include "cohort/core/base/error.h"

namespace cohort::gpu {
namespace {

#define COHORT_STRINGIFY_(x) #x
#define COHORT_STRINGIFY(x) COHORT_STRINGIFY_(x)

struct Loaded {
  std::once_flag once;
  void* handle = nullptr;
  std::string error;
};

Loaded& loaded(Library library) {
  static Loaded cublas;
  static Loaded cudnn;
  return library == Library::kCublas ? cublas : cudnn;
}

// The directory the build found the library in (an absolute path), tried after the plain name.
const char* build_directory(Library library) {
  return library == Library::kCublas ? COHORT_CUBLAS_LIBRARY_DIR : COHORT_CUDNN_LIBRARY_DIR;
}

const char* library_name(Library library) {
  return library == Library::kCublas ? "cuBLAS" : "cuDNN";
}

// Opens the library once per process; the handle is never closed.
void* handle(Library library) {
  Loaded& state = loaded(library);
  std::call_once(state.once, [&] {
    const std::string file = library_file(library);
    state.handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (state.handle != nullptr) return;
    std::string reason = dlerror();
    const std::string at_build = std::string(build_directory(library)) + "/" + file;
    state.handle = dlopen(at_build.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (state.handle == nullptr)
      state.error = std::string(library_name(library)) + " is needed on the GPU but " + file +
                    " could not be loaded (" + reason + "; nor from " + at_build +
                    "): install it or put its directory on LD_LIBRARY_PATH";
  });
  if (state.handle == nullptr) throw Error(state.error);
  return state.handle;
}

// The address of `name` in `library`, loading the library first.
void* symbol(Library library, const char* name) {
  void* address = dlsym(handle(library), name);
  if (address == nullptr)
    throw Error(std::string(library_name(library)) + ": " + library_file(library) +
                " has no function " + name +
                " (a version other than the one Cohort was built with?)");
  return address;
}

}  // namespace

std::string library_file(Library library) {
  return library == Library::kCublas ? "libcublas.so." COHORT_STRINGIFY(CUBLAS_VER_MAJOR)
                                     : "libcudnn.so." COHORT_STRINGIFY(CUDNN_MAJOR);
}

void load_library(Library library) { handle(library); }

}  // namespace cohort::gpu

// The library functions gpu/ calls, with the signatures of their headers (the macros of
// cublas_v2.h turn cublasCreate into cublasCreate_v2, as in the callers). Each looks its real
// function up once and calls it.
#define COHORT_FORWARD(library, result, name, params, args)                                  \
  extern "C" result name params {                                                            \
    static const auto real = reinterpret_cast<decltype(&name)>(                              \
        ::cohort::gpu::symbol(::cohort::gpu::Library::library, COHORT_STRINGIFY(name)));     \
    return real args;                                                                        \
  }

COHORT_FORWARD(kCublas, cublasStatus_t, cublasCreate, (cublasHandle_t* handle), (handle))
COHORT_FORWARD(kCublas, cublasStatus_t, cublasDestroy, (cublasHandle_t handle), (handle))
COHORT_FORWARD(kCublas, cublasStatus_t, cublasGetProperty, (libraryPropertyType type, int* value),
               (type, value))
COHORT_FORWARD(kCublas, cublasStatus_t, cublasGetStream,
    (cublasHandle_t handle, cudaStream_t* streamId),
    (handle, streamId))
COHORT_FORWARD(kCublas, cublasStatus_t, cublasSetMathMode,
    (cublasHandle_t handle, cublasMath_t mode),
    (handle, mode))
COHORT_FORWARD(kCublas, cublasStatus_t, cublasSetStream,
    (cublasHandle_t handle, cudaStream_t streamId),
    (handle, streamId))
COHORT_FORWARD(kCublas, cublasStatus_t, cublasSaxpy,
    (cublasHandle_t handle, int n, const float* alpha, const float* x, int incx, float* y,
      int incy),
    (handle, n, alpha, x, incx, y, incy))
COHORT_FORWARD(kCublas, cublasStatus_t, cublasSgemm,
    (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
      int k, const float* alpha, const float* A, int lda, const float* B, int ldb,
      const float* beta, float* C, int ldc),
    (handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc))
COHORT_FORWARD(kCudnn, cudnnStatus_t, cudnnConvolutionBackwardData,
    (cudnnHandle_t handle, const void *alpha, const cudnnFilterDescriptor_t wDesc, const void *w,
      const cudnnTensorDescriptor_t dyDesc, const void *dy,
      const cudnnConvolutionDescriptor_t convDesc, cudnnConvolutionBwdDataAlgo_t algo,
      void *workSpace, size_t workSpaceSizeInBytes, const void *beta,
      const cudnnTensorDescriptor_t dxDesc, void *dx),
    (handle, alpha, wDesc, w, dyDesc, dy, convDesc, algo, workSpace, workSpaceSizeInBytes, beta,
     dxDesc, dx))
COHORT_FORWARD(kCudnn, cudnnStatus_t, cudnnConvolutionBackwardFilter,
    (cudnnHandle_t handle, const void *alpha, const cudnnTensorDescriptor_t xDesc, const void *x,
      const cudnnTensorDescriptor_t dyDesc, const void *dy,
      const cudnnConvolutionDescriptor_t convDesc, cudnnConvolutionBwdFilterAlgo_t algo,
      void *workSpace, size_t workSpaceSizeInBytes, const void *beta,
      const cudnnFilterDescriptor_t dwDesc, void *dw),
    (handle, alpha, xDesc, x, dyDesc, dy, convDesc, algo, workSpace, workSpaceSizeInBytes, beta,
     dwDesc, dw))
COHORT_FORWARD(kCudnn, cudnnStatus_t, cudnnConvolutionForward,
    (cudnnHandle_t handle, const void *alpha, const cudnnTensorDescriptor_t xDesc, const void *x,
      const cudnnFilterDescriptor_t wDesc, const void *w,
      const cudnnConvolutionDescriptor_t convDesc, cudnnConvolutionFwdAlgo_t algo, void *workSpace,
      size_t workSpaceSizeInBytes, const void *beta, const cudnnTensorDescriptor_t yDesc, void *y),
    (handle, alpha, xDesc, x, wDesc, w, convDesc, algo, workSpace, workSpaceSizeInBytes, beta,
     yDesc, y))
COHORT_FORWARD(kCudnn, cudnnStatus_t, cudnnCreate, (cudnnHandle_t *handle), (handle))
COHORT_FORWARD(kCudnn, cudnnStatus_t, cudnnCreateConvolutionDescriptor,
    (cudnnConvolutionDescriptor_t *convDesc),
    (convDesc))
COHORT_FORWARD(kCudnn, cudnnStatus_t, cudnnCreateFilterDescriptor,
    (cudnnFilterDescriptor_t *filterDesc),
    (filterDesc))
COHORT_FORWARD(kCudnn, cudnnStatus_t, cudnnCreatePoolingDescriptor,
    (cudnnPoolingDescriptor_t *poolingDesc),
    (poolingDesc))
COHORT_FORWARD(kCudnn, cudnnStatus_t, cudnnCreateTensorDescriptor,
    (cudnnTensorDescriptor_t *tensorDesc),
    (tensorDesc))
COHORT_FORWARD(kCudnn, cudnnStatus_t, cudnnDestroy, (cudnnHandle_t handle), (handle))
COHORT_FORWARD(kCudnn, cudnnStatus_t, cudnnDestroyConvolutionDescriptor,
    (cudnnConvolutionDescriptor_t convDesc),
    (convDesc))
COHORT_FORWARD(kCudnn, cudnnStatus_t, cudnnDestroyFilterDescriptor,
    (cudnnFilterDescriptor_t filterDesc),
    (filterDesc))
COHORT_FORWARD(kCudnn, cudnnStatus_t, cudnnDestroyPoolingDescriptor,
    (cudnnPoolingDescriptor_t poolingDesc),
    (poolingDesc))
COHORT_FORWARD(kCudnn, cudnnStatus_t, cudnnDestroyTensorDescriptor,
    (cudnnTensorDescriptor_t tensorDesc),
    (tensorDesc))
COHORT_FORWARD(kCudnn, cudnnStatus_t, cudnnGetConvolution2dForwardOutputDim,
    (const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t inputTensorDesc,
      const cudnnFilterDescriptor_t filterDesc, int *n, int *c, int *h, int *w),
    (convDesc, inputTensorDesc, filterDesc, n, c, h, w))
COHORT_FORWARD(kCudnn, cudnnStatus_t, cudnnGetConvolutionBackwardDataAlgorithm_v7,
    (cudnnHandle_t handle, const cudnnFilterDescriptor_t filterDesc,
      const cudnnTensorDescriptor_t diffDesc, const cudnnConvolutionDescriptor_t convDesc,
      const cudnnTensorDescriptor_t gradDesc, const int requestedAlgoCount, int *returnedAlgoCount,
      cudnnConvolutionBwdDataAlgoPerf_t *perfResults),
    (handle, filterDesc, diffDesc, convDesc, gradDesc, requestedAlgoCount, returnedAlgoCount,
     perfResults))
COHORT_FORWARD(kCudnn, cudnnStatus_t, cudnnGetConvolutionBackwardDataWorkspaceSize,
    (cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc,
      const cudnnTensorDescriptor_t dyDesc, const cudnnConvolutionDescriptor_t convDesc,
      const cudnnTensorDescriptor_t dxDesc, cudnnConvolutionBwdDataAlgo_t algo,
      size_t *sizeInBytes),
    (handle, wDesc, dyDesc, convDesc, dxDesc, algo, sizeInBytes))
COHORT_FORWARD(kCudnn, cudnnStatus_t, cudnnGetConvolutionBackwardFilterAlgorithm_v7,
    (cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc,
      const cudnnTensorDescriptor_t diffDesc, const cudnnConvolutionDescriptor_t convDesc,
      const cudnnFilterDescriptor_t gradDesc, const int requestedAlgoCount, int *returnedAlgoCount,
      cudnnConvolutionBwdFilterAlgoPerf_t *perfResults),
    (handle, srcDesc, diffDesc, convDesc, gradDesc, requestedAlgoCount, returnedAlgoCount,
     perfResults))
COHORT_FORWARD(kCudnn, cudnnStatus_t, cudnnGetConvolutionBackwardFilterWorkspaceSize,
    (cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
      const cudnnTensorDescriptor_t dyDesc, const cudnnConvolutionDescriptor_t convDesc,
      const cudnnFilterDescriptor_t gradDesc, cudnnConvolutionBwdFilterAlgo_t algo,
      size_t *sizeInBytes),
    (handle, xDesc, dyDesc, convDesc, gradDesc, algo, sizeInBytes))
COHORT_FORWARD(kCudnn, cudnnStatus_t, cudnnGetConvolutionForwardAlgorithm_v7,
    (cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc,
      const cudnnFilterDescriptor_t filterDesc, const cudnnConvolutionDescriptor_t convDesc,
      const cudnnTensorDescriptor_t destDesc, const int requestedAlgoCount, int *returnedAlgoCount,
      cudnnConvolutionFwdAlgoPerf_t *perfResults),
    (handle, srcDesc, filterDesc, convDesc, destDesc, requestedAlgoCount, returnedAlgoCount,
     perfResults))
COHORT_FORWARD(kCudnn, cudnnStatus_t, cudnnGetConvolutionForwardWorkspaceSize,
    (cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
      const cudnnFilterDescriptor_t wDesc, const cudnnConvolutionDescriptor_t convDesc,
      const cudnnTensorDescriptor_t yDesc, cudnnConvolutionFwdAlgo_t algo, size_t *sizeInBytes),
    (handle, xDesc, wDesc, convDesc, yDesc, algo, sizeInBytes))
COHORT_FORWARD(kCudnn, cudnnStatus_t, cudnnGetPooling2dForwardOutputDim,
    (const cudnnPoolingDescriptor_t poolingDesc, const cudnnTensorDescriptor_t inputTensorDesc,
      int *n, int *c, int *h, int *w),
    (poolingDesc, inputTensorDesc, n, c, h, w))
COHORT_FORWARD(kCudnn, cudnnStatus_t, cudnnGetStream,
    (cudnnHandle_t handle, cudaStream_t *streamId),
    (handle, streamId))
COHORT_FORWARD(kCudnn, cudnnStatus_t, cudnnPoolingBackward,
    (cudnnHandle_t handle, const cudnnPoolingDescriptor_t poolingDesc, const void *alpha,
      const cudnnTensorDescriptor_t yDesc, const void *y, const cudnnTensorDescriptor_t dyDesc,
      const void *dy, const cudnnTensorDescriptor_t xDesc, const void *x, const void *beta,
      const cudnnTensorDescriptor_t dxDesc, void *dx),
    (handle, poolingDesc, alpha, yDesc, y, dyDesc, dy, xDesc, x, beta, dxDesc, dx))
COHORT_FORWARD(kCudnn, cudnnStatus_t, cudnnPoolingForward,
    (cudnnHandle_t handle, const cudnnPoolingDescriptor_t poolingDesc, const void *alpha,
      const cudnnTensorDescriptor_t xDesc, const void *x, const void *beta,
      const cudnnTensorDescriptor_t yDesc, void *y),
    (handle, poolingDesc, alpha, xDesc, x, beta, yDesc, y))
COHORT_FORWARD(kCudnn, cudnnStatus_t, cudnnSetConvolution2dDescriptor,
    (cudnnConvolutionDescriptor_t convDesc, int pad_h, int pad_w, int u, int v, int dilation_h,
      int dilation_w, cudnnConvolutionMode_t mode, cudnnDataType_t computeType),
    (convDesc, pad_h, pad_w, u, v, dilation_h, dilation_w, mode, computeType))
COHORT_FORWARD(kCudnn, cudnnStatus_t, cudnnSetConvolutionMathType,
    (cudnnConvolutionDescriptor_t convDesc, cudnnMathType_t mathType),
    (convDesc, mathType))
COHORT_FORWARD(kCudnn, cudnnStatus_t, cudnnSetFilter4dDescriptor,
    (cudnnFilterDescriptor_t filterDesc, cudnnDataType_t dataType, cudnnTensorFormat_t format,
      int k, int c, int h, int w),
    (filterDesc, dataType, format, k, c, h, w))
COHORT_FORWARD(kCudnn, cudnnStatus_t, cudnnSetPooling2dDescriptor,
    (cudnnPoolingDescriptor_t poolingDesc, cudnnPoolingMode_t mode,
      cudnnNanPropagation_t maxpoolingNanOpt, int windowHeight, int windowWidth,
      int verticalPadding, int horizontalPadding, int verticalStride, int horizontalStride),
    (poolingDesc, mode, maxpoolingNanOpt, windowHeight, windowWidth, verticalPadding,
     horizontalPadding, verticalStride, horizontalStride))
COHORT_FORWARD(kCudnn, cudnnStatus_t, cudnnSetStream,
    (cudnnHandle_t handle, cudaStream_t streamId),
    (handle, streamId))
COHORT_FORWARD(kCudnn, cudnnStatus_t, cudnnSetTensor4dDescriptor,
    (cudnnTensorDescriptor_t tensorDesc, cudnnTensorFormat_t format, cudnnDataType_t dataType,
      int n, int c, int h, int w),
    (tensorDesc, format, dataType, n, c, h, w))
COHORT_FORWARD(kCudnn, size_t, cudnnGetVersion, (), ())

// The names of statuses are asked for while an error is reported: when the library cannot be
// loaded they say so rather than throw.
extern "C" const char* cublasGetStatusName(cublasStatus_t status) {
  try {
    static const auto real = reinterpret_cast<decltype(&cublasGetStatusName)>(
        cohort::gpu::symbol(cohort::gpu::Library::kCublas, "cublasGetStatusName"));
    return real(status);
  } catch (const cohort::Error&) {
    return "CUBLAS_STATUS_?";
  }
}
extern "C" const char* cublasGetStatusString(cublasStatus_t status) {
  try {
    static const auto real = reinterpret_cast<decltype(&cublasGetStatusString)>(
        cohort::gpu::symbol(cohort::gpu::Library::kCublas, "cublasGetStatusString"));
    return real(status);
  } catch (const cohort::Error&) {
    return "cuBLAS not loaded";
  }
}
extern "C" const char* cudnnGetErrorString(cudnnStatus_t status) {
  try {
    static const auto real = reinterpret_cast<decltype(&cudnnGetErrorString)>(
        cohort::gpu::symbol(cohort::gpu::Library::kCudnn, "cudnnGetErrorString"));
    return real(status);
  } catch (const cohort::Error&) {
    return "CUDNN_STATUS_? (cuDNN not loaded)";
  }
}
extern "C" void cudnnGetLastErrorString(char* message, size_t max_size) {
  try {
    static const auto real = reinterpret_cast<decltype(&cudnnGetLastErrorString)>(
        cohort::gpu::symbol(cohort::gpu::Library::kCudnn, "cudnnGetLastErrorString"));
    real(message, max_size);
  } catch (const cohort::Error&) {
    if (max_size > 0) message[0] = '\0';
  }
}
