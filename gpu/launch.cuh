#pragma once
// Launch geometry shared by gpu/'s kernel files (internal; included by .cu files only).

#include <algorithm>
#include <cstddef>

namespace cohort::gpu::detail {

constexpr unsigned kBlock = 256;
// Grid-stride loops cover any n, so the grid never needs more than this many blocks (the limit
// of gridDim.y/z, and plenty to fill every multiprocessor).
constexpr std::size_t kMaxBlocks = 65535;

inline unsigned blocks_for(std::size_t n) {
  return static_cast<unsigned>(std::min((n + kBlock - 1) / kBlock, kMaxBlocks));
}

}  // namespace cohort::gpu::detail

/// for (i = this thread's first element; i < n; i += every thread of the grid)
#define COHORT_GRID_STRIDE(i, n)                                                               \
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
