/* See rma_raw_loop.h. */
#include "rma_raw_loop.h"

#include <stdlib.h>

static int compare_doubles(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

double rma_raw_loop(MPI_Comm comm, int target, int origin, long n, int accumulate, int calls,
                    int blocks) {
  int rank;
  MPI_Comm_rank(comm, &rank);
  const MPI_Aint bytes = rank == target ? (MPI_Aint)(n * (long)sizeof(float)) : 0;
  float* base = NULL;
  MPI_Win win;
  if (MPI_Win_allocate(bytes, sizeof(float), MPI_INFO_NULL, comm, &base, &win) != MPI_SUCCESS)
    return -1;
  if (rank == target) {
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, target, 0, win);
    for (long i = 0; i < n; ++i) base[i] = 1.0f;
    MPI_Win_unlock(target, win);
  }
  MPI_Barrier(comm);
  double result = 0;
  if (rank == origin) {
    /* 64-byte aligned, as Cohort's tensors and windows are: where malloc hands out a buffer
     * 4 to 12 bytes past the window's address modulo 4 KB, the copy under MPI_Get runs an order
     * of magnitude slower (4K aliasing), and the baseline would depend on the allocator's mood. */
    float* buffer = NULL;
    if (posix_memalign((void**)&buffer, 64, (size_t)n * sizeof(float)) != 0) buffer = NULL;
    double* seconds = malloc((size_t)blocks * sizeof(double));
    int failed = buffer == NULL || seconds == NULL;
    for (long i = 0; !failed && i < n; ++i) buffer[i] = 0.5f;
    for (int b = -1; !failed && b < blocks; ++b) { /* block -1 warms up */
      const double begin = MPI_Wtime();
      for (int c = 0; !failed && c < calls; ++c) {
        failed |= MPI_Win_lock(MPI_LOCK_SHARED, target, 0, win) != MPI_SUCCESS;
        if (accumulate)
          failed |= MPI_Accumulate(buffer, (int)n, MPI_FLOAT, target, 0, (int)n, MPI_FLOAT,
                                   MPI_SUM, win) != MPI_SUCCESS;
        else
          failed |= MPI_Get(buffer, (int)n, MPI_FLOAT, target, 0, (int)n, MPI_FLOAT, win) !=
                    MPI_SUCCESS;
        failed |= MPI_Win_unlock(target, win) != MPI_SUCCESS;
      }
      if (b >= 0) seconds[b] = (MPI_Wtime() - begin) / calls;
    }
    if (failed) {
      result = -1;
    } else {
      qsort(seconds, (size_t)blocks, sizeof(double), compare_doubles);
      result = seconds[blocks / 2];
    }
    free(buffer);
    free(seconds);
  }
  MPI_Barrier(comm);
  MPI_Win_free(&win);
  return result;
}
