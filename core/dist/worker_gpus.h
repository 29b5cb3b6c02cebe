#pragma once
// Which GPUs each worker of a cluster computes on (the collective half of
// core/placement/gpu_placement.h).

#include <vector>

#include "cohort/core/placement/device_spec.h"
#include "cohort/mpi/comm.h"

namespace cohort {

/// assign_gpus() for this process, with its node-local rank among the processes of `workers`
/// (MPI_Comm_split_type SHARED), and `own` true when the node's workers see different first GPUs
/// (compared by PCI location). Collective over `workers`, whatever the device type.
std::vector<int> worker_gpus(const DeviceSpec& device, int towers, const mpi::Comm& workers);

}  // namespace cohort
