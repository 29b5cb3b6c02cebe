#include "cohort/core/nn/threads.h"

#include <Eigen/Core>

#include <cstdio>
#include <string>

#include <sched.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "cohort/core/base/error.h"

namespace cohort {

namespace {

// The CPUs this process may run on (its affinity: what mpirun's or srun's binding left it); 0
// when unknown.
int usable_cpus() {
#ifdef __linux__
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
#endif
  return 0;
}

}  // namespace

void set_intra_op_threads(int n) {
  if (n < 1) throw InvalidArgument("set_intra_op_threads: n = " + std::to_string(n) + ", must be >= 1");
  // More threads than CPUs to run them on take turns, each step as slow as the slowest turn: a
  // launcher that bound each rank to one core (mpirun's default for two ranks) undoes --threads.
  static bool warned = false;
  if (const int cpus = usable_cpus(); cpus > 0 && n > cpus && !warned) {
    warned = true;
    const std::string label = process_label();
    const std::string prefix = label.empty() ? "" : "[" + label + "] ";
    std::fprintf(stderr,
                 "%swarning: %d intra-op threads, but this process may run on %d CPU%s (its "
                 "binding): they will take turns; bind each rank to as many cores (mpirun "
                 "--map-by slot:PE=%d, srun --cpus-per-task=%d) or to none (--bind-to none)\n",
                 prefix.c_str(), n, cpus, cpus == 1 ? "" : "s", n, n);
  }
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
