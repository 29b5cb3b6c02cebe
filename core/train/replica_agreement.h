#pragma once
// Whether the replicas of a job build the same model and train it alike. Ranks of an MPMD launch
// given different flags would otherwise read past each other's buffers, mismatch collectives or
// drift apart; a Trainer checks as it is built:
//
//   check_replicas_agree(server.replicas(), replica_layout(graph, optimizer, options));

#include <string>

#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/optimizer.h"
#include "cohort/core/train/trainer.h"

namespace cohort {
namespace mpi {
class Comm;
}  // namespace mpi

/// What every replica must build alike, a line each: the variables (names, shapes, state or
/// not), the optimizer, its learning rate and schedule and the factors on it, the mode and what
/// the mode reads of `options` (a setting it ignores may differ), the batch per worker, the
/// variables to train, gradient accumulation and synchronised batch norm. Towers, GPUs, threads
/// and the chief's moving averages may differ.
std::string replica_layout(const Graph& graph, const Optimizer& optimizer,
                           const TrainerOptions& options);

/// Collective over `replicas`: returns where every replica's `layout` is the chief's (replica
/// 0's); else InvalidArgument on each, the one that differs naming its first differing line,
/// "the replicas build different models or training (ranks given different flags?): here
/// 'variable hidden/kernel [784, 16]', on the chief 'variable hidden/kernel [784, 8]'", the
/// others naming which replicas differ.
void check_replicas_agree(const mpi::Comm& replicas, const std::string& layout);

}  // namespace cohort
