// save_png (loaders.h): an image tensor as an 8-bit PNG file, through libpng's simplified API.
#include <png.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/base/shape.h"
#include "cohort/core/nn/data/loaders.h"

namespace cohort::data {

void save_png(const std::string& path, const Tensor& image, float low, float high) {
  const Shape& shape = image.shape();
  const bool grey = shape.size() == 2 || (shape.size() == 3 && shape[2] == 1);
  if (!(grey || (shape.size() == 3 && shape[2] == 3)) || shape[0] < 1 || shape[1] < 1 ||
      shape[0] > std::numeric_limits<png_uint_32>::max() / 4 ||
      shape[1] > std::numeric_limits<png_uint_32>::max() / 4)
    throw InvalidArgument(path + ": save_png takes an image [height, width] or [height, width, "
                          "channels] of 1 or 3 channels, not " + to_string(shape));
  if (!(low < high) || !std::isfinite(low) || !std::isfinite(high))
    throw InvalidArgument(path + ": save_png's range [" + std::to_string(low) + ", " +
                          std::to_string(high) + "] is not finite with low < high");
  const std::int64_t width = shape[1], channels = grey ? 1 : 3;
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(image.size()));
  for (std::int64_t i = 0; i < image.size(); ++i) {
    const float v = image[i];
    if (!std::isfinite(v))
      throw InvalidArgument(path + ": save_png: value " + std::to_string(v) + " at row " +
                            std::to_string(i / (width * channels)) + ", column " +
                            std::to_string(i / channels % width) + " is not finite");
    const float unit = std::clamp((v - low) / (high - low), 0.0f, 1.0f);
    bytes[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(std::lround(unit * 255.0f));
  }
  png_image png{};
  png.version = PNG_IMAGE_VERSION;
  png.width = static_cast<png_uint_32>(width);
  png.height = static_cast<png_uint_32>(shape[0]);
  png.format = grey ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  if (png_image_write_to_file(&png, path.c_str(), 0, bytes.data(), 0, nullptr) == 0) {
    const std::string why = png.message;
    png_image_free(&png);
    throw Error(path + ": cannot write the PNG file: " + why);
  }
}

}  // namespace cohort::data
