#include "cohort/core/dist/worker_gpus.h"

#include <algorithm>
#include <cstdint>

#include "cohort/core/placement/gpu_placement.h"

namespace cohort {

std::vector<int> worker_gpus(const DeviceSpec& device, int towers, const mpi::Comm& workers) {
  // The collectives run whatever the device type (so ranks given different --device values
  // cannot hang); CUDA is asked only for GPU placement.
  const bool wants_gpu = device.device_type == "GPU";
  const mpi::Comm node = workers.split_shared();
  const std::int64_t mine = wants_gpu ? first_gpu_pci_location() : -1;
  std::vector<std::int64_t> firsts = node.allgather(mine);
  std::sort(firsts.begin(), firsts.end());
  const bool own =
      firsts.front() >= 0 && std::adjacent_find(firsts.begin(), firsts.end()) == firsts.end();
  if (!wants_gpu) return {};
  return assign_gpus(device, towers, node.rank(), node.size(), visible_gpus(), own);
}

}  // namespace cohort
