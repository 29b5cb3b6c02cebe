// How CUDA, cuBLAS and cuDNN failures become CudaError. Needs no device: the failing statuses are
// returned by stand-in functions or by calls that fail with or without a driver.

#include "cohort/gpu/error.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "cohort/gpu/device.h"
#include "cohort/gpu/libraries.h"
#include "cohort/gpu/pinned.h"

using cohort::gpu::CudaError;
using cohort::gpu::Library;

namespace {

cudaError_t runtime_returns(cudaError_t error) { return error; }
cublasStatus_t cublas_returns(cublasStatus_t status) { return status; }
cudnnStatus_t cudnn_returns(cudnnStatus_t status) { return status; }

// The message of the CudaError that `body` throws, and the line it was thrown from.
template <typename Body>
std::string message_of(Body body) {
  try {
    body();
  } catch (const CudaError& e) {
    return e.what();
  }
  return "(no error)";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

// First in the file, so that this is the process's first sync_debug() call: ctest runs this test
// with COHORT_CUDA_SYNC=1.
TEST_CASE("sync_debug reads COHORT_CUDA_SYNC once, then set_sync_debug overrides it") {
  CHECK(cohort::gpu::sync_debug());
  cohort::gpu::set_sync_debug(false);
  CHECK_FALSE(cohort::gpu::sync_debug());
  cohort::gpu::set_sync_debug(true);
  CHECK(cohort::gpu::sync_debug());
  cohort::gpu::set_sync_debug(false);
}

TEST_CASE("COHORT_CUDA_CALL names the call, the error and the location") {
  int line = 0;
  const std::string what = message_of([&] {
    line = __LINE__ + 1;
    COHORT_CUDA_CALL(runtime_returns(cudaErrorInvalidValue));
  });
  CHECK(contains(what, "runtime_returns(cudaErrorInvalidValue) failed: "));
  CHECK(contains(what, "cudaErrorInvalidValue (invalid argument)"));
  // The location is relative to the source tree (-fmacro-prefix-map), not an absolute path.
  CHECK(contains(what, "tests/gpu/error_test.cc:" + std::to_string(line) + "]"));
  CHECK_FALSE(contains(what, "/tests/gpu/error_test.cc"));
  CHECK(what.find('\n') == std::string::npos);

  try {
    COHORT_CUDA_CALL(runtime_returns(cudaErrorInvalidValue));
    FAIL("no exception");
  } catch (const CudaError& e) {
    CHECK(e.library() == Library::kRuntime);
    CHECK(e.code() == static_cast<int>(cudaErrorInvalidValue));
  }
  CHECK_NOTHROW(COHORT_CUDA_CALL(runtime_returns(cudaSuccess)));
}

TEST_CASE("a real failing runtime call throws, with or without a driver") {
  // No device index is -1: with a device this is cudaErrorInvalidDevice, without a driver
  // cudaErrorInsufficientDriver, without a GPU cudaErrorNoDevice. Whichever, the message names it.
  cudaDeviceProp props{};
  const cudaError_t expected = cudaGetDeviceProperties(&props, -1);
  REQUIRE(expected != cudaSuccess);
  const std::string what =
      message_of([&] { COHORT_CUDA_CALL(cudaGetDeviceProperties(&props, -1)); });
  CHECK(contains(what, "cudaGetDeviceProperties(&props, -1) failed: "));
  CHECK(contains(what, cudaGetErrorName(expected)));
  CHECK_THROWS_AS(cohort::gpu::device_properties(-1), CudaError);
  CHECK_THROWS_WITH_AS(cohort::gpu::set_device(-1),
                       doctest::Contains("cudaSetDevice(device) failed: "), CudaError);
}

TEST_CASE("device_count is 0, not an error, without a device") {
  int count = -1;
  CHECK_NOTHROW(count = cohort::gpu::device_count());
  CHECK(count >= 0);
  if (count == 0) CHECK(cohort::gpu::describe_devices() == "no CUDA device");
}

TEST_CASE("HostRegistration registers where there is a device, and leaves memory as it was where not") {
  // Without one (CI), the registration is refused quietly; tests/gpu/device_test.cc covers a device.
  const bool device = cohort::gpu::device_count() > 0;
  std::vector<float> host(1 << 16, 1.0f);
  {
    const cohort::gpu::HostRegistration registration(host.data(), host.size() * sizeof(float));
    CHECK(registration.registered() == device);
    CHECK(cohort::gpu::is_registered_host_memory(host.data()) == device);
  }
  CHECK_FALSE(cohort::gpu::is_registered_host_memory(host.data()));
}

TEST_CASE("COHORT_CUBLAS_CALL and COHORT_CUDNN_CALL use their library's names") {
  const std::string blas =
      message_of([] { COHORT_CUBLAS_CALL(cublas_returns(CUBLAS_STATUS_INVALID_VALUE)); });
  CHECK(contains(blas, "cublas_returns(CUBLAS_STATUS_INVALID_VALUE) failed: "
                       "CUBLAS_STATUS_INVALID_VALUE ("));
  CHECK(contains(blas, "tests/gpu/error_test.cc:"));
  CHECK_NOTHROW(COHORT_CUBLAS_CALL(cublas_returns(CUBLAS_STATUS_SUCCESS)));

  const std::string dnn =
      message_of([] { COHORT_CUDNN_CALL(cudnn_returns(CUDNN_STATUS_BAD_PARAM)); });
  CHECK(contains(dnn, "cudnn_returns(CUDNN_STATUS_BAD_PARAM) failed: CUDNN_STATUS_BAD_PARAM"));
  CHECK(dnn.find('\n') == std::string::npos);
  CHECK_NOTHROW(COHORT_CUDNN_CALL(cudnn_returns(CUDNN_STATUS_SUCCESS)));

  try {
    COHORT_CUDNN_CALL(cudnn_returns(CUDNN_STATUS_NOT_SUPPORTED));
    FAIL("no exception");
  } catch (const CudaError& e) {
    CHECK(e.library() == Library::kCudnn);
    CHECK(e.code() == static_cast<int>(CUDNN_STATUS_NOT_SUPPORTED));
  }
}

TEST_CASE("in sync debug mode a library call that succeeded waits for its work, and names itself for a fault") {
  cohort::gpu::set_sync_debug(true);
  const std::string cudnn = message_of([] { COHORT_CUDNN_CALL(cudnn_returns(CUDNN_STATUS_SUCCESS)); });
  const std::string cublas = message_of([] { COHORT_CUBLAS_CALL(cublas_returns(CUBLAS_STATUS_SUCCESS)); });
  cohort::gpu::set_sync_debug(false);
  if (cohort::gpu::device_count() > 0) {
    CHECK(cudnn == "(no error)");
    CHECK(cublas == "(no error)");
  } else {
    // No device: the wait itself fails, and the error names the library call, not a later one.
    CHECK(contains(cudnn, "cudnn_returns(CUDNN_STATUS_SUCCESS) (its work on the device; cudaDeviceSynchronize, "
                          "COHORT_CUDA_SYNC) failed: "));
    CHECK(contains(cublas, "cublas_returns(CUBLAS_STATUS_SUCCESS) (its work on the device; cudaDeviceSynchronize, "
                           "COHORT_CUDA_SYNC) failed: "));
    CHECK(contains(cudnn, "error_test.cc:"));
  }
  // Outside sync debug mode nothing waits.
  CHECK(message_of([] { COHORT_CUBLAS_CALL(cublas_returns(CUBLAS_STATUS_SUCCESS)); }) == "(no error)");
}

TEST_CASE("cuBLAS and cuDNN are loaded on first use, with the major version built against") {
  CHECK(cohort::gpu::library_file(Library::kCublas) ==
        "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR));
  CHECK(cohort::gpu::library_file(Library::kCudnn) == "libcudnn.so." + std::to_string(CUDNN_MAJOR));
  // Both are installed wherever the GPU backend is built; no device is needed to load them.
  cohort::gpu::load_library(Library::kCudnn);
  cohort::gpu::load_library(Library::kCublas);
  // cuDNN 9 numbers itself major * 10000 + minor * 100 + patch.
  CHECK(cudnnGetVersion() / 10000 == CUDNN_MAJOR);
  int major = 0;
  CHECK(cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS);
  CHECK(major == CUBLAS_VER_MAJOR);
}
