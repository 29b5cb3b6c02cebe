#pragma once
// train --eval_only: the final evaluation of training, of a checkpoint already written (Keras's
// model.evaluate, TensorFlow's Estimator.evaluate), with no training, no cluster and nothing
// written to the checkpoint directory.

#include <cstdint>
#include <vector>

namespace cohort::train_app {

/// Evaluates --eval_checkpoint, or the latest checkpoint --checkpoint_dir's index names, on the
/// test set as training's final evaluation does: the model the flags build (`hidden`: --hidden
/// parsed), the images normalised as --normalize says, the moving averages of the parameters
/// where --moving_average_decay asks and the checkpoint holds them (without them, its variables,
/// with a warning either way the two disagree), batches of 1000 on the CPU with --threads. Prints
/// the "final:" line and writes --metrics_json. Reads the directory and creates nothing there:
/// no lock, no checkpoint, no summary, so it may run while a job writes there.
///
/// The checkpoint is the one named, never an older one in its place: InvalidArgument for a
/// directory without one, CheckpointError naming a damaged file; InvalidArgument for a checkpoint
/// trained with another --normalize, or in a job of more than one process (every rank refuses
/// alike, so none waits). CheckpointError for another model's checkpoint, naming both.
int evaluate_only(const std::vector<std::int64_t>& hidden);

}  // namespace cohort::train_app
