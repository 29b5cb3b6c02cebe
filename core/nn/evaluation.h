#pragma once
// A model's loss and metrics over a whole dataset.

#include <cstdint>

#include "cohort/core/nn/data/batch_iterator.h"
#include "cohort/core/nn/data/dataset.h"
#include "cohort/core/nn/model.h"

namespace cohort {

/// Mean loss and metrics of `model`'s current parameters over every example of `data`, in
/// order, `batch_size` at a time, in inference mode (no dropout, batch norm on its moving
/// statistics), with `image`'s normalisation (not its random crops or flips). All zero for an
/// empty dataset. Not thread-safe for one model.
StepMetrics evaluate_dataset(Model& model, const data::Dataset& data,
                             std::int64_t batch_size = 1000, const data::ImageOptions& image = {});

/// The same over a dataset split among the replicas of a job (collective over `replicas`): each
/// replica passes its own part (Dataset::shard of the same set) and gets the metrics of the
/// whole, as one process evaluating all of it would, up to the rounding of the loss's sum: the
/// losses, example counts and every metric's counts are summed over the replicas before the
/// metrics are made of them. Every replica's model must hold the same parameters and state.
StepMetrics evaluate_dataset(Model& model, const data::Dataset& part, CrossReplicaSum& replicas,
                             std::int64_t batch_size = 1000, const data::ImageOptions& image = {});

/// Model::check_data for `data`: an InvalidArgument naming the dataset (its file) when its
/// examples do not fit the model's input or its labels or targets do not fit the loss. With
/// `whole` (a set evaluated by itself, such as a test set, not one worker's part of one), also
/// when it holds no examples, whose metrics would be zeros.
void check_dataset(const Model& model, const data::Dataset& data, bool whole = false);

}  // namespace cohort
