// PNG through libpng, JPEG through libjpeg (libjpeg-turbo on Debian), from bytes in memory.
//
// Both libraries report a fault by calling an error function that must not return; as their
// manuals prescribe, ours longjmps back to a setjmp in the function that drives the library. No
// C++ call is under way when a jump leaves (the jumps start in the libraries' C code and in our
// callbacks, which neither allocate nor throw), and everything the driving function changes lives
// in a state object outside its frame, so the jump skips no destructor and leaves nothing
// indeterminate.

#include "cohort/core/nn/data/image_decode.h"

#include <png.h>
// jpeglib.h needs FILE and size_t declared first.
#include <cstddef>
#include <cstdio>
#include <jpeglib.h>
// jerror.h after jpeglib.h: the warning codes.
#include <jerror.h>

#include <csetjmp>
#include <cstdint>
#include <cstring>

#include "cohort/core/nn/data/dataset.h"
#include "cohort/core/nn/data/files.h"

namespace cohort::data::detail {
namespace {

constexpr std::string_view kPngMagic("\x89PNG\r\n\x1a\n", 8);
constexpr std::string_view kJpegMagic("\xff\xd8\xff", 3);

// RGB made grey: ITU-R BT.601 luma, 0.299 R + 0.587 G + 0.114 B, on the stored (gamma-encoded)
// values, rounded, in PIL's fixed point (weights in 1/65536), as PIL's convert("L").
// Applied to the decoded RGB of both formats: libpng's own conversion makes the colour linear
// first where the file declares its gamma, and libjpeg's grey output is its Y channel as stored.
void rgb_to_grey(Pixels& image) {
  const std::size_t n = image.values.size() / 3;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint8_t* rgb = &image.values[3 * i];
    image.values[i] = static_cast<std::uint8_t>(
        (rgb[0] * 19595u + rgb[1] * 38470u + rgb[2] * 7471u + 0x8000u) >> 16);
  }
  image.values.resize(n);
  image.channels = 1;
}

// Whether a header's size cannot be its image's, with why in `message`: more pixels than its file
// could hold (deflate packs at most 1032 bytes into one, and even an arithmetic-coded JPEG of one
// colour spends some bits on each block of 64 pixels: 2^20 pixels a byte of file is far beyond
// either), or more values than are decoded at all (2^30 at 3 channels: 4 GiB once made floats).
// A damaged or hostile header must not make an allocation of that size. Writes a char buffer:
// the caller may jump out of its frame next.
bool implausible_size(std::uint64_t width, std::uint64_t height, std::size_t file_bytes,
                      char* message, std::size_t size) {
  constexpr std::uint64_t kPixelsPerByte = 1 << 20, kMostValues = std::uint64_t{1} << 30;
  const std::uint64_t pixels = width * height;  // each below 2^32: no overflow
  if (pixels > kPixelsPerByte * file_bytes) {
    std::snprintf(message, size, "its header claims %llux%llu pixels, more than its %zu bytes can hold "
                  "(a damaged file)", static_cast<unsigned long long>(width),
                  static_cast<unsigned long long>(height), file_bytes);
    return true;
  }
  if (3 * pixels > kMostValues) {
    std::snprintf(message, size, "%llux%llu pixels: more than the 2^30 values an image may decode to",
                  static_cast<unsigned long long>(width), static_cast<unsigned long long>(height));
    return true;
  }
  return false;
}

// ---- PNG ------------------------------------------------------------------------------------

struct PngState {
  std::string_view bytes;
  std::size_t at = 0;
  char error[200] = {};
  png_structp png = nullptr;
  png_infop info = nullptr;
  std::vector<png_bytep> rows;
  Pixels out;

  ~PngState() { png_destroy_read_struct(&png, info != nullptr ? &info : nullptr, nullptr); }
};

void png_read_bytes(png_structp png, png_bytep out, std::size_t n) {
  auto* state = static_cast<PngState*>(png_get_io_ptr(png));
  if (n > state->bytes.size() - state->at) png_error(png, "the file ends early (truncated)");
  std::memcpy(out, state->bytes.data() + state->at, n);
  state->at += n;
}

[[noreturn]] void png_fail(png_structp png, png_const_charp message) {
  auto* state = static_cast<PngState*>(png_get_error_ptr(png));
  std::snprintf(state->error, sizeof state->error, "%s", message);
  png_longjmp(png, 1);
}

// libpng's warnings (an ancillary chunk it skips, an sRGB profile it knows to be off) leave the
// pixels right.
void png_ignore_warning(png_structp, png_const_charp) {}

// Reads the header into s.out, and with `channels` > 0 the pixels too, in `channels` channels (3
// for a colour image). False, with s.error, when libpng finds a fault.
bool run_png(PngState& s, int channels) {
  if (setjmp(png_jmpbuf(s.png))) return false;
  png_set_read_fn(s.png, &s, png_read_bytes);
  png_read_info(s.png, s.info);
  s.out.height = png_get_image_height(s.png, s.info);
  s.out.width = png_get_image_width(s.png, s.info);
  // The palette type has the colour bit too.
  const bool colour = (png_get_color_type(s.png, s.info) & PNG_COLOR_MASK_COLOR) != 0;
  s.out.channels = s.out.file_channels = colour ? 3 : 1;
  if (implausible_size(s.out.width, s.out.height, s.bytes.size(), s.error, sizeof s.error))
    return false;
  if (channels == 0) return true;

  png_set_expand(s.png);  // palette to RGB, 1-4 bit grey to 8 bits, a transparent colour to alpha
  png_set_scale_16(s.png);
  png_set_strip_alpha(s.png);
  if (!colour && channels == 3) png_set_gray_to_rgb(s.png);
  png_set_interlace_handling(s.png);
  png_read_update_info(s.png, s.info);
  if (png_get_channels(s.png, s.info) != channels || png_get_bit_depth(s.png, s.info) != 8)
    png_error(s.png, "libpng did not convert it to 8-bit channels");
  s.out.channels = channels;
  const auto row_bytes = static_cast<std::size_t>(s.out.width) * static_cast<std::size_t>(channels);
  s.out.values.resize(row_bytes * static_cast<std::size_t>(s.out.height));
  s.rows.resize(static_cast<std::size_t>(s.out.height));
  for (std::size_t y = 0; y < s.rows.size(); ++y) s.rows[y] = s.out.values.data() + y * row_bytes;
  png_read_image(s.png, s.rows.data());
  png_read_end(s.png, nullptr);
  return true;
}

Pixels png(std::string_view bytes, int channels, const std::string& where) {
  PngState s;
  s.bytes = bytes;
  s.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &s, png_fail, png_ignore_warning);
  if (s.png != nullptr) s.info = png_create_info_struct(s.png);
  if (s.info == nullptr) fail(where, "PNG: libpng could not allocate its state");
  if (!run_png(s, channels)) fail(where, std::string("PNG: ") + s.error);
  return std::move(s.out);
}

// ---- JPEG -----------------------------------------------------------------------------------

struct JpegError {
  jpeg_error_mgr manager;  // first: libjpeg hands our functions a pointer to it
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

struct JpegState {
  std::string_view bytes;
  JpegError error;
  jpeg_decompress_struct info;
  bool created = false;
  Pixels out;

  ~JpegState() {
    if (created) jpeg_destroy_decompress(&info);
  }
};

[[noreturn]] void jpeg_fail(j_common_ptr info) {
  auto* error = reinterpret_cast<JpegError*>(info->err);
  (*info->err->format_message)(info, error->message);
  std::longjmp(error->jump, 1);
}

// Level -1 is a warning. Those that mean the image data is missing or damaged (a truncated file,
// whose rest libjpeg would fill with grey; a bad Huffman code) are faults here, as a truncated file
// is to PIL and TensorFlow. The others leave the pixels right (bytes between segments, a JFIF
// version it does not know) and pass silently, as in PIL. Higher levels are trace messages.
void jpeg_message(j_common_ptr info, int level) {
  if (level >= 0) return;
  switch (info->err->msg_code) {
    case JWRN_JPEG_EOF:
    case JWRN_HIT_MARKER:
    case JWRN_MUST_RESYNC:
    case JWRN_HUFF_BAD_CODE:
      jpeg_fail(info);
    default:
      return;
  }
}

bool run_jpeg(JpegState& s, int channels) {
  s.info.err = jpeg_std_error(&s.error.manager);
  s.error.manager.error_exit = jpeg_fail;
  s.error.manager.emit_message = jpeg_message;
  if (setjmp(s.error.jump)) return false;
  jpeg_create_decompress(&s.info);
  s.created = true;
  jpeg_mem_src(&s.info, reinterpret_cast<const unsigned char*>(s.bytes.data()),
               static_cast<unsigned long>(s.bytes.size()));
  jpeg_read_header(&s.info, TRUE);
  s.out.height = s.info.image_height;
  s.out.width = s.info.image_width;
  s.out.channels = s.out.file_channels = s.info.jpeg_color_space == JCS_GRAYSCALE ? 1 : 3;
  if (s.info.jpeg_color_space == JCS_CMYK || s.info.jpeg_color_space == JCS_YCCK) {
    std::snprintf(s.error.message, sizeof s.error.message,
                  "a CMYK image, which is not read (convert it to RGB first)");
    return false;
  }
  if (implausible_size(s.out.width, s.out.height, s.bytes.size(), s.error.message,
                       sizeof s.error.message))
    return false;
  if (channels == 0) return true;

  s.info.out_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;  // 3 for a colour image
  jpeg_start_decompress(&s.info);
  if (s.info.output_components != channels) {
    std::snprintf(s.error.message, sizeof s.error.message,
                  "libjpeg gave %d channels where %d were asked for", s.info.output_components,
                  channels);
    return false;
  }
  s.out.channels = channels;
  const std::size_t row_bytes = static_cast<std::size_t>(s.out.width) * static_cast<std::size_t>(channels);
  s.out.values.resize(row_bytes * static_cast<std::size_t>(s.out.height));
  while (s.info.output_scanline < s.info.output_height) {
    JSAMPROW row = s.out.values.data() + s.info.output_scanline * row_bytes;
    jpeg_read_scanlines(&s.info, &row, 1);
  }
  jpeg_finish_decompress(&s.info);
  return true;
}

Pixels jpeg(std::string_view bytes, int channels, const std::string& where) {
  JpegState s;
  s.bytes = bytes;
  if (!run_jpeg(s, channels)) fail(where, std::string("JPEG: ") + s.error.message);
  return std::move(s.out);
}

// A colour image asked for in grey is decoded in RGB, then made grey.
Pixels decode(std::string_view bytes, int channels, const std::string& where) {
  const bool is_png = bytes.starts_with(kPngMagic);
  if (is_png || bytes.starts_with(kJpegMagic)) {
    const auto decode = is_png ? png : jpeg;
    if (channels != 1) return decode(bytes, channels, where);
    Pixels image = decode(bytes, 0, where);  // the header
    if (image.channels == 1) return decode(bytes, 1, where);
    image = decode(bytes, 3, where);
    rgb_to_grey(image);
    return image;
  }
  fail(where, bytes.empty() ? "an empty file, not a PNG or JPEG image"
                            : "not a PNG or JPEG image (its first bytes are neither format's)");
}

}  // namespace

Pixels image_header(std::string_view bytes, const std::string& where) {
  return decode(bytes, 0, where);
}

Pixels decode_image(std::string_view bytes, int channels, const std::string& where) {
  if (channels != 1 && channels != 3)
    fail(where, "asked for " + std::to_string(channels) + " channels (1 or 3)");
  return decode(bytes, channels, where);
}

}  // namespace cohort::data::detail
