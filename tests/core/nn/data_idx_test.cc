// IDX loading: the real Fashion-MNIST files, and every kind of bad file written to a temp dir.

#include <doctest/doctest.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "cohort/core/base/flags.h"
#include "cohort/core/nn/data/dataset.h"
#include "loader_checks.h"
#include "support/skip.h"
#include "support/temp_dir.h"

namespace cohort::data {
COHORT_DECLARE_string(data_dir);
}  // namespace cohort::data
using cohort::data::FLAGS_data_dir;

namespace fs = std::filesystem;
using cohort::data::Dataset;
using cohort::data::DataError;
using cohort::data::Split;
using cohort::test::status_kib;
using cohort::test::write_gzip;

namespace {

void put_be32(std::string& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(v >> shift & 0xff));
}

// IDX images whose pixel k of image i is (i + k) % 256.
std::string idx_images(std::uint32_t n, std::uint32_t rows = 28, std::uint32_t cols = 28,
                       std::uint32_t magic = 0x803) {
  std::string out;
  put_be32(out, magic);
  put_be32(out, n);
  put_be32(out, rows);
  put_be32(out, cols);
  for (std::uint32_t i = 0; i < n; ++i)
    for (std::uint32_t k = 0; k < rows * cols; ++k) out.push_back(static_cast<char>((i + k) % 256));
  return out;
}

std::string idx_labels(const std::vector<int>& labels) {
  std::string out;
  put_be32(out, 0x801);
  put_be32(out, static_cast<std::uint32_t>(labels.size()));
  for (int l : labels) out.push_back(static_cast<char>(l));
  return out;
}

std::vector<int> labels_of(int n) {
  std::vector<int> labels;
  for (int i = 0; i < n; ++i) labels.push_back(i % 10);
  return labels;
}

void write_raw(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::string gunzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  REQUIRE(f != nullptr);
  std::string out;
  char buffer[1 << 16];
  for (int n; (n = gzread(f, buffer, sizeof buffer)) > 0;) out.append(buffer, static_cast<std::size_t>(n));
  gzclose(f);
  return out;
}

// The DataError message load_idx throws, or "(no error)".
std::string load_error(const std::string& images, const std::string& labels,
                       const cohort::data::IdxOptions& options = {}) {
  try {
    cohort::data::load_idx(images, labels, options);
  } catch (const DataError& e) {
    return e.what();
  }
  return "(no error)";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

double mean_pixel(const Dataset& d) {
  const auto& images = d.storage()->features;
  double sum = 0;
  for (std::int64_t i = 0; i < images.size(); ++i) sum += images[i];
  return sum / static_cast<double>(images.size());
}

bool have_fashion_mnist() {
  if (fs::exists(FLAGS_data_dir)) return true;
  cohort::test::skip("no Fashion-MNIST in " + FLAGS_data_dir + " (Debian: dataset-fashion-mnist)");
  return false;
}

}  // namespace

TEST_CASE("a shard read from the files is the shard of the whole; every label is still checked") {
  cohort::test::TempDir dir("data_idx_test");
  write_gzip(dir / "i", idx_images(7));
  write_raw(dir / "l", idx_labels({0, 1, 2, 3, 4, 5, 6}));
  const Dataset whole = cohort::data::load_idx(dir / "i", dir / "l");
  for (const auto& [index, count] : {std::pair{0, 3}, std::pair{2, 3}, std::pair{6, 7}, std::pair{0, 1}}) {
    CAPTURE(index);
    CAPTURE(count);
    const Dataset read = cohort::data::load_idx(dir / "i", dir / "l", {.shard = {index, count}});
    const Dataset cut = whole.shard(index, count);
    REQUIRE(read.size() == cut.size());
    CHECK(read.image_shape() == cut.image_shape());
    for (std::int64_t k = 0; k < read.size(); ++k) {
      CHECK(read.label(k) == cut.label(k));
      const auto a = read.image(k), b = cut.image(k);
      CHECK(std::equal(a.begin(), a.end(), b.begin(), b.end()));
    }
  }
  CHECK(cohort::data::load_idx(dir / "i", dir / "l", {.shard = {1, 3}}).size() == 2);  // 1 and 4
  // A bad label outside the shard is found all the same: every worker sees the file is bad.
  write_raw(dir / "bad", idx_labels({0, 1, 2, 3, 4, 5, 10}));
  CHECK_THROWS_AS(cohort::data::load_idx(dir / "i", dir / "bad", {.shard = {1, 2}}), DataError);
  CHECK_THROWS_AS(cohort::data::load_idx(dir / "i", dir / "l", {.shard = {3, 3}}),
                  cohort::InvalidArgument);
}

TEST_CASE("fashion-mnist train set: counts, shape, labels, pixels, known statistics") {
  if (!have_fashion_mnist()) return;
  const long rss_before = status_kib("VmRSS");
  const auto start = std::chrono::steady_clock::now();
  const Dataset train = cohort::data::fashion_mnist(Split::kTrain);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const long rss_after = status_kib("VmRSS"), peak = status_kib("VmHWM");
  MESSAGE("train set: load " << seconds << " s; resident +" << (rss_after - rss_before) / 1024
                             << " MiB, peak " << peak / 1024 << " MiB (the floats: "
                             << 60000 * 784 * 4 / (1 << 20) << " MiB)");

  CHECK(train.size() == 60000);
  CHECK(train.image_shape() == cohort::Shape{28, 28, 1});
  CHECK(train.storage()->features.shape() == cohort::Shape{60000, 28, 28, 1});
  CHECK(train.num_classes() == 10);
  const std::vector<int> first = {9, 0, 0, 3, 0, 2, 7, 2, 5, 5};
  for (int i = 0; i < 10; ++i) CHECK(train.label(i) == first[static_cast<std::size_t>(i)]);
  std::vector<int> per_class(10);
  for (std::int64_t i = 0; i < train.size(); ++i) {
    REQUIRE(train.label(i) >= 0);
    REQUIRE(train.label(i) < 10);
    ++per_class[static_cast<std::size_t>(train.label(i))];
  }
  for (int c = 0; c < 10; ++c) CHECK(per_class[static_cast<std::size_t>(c)] == 6000);

  const auto& images = train.storage()->features;
  float lo = 1, hi = 0;
  for (std::int64_t i = 0; i < images.size(); ++i) lo = std::min(lo, images[i]), hi = std::max(hi, images[i]);
  CHECK(lo == 0.0f);
  CHECK(hi == 1.0f);
  CHECK(mean_pixel(train) == doctest::Approx(0.286040).epsilon(1e-5));
  double first_sum = 0;
  for (float v : train.image(0)) first_sum += v;
  CHECK(first_sum == doctest::Approx(76247.0 / 255.0).epsilon(1e-6));
}

TEST_CASE("fashion-mnist test set") {
  if (!have_fashion_mnist()) return;
  const Dataset test = cohort::data::fashion_mnist(FLAGS_data_dir, Split::kTest);
  CHECK(test.size() == 10000);
  CHECK(test.image_shape() == cohort::Shape{28, 28, 1});
  const std::vector<int> first = {9, 2, 1, 1, 6, 1, 4, 6, 5, 7};
  for (int i = 0; i < 10; ++i) CHECK(test.label(i) == first[static_cast<std::size_t>(i)]);
  CHECK(mean_pixel(test) == doctest::Approx(0.286849).epsilon(1e-5));
}

TEST_CASE("gzip is told by its magic, not the name; raw and gzip load the same") {
  if (!have_fashion_mnist()) return;
  cohort::test::TempDir dir("data_idx_test");
  const std::string images = gunzip(FLAGS_data_dir + "/t10k-images-idx3-ubyte.gz");
  const std::string labels = gunzip(FLAGS_data_dir + "/t10k-labels-idx1-ubyte.gz");
  // Raw bytes under a .gz name, gzip bytes under a raw name.
  write_raw(dir / "images.gz", images);
  write_gzip(dir / "labels", labels);
  const Dataset swapped = cohort::data::load_idx(dir / "images.gz", dir / "labels");
  // Uncompressed files under the package's names, found by fashion_mnist().
  write_raw(dir / "t10k-images-idx3-ubyte", images);
  write_raw(dir / "t10k-labels-idx1-ubyte", labels);
  const Dataset raw = cohort::data::fashion_mnist(dir.path.string(), Split::kTest);
  const Dataset packaged = cohort::data::fashion_mnist(FLAGS_data_dir, Split::kTest);
  REQUIRE(raw.size() == packaged.size());
  REQUIRE(swapped.size() == packaged.size());
  CHECK(raw.storage()->labels == packaged.storage()->labels);
  CHECK(swapped.storage()->labels == packaged.storage()->labels);
  const auto a = raw.storage()->features.span(), b = packaged.storage()->features.span(),
             c = swapped.storage()->features.span();
  CHECK(std::equal(a.begin(), a.end(), b.begin(), b.end()));
  CHECK(std::equal(c.begin(), c.end(), b.begin(), b.end()));
}

TEST_CASE("small IDX files load with pixel / 255 and their labels") {
  cohort::test::TempDir dir("data_idx_test");
  write_gzip(dir / "i", idx_images(3));
  write_raw(dir / "l", idx_labels({4, 0, 9}));
  const Dataset d = cohort::data::load_idx(dir / "i", dir / "l");
  CHECK(d.size() == 3);
  CHECK(d.label(0) == 4);
  CHECK(d.label(2) == 9);
  CHECK(d.image(1)[0] == 1.0f / 255.0f);
  CHECK(d.image(2)[253] == 255.0f / 255.0f);
  CHECK(d.name() == dir / "i");

  // Other sizes when asked for.
  write_raw(dir / "i32", idx_images(3, 32, 32));
  CHECK(cohort::data::load_idx(dir / "i32", dir / "l", {.rows = 32, .cols = 32}).image_shape() ==
        cohort::Shape{32, 32, 1});
}

TEST_CASE("bad files: each a DataError naming the file and the fault") {
  cohort::test::TempDir dir("data_idx_test");
  const std::string good_images = dir / "good-images", good_labels = dir / "good-labels";
  write_raw(good_images, idx_images(5));
  write_raw(good_labels, idx_labels(labels_of(5)));
  REQUIRE(load_error(good_images, good_labels) == "(no error)");

  SUBCASE("missing file") {
    const std::string missing = dir / "nope-images";
    const std::string e = load_error(missing, good_labels);
    CHECK(contains(e, missing + ": no such file"));
    CHECK(contains(load_error(good_images, dir / "nope-labels"), dir / "nope-labels"));
    CHECK(contains(load_error(dir.path.string(), good_labels), "is a directory"));
    CHECK(load_error("", good_labels) == "an empty file name where an IDX file was expected");
  }
  SUBCASE("wrong magic: labels given as images, and a non-IDX file") {
    std::string e = load_error(good_labels, good_labels);
    CHECK(contains(e, good_labels + ": found magic 0x00000801, expected 0x00000803"));
    e = load_error(good_images, good_images);
    CHECK(contains(e, good_images + ": found magic 0x00000803, expected 0x00000801"));
    write_raw(dir / "png", "\x89PNG\r\n\x1a\n rest of a picture");
    CHECK(contains(load_error(dir / "png", good_labels), "found magic 0x89504e47, expected 0x00000803"));
  }
  SUBCASE("truncated raw file") {
    const std::string images = idx_images(5);
    write_raw(dir / "cut", images.substr(0, images.size() - 100));
    const std::string e = load_error(dir / "cut", good_labels);
    CHECK(contains(e, dir / "cut" + ": truncated: expected 3936 bytes (5 images of 28x28), present 3836"));
    write_raw(dir / "cut-header", images.substr(0, 10));
    CHECK(contains(load_error(dir / "cut-header", good_labels),
                   dir / "cut-header" + ": truncated: expected 16 bytes (header), present 10"));
    write_raw(dir / "empty", "");
    CHECK(contains(load_error(good_images, dir / "empty"), dir / "empty" + ": truncated: expected 8 bytes"));
  }
  SUBCASE("truncated gzip: a whole stream of too few bytes, and a stream cut off") {
    const std::string images = idx_images(5);
    write_gzip(dir / "short.gz", images.substr(0, 1000));
    CHECK(contains(load_error(dir / "short.gz", good_labels),
                   dir / "short.gz" + ": truncated: expected 3936 bytes (5 images of 28x28), present 1000 (after gunzip)"));
    write_gzip(dir / "whole.gz", images);
    const std::string compressed = read_all(dir / "whole.gz");
    write_raw(dir / "cut.gz", compressed.substr(0, compressed.size() / 2));
    const std::string e = load_error(dir / "cut.gz", good_labels);
    CHECK(contains(e, dir / "cut.gz" + ": truncated: expected 3936 bytes"));
    CHECK(contains(e, "the gzip stream ends early"));
    // Every byte of the data there, only the trailer (its checksum and length) missing.
    write_raw(dir / "no-trailer.gz", compressed.substr(0, compressed.size() - 8));
    CHECK(contains(load_error(dir / "no-trailer.gz", good_labels),
                   dir / "no-trailer.gz" + ": the gzip stream ends early, after all 3936 bytes "
                   "(5 images of 28x28): its trailer, which checks them, is missing"));
  }
  SUBCASE("corrupt gzip data") {
    std::string bad("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03", 10);  // a gzip header
    bad += std::string(64, '\xff');
    write_raw(dir / "corrupt.gz", bad);
    const std::string e = load_error(dir / "corrupt.gz", good_labels);
    CHECK(contains(e, dir / "corrupt.gz" + ": corrupt gzip data: "));
    CHECK_FALSE(contains(e, "corrupt gzip data: " + dir / "corrupt.gz"));  // the path once
  }
  SUBCASE("bytes after the end the header announces") {
    write_raw(dir / "long", idx_images(5) + "xyz");
    CHECK(contains(load_error(dir / "long", good_labels),
                   dir / "long" + ": 3 bytes after the expected end: expected 3936 bytes"));
  }
  SUBCASE("label count differs from image count") {
    write_raw(dir / "labels4", idx_labels(labels_of(4)));
    const std::string e = load_error(good_images, dir / "labels4");
    CHECK(contains(e, good_images + ": holds 5 images but " + dir / "labels4" + " holds 4 labels"));
  }
  SUBCASE("label out of range") {
    write_raw(dir / "labels10", idx_labels({1, 2, 3, 10, 4}));
    CHECK(contains(load_error(good_images, dir / "labels10"),
                   dir / "labels10" + ": label 10 at index 3 is out of range [0, 10)"));
  }
  SUBCASE("wrong image size") {
    write_gzip(dir / "big.gz", idx_images(5, 32, 28));
    CHECK(contains(load_error(dir / "big.gz", good_labels), dir / "big.gz" + ": images are 32x28, expected 28x28"));
  }
  SUBCASE("fashion_mnist on a directory without the files") {
    try {
      cohort::data::fashion_mnist(dir.path.string(), Split::kTrain);
      FAIL("no error");
    } catch (const DataError& e) {
      CHECK(contains(e.what(), dir.path.string() + ": neither train-images-idx3-ubyte.gz nor train-images-idx3-ubyte"));
      CHECK(contains(e.what(), "--data_dir"));
    }
  }
}

TEST_CASE("the data_dir flag is registered with its default") {
  const auto* flag = cohort::flags::Registry::global().find("data_dir");
  REQUIRE(flag != nullptr);
  CHECK(flag->default_text.find("fashion-mnist") != std::string::npos);
  CHECK(flag->doc == "directory with the Fashion-MNIST (or MNIST) IDX files");
}
