#pragma once
// Which CUDA devices this process sees, and which one its calls go to.

#include <cstddef>
#include <cstdint>
#include <string>

namespace cohort::gpu {

/// How many CUDA devices this process can use: 0 when there is none, or no (or too old a) driver;
/// never throws for those. Throws CudaError for any other failure to ask. Thread-safe.
int device_count();

/// Why device_count() is 0 on a machine that has an NVIDIA driver: "" when it is not 0, or when
/// there is no driver or the driver sees no device (a machine without a GPU); otherwise one line,
/// such as a driver too old for the CUDA runtime Cohort was built with. Lets a caller tell an
/// unusable GPU from no GPU. Thread-safe.
std::string device_problem();

/// What Cohort needs to know about one device.
struct DeviceProperties {
  std::string name;
  int compute_major = 0;  ///< Compute capability, e.g. 9.0 for an H100/H200.
  int compute_minor = 0;
  std::size_t total_memory = 0;  ///< Bytes.
  int multiprocessors = 0;
  /// Where the device sits on the PCI bus: (domain << 16) | (bus << 8) | device. The same GPU
  /// has the same location in every process of a node, whatever its CUDA index there.
  std::int64_t pci_location = 0;
};

/// The properties of device `device` (0 <= device < device_count()). Throws CudaError otherwise.
/// Thread-safe.
DeviceProperties device_properties(int device);

/// Makes `device` current for the calling thread: later CUDA calls, allocations and handles made
/// on this thread go to it. Throws CudaError for a bad index.
void set_device(int device);

/// The calling thread's current device. Throws CudaError when there is no usable device.
int current_device();

/// One line per device, e.g. "0: NVIDIA H200, sm_90, 139.8 GiB, 132 SMs", or "no CUDA device".
/// For logs and --help output. Thread-safe.
std::string describe_devices();

}  // namespace cohort::gpu
