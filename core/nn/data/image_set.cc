// Sets of images into one tensor: the layout every image gets, bilinear resizing, and decoding
// on every OpenMP thread (load_image_folder, load_images and the TFRecord reader share it).

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <exception>
#include <memory>
#include <utility>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/data/files.h"
#include "cohort/core/nn/data/image_decode.h"
#include "cohort/core/nn/ops/resize.h"

namespace cohort::data::detail {
namespace {

// `image` as height x width values / 255 into `out`.
void write_example(const Pixels& image, std::int64_t height, std::int64_t width,
                   float* out) {
  const int c = image.channels;
  const std::uint8_t* in = image.values.data();
  if (image.height == height && image.width == width) {
    // Exactly byte / 255.0f, as fashion_mnist() and TensorFlow's and PyTorch's loaders give.
    for (std::size_t i = 0; i < image.values.size(); ++i)
      out[i] = static_cast<float>(in[i]) / 255.0f;
    return;
  }
  const ops_detail::ResizeTaps rows = ops_detail::linear_taps(image.height, height);
  const ops_detail::ResizeTaps cols = ops_detail::linear_taps(image.width, width);
  const auto at = [&](std::int64_t y, std::int64_t x, int k) {
    return static_cast<float>(in[(y * image.width + x) * c + k]);
  };
  for (std::int64_t y = 0; y < height; ++y) {
    const float fy = rows.weight[y];
    for (std::int64_t x = 0; x < width; ++x) {
      const float fx = cols.weight[x];
      for (int k = 0; k < c; ++k) {
        const float top = at(rows.low[y], cols.low[x], k) +
                          fx * (at(rows.low[y], cols.high[x], k) - at(rows.low[y], cols.low[x], k));
        const float bottom =
            at(rows.high[y], cols.low[x], k) +
            fx * (at(rows.high[y], cols.high[x], k) - at(rows.high[y], cols.low[x], k));
        *out++ = (top + fy * (bottom - top)) / 255.0f;
      }
    }
  }
}

std::string size_text(std::int64_t height, std::int64_t width) {
  return std::to_string(height) + "x" + std::to_string(width);
}

// Decodes `bytes` (named `name`) into `out` as `layout` says; whether a colour image was read as
// grey.
bool decode_into(std::string_view bytes, const std::string& name, const ImageLayout& layout,
                 float* out) {
  const Pixels image = decode_image(bytes, layout.channels, name);
  if (!layout.resize && (image.height != layout.height || image.width != layout.width))
    fail(name, size_text(image.height, image.width) + " pixels where " + layout.first + " has " +
                   size_text(layout.height, layout.width) +
                   " (give a height and width to resize every image to)");
  write_example(image, layout.height, layout.width, out);
  return image.file_channels > layout.channels;
}

// Images decoded as their examples are used: image i's bytes are bytes(i), named name(i).
class DecodedOnUse : public ExampleSource {
 public:
  DecodedOnUse(std::function<std::string(std::int64_t)> bytes,
               std::function<std::string(std::int64_t)> name, ImageLayout layout, std::string where)
      : bytes_(std::move(bytes)), name_(std::move(name)), layout_(std::move(layout)),
        where_(std::move(where)) {}

  void read(std::int64_t i, float* out) const override {
    const bool greyed = decode_into(bytes_(i), name_(i), layout_, out);
    // Said once, for the first colour image read as grey because the first image is grey.
    if (greyed && !layout_.channels_given && !warned_.exchange(true))
      std::fprintf(stderr,
                   "[%s] warning: %s: colour images are read as grey because the first (%s) is "
                   "grey (%s is one); give 3 channels to keep their colour\n",
                   process_label().c_str(), where_.c_str(), layout_.first.c_str(),
                   name_(i).c_str());
  }

 private:
  std::function<std::string(std::int64_t)> bytes_, name_;
  ImageLayout layout_;
  std::string where_;
  mutable std::atomic<bool> warned_{false};
};

}  // namespace

std::shared_ptr<const ExampleSource> encoded_images(std::vector<std::string> bytes,
                                                    std::function<std::string(std::int64_t)> name,
                                                    const ImageLayout& layout,
                                                    const std::string& where) {
  auto held = std::make_shared<const std::vector<std::string>>(std::move(bytes));
  return std::make_shared<DecodedOnUse>(
      [held](std::int64_t i) { return held->at(static_cast<std::size_t>(i)); }, std::move(name),
      layout, where);
}

std::shared_ptr<const ExampleSource> image_files(std::vector<std::string> paths,
                                                 const ImageLayout& layout,
                                                 const std::string& where) {
  auto held = std::make_shared<const std::vector<std::string>>(std::move(paths));
  return std::make_shared<DecodedOnUse>(
      [held](std::int64_t i) {
        return read_whole_file(held->at(static_cast<std::size_t>(i)), "a PNG or JPEG image");
      },
      [held](std::int64_t i) { return held->at(static_cast<std::size_t>(i)); }, layout, where);
}

void check_image_options(const std::string& where, std::int64_t height, std::int64_t width,
                         int channels) {
  if (channels != 0 && channels != 1 && channels != 3)
    throw InvalidArgument(where + ": channels " + std::to_string(channels) +
                          " (1 for grey, 3 for RGB, 0 for the first image's)");
  if (height < 0 || width < 0 || (height == 0) != (width == 0))
    throw InvalidArgument(where + ": height " + std::to_string(height) + " and width " +
                          std::to_string(width) +
                          " (both positive to resize, both 0 to keep the images' size)");
}

ImageLayout image_layout(std::int64_t height, std::int64_t width, int channels,
                         std::string_view first_bytes, const std::string& first) {
  ImageLayout layout{height, width, channels, height > 0, channels != 0, first};
  if (!layout.resize || !layout.channels_given) {
    const Pixels head = image_header(first_bytes, first);
    if (!layout.resize) {
      layout.height = head.height;
      layout.width = head.width;
    }
    if (!layout.channels_given) layout.channels = head.channels;
  }
  return layout;
}

Tensor decode_images(std::int64_t count, const std::function<std::string(std::int64_t)>& bytes,
                     const std::function<std::string(std::int64_t)>& name,
                     const ImageLayout& layout, const std::string& where) {
  const std::int64_t height = layout.height, width = layout.width;
  const int channels = layout.channels;
  Tensor images({count, height, width, channels});
  const auto n = static_cast<std::size_t>(count);
  std::vector<std::exception_ptr> errors(n);
  std::vector<char> greyed(n, 0);  // colour read as grey
  const std::int64_t example_size = height * width * channels;
#pragma omp parallel for schedule(dynamic, 8)
  for (std::int64_t i = 0; i < count; ++i) {
    try {
      greyed[static_cast<std::size_t>(i)] =
          decode_into(bytes(i), name(i), layout, images.data() + i * example_size);
    } catch (...) {  // nothing may leave the parallel region (current_exception cannot throw)
      errors[static_cast<std::size_t>(i)] = std::current_exception();
    }
  }
  for (const std::exception_ptr& error : errors)
    if (error) std::rethrow_exception(error);
  // Channels chosen by the first image: colour read as grey because the first is grey is said.
  if (const auto grey = std::count(greyed.begin(), greyed.end(), 1); grey > 0 && !layout.channels_given)
    std::fprintf(stderr,
                 "[%s] warning: %s: %lld of %lld images are colour, read as grey because the first "
                 "(%s) is grey; give 3 channels to keep their colour\n",
                 process_label().c_str(), where.c_str(), static_cast<long long>(grey),
                 static_cast<long long>(count), layout.first.c_str());
  return images;
}

}  // namespace cohort::data::detail
