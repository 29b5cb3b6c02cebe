#pragma once
// Single-precision matrix products through OpenBLAS, for the ops whose products are many and small
// (Winograd's per-position products), where its kernels measure 1.2-1.6x faster than Eigen's, and
// through oneDNN's JIT products for the large ones where it is built with oneDNN (products of a
// million multiply-adds and more; docs/BENCHMARKS.md says what was measured). Both pick their
// kernels for the CPU they run on, so one binary serves AVX2 and AVX-512 machines. Internal to
// the ops.

#include <cstdint>
#include <string>
#include <vector>

namespace cohort::ops_detail {

/// Row-major C = alpha op(A) op(B) + beta C, with op(A) m x k and op(B) k x n; a transposed
/// operand is read as the row-major transpose of what is stored. Runs on the calling thread only:
/// the ops split their work over the intra-op threads themselves, so calls may run concurrently.
void gemm(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n, std::int64_t k,
          float alpha, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
          float beta, float* c, std::int64_t ldc);

/// Row-major C = op(A) op(B) + beta C with dense operands (leading dimensions their row lengths).
inline void gemm(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n,
                 std::int64_t k, const float* a, const float* b, float beta, float* c) {
  gemm(transpose_a, transpose_b, m, n, k, 1.0f, a, transpose_a ? m : k, b, transpose_b ? k : n,
       beta, c, n);
}

/// A call of gemm() as recorded: its shape, its operands' layout and beta (not the data).
struct GemmCall {
  bool transpose_a = false, transpose_b = false;
  std::int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
  float beta = 0.0f;
};

/// While `calls` is set, every gemm() call, on any thread, is appended to it; nullptr stops.
/// bench_train records one training step so as to time its products alone.
void record_gemm_calls(std::vector<GemmCall>* calls);

/// The libraries the products run through, for run headers and benchmark tables:
/// "OpenBLAS Cooperlake, oneDNN 2.6.3 AVX512_CORE_BF16 from 1M multiply-adds".
std::string gemm_libraries();

/// The name of the kernels OpenBLAS chose for this CPU ("SkylakeX", "Haswell", "Prescott", ...).
const char* openblas_core();

/// Whether OpenBLAS chooses its kernels at run time, and so reads OPENBLAS_CORETYPE (a
/// DYNAMIC_ARCH build, as Debian's).
bool openblas_follows_coretype();

}  // namespace cohort::ops_detail
