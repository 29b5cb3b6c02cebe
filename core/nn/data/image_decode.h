#pragma once
// PNG and JPEG decoding, internal to core/nn/data: single images through libpng and libjpeg
// (image_decode.cc), and sets of them into one tensor (image_set.cc), for the image folder reader
// (image_folder.cc) and the TFRecord reader (tfrecord.cc).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cohort/core/nn/data/dataset.h"
#include "cohort/core/nn/tensor.h"

namespace cohort::data::detail {

/// An image's pixels: 8 bits per channel, rows from the top, channels interleaved (HWC).
struct Pixels {
  std::int64_t height = 0;
  std::int64_t width = 0;
  int channels = 0;  ///< 1 (grey) or 3 (RGB)
  int file_channels = 0;  ///< the file's: 1 for a grey image (with or without alpha), 3 otherwise
  std::vector<std::uint8_t> values;
};

/// The size and colour of the PNG or JPEG image in `bytes`, from its header alone (no values;
/// channels is file_channels). Throws DataError naming
/// `where` when the bytes are neither format, or the header is broken.
Pixels image_header(std::string_view bytes, const std::string& where);

/// Decodes the PNG or JPEG image in `bytes` into `channels` (1 or 3) channels of 8 bits: palettes
/// expanded, 16-bit values scaled to 8 bits, alpha dropped, grey repeated into RGB, and RGB made
/// grey as PIL's convert("L") makes it (ITU-R BT.601 weights on the stored values, rounded).
/// A fault of the data (a truncated file, a bad checksum, corrupt JPEG data, a CMYK JPEG) is a
/// DataError naming `where`.
Pixels decode_image(std::string_view bytes, int channels, const std::string& where);

/// InvalidArgument naming `where` unless channels is 0, 1 or 3 and height and width are both
/// positive (resize to them) or both 0 (keep the images' size).
void check_image_options(const std::string& where, std::int64_t height, std::int64_t width,
                         int channels);

/// What every image of a set becomes.
struct ImageLayout {
  std::int64_t height = 0;
  std::int64_t width = 0;
  int channels = 0;
  bool resize = false;          ///< else every image must have the first's size
  bool channels_given = false;  ///< else the first image's (colour read as grey is warned of)
  std::string first;            ///< the first image's name
};

/// The layout options ask for, what they leave open (0) taken from the set's first image.
ImageLayout image_layout(std::int64_t height, std::int64_t width, int channels,
                         std::string_view first_bytes, const std::string& first);

/// Decodes `count` images into [count, height, width, channels] of value / 255, resized
/// bilinearly with half-pixel centres where the layout says so, on every OpenMP thread: image
/// i's bytes are bytes(i), and name(i) names it in a DataError. `where` names the set in the
/// warning that colour images were read as grey.
Tensor decode_images(std::int64_t count, const std::function<std::string(std::int64_t)>& bytes,
                     const std::function<std::string(std::int64_t)>& name,
                     const ImageLayout& layout, const std::string& where);

/// Encoded images (`bytes`; image i named name(i) in errors), each decoded as decode_images()
/// does when its example is used; `where` names the set in the warning that colour images are
/// read as grey (given once).
std::shared_ptr<const ExampleSource> encoded_images(std::vector<std::string> bytes,
                                                    std::function<std::string(std::int64_t)> name,
                                                    const ImageLayout& layout,
                                                    const std::string& where);

/// The image files at `paths`, each decoded as decode_images() does when its example is used.
std::shared_ptr<const ExampleSource> image_files(std::vector<std::string> paths,
                                                 const ImageLayout& layout,
                                                 const std::string& where);

}  // namespace cohort::data::detail
