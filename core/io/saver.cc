#include "cohort/core/io/saver.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

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

// Where a tensor of `file` shape is another framework's layout of a variable of `model` shape
// (PyTorch's), what to do about it; else "".
std::string layout_hint(const Shape& file, const Shape& model) {
  if (model.size() == 2 && file == Shape{model[1], model[0]})
    return " (transpose it: a dense kernel is [inputs, outputs], PyTorch's Linear weight [outputs, inputs])";
  if (model.size() == 4 && file == Shape{model[3], model[2], model[0], model[1]})
    return " (permute it: a convolution kernel is [height, width, inputs, outputs], PyTorch's Conv2d "
           "weight [outputs, inputs, height, width])";
  return "";
}

// Where none of the checkpoint's tensors is named as a Cohort variable ("<layer>/<variable>")
// and some are named as PyTorch's state_dict names them ("conv1.weight"), what to do about it;
// else "".
std::string naming_hint(const Checkpoint& checkpoint) {
  const CheckpointTensor* dotted = nullptr;
  for (const CheckpointTensor& t : checkpoint.tensors) {
    if (t.name.find('/') != std::string::npos) return "";
    if (!dotted && t.name.find('.') != std::string::npos) dotted = &t;
  }
  if (!dotted) return "";
  return " (its tensors are named as a PyTorch state_dict's, '" + dotted->name +
         "': save each under the name of the model's variable, as 'conv1/kernel', in Cohort's "
         "layout; docs/GUIDE.md's table maps PyTorch's layers to Cohort's variables)";
}

// The checkpoint's tensor `name` if it has v's shape, else null with a problem added: missing
// there, or of another shape.
const CheckpointTensor* find_fitting(const Checkpoint& checkpoint, const std::string& name,
                                     const Variable& v, Problems& problems) {
  const CheckpointTensor* t = checkpoint.find(name);
  const auto other = checkpoint.passed_over.find(name);
  if (!t && other != checkpoint.passed_over.end())
    problems.add(name + " is of dtype " + other->second + " in the file, not a floating-point weight");
  else if (!t)
    problems.add(name + " " + to_string(v.shape) + " is missing from the checkpoint");
  else if (t->shape != v.shape)
    problems.add(name + " is " + to_string(t->shape) + " in the checkpoint but " +
                 to_string(v.shape) + " in the model" + layout_hint(t->shape, v.shape));
  else
    return t;
  return nullptr;
}

// Copies each selected variable of the graph from the checkpoint (from its moving average
// instead where `averaged` says so), adding a problem for each that is missing there or has
// another shape. Returns the names of the variables selected.
std::set<std::string> load_selected(const Checkpoint& checkpoint, Graph& graph,
                                    const std::function<bool(const std::string&)>& selected,
                                    Problems& problems,
                                    const std::function<bool(const Variable&)>& averaged = {}) {
  std::set<std::string> used;
  for (const Variable& v : graph.variables()) {
    if (!selected(v.name)) continue;
    used.insert(v.name);
    const std::string name = averaged && averaged(v) ? v.name + kMovingAverageSuffix : v.name;
    if (const CheckpointTensor* t = find_fitting(checkpoint, name, v, problems))
      std::copy(t->values.begin(), t->values.end(), graph.values(v).begin());
  }
  return used;
}

// Whether `name` is the moving average of one of the graph's trainable variables.
bool is_moving_average(const std::string& name, const Graph& graph) {
  const std::string_view suffix = kMovingAverageSuffix;
  if (name.size() <= suffix.size() || !name.ends_with(suffix)) return false;
  const Variable* v = graph.find(name.substr(0, name.size() - suffix.size()));
  return v && v->trainable;
}

// Whether `name` is the moving average of another tensor of the checkpoint that is named as
// not in the model (not among the `used` ones): once for both.
bool averages_a_listed_variable(const std::string& name, const Checkpoint& checkpoint,
                                const std::set<std::string>& used) {
  const std::string_view suffix = kMovingAverageSuffix;
  if (name.size() <= suffix.size() || !name.ends_with(suffix)) return false;
  const std::string base = name.substr(0, name.size() - suffix.size());
  return checkpoint.find(base) != nullptr && !used.count(base);
}

}  // namespace

std::size_t restore_variables(const Checkpoint& checkpoint, Graph& graph, bool moving_averages) {
  Problems problems;
  std::size_t averages = 0;
  const std::set<std::string> used = load_selected(
      checkpoint, graph, [](const std::string&) { return true; }, problems,
      [&](const Variable& v) {
        const bool averaged = moving_averages && v.trainable &&
                              checkpoint.find(v.name + kMovingAverageSuffix) != nullptr;
        averages += averaged;
        return averaged;
      });
  for (const CheckpointTensor& t : checkpoint.tensors)
    if (!used.count(t.name) && t.name.rfind(kSlotPrefix, 0) != 0 && !is_moving_average(t.name, graph) &&
        !averages_a_listed_variable(t.name, checkpoint, used))
      problems.add(t.name + " " + to_string(t.shape) + " is in the checkpoint but not in the model");
  if (!problems.text.empty())
    throw CheckpointError("checkpoint does not fit the model: " + problems.text + naming_hint(checkpoint),
                          kInputStatus);
  return averages;
}

namespace {

// InvalidArgument unless `average` has the size of the graph's parameter buffer.
void check_average_size(const Graph& graph, std::size_t size, const char* what) {
  if (size != static_cast<std::size_t>(graph.num_parameters()))
    throw InvalidArgument(std::string(what) + ": an average of " + std::to_string(size) +
                          " values for a graph of " + std::to_string(graph.num_parameters()) +
                          " parameters");
}

}  // namespace

bool holds_moving_averages(const Checkpoint& checkpoint) {
  return std::any_of(checkpoint.tensors.begin(), checkpoint.tensors.end(),
                     [](const CheckpointTensor& t) { return t.name.ends_with(kMovingAverageSuffix); });
}

void add_moving_averages(Checkpoint& checkpoint, const Graph& graph, std::span<const float> average) {
  check_average_size(graph, average.size(), "add_moving_averages");
  for (const Variable& v : graph.variables()) {
    if (!v.trainable) continue;
    const auto values = average.subspan(static_cast<std::size_t>(v.offset), static_cast<std::size_t>(v.size));
    checkpoint.tensors.push_back({v.name + kMovingAverageSuffix, v.shape, {values.begin(), values.end()}});
  }
}

bool restore_moving_averages(const Checkpoint& checkpoint, const Graph& graph,
                             std::span<float> average) {
  check_average_size(graph, average.size(), "restore_moving_averages");
  const bool any = std::any_of(checkpoint.tensors.begin(), checkpoint.tensors.end(),
                               [&](const CheckpointTensor& t) { return is_moving_average(t.name, graph); });
  if (!any) return false;
  Problems problems;
  std::vector<std::pair<const CheckpointTensor*, const Variable*>> found;
  for (const Variable& v : graph.variables())
    if (v.trainable)
      if (const CheckpointTensor* t = find_fitting(checkpoint, v.name + kMovingAverageSuffix, v, problems))
        found.emplace_back(t, &v);
  if (!problems.text.empty())
    throw CheckpointError("checkpoint's moving averages do not fit the model: " + problems.text, kInputStatus);
  for (const auto& [t, v] : found)
    std::copy(t->values.begin(), t->values.end(), average.begin() + v->offset);
  return true;
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
                          "' match no variable of the model (its variables: " + names + ")",
                          kInputStatus);
  }
  if (!problems.text.empty())
    throw CheckpointError("checkpoint does not fit the variables to warm-start '" + vars +
                          "': " + problems.text + naming_hint(checkpoint),
                          kInputStatus);
  return used.size();
}

void restore_checkpoint(const Checkpoint& checkpoint, Graph& graph, Optimizer& optimizer,
                        const RestoreOptions& options) {
  const std::string& configured = optimizer.options().name;
  const auto writer = checkpoint.metadata.find(kOptimizerKey);
  const std::optional<std::int64_t> iterations = checkpoint.count("optimizer_iterations");
  if (!options.reset_optimizer && writer != checkpoint.metadata.end() &&
      writer->second != configured) {
    // The model first: a checkpoint of another model is that, whatever optimizer wrote it (and
    // --reset_optimizer would not help). One that fits leaves the graph as it was.
    {
      const KeptVariables kept(graph);
      restore_variables(checkpoint, graph);
    }
    throw InvalidArgument("cannot restore the checkpoint: it was written by optimizer '" +
                          writer->second + "' and the optimizer is '" + configured +
                          "', whose state it does not hold; pass --reset_optimizer to restore the "
                          "variables and start '" + configured + "' afresh");
  }
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
                                std::to_string(slot.size()) + " parameters",
                            kInputStatus);
    std::copy(t->values.begin(), t->values.end(), slot.begin());
  }
  if (iterations) optimizer.set_iterations(*iterations);
}

}  // namespace cohort
