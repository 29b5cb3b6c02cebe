/* bench_rma_raw: one-sided MPI alone, as a plain C loop, the yardstick for the parameter store.
 *
 *   mpirun -np 2 build/bin/bench_rma_raw
 *
 * Rank 0 holds the window, rank 1 times lock / MPI_Get or MPI_Accumulate / unlock of 1e5, 1e6 and
 * 4e6 floats (rma_raw_loop.c: median of 5 blocks, each of about 0.2 GB moved) and prints ms per
 * call. bench_comm runs the same loop and prints it beside the store's figures. */
#include <stdio.h>

#include "rma_raw_loop.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) {
    if (rank == 0) fprintf(stderr, "error: bench_rma_raw needs 2 ranks: mpirun -np 2 bench_rma_raw\n");
    MPI_Finalize();
    return 2;
  }
  const long sizes[] = {100000, 1000000, 4000000};
  if (rank == 1) printf("| operation | floats | ms per call | GB/s |\n|---|---:|---:|---:|\n");
  int status = 0;
  for (int i = 0; i < 3; ++i) {
    for (int accumulate = 0; accumulate < 2; ++accumulate) {
      const long n = sizes[i];
      const int calls = (int)(50000000 / n) + 2;
      const double s = rma_raw_loop(MPI_COMM_WORLD, 0, 1, n, accumulate, calls, 5);
      if (rank != 1) continue;
      if (s < 0) {
        fprintf(stderr, "error: an MPI call failed\n");
        status = 1;
        continue;
      }
      printf("| %s | %ld | %.3f | %.2f |\n", accumulate ? "MPI_Accumulate" : "MPI_Get", n, s * 1e3,
             (double)n * sizeof(float) / s * 1e-9);
    }
  }
  MPI_Finalize();
  return status;
}
