#pragma once
// How many threads one op may use.

namespace cohort {

/// Sets the number of intra-op threads (Eigen's matrix products and the ops' own parallel loops)
/// for the calling process; n < 1 is an InvalidArgument. This is the OpenMP runtime's and Eigen's
/// process-wide setting, so set it once at start-up, before towers start; towers on several
/// threads then each use up to n threads of their own. When never called, OpenMP's default
/// (OMP_NUM_THREADS, else one per core) applies. With more than one thread, set OMP_PROC_BIND=true
/// where the process owns its cores (one process per node, or ranks bound to disjoint cores):
/// unpinned, the kernel can leave two intra-op threads on one core for a while (seen: the mlp's
/// two-thread step at half speed).
void set_intra_op_threads(int n);

/// The current number of intra-op threads.
int intra_op_threads();

/// The calling thread's index in the intra-op parallel region it runs in (0 outside one): which
/// per-thread scratch an op's loop body uses.
int intra_op_thread_index();

}  // namespace cohort
