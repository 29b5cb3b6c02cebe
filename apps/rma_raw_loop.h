/* The plain one-sided loop that bench_comm checks its raw figures against, in C on MPI alone:
 * no Cohort code between the timer and the calls (bench_rma_raw.c runs it on its own). */
#ifndef COHORT_APPS_RMA_RAW_LOOP_H_
#define COHORT_APPS_RMA_RAW_LOOP_H_

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Collective over `comm`. Rank `target` allocates a window of `n` floats (MPI_Win_allocate) and
 * writes it once, so its pages exist; rank `origin` then times `blocks` blocks of `calls`
 * iterations of MPI_Win_lock (shared) / one MPI_Get of all n floats (MPI_Accumulate with MPI_SUM
 * when `accumulate` is non-zero) / MPI_Win_unlock, into one buffer it wrote beforehand. Returns the
 * median block's seconds per call on `origin`, 0 elsewhere, and -1 if an MPI call failed. */
double rma_raw_loop(MPI_Comm comm, int target, int origin, long n, int accumulate, int calls,
                    int blocks);

#ifdef __cplusplus
}
#endif

#endif /* COHORT_APPS_RMA_RAW_LOOP_H_ */
