#pragma once
// The ops' own parallel loops over the intra-op threads (internal to the ops).

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cohort/core/nn/threads.h"

namespace cohort::ops_detail {

/// The intra-op threads in_ranges() gives [0, total) cut in multiples of `granule`: as many as
/// there are, at most one per granule, at least 1.
inline int range_threads(std::int64_t total, std::int64_t granule) {
  const std::int64_t granules = (total + granule - 1) / granule;
  return static_cast<int>(std::clamp<std::int64_t>(intra_op_threads(), 1, std::max<std::int64_t>(granules, 1)));
}

/// Runs f(begin, count) over [0, total) cut into one contiguous range per intra-op thread (in
/// multiples of `granule`), on those threads; the products inside run single-threaded. With one
/// thread, or a total too small to share, f takes it all on the calling thread. Inside f,
/// intra_op_thread_index() says which range (0 to range_threads() - 1) it is running.
template <typename F>
void in_ranges(std::int64_t total, F&& f, std::int64_t granule = 16) {
  const int threads = range_threads(total, granule);
  if (threads <= 1) {
    if (total > 0) f(std::int64_t{0}, total);
    return;
  }
  const std::int64_t granules = (total + granule - 1) / granule;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int t = 0; t < threads; ++t) {
    const std::int64_t begin = std::min(total, granules * t / threads * granule);
    const std::int64_t end = std::min(total, granules * (t + 1) / threads * granule);
    if (end > begin) f(begin, end - begin);
  }
}

/// For a sum over a batch computed in parallel (a kernel's gradient): runs f(begin, count, sum)
/// over [0, total) as in_ranges does, each range adding into a `size`-float sum of its own,
/// zeroed first; the calling thread's is `out`, the others' live in `scratch` and are added onto
/// `out` at the end, in range order. `out` holds the whole sum after, also for a total of 0.
template <typename F>
void summed_over_ranges(std::int64_t total, float* out, std::int64_t size,
                        std::vector<float>& scratch, F&& f, std::int64_t granule = 1) {
  const int threads = range_threads(total, granule);
  std::fill_n(out, size, 0.0f);
  scratch.assign(static_cast<std::size_t>((threads - 1) * size), 0.0f);
  in_ranges(
      total,
      [&](std::int64_t begin, std::int64_t count) {
        const int t = intra_op_thread_index();
        f(begin, count, t == 0 ? out : scratch.data() + (t - 1) * size);
      },
      granule);
  for (int t = 1; t < threads; ++t) {
    const float* sum = scratch.data() + (t - 1) * size;
    for (std::int64_t i = 0; i < size; ++i) out[i] += sum[i];
  }
}

}  // namespace cohort::ops_detail
