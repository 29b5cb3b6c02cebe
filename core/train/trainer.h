#pragma once
// One worker's training loop body: towers, data, and the replication mode.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <string>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "cohort/core/dist/replication.h"
#include "cohort/core/nn/data/batch_iterator.h"
#include "cohort/core/nn/data/dataset.h"
#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/model.h"
#include "cohort/core/nn/optimizer.h"

namespace cohort {

class Server;

struct TrainerOptions {
  ReplicationOptions replication;
  std::int64_t batch_size = 64;  ///< examples per worker step, split over the towers
  int towers = 1;                ///< model replicas on this worker, one thread each
  /// The CUDA device of each tower (see core/gpu_placement.h); empty: the towers compute on the
  /// host. Parameters stay on the host either way (Model::set_gpu says what is copied).
  std::vector<int> gpus;
  bool allow_tf32 = false;       ///< GPU towers may use TF32 tensor cores
  std::uint64_t seed = 1;        ///< initialisation, shuffling and dropout derive from it
  std::string model_name;        ///< recorded in checkpoints
};

/// The values of one step, by name: what a session can fetch.
struct StepValues {
  std::int64_t global_step = 0;
  float loss = 0;
  float accuracy = 0;
  double learning_rate = 0;
  std::int64_t examples = 0;  ///< examples this worker computed on
  bool applied = true;        ///< false: sync mode dropped this gradient as stale or surplus
  bool stop = false;          ///< the chief has stopped training
  /// When the phases ran (steady-clock seconds): before_step began, parameters were current,
  /// gradients were ready, the update was done; and how much of it was spent waiting for others.
  double pull_begin = 0, pull_end = 0, compute_end = 0, update_end = 0;
};

/// Runs training steps on one worker: splits each batch over the towers (threads sharing the
/// graph's parameters), averages their gradients, and hands them to the replication mode.
///
/// Construction and start() are collective over the workers (and the ps tasks, for modes with a
/// store); step() may be too, depending on the mode. Not thread-safe: one thread drives it.
class Trainer {
 public:
  using ModelFactory = std::function<Model(Graph&)>;

  /// `model` is called once per tower; the towers share the variables it creates. `data` is this
  /// worker's shard. `server` may be null for --mode=local.
  Trainer(Server* server, Graph& graph, const ModelFactory& model, data::Dataset data,
          std::unique_ptr<Optimizer> optimizer, TrainerOptions options);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  /// Collective. The chief initialises the variables from the seed (unless `restored`: then the
  /// graph already holds restored values) and every worker starts from its parameters at
  /// `initial_step`. A worker resuming at a step past 0 moves its data to where an
  /// uninterrupted run would be (exactly so in sync and allreduce modes, where each worker
  /// consumes one batch per global step).
  void start(std::int64_t initial_step = 0, bool restored = false);
  /// One step: forward, backward, update.
  StepValues step();
  /// Loss and accuracy of the current parameters over `data`, in order (tower 0, no dropout).
  StepMetrics evaluate(const data::Dataset& data, std::int64_t batch_size = 1000);
  /// Leaves training (collective with the ps tasks for modes with a store).
  void finish();

  Graph& graph() { return graph_; }
  Model& model() { return towers_.front().model; }
  Optimizer& optimizer() { return *optimizer_; }
  Replication& replication() { return *replication_; }
  data::BatchIterator& batches() { return batches_; }
  std::int64_t global_step() const { return replication_->global_step(); }
  /// A fresh read of the global step (from the store in the ps modes, where other workers move
  /// it); not collective.
  std::int64_t read_global_step() { return replication_->read_global_step(); }
  /// This worker's index and the number of workers (0 and 1 without a cluster).
  int worker_index() const { return worker_index_; }
  int num_workers() const { return num_workers_; }
  /// Examples one global step consumes over the whole cluster: a worker's batch in the
  /// async modes, k (or all workers') batches in sync, every worker's in allreduce.
  std::int64_t examples_per_global_step() const;
  const TrainerOptions& options() const { return options_; }

 private:
  struct Tower {
    Model model;
    Tensor images;
    std::vector<std::int32_t> labels;
    std::vector<float> grads;
    StepMetrics metrics;
  };
  void run_tower(std::size_t index);
  void tower_thread(std::size_t index);

  Graph& graph_;
  TrainerOptions options_;
  int worker_index_ = 0;
  int num_workers_ = 1;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<Replication> replication_;
  data::BatchIterator batches_;
  Tensor batch_images_;
  std::vector<std::int32_t> batch_labels_;
  std::vector<Tower> towers_;
  std::uint64_t step_seed_ = 0;

  // Towers beyond the first run on their own threads, released once per step.
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_, finished_;
  std::int64_t generation_ = 0;
  int running_ = 0;
  bool quit_ = false;
  std::exception_ptr tower_error_;
};

}  // namespace cohort
