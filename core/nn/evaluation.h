#pragma once
// A model's loss and accuracy over a whole dataset.

#include <cstdint>

#include "cohort/core/nn/data/dataset.h"
#include "cohort/core/nn/model.h"

namespace cohort {

/// Mean loss and accuracy of `model`'s current parameters over every example of `data`, in
/// order, `batch_size` at a time (no dropout). {0, 0} for an empty dataset. Not thread-safe for
/// one model.
StepMetrics evaluate_dataset(Model& model, const data::Dataset& data,
                             std::int64_t batch_size = 1000);

}  // namespace cohort
