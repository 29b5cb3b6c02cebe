#include "cohort/core/train/replica_agreement.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/base/shape.h"
#include "cohort/mpi/comm.h"

namespace cohort {

std::string replica_layout(const Graph& graph, const Optimizer& optimizer,
                           const TrainerOptions& options) {
  std::string text;
  for (const Variable& v : graph.variables())
    text += "variable " + v.name + " " + to_string(v.shape) + (v.trainable ? "" : " (state)") + "\n";
  const OptimizerOptions& o = optimizer.options();
  const LearningRateSchedule& rate = o.learning_rate;
  char numbers[256];
  std::snprintf(numbers, sizeof numbers,
                "learning rate %.9g (schedule %d: decay %.9g every %lld, warm-up %lld from %.9g, power %.9g)",
                rate.base, static_cast<int>(rate.kind), rate.decay_rate,
                static_cast<long long>(rate.decay_steps), static_cast<long long>(rate.warmup_steps),
                rate.warmup_from, rate.power);
  text += "optimizer " + o.name + ": " + describe(o) + "\n" + numbers + "\n";
  if (!rate.boundaries.empty() || !rate.factors.empty()) {
    text += "learning rate boundaries";
    for (const std::int64_t b : rate.boundaries) text += " " + std::to_string(b);
    text += ", factors";
    for (const double f : rate.factors) {
      std::snprintf(numbers, sizeof numbers, " %.9g", f);
      text += numbers;
    }
    text += "\n";
  }
  for (const auto& [pattern, factor] : options.learning_rate_factors) {
    std::snprintf(numbers, sizeof numbers, "%.9g", factor);
    text += "learning rate factor " + std::string(numbers) + " on '" + pattern + "'\n";
  }
  // The mode and what it reads of the options.
  const ReplicationOptions& r = options.replication;
  text += std::string("mode ") + to_string(r.mode) + ", compression " + to_string(r.compression) +
          ", buckets " + std::to_string(r.bucket_bytes) + " bytes";
  if (r.mode == Mode::kAllreduce)
    text += ", fusion " + std::to_string(r.fusion_bytes) + " bytes, shared-memory sums " +
            (r.shared_memory_sums ? "on" : "off");
  if (r.mode == Mode::kSync) text += ", " + std::to_string(r.replicas_to_aggregate) + " to aggregate";
  if (r.mode == Mode::kSsp) text += ", staleness " + std::to_string(r.staleness);
  if (r.mode == Mode::kAsync) text += std::string(", prefetch ") + (r.prefetch ? "on" : "off");
  // The batch too: a global step's examples, which a resume and the epochs count by, are the
  // workers' batches times their number.
  text += "\nbatch " + std::to_string(options.batch_size) + " per worker, trainable '" +
          options.trainable_vars + "', accumulation " +
          std::to_string(options.accumulation_steps) + ", synchronised batch norm " +
          (options.sync_batch_norm ? "on" : "off") + "\n";
  return text;
}

void check_replicas_agree(const mpi::Comm& replicas, const std::string& mine) {
  const std::vector<std::string> all = replicas.allgather_strings(mine);
  std::string differing;
  for (std::size_t i = 1; i < all.size(); ++i)
    if (all[i] != all[0]) differing += (differing.empty() ? "" : ", ") + std::to_string(i);
  if (differing.empty()) return;
  const std::string prefix = "the replicas build different models or training (ranks given different flags?): ";
  if (mine == all[0])
    throw InvalidArgument(prefix + "replica " + differing + " differs from the chief (its own error says how)");
  const auto line = [](const std::string& text, std::size_t at) {
    return text.substr(at, text.find('\n', at) - at);
  };
  std::size_t at = 0;
  while (at < mine.size() && at < all[0].size()) {
    const std::size_t end = mine.find('\n', at);
    if (mine.compare(at, end - at + 1, all[0], at, end - at + 1) != 0) break;
    at = end + 1;
  }
  throw InvalidArgument(prefix + "here '" + line(mine, at) + "', on the chief '" +
                        line(all[0], at) + "'");
}

}  // namespace cohort
