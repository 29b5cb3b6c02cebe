#pragma once
// The variables of a model: trainable parameters laid out in one flat buffer, non-trainable state
// (batch norm's moving statistics) in another.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cohort/core/nn/initializer.h"
#include "cohort/core/nn/tensor.h"
#include "cohort/core/placement/replica_device_setter.h"

namespace cohort {

/// A variable: a named, shaped slice [offset, offset + size) of one of its graph's flat buffers,
/// with an initializer. A trainable variable lives in the parameter buffer (values()), which
/// gradients, optimizers, the ps tasks and allreduce see, and has a placement on ps tasks (or the
/// worker). A non-trainable one (state) lives in the state buffer (state()), which only the layer
/// that owns it updates; checkpoints hold both.
struct Variable {
  std::string name;
  Shape shape;
  Initializer initializer;
  std::int64_t offset = 0;  ///< in values() when trainable, else in state()
  std::int64_t size = 0;
  VariablePlacement placement;  ///< trainable variables only
  bool trainable = true;
  bool decay = false;  ///< weight decay applies to it (kernels, embeddings; not biases or norms)
};

/// How get_variable() makes a new variable.
struct VariableOptions {
  bool trainable = true;
  bool decay = false;
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
  /// InvalidArgument. The reference is valid until the next variable is created. `options` say
  /// whether it is trainable and decayed (kept from the first call, and checked on reuse).
  Variable& get_variable(const std::string& name, const Shape& shape, Initializer initializer,
                         VariableOptions options = {});

  const std::vector<Variable>& variables() const { return variables_; }
  /// The variable `name`, or null.
  const Variable* find(const std::string& name) const;
  /// The variable `name`; an InvalidArgument naming it and the graph's variables when there is
  /// none (find() for a lookup that may miss).
  const Variable& variable(const std::string& name) const;
  /// The variables whose names `pattern` matches: an ECMAScript regular expression matched from
  /// the start of the name, as TensorFlow's vars_to_warm_start is ("dense_1" selects
  /// "dense_1/kernel" and "dense_10/bias"; end it with '/' or '$' to be exact). InvalidArgument
  /// naming the pattern, as `what` ("variables to warm-start 'x('"), when it is not a regular
  /// expression.
  std::vector<const Variable*> matching(const std::string& pattern,
                                        const std::string& what = "variables") const;
  /// Floats of the trainable variables (the parameter buffer) and of the state.
  std::int64_t num_parameters() const { return num_parameters_; }
  std::int64_t num_state() const { return num_state_; }
  /// The ranges [begin, end) of the parameter buffer that weight decay applies to, merged.
  std::vector<std::pair<std::int64_t, std::int64_t>> decay_ranges() const;

  /// The flat parameter buffer (allocated and zero-filled on first use; from then on no variable
  /// can be created). Make the first call before several threads read it.
  std::span<float> values();
  std::span<const float> values() const;
  /// The state buffer (allocated with the parameter buffer, on the first use of either).
  std::span<float> state();
  std::span<const float> state() const;
  /// One variable's values, in whichever buffer it lives.
  std::span<float> values(const Variable& v) {
    return (v.trainable ? values() : state()).subspan(v.offset, v.size);
  }
  std::span<const float> values(const Variable& v) const {
    return (v.trainable ? values() : state()).subspan(v.offset, v.size);
  }

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
  std::int64_t num_state_ = 0;
  void freeze() const;
  mutable Tensor values_;
  mutable Tensor state_;
  mutable bool frozen_ = false;
};

/// A graph's parameters and state as they were, put back at the end of its scope (a look at
/// other values that must leave the graph as it was, whatever happens meanwhile).
class KeptVariables {
 public:
  explicit KeptVariables(Graph& graph)
      : graph_(graph),
        values_(graph.values().begin(), graph.values().end()),
        state_(graph.state().begin(), graph.state().end()) {}
  ~KeptVariables() {
    std::copy(values_.begin(), values_.end(), graph_.values().begin());
    std::copy(state_.begin(), state_.end(), graph_.state().begin());
  }
  KeptVariables(const KeptVariables&) = delete;
  KeptVariables& operator=(const KeptVariables&) = delete;

 private:
  Graph& graph_;
  std::vector<float> values_, state_;
};

}  // namespace cohort
