#include "cohort/gpu/pinned.h"

#include <cuda_runtime_api.h>

#include <map>
#include <mutex>
#include <utility>

namespace cohort::gpu {
namespace {

struct Registered {
  std::size_t bytes = 0;
  int count = 0;
};

// The ranges registered through HostRegistration, by first byte. Never destroyed, so that a
// registration released after main() returns finds them.
std::mutex& registry_mutex() {
  static auto* mutex = new std::mutex;
  return *mutex;
}
std::map<const void*, Registered>& registry() {
  static auto* ranges = new std::map<const void*, Registered>;
  return *ranges;
}

}  // namespace

HostRegistration::HostRegistration(const void* data, std::size_t bytes) {
  if (data == nullptr || bytes == 0) return;
  const std::lock_guard lock(registry_mutex());
  auto& ranges = registry();
  if (const auto it = ranges.find(data); it != ranges.end()) {
    if (it->second.bytes != bytes) return;  // another range from the same address: refused
    ++it->second.count;
    data_ = data;
    return;
  }
  try {
    ranges.emplace(data, Registered{bytes, 0});  // first, so that nothing can throw after
  } catch (...) {
    return;
  }
  if (cudaHostRegister(const_cast<void*>(data), bytes, cudaHostRegisterPortable) != cudaSuccess) {
    cudaGetLastError();  // refused: the memory stays pageable
    ranges.erase(data);
    return;
  }
  ranges.at(data).count = 1;
  data_ = data;
}

HostRegistration::HostRegistration(HostRegistration&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)) {}

HostRegistration& HostRegistration::operator=(HostRegistration&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
  }
  return *this;
}

HostRegistration::~HostRegistration() { release(); }

void HostRegistration::release() noexcept {
  if (data_ == nullptr) return;
  const std::lock_guard lock(registry_mutex());
  auto& ranges = registry();
  const auto it = ranges.find(std::exchange(data_, nullptr));
  if (it == ranges.end() || --it->second.count > 0) return;
  cudaHostUnregister(const_cast<void*>(it->first));
  cudaGetLastError();
  ranges.erase(it);
}

bool is_registered_host_memory(const void* data) {
  cudaPointerAttributes attributes{};
  const bool known = cudaPointerGetAttributes(&attributes, data) == cudaSuccess;
  cudaGetLastError();
  return known && attributes.type == cudaMemoryTypeHost;
}

}  // namespace cohort::gpu
