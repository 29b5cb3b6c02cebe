// bench_comm: Cohort's communication paths against the raw MPI calls under them.
//
//   mpirun -np 2 build/bin/bench_comm --ps_tasks=1
//
// Rank 0 is a ps task and rank 1 a worker. Pull and push go through the parameter store
// (ParameterStore::pull / push: MPI_Get / MPI_Accumulate under a shared lock per ps task). Two
// baselines stand beside them:
//   raw         the same calls made by hand, timed alternately with the store's, on memory the ps
//               hosts the same way (Server::host: the same window kind and size, zeroed like the
//               store's) at the same offsets, into the same buffer;
//   plain loop  rma_raw_loop.c, MPI alone in C (lock, one call, unlock, median of 5 blocks of
//               many calls), run after the store is gone; bench_rma_raw runs it on its own.
// Then the ps task leaves and the workers compare the allreduce mode's fused in-place reduction,
// and its sum in a node's shared memory, with one raw in-place MPI_Allreduce, and fused against
// one call per tensor for 100 tensors of 64 to 1K floats. Times are medians of --reps
// repetitions after a warm-up; worker 0 prints the tables.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include "cohort/core/base/flags.h"
#include "cohort/core/dist/cluster.h"
#include "cohort/core/dist/fusion.h"
#include "cohort/core/dist/node_sum.h"
#include "cohort/core/dist/parameter_store.h"
#include "cohort/core/dist/server.h"
#include "cohort/core/train/app.h"
#include "cohort/mpi/window.h"
#include "rma_raw_loop.h"

COHORT_DEFINE_int(reps, 30, "timed repetitions per measurement (the median is reported)",
                  cohort::flags::Range{1, 1e6});
COHORT_DEFINE_int(fusion_bytes, 64 << 20, "fusion buffer for the allreduce measurements",
                  cohort::flags::Range{1, 1e12});

namespace {

using Clock = std::chrono::steady_clock;
const std::int64_t kSizes[] = {100000, 1000000, 4000000};

double median(std::vector<double> times) {
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  return times[times.size() / 2];
}

// Medians of --reps samples of `a` and `b` (each a function returning seconds), taken
// alternately so that both see the same machine and caches.
template <typename A, typename B>
std::pair<double, double> alternate(A&& a, B&& b) {
  std::vector<double> ta, tb;
  for (std::int64_t i = 0; i < FLAGS_reps; ++i) {
    ta.push_back(a());
    tb.push_back(b());
  }
  return {median(ta), median(tb)};
}

// Medians of `a` and `b` per call, each sample a run of `calls` calls (so that a short call is
// not timed alone).
template <typename A, typename B>
std::pair<double, double> compare(A&& a, B&& b, std::int64_t calls = 1) {
  a();  // warm-up
  b();
  const auto time = [calls](auto& run) {
    const auto begin = Clock::now();
    for (std::int64_t c = 0; c < calls; ++c) run();
    return std::chrono::duration<double>(Clock::now() - begin).count() / static_cast<double>(calls);
  };
  return alternate([&] { return time(a); }, [&] { return time(b); });
}

// The same, one call per sample, each after an untimed `prepare` on every rank (then a barrier).
template <typename P, typename A, typename B>
std::pair<double, double> compare_prepared(const cohort::mpi::Comm& comm, P&& prepare, A&& a,
                                           B&& b) {
  const auto time = [&](auto& run) {
    prepare();
    comm.barrier();
    const auto begin = Clock::now();
    run();
    return std::chrono::duration<double>(Clock::now() - begin).count();
  };
  time(a);  // warm-up
  time(b);
  return alternate([&] { return time(a); }, [&] { return time(b); });
}

// Calls per sample for transfers of n floats: about 8 MB a sample.
std::int64_t calls_for(std::int64_t n) { return std::max<std::int64_t>(1, 2000000 / n); }

// The store's variable of n floats. (Built with insert: GCC 12 warns, wrongly, of an overlapping
// memcpy in "v" + std::to_string(n).)
std::string variable_name(std::int64_t n) {
  std::string name = std::to_string(n);
  name.insert(0, 1, 'v');
  return name;
}

// One row of the store table: the store, the raw calls beside it, the plain loop.
struct StoreRow {
  const char* what;
  std::int64_t n;
  double cohort, raw, plain = 0;
};

void print_row(const char* what, std::int64_t n, double cohort, double raw) {
  const double bytes = static_cast<double>(n) * sizeof(float);
  std::printf("| %-10s | %9lld | %9.3f | %9.3f | %7.2f | %5.0f%% |\n", what, static_cast<long long>(n),
              cohort * 1e3, raw * 1e3, bytes / cohort * 1e-9, 100.0 * raw / cohort);
}

// Collective over the workers and the ps task (the store is); worker 0 measures and returns the
// rows. The raw calls read and write memory the ps hosts just like the store's.
std::vector<StoreRow> store_benchmarks(cohort::Server& server) {
  const bool measure = server.task_index() == 0;
  // One store holding a variable of each size (one store per server), each moved on its own.
  cohort::ReplicaDeviceSetterOptions placement;
  placement.ps_tasks = 1;
  cohort::Graph graph{cohort::ReplicaDeviceSetter(placement)};
  for (const std::int64_t n : kSizes)
    graph.get_variable(variable_name(n), {n}, cohort::Initializer::zeros());
  cohort::ParameterStore store(server, graph, {});
  const std::int64_t floats = store.layout().ps_sizes.front();  // as the store lays them out
  const std::int64_t counters = 1;
  cohort::HostedMemory raw = server.host({&floats, 1}, {&counters, 1});
  cohort::mpi::Window<float>& window = raw.values;
  const int ps_rank = raw.ps_ranks.front();
  std::vector<StoreRow> rows;
  for (const std::int64_t n : kSizes) {
    if (!measure) break;
    const std::int64_t first = graph.find(variable_name(n))->offset;
    // Where the store keeps the variable on the ps (one segment: one variable, one ps task).
    const auto& segments = store.layout().segments;
    const auto segment = std::find_if(segments.begin(), segments.end(), [&](const auto& s) {
      return s.offset <= first && first < s.offset + s.length;
    });
    const auto at = static_cast<std::size_t>(segment->ps_offset + (first - segment->offset));
    std::vector<float> buffer(static_cast<std::size_t>(n), 1.0f);
    const auto [pull, get] = compare([&] { store.pull(first, buffer); },
                                     [&] {
                                       auto lock = window.lock(ps_rank, cohort::mpi::LockType::kShared);
                                       window.get(buffer, ps_rank, at);
                                     },
                                     calls_for(n));
    rows.push_back({"pull/get", n, pull, get});
    const auto [push, accumulate] = compare([&] { store.push(first, buffer); },
                                            [&] {
                                              auto lock = window.lock(ps_rank, cohort::mpi::LockType::kShared);
                                              window.accumulate(std::span<const float>(buffer), ps_rank, at);
                                            },
                                            calls_for(n));
    rows.push_back({"push/acc", n, push, accumulate});
  }
  store.close();
  return rows;
}

void print_store_table(const std::vector<StoreRow>& rows) {
  std::printf("\nParameter store vs raw one-sided calls (1 ps, 1 worker; ms per call, median of %lld; "
              "plain loop: rma_raw_loop.c)\n\n",
              static_cast<long long>(FLAGS_reps));
  std::printf("| operation  |    floats |  cohort ms |    raw ms | plain loop ms |  GB/s  | cohort / plain |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|\n");
  for (const StoreRow& r : rows) {
    const double bytes = static_cast<double>(r.n) * sizeof(float);
    char plain[32] = "-", ratio[32] = "-";  // no plain loop without a one-sided transport
    if (r.plain > 0) {
      std::snprintf(plain, sizeof plain, "%.3f", r.plain * 1e3);
      std::snprintf(ratio, sizeof ratio, "%.0f%%", 100.0 * r.plain / r.cohort);
    }
    std::printf("| %-10s | %9lld | %9.3f | %9.3f | %13s | %7.2f | %14s |\n", r.what,
                static_cast<long long>(r.n), r.cohort * 1e3, r.raw * 1e3, plain,
                bytes / r.cohort * 1e-9, ratio);
  }
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
    if (print) print_row("allreduce", n, fused, raw);
  }
  // The mode's default where the workers of every node are as many: their sum in the node's
  // shared memory (NodeSum), its result read in place, against the same raw MPI_Allreduce. As in
  // a training step, each rank writes its gradients (untimed) before every sum, so they come
  // from the writer's cache, not from an earlier sum's.
  for (const std::int64_t n : kSizes) {
    const auto sum = cohort::NodeSum::make(comm, static_cast<std::size_t>(n));
    if (!sum) break;  // a worker per node: nothing shared
    std::vector<float> data(static_cast<std::size_t>(n));
    const auto [shared, raw] = compare_prepared(
        comm,
        [&] {
          std::fill(sum->input().begin(), sum->input().end(), 1.0f);
          std::fill(data.begin(), data.end(), 1.0f);
        },
        [&] { sum->sum(FLAGS_fusion_bytes); }, [&] { comm.allreduce(std::span<float>(data)); });
    if (print) print_row("node sum", n, shared, raw);
  }
  // --compression=bf16: the same sums as bfloat16 with error feedback, conversions included,
  // against the float32 MPI_Allreduce they replace (GB/s counts float32's bytes).
  for (const std::int64_t n : kSizes) {
    std::vector<float> data(static_cast<std::size_t>(n), 1.0f), residual(data.size(), 0.0f);
    std::vector<std::uint16_t> wire;
    const auto [bf16, raw] = compare(
        [&] { cohort::allreduce_fused_bf16(comm, data, residual, wire, FLAGS_fusion_bytes); },
        [&] { comm.allreduce(std::span<float>(data)); });
    if (print) print_row("bf16", n, bf16, raw);
  }
  // Fusion pays per call saved, so its gain falls as the tensors grow and the bytes take over: a
  // sweep from bias-sized tensors to 1K floats. Fused through MPI_Allreduce, and (where every
  // node's ranks share memory) in that memory, TensorFusion's default.
  cohort::TensorFusion with_mpi(comm, FLAGS_fusion_bytes, /*shared_memory=*/false);
  cohort::TensorFusion shared(comm, FLAGS_fusion_bytes);
  if (print) std::printf("\n100 tensors reduced in one fused call against one call per tensor\n\n"
                         "| floats per tensor | fused ms, MPI_Allreduce | fused ms, shared memory "
                         "| one call per tensor ms | fusion, MPI_Allreduce | fusion, shared memory |\n"
                         "|---:|---:|---:|---:|---:|---:|\n");
  for (const std::size_t size : {64, 256, 1000}) {
    std::vector<std::vector<float>> tensors(100, std::vector<float>(size, 1.0f));
    std::vector<std::span<float>> spans(tensors.begin(), tensors.end());
    const std::span<const std::span<float>> list(spans);
    shared.allreduce(list);  // makes its shared buffer, where it can, before the timing
    const auto one_call_each = [&] {
      for (auto& t : tensors) comm.allreduce(std::span<float>(t));
    };
    const auto [fused, separate] = compare([&] { with_mpi.allreduce(list); }, one_call_each);
    double in_shared = 0, separate_again = 0;
    if (shared.in_shared_memory())
      std::tie(in_shared, separate_again) = compare([&] { shared.allreduce(list); }, one_call_each);
    if (!print) continue;
    char shared_ms[32] = "-", shared_gain[32] = "-";
    if (in_shared > 0) {
      std::snprintf(shared_ms, sizeof shared_ms, "%.3f", in_shared * 1e3);
      std::snprintf(shared_gain, sizeof shared_gain, "%.1fx", separate_again / in_shared);
    }
    std::printf("| %zu | %.3f | %s | %.3f | %.1fx | %s |\n", size, fused * 1e3, shared_ms,
                separate * 1e3, separate / fused, shared_gain);
  }
}

int Main(int argc, char** argv) {
  cohort::app::refuse_arguments(argc, argv);
  const cohort::ClusterSpec cluster = cohort::cluster_from_flags();
  if (cluster.num_tasks("ps") != 1 || cluster.num_tasks("worker") < 1)
    throw cohort::InvalidArgument("bench_comm needs one ps task and workers: mpirun -np 2 bench_comm --ps_tasks=1");
  cohort::Server server(cluster);
  std::vector<StoreRow> rows;
  if (!server.is_computing()) {
    server.join();
  } else {
    rows = store_benchmarks(server);
    server.done();
  }
  // Without a one-sided transport the store is served by messages, and there is no one-sided
  // loop to compare it with.
  if (!server.memory_is_one_sided()) {
    if (!rows.empty()) {
      std::printf("\nparameters on the ps task: %s; no plain one-sided loop to compare with\n",
                  server.memory_transport().c_str());
      print_store_table(rows);
    }
    if (server.is_computing() && cluster.num_tasks("worker") > 1) allreduce_benchmarks(cluster.job_comm());
    return 0;
  }
  // The plain loop, on every rank (the window is collective), the store's memory freed.
  const MPI_Comm world = cluster.world().get();
  const int ps_rank = cluster.rank_of("ps", 0), worker_rank = cluster.rank_of("worker", 0);
  for (std::size_t i = 0; i < std::size(kSizes) * 2; ++i) {
    const std::int64_t n = kSizes[i / 2];
    const int accumulate = static_cast<int>(i % 2);
    const double seconds = rma_raw_loop(world, ps_rank, worker_rank, static_cast<long>(n), accumulate,
                                        static_cast<int>(50000000 / n) + 2, 5);
    if (seconds < 0) throw cohort::Error("bench_comm: the plain loop's MPI calls failed");
    if (i < rows.size()) rows[i].plain = seconds;
  }
  if (!rows.empty()) print_store_table(rows);
  // Allreduce among the workers (the ps rank sits it out).
  if (server.is_computing() && cluster.num_tasks("worker") > 1) allreduce_benchmarks(cluster.job_comm());
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return cohort::app::Run(Main, argc, argv); }
