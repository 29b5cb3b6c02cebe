#pragma once
// Between a model's state (graph variables and optimizer slots) and a Checkpoint.

#include <cstddef>
#include <span>

#include "cohort/core/io/checkpoint.h"
#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/optimizer.h"

namespace cohort {

/// Every variable under its name, then each optimizer slot as "optimizer/<slot>" (flat, in the
/// graph's layout), and in the metadata the optimizer's name ("optimizer") and update count
/// ("optimizer_iterations").
Checkpoint make_checkpoint(const Graph& graph, Optimizer& optimizer);

/// How restore_checkpoint() treats the optimizer's state.
struct RestoreOptions {
  /// Restore the variables alone and start the optimizer afresh (zero slots, iteration count 0),
  /// whichever optimizer wrote the checkpoint; the way to resume with another optimizer.
  bool reset_optimizer = false;
};

/// Options from the flag --reset_optimizer.
RestoreOptions restore_options_from_flags();

/// Loads `checkpoint` into the graph's values and the optimizer's slots and update count.
///
/// A checkpoint records the optimizer that wrote it (metadata "optimizer"). When that is not the
/// optimizer given, the restore is refused with InvalidArgument naming both, leaving the graph
/// and the optimizer as they were: the slots would not carry over and the update count would be
/// wrong for the new optimizer (a checkpoint of another model is refused as such first). With options.reset_optimizer the variables are restored, the optimizer is reset,
/// and one line on stderr says so. A checkpoint without the field (written before it existed)
/// restores as it always did: the slots found by name, the others left at zero.
///
/// Throws CheckpointError listing every variable that is missing from the checkpoint or has
/// another shape there, and every checkpoint variable the graph does not have; also when a slot
/// has the wrong size or optimizer_iterations is not a count (Checkpoint::count()). Not
/// thread-safe; blocking (copies the values).
void restore_checkpoint(const Checkpoint& checkpoint, Graph& graph, Optimizer& optimizer,
                        const RestoreOptions& options = restore_options_from_flags());

/// Loads the variables alone (for evaluation: optimizer slots and moving averages in the
/// checkpoint are ignored). With `moving_averages`, each trainable variable whose moving average
/// the checkpoint holds takes the average instead (what TensorFlow's
/// ExponentialMovingAverage.variables_to_restore() maps), and the return value counts them.
/// Throws CheckpointError as restore_checkpoint() does, and when an average has another shape.
std::size_t restore_variables(const Checkpoint& checkpoint, Graph& graph,
                              bool moving_averages = false);

/// A trainable variable's moving average in a checkpoint is "<variable>" followed by this,
/// TensorFlow 1's name for it.
inline constexpr const char* kMovingAverageSuffix = "/ExponentialMovingAverage";

/// Whether the checkpoint holds moving averages (tensors named with kMovingAverageSuffix).
bool holds_moving_averages(const Checkpoint& checkpoint);

/// Adds the moving average of each trainable variable (`average`, in the layout of the graph's
/// parameter buffer: ExponentialMovingAverage::values()) to the checkpoint, under the variable's
/// name and kMovingAverageSuffix. InvalidArgument when `average` is not of that size.
void add_moving_averages(Checkpoint& checkpoint, const Graph& graph, std::span<const float> average);

/// Loads the checkpoint's moving averages of the graph's trainable variables into `average` (the
/// parameter buffer's layout). Returns false, leaving `average` as it is, when the checkpoint
/// holds none (it was written without); throws CheckpointError listing every variable whose
/// average is missing or of another shape when it holds some, InvalidArgument when `average` is
/// not of the parameter buffer's size.
bool restore_moving_averages(const Checkpoint& checkpoint, const Graph& graph,
                             std::span<float> average);

/// A warm start of some variables (TensorFlow's WarmStartSettings.vars_to_warm_start): loads
/// each variable whose name `vars` matches and leaves the others as they are, so that a model
/// fine-tuned with a new head takes the rest from the checkpoint (initialise the graph first).
/// `vars` is an ECMAScript regular expression matched from the start of the name, as
/// TensorFlow's is (so "dense_1" selects "dense_1/kernel" and "dense_10/bias"; end it with `/`
/// or `$` to be exact). Checkpoint tensors of variables not selected are ignored. Returns how
/// many variables were loaded. Throws InvalidArgument when `vars` is not a regular expression
/// (check_variable_pattern()), CheckpointError when it selects no variable of the graph (the
/// message lists the graph's), or listing every selected variable that is missing from the
/// checkpoint or has another shape there. Not thread-safe; blocking (copies the values).
std::size_t restore_variables_matching(const Checkpoint& checkpoint, Graph& graph,
                                       const std::string& vars);

/// Throws InvalidArgument naming `vars` and the fault unless it is a regular expression
/// restore_variables_matching() accepts.
void check_variable_pattern(const std::string& vars);

}  // namespace cohort
