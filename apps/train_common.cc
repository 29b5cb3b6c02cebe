#include "train_common.h"

#include <cstdio>
#include <fstream>
#include <memory>

#include "cohort/core/base/error.h"
#include "cohort/core/base/flags.h"
#include "cohort/core/nn/models.h"

COHORT_DECLARE_string(model);
COHORT_DECLARE_int(resnet_blocks);
COHORT_DECLARE_bool(sync_batch_norm);
COHORT_DECLARE_float(label_smoothing);
COHORT_DECLARE_bool(normalize);
COHORT_DECLARE_int(crop_padding);
COHORT_DECLARE_bool(horizontal_flip);
COHORT_DECLARE_string(metrics_json);

namespace cohort::train_app {

Model model_from_flags(Graph& graph, const std::vector<std::int64_t>& hidden) {
  ResNetOptions resnet;
  resnet.blocks_per_stage = static_cast<int>(FLAGS_resnet_blocks);
  resnet.sync_batch_norm = FLAGS_sync_batch_norm;
  Model model = build_model(FLAGS_model, graph, hidden, resnet);
  if (FLAGS_label_smoothing != 0.0)
    model.set_loss(std::make_unique<SoftmaxCrossEntropyLoss>(static_cast<float>(FLAGS_label_smoothing)));
  return model;
}

data::ImageOptions image_options() {
  data::ImageOptions image;
  if (FLAGS_normalize) image.mean = {0.2860f}, image.std = {0.3530f};
  image.crop_padding = FLAGS_crop_padding;
  image.horizontal_flip = FLAGS_horizontal_flip;
  return image;
}

nlohmann::json flag_values_json() {
  nlohmann::json values = nlohmann::json::object();
  for (const flags::Flag& flag : flags::Registry::global().flags()) {
    switch (flag.type) {
      case flags::Type::kString: values[flag.name] = *static_cast<const std::string*>(flag.value); break;
      case flags::Type::kInt: values[flag.name] = *static_cast<const std::int64_t*>(flag.value); break;
      case flags::Type::kBool: values[flag.name] = *static_cast<const bool*>(flag.value); break;
      case flags::Type::kFloat: values[flag.name] = *static_cast<const double*>(flag.value); break;
    }
  }
  return values;
}

nlohmann::json flags_given_json() {
  const flags::Registry& registry = flags::Registry::global();
  nlohmann::json given = nlohmann::json::array();
  for (const flags::Flag& flag : registry.flags())
    if (registry.given(flag.name)) given.push_back(flag.name);
  return given;
}

void write_metrics_json(const nlohmann::json& metrics) {
  std::ofstream out(FLAGS_metrics_json);
  out << metrics.dump(2) << "\n";
  out.close();
  if (!out)
    throw Error("--metrics_json=" + FLAGS_metrics_json + ": cannot write the file (a full disk, a lost mount?)");
}

std::string duration(double seconds) {
  char text[32];
  const auto s = static_cast<long>(seconds + 0.5);
  if (s >= 3600) std::snprintf(text, sizeof text, "%ldh%02ldm", s / 3600, s % 3600 / 60);
  else std::snprintf(text, sizeof text, "%ldm%02lds", s / 60, s % 60);
  return text;
}

}  // namespace cohort::train_app
