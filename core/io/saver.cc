#include "cohort/core/io/saver.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "cohort/core/base/error.h"
#include "cohort/core/base/flags.h"

namespace cohort {

COHORT_DEFINE_bool(reset_optimizer, false,
                   "chief: restore only the variables of the checkpoint and start the optimizer "
                   "afresh (zero slots, iteration 0); needed to resume with another --optimizer");

namespace {

constexpr const char* kSlotPrefix = "optimizer/";
constexpr const char* kOptimizerKey = "optimizer";

}  // namespace

RestoreOptions restore_options_from_flags() { return {.reset_optimizer = FLAGS_reset_optimizer}; }

Checkpoint make_checkpoint(const Graph& graph, Optimizer& optimizer) {
  Checkpoint checkpoint;
  for (const Variable& v : graph.variables()) {
    const auto values = graph.values(v);
    checkpoint.tensors.push_back({v.name, v.shape, {values.begin(), values.end()}});
  }
  for (const auto& [name, slot] : optimizer.slots())
    if (!slot.empty())
      checkpoint.tensors.push_back({kSlotPrefix + name, {static_cast<std::int64_t>(slot.size())},
                                    {slot.begin(), slot.end()}});
  checkpoint.metadata[kOptimizerKey] = optimizer.options().name;
  checkpoint.metadata["optimizer_iterations"] = std::to_string(optimizer.iterations());
  return checkpoint;
}

void restore_variables(const Checkpoint& checkpoint, Graph& graph) {
  std::string problems;
  const auto problem = [&](const std::string& text) {
    problems += (problems.empty() ? "" : "; ") + text;
  };
  std::set<std::string> used;
  for (const Variable& v : graph.variables()) {
    const CheckpointTensor* t = checkpoint.find(v.name);
    if (!t) {
      problem(v.name + " " + to_string(v.shape) + " is missing from the checkpoint");
      continue;
    }
    used.insert(v.name);
    if (t->shape != v.shape) {
      problem(v.name + " is " + to_string(t->shape) + " in the checkpoint but " + to_string(v.shape) +
              " in the model");
      continue;
    }
    std::copy(t->values.begin(), t->values.end(), graph.values(v).begin());
  }
  for (const CheckpointTensor& t : checkpoint.tensors)
    if (!used.count(t.name) && t.name.rfind(kSlotPrefix, 0) != 0)
      problem(t.name + " " + to_string(t.shape) + " is in the checkpoint but not in the model");
  if (!problems.empty())
    throw CheckpointError("checkpoint does not fit the model: " + problems);
}

void restore_checkpoint(const Checkpoint& checkpoint, Graph& graph, Optimizer& optimizer,
                        const RestoreOptions& options) {
  const std::string& configured = optimizer.options().name;
  const auto writer = checkpoint.metadata.find(kOptimizerKey);
  const std::optional<std::int64_t> iterations = checkpoint.count("optimizer_iterations");
  if (!options.reset_optimizer && writer != checkpoint.metadata.end() &&
      writer->second != configured)
    throw InvalidArgument("cannot restore the checkpoint: it was written by optimizer '" +
                          writer->second + "' and the optimizer is '" + configured +
                          "', whose state it does not hold; pass --reset_optimizer to restore the "
                          "variables and start '" + configured + "' afresh");
  restore_variables(checkpoint, graph);
  optimizer.prepare(static_cast<std::size_t>(graph.num_parameters()));
  if (options.reset_optimizer) {
    optimizer.reset();
    const std::string dropped = writer != checkpoint.metadata.end()
                                    ? "optimizer '" + writer->second + "' state"
                                    : "optimizer state";
    std::fprintf(stderr,
                 "[%s] --reset_optimizer: restored the variables only; optimizer '%s' starts "
                 "afresh (zero slots, iteration 0), the checkpoint's %s is dropped\n",
                 process_label().c_str(), configured.c_str(), dropped.c_str());
    std::fflush(stderr);
    return;
  }
  for (auto& [name, slot] : optimizer.slots()) {
    const CheckpointTensor* t = checkpoint.find(kSlotPrefix + name);
    if (!t) continue;  // never written (no update yet), or an old file of another optimizer
    if (t->values.size() != slot.size())
      throw CheckpointError("checkpoint optimizer slot " + name + " has " +
                            std::to_string(t->values.size()) + " values for " +
                            std::to_string(slot.size()) + " parameters");
    std::copy(t->values.begin(), t->values.end(), slot.begin());
  }
  if (iterations) optimizer.set_iterations(*iterations);
}

}  // namespace cohort
