// Folders of PNG and JPEG images (load_image_folder): Fashion-MNIST written as PNG files reads
// back as the IDX files' pixels; resizing, channels, classes and sharding; images of every kind
// written by PIL read as PIL reads them; and every kind of bad folder or file.

#include <doctest/doctest.h>
#include <png.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "cohort/core/base/flags.h"
#include "cohort/core/nn/data/batch_iterator.h"
#include "cohort/core/nn/data/dataset.h"
#include "cohort/core/nn/data/loaders.h"
#include "cohort/core/nn/threads.h"
#include "loader_checks.h"
#include "support/skip.h"
#include "support/temp_dir.h"

namespace cohort::data {
COHORT_DECLARE_string(data_dir);
}

namespace fs = std::filesystem;
using cohort::data::DataError;
using cohort::data::Dataset;
using cohort::data::ImageFolderOptions;
using cohort::data::load_image_folder;
using cohort::test::check_same_dataset;
using cohort::test::data_error;
using cohort::test::invalid_argument;
using cohort::test::slurp;
using cohort::test::spit;
using cohort::test::TempDir;

namespace {

// Writes an 8-bit PNG of `channels` (1 grey, 3 RGB, 4 RGBA) interleaved values, through libpng.
void write_png(const std::string& path, int height, int width, int channels,
               const std::vector<std::uint8_t>& values) {
  REQUIRE(values.size() == static_cast<std::size_t>(height * width * channels));
  fs::create_directories(fs::path(path).parent_path());
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(width);
  image.height = static_cast<png_uint_32>(height);
  image.format = channels == 1 ? PNG_FORMAT_GRAY : channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_RGBA;
  REQUIRE_MESSAGE(png_image_write_to_file(&image, path.c_str(), 0, values.data(), 0, nullptr) != 0,
                  image.message);
}

// Writes `bytes` at `path`, making its folders.
void put(const std::string& path, const std::string& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  spit(path, bytes);
}

// Writes an interlaced (Adam7) 8-bit grey PNG through libpng's full interface (its simplified
// one writes no interlaced files).
void write_interlaced_png(const std::string& path, int height, int width,
                          std::vector<std::uint8_t> values) {
  fs::create_directories(fs::path(path).parent_path());
  std::FILE* file = std::fopen(path.c_str(), "wb");
  REQUIRE(file != nullptr);
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  png_init_io(png, file);
  png_set_IHDR(png, info, static_cast<png_uint_32>(width), static_cast<png_uint_32>(height), 8,
               PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_ADAM7, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  std::vector<png_bytep> rows;
  for (int y = 0; y < height; ++y) rows.push_back(values.data() + y * width);
  png_set_rows(png, info, rows.data());
  png_write_png(png, info, PNG_TRANSFORM_IDENTITY, nullptr);
  png_destroy_write_struct(&png, &info);
  std::fclose(file);
}

// The value a byte is read as.
float pixel(int byte) { return static_cast<float>(byte) / 255.0f; }

std::vector<float> values(const Dataset& data, std::int64_t i) {
  const auto example = data.example(i);
  return {example.begin(), example.end()};
}

bool have_pil() {
  static const bool have =
      std::system("/usr/bin/python3 -c 'import numpy, PIL' >/dev/null 2>&1") == 0;
  return have;
}

}  // namespace

TEST_CASE("Fashion-MNIST written as PNG files reads back as the IDX files' pixels and labels") {
  if (!fs::exists(cohort::data::FLAGS_data_dir))
    return cohort::test::skip("no Fashion-MNIST in " + cohort::data::FLAGS_data_dir +
                              " (Debian: dataset-fashion-mnist)");
  const Dataset idx = cohort::data::fashion_mnist(cohort::data::Split::kTest);
  constexpr std::int64_t kImages = 300;
  TempDir dir("data_images_test");
  // Class c's images in folder "class_c"; the reader orders them by class, then by name.
  std::vector<std::int64_t> order(kImages);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::int64_t a, std::int64_t b) { return idx.label(a) < idx.label(b); });
  for (std::int64_t i = 0; i < kImages; ++i) {
    std::vector<std::uint8_t> bytes;
    for (float v : idx.example(i)) bytes.push_back(static_cast<std::uint8_t>(std::lround(v * 255)));
    char name[64];
    std::snprintf(name, sizeof name, "class_%d/%05lld.png", idx.label(i), static_cast<long long>(i));
    write_png(dir / name, 28, 28, 1, bytes);
  }
  std::vector<std::string> classes;
  const Dataset folder = load_image_folder(dir.str(), {}, &classes);
  REQUIRE(folder.size() == kImages);
  CHECK(folder.example_shape() == cohort::Shape{28, 28, 1});
  CHECK(folder.num_classes() == 10);
  REQUIRE(classes.size() == 10);
  CHECK(classes.front() == "class_0");
  CHECK(classes.back() == "class_9");
  for (std::int64_t i = 0; i < kImages; ++i) {
    CAPTURE(i);
    REQUIRE(folder.label(i) == idx.label(order[static_cast<std::size_t>(i)]));
    REQUIRE(values(folder, i) == values(idx, order[static_cast<std::size_t>(i)]));
  }
  // A shard decodes its own images alone, and they are the whole set's shard.
  for (int index = 0; index < 3; ++index) {
    CAPTURE(index);
    ImageFolderOptions options;
    options.shard = {index, 3};
    check_same_dataset(load_image_folder(dir.str(), options), folder.shard(index, 3));
  }
}

TEST_CASE("resizing is bilinear with half-pixel centres, as tf.image.resize") {
  TempDir dir("data_images_test");
  write_png(dir / "a/wide.png", 1, 2, 1, {0, 255});
  ImageFolderOptions options;
  options.height = 1;
  options.width = 4;
  const Dataset wide = load_image_folder(dir.str(), options);
  // Output x samples the input at (x + 0.5) / 2 - 0.5, clamped: -0.25, 0.25, 0.75, 1.25.
  const std::vector<float> expected{0.0f, 63.75f / 255.0f, 191.25f / 255.0f, 1.0f};
  const std::vector<float> got = values(wide, 0);
  REQUIRE(got.size() == 4);
  for (std::size_t i = 0; i < 4; ++i) CHECK(got[i] == doctest::Approx(expected[i]).epsilon(1e-6));

  // Halving each side averages each 2x2 block.
  TempDir square("data_images_test");
  std::vector<std::uint8_t> bytes(16);
  for (int i = 0; i < 16; ++i) bytes[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(i * 16);
  write_png(square / "a/x.png", 4, 4, 1, bytes);
  options.height = 2;
  options.width = 2;
  const std::vector<float> half = values(load_image_folder(square.str(), options), 0);
  REQUIRE(half.size() == 4);
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < 2; ++x) {
      const int top = (2 * y) * 4 + 2 * x;
      const float mean = (bytes[top] + bytes[top + 1] + bytes[top + 4] + bytes[top + 5]) / 4.0f;
      CHECK(half[static_cast<std::size_t>(y * 2 + x)] == doctest::Approx(mean / 255.0f).epsilon(1e-6));
    }
  // Every image is resized to the size asked for, whatever its own.
  write_png(square / "b/y.png", 3, 5, 1, std::vector<std::uint8_t>(15, 200));
  const Dataset both = load_image_folder(square.str(), options);
  CHECK(both.size() == 2);
  CHECK(values(both, 1) == std::vector<float>(4, pixel(200)));
}

TEST_CASE("resizing a non-square RGB image agrees with TensorFlow's formula, computed here") {
  // tf.image.resize (bilinear, half-pixel centres): in = (out + 0.5) * scale - 0.5, lower =
  // max(floor(in), 0), upper = min(ceil(in), n - 1), lerp = in - floor(in).
  const int in_h = 3, in_w = 5, out_h = 4, out_w = 2;
  std::vector<std::uint8_t> rgb;
  for (int i = 0; i < in_h * in_w * 3; ++i) rgb.push_back(static_cast<std::uint8_t>((i * 37 + 11) % 256));
  TempDir dir("data_images_test");
  write_png(dir / "a/x.png", in_h, in_w, 3, rgb);
  ImageFolderOptions options;
  options.height = out_h;
  options.width = out_w;
  const std::vector<float> got = values(load_image_folder(dir.str(), options), 0);
  REQUIRE(got.size() == static_cast<std::size_t>(out_h * out_w * 3));
  struct Tap {
    int lower, upper;
    double lerp;
  };
  const auto tap = [](int out, int n_in, int n_out) {
    const double in = (out + 0.5) * n_in / n_out - 0.5;
    return Tap{std::max(static_cast<int>(std::floor(in)), 0),
               std::min(static_cast<int>(std::ceil(in)), n_in - 1), in - std::floor(in)};
  };
  for (int y = 0; y < out_h; ++y)
    for (int x = 0; x < out_w; ++x)
      for (int c = 0; c < 3; ++c) {
        const Tap ty = tap(y, in_h, out_h), tx = tap(x, in_w, out_w);
        const auto at = [&](int yy, int xx) { return static_cast<double>(rgb[(yy * in_w + xx) * 3 + c]); };
        const double top = at(ty.lower, tx.lower) + (at(ty.lower, tx.upper) - at(ty.lower, tx.lower)) * tx.lerp;
        const double bottom = at(ty.upper, tx.lower) + (at(ty.upper, tx.upper) - at(ty.upper, tx.lower)) * tx.lerp;
        CAPTURE(y);
        CAPTURE(x);
        CAPTURE(c);
        CHECK(got[static_cast<std::size_t>((y * out_w + x) * 3 + c)] ==
              doctest::Approx((top + (bottom - top) * ty.lerp) / 255).epsilon(1e-5));
      }
}

TEST_CASE("an interlaced PNG and a 16-bit RGB one read as their pixels") {
  TempDir dir("data_images_test");
  std::vector<std::uint8_t> grey;
  for (int i = 0; i < 9 * 11; ++i) grey.push_back(static_cast<std::uint8_t>(i * 7 % 256));
  write_interlaced_png(dir / "a/interlaced.png", 9, 11, grey);
  const std::vector<float> got = values(load_image_folder(dir.str()), 0);
  REQUIRE(got.size() == grey.size());
  for (std::size_t i = 0; i < grey.size(); ++i) CHECK(got[i] == pixel(grey[i]));

  // 16 bits per channel, scaled to 8 as round(v / 257).
  TempDir wide("data_images_test");
  std::vector<std::uint16_t> rgb16;
  for (int i = 0; i < 2 * 3 * 3; ++i) rgb16.push_back(static_cast<std::uint16_t>(i * 3851 + 128));
  fs::create_directories(wide / "a");
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = 3;
  image.height = 2;
  image.format = PNG_FORMAT_RGB | PNG_FORMAT_FLAG_LINEAR;
  REQUIRE(png_image_write_to_file(&image, (wide / "a/x.png").c_str(), 0, rgb16.data(), 0, nullptr) != 0);
  const std::vector<float> got16 = values(load_image_folder(wide.str()), 0);
  REQUIRE(got16.size() == rgb16.size());
  for (std::size_t i = 0; i < rgb16.size(); ++i)
    CHECK(got16[i] == pixel(static_cast<int>(std::lround(rgb16[i] / 257.0))));
}

TEST_CASE("channels: the first image's by default; colour made grey by BT.601, grey made RGB") {
  TempDir dir("data_images_test");
  // Folder "a" sorts first: its grey image decides the default.
  write_png(dir / "a/grey.png", 1, 2, 1, {10, 250});
  write_png(dir / "b/colour.png", 1, 2, 3, {255, 0, 0, 30, 60, 90});
  write_png(dir / "c/alpha.png", 1, 2, 4, {0, 255, 0, 7, 0, 255, 0, 7});
  const Dataset grey = load_image_folder(dir.str());
  CHECK(grey.example_shape() == cohort::Shape{1, 2, 1});
  // round(0.299 R + 0.587 G + 0.114 B), on the stored values (libpng would make this file's
  // colour linear first, as its sRGB chunk asks; PIL and TensorFlow do not).
  CHECK(values(grey, 1) == std::vector<float>{pixel(76), pixel(54)});
  CHECK(values(grey, 2) == std::vector<float>{pixel(150), pixel(150)});  // alpha dropped

  ImageFolderOptions rgb;
  rgb.channels = 3;
  const Dataset coloured = load_image_folder(dir.str(), rgb);
  CHECK(coloured.example_shape() == cohort::Shape{1, 2, 3});
  CHECK(values(coloured, 0) == std::vector<float>{pixel(10), pixel(10), pixel(10), pixel(250),
                                                  pixel(250), pixel(250)});
  CHECK(values(coloured, 1) ==
        std::vector<float>{pixel(255), pixel(0), pixel(0), pixel(30), pixel(60), pixel(90)});
  CHECK(values(coloured, 2) ==
        std::vector<float>{pixel(0), pixel(255), pixel(0), pixel(0), pixel(255), pixel(0)});

  // A colour image first gives three channels by default.
  TempDir first_colour("data_images_test");
  write_png(first_colour / "a/colour.png", 1, 2, 3, {255, 0, 0, 30, 60, 90});
  write_png(first_colour / "b/grey.png", 1, 2, 1, {10, 250});
  CHECK(load_image_folder(first_colour.str()).example_shape() == cohort::Shape{1, 2, 3});
}

TEST_CASE("classes: the sorted subfolders, or those given; which files count as images") {
  TempDir dir("data_images_test");
  write_png(dir / "dog/1.png", 1, 1, 1, {1});
  write_png(dir / "cat/2.png", 1, 1, 1, {2});
  write_png(dir / "cat/deeper/3.PNG", 1, 1, 1, {3});  // any depth, any case
  write_png(dir / "cat/.hidden.png", 1, 1, 1, {4});
  write_png(dir / "cat/.cache/5.png", 1, 1, 1, {5});
  write_png(dir / ".trash/6.png", 1, 1, 1, {6});
  spit(dir / "cat/notes.txt", "not an image");  // passed over, with a warning
  spit(dir / "README", "files beside the class folders are not images of a class");

  std::vector<std::string> classes;
  const Dataset found = load_image_folder(dir.str(), {}, &classes);
  CHECK(classes == std::vector<std::string>{"cat", "dog"});
  REQUIRE(found.size() == 3);
  CHECK(found.label(0) == 0);
  CHECK(values(found, 0)[0] == pixel(2));
  CHECK(values(found, 1)[0] == pixel(3));
  CHECK(found.label(2) == 1);

  // A test set read with the training set's classes: their order, one without a folder.
  ImageFolderOptions given;
  given.class_names = {"dog", "bird", "cat"};
  const Dataset test = load_image_folder(dir.str(), given, &classes);
  CHECK(classes == given.class_names);
  CHECK(test.num_classes() == 3);
  REQUIRE(test.size() == 3);
  // In the order of the classes given: dog/1.png, then cat's two.
  CHECK(test.label(0) == 0);
  CHECK(values(test, 0)[0] == pixel(1));
  CHECK(test.label(1) == 2);
  CHECK(test.label(2) == 2);

  // A link to a folder is followed, once: a link back up does not loop.
  fs::create_directory_symlink("..", dir / "cat/deeper/up");
  fs::create_directory_symlink(dir / "dog", dir / "cat/dogs");
  const Dataset linked = load_image_folder(dir.str());
  CHECK(linked.size() == 4);  // cat/2, cat/deeper/3, cat/dogs/1 (a cat now), dog/1
  CHECK(linked.label(2) == 0);
  CHECK(values(linked, 2)[0] == pixel(1));
  fs::remove(dir / "cat/deeper/up");
  fs::remove(dir / "cat/dogs");

  given.class_names = {"dog"};
  CHECK(data_error([&] { load_image_folder(dir.str(), given); }) ==
        dir.str() + ": subfolder cat is not one of the 1 classes given (dog)");
  given.class_names = {"dog", "cat", "dog"};
  CHECK(invalid_argument([&] { load_image_folder(dir.str(), given); }).find("repeats") !=
        std::string::npos);
}

TEST_CASE("images of every kind written by PIL read as PIL reads them") {
  if (!have_pil())
    return cohort::test::skip("/usr/bin/python3 cannot import numpy and PIL (Debian: python3-numpy python3-pil)");
  TempDir dir("data_images_test");
  // Each case: a folder with one image, and what PIL (or the PNG format, for 16 bits) makes of it
  // at the channels asked for, as a uint8 .npy; "cases.txt" lists name, channels, tolerance.
  spit(dir / "script.py", R"(
import os
import numpy as np
from PIL import Image

rng = np.random.default_rng(7)
h, w = 13, 17
# A smooth picture (JPEG's kind of image) with some noise on top.
y, x = np.mgrid[0:h, 0:w]
rgb = np.stack([x * 15, y * 19, (x + y) * 8], axis=-1) + rng.integers(0, 20, (h, w, 3))
rgb = np.clip(rgb, 0, 255).astype(np.uint8)
cases = []

def case(name, image, ext, channels, tolerance, expected=None, **save):
    os.makedirs(f"{name}/only", exist_ok=True)
    path = f"{name}/only/image.{ext}"
    image.save(path, **save)
    if expected is None:
        back = Image.open(path)
        expected = np.asarray(back.convert("L" if channels == 1 else "RGB"))
    np.save(f"{name}.npy", expected.reshape(h, w, channels).astype(np.uint8))
    cases.append(f"{name} {channels} {tolerance}")

base = Image.fromarray(rgb, "RGB")
case("rgb_png", base, "png", 3, 0)
case("rgb_png_as_grey", base, "png", 1, 0)
case("rgba_png", Image.fromarray(np.dstack([rgb, rgb[..., :1]]), "RGBA"), "png", 3, 0)
case("grey_alpha_png", base.convert("LA"), "png", 1, 0)
case("palette_png", base.quantize(colors=16), "png", 3, 0)
case("palette_png_as_grey", base.quantize(colors=16), "png", 1, 0)
case("one_bit_png", base.convert("1"), "png", 1, 0)
wide = (rgb[..., 0].astype(np.uint16) * 257 + rng.integers(0, 257, (h, w))).astype(np.uint16)
case("sixteen_bit_png", Image.fromarray(wide, "I;16"), "png", 1, 0,
     expected=np.round(wide / 257.0))
case("grey_transparent_png", base.convert("L"), "png", 1, 0, transparency=5)
case("palette_transparent_png", base.quantize(colors=16), "png", 3, 0, transparency=0)
case("grey_alpha_as_rgb", base.convert("LA"), "png", 3, 0)
case("rgb_jpeg", base, "jpg", 3, 0, quality=90)
case("progressive_jpeg", base, "jpeg", 3, 0, quality=80, progressive=True)
case("grey_jpeg", base.convert("L"), "jpg", 1, 0)
case("grey_jpeg_as_rgb", base.convert("L"), "JPG", 3, 0)
case("jpeg_as_grey", base, "jpg", 1, 0)

base.save("full.jpg", quality=90)
data = open("full.jpg", "rb").read()
# Bytes between two segments (before the start of scan): libjpeg warns ("extraneous bytes before
# marker 0xda") and decodes it as it was.
sos = data.index(b"\xff\xda")
os.makedirs("extra_bytes_jpeg/only", exist_ok=True)
open("extra_bytes_jpeg/only/image.jpg", "wb").write(data[:sos] + b"\x00\x00" + data[sos:])
np.save("extra_bytes_jpeg.npy", np.asarray(Image.open("full.jpg").convert("RGB")))
cases.append("extra_bytes_jpeg 3 0")
os.makedirs("bad/truncated_jpeg/only", exist_ok=True)
open("bad/truncated_jpeg/only/image.jpg", "wb").write(data[: len(data) // 2])
# A start-of-frame claiming 40000x40000 pixels (its height at 5 bytes past the marker, then the width).
sof = data.index(b"\xff\xc0")
os.makedirs("bad/huge_jpeg/only", exist_ok=True)
open("bad/huge_jpeg/only/image.jpg", "wb").write(
    data[: sof + 5] + (40000).to_bytes(2, "big") * 2 + data[sof + 9 :])
os.makedirs("bad/cmyk_jpeg/only", exist_ok=True)
base.convert("CMYK").save("bad/cmyk_jpeg/only/image.jpg")
open("cases.txt", "w").write("\n".join(cases) + "\n")
)");
  const std::string command =
      "cd '" + dir.str() + "' && /usr/bin/python3 script.py > python.log 2>&1";
  const int status = std::system(command.c_str());
  REQUIRE_MESSAGE(status == 0, slurp(dir / "python.log"));

  std::istringstream cases(slurp(dir / "cases.txt"));
  int count = 0;
  for (std::string name; cases >> name;) {
    int channels = 0, tolerance = 0;
    cases >> channels >> tolerance;
    CAPTURE(name);
    ImageFolderOptions options;
    options.channels = channels;
    const Dataset image = load_image_folder(dir / name, options);
    const cohort::data::NpyArray expected = cohort::data::load_npy(dir / (name + ".npy"));
    REQUIRE(image.example_shape() == expected.values.shape());
    const std::vector<float> got = values(image, 0);
    float worst = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
      worst = std::max(worst, std::abs(got[i] * 255 - expected.values[static_cast<std::int64_t>(i)]));
    CHECK(worst <= tolerance + 1e-3f);
    ++count;
  }
  CHECK(count == 17);
  const std::string truncated = data_error([&] { load_image_folder(dir / "bad/truncated_jpeg"); });
  CHECK_MESSAGE(truncated.starts_with(dir / "bad/truncated_jpeg/only/image.jpg: JPEG: "), truncated);
  const std::string huge = data_error([&] { load_image_folder(dir / "bad/huge_jpeg"); });
  CHECK_MESSAGE(huge.starts_with(dir / "bad/huge_jpeg/only/image.jpg" +
                                 ": JPEG: its header claims 40000x40000 pixels, more than its "),
                huge);
  const std::string cmyk = data_error([&] { load_image_folder(dir / "bad/cmyk_jpeg"); });
  CHECK_MESSAGE(cmyk == dir / "bad/cmyk_jpeg/only/image.jpg" +
                            ": JPEG: a CMYK image, which is not read (convert it to RGB first)",
                cmyk);
}

TEST_CASE("load_images reads files in the order given, as the folder reader does") {
  TempDir dir("data_images_test");
  write_png(dir / "a/1.png", 2, 2, 1, {1, 2, 3, 4});
  write_png(dir / "b/2.png", 2, 2, 3, std::vector<std::uint8_t>(12, 50));
  write_png(dir / "b/3.png", 4, 4, 1, std::vector<std::uint8_t>(16, 90));
  const cohort::Tensor two = cohort::data::load_images({dir / "b/2.png", dir / "a/1.png"}, 2, 2, 3);
  CHECK(two.shape() == cohort::Shape{2, 2, 2, 3});
  CHECK(two[0] == pixel(50));
  CHECK(two[12] == pixel(1));  // grey repeated into RGB
  CHECK(two[15] == pixel(2));
  // Size and channels from the first where not given; every image must then have its size.
  CHECK(cohort::data::load_images({dir / "a/1.png"}).shape() == cohort::Shape{1, 2, 2, 1});
  CHECK(data_error([&] { cohort::data::load_images({dir / "a/1.png", dir / "b/3.png"}); })
            .starts_with(dir / "b/3.png" + ": 4x4 pixels where "));
  CHECK(cohort::data::load_images({dir / "a/1.png", dir / "b/3.png"}, 3, 3).shape() ==
        cohort::Shape{2, 3, 3, 1});
  CHECK(data_error([&] { cohort::data::load_images({dir / "a/1.png", dir / "nothing.png"}); }) ==
        dir / "nothing.png" + ": no such file");
  CHECK(invalid_argument([&] { cohort::data::load_images({}); }) == "load_images: no paths");
}

TEST_CASE("a bad folder or file is a DataError naming it") {
  TempDir dir("data_images_test");
  CHECK(data_error([&] { load_image_folder(dir / "missing"); }) == dir / "missing" + ": no such folder");
  spit(dir / "file", "x");
  CHECK(data_error([&] { load_image_folder(dir / "file"); }).starts_with(dir / "file" + ": not a folder"));
  fs::create_directories(dir / "empty");
  CHECK(data_error([&] { load_image_folder(dir / "empty"); })
            .starts_with(dir / "empty" + ": no class subfolders"));
  put(dir / "no_images/a/x.txt", "x");
  CHECK(data_error([&] { load_image_folder(dir / "no_images"); }) ==
        dir / "no_images" + ": no .png, .jpg or .jpeg images in its 1 class subfolders (a)");

  put(dir / "text/a/x.png", "hello, not a picture");
  CHECK(data_error([&] { load_image_folder(dir / "text"); }) ==
        dir / "text/a/x.png" + ": not a PNG or JPEG image (its first bytes are neither format's)");
  put(dir / "zero/a/x.jpg", "");
  CHECK(data_error([&] { load_image_folder(dir / "zero"); }) ==
        dir / "zero/a/x.jpg" + ": an empty file, not a PNG or JPEG image");

  write_png(dir / "truncated/a/x.png", 8, 8, 3, std::vector<std::uint8_t>(192, 9));
  const std::string whole = slurp(dir / "truncated/a/x.png");
  spit(dir / "truncated/a/x.png", whole.substr(0, whole.size() - 20));
  CHECK(data_error([&] { load_image_folder(dir / "truncated"); })
            .starts_with(dir / "truncated/a/x.png" + ": PNG: "));
  // A byte of the pixel data changed: its chunk's CRC no longer holds.
  std::string flipped = whole;
  const std::size_t data = whole.find("IDAT") + 6;
  flipped[data] = static_cast<char>(flipped[data] ^ 0x55);
  put(dir / "corrupt/a/x.png", flipped);
  CHECK(data_error([&] { load_image_folder(dir / "corrupt"); })
            .starts_with(dir / "corrupt/a/x.png" + ": PNG: "));

  // A header claiming far more pixels than its file could hold is refused before anything that
  // size is allocated (a damaged or hostile file): IHDR's width at byte 16, its height at 20,
  // the chunk's CRC (of its type and data, from byte 12) at 29.
  std::string huge = whole;
  const auto put_be32 = [&](std::size_t at, std::uint32_t v) {
    for (int b = 0; b < 4; ++b) huge[at + static_cast<std::size_t>(b)] = static_cast<char>(v >> (24 - 8 * b));
  };
  put_be32(16, 100000);
  put_be32(20, 100000);
  put_be32(29, static_cast<std::uint32_t>(
                   crc32(crc32(0, nullptr, 0), reinterpret_cast<const Bytef*>(huge.data() + 12), 17)));
  put(dir / "huge/a/x.png", huge);
  CHECK(data_error([&] { load_image_folder(dir / "huge"); }) ==
        dir / "huge/a/x.png" + ": PNG: its header claims 100000x100000 pixels, more than its " +
            std::to_string(huge.size()) + " bytes can hold (a damaged file)");

  // Without a size to resize to, every image must have the first's.
  write_png(dir / "sizes/a/first.png", 2, 3, 1, std::vector<std::uint8_t>(6, 1));
  write_png(dir / "sizes/b/other.png", 3, 2, 1, std::vector<std::uint8_t>(6, 1));
  CHECK(data_error([&] { load_image_folder(dir / "sizes"); }) ==
        dir / "sizes/b/other.png" + ": 3x2 pixels where " + dir / "sizes/a/first.png" +
            " has 2x3 (give a height and width to resize every image to)");

  ImageFolderOptions options;
  options.channels = 2;
  CHECK(invalid_argument([&] { load_image_folder(dir / "sizes", options); }).find("channels 2") !=
        std::string::npos);
  options.channels = 0;
  options.height = 4;
  CHECK(invalid_argument([&] { load_image_folder(dir / "sizes", options); })
            .find("height 4 and width 0") != std::string::npos);
  options.height = 0;
  options.shard = {3, 3};
  CHECK(invalid_argument([&] { load_image_folder(dir / "sizes", options); }).find("shard index 3") !=
        std::string::npos);
}

TEST_CASE("images decoded as they are used give what the images in memory give") {
  TempDir dir("data_images_test");
  std::uint64_t state = 99;
  for (int i = 0; i < 45; ++i) {
    std::vector<std::uint8_t> rgb(6 * 5 * 3);
    for (auto& v : rgb) {
      state = state * 6364136223846793005u + 1442695040888963407u;
      v = static_cast<std::uint8_t>(state >> 56);
    }
    write_png(dir / ("class" + std::to_string(i % 3) + "/" + std::to_string(i) + ".png"), 6, 5, 3, rgb);
  }
  ImageFolderOptions options;
  options.height = 8;
  options.width = 8;
  const Dataset memory = load_image_folder(dir.str(), options);
  options.in_memory = false;
  const Dataset on_use = load_image_folder(dir.str(), options);
  CHECK(memory.in_memory());
  CHECK_FALSE(on_use.in_memory());
  CHECK(on_use.storage()->features.size() == 0);  // no floats held
  REQUIRE(on_use.size() == memory.size());
  CHECK(on_use.example_shape() == memory.example_shape());
  CHECK_THROWS_AS(on_use.example(0), cohort::Error);
  std::vector<float> made(static_cast<std::size_t>(on_use.example_size()));
  for (std::int64_t i = 0; i < on_use.size(); ++i) {
    CAPTURE(i);
    on_use.read_example(i, made.data());
    REQUIRE(made == values(memory, i));
    REQUIRE(on_use.label(i) == memory.label(i));
  }
  // A shard of it, and one read as a shard, make the whole set's shard.
  const Dataset shard = on_use.shard(1, 4);
  options.shard = {1, 4};
  const Dataset read_shard = load_image_folder(dir.str(), options);
  CHECK_FALSE(shard.in_memory());
  const Dataset memory_shard = memory.shard(1, 4);
  REQUIRE(shard.size() == memory_shard.size());
  REQUIRE(read_shard.size() == memory_shard.size());
  for (std::int64_t i = 0; i < shard.size(); ++i) {
    shard.read_example(i, made.data());
    CHECK(made == values(memory_shard, i));
    read_shard.read_example(i, made.data());
    CHECK(made == values(memory_shard, i));
    CHECK(read_shard.label(i) == memory_shard.label(i));
  }
  // Sums, and shuffled batches cropped, flipped and normalised: the same.
  const auto sums = cohort::data::feature_sums(on_use), memory_sums = cohort::data::feature_sums(memory);
  CHECK(sums.sum == memory_sums.sum);
  CHECK(sums.sum_squares == memory_sums.sum_squares);
  // Made on three threads (tests run with one by default).
  const int threads = cohort::intra_op_threads();
  cohort::set_intra_op_threads(3);
  cohort::data::BatchOptions batches{.batch_size = 8, .seed = 3};
  batches.image = {.mean = {0.5f}, .std = {0.25f}, .crop_padding = 2, .horizontal_flip = true};
  cohort::data::BatchIterator a(memory, batches), b(on_use, batches);
  cohort::data::Batch x, y;
  const auto same = [](const cohort::data::Batch& p, const cohort::data::Batch& q) {
    return p.labels == q.labels &&
           std::vector<float>(p.features.span().begin(), p.features.span().end()) ==
               std::vector<float>(q.features.span().begin(), q.features.span().end());
  };
  for (int step = 0; step < 12; ++step) {  // past an epoch's end
    CAPTURE(step);
    REQUIRE(a.next(x));
    REQUIRE(b.next(y));
    REQUIRE(same(x, y));
  }
  // Neither cropped nor flipped (evaluation's batches): made in place, normalised.
  auto c = cohort::data::BatchIterator::in_order(memory, 16, batches.image);
  auto d = cohort::data::BatchIterator::in_order(on_use, 16, batches.image);
  for (int step = 0; step < 3; ++step) {
    REQUIRE(c.next(x));
    REQUIRE(d.next(y));
    REQUIRE(same(x, y));
  }
  cohort::set_intra_op_threads(threads);
  // A file broken after the listing is found when a batch takes it, and named.
  cohort::test::spit(dir / "class1/4.png", "no longer an image");
  options.shard = {};
  const Dataset broken = load_image_folder(dir.str(), options);
  cohort::data::BatchIterator e = cohort::data::BatchIterator::in_order(broken, 100);
  CHECK(data_error([&] { e.next(y); }) ==
        dir / "class1/4.png" + ": not a PNG or JPEG image (its first bytes are neither format's)");
}

TEST_CASE("a validation split: the two subsets part the folder, by the seed, each in its order") {
  TempDir dir("data_images_test");
  for (int i = 0; i < 50; ++i)
    write_png(dir / ("c" + std::to_string(i % 2) + "/" + std::to_string(100 + i) + ".png"), 1, 1, 1,
              {static_cast<std::uint8_t>(i)});
  ImageFolderOptions options;
  options.validation_split = 0.3;
  options.seed = 5;
  const Dataset training = load_image_folder(dir.str(), options);
  options.subset = ImageFolderOptions::Subset::kValidation;
  const Dataset validation = load_image_folder(dir.str(), options);
  REQUIRE(validation.size() == 15);  // floor(0.3 * 50)
  REQUIRE(training.size() == 35);
  std::vector<float> seen;
  for (const Dataset* d : {&training, &validation})
    for (std::int64_t i = 0; i < d->size(); ++i) {
      seen.push_back(values(*d, i)[0]);
      // Class c holds the images of parity c.
      CHECK(static_cast<int>(std::lround(values(*d, i)[0] * 255)) % 2 == d->label(i));
    }
  std::sort(seen.begin(), seen.end());
  CHECK(std::adjacent_find(seen.begin(), seen.end()) == seen.end());  // disjoint
  CHECK(seen.size() == 50);                                           // and whole
  // The folder's order within a subset: class by class, then by name.
  for (std::int64_t i = 1; i < validation.size(); ++i)
    CHECK((validation.label(i - 1) < validation.label(i) ||
           (validation.label(i - 1) == validation.label(i) && values(validation, i - 1)[0] < values(validation, i)[0])));
  // The same seed, the same subset; another seed, another.
  check_same_dataset(load_image_folder(dir.str(), options), validation);
  options.seed = 6;
  const Dataset other = load_image_folder(dir.str(), options);
  bool differs = false;
  for (std::int64_t i = 0; i < other.size(); ++i) differs = differs || values(other, i) != values(validation, i);
  CHECK(differs);
  // A shard of a subset is the subset's shard.
  options.seed = 5;
  options.subset = ImageFolderOptions::Subset::kTraining;
  options.shard = {2, 3};
  check_same_dataset(load_image_folder(dir.str(), options), training.shard(2, 3));
  options.shard = {};
  options.validation_split = 1.5;
  CHECK(invalid_argument([&] { load_image_folder(dir.str(), options); }).find("validation_split 1.5") !=
        std::string::npos);
  options.validation_split = 0.01;
  CHECK(data_error([&] { load_image_folder(dir.str(), options); })
            .find("leaves the validation subset empty") != std::string::npos);
}

TEST_CASE("save_png writes images the folder reader reads back, grey and RGB, from any range") {
  TempDir dir("data_images_test");
  // Values on the byte grid: read back exactly (byte / 255).
  cohort::Tensor grey({5, 7});
  for (std::int64_t i = 0; i < grey.size(); ++i) grey[i] = static_cast<float>((i * 37) % 256) / 255.0f;
  fs::create_directories(dir / "grey/x");
  cohort::data::save_png(dir / "grey/x/a.png", grey);
  // RGB from [-1, 1] (a tanh generator's range), a value outside clipped.
  cohort::Tensor colour({4, 3, 3});
  for (std::int64_t i = 0; i < colour.size(); ++i) colour[i] = static_cast<float>((i * 53) % 256) / 255.0f * 2 - 1;
  colour[5] = 7.0f;
  fs::create_directories(dir / "colour/x");
  cohort::data::save_png(dir / "colour/x/b.png", colour, -1.0f, 1.0f);

  const Dataset g = load_image_folder(dir / "grey");
  REQUIRE(g.size() == 1);
  REQUIRE(g.example_shape() == cohort::Shape{5, 7, 1});
  for (std::int64_t i = 0; i < grey.size(); ++i) CHECK(g.example(0)[i] == doctest::Approx(grey[i]).epsilon(1e-6));
  const Dataset c = load_image_folder(dir / "colour");
  REQUIRE(c.example_shape() == cohort::Shape{4, 3, 3});
  for (std::int64_t i = 0; i < colour.size(); ++i) {
    CAPTURE(i);
    const float expected = i == 5 ? 1.0f : (colour[i] + 1) / 2;  // back on [0, 1]
    CHECK(c.example(0)[i] == doctest::Approx(expected).epsilon(1e-5));
  }

  cohort::Tensor bad({2, 2, 2});
  CHECK_THROWS_WITH_AS(cohort::data::save_png(dir / "x.png", bad),
                       doctest::Contains("channels] of 1 or 3 channels, not [2, 2, 2]"), cohort::InvalidArgument);
  grey[8] = std::nanf("");
  CHECK_THROWS_WITH_AS(cohort::data::save_png(dir / "x.png", grey),
                       doctest::Contains("value nan at row 1, column 1 is not finite"), cohort::InvalidArgument);
  CHECK_THROWS_AS(cohort::data::save_png(dir / "x.png", colour, 1.0f, 1.0f), cohort::InvalidArgument);
  CHECK_THROWS_WITH_AS(cohort::data::save_png(dir / "no/such/x.png", colour, -1.0f, 1.0f),
                       doctest::Contains("cannot write the PNG file"), cohort::Error);
}
