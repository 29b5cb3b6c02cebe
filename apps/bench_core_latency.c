/* How far apart two CPUs are: the round trip of one cache line between a thread pinned to each
 * (one writes a value, the other answers with the next, and so on), in nanoseconds, the median
 * of 5 samples of 40 ms.
 *
 *   bench_core_latency [cpu_a cpu_b]      (default: the first two CPUs this process may use)
 *
 * Two ranks that sum their gradients read each other's memory every step, so this round trip
 * bounds how fast they can: on a virtual machine the host may place two virtual CPUs on cores of
 * one L3 (about 50 ns) or far apart (about 300 ns), and move them while a benchmark runs.
 * scripts/bench_scaling.sh prints it before and after every run (docs/BENCHMARKS.md). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { kSamples = 5 };
static const double kSampleSeconds = 0.04;

static _Alignas(64) atomic_long line;  /* the cache line that travels */
static atomic_int stop;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

/* The answering side: turns every odd value into the next even one. */
static void* answer(void* cpu) {
  if (pin(*(const int*)cpu) != 0) {
    fprintf(stderr, "bench_core_latency: cannot run on CPU %d\n", *(const int*)cpu);
    exit(1);
  }
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    const long v = atomic_load_explicit(&line, memory_order_acquire);
    if (v % 2 == 1) atomic_store_explicit(&line, v + 1, memory_order_release);
  }
  return NULL;
}

static int compare(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* A CPU number: digits only, below CPU_SETSIZE; -1 (with a message) otherwise. */
static int parse_cpu(const char* text) {
  char* end = NULL;
  errno = 0;
  const long cpu = strtol(text, &end, 10);
  if (end == text || *end != '\0' || errno != 0 || cpu < 0 || cpu >= CPU_SETSIZE) {
    fprintf(stderr, "bench_core_latency: '%s' is not a CPU number (0 to %d)\n", text, CPU_SETSIZE - 1);
    return -1;
  }
  return (int)cpu;
}

int main(int argc, char** argv) {
  int cpus[2] = {-1, -1};
  if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    printf("usage: bench_core_latency [cpu_a cpu_b]  (default: the first two CPUs this process may use)\n");
    return 0;
  }
  if (argc == 3) {
    if ((cpus[0] = parse_cpu(argv[1])) < 0 || (cpus[1] = parse_cpu(argv[2])) < 0) return 2;
  } else if (argc == 1) {
    cpu_set_t mine;
    CPU_ZERO(&mine);
    sched_getaffinity(0, sizeof mine, &mine);
    for (int c = 0, found = 0; c < CPU_SETSIZE && found < 2; ++c)
      if (CPU_ISSET(c, &mine)) cpus[found++] = c;
  } else {
    fprintf(stderr, "usage: bench_core_latency [cpu_a cpu_b]\n");
    return 2;
  }
  if (cpus[0] < 0 || cpus[1] < 0 || cpus[0] == cpus[1]) {
    fprintf(stderr, "bench_core_latency: needs two distinct CPUs (got %d and %d)\n", cpus[0], cpus[1]);
    return 2;
  }
  if (pin(cpus[0]) != 0) {
    fprintf(stderr, "bench_core_latency: cannot run on CPU %d\n", cpus[0]);
    return 1;
  }
  pthread_t other;
  pthread_create(&other, NULL, answer, &cpus[1]);
  double samples[kSamples];
  long v = 0;
  for (int s = 0; s < kSamples; ++s) {
    long trips = 0;
    const double start = now();
    while (now() - start < kSampleSeconds) {
      for (int k = 0; k < 1000; ++k, ++trips) {
        atomic_store_explicit(&line, v + 1, memory_order_release);
        while (atomic_load_explicit(&line, memory_order_acquire) != v + 2) {
        }
        v += 2;
      }
    }
    samples[s] = (now() - start) / (double)trips * 1e9;
  }
  atomic_store(&stop, 1);
  pthread_join(other, NULL);
  qsort(samples, kSamples, sizeof samples[0], compare);
  printf("round trip between CPUs %d and %d: %.0f ns\n", cpus[0], cpus[1], samples[kSamples / 2]);
  return 0;
}
