#include "cohort/core/nn/graph.h"

#include <utility>

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
                              Initializer initializer) {
  if (const auto it = index_.find(name); it != index_.end()) {
    Variable& existing = variables_[it->second];
    if (existing.shape != shape)
      throw InvalidArgument("Graph: variable \"" + name + "\" exists with shape " +
                            to_string(existing.shape) + ", asked for " + to_string(shape));
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
  v.offset = num_parameters_;
  v.size = num_elements(shape);
  v.placement = setter_.place(name, shape);
  num_parameters_ += v.size;
  index_.emplace(name, variables_.size());
  variables_.push_back(std::move(v));
  return variables_.back();
}

const Variable* Graph::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &variables_[it->second];
}

std::span<float> Graph::values() {
  std::span<const float> all = std::as_const(*this).values();
  return {const_cast<float*>(all.data()), all.size()};
}

std::span<const float> Graph::values() const {
  if (!frozen_) {
    values_ = Tensor(Shape{num_parameters_});  // zero-filled
    frozen_ = true;
  }
  return values_.span();
}

void Graph::initialize(std::uint64_t seed) {
  for (const Variable& v : variables_)
    v.initializer.fill(v.shape, variable_seed(seed, v.name), values(v));
}

std::uint64_t Graph::variable_seed(std::uint64_t seed, const std::string& name) {
  return mix(mix(seed) ^ fnv1a_64(name));
}

}  // namespace cohort
