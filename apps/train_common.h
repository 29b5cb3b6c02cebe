#pragma once
// What train's modes share (apps/train.cc: training; apps/train_eval_only.cc: --eval_only): the
// model and its inputs as the flags set them, the metrics file and a duration in words.

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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

/// Every flag of the program (Cohort's own among them) under its name, with its value in this
/// process as a JSON string, integer, boolean or number, defaults included: what a metrics file
/// needs to tell the runs of a sweep apart, whichever flags they varied.
nlohmann::json flag_values_json();
/// The names of the flags given on the command line or in the environment, in the registry's order.
nlohmann::json flags_given_json();

/// Writes `metrics` to --metrics_json, indented; throws Error naming the flag when the file
/// cannot be written (a full disk, a lost mount).
void write_metrics_json(const nlohmann::json& metrics);

/// `seconds` as "1m05s", or "2h03m" from an hour on.
std::string duration(double seconds);

}  // namespace cohort::train_app
