#include "cohort/core/nn/graph.h"

#include <cstdio>
#include <new>
#include <regex>
#include <utility>

#include <unistd.h>

#include "cohort/core/base/error.h"

namespace cohort {
namespace {

std::uint64_t fnv1a_64(const std::string& text) {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

// SplitMix64's finaliser: FNV-1a alone mixes the last characters weakly, and names often differ
// only there ("dense_1/kernel", "dense_2/kernel").
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

Graph::Graph(ReplicaDeviceSetter setter) : setter_(std::move(setter)) {}

Variable& Graph::get_variable(const std::string& name, const Shape& shape,
                              Initializer initializer, VariableOptions options) {
  if (const auto it = index_.find(name); it != index_.end()) {
    Variable& existing = variables_[it->second];
    if (existing.shape != shape)
      throw InvalidArgument("Graph: variable \"" + name + "\" exists with shape " +
                            to_string(existing.shape) + ", asked for " + to_string(shape));
    if (existing.trainable != options.trainable)
      throw InvalidArgument("Graph: variable \"" + name + "\" exists as " +
                            (existing.trainable ? "trainable" : "non-trainable") +
                            " state, asked for the other");
    return existing;
  }
  if (name.empty()) throw InvalidArgument("Graph: empty variable name");
  for (std::int64_t d : shape)
    if (d < 0)
      throw InvalidArgument("Graph: variable \"" + name + "\" has a negative dimension in shape " +
                            to_string(shape));
  // The buffer's layout is fixed once handed out: spans held by callers would dangle.
  if (frozen_)
    throw Error("Graph: cannot create variable \"" + name +
                "\" after the parameter buffer was allocated (values() was already used)");

  Variable v;
  v.name = name;
  v.shape = shape;
  v.initializer = initializer;
  v.size = num_elements(shape);
  v.trainable = options.trainable;
  v.decay = options.decay;
  if (v.trainable) {
    v.offset = num_parameters_;
    v.placement = setter_.place(name, shape);
    num_parameters_ += v.size;
  } else {
    // State stays with each replica: it has no placement on the ps tasks.
    v.offset = num_state_;
    num_state_ += v.size;
  }
  index_.emplace(name, variables_.size());
  variables_.push_back(std::move(v));
  return variables_.back();
}

const Variable* Graph::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &variables_[it->second];
}

const Variable& Graph::variable(const std::string& name) const {
  if (const Variable* v = find(name)) return *v;
  std::string known;
  constexpr std::size_t kShown = 12;
  for (std::size_t i = 0; i < variables_.size() && i < kShown; ++i)
    known += (i > 0 ? ", " : "") + variables_[i].name;
  if (variables_.size() > kShown) known += ", ... (" + std::to_string(variables_.size()) + " in all)";
  throw InvalidArgument("no variable '" + name + "' in the graph (variables: " +
                        (known.empty() ? "none" : known) + ")");
}

std::vector<const Variable*> Graph::matching(const std::string& pattern, const std::string& what) const {
  std::regex expression;
  try {
    expression = std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    throw InvalidArgument(what + " '" + pattern + "': not a regular expression (" + e.what() + ")");
  }
  std::vector<const Variable*> chosen;
  for (const Variable& v : variables_)
    if (std::regex_search(v.name, expression, std::regex_constants::match_continuous)) chosen.push_back(&v);
  return chosen;
}

std::span<float> Graph::values() {
  std::span<const float> all = std::as_const(*this).values();
  return {const_cast<float*>(all.data()), all.size()};
}

void Graph::freeze() const {
  if (frozen_) return;
  // Where the parameters alone outgrow the machine, Linux may grant the memory and kill the
  // process when it is touched: refuse first, in words.
  const double bytes = static_cast<double>(num_parameters_) * sizeof(float);
  const double physical = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
  const auto too_large = [&](const std::string& why) {
    char size[64];
    std::snprintf(size, sizeof size, "%.3g GB", bytes * 1e-9);
    return Error("the model's " + std::to_string(num_parameters_) + " parameters (" + size +
                 " as float32) " + why);
  };
  const double state = static_cast<double>(num_state_) * sizeof(float);
  if (physical > 0 && 2 * bytes + state > physical) {  // values and gradients, at the least
    char memory[64];
    std::snprintf(memory, sizeof memory, "%.3g GB", physical * 1e-9);
    throw too_large(std::string("and as many gradients exceed this machine's memory (") + memory + ")");
  }
  try {
    values_ = Tensor(Shape{num_parameters_});  // zero-filled
    state_ = Tensor(Shape{num_state_});
  } catch (const std::bad_alloc&) {
    throw too_large("cannot be allocated, before their gradients and the optimizer's state: more "
                    "memory than this process can have");
  }
  frozen_ = true;
}

std::span<const float> Graph::values() const {
  freeze();
  return values_.span();
}

std::span<float> Graph::state() {
  std::span<const float> all = std::as_const(*this).state();
  return {const_cast<float*>(all.data()), all.size()};
}

std::span<const float> Graph::state() const {
  freeze();
  return state_.span();
}

std::vector<std::pair<std::int64_t, std::int64_t>> Graph::decay_ranges() const {
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
  for (const Variable& v : variables_) {
    if (!v.trainable || !v.decay || v.size == 0) continue;
    if (!ranges.empty() && ranges.back().second == v.offset)
      ranges.back().second = v.offset + v.size;
    else
      ranges.emplace_back(v.offset, v.offset + v.size);
  }
  return ranges;
}

void Graph::initialize(std::uint64_t seed) {
  for (const Variable& v : variables_)
    v.initializer.fill(v.shape, variable_seed(seed, v.name), values(v));
}

std::uint64_t Graph::variable_seed(std::uint64_t seed, const std::string& name) {
  return mix(mix(seed) ^ fnv1a_64(name));
}

}  // namespace cohort
