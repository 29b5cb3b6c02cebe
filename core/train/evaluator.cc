#include "cohort/core/train/evaluator.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/io/checkpoint.h"
#include "cohort/core/io/saver.h"
#include "cohort/core/io/summary_writer.h"
#include "cohort/core/nn/evaluation.h"

namespace cohort {

std::vector<std::pair<std::string, double>> evaluation_scalars(const std::vector<std::string>& metric_names,
                                                               const StepMetrics& metrics) {
  if (metric_names.size() > metrics.metrics.size())
    throw InvalidArgument("evaluation_scalars: " + std::to_string(metric_names.size()) +
                          " metric names, at most " + std::to_string(metrics.metrics.size()) + " metrics");
  std::vector<std::pair<std::string, double>> scalars{{"loss", metrics.loss}};
  for (std::size_t i = 0; i < metric_names.size(); ++i) scalars.emplace_back(metric_names[i], metrics.metrics[i]);
  return scalars;
}

void write_evaluation(const std::string& dir, std::int64_t step, const std::vector<std::string>& metric_names,
                      const StepMetrics& metrics, std::optional<std::int64_t> session_start) {
  SummaryWriter summaries(dir);
  if (session_start) summaries.add_session_start(*session_start);
  summaries.add_scalars(evaluation_scalars(metric_names, metrics), step);
  summaries.flush();
}

bool write_final_evaluation(const std::string& dir, std::int64_t step, const std::vector<std::string>& metric_names,
                            const StepMetrics& metrics, std::optional<std::int64_t> last_point,
                            std::int64_t session_start) {
  if (last_point == step) return false;
  try {
    write_evaluation(dir, step, metric_names, metrics,
                     last_point ? std::nullopt : std::optional(std::min(session_start, step)));
    return true;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[%s] warning: the final evaluation is not in %s: %s\n", process_label().c_str(),
                 dir.c_str(), e.what());
    return false;
  }
}

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
  auto warn = [](const std::string& message) {
    std::fprintf(stderr, "[%s] warning: %s\n", process_label().c_str(), message.c_str());
  };
  std::vector<Evaluation> done;
  std::string last;
  std::string fault;  // the unreadable index or checkpoint of the last poll, if any
  int tries_after_training = 0;
  for (;;) {
    // Asked before the index is read: once every replica is done, the chief's final checkpoint
    // is in the index.
    const bool finished = server.training_done();
    std::optional<Checkpoint> checkpoint;
    std::string path;
    try {
      if (const std::optional<std::string> latest = checkpoints.latest_path();
          latest && *latest != last) {
        checkpoint = read_checkpoint(*latest);
        path = *latest;
      }
      fault.clear();
    } catch (const CheckpointError& e) {
      // A file pruned by the chief (keep_checkpoint_max) just after this read the index, or an
      // index someone damaged, which the chief rewrites at its next save: training goes on, so
      // the evaluator looks again at its next poll rather than end the job.
      if (e.what() != fault) warn(std::string(e.what()) + "; looking again in a moment");
      fault = e.what();
    }
    if (checkpoint) {
      // One that does not fit the model throws.
      if (restore_variables(*checkpoint, model.graph(), options.moving_averages) == 0 &&
          options.moving_averages)
        warn(path + " holds no moving averages: evaluating its variables");
      Evaluation evaluation{path, checkpoint->global_step(),
                            evaluate_dataset(model, data, options.batch_size, options.image)};
      // As a training session's summaries do: an evaluator started again (after a restart of
      // the job) evaluates the latest checkpoint again, and TensorBoard drops the earlier run's
      // points from that step on rather than show two.
      if (done.empty()) summaries.add_session_start(evaluation.global_step);
      summaries.add_scalars(evaluation_scalars(model.metric_names(), evaluation.metrics), evaluation.global_step);
      summaries.flush();
      std::printf("%s evaluated global step %lld: test accuracy %.4f, test loss %.4f\n",
                  me.c_str(), static_cast<long long>(evaluation.global_step),
                  evaluation.metrics.accuracy, evaluation.metrics.loss);
      std::fflush(stdout);
      done.push_back(std::move(evaluation));
      last = path;
    }
    if (finished && (fault.empty() || ++tries_after_training > 3)) break;
    std::this_thread::sleep_for(options.poll);
  }
  if (done.empty() && fault.empty())
    warn(me + ": no checkpoint appeared in " + options.checkpoint_dir +
         " while the cluster trained: does the chief save checkpoints there?");
  server.join();  // every done() has arrived: returns at once
  // The final checkpoint is in the index once training has ended; one that stayed unreadable
  // through the tries after it was not evaluated, and the job must not end as if it had been.
  if (!fault.empty())
    throw CheckpointError(me + ": the final checkpoint could not be evaluated: " + fault);
  return done;
}

}  // namespace cohort
