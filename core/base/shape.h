#pragma once
// Tensor shapes: the vocabulary shared by the tensor library, placement and checkpoints.

#include <cstdint>
#include <string>
#include <vector>

namespace cohort {

/// Dimensions, outermost first. Images are NHWC, convolution filters HWIO (TensorFlow's layouts).
using Shape = std::vector<std::int64_t>;

/// Number of elements of a shape (1 for the empty shape, a scalar).
std::int64_t num_elements(const Shape& shape);
/// "[64, 28, 28, 1]".
std::string to_string(const Shape& shape);

}  // namespace cohort
