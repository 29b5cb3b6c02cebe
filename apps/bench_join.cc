// bench_join: the CPU a ps task spends waiting in Server::join() while the workers work.
//
//   mpirun -np 2 build/bin/bench_join --ps_tasks=1 --wait_secs=5
//
// The workers sleep --wait_secs (no MPI calls) and then call done(); each ps task measures its
// own process CPU time (user + system, getrusage) across join(). Rank 0 prints one row per ps.
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "cohort/core/base/clock.h"
#include "cohort/core/base/flags.h"
#include "cohort/core/dist/cluster.h"
#include "cohort/core/dist/server.h"
#include "cohort/core/train/app.h"

COHORT_DEFINE_float(wait_secs, 5.0, "how long the workers keep the ps tasks waiting",
                    cohort::flags::Range{0, 1e6});

namespace {

int Main(int argc, char** argv) {
  cohort::app::refuse_arguments(argc, argv);
  const cohort::ClusterSpec cluster = cohort::cluster_from_flags();
  if (!cluster.has_job("ps"))
    throw cohort::InvalidArgument("bench_join measures ps tasks: pass --ps_tasks=1 or more");
  cohort::Server server(cluster);
  cluster.world().barrier();
  double cpu = -1.0, wall = -1.0;
  if (server.is_computing()) {
    std::this_thread::sleep_for(std::chrono::duration<double>(FLAGS_wait_secs));
    server.done();
  } else {
    const double cpu_before = cohort::process_cpu_seconds();
    const auto start = std::chrono::steady_clock::now();
    server.join();
    wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    cpu = cohort::process_cpu_seconds() - cpu_before;
  }
  const std::vector<double> cpus = cluster.world().allgather(cpu);
  const std::vector<double> walls = cluster.world().allgather(wall);
  if (cluster.my_rank() == 0) {
    std::printf("%-8s %8s %10s %12s\n", "task", "wall_s", "cpu_ms", "core_pct");
    for (int rank = 0; rank < cluster.size(); ++rank) {
      const auto r = static_cast<std::size_t>(rank);
      if (cpus[r] < 0) continue;
      std::printf("%-8s %8.3f %10.2f %11.3f%%\n", cluster.task_of(rank).to_string().c_str(),
                  walls[r], cpus[r] * 1e3, 100.0 * cpus[r] / walls[r]);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return cohort::app::Run(Main, argc, argv); }
