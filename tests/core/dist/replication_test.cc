// The training modes under real mpiexec against one process: sync, allreduce (in shared
// memory, in buckets, in bfloat16), pieces, prefetch and synchronised batch norm.
#include "cohort/core/dist/replication.h"

#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "cohort/core/dist/cluster.h"
#include "cohort/core/dist/cross_replica_sum.h"
#include "cohort/core/dist/node_sum.h"
#include "cohort/core/dist/parameter_store.h"
#include "cohort/core/dist/server.h"
#include "cohort/core/nn/data/dataset.h"
#include "cohort/core/nn/models.h"
#include "cohort/core/nn/threads.h"
#include "core/dist/replication_test_support.h"
#include "support/mpi_test.h"

namespace cohort {
namespace {

using namespace replication_test;

// How train_replicated() trains, beyond the mode: the model, the options, and what it reports.
struct Run {
  Builder build = small_mlp;
  bool sync_batch_norm = false;  // the model's batch norm reduces its statistics over the workers
  Compression compression = Compression::kNone;
  std::int64_t bucket_bytes = 0;
  bool prefetch = false;
  bool shared_memory_sums = true;
  bool use_gradient_memory = true;  // the gradients go where the mode offers, as in the trainer
  std::optional<bool> spin_waits = std::nullopt;  // unset: where each worker has a CPU
  // The last worker finishes each backward pass this much later than the others.
  std::chrono::microseconds last_worker_late{0};
  std::int64_t* gradient_bytes = nullptr;
  std::string* stats = nullptr;  // the mode's figures and the memory's transport
};

// Trains kSteps steps in `mode` with worker w taking the w-th slice of each W*B batch; returns
// the final parameters and state on every worker.
std::vector<float> train_replicated(const mpi::Comm& comm, Mode mode, int ps_tasks,
                                    const data::Dataset& data, const Run& run = {}) {
  const ClusterSpec cluster = ClusterSpec::from_counts(comm, ps_tasks);
  Server server(cluster);
  if (served_as_ps(server)) return {};
  const int workers = cluster.num_tasks("worker");
  const int me = server.task_index();
  Graph graph(setter(ps_tasks));
  Model model = run.build(graph, run.sync_batch_norm);
  graph.initialize(7);
  auto optimizer = Optimizer::create(momentum());
  ReplicationOptions options;
  options.mode = mode;
  options.compression = run.compression;
  options.bucket_bytes = run.bucket_bytes;
  options.prefetch = run.prefetch;
  options.shared_memory_sums = run.shared_memory_sums;
  options.spin_waits = run.spin_waits;
  auto replication = start_replication(server, graph, *optimizer, options);
  ReplicaSum replicas(server.replicas());
  OpContext context;
  context.cross_replica = run.sync_batch_norm ? &replicas : nullptr;
  // As the trainer does: the gradients go where the mode offers (allreduce mode's shared memory).
  std::vector<float> own(static_cast<std::size_t>(graph.num_parameters()));
  std::span<float> grads = own;
  if (run.use_gradient_memory && replication->gradient_memory().size() == own.size())
    grads = replication->gradient_memory();
  Tensor images;
  std::vector<std::int32_t> labels;
  for (int step = 0; step < kSteps; ++step) {
    replication->before_step(graph.values());
    slice(data, (step * workers + me) * kBatch, kBatch, images, labels);
    context.gradients_ready = replication->gradient_listener(grads);
    model.train_step(images, labels, grads, context);
    if (me == workers - 1) std::this_thread::sleep_for(run.last_worker_late);
    const StepOutcome outcome = replication->after_step(grads, graph.values());
    CHECK(outcome.global_step == step + 1);
    CHECK(outcome.applied);
  }
  std::vector<float> values = parameters_and_state(graph);
  if (run.gradient_bytes != nullptr) *run.gradient_bytes = replication->gradient_bytes_sent();
  // The mode's figures, then the memory's transport ("one-sided (MPI_Win_allocate)", ...).
  if (run.stats != nullptr)
    *run.stats = replication->stats() + "; memory " + server.memory_transport();
  replication->finish();
  server.done();
  return values;
}

// |values - exact| over |exact - initial|, the small mlp trained from seed 7: how far a rounded
// path (bfloat16 on the wire) left the parameters from the exact one, against how far training
// moved them.
double difference_of_update(const std::vector<float>& values, const std::vector<float>& exact) {
  Graph initial;
  small_mlp(initial, false);
  initial.initialize(7);
  double diff2 = 0, update2 = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    diff2 += (double(values[i]) - exact[i]) * (double(values[i]) - exact[i]);
    update2 += (double(exact[i]) - initial.values()[i]) * (double(exact[i]) - initial.values()[i]);
  }
  return std::sqrt(diff2 / update2);
}

}  // namespace

COHORT_MPI_TEST_CASE("sync mode with 2 workers equals one process at batch 2B", 3) {
  const auto data = data::synthetic(kSteps * 2 * kBatch, 11);
  const auto values = train_replicated(comm, Mode::kSync, 1, data);
  if (!values.empty()) check_equal(values, reference(data, 2));
}

COHORT_MPI_TEST_CASE("sync mode with 3 workers and 2 ps tasks equals one process at batch 3B", 5) {
  const auto data = data::synthetic(kSteps * 3 * kBatch, 12);
  const auto values = train_replicated(comm, Mode::kSync, 2, data);
  if (!values.empty()) check_equal(values, reference(data, 3));
}

// Where the memory is one-sided and each worker has a core (one thread each, two CPUs, as on the
// CI machine), the other worker adds its gradient in three pieces that the chief takes as they
// come, and the chief writes the update in three pieces that the other pulls as they come; the
// last covers variables on both ps tasks; the other zeroes the sums behind its pulls. Served,
// both are sent whole, and the take zeroes the sums. With the other worker
// late, the chief waits for its pieces as they arrive; with --bucket_bytes the other claims its
// slot early in its backward pass, and the chief waits for the whole gradient.
COHORT_MPI_TEST_CASE("sync mode with the update in pieces: 2 workers, 2 ps tasks equal 2B", 4) {
  const int threads = intra_op_threads();
  set_intra_op_threads(1);
  const auto data = data::synthetic(kSteps * 2 * kBatch, 13);
  std::string stats;
  const auto values =
      train_replicated(comm, Mode::kSync, 2, data, {.build = wide_mlp, .stats = &stats});
  const auto late = train_replicated(
      comm, Mode::kSync, 2, data,
      {.build = wide_mlp, .last_worker_late = std::chrono::microseconds(300)});
  const auto buckets =
      train_replicated(comm, Mode::kSync, 2, data, {.build = wide_mlp, .bucket_bytes = 16384});
  set_intra_op_threads(threads);
  if (values.empty()) return;  // a ps
  check_equal(values, reference(data, 2, wide_mlp));
  check_equal(late, values);
  check_equal(buckets, values);
  MESSAGE("rank " << comm.rank() << ": " << stats);
  const bool chief = comm.rank() == 2;
  const bool one_sided = stats.find("memory one-sided") != std::string::npos;
  const auto said = [&](const std::string& what) {
    return stats.find(std::to_string(kSteps) + " " + what + " in 256 KB pieces") !=
           std::string::npos;
  };
  if (one_sided && std::thread::hardware_concurrency() < 2) {
    MESSAGE("pieces not checked: fewer than 2 CPUs, where the workers share one and send whole");
    return;
  }
  CHECK(said("updates written") == (chief && one_sided));
  CHECK(said("gradients added") == (!chief && one_sided));
  const bool cleared =
      stats.find("cleared the sums of " + std::to_string(kSteps) + " steps") != std::string::npos;
  CHECK(cleared == (!chief && one_sided));
}

// Three workers in pieces (forced on: two CPUs are fewer than they would take): the chief names
// the first of the others to clear the sums, and takes a piece once both others hold it.
COHORT_MPI_TEST_CASE("sync mode in pieces, 3 workers: equal to 3B, one clears the sums", 5) {
  const auto data = data::synthetic(kSteps * 3 * kBatch, 25);
  std::string stats;
  const auto values = train_replicated(comm, Mode::kSync, 2, data,
                                       {.build = wide_mlp, .spin_waits = true, .stats = &stats});
  if (values.empty()) return;  // a ps
  check_equal(values, reference(data, 3, wide_mlp));
  MESSAGE("rank " << comm.rank() << ": " << stats);
  if (stats.find("memory one-sided") == std::string::npos) return;  // served: whole
  const auto said = [&](const std::string& what) { return stats.find(what) != std::string::npos; };
  CHECK(said(std::to_string(kSteps) + " gradients added in 256 KB pieces") == (comm.rank() > 2));
  CHECK(said("cleared the sums of " + std::to_string(kSteps) + " steps") == (comm.rank() == 3));
}

COHORT_MPI_TEST_CASE("allreduce mode with 2 workers equals one process at batch 2B", 2) {
  const auto data = data::synthetic(kSteps * 2 * kBatch, 13);
  check_equal(train_replicated(comm, Mode::kAllreduce, 0, data), reference(data, 2));
}

COHORT_MPI_TEST_CASE("allreduce mode with 3 workers equals one process at batch 3B", 3) {
  const auto data = data::synthetic(kSteps * 3 * kBatch, 14);
  check_equal(train_replicated(comm, Mode::kAllreduce, 0, data), reference(data, 3));
}

// Allreduce mode sums the gradients of a node's workers in the memory they share (NodeSum), where
// the trainer computes them, or copies them there; MPI_Allreduce alone is the other path. On 2
// workers a sum has one order, so the parameters are equal bit for bit; on 3 the order differs
// from MPI's, within the equivalence bar; every replica reads the one sum, so they stay identical.
void check_shared_memory_sums(const mpi::Comm& comm, std::uint64_t seed) {
  const auto data = data::synthetic(kSteps * comm.size() * kBatch, seed);
  std::string mpi_stats, shared_stats;
  const auto mpi = train_replicated(comm, Mode::kAllreduce, 0, data,
                                    {.shared_memory_sums = false, .stats = &mpi_stats});
  const auto shared = train_replicated(comm, Mode::kAllreduce, 0, data, {.stats = &shared_stats});
  const auto copied =
      train_replicated(comm, Mode::kAllreduce, 0, data, {.use_gradient_memory = false});
  // Over TCP alone (Open MPI's shared-memory window component left out) the mode falls back.
  const bool node_sums = NodeSum::make(comm, 1) != nullptr;
  const bool said = shared_stats.find("summed in each node's shared memory") != std::string::npos;
  CHECK(said == node_sums);
  CHECK(mpi_stats.find("shared memory") == std::string::npos);
  CHECK(copied == shared);
  if (comm.size() == 2)
    CHECK(shared == mpi);
  else
    check_equal(shared, mpi);
  std::vector<float> chiefs = shared;
  comm.bcast(std::span<float>(chiefs), 0);
  CHECK(shared == chiefs);
}

COHORT_MPI_TEST_CASE("allreduce mode: sums in shared memory equal MPI_Allreduce's, 2 workers", 2) {
  check_shared_memory_sums(comm, 21);
}

COHORT_MPI_TEST_CASE("allreduce mode: sums in shared memory equal MPI_Allreduce's, 3 workers", 3) {
  check_shared_memory_sums(comm, 22);
}

// bfloat16 on the wire: each gradient is rounded to 8 significant bits, and error feedback
// carries what the rounding lost into the next step. Per-worker gradients that nearly cancel
// (small batches) make the rounding large against their sum, so 6 steps move the parameters a
// few percent of their update away from float32's (3.2% measured), not further; every replica
// adds the same rounded sums, so they stay identical; the bytes handed to MPI halve.
COHORT_MPI_TEST_CASE("allreduce mode with bf16 compression: half the bytes, replicas identical", 3) {
  const auto data = data::synthetic(kSteps * 3 * kBatch, 15);
  std::int64_t float_bytes = 0, bf16_bytes = 0;
  const auto exact =
      train_replicated(comm, Mode::kAllreduce, 0, data, {.gradient_bytes = &float_bytes});
  const auto values = train_replicated(
      comm, Mode::kAllreduce, 0, data,
      {.compression = Compression::kBf16, .gradient_bytes = &bf16_bytes});
  const auto parameters = static_cast<std::int64_t>(values.size());
  CHECK(float_bytes == kSteps * parameters * 4);
  CHECK(bf16_bytes == kSteps * parameters * 2);
  std::vector<float> chiefs = values;
  comm.bcast(std::span<float>(chiefs), 0);
  CHECK(values == chiefs);
  const double relative = difference_of_update(values, exact);
  MESSAGE("bf16 against float32: difference " << relative << " of the update");
  CHECK(relative > 0);     // the gradients did travel rounded
  CHECK(relative < 0.06);  // and error feedback kept the parameters on course
}

// Gradients sent during the backward pass, in buckets of 4 KB (the small mlp's 12,730
// parameters make 13 buckets), give the parameters of sending them whole after it: bit for bit
// on 2 workers (a sum of two is the same in any order), as float32 and as bfloat16; within the
// equivalence bar on 3.
COHORT_MPI_TEST_CASE("allreduce mode: buckets sent during backward equal the whole buffer after it", 2) {
  const auto data = data::synthetic(kSteps * 2 * kBatch, 18);
  std::int64_t whole_bytes = 0, bucket_bytes = 0;
  const auto whole =
      train_replicated(comm, Mode::kAllreduce, 0, data, {.gradient_bytes = &whole_bytes});
  std::string stats;
  const auto buckets = train_replicated(
      comm, Mode::kAllreduce, 0, data,
      {.bucket_bytes = 4096, .gradient_bytes = &bucket_bytes, .stats = &stats});
  CHECK(buckets == whole);
  CHECK(bucket_bytes == whole_bytes);
  // 13 buckets a step, 6 steps, every one started by the backward pass, none left to after it.
  CHECK(stats.find("78 of 78 buckets sent during the backward pass") != std::string::npos);
  const auto whole_bf16 = train_replicated(
      comm, Mode::kAllreduce, 0, data,
      {.compression = Compression::kBf16, .gradient_bytes = &whole_bytes});
  const auto buckets_bf16 = train_replicated(
      comm, Mode::kAllreduce, 0, data,
      {.compression = Compression::kBf16, .bucket_bytes = 4096, .gradient_bytes = &bucket_bytes});
  CHECK(buckets_bf16 == whole_bf16);
  CHECK(bucket_bytes == whole_bytes);
}

COHORT_MPI_TEST_CASE("allreduce mode with buckets sent during backward: 3 workers equal one process at 3B", 3) {
  const auto data = data::synthetic(kSteps * 3 * kBatch, 19);
  check_equal(train_replicated(comm, Mode::kAllreduce, 0, data, {.bucket_bytes = 4096}),
              reference(data, 3));
}

// The ps modes with gradients sent during the backward pass, in 4 KB pieces (13 a step): the
// sync mode's pieces add up at the ps to the whole gradient, and a lone async or ssp worker's
// pieces of its delta are the whole delta, so the parameters equal those of the whole-buffer
// path bit for bit; every piece leaves during the backward pass.
void check_pieces_equal_whole(const mpi::Comm& comm, Mode mode, std::uint64_t seed) {
  const auto data = data::synthetic(kSteps * 2 * kBatch, seed);
  const auto whole = train_replicated(comm, mode, 1, data);
  std::string stats;
  const auto pieces =
      train_replicated(comm, mode, 1, data, {.bucket_bytes = 4096, .stats = &stats});
  if (whole.empty()) return;  // the ps
  CHECK(pieces == whole);
  // The sync chief (rank 1, after the ps) keeps its own gradient: it sends no piece.
  const bool sends = !(mode == Mode::kSync && comm.rank() == 1);
  const auto all_in_backward = stats.find("78 of 78 gradient pieces sent during the backward pass");
  CHECK((all_in_backward != std::string::npos) == sends);
  MESSAGE(std::string(to_string(mode)) << ", rank " << comm.rank() << ": " << stats);
}

COHORT_MPI_TEST_CASE("sync mode: gradient pieces added during backward equal the whole after it", 3) {
  check_pieces_equal_whole(comm, Mode::kSync, 21);
}

COHORT_MPI_TEST_CASE("async mode: delta pieces pushed during backward equal the whole after it", 2) {
  check_pieces_equal_whole(comm, Mode::kAsync, 22);
}

COHORT_MPI_TEST_CASE("ssp mode: delta pieces pushed during backward equal the whole after it", 2) {
  check_pieces_equal_whole(comm, Mode::kSsp, 23);
}

// A lone async worker that prefetches its next parameters and adds its own delta to them
// computes what the ps computes: the parameters equal those of the plain path bit for bit,
// with the delta whole or in pieces, on 1 and on 2 ps tasks.
COHORT_MPI_TEST_CASE("async mode with prefetch: a lone worker's parameters equal the plain path's", 3) {
  const auto data = data::synthetic(kSteps * 2 * kBatch, 29);
  for (int ps_tasks : {1, 2}) {
    if (comm.size() < ps_tasks + 1) continue;
    const mpi::Comm sub = comm.split(comm.rank() < ps_tasks + 1 ? 0 : MPI_UNDEFINED, comm.rank());
    if (sub.is_null()) continue;
    std::string stats, stats_in_pieces;
    const auto plain = train_replicated(sub, Mode::kAsync, ps_tasks, data);
    const auto prefetched = train_replicated(sub, Mode::kAsync, ps_tasks, data,
                                             {.prefetch = true, .stats = &stats});
    const auto in_pieces = train_replicated(
        sub, Mode::kAsync, ps_tasks, data,
        {.bucket_bytes = 4096, .prefetch = true, .stats = &stats_in_pieces});
    if (plain.empty()) continue;  // a ps
    CAPTURE(ps_tasks);
    CHECK(prefetched == plain);
    CHECK(in_pieces == plain);
    CHECK(stats.find("next parameters prefetched in 6 steps") != std::string::npos);
    CHECK(stats_in_pieces.find("next parameters prefetched in 6 steps") != std::string::npos);
  }
}

COHORT_MPI_TEST_CASE("sync mode in pieces: 3 workers and 2 ps tasks equal one process at 3B", 5) {
  const auto data = data::synthetic(kSteps * 3 * kBatch, 24);
  const auto values = train_replicated(comm, Mode::kSync, 2, data, {.bucket_bytes = 4096});
  if (!values.empty()) check_equal(values, reference(data, 3));
}

COHORT_MPI_TEST_CASE("pieces of async pushes are refused with clipping", 2) {
  const ClusterSpec cluster = ClusterSpec::from_counts(comm, 1);
  Server server(cluster);
  if (served_as_ps(server)) return;
  Graph graph(setter(1));
  small_mlp(graph, false);
  OptimizerOptions clipped = momentum();
  clipped.clip_norm = 1.0;
  auto optimizer = Optimizer::create(clipped);
  ReplicationOptions options;
  options.mode = Mode::kAsync;
  options.bucket_bytes = 4096;
  CHECK_THROWS_WITH_AS(Replication::create(&server, graph, *optimizer, options),
                       "--bucket_bytes=4096 with --clip_norm: the async mode's pushes of a clipped "
                       "update cannot leave before the whole gradient's norm is known",
                       InvalidArgument);
  server.done();
}

// The ps modes with bfloat16 on the wire: the ps converts as it adds, so where the windows are
// one-sided (MPI_Accumulate adds float32 only) the modes refuse it, naming the transport.
COHORT_MPI_TEST_CASE("compression in the ps modes is refused where the windows are one-sided", 2) {
  const ClusterSpec cluster = ClusterSpec::from_counts(comm, 1);
  Server server(cluster);
  if (served_as_ps(server)) return;
  Graph graph(setter(1));
  small_mlp(graph, false);
  auto optimizer = Optimizer::create(momentum());
  ReplicationOptions options;
  options.mode = Mode::kSync;
  options.compression = Compression::kBf16;
  std::string error;
  try {
    Replication::create(&server, graph, *optimizer, options)->finish();
  } catch (const InvalidArgument& e) {
    error = e.what();
  }
  MESSAGE(server.memory_transport() << ": " << (error.empty() ? "accepted" : error));
  CHECK(error.empty() == !server.memory_is_one_sided());
  if (!error.empty())
    CHECK(error == "compression bf16: the sync mode's ps converts bfloat16 as it adds, which "
                   "needs parameters served by messages (as over TCP alone, or with "
                   "COHORT_ONE_SIDED=0); here they are one-sided (MPI_Win_allocate), where "
                   "MPI_Accumulate adds float32 only");
  server.done();
}

// Where they are served (forced here with COHORT_ONE_SIDED=0, so that both runs of this test
// take that path), the sync mode's gradients and a lone async worker's deltas travel as
// bfloat16 with error feedback, whole or in pieces: half the bytes (counted), and parameters a
// few percent of their update away from float32's, as in allreduce mode.
void check_bf16_pushes(const mpi::Comm& comm, Mode mode, std::int64_t bucket_bytes,
                       std::uint64_t seed) {
  // Unset again however this returns, so that no later test takes the served path unasked.
  struct ServedWindows {
    ServedWindows() { setenv("COHORT_ONE_SIDED", "0", 1); }
    ~ServedWindows() { unsetenv("COHORT_ONE_SIDED"); }
  };
  std::optional<ServedWindows> served(std::in_place);
  const auto data = data::synthetic(kSteps * 2 * kBatch, seed);
  std::int64_t float_bytes = 0, bf16_bytes = 0;
  const auto exact = train_replicated(
      comm, mode, 1, data, {.bucket_bytes = bucket_bytes, .gradient_bytes = &float_bytes});
  const auto values = train_replicated(comm, mode, 1, data,
                                       {.compression = Compression::kBf16,
                                        .bucket_bytes = bucket_bytes,
                                        .gradient_bytes = &bf16_bytes});
  served.reset();
  if (values.empty()) return;  // the ps
  const auto parameters = static_cast<std::int64_t>(values.size());
  const bool sync_chief = mode == Mode::kSync && comm.rank() == 1;  // keeps its own gradient
  CHECK(float_bytes == (sync_chief ? 0 : kSteps * parameters * 4));
  CHECK(bf16_bytes == float_bytes / 2);
  const double relative = difference_of_update(values, exact);
  MESSAGE(std::string(to_string(mode)) << " bf16 against float32: difference " << relative
                                       << " of the update");
  CHECK(relative > 0);     // the values did travel rounded
  CHECK(relative < 0.06);  // and error feedback kept the parameters on course
}

COHORT_MPI_TEST_CASE("sync mode with bf16 on served windows: half the bytes, near float32", 3) {
  check_bf16_pushes(comm, Mode::kSync, 0, 25);
  check_bf16_pushes(comm, Mode::kSync, 4096, 26);
}

COHORT_MPI_TEST_CASE("async and ssp with bf16 on served windows: half the bytes, near float32", 2) {
  check_bf16_pushes(comm, Mode::kAsync, 0, 27);
  check_bf16_pushes(comm, Mode::kAsync, 4096, 28);
  check_bf16_pushes(comm, Mode::kSsp, 4096, 30);
}

COHORT_MPI_TEST_CASE("synchronised batch norm: 2 workers in allreduce mode equal one process at 2B", 2) {
  const auto data = data::synthetic(kSteps * 2 * kBatch, 16);
  check_equal(train_replicated(comm, Mode::kAllreduce, 0, data,
                               {.build = batch_norm_net, .sync_batch_norm = true}),
              reference(data, 2, batch_norm_net), 1e-3);
}

COHORT_MPI_TEST_CASE("synchronised batch norm: 3 workers in sync mode equal one process at 3B", 4) {
  const auto data = data::synthetic(kSteps * 3 * kBatch, 17);
  const auto values = train_replicated(comm, Mode::kSync, 1, data,
                                       {.build = batch_norm_net, .sync_batch_norm = true});
  if (!values.empty()) check_equal(values, reference(data, 3, batch_norm_net), 1e-3);
}

COHORT_MPI_TEST_CASE("without synchronisation, batch norm on W workers differs from W*B", 2) {
  // The control: the equivalence above is the synchronisation's doing.
  const auto data = data::synthetic(kSteps * 2 * kBatch, 18);
  const auto values = train_replicated(comm, Mode::kAllreduce, 0, data, {.build = batch_norm_net});
  const auto want = reference(data, 2, batch_norm_net);
  double diff2 = 0, norm2 = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    diff2 += (double(values[i]) - want[i]) * (double(values[i]) - want[i]);
    norm2 += double(want[i]) * want[i];
  }
  CHECK(std::sqrt(diff2 / norm2) > 1e-4);
}

}  // namespace cohort
