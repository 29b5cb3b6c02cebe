#pragma once
// CudaError and the checks that turn a failed CUDA runtime, cuBLAS or cuDNN call, or a failed
// kernel launch, into one. CudaError belongs to Cohort's one exception hierarchy
// (core/base/error.h); bad arguments to gpu/'s functions are cohort::InvalidArgument.

#include <cuda_runtime_api.h>

#include <string>

#include "cohort/core/base/error.h"

namespace cohort::gpu {

/// The library whose call failed; selects how CudaError::code() is named in the message.
enum class Library { kRuntime, kCublas, kCudnn };

/// A failed CUDA call: what() names the call, the library's error name and text, the current
/// device (when one can be asked for) and the source location, on one line, e.g.
/// "cudaMalloc(&data_, bytes) failed: cudaErrorMemoryAllocation (out of memory) [device 0,
/// gpu/buffer.h:40]".
class CudaError : public Error {
 public:
  /// `code` is the cudaError_t, cublasStatus_t or cudnnStatus_t the call returned.
  CudaError(Library library, int code, const std::string& call, const char* file, int line);
  Library library() const noexcept { return library_; }
  int code() const noexcept { return code_; }

 private:
  Library library_;
  int code_;
};

/// Whether COHORT_CUDA_CHECK_LAUNCH(), COHORT_CUBLAS_CALL and COHORT_CUDNN_CALL also wait for the
/// device (cudaDeviceSynchronize), so that a fault inside a kernel, Cohort's or a library's, is
/// reported at the call that queued it rather than at some later one.
/// Off by default; the first call reads the environment variable COHORT_CUDA_SYNC (on when set to
/// anything but "" or "0"). This flag is the library's only process-wide state. Thread-safe.
bool sync_debug();
/// Overrides COHORT_CUDA_SYNC for the rest of the process. Thread-safe.
void set_sync_debug(bool on);

/// Throws InvalidArgument "<what>: <name> is a null device pointer" when `pointer` is null.
void require_device_pointer(const void* pointer, const char* what, const char* name);

namespace detail {
/// The body of COHORT_CUDA_CHECK_LAUNCH(): throws CudaError for a launch error (and, in sync
/// debug mode, for an error while the kernel ran). Blocking only in sync debug mode.
void check_launch(const char* file, int line);
/// After a cuBLAS or cuDNN call that succeeded: in sync debug mode, waits for the device and
/// throws CudaError naming `call` for a fault in the work it queued. Nothing otherwise.
void check_library_work(const char* call, const char* file, int line);
}  // namespace detail

}  // namespace cohort::gpu

/// Calls a CUDA runtime function and throws cohort::gpu::CudaError unless it returns cudaSuccess.
#define COHORT_CUDA_CALL(call)                                                           \
  do {                                                                                   \
    const cudaError_t cohort_cuda_rc_ = (call);                                          \
    if (cohort_cuda_rc_ != cudaSuccess)                                                  \
      throw ::cohort::gpu::CudaError(::cohort::gpu::Library::kRuntime,                   \
                                     static_cast<int>(cohort_cuda_rc_), #call, __FILE__, \
                                     __LINE__);                                          \
  } while (0)

/// Calls a cuBLAS function and throws cohort::gpu::CudaError unless it returns
/// CUBLAS_STATUS_SUCCESS (in sync debug mode, also for a fault in the work it queued). The caller
/// includes <cublas_v2.h>.
#define COHORT_CUBLAS_CALL(call)                                                          \
  do {                                                                                    \
    const cublasStatus_t cohort_cublas_rc_ = (call);                                      \
    if (cohort_cublas_rc_ != CUBLAS_STATUS_SUCCESS)                                       \
      throw ::cohort::gpu::CudaError(::cohort::gpu::Library::kCublas,                     \
                                     static_cast<int>(cohort_cublas_rc_), #call, __FILE__, \
                                     __LINE__);                                           \
    ::cohort::gpu::detail::check_library_work(#call, __FILE__, __LINE__);                 \
  } while (0)

/// Calls a cuDNN function and throws cohort::gpu::CudaError unless it returns
/// CUDNN_STATUS_SUCCESS (in sync debug mode, also for a fault in the work it queued). The caller
/// includes <cudnn.h>.
#define COHORT_CUDNN_CALL(call)                                                          \
  do {                                                                                   \
    const cudnnStatus_t cohort_cudnn_rc_ = (call);                                       \
    if (cohort_cudnn_rc_ != CUDNN_STATUS_SUCCESS)                                        \
      throw ::cohort::gpu::CudaError(::cohort::gpu::Library::kCudnn,                     \
                                     static_cast<int>(cohort_cudnn_rc_), #call, __FILE__, \
                                     __LINE__);                                          \
    ::cohort::gpu::detail::check_library_work(#call, __FILE__, __LINE__);                \
  } while (0)

/// Put right after every kernel launch (`kernel<<<grid, block, 0, stream>>>(...)`): throws
/// cohort::gpu::CudaError for a bad launch configuration, and in sync debug mode (see
/// cohort::gpu::sync_debug()) waits for the device and throws for a fault while the kernel ran.
#define COHORT_CUDA_CHECK_LAUNCH() ::cohort::gpu::detail::check_launch(__FILE__, __LINE__)
