#include "cohort/core/train/trainer.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/base/stall_watch.h"
#include "cohort/core/dist/cross_replica_sum.h"
#include "cohort/core/dist/server.h"
#include "cohort/core/nn/evaluation.h"
#include "cohort/core/train/replica_agreement.h"

namespace cohort {
namespace {

// InvalidArgument: `what` 'pattern' (Graph::matching's) matches no variable of `graph`, listing
// its variables (the trainable ones alone where `trainable_only`).
[[noreturn]] void throw_no_match(const Graph& graph, const std::string& what, const std::string& pattern,
                                 bool trainable_only) {
  std::string names;
  for (const Variable& v : graph.variables())
    if (v.trainable || !trainable_only) names += (names.empty() ? "" : ", ") + v.name;
  const std::string kind = trainable_only ? "trainable variable" : "variable";
  throw InvalidArgument(what + " '" + pattern + "' match no " + kind + " of the model (its " + kind + "s: " +
                        names + ")");
}

std::uint64_t mix(std::uint64_t a, std::uint64_t b) {
  // splitmix64 over the pair: dropout masks differ by step, worker and tower.
  std::uint64_t z = a * 0x9e3779b97f4a7c15ull + b + 0x632be59bd9b4e019ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The seed of one worker's shuffles, augmentation and dropout: worker 0 keeps the given seed (so
// one worker draws as local mode does), every other its own, so that the workers' batches, which
// take the same positions of their strided shards, do not hold neighbouring rows of the file in
// the same order, cropped and masked alike.
std::uint64_t worker_seed(std::uint64_t seed, int worker) {
  return worker == 0 ? seed : mix(seed, 0x5eed0000ull + static_cast<std::uint64_t>(worker));
}

data::BatchOptions batch_options(const TrainerOptions& options, std::uint64_t seed) {
  data::BatchOptions b;
  b.batch_size = options.batch_size;
  b.seed = seed;
  b.shuffle = true;
  b.drop_remainder = true;
  b.repeat = true;
  b.image = options.image;
  return b;
}

// This worker's replica index; a task that does not train (a ps, serving in join()) has none.
int replica_index_of(const Server* server) {
  if (server == nullptr) return 0;
  if (!server->is_computing())
    throw InvalidArgument("Trainer: built on " + server->task().to_string() +
                          ", which does not train (" +
                          (server->job_name() == "ps"
                               ? "a ps task serves the variables in server.join()"
                               : "an evaluator follows the checkpoints: run_evaluator()") +
                          "); build the Trainer on the workers only");
  return server->replica_index();
}

}  // namespace

Trainer::Trainer(Server* server, Graph& graph, const ModelFactory& model, data::Dataset data,
                 std::unique_ptr<Optimizer> optimizer, TrainerOptions options)
    : graph_(graph),
      options_(options),
      worker_index_(replica_index_of(server)),
      seed_(worker_seed(options.seed, worker_index_)),
      optimizer_(std::move(optimizer)),
      batches_(data::BatchIterator(std::move(data), batch_options(options, seed_))) {
  if (server) {
    target_ = server->target();
    replicas_ = &server->replicas();
    num_workers_ = server->num_replicas();
    if (options_.replication.mode != Mode::kLocal)
      StallWatch::set_timeout(options_.replication.stall_timeout);
  }
  if (options_.towers < 1) throw InvalidArgument("--towers must be >= 1");
  if (options_.accumulation_steps < 1)
    throw InvalidArgument("accumulation_steps = " + std::to_string(options_.accumulation_steps) +
                          ", must be >= 1");
  if (options_.accumulation_steps > 1 && options_.replication.bucket_bytes > 0)
    throw InvalidArgument("gradient accumulation (" + std::to_string(options_.accumulation_steps) +
                          " batches a step) with buckets sent during the backward pass: a bucket "
                          "would leave before the step's gradient is whole; use accumulation or "
                          "buckets, not both (accumulation_steps, bucket_bytes)");
  if (options_.batch_size < options_.towers)
    throw InvalidArgument("--batch_size=" + std::to_string(options_.batch_size) +
                          " is smaller than --towers=" + std::to_string(options_.towers));
  if (!options_.gpus.empty() && options_.gpus.size() != static_cast<std::size_t>(options_.towers))
    throw InvalidArgument(std::to_string(options_.gpus.size()) + " GPUs given for " +
                          std::to_string(options_.towers) + " towers");
  if (options_.step && !options_.gpus.empty())
    throw InvalidArgument("a training step of one's own (TrainerOptions::step) runs on the host: "
                          "give no GPUs");
  if (options_.moving_average_decay != 0 && worker_index_ == 0)
    average_.emplace(options_.moving_average_decay);  // InvalidArgument outside (0, 1)
  for (int t = 0; t < options_.towers; ++t) towers_.push_back(Tower{model(graph_), {}, {}, {}, {}, {}});
  if (&towers_.front().model.graph() != &graph_)
    throw InvalidArgument("Trainer: the model function built its model on another Graph than the "
                          "trainer's: build it on the Graph& it is given");
  const data::Dataset& shard = batches_.dataset();
  check_dataset(towers_.front().model, shard);
  // A crop pads moved targets with target_padding: a value the loss refuses would fail a step
  // part way through training, on the ranks whose crops happened to pad; found here, on all.
  if (batches_.moves_targets() && options_.image.crop_padding > 0) {
    const std::vector<float> padded(static_cast<std::size_t>(shard.target_size()), options_.image.target_padding);
    try {
      towers_.front().model.loss().check_target(padded);
    } catch (const InvalidArgument& e) {
      char value[32];
      std::snprintf(value, sizeof value, "%g", static_cast<double>(options_.image.target_padding));
      throw InvalidArgument(std::string("ImageOptions::target_padding ") + value +
                            ", which a crop pads the targets with, does not fit the loss: " + e.what());
    }
  }
  for (std::size_t t = 0; t < options_.gpus.size(); ++t)
    towers_[t].model.set_gpu(options_.gpus[t], options_.allow_tf32);
  optimizer_->set_decay_ranges(graph_.decay_ranges());
  std::vector<const Variable*> frozen_vars;  // trainable, but left out of trainable_vars
  if (!options_.trainable_vars.empty()) {
    const std::vector<const Variable*> chosen = graph_.matching(options_.trainable_vars, "variables to train");
    std::vector<std::pair<std::int64_t, std::int64_t>> frozen;
    bool any = false;
    for (const Variable& v : graph_.variables()) {
      if (!v.trainable) continue;  // state: no optimizer
      if (std::find(chosen.begin(), chosen.end(), &v) != chosen.end()) any = true;
      else {
        frozen.emplace_back(v.offset, v.offset + v.size);
        frozen_vars.push_back(&v);
      }
    }
    if (!any) throw_no_match(graph_, "variables to train", options_.trainable_vars, /*trainable_only=*/true);
    optimizer_->set_frozen_ranges(std::move(frozen));
  }
  if (!options_.learning_rate_factors.empty()) {
    std::vector<Optimizer::RateFactor> factors;
    std::vector<const Variable*> taken;
    for (const auto& [pattern, factor] : options_.learning_rate_factors) {
      char text[32];
      std::snprintf(text, sizeof text, "%g", factor);
      if (!(factor > 0) || !std::isfinite(factor))
        throw InvalidArgument("learning-rate factor " + std::string(text) + " of the variables '" +
                              pattern + "': expected a finite factor above 0 (to hold variables as " +
                              "they are, leave them out of the variables to train)");
      const std::string what = "variables of learning-rate factor " + std::string(text);
      const std::vector<const Variable*> chosen = graph_.matching(pattern, what);
      if (chosen.empty()) throw_no_match(graph_, what, pattern, /*trainable_only=*/false);
      // Whether it matches a trainable variable; one no earlier pattern took; one of those trained.
      bool trainable = false, fresh = false, training = false;
      for (const Variable* v : chosen) {
        trainable = trainable || v->trainable;
        if (v->trainable && std::find(taken.begin(), taken.end(), v) == taken.end()) {
          fresh = true;
          training = training || std::find(frozen_vars.begin(), frozen_vars.end(), v) == frozen_vars.end();
          taken.push_back(v);
          factors.push_back({v->offset, v->offset + v->size, factor});
        }
      }
      if (!trainable) throw_no_match(graph_, what, pattern, /*trainable_only=*/true);
      // A pattern whose every variable an earlier one took never applies: a mistake, as one that
      // matches nothing is.
      if (!fresh)
        throw InvalidArgument("learning-rate factor " + std::string(text) + " of the variables '" +
                              pattern + "': an earlier pattern takes every trainable variable it " +
                              "matches (a variable takes the first pattern's factor)");
      if (!training)
        throw InvalidArgument("learning-rate factor " + std::string(text) + " of the variables '" +
                              pattern + "': every variable it gives a factor is held as it is " +
                              "(not among the variables to train '" + options_.trainable_vars + "')");
    }
    optimizer_->set_rate_factors(std::move(factors));
  }
  if (options_.sync_batch_norm && server) {
    const ReplicationOptions& r = options_.replication;
    const bool every_step = r.mode == Mode::kAllreduce ||
                            (r.mode == Mode::kSync && (r.replicas_to_aggregate == 0 ||
                                                       r.replicas_to_aggregate == num_workers_));
    if (!every_step)
      throw InvalidArgument(std::string("synchronised batch norm needs every worker in every "
                                        "step: --mode=allreduce, or --mode=sync without backup "
                                        "workers, not --mode=") +
                            to_string(r.mode));
    if (options_.towers > 1)
      throw InvalidArgument("synchronised batch norm runs with one tower per worker, not " +
                            std::to_string(options_.towers));
    if (num_workers_ > 1)
      cross_replica_ = std::make_unique<ReplicaSum>(
          server->replicas(), "the synchronised batch normalisation's sums, with the other workers");
  }
  if (server && options_.replication.mode != Mode::kLocal && num_workers_ > 1) {
    // A replica that skips it (another mode, no trainer) leaves the others to the stall timeout.
    const StallWatch watch("the check that every replica builds the chief's model");
    check_replicas_agree(server->replicas(), replica_layout(graph_, *optimizer_, options_));
  }
  // The parameters first: a model too large for memory is named as such (Graph), not met as a
  // bare bad_alloc in the gradients' allocation below.
  static_cast<void>(graph_.values());
  replication_ = Replication::create(server, graph_, *optimizer_, options_.replication);
  // Tower 0's gradients (the towers' average) go where the mode reads them without a copy.
  const auto parameters = static_cast<std::size_t>(graph_.num_parameters());
  const std::span<float> memory = replication_->gradient_memory();
  for (std::size_t t = 0; t < towers_.size(); ++t) {
    Tower& tower = towers_[t];
    if (t == 0 && memory.size() == parameters) {
      tower.grads = memory;
    } else {
      tower.own_grads.assign(parameters, 0.0f);
      tower.grads = tower.own_grads;
    }
  }
  if (!options_.gpus.empty()) {
    std::size_t refused = 0;
    const auto pin = [&](std::span<const float> memory) {
      gpu_pins_.push_back(Model::pin_for_gpu(memory));
      if (!gpu_pins_.back()) refused += memory.size_bytes();
    };
    pin(graph_.values());
    for (const Tower& tower : towers_) pin(tower.grads);
    if (refused > 0)
      std::fprintf(stderr, "[%s] note: could not page-lock %zu KB of the parameters and gradients the "
                   "GPU towers copy (the driver refused, or another range holds those pages); "
                   "copies of memory that is not page-locked are slower\n",
                   process_label().c_str(), refused / 1024);
  }
  for (std::size_t t = 1; t < towers_.size(); ++t) threads_.emplace_back([this, t] { tower_thread(t); });
}

Trainer::~Trainer() {
  {
    std::lock_guard lock(mutex_);
    quit_ = true;
  }
  wake_.notify_all();
  for (std::thread& thread : threads_) thread.join();
}

void Trainer::start(std::int64_t initial_step, bool restored,
                    std::optional<std::chrono::milliseconds> max_wait) {
  // The averages and the count restore() loaded, for this start alone (one that fails leaves
  // none behind).
  const bool keep_average = std::exchange(average_restored_, false) && restored;
  const std::optional<std::int64_t> restored_examples = std::exchange(restored_examples_, std::nullopt);
  check_can_start();
  if (!restored) {
    // From the initialisers, as TensorFlow's init op: the variables and the optimizer's slots
    // (which a session before this one on the same trainer has moved).
    graph_.initialize(options_.seed);
    optimizer_->reset();
    replication_->set_learning_rate_scale(1);  // a session before this one on the same trainer may have reduced it
  }
  {
    const StallWatch watch("the start of training, with the other tasks");
    replication_->start(graph_.values(), initial_step, max_wait);
  }
  if (average_ && !keep_average) average_->reset(graph_.values());
  has_parameters_ = true;
  const bool again = started_;
  started_ = true;
  left_ = false;
  final_step_.reset();
  start_step_ = replication_->global_step();
  applied_at_start_ = replication_->gradients_applied().value_or(0);
  // The examples trained before this start: those of the checkpoint the chief restored (another
  // run may have taken more or fewer a step: other workers, batch size or accumulation), else
  // this run's global steps' worth; the chief's, with its start step, since in the async modes
  // another replica may start later.
  const std::int64_t per_step = examples_per_global_step();
  std::array<std::int64_t, 2> count = {start_step_ * per_step, start_step_};
  if (restored && restored_examples) count[0] = *restored_examples;
  // Local mode's replicas train apart: each counts its own.
  if (replicas_ != nullptr && num_workers_ > 1 && options_.replication.mode != Mode::kLocal) {
    const StallWatch watch("the start of training, with the other workers");
    replicas_->bcast(std::span<std::int64_t>(count), 0);
  }
  examples_at_start_ = count[0];
  examples_step_ = count[1];
  // The data resumes where as many examples leave it under this run's steps: this worker's
  // share of them, in whole steps where they make whole steps of this run; else (a run of
  // another batch size or accumulation) from the first whole batch at or past its share of the
  // examples, so that none is taken twice. (A step holds per_step / (batch x accumulation)
  // workers' batches: the share is batches_at()'s of the examples over that many.)
  const std::int64_t examples = examples_at(start_step_);
  const std::int64_t per_worker_step = options_.batch_size * options_.accumulation_steps;
  if (examples % per_step == 0) {
    batches_taken_ = replication_->batches_at(examples / per_step) * options_.accumulation_steps;
  } else {
    const std::int64_t per_batch = per_step / per_worker_step * options_.batch_size;
    batches_taken_ = (replication_->batches_at(examples) + per_batch - 1) / per_batch;
  }
  if (start_step_ > 0 || again) {
    const std::int64_t per_epoch = batches_.batches_per_epoch();
    batches_.seek(batches_taken_ / per_epoch, (batches_taken_ % per_epoch) * options_.batch_size);
  }
}

void Trainer::check_can_start() const {
  if (started_ && !left_)
    throw InvalidArgument(
        "Trainer::start: this trainer is training already (close its session, or finish() it, first)");
  if (!replication_->can_start())
    throw InvalidArgument(std::string(to_string(options_.replication.mode)) +
                          " mode: this worker has left the ps tasks' store (its session closed, or "
                          "the trainer finished), and the ps tasks stop serving once every worker "
                          "has; a trainer in a ps mode trains in one session");
}

namespace {
double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

void Trainer::tower_thread(std::size_t index) {
  std::int64_t seen = 0;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return quit_ || generation_ != seen; });
      if (quit_) return;
      seen = generation_;
    }
    std::exception_ptr error;
    try {
      run_tower(index);
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard lock(mutex_);
    if (error && !tower_error_) tower_error_ = error;
    if (--running_ == 0) finished_.notify_one();
  }
}

void Trainer::run_tower(std::size_t index) {
  Tower& tower = towers_[index];
  OpContext context;
  context.training = true;
  context.seed = mix(step_seed_, index);
  context.update_state = index == 0;
  tower.metrics = tower_step(index, tower.batch, context);
}

StepMetrics Trainer::tower_step(std::size_t index, const data::Batch& batch,
                                const OpContext& context) {
  Tower& tower = towers_[index];
  // The metrics' counts of this batch (Metric::counts), which sum over towers and batches.
  tower.counts.clear();
  struct Counting {
    Model& model;
    std::vector<std::vector<double>>* before;
    ~Counting() { model.count_metrics(before); }
  } counting{tower.model, tower.model.count_metrics(count_metrics_ ? &tower.counts : nullptr)};
  if (!options_.step)
    return tower.model.train_step(batch.features, batch.view(), tower.grads, context);
  // The gradient is whole only when the step returns, whatever its passes do before: nothing
  // leaves, and nothing is applied, during them.
  OpContext own = context;
  own.gradients_ready = nullptr;
  own.update_in_place = nullptr;
  return options_.step(tower.model, static_cast<int>(index), batch.features, batch.view(),
                       tower.grads, own);
}

namespace {

// Rows [first, first + count) of `from` into `to`.
void copy_rows(const Tensor& from, std::int64_t first, std::int64_t count, Tensor& to) {
  Shape shape = from.shape();
  shape[0] = count;
  to.resize(shape);
  const std::int64_t row = from.size() / from.dim(0);
  std::memcpy(to.data(), from.data() + first * row,
              static_cast<std::size_t>(count * row) * sizeof(float));
}

}  // namespace

void Trainer::set_learning_rate_scale(double scale) {
  Optimizer::check_learning_rate_scale(scale);
  // Another replica's scale would be dropped at its next step without a word.
  if (started_ && !left_ && num_workers_ > 1 && replicas_ != nullptr && replicas_->rank() != 0 &&
      options_.replication.mode != Mode::kLocal)
    throw InvalidArgument("Trainer::set_learning_rate_scale(" + std::to_string(scale) + ") on " + target_ +
                          ", which is not the chief: the chief sets the scale and every worker follows it "
                          "(give it in a hook on the chief: chief_only_hooks)");
  replication_->set_learning_rate_scale(scale);  // step() gives the optimizer what it agrees
}

bool Trainer::agree_to_stop(bool mine) {
  const StallWatch watch("the agreement to stop, with the other workers",
                         replication_->global_step());
  return replication_->agree_to_stop(mine);
}

std::vector<double> Trainer::exchange_step_times(double mine) {
  const StallWatch watch("the exchange of step times, with the other workers",
                         replication_->global_step());
  return replication_->exchange_step_times(mine);
}

// The gradient of batch_ into tower 0's gradients (the towers' mean by their shares of it), and
// its loss and metrics, times `share`, added to `values`; `last_batch`: the step's last.
void Trainer::compute_batch(bool last_batch, StepValues& values, float share) {
  const std::int64_t n = batch_.size();
  const auto towers = static_cast<std::int64_t>(towers_.size());
  if (towers == 1) {
    Tower& tower = towers_.front();
    OpContext context;
    context.seed = step_seed_;
    context.cross_replica = cross_replica_.get();
    // The mode's listener (buckets sent, a prefetch moved on) once per step, in its last batch:
    // buckets are refused with accumulation, whose gradient is whole only after the last batch.
    // SGD applied in place only where this batch's gradient is the step's.
    context.gradients_ready = last_batch ? replication_->gradient_listener(tower.grads) : nullptr;
    context.update_in_place = options_.accumulation_steps == 1 ? replication_->update_in_place() : nullptr;
    tower.metrics = tower_step(0, batch_, context);
  } else {
    // Split the batch as evenly as possible; each tower copies its slice (a small cost next to
    // its forward and backward pass).
    std::int64_t first = 0;
    for (std::int64_t t = 0; t < towers; ++t) {
      const std::int64_t count = n / towers + (t < n % towers ? 1 : 0);
      data::Batch& slice = towers_[static_cast<std::size_t>(t)].batch;
      copy_rows(batch_.features, first, count, slice.features);
      if (!batch_.labels.empty())
        slice.labels.assign(batch_.labels.begin() + first, batch_.labels.begin() + first + count);
      if (batch_.targets.rank() > 0) copy_rows(batch_.targets, first, count, slice.targets);
      first += count;
    }
    {
      std::lock_guard lock(mutex_);
      running_ = static_cast<int>(towers - 1);
      ++generation_;
    }
    wake_.notify_all();
    // Tower 0 runs here; whatever it throws waits until the other towers are done with the
    // batch, so a caller that carries on cannot overwrite their inputs under them.
    std::exception_ptr error;
    try {
      run_tower(0);
    } catch (...) {
      error = std::current_exception();
    }
    std::unique_lock lock(mutex_);
    finished_.wait(lock, [&] { return running_ == 0; });
    if (!error) error = std::exchange(tower_error_, nullptr);
    tower_error_ = nullptr;
    if (error) std::rethrow_exception(error);
    // Average the towers' gradients, weighting each by its share of the batch.
    const std::span<float> total = towers_.front().grads;
    const float w0 = static_cast<float>(towers_.front().batch.size()) / static_cast<float>(n);
    for (float& g : total) g *= w0;
    for (std::size_t t = 1; t < towers_.size(); ++t) {
      const float w = static_cast<float>(towers_[t].batch.size()) / static_cast<float>(n);
      const std::span<const float> grads = towers_[t].grads;
      for (std::size_t i = 0; i < total.size(); ++i) total[i] += w * grads[i];
    }
  }

  for (const Tower& tower : towers_) {
    const float w = share * (towers == 1 ? 1.0f : static_cast<float>(tower.batch.size()) /
                                                     static_cast<float>(n));
    values.loss += w * tower.metrics.loss;
    values.accuracy += w * tower.metrics.accuracy;
    for (std::size_t i = 0; i < values.metrics.size(); ++i)
      values.metrics[i] += w * tower.metrics.metrics[i];
    add_counts(tower.counts, values.metric_counts);
  }
}

void Trainer::add_counts(const std::vector<std::vector<double>>& counts,
                         std::vector<std::vector<double>>& total) {
  if (total.size() < counts.size()) total.resize(counts.size());
  for (std::size_t i = 0; i < counts.size(); ++i) {
    if (total[i].empty()) total[i].assign(counts[i].size(), 0.0);
    if (total[i].size() != counts[i].size()) continue;  // a step's own metrics, counted unlike
    for (std::size_t k = 0; k < counts[i].size(); ++k) total[i][k] += counts[i][k];
  }
}

// The step's k batches, each one's gradient at the same parameters: into tower 0's gradients
// for k = 1, else their sum into accumulated_; their loss and metrics averaged into `values`.
void Trainer::accumulate_batches(int k, std::uint64_t step_seed, StepValues& values) {
  const std::span<float> grads = towers_.front().grads;
  for (int micro = 0; micro < k; ++micro) {
    batches_.next(batch_);
    ++batches_taken_;
    step_seed_ = micro == 0 ? step_seed : mix(step_seed, static_cast<std::uint64_t>(micro));
    compute_batch(micro == k - 1, values, 1.0f / static_cast<float>(k));
    values.examples += batch_.size();
    if (k == 1) return;
    if (micro == 0) {
      accumulated_.assign(grads.begin(), grads.end());
    } else {
      for (std::size_t i = 0; i < grads.size(); ++i) accumulated_[i] += grads[i];
    }
  }
}

StepValues Trainer::step(bool count_metrics) {
  if (!started_ || left_)
    throw InvalidArgument(std::string("Trainer::step: this trainer ") +
                          (left_ ? "has finished (its session closed)"
                                 : "has not started (a MonitoredSession starts it)"));
  if (end_of_input())
    throw InvalidArgument("Trainer::step: the input has ended (" + std::to_string(options_.epochs) +
                          " epochs of " + std::to_string(batches_.batches_per_epoch()) +
                          " batches; a session stops there)");
  StepValues values;
  count_metrics_ = count_metrics;  // read by the towers' threads, which this step wakes after
  replication_->take_wait_seconds();  // waits outside the steps (start()'s) are not this one's
  optimizer_->set_learning_rate_scale(replication_->learning_rate_scale());  // the chief's
  values.pull_begin = seconds_now();
  {
    // The step's exchanges with the other tasks (not its computation): a collective or a
    // transfer inside MPI whose peer stalled would block for good.
    const StallWatch watch("the step's parameters from the other tasks", replication_->global_step());
    replication_->before_step(graph_.values());
  }
  values.pull_end = seconds_now();
  values.pull_wait = replication_->take_wait_seconds();
  if (average_) average_->apply(graph_.values(), replication_->global_step());
  const std::uint64_t step_seed = mix(seed_, static_cast<std::uint64_t>(replication_->global_step()));

  // Each batch's gradient at the same parameters; with accumulation, their mean.
  const int k = options_.accumulation_steps;
  const std::span<float> grads = towers_.front().grads;
  // A step that fails part way gives back the batches it took, as one batch's step does (batch
  // normalisation's moving statistics keep what its batches taught them).
  const std::int64_t taken = batches_taken_;
  try {
    accumulate_batches(k, step_seed, values);
  } catch (...) {
    if (k > 1) {
      const std::int64_t per_epoch = batches_.batches_per_epoch();
      batches_taken_ = taken;
      batches_.seek(taken / per_epoch, (taken % per_epoch) * options_.batch_size);
    }
    throw;
  }
  if (k > 1)
    for (std::size_t i = 0; i < grads.size(); ++i) grads[i] = accumulated_[i] / static_cast<float>(k);
  // Over several pieces (towers, accumulated batches), a metric that is no mean of its examples
  // (precision, recall, AUC) is its value over all of them, as an evaluation's is, not the mean
  // of the pieces' values.
  if (options_.step) {
    values.metric_counts.clear();  // the metrics are what the program's own step returns
  } else if (k > 1 || towers_.size() > 1) {
    const Model& model = towers_.front().model;
    for (std::size_t i = 0; i < values.metric_counts.size(); ++i)
      if (!values.metric_counts[i].empty())
        values.metrics[i] = static_cast<float>(model.metric_from_counts(i, values.metric_counts[i]));
    if (const int accuracy = accuracy_metric(model.metric_names()); accuracy >= 0)
      values.accuracy = values.metrics[static_cast<std::size_t>(accuracy)];
  }
  values.compute_end = seconds_now();
  values.learning_rate = optimizer_->learning_rate(replication_->global_step());
  const StepOutcome outcome = [&] {
    const StallWatch watch("the step's update with the other tasks", replication_->global_step());
    return replication_->after_step(towers_.front().grads, graph_.values());
  }();
  values.global_step = outcome.global_step;
  values.applied = outcome.applied;
  values.stop = outcome.stop;
  values.update_end = seconds_now();
  values.update_wait = replication_->take_wait_seconds();
  return values;
}

void Trainer::check_has_parameters(const char* what) const {
  if (!has_parameters_)
    throw InvalidArgument(std::string("Trainer::") + what +
                          ": the variables have no values yet: start a session (which initialises "
                          "or restores them) or load_parameters() from a checkpoint first");
}

StepMetrics Trainer::evaluate(const data::Dataset& data, std::int64_t batch_size) {
  check_has_parameters("evaluate");
  if (data.size() == 0) throw InvalidArgument("Trainer::evaluate: " + data.name() + " holds no examples");
  std::optional<MovingAverageSwap> averaged;
  if (has_average()) averaged.emplace(graph_, *average_);
  return evaluate_dataset(towers_.front().model, data, batch_size, options_.image);
}

namespace {

// `run`'s outputs for `features`, `batch_size` examples at a time, each batch normalised by
// `image` first, stacked in order.
Tensor predict_batches(const Tensor& features, const data::ImageOptions& image, std::int64_t batch_size,
                       const std::function<Tensor(const Tensor&)>& run) {
  if (features.rank() < 1) throw InvalidArgument("predict: features of shape " + to_string(features.shape()) +
                                                 ": expected [examples, ...]");
  if (batch_size < 1) throw InvalidArgument("predict: batch_size must be >= 1, got " + std::to_string(batch_size));
  const std::int64_t n = features.dim(0);
  if (n == 0) throw InvalidArgument("predict: features of shape " + to_string(features.shape()) + " hold no examples");
  // Per channel (the last axis), as the training batches: the same count of them.
  const Shape& shape = features.shape();
  if (image.mean.size() > 1 && (shape.size() < 2 || shape.back() != static_cast<std::int64_t>(image.mean.size())))
    throw InvalidArgument("predict: features of shape " + to_string(shape) + ", and the normalisation has " +
                          std::to_string(image.mean.size()) + " channels");
  const std::int64_t size = features.size() / n;
  Tensor out;
  for (std::int64_t begin = 0; begin < n; begin += batch_size) {
    Shape rows = shape;
    rows[0] = std::min(n, begin + batch_size) - begin;
    Tensor batch(rows);
    std::copy_n(features.data() + begin * size, batch.size(), batch.data());
    image.normalize(std::span<float>(batch.data(), static_cast<std::size_t>(batch.size())));
    const Tensor values = run(batch);
    if (values.rank() < 1 || values.dim(0) != rows[0])
      throw Error("predict: the model gave " + to_string(values.shape()) + " for " + std::to_string(rows[0]) +
                  " examples");
    if (begin == 0) {
      Shape whole = values.shape();
      whole[0] = n;
      out = Tensor(whole);
    }
    std::copy_n(values.data(), values.size(), out.data() + begin * (values.size() / rows[0]));
  }
  return out;
}

}  // namespace

Tensor Trainer::predict(const Tensor& features, std::int64_t batch_size) {
  return predict_outputs(features, batch_size, /*probabilities=*/false);
}

Tensor Trainer::predict_probabilities(const Tensor& features, std::int64_t batch_size) {
  return predict_outputs(features, batch_size, /*probabilities=*/true);
}

Tensor Trainer::predict_outputs(const Tensor& features, std::int64_t batch_size, bool probabilities) {
  check_has_parameters("predict");
  std::optional<MovingAverageSwap> averaged;
  if (has_average()) averaged.emplace(graph_, *average_);
  Model& model = towers_.front().model;
  return predict_batches(features, options_.image, model.inference_batch(batch_size), [&](const Tensor& batch) {
    return probabilities ? model.predict_probabilities(batch) : Tensor(model.predict(batch));
  });
}

void Trainer::take_final_parameters() {
  if (!started_ || left_ || final_step_) return;
  const std::int64_t step = replication_->read_global_step();
  replication_->fetch_parameters(graph_.values());
  final_step_ = step;
}

void Trainer::finish(bool fetch) {
  if (left_) return;
  if (fetch) {
    fetch_parameters();
    try {
      replication_->finish();
    } catch (...) {
      // Training is over all the same, and nothing collective is left to do.
      replication_->abandon();
      left_ = true;
      throw;
    }
  } else {
    replication_->abandon();
  }
  left_ = true;
}

StepMetrics Trainer::evaluate_across(const data::Dataset& part, std::int64_t batch_size) {
  if (!replicas_ || num_workers_ == 1) return evaluate(part, batch_size);
  check_has_parameters("evaluate_across");
  // Between steps the replicas must be at the same one, as allreduce mode alone keeps them: in
  // the others a replica's call would meet another's of a later step, or wait for one that ends
  // training first.
  const Mode mode = options_.replication.mode;
  if (started_ && !left_ && mode != Mode::kAllreduce)
    throw InvalidArgument(std::string("evaluate_across between steps needs the replicas at the same step, "
                                      "as allreduce mode keeps them; in ") +
                          to_string(mode) + " mode call it after finish(), or evaluate() on one replica");
  const KeptVariables kept(graph_);
  if (has_average()) std::copy(average_->values().begin(), average_->values().end(), graph_.values().begin());
  {
    const StallWatch watch("the chief's parameters for an evaluation");
    replicas_->bcast(graph_.values(), 0);
    replicas_->bcast(graph_.state(), 0);
  }
  ReplicaSum sum(*replicas_, "an evaluation's sums over the replicas");
  return evaluate_dataset(towers_.front().model, part, sum, batch_size, options_.image);
}

std::int64_t TrainerOptions::examples_per_global_step(int workers) const {
  const ReplicationOptions& r = replication;
  const std::int64_t step = batch_size * accumulation_steps;  // one replica's
  switch (r.mode) {
    case Mode::kSync:
      return step * (r.replicas_to_aggregate > 0 ? r.replicas_to_aggregate : workers);
    case Mode::kAllreduce:
      return step * workers;
    case Mode::kLocal:
    case Mode::kAsync:
    case Mode::kSsp:
      break;
  }
  return step;
}

std::int64_t TrainerOptions::steps_for_epochs(std::int64_t epochs, std::int64_t examples, int workers,
                                              ResumePoint from) const {
  if (epochs < 1 || examples < 1)
    throw InvalidArgument("steps_for_epochs: " + std::to_string(epochs) + " epochs of " + std::to_string(examples) +
                          " examples: both must be >= 1");
  const std::int64_t per_step = examples_per_global_step(workers);
  const std::int64_t left = std::max<std::int64_t>(0, epochs * examples - from.examples);
  return from.global_step + (left + per_step - 1) / per_step;
}

std::int64_t Trainer::examples_per_global_step() const {
  return options_.examples_per_global_step(num_workers_);
}

bool Trainer::end_of_input() const {
  // Not enough batches left for a whole step.
  return options_.epochs > 0 && batches_taken_ + options_.accumulation_steps >
                                    options_.epochs * batches_.batches_per_epoch();
}

std::int64_t Trainer::examples_at(std::int64_t step) const {
  return examples_at_start_ + (step - examples_step_) * examples_per_global_step();
}

std::optional<std::int64_t> Trainer::restored_examples() const { return restored_examples_; }

std::int64_t Trainer::examples_trained() const {
  if (const auto applied = replication_->gradients_applied())
    return (*applied - applied_at_start_) * options_.batch_size * options_.accumulation_steps;
  return (global_step() - start_step_) * examples_per_global_step();
}

}  // namespace cohort
