#pragma once
// The variables of a model, laid out in one flat parameter buffer, and the named values a
// session can fetch.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cohort/core/nn/initializer.h"
#include "cohort/core/nn/tensor.h"
#include "cohort/core/placement/replica_device_setter.h"

namespace cohort {

/// A trainable variable: a named, shaped slice [offset, offset + size) of its graph's flat
/// parameter buffer, with an initializer and a placement on ps tasks (or the worker).
struct Variable {
  std::string name;
  Shape shape;
  Initializer initializer;
  std::int64_t offset = 0;
  std::int64_t size = 0;
  VariablePlacement placement;
};

/// Holds a model's variables. Layers create them while the model is built (get_variable reuses an
/// existing variable of the same name and shape, as TensorFlow's variable scopes with reuse do,
/// which is how several towers share one set of parameters). The parameter values live in one
/// contiguous, aligned buffer in creation order, so optimizers, pushes, pulls and allreduces work
/// on flat spans; gradients use the same layout.
///
/// Not thread-safe while variables are being created; afterwards values() may be read from
/// several tower threads at once.
class Graph {
 public:
  /// Variables are placed by `setter` (everything on the local worker when default-constructed).
  explicit Graph(ReplicaDeviceSetter setter = ReplicaDeviceSetter());

  /// Returns the variable `name`, creating it on first use (placed by the device setter, laid out
  /// right after the previous variable). A later call with the same shape returns it (its
  /// initializer is kept, as TensorFlow ignores the initializer on reuse); with another shape it
  /// throws InvalidArgument naming the variable and both shapes. Creating a variable after
  /// values() was first used throws Error. An empty name or a negative dimension is an
  /// InvalidArgument. The reference is valid until the next variable is created.
  Variable& get_variable(const std::string& name, const Shape& shape, Initializer initializer);

  const std::vector<Variable>& variables() const { return variables_; }
  const Variable* find(const std::string& name) const;
  std::int64_t num_parameters() const { return num_parameters_; }

  /// The flat parameter buffer (allocated and zero-filled on first use; from then on no variable
  /// can be created). Make the first call before several threads read it.
  std::span<float> values();
  std::span<const float> values() const;
  /// One variable's values.
  std::span<float> values(const Variable& v) { return values().subspan(v.offset, v.size); }
  std::span<const float> values(const Variable& v) const { return values().subspan(v.offset, v.size); }

  /// Fills every variable from its initializer, seeded by `seed` and the variable's name (so the
  /// result does not depend on creation order or on the process): variable v gets
  /// Initializer::fill(..., variable_seed(seed, v.name), ...).
  void initialize(std::uint64_t seed);

  /// The seed initialize() gives the variable `name`: `seed` mixed with the 64-bit FNV-1a hash of
  /// the name (a stable hash: std::hash may differ between standard libraries and runs).
  static std::uint64_t variable_seed(std::uint64_t seed, const std::string& name);

  const ReplicaDeviceSetter& device_setter() const { return setter_; }

 private:
  ReplicaDeviceSetter setter_;
  std::vector<Variable> variables_;
  std::map<std::string, std::size_t> index_;  // name -> position in variables_
  std::int64_t num_parameters_ = 0;
  mutable Tensor values_;
  mutable bool frozen_ = false;
};

}  // namespace cohort
