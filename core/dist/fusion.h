#pragma once
// Tensor fusion for allreduce: many small tensors travel in a few large MPI_Allreduce calls.

#include <cstdint>
#include <span>
#include <vector>

#include "cohort/mpi/comm.h"

namespace cohort {

/// Sums `tensors` element-wise over `comm`, in place. Consecutive tensors are packed into a
/// fusion buffer of at most `fusion_bytes` and reduced with one in-place MPI_Allreduce per
/// buffer; a tensor larger than the buffer is reduced in place, in pieces, without copies.
/// Collective and blocking: every rank passes tensors of the same sizes in the same order.
/// `buffer` is scratch space the caller keeps between calls (so steady state allocates nothing).
void allreduce_fused(const mpi::Comm& comm, std::span<const std::span<float>> tensors,
                     std::int64_t fusion_bytes, std::vector<float>& buffer);

/// The same for one contiguous buffer (a graph's flat gradients): in-place reductions of at
/// most `fusion_bytes` each. Collective and blocking.
void allreduce_fused(const mpi::Comm& comm, std::span<float> data, std::int64_t fusion_bytes);

}  // namespace cohort
