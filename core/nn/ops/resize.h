#pragma once
// The sampling positions of an image resized along one axis, shared by the image readers'
// resizing and UpSampling2D's interpolation (internal to nn).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace cohort::ops_detail {

/// For each output index i of an axis resized from `in` to `out`: the two input indices it reads
/// and the weight of the second, output[i] = (1 - weight) input[low] + weight input[high].
struct ResizeTaps {
  std::vector<std::int64_t> low, high;
  std::vector<float> weight;  // of `high`
};

/// Linear interpolation with half-pixel centres (TensorFlow's tf.image.resize and Keras's
/// bilinear UpSampling2D, PyTorch's align_corners=False): output i samples the input at
/// (i + 0.5) * in / out - 0.5, clamped to the edge pixels.
inline ResizeTaps linear_taps(std::int64_t in, std::int64_t out) {
  ResizeTaps t;
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  for (std::int64_t i = 0; i < out; ++i) {
    const double at = std::clamp((static_cast<double>(i) + 0.5) * scale - 0.5, 0.0,
                                 static_cast<double>(in - 1));
    const auto low = static_cast<std::int64_t>(std::floor(at));
    t.low.push_back(low);
    t.high.push_back(std::min(low + 1, in - 1));
    t.weight.push_back(static_cast<float>(at - static_cast<double>(low)));
  }
  return t;
}

/// Nearest-neighbour (Keras's and PyTorch's "nearest"): output i reads input i * in / out
/// (rounded down), so an upsampling by s repeats each input s times.
inline ResizeTaps nearest_taps(std::int64_t in, std::int64_t out) {
  ResizeTaps t;
  for (std::int64_t i = 0; i < out; ++i) {
    t.low.push_back(i * in / out);
    t.high.push_back(i * in / out);
    t.weight.push_back(0.0f);
  }
  return t;
}

}  // namespace cohort::ops_detail
