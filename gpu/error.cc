#include "cohort/gpu/error.h"

#include <cublas_v2.h>
#include <cudnn.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace cohort::gpu {
namespace {

std::string describe_code(Library library, int code) {
  switch (library) {
    case Library::kRuntime: {
      const auto error = static_cast<cudaError_t>(code);
      return std::string(cudaGetErrorName(error)) + " (" + cudaGetErrorString(error) + ")";
    }
    case Library::kCublas: {
      const auto status = static_cast<cublasStatus_t>(code);
      return std::string(cublasGetStatusName(status)) + " (" + cublasGetStatusString(status) + ")";
    }
    case Library::kCudnn: {
      std::string text = cudnnGetErrorString(static_cast<cudnnStatus_t>(code));
      // cuDNN's status names are coarse (BAD_PARAM covers dozens of cases); its per-thread last
      // message says which parameter, so it is worth the extra call.
      char detail[512] = {};
      cudnnGetLastErrorString(detail, sizeof detail);
      if (detail[0] != '\0') {
        for (char* c = detail; *c != '\0'; ++c)
          if (*c == '\n' || *c == '\r') *c = ' ';
        text += std::string(" (") + detail + ")";
      }
      return text;
    }
  }
  return "unknown library, code " + std::to_string(code);
}

std::string describe(Library library, int code, const std::string& call, const char* file,
                     int line) {
  std::string where;
  int device = -1;
  if (cudaGetDevice(&device) == cudaSuccess) where = "device " + std::to_string(device) + ", ";
  // The runtime remembers a failed call as the thread's "last error" until cudaGetLastError reads
  // it. This error is being reported now, so clear it: otherwise the next
  // COHORT_CUDA_CHECK_LAUNCH() would blame an innocent kernel launch for it. That holds for a
  // cuBLAS or cuDNN failure too, which an allocation or launch inside the library may have caused.
  // (Sticky errors, such as a fault inside a kernel or a missing driver, stay whatever is done.)
  cudaGetLastError();
  return call + " failed: " + describe_code(library, code) + " [" + where + file + ":" +
         std::to_string(line) + "]";
}

// -1: not yet read from the environment; 0: off; 1: on.
std::atomic<int> sync_mode{-1};

}  // namespace

CudaError::CudaError(Library library, int code, const std::string& call, const char* file,
                     int line)
    : Error(describe(library, code, call, file, line)),
      library_(library),
      code_(code) {}

bool sync_debug() {
  int mode = sync_mode.load(std::memory_order_relaxed);
  if (mode < 0) {
    const char* env = std::getenv("COHORT_CUDA_SYNC");
    const int from_env = env != nullptr && env[0] != '\0' && std::strcmp(env, "0") != 0 ? 1 : 0;
    // A concurrent set_sync_debug() wins over the environment.
    sync_mode.compare_exchange_strong(mode, from_env, std::memory_order_relaxed);
    mode = sync_mode.load(std::memory_order_relaxed);
  }
  return mode == 1;
}

void set_sync_debug(bool on) { sync_mode.store(on ? 1 : 0, std::memory_order_relaxed); }

void require_device_pointer(const void* pointer, const char* what, const char* name) {
  if (pointer == nullptr)
    throw InvalidArgument(std::string(what) + ": " + name + " is a null device pointer");
}

namespace detail {

void check_launch(const char* file, int line) {
  const cudaError_t launch = cudaGetLastError();
  if (launch != cudaSuccess)
    throw CudaError(Library::kRuntime, static_cast<int>(launch), "kernel launch", file, line);
  if (sync_debug()) {
    const cudaError_t run = cudaDeviceSynchronize();
    if (run != cudaSuccess)
      throw CudaError(Library::kRuntime, static_cast<int>(run),
                      "kernel execution (cudaDeviceSynchronize, COHORT_CUDA_SYNC)", file, line);
  }
}

void check_library_work(const char* call, const char* file, int line) {
  if (!sync_debug()) return;
  const cudaError_t run = cudaDeviceSynchronize();
  if (run != cudaSuccess)
    throw CudaError(Library::kRuntime, static_cast<int>(run),
                    std::string(call) + " (its work on the device; cudaDeviceSynchronize, COHORT_CUDA_SYNC)",
                    file, line);
}

}  // namespace detail
}  // namespace cohort::gpu
