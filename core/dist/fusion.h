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

/// The sending half of allreduce_fused_bf16 (below) for callers that send pieces themselves:
/// wire[i] := the bfloat16 nearest data[i] + residual[i], residual[i] := what that rounding lost.
/// The spans have the same size.
void round_with_feedback(std::span<const float> data, std::span<float> residual,
                         std::span<std::uint16_t> wire);

/// allreduce_fused of one buffer with bfloat16 on the wire and error feedback: each piece of
/// data + residual is rounded to bfloat16 (in `wire`, at most `fusion_bytes` of it), what the
/// rounding lost stays in `residual` for the next call (so no part of a gradient is lost for
/// good, only delayed), and the ranks' bfloat16 sum (Comm::allreduce_bf16) comes back into
/// `data` as float. `residual` has data's size and starts at zeros; it and `wire` are the
/// caller's, kept between calls. Collective and blocking. Returns the bytes handed to MPI.
std::int64_t allreduce_fused_bf16(const mpi::Comm& comm, std::span<float> data,
                                  std::span<float> residual, std::vector<std::uint16_t>& wire,
                                  std::int64_t fusion_bytes);

}  // namespace cohort
