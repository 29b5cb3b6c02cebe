#include "cohort/core/train/evaluator.h"

#include <cstdio>
#include <thread>

#include "cohort/core/io/checkpoint.h"
#include "cohort/core/io/saver.h"
#include "cohort/core/io/summary_writer.h"
#include "cohort/core/nn/evaluation.h"

namespace cohort {

std::vector<Evaluation> run_evaluator(Server& server, Model& model, const data::Dataset& data,
                                      const EvaluatorOptions& options) {
  if (options.checkpoint_dir.empty())
    throw InvalidArgument(server.task().to_string() +
                          " follows the chief's checkpoints: give it --checkpoint_dir");
  if (server.is_computing())
    throw InvalidArgument("run_evaluator: " + server.task().to_string() +
                          " is a computing task, not an evaluator");
  const CheckpointManager checkpoints(options.checkpoint_dir, /*keep_checkpoint_max=*/0);
  SummaryWriter summaries(options.output_dir.empty() ? options.checkpoint_dir + "/eval"
                                                     : options.output_dir);
  const std::string me = server.task().to_string();
  std::vector<Evaluation> done;
  std::string last;
  for (;;) {
    // Asked before the index is read: once every replica is done, the chief's final checkpoint
    // is in the index.
    const bool finished = server.training_done();
    const std::optional<std::string> latest = checkpoints.latest_path();
    if (latest && *latest != last) {
      const Checkpoint checkpoint = read_checkpoint(*latest);
      restore_variables(checkpoint, model.graph());
      Evaluation evaluation{*latest, checkpoint.global_step(),
                            evaluate_dataset(model, data, options.batch_size, options.image)};
      summaries.add_scalars({{"eval/loss", evaluation.metrics.loss},
                             {"eval/accuracy", evaluation.metrics.accuracy}},
                            evaluation.global_step);
      summaries.flush();
      std::printf("%s evaluated global step %lld: test accuracy %.4f, test loss %.4f\n",
                  me.c_str(), static_cast<long long>(evaluation.global_step),
                  evaluation.metrics.accuracy, evaluation.metrics.loss);
      std::fflush(stdout);
      done.push_back(std::move(evaluation));
      last = *latest;
    }
    if (finished) break;
    std::this_thread::sleep_for(options.poll);
  }
  server.join();  // every done() has arrived: returns at once
  return done;
}

}  // namespace cohort
