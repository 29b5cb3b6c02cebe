// The trainer's checkpoints: what one records (the variables, the optimizer's slots, the moving
// averages, and the counts a resume needs), restoring one, a warm start, and where a session
// with a checkpoint directory will resume (resume_point()).
#include "cohort/core/train/trainer.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <span>
#include <string>

#include "cohort/core/base/error.h"
#include "cohort/core/base/stall_watch.h"
#include "cohort/core/dist/server.h"
#include "cohort/core/io/checkpoint.h"
#include "cohort/core/io/saver.h"

namespace cohort {
namespace {

// The examples a checkpoint's steps held (Trainer::examples_at's count); one that counts none
// held `per_step` examples a step (this run's), but for the batches it accumulated, which it
// names where there were several (this run accumulates `accumulation`); none where it names
// neither. CheckpointError for a count that is not one.
std::optional<std::int64_t> examples_written(const Checkpoint& checkpoint, std::int64_t per_step,
                                             int accumulation) {
  const auto count = [&](const char* key) -> std::optional<long long> {
    const auto written = checkpoint.metadata.find(key);
    if (written == checkpoint.metadata.end()) return std::nullopt;
    char* end = nullptr;
    errno = 0;
    const long long n = std::strtoll(written->second.c_str(), &end, 10);
    if (end == written->second.c_str() || *end != '\0' || n < 0 || errno == ERANGE)
      throw CheckpointError("the checkpoint at global step " + std::to_string(checkpoint.global_step()) +
                            " has " + key + " '" + written->second + "', not a count",
                            kInputStatus);
    return n;
  };
  if (const auto n = count("examples")) return *n;
  if (const auto accumulated = count("accumulation_steps"))
    return checkpoint.global_step() * (per_step / accumulation) * *accumulated;
  return std::nullopt;
}

// `value` as text that reads back exactly.
std::string exactly(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

}  // namespace

Checkpoint Trainer::checkpoint() {
  // The store's count: in the async modes other replicas' pushes have moved it past this
  // replica's last step. Read before the parameters, which then hold at least those pushes (a
  // push landing in between is kept, and a restart repeats its step rather than skip one).
  const std::int64_t step = read_global_step();
  fetch_parameters();
  Checkpoint checkpoint = make_checkpoint(graph_, *optimizer_);
  checkpoint.metadata["global_step"] = std::to_string(step);
  checkpoint.metadata["model"] = options_.model_name;
  checkpoint.metadata["mode"] = to_string(options_.replication.mode);
  checkpoint.metadata["optimizer"] = optimizer_->options().name;
  if (const double scale = learning_rate_scale(); scale != 1)
    checkpoint.metadata["learning_rate_scale"] = exactly(scale);
  // The schedule's rate where the checkpoint stands: a resume under another schedule is told.
  checkpoint.metadata["learning_rate"] = exactly(optimizer_->options().learning_rate.at(step));
  // The optimizer's other settings (momentum, betas, weight decay, clipping): a resume under
  // others is told.
  checkpoint.metadata["optimizer_settings"] = describe(optimizer_->options());
  // What a resume's data position and epochs count, whatever examples a step then takes.
  checkpoint.metadata["examples"] = std::to_string(examples_at(step));
  if (has_average()) add_moving_averages(checkpoint, graph_, average_->values());
  return checkpoint;
}

namespace {

// Runs `load`; a CheckpointError it throws for another model's checkpoint says so first, before
// the variables that differ.
template <typename Load>
void load_naming_the_model(const Checkpoint& checkpoint, const std::string& model, Load&& load) {
  try {
    load();
  } catch (const CheckpointError& e) {
    const auto written = checkpoint.metadata.find("model");
    if (written != checkpoint.metadata.end() && !model.empty() && written->second != model)
      throw CheckpointError("it was written by model '" + written->second + "', and this one is '" +
                                model + "': " + e.what(),
                            e.exit_status());
    throw;
  }
}

}  // namespace

void Trainer::restore(const Checkpoint& checkpoint) {
  const std::optional<std::int64_t> examples =
      examples_written(checkpoint, examples_per_global_step(), options_.accumulation_steps);
  const auto scale = checkpoint.metadata.find("learning_rate_scale");
  double factor = 1;
  if (scale != checkpoint.metadata.end()) {
    char* end = nullptr;
    factor = std::strtod(scale->second.c_str(), &end);
    if (end == scale->second.c_str() || *end != '\0' || !(factor > 0 && factor <= 1))
      throw CheckpointError("the checkpoint at global step " + std::to_string(checkpoint.global_step()) +
                            " has learning_rate_scale '" + scale->second + "', not a factor in (0, 1]",
                            kInputStatus);
  }
  load_naming_the_model(checkpoint, options_.model_name,
                        [&] { restore_checkpoint(checkpoint, graph_, *optimizer_); });
  has_parameters_ = true;
  restored_examples_ = examples;
  set_learning_rate_scale(factor);
  warn_of_another_schedule(checkpoint);
  warn_of_other_settings(checkpoint);
  if (average_) {
    // Averages from a checkpoint written without them start at its variables (in start()).
    std::vector<float> averages(graph_.values().size());
    average_restored_ = restore_moving_averages(checkpoint, graph_, averages);
    if (average_restored_) average_->reset(averages);
  }
}

void Trainer::warn_of_another_schedule(const Checkpoint& checkpoint) const {
  const auto saved = checkpoint.metadata.find("learning_rate");
  if (saved == checkpoint.metadata.end()) return;
  char* end = nullptr;
  const double theirs = std::strtod(saved->second.c_str(), &end);
  const std::int64_t step = checkpoint.global_step();
  const double ours = optimizer_->options().learning_rate.at(step);
  if (end == saved->second.c_str() || !std::isfinite(theirs) ||
      std::abs(ours - theirs) <= 1e-6 * std::max(std::abs(ours), std::abs(theirs)))
    return;
  std::fprintf(stderr,
               "[%s] warning: the learning rate at global step %lld was %.3g when the checkpoint "
               "was written, and this run's schedule has %.3g there: training goes on at this "
               "run's rates (a warm-up or decay whose length follows the run's steps changes with "
               "them, unless its length is fixed, as train's --lr_warmup_steps and --lr_decay_steps "
               "fix it; a rate scaled by the workers, with their number)\n",
               process_label().c_str(), static_cast<long long>(step), theirs, ours);
  std::fflush(stderr);
}

void Trainer::warn_of_other_settings(const Checkpoint& checkpoint) const {
  const auto step = static_cast<long long>(checkpoint.global_step());
  const auto saved = checkpoint.metadata.find("optimizer_settings");
  const std::string ours = describe(optimizer_->options());
  if (saved != checkpoint.metadata.end() && saved->second != ours)
    std::fprintf(stderr,
                 "[%s] warning: the checkpoint at global step %lld was written training with %s; "
                 "training goes on with this run's %s\n",
                 process_label().c_str(), step, saved->second.c_str(), ours.c_str());
  if (options_.moving_average_decay == 0 && holds_moving_averages(checkpoint))
    std::fprintf(stderr,
                 "[%s] warning: the checkpoint at global step %lld holds moving averages of the "
                 "parameters, which this run, without a moving-average decay, neither keeps nor "
                 "evaluates: it trains and evaluates the parameters themselves, and its "
                 "checkpoints drop the averages (train's --moving_average_decay keeps them)\n",
                 process_label().c_str(), step);
  std::fflush(stderr);
}

void Trainer::load_parameters(const Checkpoint& checkpoint) {
  if (!left_)
    throw InvalidArgument("Trainer::load_parameters: after finish() (training would overwrite the "
                          "parameters it loads)");
  load_naming_the_model(checkpoint, options_.model_name, [&] { restore_variables(checkpoint, graph_); });
  has_parameters_ = true;
  if (average_) {
    // A checkpoint without averages: its variables are what evaluate() sees.
    std::vector<float> averages(graph_.values().begin(), graph_.values().end());
    restore_moving_averages(checkpoint, graph_, averages);
    average_->reset(averages);
  }
}

std::size_t Trainer::warm_start(const Checkpoint& checkpoint, const std::string& vars) {
  std::size_t loaded = graph_.variables().size();
  if (vars.empty()) {
    load_naming_the_model(checkpoint, options_.model_name, [&] { restore_variables(checkpoint, graph_); });
  } else {
    graph_.initialize(options_.seed);  // the variables not selected start as without a warm start
    load_naming_the_model(checkpoint, options_.model_name,
                          [&] { loaded = restore_variables_matching(checkpoint, graph_, vars); });
  }
  if (holds_moving_averages(checkpoint)) {
    std::fprintf(stderr,
                 "[%s] warning: the warm start takes the checkpoint's parameters themselves, not "
                 "the moving averages of them it also holds (which its own evaluations scored)\n",
                 process_label().c_str());
    std::fflush(stderr);
  }
  has_parameters_ = true;
  optimizer_->reset();
  set_learning_rate_scale(1);  // the warm start's training starts afresh
  average_restored_ = false;   // and its averages from the variables it starts from
  restored_examples_.reset();  // and its count from 0
  return loaded;
}

ResumePoint resume_point(const Server& server, const std::string& checkpoint_dir,
                         const TrainerOptions& options) {
  std::array<std::int64_t, 2> point = {0, 0};
  if (server.is_chief() && !checkpoint_dir.empty()) {
    try {
      if (std::filesystem::is_directory(checkpoint_dir)) {
        if (const auto path = CheckpointManager(checkpoint_dir, 0).latest_path()) {
          const Checkpoint header = read_checkpoint_header(*path);
          const std::int64_t step = header.global_step();
          const std::int64_t per_step = options.examples_per_global_step(server.num_replicas());
          point = {step, examples_written(header, per_step, options.accumulation_steps).value_or(step * per_step)};
        }
      }
    } catch (const std::exception&) {
      point = {0, 0};  // the session's restore says what is wrong
    }
  }
  if (server.num_replicas() > 1) {
    const StallWatch watch("the chief's word on where training resumes");
    server.replicas().bcast(std::span<std::int64_t>(point), 0);
  }
  return {point[0], point[1]};
}

}  // namespace cohort
