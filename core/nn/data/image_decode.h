#pragma once
// PNG and JPEG decoding, internal to core/nn/data: what the image folder reader (image_folder.cc)
// takes from libpng and libjpeg (image_decode.cc).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

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

}  // namespace cohort::data::detail
