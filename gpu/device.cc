#include "cohort/gpu/device.h"

#include <cuda_runtime_api.h>

#include <cstdio>

#include "cohort/gpu/error.h"

namespace cohort::gpu {

int device_count() {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  // Without a driver the runtime reports InsufficientDriver; on a machine with a driver but no
  // GPU, NoDevice. Both mean "run on the CPU", which is an answer, not an error.
  if (rc == cudaErrorNoDevice || rc == cudaErrorInsufficientDriver) {
    cudaGetLastError();
    return 0;
  }
  if (rc != cudaSuccess)
    throw CudaError(Library::kRuntime, static_cast<int>(rc), "cudaGetDeviceCount(&count)",
                    __FILE__, __LINE__);
  return count;
}

std::string device_problem() {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  cudaGetLastError();
  if (rc != cudaErrorInsufficientDriver) return "";
  // The runtime says InsufficientDriver both with no driver at all and with one older than
  // itself; the driver's version (0 when there is none) tells them apart.
  int driver = 0;
  int runtime = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess || driver == 0) return "";
  cudaRuntimeGetVersion(&runtime);
  char line[160];
  std::snprintf(line, sizeof line,
                "the NVIDIA driver supports CUDA %d.%d, older than the CUDA %d.%d runtime Cohort was "
                "built with: update the driver",
                driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
  return line;
}

DeviceProperties device_properties(int device) {
  cudaDeviceProp props{};
  COHORT_CUDA_CALL(cudaGetDeviceProperties(&props, device));
  DeviceProperties out;
  out.name = props.name;
  out.compute_major = props.major;
  out.compute_minor = props.minor;
  out.total_memory = props.totalGlobalMem;
  out.multiprocessors = props.multiProcessorCount;
  out.pci_location = (std::int64_t{props.pciDomainID} << 16) | (props.pciBusID << 8) | props.pciDeviceID;
  return out;
}

void set_device(int device) { COHORT_CUDA_CALL(cudaSetDevice(device)); }

int current_device() {
  int device = -1;
  COHORT_CUDA_CALL(cudaGetDevice(&device));
  return device;
}

std::string describe_devices() {
  const int count = device_count();
  if (count == 0) return "no CUDA device";
  std::string text;
  for (int device = 0; device < count; ++device) {
    const DeviceProperties props = device_properties(device);
    char line[384];
    std::snprintf(line, sizeof line, "%s%d: %s, sm_%d%d, %.1f GiB, %d SMs", device ? "\n" : "",
                  device, props.name.c_str(), props.compute_major, props.compute_minor,
                  static_cast<double>(props.total_memory) / (1024.0 * 1024.0 * 1024.0),
                  props.multiprocessors);
    text += line;
  }
  return text;
}

}  // namespace cohort::gpu
