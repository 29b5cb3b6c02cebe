// train: Cohort's training program.
//
//   mpirun -np 8 build/bin/train                                   # 8 workers, allreduce
//   mpirun -np 5 build/bin/train --ps_tasks=1 --mode=sync           # 1 ps, 4 workers
//   build/bin/train --model=cnn --optimizer=momentum --epochs=12    # one process
//
// Every rank runs this program; the cluster spec decides which are ps tasks and which workers.
#include <algorithm>
#include <array>
#include <chrono>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <span>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cohort/core/base/clock.h"
#include "cohort/core/base/flags.h"
#include "cohort/core/base/signals.h"
#include "cohort/core/base/stall_watch.h"
#include "cohort/core/base/version.h"
#include "cohort/core/dist/cluster.h"
#include "cohort/core/dist/server.h"
#include "cohort/core/dist/worker_gpus.h"
#include "cohort/core/io/results_file.h"
#include "cohort/core/io/saver.h"
#include "cohort/core/nn/cpu_level.h"
#include "cohort/core/nn/data/dataset.h"
#include "cohort/core/nn/models.h"
#include "cohort/core/nn/optimizer.h"
#include "cohort/core/nn/threads.h"
#include "cohort/core/placement/gpu_placement.h"
#include "cohort/core/placement/replica_device_setter.h"
#include "cohort/core/train/app.h"
#include "cohort/core/train/evaluator.h"
#include "cohort/core/train/trainer.h"
#include "cohort/hooks/hooks.h"
#include "train_common.h"
#include "train_eval_only.h"

using cohort::flags::kSameOnAllRanks;
using cohort::flags::Choices;
using cohort::flags::Range;

COHORT_DEFINE_string(model, "mlp", "model to train",
    Choices{"mlp", "cnn", "small_cnn", "resnet", "mobilenet", "lstm", "gru", "transformer"}, kSameOnAllRanks);
COHORT_DEFINE_int(resnet_blocks, 2, "resnet: residual blocks per stage (3 stages of 16, 32, 64 filters)",
    Range{1, 64}, kSameOnAllRanks);
COHORT_DEFINE_bool(sync_batch_norm, false,
                   "batch norm statistics over every worker's batch (allreduce, or sync without backup workers)",
    kSameOnAllRanks);
COHORT_DEFINE_string(hidden, "256,128", "mlp hidden layer sizes, comma-separated",
    kSameOnAllRanks);
COHORT_DEFINE_string(mode, "allreduce",
                     "how workers combine updates: sync, async, ssp (need --ps_tasks), allreduce, "
                     "or local (one process)",
                     Choices{"sync", "async", "ssp", "allreduce", "local"}, kSameOnAllRanks);
COHORT_DEFINE_int(batch_size, 64, "examples per worker step",
    Range{1, 1 << 20}, kSameOnAllRanks);
COHORT_DEFINE_string(optimizer, "momentum", "the optimizer, with TensorFlow 1's formulas",
    Choices{"sgd", "momentum", "adam", "adamw", "rmsprop", "adagrad"}, kSameOnAllRanks);
COHORT_DEFINE_float(learning_rate, 0.01, "learning rate of one worker's batch (see --lr_scaling)",
    Range{.min = 0, .max = 1e6, .min_excluded = true}, kSameOnAllRanks);
COHORT_DEFINE_float(momentum, 0.9, "momentum of the momentum optimizer, or of rmsprop's steps where given (below 1)",
    Range{0, 1}, kSameOnAllRanks);
COHORT_DEFINE_bool(nesterov, false, "Nesterov momentum", kSameOnAllRanks);
COHORT_DEFINE_string(lr_scaling, "linear",
                     "linear: --learning_rate times the batches averaged in a global step (the "
                     "workers in sync and allreduce modes; 1 in async and ssp), as for large "
                     "batches; none: --learning_rate as given",
                     Choices{"linear", "none"}, kSameOnAllRanks);
COHORT_DEFINE_string(lr_schedule, "cosine", "learning-rate schedule",
    Choices{"constant", "step", "exponential", "cosine", "polynomial", "piecewise"}, kSameOnAllRanks);
COHORT_DEFINE_float(lr_decay_rate, 0.1, "step/exponential/piecewise: decay factor; cosine/polynomial: the final fraction of the rate",
    Range{0, 1}, kSameOnAllRanks);
COHORT_DEFINE_string(lr_boundaries, "", "piecewise: the global steps (warm-up included) at which the rate is multiplied by --lr_decay_rate once more, e.g. 30000,60000,80000",
    kSameOnAllRanks);
COHORT_DEFINE_int(lr_decay_steps, 0, "step/exponential: global steps per decay; cosine/polynomial: its length; 0: the run's global steps after the warm-up (so a resume with more --train_steps stretches it)",
    Range{0, 1e15}, kSameOnAllRanks);
COHORT_DEFINE_int(lr_warmup_steps, -1,
                  "global steps over which the rate rises linearly to its peak (-1: when --lr_scaling "
                  "raises the rate, from --learning_rate over one epoch, at most half the run; else none)", Range{-1, 1e15}, kSameOnAllRanks);
COHORT_DEFINE_float(weight_decay, 0.0, "weight decay of kernels: L2 (sgd, momentum, adam) or decoupled (adamw)",
    Range{0, 1}, kSameOnAllRanks);
COHORT_DEFINE_float(label_smoothing, 0.0, "softmax cross-entropy label smoothing",
    Range{0, 1}, kSameOnAllRanks);
COHORT_DEFINE_float(moving_average_decay, 0.0,
                    "chief: keep an exponential moving average of the parameters with this decay "
                    "(e.g. 0.999; TensorFlow 1's ExponentialMovingAverage, num_updates = the global "
                    "step), evaluate it and keep it in checkpoints; the evaluator job evaluates it (0: none)",
                    Range{0, 0.999999}, kSameOnAllRanks);
COHORT_DEFINE_bool(normalize, false, "standardise the images with Fashion-MNIST's mean and deviation (0.2860, 0.3530)",
    kSameOnAllRanks);
COHORT_DEFINE_int(crop_padding, 0, "training augmentation: random crops of the images padded by this many pixels",
    Range{0, 64}, kSameOnAllRanks);
COHORT_DEFINE_bool(horizontal_flip, false, "training augmentation: random left-right flips",
    kSameOnAllRanks);
COHORT_DEFINE_float(clip_norm, 0.0, "clip gradients to this global norm (0: no clipping)",
    Range{0, 1e30}, kSameOnAllRanks);
COHORT_DEFINE_int(epochs, 12, "epochs over the training set, counted globally (not with --train_steps)",
    Range{1, 1e6}, kSameOnAllRanks);
COHORT_DEFINE_int(train_steps, 0, "global steps to train (0: use --epochs)",
    Range{0, 1e15}, kSameOnAllRanks);
COHORT_DEFINE_int(seed, 1, "seed for initialisation, shuffling and dropout",
    Range{0, 1e15}, kSameOnAllRanks);
COHORT_DEFINE_int(threads, 1, "intra-op threads per worker", Range{1, 1024});
COHORT_DEFINE_int(towers, 1, "model replicas per worker (threads), each on a slice of the batch",
    Range{1, 64}, kSameOnAllRanks);
COHORT_DEFINE_int(accumulation_steps, 1, "batches each worker computes per global step, their gradients averaged into one update (a larger batch in the memory of one)",
    Range{1, 1 << 16}, kSameOnAllRanks);
COHORT_DEFINE_string(device, "cpu",
                     "where a worker's towers compute: cpu; gpu (a GPU per tower: the process's own "
                     "when Slurm binds them, else the node's shared out by node-local rank); or "
                     "/gpu:N (towers on N, N+1, ...)");
COHORT_DEFINE_bool(tf32, false, "GPU towers: let Dense and Conv2D use TF32 tensor cores (FP32 otherwise)");
COHORT_DEFINE_int(replicas_to_aggregate, 0, "sync mode: gradients per step (0: all workers; fewer = backup workers)",
    Range{0, 1 << 24}, kSameOnAllRanks);
COHORT_DEFINE_int(staleness, 2, "ssp mode: steps a worker may run ahead of the slowest",
    Range{0, 1e9}, kSameOnAllRanks);
COHORT_DEFINE_int(fusion_bytes, 64 << 20, "allreduce mode: bytes per fused MPI_Allreduce (at least one float's 4)",
    Range{4, 1e12}, kSameOnAllRanks);
COHORT_DEFINE_bool(shared_memory_sums, true,
                   "allreduce mode (float32, no buckets): the workers of a node sum their "
                   "gradients in the memory they share, MPI_Allreduce across nodes; false: "
                   "MPI_Allreduce alone",
                   kSameOnAllRanks);
COHORT_DEFINE_int(bucket_bytes, 0,
                  "send the gradients during the backward pass, in buckets of this many bytes, "
                  "at most 256 of them (0: after it; allreduce mode then sends --fusion_bytes pieces)",
                  Range{0, 1e12}, kSameOnAllRanks);
COHORT_DEFINE_bool(prefetch, false,
                   "async mode: pull the next step's parameters during the step, ahead of this "
                   "worker's own update, which it adds itself",
                   kSameOnAllRanks);
COHORT_DEFINE_string(compression, "none",
                     "gradients on the wire as none (float32) or bf16 (bfloat16, half the bytes, "
                     "with error feedback; the ps modes where their memory is served by messages)",
                     Choices{"none", "bf16"}, kSameOnAllRanks);
COHORT_DEFINE_float(wait_timeout_secs, 120, "give up waiting for other tasks after this long (0: never)",
    Range{0, 1e7});
COHORT_DEFINE_float(stall_timeout_secs, 1800,
                    "a wait inside MPI that no poll can time out (allreduce mode's collectives, "
                    "a stalled ps's transfers, the end of training) ends the job after this long "
                    "(0: never)",
                    Range{0, 1e7});
COHORT_DEFINE_int(eval_every_steps, 0,
                  "evaluate on the test set every N global steps (the chief; in allreduce mode the "
                  "workers share each evaluation out), printed and written as an eval run beside the "
                  "summaries (0: never; the final line's evaluation is made either way, and written there where "
                  "a checkpoint or summary directory is given and no evaluator job writes it)",
                  Range{0, 1e15}, kSameOnAllRanks);
COHORT_DEFINE_int(patience, 0,
                  "with --eval_every_steps: stop after this many evaluations without a lower test "
                  "loss (Keras's EarlyStopping; 0: never)", Range{0, 1e9}, kSameOnAllRanks);
COHORT_DEFINE_int(reduce_lr_patience, 0,
                  "with --eval_every_steps: multiply the learning rate by --reduce_lr_factor after "
                  "this many evaluations without a lower test loss (Keras's ReduceLROnPlateau; 0: never)",
                  Range{0, 1e9}, kSameOnAllRanks);
COHORT_DEFINE_float(reduce_lr_factor, 0.1, "with --reduce_lr_patience: the factor",
                    Range{1e-6, 0.999999}, kSameOnAllRanks);
COHORT_DEFINE_float(min_delta, 0.0,
                    "with --patience or --reduce_lr_patience: a lower test loss must be lower by more than this",
                    Range{0, 1e30}, kSameOnAllRanks);
COHORT_DEFINE_int(log_every_steps, 100, "chief: log progress every N global steps (0: never)",
    Range{0, 1e15});
COHORT_DEFINE_string(metrics_json, "",
    "chief: write the final metrics to this JSON file, with every flag's value under \"flags\" "
    "(its \"learning_rate\" is the peak rate after --lr_scaling; the flag's is flags.learning_rate)");
COHORT_DEFINE_string(checkpoint_dir, "", "chief: restore from and save checkpoints (and summaries) here (empty: none)",
    kSameOnAllRanks);
COHORT_DEFINE_bool(eval_only, false,
    "train nothing: evaluate --checkpoint_dir's latest checkpoint (or --eval_checkpoint) on the test set as training's final evaluation does, print its final line and write --metrics_json; one process, which reads the directory and writes nothing there (no lock: a job may be training into it)",
    kSameOnAllRanks);
COHORT_DEFINE_string(eval_checkpoint, "",
    "with --eval_only: the checkpoint file to evaluate (empty: the one --checkpoint_dir's index names latest)",
    kSameOnAllRanks);
COHORT_DEFINE_string(summary_dir, "", "chief: write summaries here (empty: --checkpoint_dir)");
COHORT_DEFINE_string(warm_start_from, "",
    "chief: without a checkpoint in --checkpoint_dir, start from this checkpoint's variables (a file, or a directory's latest) at step 0, the optimizer afresh; the file may be another framework's safetensors of the model's variable names (docs/GUIDE.md)",
    kSameOnAllRanks);
COHORT_DEFINE_string(warm_start_vars, "",
    "with --warm_start_from: a regular expression choosing the variables to load, matched from the start of the name (empty: all); the others start from their initialisers",
    kSameOnAllRanks);
COHORT_DEFINE_string(trainable_vars, "",
    "the variables to train, a regular expression matched from the start of their names (e.g. logits to fine-tune the head alone); the others are held as they are (empty: all)",
    kSameOnAllRanks);
COHORT_DEFINE_string(lr_factors, "",
    "factors on the learning rate by variable, PATTERN:FACTOR,... (e.g. hidden:0.1 to fine-tune the hidden layers at a tenth of the head's rate); each variable takes the first pattern matching the start of its name, the others 1",
    kSameOnAllRanks);
COHORT_DEFINE_int(save_checkpoint_steps, 0, "chief: checkpoint every N global steps (0: use --save_checkpoint_secs)",
    Range{0, 1e15});
COHORT_DEFINE_int(save_checkpoint_secs, 600,
    "chief: checkpoint every N seconds (0: not by time; with --save_checkpoint_steps=0 too, never)",
    Range{0, 1e9});
COHORT_DEFINE_int(save_summaries_steps, 100, "chief: write summaries every N global steps",
    Range{0, 1e15});
COHORT_DEFINE_bool(summary_histograms, false,
    "chief: with each summary, a histogram of every variable (TensorBoard's Histograms tab)");
COHORT_DEFINE_int(keep_checkpoint_max, 5, "chief: checkpoints kept in --checkpoint_dir (0: all)",
    Range{0, 1e6});
COHORT_DEFINE_float(keep_checkpoint_every_n_hours, 0,
    "chief: of the checkpoints --keep_checkpoint_max would delete, keep one every this many hours for good (0: none)",
    Range{0, 1e6});
COHORT_DEFINE_string(profile_file, "", "write a Chrome-trace profile of the steps to this file (per worker)");
COHORT_DEFINE_string(inject_fault, "", "testing: make --inject_fault_task fail at --inject_fault_step: raise or stall",
    Choices{"", "raise", "stall"});
COHORT_DEFINE_int(inject_fault_task, 1, "testing: the worker that fails",
    Range{0, 1 << 24});
COHORT_DEFINE_int(inject_fault_step, 20, "testing: the global step at which it fails",
    Range{0, 1e15});

namespace {

using Clock = std::chrono::steady_clock;
using cohort::train_app::duration;
using cohort::train_app::image_options;
using cohort::train_app::model_from_flags;

// A timeout flag in seconds as milliseconds, rounded up: a positive timeout below a millisecond
// must not become 0, which means "never".
std::chrono::milliseconds at_least_a_millisecond(double seconds) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(seconds * 1000)));
}

// `steps`: the run's global steps, the default length of a decay; `batches`: the batches a global
// step averages (the linear scaling factor); `epoch`: the global steps of one epoch.
cohort::OptimizerOptions optimizer_options(std::int64_t steps, std::int64_t batches,
                                           std::int64_t epoch) {
  const bool scaled = FLAGS_lr_scaling == "linear" && batches > 1;
  cohort::OptimizerOptions o;
  o.name = FLAGS_optimizer;
  o.learning_rate.base = FLAGS_learning_rate;
  o.learning_rate.kind = cohort::LearningRateSchedule::parse_kind(FLAGS_lr_schedule);
  o.learning_rate.decay_rate = FLAGS_lr_decay_rate;
  if (FLAGS_lr_decay_rate <= 0 && (o.learning_rate.kind == cohort::LearningRateSchedule::Kind::kStep ||
                                   o.learning_rate.kind == cohort::LearningRateSchedule::Kind::kExponential))
    throw cohort::InvalidArgument("--lr_decay_rate=0 with --lr_schedule=" + FLAGS_lr_schedule +
                                  ": the rate is multiplied by it, so it must be > 0");
  o.learning_rate.warmup_steps = std::max<std::int64_t>(0, FLAGS_lr_warmup_steps);
  if (scaled)  // an epoch's warm-up, at most half the run, unless --lr_warmup_steps says
    o.learning_rate = o.learning_rate.linearly_scaled(batches, FLAGS_lr_warmup_steps >= 0 ? 0 : std::min(epoch, steps / 2));
  o.learning_rate.decay_steps =
      FLAGS_lr_decay_steps > 0 ? FLAGS_lr_decay_steps
                               : std::max<std::int64_t>(1, steps - o.learning_rate.warmup_steps);
  if (o.learning_rate.kind == cohort::LearningRateSchedule::Kind::kPiecewise) {
    o.learning_rate.boundaries = cohort::flags::parse_size_list("lr_boundaries", FLAGS_lr_boundaries, std::int64_t{1} << 50);
    for (std::size_t i = 1; i <= o.learning_rate.boundaries.size(); ++i)
      o.learning_rate.factors.push_back(std::pow(FLAGS_lr_decay_rate, static_cast<double>(i)));
  }
  o.momentum = FLAGS_momentum;
  if (o.name == "rmsprop" && cohort::flags::Registry::global().given("momentum"))
    o.rmsprop_momentum = FLAGS_momentum;
  o.nesterov = FLAGS_nesterov;
  o.clip_norm = FLAGS_clip_norm;
  o.weight_decay = FLAGS_weight_decay;
  return o;
}

// --lr_factors as TrainerOptions::learning_rate_factors: InvalidArgument naming the flag for an
// item that is not PATTERN:FACTOR with a regular expression and a factor above 0.
std::vector<std::pair<std::string, double>> lr_factors_from_flag() {
  std::vector<std::pair<std::string, double>> factors;
  for (const std::string& item : cohort::flags::split_list("lr_factors", FLAGS_lr_factors)) {
    const std::size_t colon = item.rfind(':');
    double factor = 0;
    const char* end = colon == std::string::npos ? nullptr : item.data() + item.size();
    const bool number = end != nullptr &&
                        std::from_chars(item.data() + colon + 1, end, factor).ptr == end;
    if (!number || colon == 0 || !(factor > 0) || !std::isfinite(factor))
      throw cohort::InvalidArgument("--lr_factors=" + FLAGS_lr_factors + ": '" + item +
                                    "' is not PATTERN:FACTOR with a factor above 0" +
                                    (colon == std::string::npos
                                         ? " (items are separated by commas, which a pattern cannot hold)"
                                         : ""));
    const std::string pattern = item.substr(0, colon);
    try {
      static_cast<void>(cohort::Graph().matching(pattern, "variables of a learning-rate factor"));
    } catch (const cohort::InvalidArgument& e) {
      throw cohort::InvalidArgument("--lr_factors: " + std::string(e.what()));
    }
    factors.emplace_back(pattern, factor);
  }
  return factors;
}

// Progress lines on the chief at every multiple of --log_every_steps (after the session's first
// step, which gives the rate its start): step, loss, accuracy, images/s over the cluster, time
// to go.
class ProgressHook : public cohort::SessionRunHook {
 public:
  ProgressHook(std::int64_t every, std::shared_ptr<const cohort::StopAtStepHook> stop, std::int64_t per_step)
      : every_(every), stop_(std::move(stop)), per_step_(per_step) {}
  cohort::SessionRunArgs before_run(cohort::RunContext&) override {
    return {{"global_step", "loss", "accuracy", "learning_rate"}};
  }
  void after_run(cohort::RunContext&, const cohort::SessionRunValues& v) override {
    const auto step = static_cast<std::int64_t>(v.get("global_step"));
    if (last_step_ < 0) last_step_ = step, last_time_ = Clock::now(), next_ = (step / every_ + 1) * every_;
    if (step < next_) return;
    const auto now = Clock::now();
    const double rate = static_cast<double>((step - last_step_) * per_step_) /
                        std::chrono::duration<double>(now - last_time_).count();
    const std::int64_t target = stop_->last_step().value_or(step);
    const double eta = static_cast<double>((target - step) * per_step_) / rate;
    std::printf("step %lld/%lld  loss %.4f  accuracy %.3f  lr %.3g  %.0f images/s  eta %s\n",
                static_cast<long long>(step), static_cast<long long>(target), v.get("loss"),
                v.get("accuracy"), v.get("learning_rate"), rate, duration(eta).c_str());
    std::fflush(stdout);
    last_step_ = step, last_time_ = now, next_ = (step / every_ + 1) * every_;
  }

 private:
  std::int64_t every_;
  std::shared_ptr<const cohort::StopAtStepHook> stop_;  // its last step: the target
  std::int64_t per_step_;
  std::int64_t last_step_ = -1, next_ = 0;
  Clock::time_point last_time_;
};

// For the failure tests: one worker raises, or stops answering, at a given global step.
class FaultInjectionHook : public cohort::SessionRunHook {
 public:
  FaultInjectionHook(std::string kind, std::int64_t step) : kind_(std::move(kind)), step_(step) {}
  cohort::SessionRunArgs before_run(cohort::RunContext&) override { return {{"global_step"}}; }
  void after_run(cohort::RunContext&, const cohort::SessionRunValues& v) override {
    if (v.get("global_step") < static_cast<double>(step_)) return;
    if (kind_ == "raise") throw cohort::Error("injected failure at global step " + std::to_string(step_));
    // "stall": answers nothing more, but a stop signal still ends it (the session then stops).
    while (cohort::stop_signal_received() == 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }

 private:
  std::string kind_;
  std::int64_t step_;
};

// Flags that only some runs read, given (on the command line or in the environment, where a
// site's default may set them for every run) to one that does not: a line each, so that a
// setting that does nothing is not mistaken for one that does.
void warn_of_ignored_flags(cohort::Mode mode, int ps_tasks) {
  const std::string schedule = FLAGS_lr_schedule;
  const bool decays = schedule != "constant";
  const bool checkpoints = !FLAGS_checkpoint_dir.empty();
  const cohort::flags::Scope scoped[] = {
      {"staleness", mode == cohort::Mode::kSsp, "in ssp mode"},
      {"fusion_bytes", mode == cohort::Mode::kAllreduce && FLAGS_bucket_bytes == 0,
       "in allreduce mode without --bucket_bytes"},
      {"shared_memory_sums",
       mode == cohort::Mode::kAllreduce && FLAGS_bucket_bytes == 0 && FLAGS_compression == "none",
       "in allreduce mode without --bucket_bytes or --compression"},
      {"sync_batch_norm", FLAGS_model == "resnet" || FLAGS_model == "mobilenet",
       "by the models with batch normalisation (--model=resnet, mobilenet)"},
      {"hidden", FLAGS_model == "mlp", "by --model=mlp"},
      {"resnet_blocks", FLAGS_model == "resnet", "by --model=resnet"},
      {"lr_decay_rate", decays, "by a decaying --lr_schedule"},
      {"lr_decay_steps", decays && schedule != "piecewise", "by --lr_schedule=step, exponential, cosine or polynomial"},
      {"min_delta", FLAGS_patience > 0 || FLAGS_reduce_lr_patience > 0, "with --patience or --reduce_lr_patience"},
      {"reduce_lr_factor", FLAGS_reduce_lr_patience > 0, "with --reduce_lr_patience"},
      {"save_checkpoint_steps", checkpoints, "with --checkpoint_dir"},
      {"save_checkpoint_secs", checkpoints, "with --checkpoint_dir"},
      {"keep_checkpoint_max", checkpoints, "with --checkpoint_dir"},
      {"keep_checkpoint_every_n_hours", checkpoints, "with --checkpoint_dir"},
      {"summary_histograms", checkpoints || !FLAGS_summary_dir.empty(), "with --checkpoint_dir or --summary_dir"},
      {"placement_strategy", ps_tasks > 0, "with ps tasks"},
      {"max_shard_bytes", ps_tasks > 0, "with ps tasks"},
      {"inject_fault_task", !FLAGS_inject_fault.empty(), "with --inject_fault"},
      {"inject_fault_step", !FLAGS_inject_fault.empty(), "with --inject_fault"},
      {"tf32", FLAGS_device != "cpu", "with GPU towers (--device)"},
  };
  const std::string run = "--model=" + FLAGS_model + ", --mode=" + FLAGS_mode + ", --lr_schedule=" + schedule;
  for (const std::string& warning : cohort::flags::Registry::global().unread(scoped, run))
    std::fprintf(stderr, "%s\n", warning.c_str());
}

int Main(int argc, char** argv) {
  cohort::app::refuse_arguments(argc, argv);
  // From the start: Slurm's warning signal may come while the data is still loading.
  cohort::install_stop_signal_handlers();
  // Flags every rank checks alike, before any rank waits for another.
  const cohort::Mode mode = cohort::parse_mode(FLAGS_mode);
  const cohort::Compression compression = cohort::parse_compression(FLAGS_compression);
  if (compression != cohort::Compression::kNone && mode == cohort::Mode::kLocal)
    throw cohort::InvalidArgument("--compression=" + FLAGS_compression +
                                  ": the local mode sends no gradients");
  if (FLAGS_prefetch && mode != cohort::Mode::kAsync)
    throw cohort::InvalidArgument("--prefetch: async mode only (the " + FLAGS_mode +
                                  " mode's parameters must follow its wait)");
  if (FLAGS_bucket_bytes > 0 && mode == cohort::Mode::kLocal)
    throw cohort::InvalidArgument("--bucket_bytes=" + std::to_string(FLAGS_bucket_bytes) +
                                  ": the local mode sends no gradients");
  if (FLAGS_replicas_to_aggregate > 0 && mode != cohort::Mode::kSync)
    throw cohort::InvalidArgument("--replicas_to_aggregate=" +
                                  std::to_string(FLAGS_replicas_to_aggregate) +
                                  ": sync mode only (the " + FLAGS_mode + " mode aggregates none)");
  // Momentum settings another optimizer would ignore: a user of torch.optim.SGD(momentum=0.9)
  // writing --optimizer=sgd --momentum=0.9 means --optimizer=momentum.
  const cohort::flags::Registry& flags = cohort::flags::Registry::global();
  for (const char* flag : {"momentum", "nesterov"})
    if (flags.given(flag) && FLAGS_optimizer != "momentum" &&
        !(FLAGS_optimizer == "rmsprop" && std::string(flag) == "momentum"))
      throw cohort::InvalidArgument(std::string("--") + flag +
                                    ": the momentum optimizer only (this run's is --optimizer=" +
                                    FLAGS_optimizer + "; --optimizer=momentum is SGD with momentum)");
  if (FLAGS_lr_schedule == "piecewise" && FLAGS_lr_boundaries.empty())
    throw cohort::InvalidArgument("--lr_schedule=piecewise: needs --lr_boundaries, the steps where the rate falls");
  if (FLAGS_lr_schedule == "piecewise") {
    const std::vector<std::int64_t> boundaries =
        cohort::flags::parse_size_list("lr_boundaries", FLAGS_lr_boundaries, std::int64_t{1} << 50);
    for (std::size_t i = 1; i < boundaries.size(); ++i)
      if (boundaries[i] <= boundaries[i - 1])
        throw cohort::InvalidArgument("--lr_boundaries=" + FLAGS_lr_boundaries + ": the steps must increase (" +
                                      std::to_string(boundaries[i]) + " after " +
                                      std::to_string(boundaries[i - 1]) + ")");
  }
  if (FLAGS_lr_schedule != "piecewise" && !FLAGS_lr_boundaries.empty())
    throw cohort::InvalidArgument("--lr_boundaries=" + FLAGS_lr_boundaries +
                                  ": the piecewise schedule only (this run's is --lr_schedule=" +
                                  FLAGS_lr_schedule + ")");
  if (flags.given("epochs") && FLAGS_train_steps > 0)
    throw cohort::InvalidArgument("--epochs=" + std::to_string(FLAGS_epochs) + " with --train_steps=" +
                                  std::to_string(FLAGS_train_steps) +
                                  ": give one (a step count would win, and the epochs be ignored)");
  try {
    static_cast<void>(cohort::Graph().matching(FLAGS_trainable_vars, "variables to train"));
  } catch (const cohort::InvalidArgument& e) {
    throw cohort::InvalidArgument(std::string("--trainable_vars: ") + e.what());
  }
  const auto learning_rate_factors = lr_factors_from_flag();  // refused now, before any data is read
  if (!FLAGS_warm_start_vars.empty()) {
    if (FLAGS_warm_start_from.empty())
      throw cohort::InvalidArgument("--warm_start_vars=" + FLAGS_warm_start_vars +
                                    ": without --warm_start_from, there is no checkpoint to load them from");
    try {
      cohort::check_variable_pattern(FLAGS_warm_start_vars);
    } catch (const cohort::InvalidArgument& e) {
      throw cohort::InvalidArgument(std::string("--warm_start_vars: ") + e.what());
    }
  }
  // The optimizer and the model as the flags set them, made once here so that a typo in a name or
  // a value out of range fails at once, before the cluster forms and the data loads.
  cohort::Optimizer::create(optimizer_options(1, 1, 1));
  const auto hidden = cohort::flags::parse_size_list("hidden", FLAGS_hidden, 1 << 20);
  {
    cohort::Graph probe;
    model_from_flags(probe, hidden);
  }
  // Without --eval_only, training would start in its place: a new model, written into the
  // directory the checkpoint was to be read from.
  if (!FLAGS_eval_checkpoint.empty() && !FLAGS_eval_only)
    throw cohort::InvalidArgument("--eval_checkpoint=" + FLAGS_eval_checkpoint +
                                  ": read with --eval_only only (without it, this run would train)");
  if (FLAGS_eval_only) return cohort::train_app::evaluate_only(hidden);  // no cluster, no training
  const cohort::ClusterSpec cluster = cohort::cluster_from_flags();
  const int ps_tasks = cluster.num_tasks("ps");
  // The evaluations during training go to the summaries' eval directory, the evaluator's to
  // --checkpoint_dir's: not to one directory.
  const bool evaluator_writes_eval = cluster.num_tasks("evaluator") > 0 &&
      (FLAGS_summary_dir.empty() ||
       std::filesystem::weakly_canonical(FLAGS_summary_dir) == std::filesystem::weakly_canonical(FLAGS_checkpoint_dir));
  if (FLAGS_eval_every_steps > 0 && evaluator_writes_eval)
    throw cohort::InvalidArgument("--eval_every_steps=" + std::to_string(FLAGS_eval_every_steps) +
                                  " with an evaluator job: both would write the test set's summaries to " +
                                  "--checkpoint_dir's eval directory; give one, or a --summary_dir");
  cohort::Server server(cluster);
  if (server.is_chief()) warn_of_ignored_flags(mode, ps_tasks);
  // Allowed (benchmarks keep the same processes across modes), but rarely what a user meant.
  if (ps_tasks > 0 && (mode == cohort::Mode::kAllreduce || mode == cohort::Mode::kLocal) &&
      server.is_chief())
    std::fprintf(stderr,
                 "warning: --mode=%s with %d ps task%s: they hold no parameters and only wait "
                 "(the ps modes are sync, async and ssp)\n",
                 FLAGS_mode.c_str(), ps_tasks, ps_tasks == 1 ? "" : "s");
  const auto timeout = at_least_a_millisecond(FLAGS_wait_timeout_secs);
  if (server.job_name() == "ps") {
    // A ps serves the parameter store until every worker is done; it reports what that cost it.
    const auto begin = Clock::now();
    const double cpu_before = cohort::process_cpu_seconds();
    server.join();
    const double wall = std::chrono::duration<double>(Clock::now() - begin).count();
    const double cpu = cohort::process_cpu_seconds() - cpu_before;
    std::printf("%s served for %.1f s using %.2f s of CPU (%.1f%% of a core)\n",
                server.task().to_string().c_str(), wall, cpu, 100.0 * cpu / std::max(wall, 1e-9));
    return 0;
  }
  if (server.job_name() == "evaluator") {
    // Follows the chief's checkpoints and evaluates each on the test set as it appears.
    cohort::Graph graph;
    cohort::Model model = model_from_flags(graph, hidden);
    const auto evaluations = cohort::run_evaluator(
        server, model, cohort::data::fashion_mnist(cohort::data::Split::kTest),
        {.checkpoint_dir = FLAGS_checkpoint_dir, .image = image_options(),
         .moving_averages = FLAGS_moving_average_decay > 0});
    std::printf("%s: %zu checkpoint%s evaluated\n", server.task().to_string().c_str(),
                evaluations.size(), evaluations.size() == 1 ? "" : "s");
    return 0;
  }

  // The replicas: the chief job's task (if any) and the workers.
  const int workers = server.num_replicas();
  if (mode == cohort::Mode::kLocal && workers > 1)
    throw cohort::InvalidArgument("--mode=local trains in one process; this job has " +
                                  std::to_string(workers) + " workers");
  if ((FLAGS_patience > 0 || FLAGS_reduce_lr_patience > 0) && FLAGS_eval_every_steps == 0)
    throw cohort::InvalidArgument("--patience and --reduce_lr_patience count evaluations without "
                                  "improvement: give --eval_every_steps too");
  if (!FLAGS_inject_fault.empty() && FLAGS_inject_fault_task >= workers)
    throw cohort::InvalidArgument("--inject_fault_task=" + std::to_string(FLAGS_inject_fault_task) +
                                  ": this job has " + std::to_string(workers) + " workers");
  // --metrics_json is written at the end: a file that cannot be is said at the start.
  if (server.is_chief() && !FLAGS_metrics_json.empty()) cohort::check_writable(FLAGS_metrics_json, "--metrics_json");
  cohort::set_intra_op_threads(static_cast<int>(FLAGS_threads));

  // Every worker reads its shard of the training set alone: 1/workers of the examples.
  const auto shard =
      cohort::data::fashion_mnist(cohort::data::Split::kTrain, {server.replica_index(), workers});
  std::int64_t train_examples = shard.size();
  server.replicas().allreduce(std::span(&train_examples, 1));

  // Collective over the replicas (their node-local ranks share out the GPUs).
  const std::vector<int> gpus = [&] {
    try {
      return cohort::worker_gpus(cohort::parse_compute_device(FLAGS_device),
                                 static_cast<int>(FLAGS_towers), server.replicas());
    } catch (const cohort::InvalidArgument& e) {
      throw cohort::InvalidArgument("--device=" + FLAGS_device + ": " + e.what());
    }
  }();
  cohort::DeviceSpec compute = cohort::DeviceSpec::parse(server.worker_device());
  if (!gpus.empty()) {
    compute.device_type = "GPU";
    compute.device_index = gpus.front();
    std::string list;
    for (int g : gpus) list += (list.empty() ? "" : ",") + std::to_string(g);
    std::printf("%s: %d tower%s on GPU %s\n", server.task().to_string().c_str(),
                static_cast<int>(gpus.size()), gpus.size() == 1 ? "" : "s", list.c_str());
  }
  auto placement = cohort::replica_device_setter_options_from_flags(ps_tasks,
                                                                    compute.to_string());
  const bool log_placement = placement.log_device_placement;
  placement.log_device_placement = false;  // the session prints the whole table instead
  cohort::Graph graph{cohort::ReplicaDeviceSetter(placement)};
  cohort::TrainerOptions options;
  options.batch_size = FLAGS_batch_size;
  options.towers = static_cast<int>(FLAGS_towers);
  options.accumulation_steps = static_cast<int>(FLAGS_accumulation_steps);
  options.gpus = gpus;
  options.allow_tf32 = FLAGS_tf32;
  options.seed = static_cast<std::uint64_t>(FLAGS_seed);
  options.replication.mode = mode;
  options.replication.replicas_to_aggregate = FLAGS_replicas_to_aggregate;
  options.replication.staleness = FLAGS_staleness;
  options.replication.fusion_bytes = FLAGS_fusion_bytes;
  options.replication.compression = compression;
  options.replication.bucket_bytes = FLAGS_bucket_bytes;
  options.replication.shared_memory_sums = FLAGS_shared_memory_sums;
  options.replication.prefetch = FLAGS_prefetch;
  options.replication.wait_timeout = timeout;
  options.replication.stall_timeout = at_least_a_millisecond(FLAGS_stall_timeout_secs);
  options.model_name = FLAGS_model;
  options.trainable_vars = FLAGS_trainable_vars;
  options.learning_rate_factors = learning_rate_factors;
  options.image = image_options();
  // Only where a model has batch normalisation (elsewhere the flag is warned of as unread).
  options.sync_batch_norm = FLAGS_sync_batch_norm && (FLAGS_model == "resnet" || FLAGS_model == "mobilenet");
  options.moving_average_decay = FLAGS_moving_average_decay;

  // Epochs are counted globally: a global step consumes this many examples.
  const std::int64_t per_step = options.examples_per_global_step(workers);
  // Epochs count examples: a job resumed from a checkpoint written at another global batch
  // (other workers, batch size or accumulation) plans the rest of them in this run's steps, its
  // learning-rate schedule included.
  const cohort::ResumePoint resumed =
      FLAGS_train_steps > 0 ? cohort::ResumePoint{} : cohort::resume_point(server, FLAGS_checkpoint_dir, options);
  const std::int64_t target = FLAGS_train_steps > 0
                                  ? FLAGS_train_steps
                                  : options.steps_for_epochs(FLAGS_epochs, train_examples, workers, resumed);
  if (server.is_chief() && resumed.examples != resumed.global_step * per_step)
    std::printf("the rest of %lld epochs after the checkpoint's %lld examples: to global step %lld, at %lld examples a step\n",
                static_cast<long long>(FLAGS_epochs), static_cast<long long>(resumed.examples),
                static_cast<long long>(target), static_cast<long long>(per_step));
  if (FLAGS_lr_warmup_steps > 0 && FLAGS_lr_warmup_steps >= target)
    throw cohort::InvalidArgument("--lr_warmup_steps=" + std::to_string(FLAGS_lr_warmup_steps) +
                                  " is not shorter than the run's " + std::to_string(target) +
                                  " global steps: the rate would never reach its peak");
  const cohort::OptimizerOptions optimizer = optimizer_options(
      target, per_step / FLAGS_batch_size, (train_examples + per_step - 1) / per_step);
  cohort::Trainer trainer(
      &server, graph, [&](cohort::Graph& g) { return model_from_flags(g, hidden); }, shard,
      cohort::Optimizer::create(optimizer), options);

  const bool chief = server.is_chief();
  // The test set: every replica's part, for the final evaluation and, in allreduce mode, the
  // evaluations during training, which they share out; in the other modes the chief's whole, for
  // the evaluations during training, which it makes alone.
  const bool shared_evaluations = mode == cohort::Mode::kAllreduce;
  const auto test_data = chief && FLAGS_eval_every_steps > 0 && !shared_evaluations
                             ? cohort::data::fashion_mnist(cohort::data::Split::kTest)
                             : cohort::data::Dataset();
  const auto test_part = cohort::data::fashion_mnist(cohort::data::Split::kTest,
                                                     {server.replica_index(), workers});
  char smoothing[48] = "";
  if (FLAGS_label_smoothing != 0.0)
    std::snprintf(smoothing, sizeof smoothing, ", label smoothing %g", FLAGS_label_smoothing);
  if (chief) std::printf("Cohort %s\n", cohort::version());
  if (chief)
    std::printf("training %s (%lld parameters%s), mode %s, %d worker%s, batch %lld per worker%s, %lld global steps\n",
                FLAGS_model.c_str(), static_cast<long long>(graph.num_parameters()),
                smoothing,
                cohort::to_string(mode), workers, workers == 1 ? "" : "s",
                static_cast<long long>(FLAGS_batch_size),
                FLAGS_accumulation_steps > 1
                    ? (" (" + std::to_string(FLAGS_accumulation_steps) + " accumulated a step)").c_str()
                    : "",
                static_cast<long long>(target));
  if (chief) std::printf("CPU kernels %s\n", cohort::kernel_level_summary().c_str());
  if (chief && !server.memory_transport().empty())
    std::printf("parameters on the ps tasks: %s\n", server.memory_transport().c_str());
  if (chief && compression != cohort::Compression::kNone)
    std::printf("gradients on the wire as %s, with error feedback\n", cohort::to_string(compression));
  if (chief)
    std::printf("%s, learning rate %g (%s), %s schedule, warm-up %lld steps%s\n",
                cohort::describe(optimizer).c_str(),
                optimizer.learning_rate.base,
                optimizer.learning_rate.base == FLAGS_learning_rate
                    ? "as given"
                    : ("--learning_rate times " + std::to_string(per_step / FLAGS_batch_size) +
                       " batches a step").c_str(),
                FLAGS_lr_schedule.c_str(), static_cast<long long>(optimizer.learning_rate.warmup_steps),
                optimizer.learning_rate.warmup_from > 0 ? " from --learning_rate" : "");
  if (chief && !FLAGS_lr_factors.empty()) {
    std::string factors;
    for (const auto& [pattern, factor] : options.learning_rate_factors) {
      char text[32];
      std::snprintf(text, sizeof text, " %g", factor);
      factors += (factors.empty() ? "" : ", ") + pattern + text;
    }
    std::printf("learning-rate factors: %s (the others 1)\n", factors.c_str());
  }
  if (chief && FLAGS_moving_average_decay > 0)
    std::printf("evaluated on the moving averages of the parameters, decay %g\n",
                FLAGS_moving_average_decay);

  cohort::SessionOptions session_options;
  session_options.master = server.target();
  session_options.is_chief = chief;
  session_options.checkpoint_dir = FLAGS_checkpoint_dir;
  session_options.save_checkpoint_steps = FLAGS_save_checkpoint_steps;
  session_options.save_checkpoint_secs = FLAGS_save_checkpoint_secs;
  session_options.save_summaries_steps = FLAGS_save_summaries_steps;
  session_options.summary_dir = FLAGS_summary_dir;
  session_options.summary_histograms = FLAGS_summary_histograms;
  session_options.warm_start_from = FLAGS_warm_start_from;
  session_options.warm_start_vars = FLAGS_warm_start_vars;
  session_options.log_step_count_steps = 0;  // the progress hook below says it
  session_options.keep_checkpoint_max = static_cast<int>(FLAGS_keep_checkpoint_max);
  session_options.keep_checkpoint_every_n_hours = FLAGS_keep_checkpoint_every_n_hours;
  session_options.max_wait_secs =
      std::chrono::seconds(static_cast<std::int64_t>(std::ceil(FLAGS_wait_timeout_secs)));
  session_options.config.log_device_placement = log_placement;
  // What the parameters mean beyond their shapes: a resume without the images' standardisation
  // would train on from parameters made for other inputs.
  session_options.settings = {{"--normalize", FLAGS_normalize ? "true" : "false"}};
  // Epochs count examples: a job resumed with other workers or another batch size trains the
  // rest of them, in its own steps.
  const auto stop = FLAGS_train_steps > 0 ? cohort::StopAtStepHook::last(target)
                                          : cohort::StopAtStepHook::after_examples(FLAGS_epochs * train_examples);
  session_options.hooks.push_back(stop);
  // A diverged run (a NaN loss, on any worker) stops with an error rather than train on.
  session_options.hooks.push_back(std::make_shared<cohort::NanTensorHook>());
  if (!FLAGS_profile_file.empty())
    session_options.hooks.push_back(std::make_shared<cohort::ProfilerHook>(
        cohort::ProfilerHookOptions{.every_n_steps = 1, .output_file = FLAGS_profile_file}));
  if (!FLAGS_inject_fault.empty() && server.replica_index() == FLAGS_inject_fault_task)
    session_options.hooks.push_back(std::make_shared<FaultInjectionHook>(FLAGS_inject_fault, FLAGS_inject_fault_step));
  if (FLAGS_log_every_steps > 0)
    session_options.chief_only_hooks.push_back(std::make_shared<ProgressHook>(FLAGS_log_every_steps, stop, per_step));
  std::shared_ptr<cohort::ValidationHook> validation;
  if (FLAGS_eval_every_steps > 0 && (shared_evaluations || chief)) {
    validation = std::make_shared<cohort::ValidationHook>(cohort::ValidationHookOptions{
        .data = shared_evaluations ? test_part : test_data, .every_steps = FLAGS_eval_every_steps,
        .at_end = false, .min_delta = FLAGS_min_delta, .patience = FLAGS_patience,
        .reduce_lr_factor = FLAGS_reduce_lr_patience > 0 ? FLAGS_reduce_lr_factor : 0.0,
        .reduce_lr_patience = FLAGS_reduce_lr_patience, .shared = shared_evaluations});
    (shared_evaluations ? session_options.hooks : session_options.chief_only_hooks).push_back(validation);
  }

  auto session = cohort::MonitoredTrainingSession(trainer, session_options);
  const std::int64_t first_step = trainer.global_step();
  // Where this session's points of the eval run start (the ValidationHook's rule): after the
  // checkpoint restored, even where async workers have moved the count on since.
  const std::int64_t session_start = session->restored_step().value_or(0) + 1;
  const std::int64_t last_step = stop->last_step().value_or(target);
  if (chief && first_step >= last_step)
    std::printf("restored at global step %lld, at or past the last step, %lld: nothing left to train\n",
                static_cast<long long>(first_step), static_cast<long long>(last_step));
  const auto start = Clock::now();
  while (!session->should_stop()) session->run();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (const int signal = cohort::stop_signal_received(); signal != 0 && chief)
    std::printf("stopped by signal %d at global step %lld\n", signal, static_cast<long long>(trainer.global_step()));
  // The examples that reached the parameters (a sync worker that left early adds none after it).
  const std::int64_t examples = trainer.examples_trained();
  const double images_per_sec = static_cast<double>(examples) / seconds;
  const std::string stats = trainer.stats();
  const std::int64_t dropped = trainer.dropped_gradients();
  const std::int64_t gradient_bytes = trainer.gradient_bytes_sent();
  // The final checkpoint and the final parameters (close()) before anything slow: after a signal,
  // Slurm's kill follows within seconds.
  session->close();
  server.done();
  // The store's count with the final parameters, as the final checkpoint's (in the async modes
  // other workers' last pushes may have moved it past this worker's own last step; a push still
  // on its way then, at most one a worker, lands after the snapshot).
  const std::int64_t final_step = trainer.read_global_step();

  const auto m = trainer.evaluate_across(test_part);
  // The counters are each worker's own; the job's, for the record.
  std::array<std::int64_t, 2> totals = {dropped, gradient_bytes};
  if (workers > 1) {
    const cohort::StallWatch watch("the workers' counters");
    server.replicas().allreduce(std::span<std::int64_t>(totals));
  }
  if (chief) {
    std::printf("final: global step %lld, test accuracy %.4f, test loss %.4f, %.0f images/s, %s%s%s%s\n",
                static_cast<long long>(final_step), m.accuracy, m.loss, images_per_sec,
                duration(seconds).c_str(), stats.empty() ? "" : ", ",
                stats.empty() || workers == 1 ? "" : "the chief's own: ", stats.c_str());
    if (!FLAGS_metrics_json.empty()) {
      const nlohmann::json metrics = {
          {"eval_only", false},  // --eval_only's file says true
          {"global_step", final_step}, {"train_steps", last_step},
          // A run that ended before train_steps: the signal that stopped it (0: none).
          {"stop_signal", cohort::stop_signal_received()},
          // A run --patience ended before train_steps.
          {"stopped_early", validation != nullptr && validation->stopped()},
          {"test_accuracy", m.accuracy},
          {"test_loss", m.loss}, {"train_images_per_sec", images_per_sec},
          {"train_examples", examples},
          {"wall_seconds", seconds}, {"cohort_version", cohort::version()}, {"model", FLAGS_model}, {"mode", FLAGS_mode},
          {"workers", workers}, {"ps_tasks", ps_tasks},
          {"batch_size", FLAGS_batch_size}, {"towers", FLAGS_towers}, {"device", FLAGS_device},
          // The peak rate, after --lr_scaling (flags.learning_rate: the flag's, one batch's).
          {"optimizer", cohort::describe(optimizer)}, {"learning_rate", optimizer.learning_rate.base},
          {"lr_schedule", FLAGS_lr_schedule}, {"label_smoothing", FLAGS_label_smoothing},
          {"moving_average_decay", FLAGS_moving_average_decay},
          {"dropped_gradients", dropped}, {"compression", FLAGS_compression},
          {"gradient_bytes_sent", gradient_bytes},  // the chief's own, as the final line's
          {"dropped_gradients_all_workers", totals[0]},
          {"gradient_bytes_sent_all_workers", totals[1]},
          // Every flag's value (the chief's), and which were given: a sweep's runs told apart.
          {"flags", cohort::train_app::flag_values_json()},
          {"flags_given", cohort::train_app::flags_given_json()}};
      cohort::train_app::write_metrics_json(metrics);
    }
  }
  // The final evaluation joins the eval run the ValidationHook writes, as TensorFlow's
  // train_and_evaluate writes its last: once, and not where an evaluator job writes (it
  // evaluates the final checkpoint itself).
  const std::string summaries = FLAGS_summary_dir.empty() ? FLAGS_checkpoint_dir : FLAGS_summary_dir;
  if (chief && !summaries.empty() && !evaluator_writes_eval)
    cohort::write_final_evaluation(summaries + "/eval", final_step, trainer.model().metric_names(), m,
                                   cohort::last_evaluated_step(validation.get()), session_start);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return cohort::app::Run(Main, argc, argv); }
