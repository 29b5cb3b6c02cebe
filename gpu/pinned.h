#pragma once
// Host memory that Cohort does not own, page-locked while it is copied to and from devices.

#include <cstddef>

namespace cohort::gpu {

/// Registers [data, data + bytes) with the driver as page-locked memory for every device
/// (cudaHostRegister, portable) until the last HostRegistration of that range goes: copies
/// between it and a device then run at the bus's speed (on an H200, in a separate CUDA program,
/// 13 MB in 0.25 ms against 1 ms from ordinary memory) and truly asynchronously. Registrations
/// of one range are counted, so several towers may register the graph they share.
///
/// Never throws: where the driver refuses (no device or driver, a range that overlaps one
/// registered before, no memory left to lock), or the range is registered already from the same
/// address with another size, it stays as it was, copies to and from it still work at the
/// ordinary speed, and registered() is false.
///
/// The owner of the memory must keep it allocated, at the same address, for as long as it is
/// registered: memory freed while registered keeps its old pages in the driver, which would then
/// copy to and from those rather than whatever is allocated at that address later.
/// Move-only. Registrations may be made and released on any threads at once; one object is not
/// for several threads at a time.
class HostRegistration {
 public:
  HostRegistration() = default;
  HostRegistration(const void* data, std::size_t bytes);
  HostRegistration(HostRegistration&& other) noexcept;
  HostRegistration& operator=(HostRegistration&& other) noexcept;
  HostRegistration(const HostRegistration&) = delete;
  HostRegistration& operator=(const HostRegistration&) = delete;
  ~HostRegistration();

  bool registered() const noexcept { return data_ != nullptr; }

 private:
  void release() noexcept;
  const void* data_ = nullptr;
};

/// Whether `data` lies in host memory registered with the driver (by anyone). For tests.
bool is_registered_host_memory(const void* data);

}  // namespace cohort::gpu
