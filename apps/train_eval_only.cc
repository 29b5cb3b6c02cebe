#include "train_eval_only.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "cohort/core/base/error.h"
#include "cohort/core/base/flags.h"
#include "cohort/core/base/version.h"
#include "cohort/core/io/checkpoint.h"
#include "cohort/core/io/results_file.h"
#include "cohort/core/io/safetensors.h"
#include "cohort/core/io/saver.h"
#include "cohort/core/nn/data/dataset.h"
#include "cohort/core/nn/evaluation.h"
#include "cohort/core/nn/threads.h"
#include "cohort/mpi/comm.h"
#include "train_common.h"

COHORT_DECLARE_string(checkpoint_dir);
COHORT_DECLARE_string(eval_checkpoint);
COHORT_DECLARE_string(model);
COHORT_DECLARE_bool(normalize);
COHORT_DECLARE_float(moving_average_decay);
COHORT_DECLARE_int(seed);
COHORT_DECLARE_int(threads);
COHORT_DECLARE_string(device);
COHORT_DECLARE_string(warm_start_from);
COHORT_DECLARE_string(metrics_json);

namespace cohort::train_app {
namespace {

// The checkpoint to evaluate: --eval_checkpoint, else the file --checkpoint_dir's index names
// latest. Not CheckpointManager::restore_latest(), which falls back to an older file when the
// latest is damaged: an evaluation of another step than the one asked for, in a sweep's table,
// would pass for it.
std::string checkpoint_to_evaluate() {
  if (!FLAGS_eval_checkpoint.empty()) {
    std::error_code ec;
    if (std::filesystem::is_directory(FLAGS_eval_checkpoint, ec))
      throw InvalidArgument("--eval_checkpoint=" + FLAGS_eval_checkpoint +
                            ": a directory; give it as --checkpoint_dir (its latest checkpoint), or name one of its files");
    return FLAGS_eval_checkpoint;
  }
  if (FLAGS_checkpoint_dir.empty())
    throw InvalidArgument("--eval_only: give --checkpoint_dir (its latest checkpoint is evaluated) or --eval_checkpoint");
  const std::string dir = "--checkpoint_dir=" + FLAGS_checkpoint_dir;
  std::error_code ec;
  if (!std::filesystem::exists(FLAGS_checkpoint_dir, ec))
    throw InvalidArgument("--eval_only: " + dir + ": no such directory, so no checkpoint to evaluate");
  const CheckpointManager checkpoints(FLAGS_checkpoint_dir);  // reads; creates nothing, locks nothing
  if (const std::optional<std::string> latest = checkpoints.latest_path()) return *latest;
  // No index: files a job wrote before it was killed, if any, are the user's to choose from.
  for (const auto& entry : std::filesystem::directory_iterator(FLAGS_checkpoint_dir, ec))
    if (CheckpointManager::step_of(entry.path().filename().string()))
      throw InvalidArgument("--eval_only: " + dir + " has checkpoint files but no index naming the latest: give one as --eval_checkpoint");
  throw InvalidArgument("--eval_only: " + dir + " holds no checkpoint");
}

}  // namespace

int evaluate_only(const std::vector<std::int64_t>& hidden) {
  // One process evaluates: ranks beside it would have nothing to do, and a job launched with
  // several by habit (a batch script's mpirun) is told so by every rank alike, at once.
  if (const int ranks = mpi::Comm::world().size(); ranks > 1)
    throw InvalidArgument("--eval_only evaluates in one process, and this job has " + std::to_string(ranks) +
                          " ranks: run it without mpirun, or with -np 1");
  if (!FLAGS_warm_start_from.empty())
    throw InvalidArgument("--warm_start_from with --eval_only: the checkpoint evaluated is --eval_checkpoint, "
                          "or --checkpoint_dir's latest");
  if (!FLAGS_metrics_json.empty()) check_writable(FLAGS_metrics_json, "--metrics_json");
  if (FLAGS_device != "cpu")
    std::fprintf(stderr, "warning: --device=%s: --eval_only evaluates on the CPU\n", FLAGS_device.c_str());
  const auto start = std::chrono::steady_clock::now();
  const std::string path = checkpoint_to_evaluate();
  const Checkpoint checkpoint = read_checkpoint(path);  // a damaged file throws, naming it
  // As a session's restore: parameters made for other inputs are refused.
  const std::string normalize = FLAGS_normalize ? "true" : "false";
  if (const auto saved = checkpoint.metadata.find("settings/--normalize");
      saved != checkpoint.metadata.end() && saved->second != normalize)
    throw InvalidArgument(path + ": its parameters were trained with --normalize=" + saved->second +
                          ", this job has --normalize=" + normalize + ": give the same");
  const std::int64_t step = checkpoint.global_step();

  Graph graph;
  Model model = model_from_flags(graph, hidden);
  graph.initialize(static_cast<std::uint64_t>(FLAGS_seed));
  const bool holds_averages = holds_moving_averages(checkpoint);
  const bool averages = FLAGS_moving_average_decay > 0 && holds_averages;
  try {
    restore_variables(checkpoint, graph, averages);
  } catch (const CheckpointError& e) {
    const auto written = checkpoint.metadata.find("model");
    if (written != checkpoint.metadata.end() && written->second != FLAGS_model)
      throw CheckpointError(path + ": it was written by model '" + written->second + "', and this one is '" +
                                FLAGS_model + "': " + e.what(),
                            e.exit_status());
    throw CheckpointError(path + ": " + e.what(), e.exit_status());
  }
  if (FLAGS_moving_average_decay > 0 && !holds_averages)
    std::fprintf(stderr, "warning: %s holds no moving averages: evaluating its variables\n", path.c_str());
  if (FLAGS_moving_average_decay == 0 && holds_averages)
    std::fprintf(stderr,
                 "warning: %s holds moving averages of the parameters: evaluating its variables, as "
                 "--moving_average_decay=0 says (give the training's decay to evaluate the averages)\n",
                 path.c_str());

  set_intra_op_threads(static_cast<int>(FLAGS_threads));
  const data::Dataset test = data::fashion_mnist(data::Split::kTest);
  std::printf("Cohort %s\n", version());
  std::printf("evaluating %s (%lld parameters) from %s, global step %lld%s\n", FLAGS_model.c_str(),
              static_cast<long long>(graph.num_parameters()), path.c_str(), static_cast<long long>(step),
              averages ? ", on its moving averages of the parameters" : "");
  // Training's final evaluation: Trainer::evaluate's batches and normalisation.
  const StepMetrics m = evaluate_dataset(model, test, /*batch_size=*/1000, image_options());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("final: global step %lld, test accuracy %.4f, test loss %.4f, evaluation only, %lld images in %s\n",
              static_cast<long long>(step), m.accuracy, m.loss, static_cast<long long>(test.size()),
              duration(seconds).c_str());
  if (!FLAGS_metrics_json.empty())
    write_metrics_json({{"eval_only", true}, {"checkpoint", path}, {"global_step", step},
                        {"test_accuracy", m.accuracy}, {"test_loss", m.loss}, {"test_examples", test.size()},
                        {"moving_averages", averages}, {"wall_seconds", seconds},
                        {"cohort_version", version()}, {"model", FLAGS_model},
                        {"flags", flag_values_json()}, {"flags_given", flags_given_json()}});
  return 0;
}

}  // namespace cohort::train_app
