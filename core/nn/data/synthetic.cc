// synthetic(): a file-free dataset for tests and smoke runs.

#include <algorithm>
#include <cmath>
#include <memory>
#include <numbers>
#include <utility>

#include "cohort/core/nn/data/dataset.h"
#include "cohort/core/nn/data/random.h"

namespace cohort::data {

Dataset synthetic(std::int64_t n, std::uint64_t seed, const SyntheticOptions& options) {
  if (n < 0 || options.rows < 1 || options.cols < 1 || options.num_classes < 1 ||
      !(options.noise >= 0.0f))
    throw InvalidArgument("synthetic: bad arguments: n " + std::to_string(n) + ", " +
                          std::to_string(options.rows) + "x" + std::to_string(options.cols) +
                          ", num_classes " + std::to_string(options.num_classes) + ", noise " +
                          std::to_string(options.noise));
  const std::int64_t rows = options.rows, cols = options.cols;
  // Blob centres on a circle well inside the image, far enough apart that neighbouring classes
  // overlap only in their tails: the task is easy for an MLP but not trivial for a linear probe
  // under the noise.
  const double radius = 0.3 * static_cast<double>(std::min(rows, cols));
  const double sigma = std::max(1.0, 0.1 * static_cast<double>(std::min(rows, cols)));
  const double cy = 0.5 * static_cast<double>(rows - 1), cx = 0.5 * static_cast<double>(cols - 1);

  auto storage = std::make_shared<Storage>();
  storage->num_classes = options.num_classes;
  storage->name = "synthetic(n=" + std::to_string(n) + ", seed=" + std::to_string(seed) + ")";
  storage->features.resize({n, rows, cols, 1});
  storage->labels.resize(static_cast<std::size_t>(n));

  std::mt19937_64 engine(detail::mix_seed(seed, 0));
  float* pixel = storage->features.data();
  for (std::int64_t i = 0; i < n; ++i) {
    const auto label = static_cast<std::int32_t>(
        detail::uniform_below(engine, static_cast<std::uint64_t>(options.num_classes)));
    storage->labels[static_cast<std::size_t>(i)] = label;
    const double angle = 2.0 * std::numbers::pi * label / options.num_classes;
    const double y0 = cy + radius * std::sin(angle) + 2.0 * detail::uniform_float(engine) - 1.0;
    const double x0 = cx + radius * std::cos(angle) + 2.0 * detail::uniform_float(engine) - 1.0;
    const double brightness = 0.6 + 0.4 * detail::uniform_float(engine);
    for (std::int64_t y = 0; y < rows; ++y) {
      for (std::int64_t x = 0; x < cols; ++x) {
        const double dy = static_cast<double>(y) - y0, dx = static_cast<double>(x) - x0;
        const double blob = brightness * std::exp(-(dy * dy + dx * dx) / (2.0 * sigma * sigma));
        const float noise = options.noise * (2.0f * detail::uniform_float(engine) - 1.0f);
        *pixel++ = std::clamp(static_cast<float>(blob) + noise, 0.0f, 1.0f);
      }
    }
  }
  return Dataset(std::move(storage));
}

}  // namespace cohort::data
