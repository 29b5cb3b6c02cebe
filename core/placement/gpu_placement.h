#pragma once
// Which GPUs a worker computes on: from a device spec ("/gpu:1", "/device:GPU:*") and, by
// default, the worker's rank among the workers on its node (the collective part is
// dist/worker_gpus.h).

#include <string_view>
#include <vector>

#include <cstdint>

#include "cohort/core/placement/device_spec.h"

namespace cohort {

/// Whether this Cohort was built with the GPU backend (COHORT_WITH_CUDA).
bool built_with_cuda();

/// The CUDA devices this process sees (CUDA_VISIBLE_DEVICES applies); 0 without CUDA, a driver
/// or a device.
int visible_gpus();

/// Where computation runs, from "cpu", "gpu" (any GPU: "/device:GPU:*"; either in any case) or
/// a device spec with a device type and no job, replica or task ("/gpu:1", "/device:CPU:0").
/// Throws InvalidArgument quoting `text` for a bad spec, one without a device type, or one that
/// names a job, replica or task (every worker computes on its own devices).
DeviceSpec parse_compute_device(std::string_view text);

/// The GPU of each of a worker's `towers` towers, for the device spec `device`:
/// - a spec whose type is not GPU: none (the towers compute on the host);
/// - "/gpu:N": towers on N, N+1, ..., N + towers - 1 (several processes may name the same GPU);
/// - "/gpu:*" (no index), when the process was given GPUs of its own (`own`: no other worker on
///   the node sees them, as with Slurm's --gpus-per-task binding or a per-rank
///   CUDA_VISIBLE_DEVICES): its GPUs 0 to towers - 1;
/// - "/gpu:*" otherwise: the node's workers share out the GPUs they all see by node-local rank:
///   worker `local_rank` of `local_size` gets GPUs local_rank * towers onwards; none is shared.
/// `visible` is visible_gpus(). Throws InvalidArgument, naming the spec, when the GPUs asked for
/// do not exist (or Cohort was built without CUDA) or the node has too few for its workers.
std::vector<int> assign_gpus(const DeviceSpec& device, int towers, int local_rank, int local_size,
                             int visible, bool own = false);

/// Where this process's first GPU sits on the PCI bus (gpu::DeviceProperties::pci_location): the
/// same GPU has the same location in every process of a node. -1 without a GPU.
std::int64_t first_gpu_pci_location();

}  // namespace cohort
