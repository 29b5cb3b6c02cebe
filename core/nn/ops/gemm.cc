#include "cohort/core/nn/ops/gemm.h"

#include <cblas.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <string>

#ifdef COHORT_HAVE_ONEDNN
#include <dnnl.h>
#include <omp.h>
#include <pthread.h>
#include <signal.h>
#endif

namespace cohort::ops_detail {
namespace {

// OpenBLAS starts a thread per core of its own; the ops' threads are the only ones wanted.
void set_up_once() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

#ifdef COHORT_HAVE_ONEDNN
// Which library multiplies. Timed call by call inside the four built-in models
// (docs/BENCHMARKS.md), oneDNN's JIT products ran 5-40% faster than OpenBLAS's from about a
// million multiply-adds up with an inner dimension of 32 or more, and slower below: each of its
// calls costs about half a microsecond more, which the many small per-position products of
// Winograd convolutions feel, and its kernels lose on inner dimensions of 9 to 25.
constexpr std::int64_t kOneDnnMinMultiplyAdds = std::int64_t{1} << 20;
constexpr std::int64_t kOneDnnMinInner = 32;

// oneDNN 2.6's AVX2 kernels read an untransposed B where it lies, and on an AMD Zen 4, when its
// rows were a multiple of 2 KB apart (512 floats: a layer of 512, 1024 or 2048 units), they ran at
// half speed, 46-52 GFLOP/s against OpenBLAS's 97 on 64 x 1024 x 3136 (the cnn's fc1 forward), at
// every alignment but one; with other strides, and with its AVX-512 and SSE4.1 kernels, the speed
// held. On an Intel Xeon with AMX (Sapphire Rapids or later) the same products kept their speed at
// the alignments tried, and the cnn's fc1 kernel gradient ran 15% faster than OpenBLAS's
// (docs/BENCHMARKS.md).
// On AMD CPUs OpenBLAS, which packs B, takes those products.
bool onednn_slow_stride(bool transpose_b, std::int64_t ldb) {
  static const bool trap = [] {
#if defined(__x86_64__)
    const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    return (isa == dnnl_cpu_isa_avx2 || isa == dnnl_cpu_isa_avx2_vnni) && __builtin_cpu_is("amd");
#else
    return false;
#endif
  }();
  return trap && !transpose_b && ldb % 512 == 0;
}

bool through_onednn(bool transpose_b, std::int64_t m, std::int64_t n, std::int64_t k,
                    std::int64_t ldb) {
  return k >= kOneDnnMinInner && m * n * k >= kOneDnnMinMultiplyAdds &&
         !onednn_slow_stride(transpose_b, ldb);
}

// oneDNN threads a product over omp_get_max_threads() when called outside a parallel region;
// the product must stay on the calling thread, so that count is 1 for the call.
bool onednn_gemm(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n,
                 std::int64_t k, float alpha, const float* a, std::int64_t lda, const float* b,
                 std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (threads != 1) omp_set_num_threads(1);
  // A signal handled while oneDNN 2.6's kernel runs corrupted the heap (a stop signal, SIGUSR1,
  // sent to training ranks: 3 runs in 16 aborted in free() inside dnnl_sgemm). Signals wait for
  // the end of the call instead; a product this large takes tens of microseconds or more.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &previous);
  const dnnl_status_t status = dnnl_sgemm(transpose_a ? 'T' : 'N', transpose_b ? 'T' : 'N', m, n,
                                          k, alpha, a, lda, b, ldb, beta, c, ldc);
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (threads != 1) omp_set_num_threads(threads);
  return status == dnnl_success;
}

// The instruction set oneDNN generates its kernels for, as ONEDNN_MAX_CPU_ISA names it.
const char* onednn_isa() {
  switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41: return "SSE41";
    case dnnl_cpu_isa_avx: return "AVX";
    case dnnl_cpu_isa_avx2: return "AVX2";
    case dnnl_cpu_isa_avx2_vnni: return "AVX2_VNNI";
    case dnnl_cpu_isa_avx512_core: return "AVX512_CORE";
    case dnnl_cpu_isa_avx512_core_vnni: return "AVX512_CORE_VNNI";
    case dnnl_cpu_isa_avx512_core_bf16: return "AVX512_CORE_BF16";
    case dnnl_cpu_isa_avx512_core_amx: return "AVX512_CORE_AMX";
    default: return "other";
  }
}
#endif

std::atomic<std::vector<GemmCall>*> recorded_calls{nullptr};
std::mutex recording;

}  // namespace

void record_gemm_calls(std::vector<GemmCall>* calls) { recorded_calls.store(calls); }

void gemm(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n, std::int64_t k,
          float alpha, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
          float beta, float* c, std::int64_t ldc) {
  set_up_once();
  if (std::vector<GemmCall>* calls = recorded_calls.load(std::memory_order_acquire)) {
    const std::lock_guard<std::mutex> lock(recording);
    calls->push_back({transpose_a, transpose_b, m, n, k, lda, ldb, ldc, beta});
  }
#ifdef COHORT_HAVE_ONEDNN
  // oneDNN refuses only arguments OpenBLAS would refuse too; OpenBLAS then says what is wrong.
  if (through_onednn(transpose_b, m, n, k, ldb) &&
      onednn_gemm(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))
    return;
#endif
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

const char* openblas_core() { return openblas_get_corename(); }

bool openblas_follows_coretype() {
  const char* config = openblas_get_config();
  return config != nullptr && std::strstr(config, "DYNAMIC_ARCH") != nullptr;
}

std::string gemm_libraries() {
  set_up_once();
  std::string line = std::string("OpenBLAS ") + openblas_core();
#ifdef COHORT_HAVE_ONEDNN
  const dnnl_version_t* v = dnnl_version();
  line += ", oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
          std::to_string(v->patch) + " " + onednn_isa() + " from " +
          std::to_string(kOneDnnMinMultiplyAdds >> 20) + "M multiply-adds";
#endif
  return line;
}

}  // namespace cohort::ops_detail
