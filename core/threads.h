#pragma once
// How many threads one op may use.

namespace cohort {

/// Sets the number of intra-op threads (Eigen's matrix products and the ops' own parallel loops)
/// for the calling process; n < 1 is an InvalidArgument. This is the OpenMP runtime's and Eigen's
/// process-wide setting, so set it once at start-up, before towers start; towers on several
/// threads then each use up to n threads of their own. When never called, OpenMP's default
/// (OMP_NUM_THREADS, else one per core) applies.
void set_intra_op_threads(int n);

/// The current number of intra-op threads.
int intra_op_threads();

}  // namespace cohort
