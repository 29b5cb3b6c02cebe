#include "cohort/core/io/saver.h"

#include <algorithm>
#include <set>

namespace cohort {
namespace {

constexpr const char* kSlotPrefix = "optimizer/";

}  // namespace

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

void restore_checkpoint(const Checkpoint& checkpoint, Graph& graph, Optimizer& optimizer) {
  restore_variables(checkpoint, graph);
  optimizer.prepare(static_cast<std::size_t>(graph.num_parameters()));
  for (auto& [name, slot] : optimizer.slots()) {
    const CheckpointTensor* t = checkpoint.find(kSlotPrefix + name);
    if (!t) continue;  // e.g. a checkpoint written with another optimizer: start the slot at zero
    if (t->values.size() != slot.size())
      throw CheckpointError("checkpoint optimizer slot " + name + " has " +
                            std::to_string(t->values.size()) + " values for " +
                            std::to_string(slot.size()) + " parameters");
    std::copy(t->values.begin(), t->values.end(), slot.begin());
  }
  if (const auto it = checkpoint.metadata.find("optimizer_iterations"); it != checkpoint.metadata.end())
    optimizer.set_iterations(std::stoll(it->second));
}

}  // namespace cohort
