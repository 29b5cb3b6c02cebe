#pragma once
// The ops' own parallel loops over the intra-op threads (internal to the ops).

#include <algorithm>
#include <cstdint>

#include "cohort/core/nn/threads.h"

namespace cohort::ops_detail {

/// Runs f(begin, count) over [0, total) cut into one contiguous range per intra-op thread (in
/// multiples of `granule`), on those threads; the products inside run single-threaded. With one
/// thread, or a total too small to share, f takes it all on the calling thread.
template <typename F>
void in_ranges(std::int64_t total, F&& f, std::int64_t granule = 16) {
  const std::int64_t granules = (total + granule - 1) / granule;
  const int threads = static_cast<int>(std::clamp<std::int64_t>(intra_op_threads(), 1, granules));
  if (threads <= 1) {
    if (total > 0) f(std::int64_t{0}, total);
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int t = 0; t < threads; ++t) {
    const std::int64_t begin = std::min(total, granules * t / threads * granule);
    const std::int64_t end = std::min(total, granules * (t + 1) / threads * granule);
    if (end > begin) f(begin, end - begin);
  }
}

}  // namespace cohort::ops_detail
