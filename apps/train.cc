// train: Cohort's training program.
//
//   mpirun -np 8 build/bin/train                                   # 8 workers, allreduce
//   mpirun -np 5 build/bin/train --ps_tasks=1 --mode=sync           # 1 ps, 4 workers
//   build/bin/train --model=cnn --optimizer=momentum --epochs=12    # one process
//
// Every rank runs this program; the cluster spec decides which are ps tasks and which workers.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cohort/core/app.h"
#include "cohort/core/cluster.h"
#include "cohort/core/data/dataset.h"
#include "cohort/core/flags.h"
#include "cohort/core/models.h"
#include "cohort/core/optimizer.h"
#include "cohort/core/replica_device_setter.h"
#include "cohort/core/server.h"
#include "cohort/core/threads.h"
#include "cohort/core/trainer.h"

COHORT_DEFINE_string(model, "mlp", "model to train: mlp, cnn or small_cnn");
COHORT_DEFINE_string(hidden, "256,128", "mlp hidden layer sizes, comma-separated");
COHORT_DEFINE_string(mode, "allreduce",
                     "how workers combine updates: sync, async, ssp (need --ps_tasks), allreduce, "
                     "or local (one process)");
COHORT_DEFINE_int(batch_size, 64, "examples per worker step");
COHORT_DEFINE_string(optimizer, "momentum", "sgd, momentum or adam");
COHORT_DEFINE_float(learning_rate, 0.01, "base learning rate");
COHORT_DEFINE_float(momentum, 0.9, "momentum of the momentum optimizer");
COHORT_DEFINE_bool(nesterov, false, "Nesterov momentum");
COHORT_DEFINE_string(lr_schedule, "constant", "learning-rate schedule: constant, step or exponential");
COHORT_DEFINE_float(lr_decay_rate, 0.1, "step/exponential schedules: decay factor");
COHORT_DEFINE_int(lr_decay_steps, 10000, "step/exponential schedules: global steps per decay");
COHORT_DEFINE_float(clip_norm, 0.0, "clip gradients to this global norm (0: no clipping)");
COHORT_DEFINE_int(epochs, 1, "epochs over the training set, counted globally (ignored with --train_steps)");
COHORT_DEFINE_int(train_steps, 0, "global steps to train (0: use --epochs)");
COHORT_DEFINE_int(seed, 1, "seed for initialisation, shuffling and dropout");
COHORT_DEFINE_int(threads, 1, "intra-op threads per worker");
COHORT_DEFINE_int(towers, 1, "model replicas per worker (threads), each on a slice of the batch");
COHORT_DEFINE_int(replicas_to_aggregate, 0, "sync mode: gradients per step (0: all workers; fewer = backup workers)");
COHORT_DEFINE_int(staleness, 2, "ssp mode: steps a worker may run ahead of the slowest");
COHORT_DEFINE_int(fusion_bytes, 4 << 20, "allreduce mode: bytes per fused MPI_Allreduce");
COHORT_DEFINE_float(wait_timeout_secs, 120, "give up waiting for other tasks after this long (0: never)");
COHORT_DEFINE_int(eval_every_steps, 0, "chief: evaluate on the test set every N global steps (0: at the end only)");
COHORT_DEFINE_int(log_every_steps, 100, "chief: log progress every N global steps");
COHORT_DEFINE_string(metrics_json, "", "chief: write the final metrics to this JSON file");

namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::int64_t> parse_sizes(const std::string& text) {
  std::vector<std::int64_t> sizes;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      std::size_t used = 0;
      const long long v = std::stoll(item, &used);
      if (used != item.size() || v <= 0) throw std::invalid_argument(item);
      sizes.push_back(v);
    } catch (const std::exception&) {
      throw cohort::InvalidArgument("invalid value '" + text + "' for --hidden: expected positive sizes such as 256,128");
    }
  }
  return sizes;
}

cohort::OptimizerOptions optimizer_options() {
  cohort::OptimizerOptions o;
  o.name = FLAGS_optimizer;
  o.learning_rate.base = FLAGS_learning_rate;
  o.learning_rate.kind = cohort::LearningRateSchedule::parse_kind(FLAGS_lr_schedule);
  o.learning_rate.decay_rate = FLAGS_lr_decay_rate;
  o.learning_rate.decay_steps = FLAGS_lr_decay_steps;
  o.momentum = FLAGS_momentum;
  o.nesterov = FLAGS_nesterov;
  o.clip_norm = FLAGS_clip_norm;
  return o;
}

double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

std::string duration(double seconds) {
  char text[32];
  const auto s = static_cast<long>(seconds + 0.5);
  if (s >= 3600) std::snprintf(text, sizeof text, "%ldh%02ldm", s / 3600, s % 3600 / 60);
  else std::snprintf(text, sizeof text, "%ldm%02lds", s / 60, s % 60);
  return text;
}

int Main(int, char**) {
  const cohort::ClusterSpec cluster = cohort::cluster_from_flags();
  cohort::Server server(cluster);
  const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(FLAGS_wait_timeout_secs * 1000));
  if (!server.is_computing()) {
    // A ps serves the parameter store until every worker is done; it reports what that cost it.
    const auto begin = Clock::now();
    const double cpu_before = cpu_seconds();
    server.join();
    const double wall = std::chrono::duration<double>(Clock::now() - begin).count();
    const double cpu = cpu_seconds() - cpu_before;
    std::printf("%s served for %.1f s using %.2f s of CPU (%.1f%% of a core)\n",
                server.task().to_string().c_str(), wall, cpu, 100.0 * cpu / std::max(wall, 1e-9));
    return 0;
  }

  const cohort::Mode mode = cohort::parse_mode(FLAGS_mode);
  const int workers = cluster.num_tasks("worker");
  if (mode == cohort::Mode::kLocal && workers > 1)
    throw cohort::InvalidArgument("--mode=local trains in one process; this job has " +
                                  std::to_string(workers) + " workers");
  if (FLAGS_batch_size <= 0) throw cohort::InvalidArgument("--batch_size must be positive");
  cohort::set_intra_op_threads(static_cast<int>(FLAGS_threads));
  const auto hidden = parse_sizes(FLAGS_hidden);

  const auto train_data = cohort::data::fashion_mnist(cohort::data::Split::kTrain);
  const auto shard = train_data.shard(server.task_index(), workers);

  auto placement = cohort::replica_device_setter_options_from_flags(cluster.num_tasks("ps"),
                                                                    server.worker_device());
  const bool log_placement = placement.log_device_placement;
  placement.log_device_placement = false;  // the chief prints the whole table below instead
  cohort::Graph graph{cohort::ReplicaDeviceSetter(placement)};
  cohort::TrainerOptions options;
  options.batch_size = FLAGS_batch_size;
  options.towers = static_cast<int>(FLAGS_towers);
  options.seed = static_cast<std::uint64_t>(FLAGS_seed);
  options.replication.mode = mode;
  options.replication.replicas_to_aggregate = FLAGS_replicas_to_aggregate;
  options.replication.staleness = FLAGS_staleness;
  options.replication.fusion_bytes = FLAGS_fusion_bytes;
  options.replication.wait_timeout = timeout;
  cohort::Trainer trainer(
      &server, graph,
      [&](cohort::Graph& g) { return cohort::build_model(FLAGS_model, g, hidden); }, shard,
      cohort::Optimizer::create(optimizer_options()), options);
  if (server.is_chief() && log_placement)
    std::printf("%s", graph.device_setter().table().c_str());

  // Epochs are counted globally: a global step consumes this many examples.
  std::int64_t per_step = FLAGS_batch_size;
  if (mode == cohort::Mode::kSync)
    per_step *= FLAGS_replicas_to_aggregate > 0 ? FLAGS_replicas_to_aggregate : workers;
  if (mode == cohort::Mode::kAllreduce) per_step *= workers;
  const std::int64_t target =
      FLAGS_train_steps > 0 ? FLAGS_train_steps
                            : (FLAGS_epochs * train_data.size() + per_step - 1) / per_step;

  trainer.start();
  const bool chief = server.is_chief();
  const auto test_data = chief ? cohort::data::fashion_mnist(cohort::data::Split::kTest)
                               : cohort::data::Dataset();
  if (chief)
    std::printf("training %s (%lld parameters), mode %s, %d worker%s, batch %lld per worker, %lld global steps\n",
                FLAGS_model.c_str(), static_cast<long long>(graph.num_parameters()),
                cohort::to_string(mode), workers, workers == 1 ? "" : "s",
                static_cast<long long>(FLAGS_batch_size), static_cast<long long>(target));

  const auto start = Clock::now();
  auto last_time = start;
  std::int64_t first_step = trainer.global_step(), last_step = first_step, next_log = first_step + FLAGS_log_every_steps;
  std::int64_t next_eval = FLAGS_eval_every_steps > 0 ? first_step + FLAGS_eval_every_steps : -1;
  cohort::StepValues v;
  while (trainer.global_step() < target) {
    v = trainer.step();
    if (v.stop) break;
    if (chief && FLAGS_log_every_steps > 0 && v.global_step >= next_log) {
      const auto now = Clock::now();
      const double dt = std::chrono::duration<double>(now - last_time).count();
      const double rate = static_cast<double>((v.global_step - last_step) * per_step) / dt;
      const double eta = static_cast<double>((target - v.global_step) * per_step) / rate;
      std::printf("step %lld/%lld  loss %.4f  accuracy %.3f  lr %.3g  %.0f images/s  eta %s\n",
                  static_cast<long long>(v.global_step), static_cast<long long>(target), v.loss,
                  v.accuracy, v.learning_rate, rate, duration(eta).c_str());
      std::fflush(stdout);
      last_time = now;
      last_step = v.global_step;
      next_log = v.global_step + FLAGS_log_every_steps;
    }
    if (chief && next_eval > 0 && v.global_step >= next_eval) {
      const auto m = trainer.evaluate(test_data);
      std::printf("step %lld  test accuracy %.4f  test loss %.4f\n",
                  static_cast<long long>(v.global_step), m.accuracy, m.loss);
      next_eval = v.global_step + FLAGS_eval_every_steps;
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const std::int64_t steps = trainer.global_step() - first_step;
  const double images_per_sec = static_cast<double>(steps * per_step) / seconds;
  const std::string stats = trainer.replication().stats();

  if (chief) {
    const auto m = trainer.evaluate(test_data);
    std::printf("final: global step %lld, test accuracy %.4f, test loss %.4f, %.0f images/s, %s%s%s\n",
                static_cast<long long>(trainer.global_step()), m.accuracy, m.loss, images_per_sec,
                duration(seconds).c_str(), stats.empty() ? "" : ", ", stats.c_str());
    if (!FLAGS_metrics_json.empty()) {
      const nlohmann::json metrics = {
          {"global_step", trainer.global_step()}, {"test_accuracy", m.accuracy},
          {"test_loss", m.loss}, {"train_images_per_sec", images_per_sec},
          {"wall_seconds", seconds}, {"model", FLAGS_model}, {"mode", FLAGS_mode},
          {"workers", workers}, {"ps_tasks", cluster.num_tasks("ps")},
          {"batch_size", FLAGS_batch_size}, {"towers", FLAGS_towers},
          {"dropped_gradients", trainer.replication().dropped_gradients()}};
      std::ofstream out(FLAGS_metrics_json);
      if (!out) throw cohort::Error("--metrics_json=" + FLAGS_metrics_json + ": cannot write the file");
      out << metrics.dump(2) << "\n";
    }
  }
  trainer.finish();
  server.done();
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return cohort::app::Run(Main, argc, argv); }
