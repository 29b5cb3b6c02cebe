/* One-core single-precision GEMM of the BLAS libraries a build could use, for choosing one.
 *
 * Built once per library by scripts/bench_blas.sh (-DUSE_DNNL for oneDNN's dnnl_sgemm, the
 * CBLAS interface otherwise: OpenBLAS, BLIS). For each size it prints the best of several timed
 * products, in GFLOP/s: C = op(A) B, row-major, beta 0, square sizes, the tall-thin shapes that
 * the convolutions make (many rows, 16 to 128 columns) and the mlp's two large products (its first
 * layer's forward and, with A transposed, its kernel gradient).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef USE_DNNL
#include <dnnl.h>
static const char* library(void) { return "oneDNN"; }
static void sgemm(int ta, long m, long n, long k, const float* a, const float* b, float* c) {
  if (dnnl_sgemm(ta ? 'T' : 'N', 'N', m, n, k, 1.0f, a, ta ? m : k, b, n, 0.0f, c, n) !=
      dnnl_success) {
    fprintf(stderr, "bench_blas: dnnl_sgemm failed\n");
    exit(1);
  }
}
#else
#include <cblas.h>
#ifdef USE_BLIS
static const char* library(void) { return "BLIS"; }
#else
char* openblas_get_corename(void);
static const char* library(void) {
  static char name[64];
  snprintf(name, sizeof name, "OpenBLAS (%s)", openblas_get_corename());
  return name;
}
#endif
static void sgemm(int ta, long m, long n, long k, const float* a, const float* b, float* c) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k,
              1.0f, a, (int)(ta ? m : k), b, (int)n, 0.0f, c, (int)n);
}
#endif

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static float* filled(long count) {
  float* p = malloc((size_t)count * sizeof(float));
  if (p == NULL) {
    fprintf(stderr, "bench_blas: out of memory\n");
    exit(1);
  }
  for (long i = 0; i < count; ++i) p[i] = (float)((i * 7919) % 1000) * 1e-3f - 0.5f;
  return p;
}

/* Best GFLOP/s of `rounds` rounds, each as many products as fill about 0.1 s. */
static double best_gflops(int ta, long m, long n, long k, int rounds) {
  float *a = filled(m * k), *b = filled(k * n), *c = filled(m * n);
  const double flops = 2.0 * (double)m * (double)n * (double)k;
  sgemm(ta, m, n, k, a, b, c); /* warm-up: packing buffers, page faults */
  long reps = 1;
  double t = now();
  sgemm(ta, m, n, k, a, b, c);
  t = now() - t;
  if (t < 0.1) reps = (long)(0.1 / (t > 1e-7 ? t : 1e-7)) + 1;
  double best = 0.0;
  for (int r = 0; r < rounds; ++r) {
    const double start = now();
    for (long i = 0; i < reps; ++i) sgemm(ta, m, n, k, a, b, c);
    const double g = flops * (double)reps / (now() - start) * 1e-9;
    if (g > best) best = g;
  }
  free(a);
  free(b);
  free(c);
  return best;
}

int main(void) {
  /* m, n, k, A transposed */
  static const long shapes[][4] = {
      {1024, 1024, 1024, 0}, {256, 256, 256, 0}, {3136, 32, 144, 0}, {3136, 64, 576, 0},
      {1024, 32, 16, 0},     {1024, 64, 64, 0},  {64, 128, 1568, 0}, {64, 256, 784, 0},
      {784, 256, 64, 1},
  };
  printf("%s", library());
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s)
    printf("\t%.1f", best_gflops((int)shapes[s][3], shapes[s][0], shapes[s][1], shapes[s][2], 7));
  printf("\n");
  return 0;
}
