#pragma once
// What train's modes share (apps/train.cc: training; apps/train_eval_only.cc: --eval_only): the
// model and its inputs as the flags set them, and a duration in words.

#include <cstdint>
#include <string>
#include <vector>

#include "cohort/core/nn/data/batch_iterator.h"
#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/model.h"

namespace cohort::train_app {

/// The model named by the flags (--model, --resnet_blocks, --sync_batch_norm, --label_smoothing),
/// on `graph`; `hidden` is --hidden parsed.
Model model_from_flags(Graph& graph, const std::vector<std::int64_t>& hidden);

/// Normalisation (--normalize) and augmentation (--crop_padding, --horizontal_flip) of the
/// images, from the flags.
data::ImageOptions image_options();

/// `seconds` as "1m05s", or "2h03m" from an hour on.
std::string duration(double seconds);

}  // namespace cohort::train_app
