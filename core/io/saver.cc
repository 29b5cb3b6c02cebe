#include "cohort/core/io/saver.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <set>

#include "cohort/core/base/error.h"
#include "cohort/core/base/flags.h"

namespace cohort {

COHORT_DEFINE_bool(reset_optimizer, false,
                   "chief: restore only the variables of the checkpoint and start the optimizer "
                   "afresh (slots at their starting values, iteration 0); needed to resume with another --optimizer");

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

namespace {

// Appends "; "-separated problems, for one error that names them all.
struct Problems {
  std::string text;
  void add(const std::string& problem) { text += (text.empty() ? "" : "; ") + problem; }
};

// Copies each selected variable of the graph from the checkpoint, adding a problem for each that
// is missing there or has another shape. Returns the names of the variables selected.
std::set<std::string> load_selected(const Checkpoint& checkpoint, Graph& graph,
                                    const std::function<bool(const std::string&)>& selected,
                                    Problems& problems) {
  std::set<std::string> used;
  for (const Variable& v : graph.variables()) {
    if (!selected(v.name)) continue;
    used.insert(v.name);
    const CheckpointTensor* t = checkpoint.find(v.name);
    if (!t) {
      problems.add(v.name + " " + to_string(v.shape) + " is missing from the checkpoint");
      continue;
    }
    if (t->shape != v.shape) {
      problems.add(v.name + " is " + to_string(t->shape) + " in the checkpoint but " +
                   to_string(v.shape) + " in the model");
      continue;
    }
    std::copy(t->values.begin(), t->values.end(), graph.values(v).begin());
  }
  return used;
}

}  // namespace

void restore_variables(const Checkpoint& checkpoint, Graph& graph) {
  Problems problems;
  const std::set<std::string> used =
      load_selected(checkpoint, graph, [](const std::string&) { return true; }, problems);
  for (const CheckpointTensor& t : checkpoint.tensors)
    if (!used.count(t.name) && t.name.rfind(kSlotPrefix, 0) != 0)
      problems.add(t.name + " " + to_string(t.shape) + " is in the checkpoint but not in the model");
  if (!problems.text.empty())
    throw CheckpointError("checkpoint does not fit the model: " + problems.text);
}

constexpr const char* kWarmStartVars = "variables to warm-start";

void check_variable_pattern(const std::string& vars) { static_cast<void>(Graph().matching(vars, kWarmStartVars)); }

std::size_t restore_variables_matching(const Checkpoint& checkpoint, Graph& graph,
                                       const std::string& vars) {
  std::set<std::string> chosen;
  for (const Variable* v : graph.matching(vars, kWarmStartVars)) chosen.insert(v->name);
  Problems problems;
  const std::set<std::string> used = load_selected(
      checkpoint, graph, [&](const std::string& name) { return chosen.count(name) != 0; }, problems);
  if (used.empty()) {
    std::string names;
    for (const Variable& v : graph.variables()) names += (names.empty() ? "" : ", ") + v.name;
    throw CheckpointError("variables to warm-start '" + vars +
                          "' match no variable of the model (its variables: " + names + ")");
  }
  if (!problems.text.empty())
    throw CheckpointError("checkpoint does not fit the variables to warm-start '" + vars +
                          "': " + problems.text);
  return used.size();
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
                 "afresh (slots at their starting values, iteration 0), the checkpoint's %s is dropped\n",
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
