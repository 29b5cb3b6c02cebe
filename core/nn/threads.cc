#include "cohort/core/nn/threads.h"

#include <Eigen/Core>
#include <string>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "cohort/core/base/error.h"

namespace cohort {

void set_intra_op_threads(int n) {
  if (n < 1) throw InvalidArgument("set_intra_op_threads: n = " + std::to_string(n) + ", must be >= 1");
  Eigen::setNbThreads(n);
#ifdef _OPENMP
  omp_set_num_threads(n);
#endif
}

int intra_op_threads() { return Eigen::nbThreads(); }

int intra_op_thread_index() {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

}  // namespace cohort
