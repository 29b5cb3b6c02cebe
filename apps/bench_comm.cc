// bench_comm: Cohort's communication paths against the raw MPI calls under them.
//
//   mpirun -np 2 build/bin/bench_comm
//
// Rank 0 is a ps task and rank 1 a worker. Pull and push go through the parameter store
// (ParameterStore::pull / push: MPI_Get / MPI_Accumulate under a shared lock per ps task) and are
// compared with the same calls made by hand on an MPI_Win_allocate window. Then the ps task
// leaves and both ranks compare the allreduce mode's fused in-place reduction with one raw
// in-place MPI_Allreduce, and fused against one call per tensor for 100 tensors of 1K floats.
// Times are medians of --reps repetitions after a warm-up; rank 1 prints the tables.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "cohort/core/base/flags.h"
#include "cohort/core/dist/cluster.h"
#include "cohort/core/dist/fusion.h"
#include "cohort/core/dist/parameter_store.h"
#include "cohort/core/dist/server.h"
#include "cohort/core/train/app.h"
#include "cohort/mpi/window.h"

COHORT_DEFINE_int(reps, 30, "timed repetitions per measurement (the median is reported)",
                  cohort::flags::Range{1, 1e6});
COHORT_DEFINE_int(fusion_bytes, 4 << 20, "fusion buffer for the allreduce measurements",
                  cohort::flags::Range{1, 1e12});

namespace {

using Clock = std::chrono::steady_clock;
const std::int64_t kSizes[] = {100000, 1000000, 4000000};

double median(std::vector<double> times) {
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  return times[times.size() / 2];
}

// Medians of `a` and `b`, timed alternately so that both see the same machine and caches.
template <typename A, typename B>
std::pair<double, double> compare(A&& a, B&& b) {
  a();  // warm-up
  b();
  std::vector<double> ta, tb;
  const auto time = [](auto& run) {
    const auto begin = Clock::now();
    run();
    return std::chrono::duration<double>(Clock::now() - begin).count();
  };
  for (std::int64_t i = 0; i < FLAGS_reps; ++i) {
    ta.push_back(time(a));
    tb.push_back(time(b));
  }
  return {median(ta), median(tb)};
}

void row(const char* what, std::int64_t n, double cohort, double raw) {
  const double bytes = static_cast<double>(n) * sizeof(float);
  std::printf("| %-10s | %9lld | %9.3f | %9.3f | %7.2f | %5.0f%% |\n", what, static_cast<long long>(n),
              cohort * 1e3, raw * 1e3, bytes / cohort * 1e-9, 100.0 * raw / cohort);
}

// Collective over the workers and the ps task (the store is); worker 0 measures.
void store_benchmarks(cohort::Server& server, cohort::mpi::Window<float>& raw, int ps_rank) {
  const bool measure = server.task_index() == 0;
  if (measure) std::printf("\nParameter store vs raw one-sided calls (1 ps, 1 worker; ms per call, median of %lld)\n\n",
              static_cast<long long>(FLAGS_reps));
  if (measure) std::printf("| operation  |    floats |  cohort ms |    raw ms |  GB/s  | raw/cohort |\n");
  if (measure) std::printf("|---|---:|---:|---:|---:|---:|\n");
  // One store holding a variable of each size (one store per server), each moved on its own.
  cohort::ReplicaDeviceSetterOptions placement;
  placement.ps_tasks = 1;
  cohort::Graph graph{cohort::ReplicaDeviceSetter(placement)};
  for (const std::int64_t n : kSizes)
    graph.get_variable("v" + std::to_string(n), {n}, cohort::Initializer::zeros());
  cohort::ParameterStore store(server, graph, {});
  for (const std::int64_t n : kSizes) {
    if (!measure) break;
    const std::int64_t first = graph.find("v" + std::to_string(n))->offset;
    std::vector<float> buffer(static_cast<std::size_t>(n), 1.0f);
    const auto [pull, get] = compare([&] { store.pull(first, buffer); },
                                     [&] {
                                       auto lock = raw.lock(ps_rank, cohort::mpi::LockType::kShared);
                                       raw.get(buffer, ps_rank, 0);
                                     });
    row("pull/get", n, pull, get);
    const auto [push, accumulate] = compare([&] { store.push(first, buffer); },
                                            [&] {
                                              auto lock = raw.lock(ps_rank, cohort::mpi::LockType::kShared);
                                              raw.accumulate(std::span<const float>(buffer), ps_rank, 0);
                                            });
    row("push/acc", n, push, accumulate);
  }
  store.close();
}

void allreduce_benchmarks(const cohort::mpi::Comm& comm) {
  const bool print = comm.rank() == 0;
  if (print) {
    std::printf("\nAllreduce mode (fused, in place, %lld-byte pieces) vs one raw in-place MPI_Allreduce, %d ranks\n\n",
                static_cast<long long>(FLAGS_fusion_bytes), comm.size());
    std::printf("| operation  |    floats |  cohort ms |    raw ms |  GB/s  | raw/cohort |\n");
    std::printf("|---|---:|---:|---:|---:|---:|\n");
  }
  for (const std::int64_t n : kSizes) {
    std::vector<float> data(static_cast<std::size_t>(n), 1.0f);
    const auto [fused, raw] = compare([&] { cohort::allreduce_fused(comm, data, FLAGS_fusion_bytes); },
                                      [&] { comm.allreduce(std::span<float>(data)); });
    if (print) row("allreduce", n, fused, raw);
  }
  std::vector<std::vector<float>> tensors(100, std::vector<float>(1000, 1.0f));
  std::vector<std::span<float>> spans(tensors.begin(), tensors.end());
  std::vector<float> buffer;
  const auto [fused, separate] = compare(
      [&] { cohort::allreduce_fused(comm, std::span<const std::span<float>>(spans), FLAGS_fusion_bytes, buffer); },
      [&] {
        for (auto& t : tensors) comm.allreduce(std::span<float>(t));
      });
  if (print)
    std::printf("\n100 tensors of 1K floats: fused %.3f ms, one call per tensor %.3f ms: fusion %.1fx faster\n",
                fused * 1e3, separate * 1e3, separate / fused);
}

int Main(int, char**) {
  const cohort::ClusterSpec cluster = cohort::cluster_from_flags();
  if (cluster.num_tasks("ps") != 1 || cluster.num_tasks("worker") < 1)
    throw cohort::InvalidArgument("bench_comm needs one ps task and workers: mpirun -np 2 bench_comm --ps_tasks=1");
  cohort::Server server(cluster);
  const int ps_rank = cluster.rank_of("ps", 0);
  // The raw window: as large as the largest store, on the ps rank.
  cohort::mpi::Window<float> raw(cluster.world(), server.is_computing() ? 0 : 4000000);
  if (!server.is_computing()) {
    server.join();
  } else {
    store_benchmarks(server, raw, ps_rank);
    server.done();
  }
  // Allreduce among the workers (the ps rank sits it out).
  if (server.is_computing() && cluster.num_tasks("worker") > 1) allreduce_benchmarks(cluster.job_comm());
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return cohort::app::Run(Main, argc, argv); }
