#pragma once
// Between a model's state (graph variables and optimizer slots) and a Checkpoint.

#include "cohort/core/io/checkpoint.h"
#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/optimizer.h"

namespace cohort {

/// Every variable under its name, then each optimizer slot as "optimizer/<slot>" (flat, in the
/// graph's layout), and the optimizer's update count in the metadata.
Checkpoint make_checkpoint(const Graph& graph, Optimizer& optimizer);

/// Loads `checkpoint` into the graph's values and the optimizer's slots. Throws CheckpointError
/// listing every variable that is missing from the checkpoint or has another shape there, and
/// every checkpoint variable the graph does not have.
void restore_checkpoint(const Checkpoint& checkpoint, Graph& graph, Optimizer& optimizer);

/// Loads the variables alone (for evaluation: optimizer slots in the checkpoint are ignored).
/// Throws CheckpointError as restore_checkpoint() does.
void restore_variables(const Checkpoint& checkpoint, Graph& graph);

}  // namespace cohort
