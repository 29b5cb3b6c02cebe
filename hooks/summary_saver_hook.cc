#include "cohort/hooks/summary_saver_hook.h"

#include <span>
#include <utility>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/io/summary_writer.h"
#include "cohort/core/nn/graph.h"
#include "cohort/core/train/trainer.h"

namespace cohort {

SummarySaverHook::SummarySaverHook(SummarySaverHookOptions options)
    : options_(std::move(options)), timer_(options_.every_steps, options_.every_secs, "SummarySaverHook") {
  if (options_.output_dir.empty()) throw InvalidArgument("SummarySaverHook: output_dir is empty");
}

SummarySaverHook::~SummarySaverHook() = default;

void SummarySaverHook::after_create_session(MonitoredSession& session) {
  timer_.reset();
  started_ = false;
  chief_ = session.is_chief();
  metrics_ = session.trainer().model().metric_names();
}

SessionRunArgs SummarySaverHook::before_run(RunContext&) {
  if (!chief_) return {};
  // Scalars cost little to fetch, so every step fetches them and after_run decides (the step
  // knows its global step only when it is done). A metric fetched is counted on every step
  // (Metric::counts): little but for an AUC's bins.
  SessionRunArgs args{{"global_step", "loss", "learning_rate", "examples"}};
  args.fetches.insert(args.fetches.end(), metrics_.begin(), metrics_.end());
  return args;
}

void SummarySaverHook::after_run(RunContext& context, const SessionRunValues& values) {
  if (!chief_) return;
  if (!writer_) {
    // Opened at the first write, so that a session that fails to start holds no directory.
    // Each session has an event file of its own (as a restarted job's), and the directory is
    // free again at its end, for the next session's hooks.
    writer_ = std::make_unique<SummaryWriter>(options_.output_dir);
    event_file_ = writer_->event_file();
  }
  const auto step = static_cast<std::int64_t>(values.get("global_step"));
  if (!started_) {
    // The points an earlier run wrote from here on (it died after its last checkpoint) are
    // dropped by TensorBoard; this session's replace them.
    writer_->add_session_start(step);
    started_ = true;
  }
  if (!timer_.should_trigger_for_step(step)) return;
  const auto elapsed = timer_.update_last_triggered_step(step);
  std::vector<std::pair<std::string, double>> scalars{{"loss", values.get("loss")}};
  for (const std::string& metric : metrics_) scalars.emplace_back(metric, values.get(metric));
  scalars.emplace_back("learning_rate", values.get("learning_rate"));
  if (elapsed && elapsed->seconds > 0) {
    const double examples = static_cast<double>(context.session().trainer().examples_per_global_step());
    const double steps_per_sec = static_cast<double>(elapsed->steps) / elapsed->seconds;
    scalars.emplace_back("global_step/sec", steps_per_sec);  // TensorFlow's StepCounterHook's tag
    scalars.emplace_back("examples/sec", steps_per_sec * examples);
  }
  writer_->add_scalars(scalars, step);
  if (options_.histograms) write_histograms(context.session().trainer(), step);
  writer_->flush();
  ++writes_;
}

void SummarySaverHook::write_histograms(Trainer& trainer, std::int64_t step) {
  trainer.fetch_parameters();
  const Graph& graph = trainer.graph();
  std::vector<std::pair<std::string, std::span<const float>>> histograms;
  for (const Variable& v : graph.variables()) histograms.emplace_back(v.name, graph.values(v));
  writer_->add_histograms(histograms, step);
}

void SummarySaverHook::end(MonitoredSession&) {
  if (writer_) writer_->flush();
  writer_.reset();
}

}  // namespace cohort
