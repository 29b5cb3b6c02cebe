#include "cohort/core/nn/ops/gemm.h"

#include <cblas.h>

#include <cstring>
#include <mutex>

namespace cohort::ops_detail {

void gemm(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n, std::int64_t k,
          float alpha, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
          float beta, float* c, std::int64_t ldc) {
  // OpenBLAS starts a thread per core of its own; the ops' threads are the only ones wanted.
  static std::once_flag single_threaded;
  std::call_once(single_threaded, [] { openblas_set_num_threads(1); });
  // With beta = 0 OpenBLAS first clears C, on some CPUs (its Zen and Haswell targets) one scalar
  // store at a time: 5% of a resnet step. Cleared here in whole rows, C is only added to.
  if (beta == 0.0f) {
    const auto row = static_cast<std::size_t>(n) * sizeof(float);
    if (ldc == n)
      std::memset(c, 0, row * static_cast<std::size_t>(m));
    else
      for (std::int64_t i = 0; i < m; ++i) std::memset(c + i * ldc, 0, row);
    beta = 1.0f;
  }
  cblas_sgemm(CblasRowMajor, transpose_a ? CblasTrans : CblasNoTrans,
              transpose_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c,
              static_cast<blasint>(ldc));
}

}  // namespace cohort::ops_detail
