// The training modes under real mpiexec: sync and allreduce against one process, async
// exactness, backup workers, and the SSP bound.
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
#include "support/mpi_test.h"

namespace cohort {
namespace {

using namespace std::chrono_literals;

constexpr std::int64_t kBatch = 8;
constexpr int kSteps = 6;

ReplicaDeviceSetter setter(int ps_tasks) {
  ReplicaDeviceSetterOptions o;
  o.ps_tasks = ps_tasks;
  return ReplicaDeviceSetter(o);
}

// A ps task serves the workers until they are done, and returns true; a worker returns false.
bool served_as_ps(Server& server) {
  if (server.job_name() != "ps") return false;
  server.join(60s);
  return true;
}

OptimizerOptions momentum() {
  OptimizerOptions o;
  o.name = "momentum";
  o.learning_rate.base = 0.1;
  return o;
}

// Copies examples [first, first + count) of `data` into a batch.
void slice(const data::Dataset& data, std::int64_t first, std::int64_t count, Tensor& images,
           std::vector<std::int32_t>& labels) {
  Shape shape{count};
  for (auto d : data.image_shape()) shape.push_back(d);
  images.resize(shape);
  labels.resize(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) {
    const auto image = data.image(first + i);
    std::memcpy(images.data() + i * data.image_size(), image.data(), image.size_bytes());
    labels[static_cast<std::size_t>(i)] = data.label(first + i);
  }
}

// The models the equivalence tests train; `sync` makes batch norm synchronised.
using Builder = Model (*)(Graph& graph, bool sync);

Model small_mlp(Graph& graph, bool) { return mlp(graph, {16}); }
// 159,010 parameters: a sync step's update is written and pulled in three pieces.
Model wide_mlp(Graph& graph, bool) { return mlp(graph, {200}); }

// Batch norm on images (NHWC) and on feature rows. The ReLU before each norm keeps the biases
// before it meaningful: a norm right after a bias cancels it, leaving a parameter whose gradient
// is rounding noise, which no two summation orders agree on.
Model batch_norm_net(Graph& graph, bool sync) {
  Model model(graph);
  Node x = model.input({28, 28, 1});
  x = model.apply(conv2d("conv", 4, 3, Activation::kRelu, 2), x);
  x = model.apply(batch_norm("bn1", sync), x);
  x = model.apply(global_avg_pool2d("pool"), x);
  x = model.apply(dense("hidden", 16, Activation::kRelu), x);
  x = model.apply(batch_norm("bn2", sync), x);
  model.apply(dense("logits", 10), x);
  return model;
}

// The parameters, then the layer state (batch norm's moving statistics).
std::vector<float> parameters_and_state(const Graph& graph) {
  std::vector<float> all(graph.values().begin(), graph.values().end());
  all.insert(all.end(), graph.state().begin(), graph.state().end());
  return all;
}

// One process at batch W*B over the same examples, `steps` steps: the reference the modes must
// match.
std::vector<float> reference(const data::Dataset& data, int workers, Builder build = small_mlp,
                             int steps = kSteps) {
  Graph graph;
  Model model = build(graph, false);
  graph.initialize(7);
  auto optimizer = Optimizer::create(momentum());
  std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()));
  Tensor images;
  std::vector<std::int32_t> labels;
  for (int step = 0; step < steps; ++step) {
    slice(data, step * workers * kBatch, workers * kBatch, images, labels);
    model.train_step(images, labels, grads, {});
    optimizer->apply(graph.values(), grads, step);
  }
  return parameters_and_state(graph);
}

// The replication `options` ask for on `server`, started from the chief's initial values, its
// waits bounded.
std::unique_ptr<Replication> start_replication(Server& server, Graph& graph, Optimizer& optimizer,
                                               ReplicationOptions options) {
  options.wait_timeout = 60s;
  auto replication = Replication::create(&server, graph, optimizer, options);
  replication->start(graph.values(), 0);
  return replication;
}

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

// "Equal to 1e-5 relative": the difference of the parameter vectors is below 1e-5 of the
// reference's norm. Element by element (relative, with values below 1e-3 compared absolutely at
// that scale) the sums of gradients taken in another order stay within `element_bar`: 1e-4, and
// 1e-3 with batch norm, whose statistics and backward sums are also reduced in another order
// and whose per-channel gradients are small differences of large sums.
void check_equal(const std::vector<float>& got, const std::vector<float>& want,
                 double element_bar = 1e-4) {
  REQUIRE(got.size() == want.size());
  double diff2 = 0, norm2 = 0, worst = 0;
  std::size_t worst_at = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double d = double(got[i]) - want[i];
    diff2 += d * d;
    norm2 += double(want[i]) * want[i];
    const double error = std::abs(d) / std::max(1e-3, std::abs(double(want[i])));
    if (error > worst) worst = error, worst_at = i;
  }
  const double relative = std::sqrt(diff2 / norm2);
  MESSAGE("relative difference " << relative << ", largest element-wise " << worst << " at "
                                 << worst_at << " of " << got.size() << " (" << got[worst_at]
                                 << " for " << want[worst_at] << ")");
  CHECK(relative < 1e-5);
  CHECK(worst < element_bar);
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

COHORT_MPI_TEST_CASE("sync mode: a step the chief stopped before applying is not counted", 3) {
  // The chief trains 2 steps and stops; the other worker's third gradient finds the chief
  // stopped: its step ends at global step 2, unapplied, with the stop.
  const auto data = data::synthetic(3 * 2 * kBatch, 15);
  const ClusterSpec cluster = ClusterSpec::from_counts(comm, 1);
  Server server(cluster);
  if (served_as_ps(server)) return;
  Graph graph(setter(1));
  Model model = small_mlp(graph, false);
  graph.initialize(7);
  auto optimizer = Optimizer::create(momentum());
  ReplicationOptions options;
  options.mode = Mode::kSync;
  auto replication = start_replication(server, graph, *optimizer, options);
  std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()));
  Tensor images;
  std::vector<std::int32_t> labels;
  const int me = server.task_index();
  const int steps = server.is_chief() ? 2 : 3;
  StepOutcome outcome;
  for (int step = 0; step < steps; ++step) {
    replication->before_step(graph.values());
    slice(data, (step * 2 + me) * kBatch, kBatch, images, labels);
    model.train_step(images, labels, grads, {});
    outcome = replication->after_step(grads, graph.values());
  }
  if (server.is_chief()) {
    CHECK(outcome.global_step == 2);
  } else {
    CHECK(outcome.global_step == 2);
    CHECK_FALSE(outcome.applied);
    CHECK(outcome.stop);
    CHECK(replication->global_step() == 2);
  }
  replication->finish();
  server.done();
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

COHORT_MPI_TEST_CASE("async pushes from 4 workers add up exactly, whole and in pieces", 5) {
  const ClusterSpec cluster = ClusterSpec::from_counts(comm, 1);
  Server server(cluster);
  if (served_as_ps(server)) return;
  Graph graph(setter(1));
  graph.get_variable("a", {3, 5}, Initializer::zeros());
  graph.get_variable("b", {7}, Initializer::zeros());
  const auto n = static_cast<std::size_t>(graph.num_parameters());
  ParameterStore store(server, graph, {});
  if (server.is_chief()) MESSAGE("parameters: " << server.memory_transport());
  const int me = server.task_index();
  constexpr int kPushes = 50;
  std::vector<float> initial(n);
  for (std::size_t i = 0; i < n; ++i) initial[i] = static_cast<float>(i);
  if (server.is_chief()) {
    store.assign(initial);
    store.write(ControlSlot::kReady, 1);
  }
  while (store.read(ControlSlot::kReady) != 1) std::this_thread::sleep_for(1ms);
  // Integer-valued deltas: float sums of them are exact, whatever the order.
  std::vector<float> delta(n), pulled(n);
  for (int p = 1; p <= kPushes; ++p) {
    for (std::size_t i = 0; i < n; ++i) delta[i] = static_cast<float>((me + 1) * p + int(i % 3));
    if (p % 2 == 0) {
      store.push(delta);
      store.fetch_add(ControlSlot::kGlobalStep, 1);
    } else {
      // As --bucket_bytes sends them: pieces from the end down, across both variables, each
      // started and left open, then the pull that completes them.
      const std::span<const float> all(delta);
      store.start_push(13, all.subspan(13));
      store.progress();
      store.start_push(4, all.subspan(4, 9));
      store.start_push(0, all.subspan(0, 4));
      store.pull_counting(pulled, ControlSlot::kGlobalStep);
    }
  }
  store.fetch_add(ControlSlot::kRetired, 1);
  const int workers = cluster.num_tasks("worker");
  while (store.read(ControlSlot::kRetired) < workers) std::this_thread::sleep_for(1ms);
  std::vector<float> final_values(n);
  store.pull(final_values);
  const double pushes_sum = kPushes * (kPushes + 1) / 2.0;
  double worker_sum = 0;
  for (int w = 1; w <= workers; ++w) worker_sum += w;
  for (std::size_t i = 0; i < n; ++i)  // exact: integer-valued sums below 2^24
    CHECK(double(final_values[i]) ==
          initial[i] + worker_sum * pushes_sum + double(workers * kPushes * int(i % 3)));
  CHECK(store.read(ControlSlot::kGlobalStep) == workers * kPushes);
  store.close();
}

// Three workers and a ps train a small mlp in `options.mode`; worker `slow` sleeps `pause` per
// step. `done(steps)` says when to stop; `check(replication, slow)` runs on every worker after.
template <typename Done, typename Check>
void train_with_a_slow_worker(const mpi::Comm& comm, ReplicationOptions options, int slow,
                              std::chrono::milliseconds pause, Done done, Check check) {
  const ClusterSpec cluster = ClusterSpec::from_counts(comm, 1);
  Server server(cluster);
  if (served_as_ps(server)) return;
  const auto data = data::synthetic(256, 15);
  Graph graph(setter(1));
  Model model = mlp(graph, {8});
  graph.initialize(3);
  auto optimizer = Optimizer::create(momentum());
  auto replication = start_replication(server, graph, *optimizer, options);
  std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()));
  Tensor images;
  std::vector<std::int32_t> labels;
  const bool is_slow = server.task_index() == slow;
  std::int64_t last = 0, steps = 0;
  while (!done(*replication, steps)) {
    replication->before_step(graph.values());
    slice(data, (steps++ % 16) * 16, 16, images, labels);
    model.train_step(images, labels, grads, {});
    if (is_slow) std::this_thread::sleep_for(pause);
    const StepOutcome outcome = replication->after_step(grads, graph.values());
    CHECK(outcome.global_step > last);  // steps always advance
    last = outcome.global_step;
  }
  check(*replication, is_slow, steps);
  replication->finish();
  server.done();
}

// Sync mode, k=2 of 3 workers, worker `slow` 30 ms behind: 20 steps are applied all the same, and
// the slow one's gradients are dropped.
void backup_workers_with_a_slow_one(const mpi::Comm& comm, int slow, const char* who) {
  ReplicationOptions options;
  options.mode = Mode::kSync;
  options.replicas_to_aggregate = 2;
  train_with_a_slow_worker(
      comm, options, slow, 30ms, [](Replication& r, std::int64_t) { return r.global_step() >= 20; },
      [who](Replication& r, bool is_slow, std::int64_t steps) {
        CHECK(r.global_step() >= 20);
        if (!is_slow) return;
        CHECK(r.dropped_gradients() > 0);
        MESSAGE(who << ": " << r.dropped_gradients() << " of " << steps << " gradients dropped");
      });
}

COHORT_MPI_TEST_CASE("backup workers: k=2 of 3, a slow worker's gradients are dropped", 4) {
  backup_workers_with_a_slow_one(comm, /*slow=*/2, "slow worker");
}

COHORT_MPI_TEST_CASE("backup workers: k=2 of 3, the chief slow: it applies the others' sum", 4) {
  // The chief adds its own gradient only when it claimed a slot; here the two others take both
  // slots first, so the chief applies their sum alone and counts its own as dropped.
  backup_workers_with_a_slow_one(comm, /*slow=*/0, "slow chief");
}

// Sync mode, k=1 of 2 workers that compute the same batch, the chief and the other slow by turns:
// each step applies one gradient, the chief's own (when it claims first) or the other's, so the
// parameters equal one process's at batch B. On the chief's turns nothing of the other's
// gradient of the step before may join the sum. With the wide model in pieces, on the other's
// turns the chief, without a gradient of its own, names the other to clear the sums.
void backup_by_turns(const mpi::Comm& comm, Builder build) {
  constexpr int kTurns = 8;
  const auto data = data::synthetic(kTurns * kBatch, 11);
  const ClusterSpec cluster = ClusterSpec::from_counts(comm, 1);
  Server server(cluster);
  if (served_as_ps(server)) return;
  Graph graph(setter(1));
  Model model = build(graph, false);
  graph.initialize(7);
  auto optimizer = Optimizer::create(momentum());
  ReplicationOptions options;
  options.mode = Mode::kSync;
  options.replicas_to_aggregate = 1;
  auto replication = start_replication(server, graph, *optimizer, options);
  std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()));
  Tensor images;
  std::vector<std::int32_t> labels;
  // Turns by global step: the chief's the even ones, the other's the odd ones. The other may
  // skip steps (the chief applies its own without waiting); the chief computes every one.
  for (std::int64_t step = 0; step < kTurns;) {
    replication->before_step(graph.values());
    slice(data, step * kBatch, kBatch, images, labels);
    model.train_step(images, labels, grads, {});
    // The other's turn. A worker that slept starts its next step that much later (it learns of
    // the chief's update only after the sleep); the chief waits for nobody, so it sleeps twice
    // as long to lose.
    if (step % 2 != server.task_index())
      std::this_thread::sleep_for(server.is_chief() ? 100ms : 50ms);
    step = replication->after_step(grads, graph.values()).global_step;
  }
  const std::vector<float> values = parameters_and_state(graph);
  if (server.is_chief()) CHECK(replication->dropped_gradients() == kTurns / 2);
  const std::string stats = replication->stats() + "; memory " + server.memory_transport();
  replication->finish();
  server.done();
  check_equal(values, reference(data, 1, build, kTurns));
  MESSAGE("worker " << server.task_index() << ": " << stats);
  // A gradient of one piece sends its count with its completion, and the chief, which may see
  // the completion first, then clears the sums itself: who clears is checked for more pieces.
  if (graph.num_parameters() <= 64 * 1024) return;
  const bool cleared = stats.find("cleared the sums of " + std::to_string(kTurns / 2) +
                                  " steps") != std::string::npos;
  const bool pieces = stats.find("memory one-sided") != std::string::npos &&
                      std::thread::hardware_concurrency() >= 2;
  CHECK(cleared == (pieces && !server.is_chief()));
}

COHORT_MPI_TEST_CASE("backup workers: k=1 of 2 by turns equals one process at batch B", 3) {
  backup_by_turns(comm, small_mlp);
}

COHORT_MPI_TEST_CASE("backup workers in pieces: k=1 of 2 by turns equals one process at B", 3) {
  backup_by_turns(comm, wide_mlp);
}

COHORT_MPI_TEST_CASE("ssp: no worker runs more than `staleness` steps ahead of the slowest", 4) {
  ReplicationOptions options;
  options.mode = Mode::kSsp;
  options.staleness = 2;
  train_with_a_slow_worker(
      comm, options, /*slow=*/1, 60ms, [](Replication&, std::int64_t steps) { return steps >= 10; },
      [](Replication& r, bool slow, std::int64_t) {
        // Without the bound the fast workers would end 9 steps ahead of the slow one.
        MESSAGE("largest gap " << r.max_observed_staleness() << std::string(slow ? " (slow worker)" : ""));
        CHECK(r.max_observed_staleness() <= 2);
        if (!slow) CHECK(r.max_observed_staleness() >= 1);
      });
}

}  // namespace cohort
