// TFRecord files of tf.train.Example records (load_tfrecord): records encoded here from the
// protobuf and TFRecord specs (not by the reader's code), plain and gzip; Fashion-MNIST written
// by the protobuf library itself as encoded PNG images, raw bytes and float lists reads back as
// the IDX files hold it; and every kind of bad file and record.

#include <doctest/doctest.h>
#include <png.h>
#include <zlib.h>

#include <boost/crc.hpp>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cohort/core/base/flags.h"
#include "cohort/core/nn/data/dataset.h"
#include "cohort/core/nn/data/loaders.h"
#include "loader_checks.h"
#include "support/skip.h"
#include "support/stderr_capture.h"
#include "support/temp_dir.h"

namespace cohort::data {
COHORT_DECLARE_string(data_dir);
}

namespace fs = std::filesystem;
using cohort::InvalidArgument;
using cohort::Shape;
using cohort::Tensor;
using cohort::data::Dataset;
using cohort::data::load_tfrecord;
using cohort::data::for_each_tfrecord_batch;
using cohort::data::load_tfrecord_features;
using cohort::data::TFRecordOptions;
using cohort::test::check_same_dataset;
using cohort::test::data_error;
using cohort::test::invalid_argument;
using cohort::test::slurp;
using cohort::test::spit;
using cohort::test::TempDir;
using cohort::test::write_gzip;

namespace {

// ---- A protobuf and TFRecord writer of the test's own ----------------------------------------

std::string varint(std::uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}

std::string key(int number, int wire_type) { return varint(static_cast<std::uint64_t>(number) << 3 | wire_type); }

std::string length_delimited(int number, const std::string& payload) {
  return key(number, 2) + varint(payload.size()) + payload;
}

std::string le(std::uint64_t v, int size) {
  std::string out;
  for (int i = 0; i < size; ++i) out.push_back(static_cast<char>(v >> (8 * i) & 0xff));
  return out;
}

std::string float_bits(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return le(bits, 4);
}

// Features: FloatList and Int64List packed (proto3's way) or one value per field (older writers).
std::string float_feature(const std::vector<float>& values, bool packed = true) {
  std::string list;
  if (packed) {
    std::string payload;
    for (float v : values) payload += float_bits(v);
    list = length_delimited(1, payload);
  } else {
    for (float v : values) list += key(1, 5) + float_bits(v);
  }
  return length_delimited(2, list);
}

std::string int64_feature(const std::vector<std::int64_t>& values, bool packed = true) {
  std::string list;
  if (packed) {
    std::string payload;
    for (std::int64_t v : values) payload += varint(static_cast<std::uint64_t>(v));
    list = length_delimited(1, payload);
  } else {
    for (std::int64_t v : values) list += key(1, 0) + varint(static_cast<std::uint64_t>(v));
  }
  return length_delimited(3, list);
}

std::string bytes_feature(const std::vector<std::string>& values) {
  std::string list;
  for (const std::string& v : values) list += length_delimited(1, v);
  return length_delimited(1, list);
}

std::string example(const std::vector<std::pair<std::string, std::string>>& features) {
  std::string map;
  for (const auto& [name, feature] : features)
    map += length_delimited(1, length_delimited(1, name) + length_delimited(2, feature));
  return length_delimited(1, map);
}

std::uint32_t masked_crc(const std::string& bytes) {
  boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> crc;
  crc.process_bytes(bytes.data(), bytes.size());
  const std::uint32_t c = crc.checksum();
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::string record(const std::string& data) {
  const std::string length = le(data.size(), 8);
  return length + le(masked_crc(length), 4) + data + le(masked_crc(data), 4);
}

std::string png_bytes(int height, int width, int channels, const std::vector<std::uint8_t>& values) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(width);
  image.height = static_cast<png_uint_32>(height);
  image.format = channels == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  png_alloc_size_t size = 0;
  REQUIRE(png_image_write_to_memory(&image, nullptr, &size, 0, values.data(), 0, nullptr) != 0);
  std::string out(size, '\0');
  REQUIRE(png_image_write_to_memory(&image, out.data(), &size, 0, values.data(), 0, nullptr) != 0);
  out.resize(size);
  return out;
}

std::vector<float> values(const Dataset& data, std::int64_t i) {
  const auto example = data.example(i);
  return {example.begin(), example.end()};
}

// Three records: features "x" (4 floats), label "y", and a feature nobody asks for.
std::string three_records() {
  std::string file;
  file += record(example({{"note", bytes_feature({"first"})},
                          {"x", float_feature({1, 2, 3, 4})},
                          {"y", int64_feature({2})}}));
  file += record(example({{"y", int64_feature({0}, false)}, {"x", float_feature({5, 6, 7, 8}, false)}}));
  // A field Example does not define, before its features: skipped, as protobuf parsers do.
  file += record(key(7, 0) + varint(99) +
                 example({{"x", float_feature({-1.5f, 0, 0.25f, 1e30f})}, {"y", int64_feature({1})}}));
  return file;
}

}  // namespace

TEST_CASE("float features and int64 labels, packed or not, in the order of the records") {
  TempDir dir("data_tfrecord_test");
  spit(dir / "a.tfrecord", three_records());
  TFRecordOptions options;
  options.features = "x";
  options.label = "y";
  const Dataset data = load_tfrecord({dir / "a.tfrecord"}, options);
  REQUIRE(data.size() == 3);
  CHECK(data.example_shape() == Shape{4});
  CHECK(data.num_classes() == 3);
  CHECK(values(data, 0) == std::vector<float>{1, 2, 3, 4});
  CHECK(values(data, 1) == std::vector<float>{5, 6, 7, 8});
  CHECK(values(data, 2) == std::vector<float>{-1.5f, 0, 0.25f, 1e30f});
  CHECK(data.label(0) == 2);
  CHECK(data.label(1) == 0);
  CHECK(data.label(2) == 1);

  options.shape = {2, 2};
  options.num_classes = 5;
  const Dataset shaped = load_tfrecord({dir / "a.tfrecord"}, options);
  CHECK(shaped.example_shape() == Shape{2, 2});
  CHECK(shaped.num_classes() == 5);

  // The same records gzip-compressed: told by the magic bytes, not the name.
  write_gzip(dir / "b.tfrecord", three_records());
  check_same_dataset(load_tfrecord({dir / "b.tfrecord"}, options), shaped);

  // Classes counted without an example (a mistyped label) are warned of.
  spit(dir / "c.tfrecord", three_records() + record(example({{"x", float_feature({0, 0, 0, 0})},
                                                               {"y", int64_feature({5})}})));
  options.num_classes = 0;
  std::vector<std::string> warnings;
  {
    cohort::test::StderrCapture err(dir / "stderr.txt");
    CHECK(load_tfrecord({dir / "c.tfrecord"}, options).num_classes() == 6);
    warnings = err.lines();
  }
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].ends_with(dir / "c.tfrecord" + ": 6 classes counted as the largest label + 1, 2 of "
                              "which no example has (3, 4): a mistyped label? (a num_classes given "
                              "refuses labels from it on)"));
}

TEST_CASE("targets, int64 features, several files and patterns, shards") {
  TempDir dir("data_tfrecord_test");
  for (int f = 0; f < 3; ++f) {
    std::string file;
    for (int r = 0; r < 3; ++r) {
      const std::int64_t i = f * 3 + r;
      file += record(example({{"pixels", int64_feature({i, 2 * i, -i})},
                              {"price", float_feature({0.5f * static_cast<float>(i), 1.0f})}}));
    }
    spit(dir / ("part-" + std::to_string(f) + ".tfrecord"), file);
  }
  TFRecordOptions options;
  options.features = "pixels";
  options.target = "price";
  const Dataset data = load_tfrecord({dir / "part-*.tfrecord"}, options);
  REQUIRE(data.size() == 9);
  CHECK_FALSE(data.has_labels());
  CHECK(data.target_shape() == Shape{2});
  for (std::int64_t i = 0; i < 9; ++i) {
    CAPTURE(i);
    const auto x = static_cast<float>(i);
    CHECK(values(data, i) == std::vector<float>{x, 2 * x, -x});
    const auto target = data.target(i);
    CHECK(std::vector<float>(target.begin(), target.end()) == std::vector<float>{0.5f * x, 1.0f});
  }
  // Files named one by one, in another order: records in the order given.
  const Dataset reversed = load_tfrecord({dir / "part-2.tfrecord", dir / "part-0.tfrecord"}, options);
  CHECK(values(reversed, 0) == std::vector<float>{6, 12, -6});
  // A file given twice, by a pattern and by name (spelt another way), would count twice.
  const std::string again = dir / "./part-1.tfrecord";
  CHECK_THROWS_WITH_AS(load_tfrecord({dir / "part-*.tfrecord", again}, options),
                       (again + ": named twice among the files to read (its records would count twice)").c_str(),
                       cohort::data::DataError);
  for (int index = 0; index < 4; ++index) {
    CAPTURE(index);
    options.shard = {index, 4};
    check_same_dataset(load_tfrecord({dir / "part-*.tfrecord"}, options), data.shard(index, 4));
  }
}

TEST_CASE("images in records: encoded PNG decoded, raw bytes with a shape") {
  TempDir dir("data_tfrecord_test");
  std::string file, raw;
  for (int i = 0; i < 4; ++i) {
    std::vector<std::uint8_t> pixels(6);
    for (int p = 0; p < 6; ++p) pixels[static_cast<std::size_t>(p)] = static_cast<std::uint8_t>(40 * i + p);
    file += record(example({{"image/encoded", bytes_feature({png_bytes(2, 3, 1, pixels)})},
                            {"image/class/label", int64_feature({i % 2})}}));
    raw += record(example({{"image_raw", bytes_feature({std::string(pixels.begin(), pixels.end())})},
                           {"label", int64_feature({i % 2})}}));
  }
  spit(dir / "png.tfrecord", file);
  spit(dir / "raw.tfrecord", raw);
  TFRecordOptions options;
  options.features = "image/encoded";
  options.label = "image/class/label";
  const Dataset images = load_tfrecord({dir / "png.tfrecord"}, options);
  REQUIRE(images.size() == 4);
  CHECK(images.example_shape() == Shape{2, 3, 1});
  CHECK(images.num_classes() == 2);
  TFRecordOptions raw_options;
  raw_options.features = "image_raw";
  raw_options.label = "label";
  raw_options.shape = {2, 3, 1};
  const Dataset bytes = load_tfrecord({dir / "raw.tfrecord"}, raw_options);
  check_same_dataset(images, bytes);
  CHECK(values(bytes, 3)[5] == 125.0f / 255.0f);
  // Kept encoded and decoded as used: the same examples.
  options.in_memory = false;
  const Dataset on_use = load_tfrecord({dir / "png.tfrecord"}, options);
  CHECK_FALSE(on_use.in_memory());
  REQUIRE(on_use.size() == 4);
  CHECK(on_use.num_classes() == 2);
  std::vector<float> made(6);
  for (std::int64_t i = 0; i < 4; ++i) {
    on_use.read_example(i, made.data());
    CHECK(made == values(images, i));
    CHECK(on_use.label(i) == images.label(i));
  }
  options.in_memory = true;
  options.height = 4;
  options.width = 6;
  options.channels = 3;
  CHECK(load_tfrecord({dir / "png.tfrecord"}, options).example_shape() == Shape{4, 6, 3});
  // The features alone (new images to predict): decoded at the size asked for, the labels not
  // read, in memory even when asked otherwise.
  TFRecordOptions features;
  features.features = "image/encoded";
  features.height = 4;
  features.width = 6;
  features.channels = 3;
  features.in_memory = false;
  const Tensor alone = load_tfrecord_features({dir / "png.tfrecord"}, features);
  const Dataset resized = load_tfrecord({dir / "png.tfrecord"}, options);
  REQUIRE(alone.shape() == Shape{4, 4, 6, 3});
  CHECK(std::vector<float>(alone.span().begin(), alone.span().end()) ==
        std::vector<float>(resized.storage()->features.span().begin(), resized.storage()->features.span().end()));
  // A batch at a time, as read: 3 images, then 1, the same values in the same order.
  std::vector<Shape> batches;
  std::vector<float> batched;
  for_each_tfrecord_batch({dir / "png.tfrecord"}, features, 3, [&](const Tensor& batch) {
    batches.push_back(batch.shape());
    batched.insert(batched.end(), batch.span().begin(), batch.span().end());
  });
  CHECK(batches == std::vector<Shape>{{3, 4, 6, 3}, {1, 4, 6, 3}});
  CHECK(batched == std::vector<float>(alone.span().begin(), alone.span().end()));
  CHECK(invalid_argument([&] { for_each_tfrecord_batch({dir / "png.tfrecord"}, features, 0, [](const Tensor&) {}); }) ==
        "for_each_tfrecord_batch: batch size 0, expected >= 1");
  TFRecordOptions numbers;
  numbers.features = "x";
  spit(dir / "three.tfrecord", three_records());
  CHECK(load_tfrecord_features({dir / "three.tfrecord"}, numbers).shape() == Shape{3, 4});
  // Numbers, in batches that end where the records do: no empty batch after them.
  batches.clear();
  for_each_tfrecord_batch({dir / "three.tfrecord"}, numbers, 3, [&](const Tensor& batch) { batches.push_back(batch.shape()); });
  CHECK(batches == std::vector<Shape>{{3, 4}});
  // A shard that keeps none of the records: no features, of the example's shape.
  numbers.shard = {3, 4};
  CHECK(load_tfrecord_features({dir / "three.tfrecord"}, numbers).shape() == Shape{0, 4});
  numbers.shard = {};
  spit(dir / "empty.tfrecord", "");
  CHECK(data_error([&] { for_each_tfrecord_batch({dir / "empty.tfrecord"}, numbers, 3, [](const Tensor&) {}); }) ==
        dir / "empty.tfrecord" + ": no records");
  numbers.label = "y";
  CHECK_THROWS_WITH_AS(load_tfrecord_features({dir / "three.tfrecord"}, numbers),
                       doctest::Contains("load_tfrecord_features reads features alone"), InvalidArgument);
  raw_options.shape = {};
  CHECK(data_error([&] { load_tfrecord({dir / "raw.tfrecord"}, raw_options); }) ==
        dir / "raw.tfrecord" + ": record 0: feature 'image_raw' holds bytes that are not a PNG or "
                               "JPEG image: give the shape of its raw uint8 values "
                               "(TFRecordOptions::shape)");
}

TEST_CASE("protobuf as parsers must read it: last key wins, repeated lists merge, unknown fields") {
  TempDir dir("data_tfrecord_test");
  // "x" twice (the last entry holds); its float list in two fields of the Feature (merged), the
  // first packed and then one value unpacked; fields of every wire type Example does not define,
  // at each level.
  const std::string unknown = key(9, 1) + le(7, 8) + key(10, 5) + le(7, 4) + key(11, 0) + varint(3);
  const std::string feature =
      length_delimited(2, length_delimited(1, float_bits(1) + float_bits(2)) + unknown + key(1, 5) +
                              float_bits(3)) +
      unknown + length_delimited(2, key(1, 5) + float_bits(4));
  const std::string features =
      length_delimited(1, length_delimited(1, "x") + length_delimited(2, float_feature({9, 9}))) +
      length_delimited(1, length_delimited(1, "x") + unknown + length_delimited(2, feature)) +
      unknown + length_delimited(1, length_delimited(1, "y") + length_delimited(2, int64_feature({1})));
  spit(dir / "a.tfrecord", record(unknown + length_delimited(1, features)));
  TFRecordOptions options;
  options.features = "x";
  options.label = "y";
  const Dataset data = load_tfrecord({dir / "a.tfrecord"}, options);
  REQUIRE(data.size() == 1);
  CHECK(values(data, 0) == std::vector<float>{1, 2, 3, 4});
}

TEST_CASE("a plain file whose first bytes look like gzip's is read as plain; raw bytes that look like a JPEG") {
  TempDir dir("data_tfrecord_test");
  // A first record 35615 bytes long: its length field starts 1f 8b, gzip's magic bytes.
  std::string data;
  std::size_t n = 35500;
  for (; n < 35700; ++n) {
    std::string raw(n, '\x07');
    raw[0] = '\xff';  // and the raw values start as a JPEG does
    raw[1] = '\xd8';
    raw[2] = '\xff';
    data = example({{"raw", bytes_feature({raw})}, {"y", int64_feature({0})}});
    if (data.size() == 35615) break;
  }
  REQUIRE(data.size() == 35615);
  spit(dir / "a.tfrecord", record(data) + record(data));
  CHECK(cohort::test::slurp(dir / "a.tfrecord").starts_with("\x1f\x8b"));
  TFRecordOptions options;
  options.features = "raw";
  options.label = "y";
  options.shape = {static_cast<std::int64_t>(n)};
  const Dataset read = load_tfrecord({dir / "a.tfrecord"}, options);
  CHECK(read.size() == 2);
  CHECK(values(read, 1)[0] == 1.0f);
  CHECK(values(read, 1)[3] == 7.0f / 255.0f);
}

TEST_CASE("a gzip stream cut where a record ends is an error, not fewer records") {
  TempDir dir("data_tfrecord_test");
  const std::string path = dir / "cut.tfrecord.gz";
  gzFile file = gzopen(path.c_str(), "wb");
  REQUIRE(file != nullptr);
  const std::string first = record(example({{"x", float_feature({1})}, {"y", int64_feature({0})}}));
  gzwrite(file, first.data(), static_cast<unsigned>(first.size()));
  gzwrite(file, first.data(), static_cast<unsigned>(first.size()));
  REQUIRE(gzflush(file, Z_SYNC_FLUSH) == Z_OK);
  const auto cut_at = static_cast<std::size_t>(gzoffset(file));
  gzwrite(file, first.data(), static_cast<unsigned>(first.size()));
  gzclose(file);
  TFRecordOptions options;
  options.features = "x";
  options.label = "y";
  CHECK(load_tfrecord({path}, options).size() == 3);
  spit(path, cohort::test::slurp(path).substr(0, cut_at));
  CHECK(data_error([&] { load_tfrecord({path}, options); }) ==
        path + ": record 2 at byte " + std::to_string(2 * first.size()) +
            " of the inflated data: the gzip stream ends early (a truncated file)");
}

// `bytes` as one zlib stream (RFC 1950), as TFRecordOptions(compression_type="ZLIB") writes a
// file; the first `flush_after` bytes are flushed out first, and the stream's size then is
// `*flushed_at`: a cut there ends the inflated data exactly after them.
std::string zlib_stream(const std::string& bytes, std::size_t flush_after, std::size_t* flushed_at) {
  z_stream z{};
  REQUIRE(deflateInit(&z, Z_DEFAULT_COMPRESSION) == Z_OK);
  std::string out(compressBound(static_cast<uLong>(bytes.size())) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  z.avail_in = static_cast<uInt>(flush_after);
  REQUIRE(deflate(&z, Z_SYNC_FLUSH) == Z_OK);
  *flushed_at = z.total_out;
  z.avail_in = static_cast<uInt>(bytes.size() - flush_after);
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

TEST_CASE("a ZLIB-compressed file reads as the plain one; a zlib stream cut short is an error") {
  TempDir dir("data_tfrecord_test");
  const std::string first = record(example({{"x", float_feature({1, 2})}, {"y", int64_feature({1})}}));
  const std::string records = first + first + first;
  spit(dir / "plain.tfrecord", records);
  std::size_t cut_at = 0;
  const std::string compressed = zlib_stream(records, 2 * first.size(), &cut_at);
  REQUIRE(static_cast<unsigned char>(compressed[0]) == 0x78);  // zlib's usual first byte
  spit(dir / "z.tfrecord", compressed);
  TFRecordOptions options;
  options.features = "x";
  options.label = "y";
  const Dataset plain = load_tfrecord({dir / "plain.tfrecord"}, options);
  REQUIRE(plain.size() == 3);
  check_same_dataset(load_tfrecord({dir / "z.tfrecord"}, options), plain);
  spit(dir / "z.tfrecord", compressed.substr(0, cut_at));
  CHECK(data_error([&] { load_tfrecord({dir / "z.tfrecord"}, options); }) ==
        dir / "z.tfrecord" + ": record 2 at byte " + std::to_string(2 * first.size()) +
            " of the inflated data: the zlib stream ends early (a truncated file)");
  spit(dir / "z.tfrecord", compressed.substr(0, cut_at + 4));
  CHECK(data_error([&] { load_tfrecord({dir / "z.tfrecord"}, options); }).find("the zlib stream ends early") !=
        std::string::npos);
  std::string corrupt = compressed;
  corrupt[cut_at / 2] = static_cast<char>(corrupt[cut_at / 2] ^ 0x55);
  spit(dir / "z.tfrecord", corrupt);
  CHECK(data_error([&] { load_tfrecord({dir / "z.tfrecord"}, options); }).starts_with(dir / "z.tfrecord" + ": "));
}

TEST_CASE("bad files, records and options are named") {
  TempDir dir("data_tfrecord_test");
  const std::string good = three_records();
  TFRecordOptions options;
  options.features = "x";
  options.label = "y";
  const auto error = [&](const std::string& bytes) {
    spit(dir / "bad.tfrecord", bytes);
    return data_error([&] { load_tfrecord({dir / "bad.tfrecord"}, options); });
  };
  const std::string bad = dir / "bad.tfrecord";
  const std::string first = record(example({{"x", float_feature({1, 2, 3, 4})}, {"y", int64_feature({2})}}));
  CHECK(error(good.substr(0, good.size() - 3)).starts_with(bad + ": record 2 at byte "));
  CHECK(error(good.substr(0, good.size() - 3)).find(": truncated: ") != std::string::npos);
  std::string flipped = good;
  flipped[9] = static_cast<char>(flipped[9] ^ 1);  // the length's checksum
  CHECK(error(flipped) == bad + ": record 0 at byte 0: the length's checksum does not match (not a "
                                "TFRecord file, or a corrupt one)");
  flipped = good;
  flipped[20] = static_cast<char>(flipped[20] ^ 1);  // the first record's data
  CHECK(error(flipped) == bad + ": record 0 at byte 0: the data's checksum does not match (a corrupt file)");
  CHECK(error("") == bad + ": no records");
  // A length near 2^64 whose checksum holds: refused, not wrapped round to a few bytes.
  const std::string wrapping = le(~std::uint64_t{0}, 8);
  CHECK(error(wrapping + le(masked_crc(wrapping), 4) + std::string(8, '\0')) ==
        bad + ": record 0 at byte 0: a record claims 18446744073709551615 bytes, more than any file "
              "holds (a corrupt length)");
  CHECK(error(record("\x0a\x05hello")) .starts_with(bad + ": record 0: not a tf.train.Example: "));
  CHECK(error(record(example({{"x", float_feature({1})}, {"z", int64_feature({1})}}))) ==
        bad + ": record 0: no feature 'y' (it has: x, z)");
  // Numbers are numbers: an int64_list after a float_list is read as floats.
  CHECK(error(first + record(example({{"x", int64_feature({1, 2, 3, 4})}, {"y", int64_feature({1})}}))) ==
        "(no error)");
  CHECK(error(first + record(example({{"x", bytes_feature({"abcd"})}, {"y", int64_feature({1})}}))) ==
        bad + ": record 1: feature 'x' is a bytes_list, where " + bad + ": record 0 has numbers");
  CHECK(error(first + record(example({{"x", float_feature({1, 2, 3})}, {"y", int64_feature({1})}}))) ==
        bad + ": record 1: feature 'x' holds 3 values, where " + bad + ": record 0 holds 4");
  CHECK(error(first + record(example({{"x", float_feature({1, 2, 3, 4})}, {"y", int64_feature({1, 2})}}))) ==
        bad + ": record 1: label feature 'y' is an int64_list of 2 values, expected an int64_list of "
              "one class label");
  CHECK(error(record(example({{"x", float_feature({1})}, {"y", float_feature({1})}}))) ==
        bad + ": record 0: label feature 'y' is a float_list of 1 values, expected an int64_list of "
              "one class label (floats are targets)");
  CHECK(error(record(example({{"x", float_feature({1})}, {"y", int64_feature({-3})}}))) ==
        bad + ": record 0: label -3 is not a class index");
  CHECK(error(first + record(example({{"x", float_feature({1, 2, NAN, 4})}, {"y", int64_feature({1})}}))) ==
        bad + ": record 1: feature 'x' value 2 is nan (a missing value?)");
  CHECK(error(record(example({{"x", ""}, {"y", int64_feature({1})}}))) ==
        bad + ": record 0: feature 'x' holds no list (an empty Feature)");
  // Raw bytes: a later record's empty list.
  TFRecordOptions raw_options;
  raw_options.features = "x";
  raw_options.label = "y";
  raw_options.shape = {2};
  spit(bad, record(example({{"x", bytes_feature({"ab"})}, {"y", int64_feature({0})}})) +
                record(example({{"x", bytes_feature({})}, {"y", int64_feature({0})}})));
  CHECK(data_error([&] { load_tfrecord({bad}, raw_options); }) ==
        bad + ": record 1: feature 'x' holds 0 byte strings, expected one");
  options.num_classes = 2;
  CHECK(error(good) == bad + ": label 2 (record 0 of all) is not below num_classes 2");
  options.num_classes = 0;

  CHECK(data_error([&] { load_tfrecord({dir / "none-*.tfrecord"}, options); }) ==
        dir / "none-*.tfrecord" + ": no file matches");
  CHECK(data_error([&] { load_tfrecord({dir / "missing.tfrecord"}, options); }) ==
        dir / "missing.tfrecord" + ": no such file");
  options.target = "y";
  CHECK(invalid_argument([&] { load_tfrecord({bad}, options); }) ==
        "load_tfrecord: name a label feature or a target feature (one of them)");
  options.target.clear();
  options.label = "x";
  CHECK(invalid_argument([&] { load_tfrecord({bad}, options); }).find("named both") != std::string::npos);
  options.features.clear();
  CHECK(invalid_argument([&] { load_tfrecord({bad}, options); }) == "load_tfrecord: no features feature named");
}

TEST_CASE("Fashion-MNIST written by the protobuf library reads back as the IDX files hold it") {
  if (!fs::exists(cohort::data::FLAGS_data_dir))
    return cohort::test::skip("no Fashion-MNIST in " + cohort::data::FLAGS_data_dir +
                              " (Debian: dataset-fashion-mnist)");
  if (std::system("/usr/bin/python3 -c 'import numpy, PIL, google.protobuf' >/dev/null 2>&1") != 0)
    return cohort::test::skip("/usr/bin/python3 cannot import numpy, PIL and google.protobuf "
                              "(Debian: python3-numpy python3-pil python3-protobuf)");
  TempDir dir("data_tfrecord_test");
  // Examples serialised by google.protobuf (tests/support/tfrecord_writer.py). Three layouts:
  // encoded PNG images (gzip, as TFRecordOptions(compression_type="GZIP") writes), raw bytes with
  // the MNIST tutorial's extra features, and float lists, each in two files.
  spit(dir / "script.py", R"(
import gzip, os, sys
import numpy as np
from io import BytesIO
from PIL import Image
sys.path.insert(0, sys.argv[2])
from tfrecord_writer import Example, write_records

data_dir = sys.argv[1]
x = np.frombuffer(gzip.open(f"{data_dir}/t10k-images-idx3-ubyte.gz").read(), np.uint8, offset=16).reshape(-1, 28, 28)[:300]
y = np.frombuffer(gzip.open(f"{data_dir}/t10k-labels-idx1-ubyte.gz").read(), np.uint8, offset=8)[:300]
def png(image):
    out = BytesIO()
    Image.fromarray(image, "L").save(out, format="PNG")
    return out.getvalue()
for part, rows in enumerate((range(0, 150), range(150, 300))):
    encoded, raw, floats = [], [], []
    for i in rows:
        e = Example()
        e.features.feature["image/encoded"].bytes_list.value.append(png(x[i]))
        e.features.feature["image/format"].bytes_list.value.append(b"png")
        e.features.feature["image/class/label"].int64_list.value.append(int(y[i]))
        encoded.append(e)
        e = Example()
        for name, v in (("height", 28), ("width", 28), ("depth", 1), ("label", int(y[i]))):
            e.features.feature[name].int64_list.value.append(v)
        e.features.feature["image_raw"].bytes_list.value.append(x[i].tobytes())
        raw.append(e)
        e = Example()
        e.features.feature["x"].float_list.value.extend((x[i].astype(np.float32) / 255).ravel().tolist())
        e.features.feature["y"].int64_list.value.append(int(y[i]))
        floats.append(e)
    write_records(f"encoded-{part}.tfrecord.gz", encoded, gzip=True)
    write_records(f"raw-{part}.tfrecord", raw)
    write_records(f"floats-{part}.tfrecord", floats)
)");
  const std::string support = COHORT_TEST_SUPPORT_DIR;  // tfrecord_writer.py
  const std::string command = "cd '" + dir.str() + "' && /usr/bin/python3 script.py '" +
                              cohort::data::FLAGS_data_dir + "' '" + support + "' > python.log 2>&1";
  REQUIRE_MESSAGE(std::system(command.c_str()) == 0, slurp(dir / "python.log"));

  const Dataset idx = cohort::data::fashion_mnist(cohort::data::Split::kTest);
  TFRecordOptions encoded;
  encoded.features = "image/encoded";
  encoded.label = "image/class/label";
  encoded.num_classes = 10;
  const Dataset images = load_tfrecord({dir / "encoded-*.tfrecord.gz"}, encoded);
  REQUIRE(images.size() == 300);
  CHECK(images.example_shape() == Shape{28, 28, 1});
  TFRecordOptions raw;
  raw.features = "image_raw";
  raw.label = "label";
  raw.shape = {28, 28, 1};
  raw.num_classes = 10;
  TFRecordOptions floats;
  floats.features = "x";
  floats.label = "y";
  floats.shape = {28, 28, 1};
  floats.num_classes = 10;
  const Dataset bytes = load_tfrecord({dir / "raw-0.tfrecord", dir / "raw-1.tfrecord"}, raw);
  const Dataset lists = load_tfrecord({dir / "floats-*.tfrecord"}, floats);
  for (std::int64_t i = 0; i < 300; ++i) {
    CAPTURE(i);
    REQUIRE(images.label(i) == idx.label(i));
    REQUIRE(values(images, i) == values(idx, i));
  }
  check_same_dataset(bytes, images);
  check_same_dataset(lists, images);
}
