// HDF5 datasets read whole, by shard and a batch of rows at a time (load_hdf5,
// dataset_from_hdf5, for_each_hdf5_batch): files written here through the HDF5 C library, so
// every selection is checked against the values written, scalars and empty datasets included.
// (tests/apps/hdf5_test.sh trains on files h5py writes.)

#include <doctest/doctest.h>
#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cohort/core/nn/data/loaders.h"
#include "loader_checks.h"
#include "support/temp_dir.h"

using cohort::Shape;
using cohort::data::for_each_hdf5_batch;
using cohort::data::load_hdf5;
using cohort::data::NpyArray;
using cohort::data::ShardSpec;
using cohort::test::invalid_argument;
using cohort::test::TempDir;

namespace {

// Writes datasets of int32 values 0, 1, 2, ... of the given shapes ({} : a scalar) to `path`.
void write_file(const std::string& path, const std::vector<std::pair<std::string, Shape>>& datasets) {
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  REQUIRE(file >= 0);
  for (const auto& [name, shape] : datasets) {
    std::vector<hsize_t> dims(shape.begin(), shape.end());
    const hid_t space = shape.empty() ? H5Screate(H5S_SCALAR)
                                      : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
    std::int64_t count = 1;
    for (const std::int64_t d : shape) count *= d;
    std::vector<std::int32_t> values(static_cast<std::size_t>(count));
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<std::int32_t>(i);
    const hid_t dataset =
        H5Dcreate2(file, name.c_str(), H5T_STD_I32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    REQUIRE(dataset >= 0);
    if (count > 0) REQUIRE(H5Dwrite(dataset, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) >= 0);
    H5Dclose(dataset);
    H5Sclose(space);
  }
  H5Fclose(file);
}

std::vector<float> values(const NpyArray& array) {
  return std::vector<float>(array.values.span().begin(), array.values.span().end());
}

// The first values of rows `rows` of a dataset of `row` values each, as write_file wrote them.
std::vector<float> rows_of(const std::vector<std::int64_t>& rows, std::int64_t row) {
  std::vector<float> out;
  for (const std::int64_t r : rows)
    for (std::int64_t i = 0; i < row; ++i) out.push_back(static_cast<float>(r * row + i));
  return out;
}

}  // namespace

TEST_CASE("HDF5 datasets by shard and by batch: the rows asked for, scalars and empty ones too") {
  TempDir dir("data_hdf5_test");
  const std::string path = dir / "arrays.h5";
  write_file(path, {{"x", {10, 2, 3}}, {"scalar", {}}, {"empty", {0, 3}}, {"two", {2, 4}}});
  const NpyArray whole = load_hdf5(path, "x");
  CHECK(whole.values.shape() == Shape{10, 2, 3});
  CHECK(values(whole) == rows_of({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 6));
  // Shards: every count-th row from the index; none where the index is past the rows.
  CHECK(values(load_hdf5(path, "x", ShardSpec{3, 4})) == rows_of({3, 7}, 6));
  CHECK(load_hdf5(path, "two", ShardSpec{3, 4}).values.shape() == Shape{0, 4});
  CHECK(load_hdf5(path, "scalar", ShardSpec{0, 2}).values.shape() == Shape{1});
  CHECK(load_hdf5(path, "scalar", ShardSpec{1, 2}).values.shape() == Shape{0});
  // Batches: in order, the last one short, none empty after an exact multiple.
  for (const std::int64_t batch : {1, 3, 4, 5, 10, 64}) {
    CAPTURE(batch);
    std::vector<Shape> shapes;
    std::vector<float> read;
    for_each_hdf5_batch(path, "x", batch, [&](const NpyArray& rows, const Shape& shape) {
      CHECK(shape == Shape{10, 2, 3});
      shapes.push_back(rows.values.shape());
      const std::vector<float> v = values(rows);
      read.insert(read.end(), v.begin(), v.end());
    });
    CHECK(read == values(whole));
    CHECK(static_cast<std::int64_t>(shapes.size()) == (10 + batch - 1) / batch);
    for (std::size_t i = 0; i < shapes.size(); ++i)
      CHECK(shapes[i] == Shape{std::min<std::int64_t>(batch, 10 - static_cast<std::int64_t>(i) * batch), 2, 3});
  }
  // A scalar and an empty dataset: one call each.
  for (const auto& [key, expected] : {std::pair<std::string, Shape>{"scalar", {1}}, {"empty", {0, 3}}}) {
    CAPTURE(key);
    std::vector<Shape> shapes;
    for_each_hdf5_batch(path, key, 4, [&](const NpyArray& rows, const Shape&) { shapes.push_back(rows.values.shape()); });
    CHECK(shapes == std::vector<Shape>{expected});
  }
  CHECK(invalid_argument([&] { for_each_hdf5_batch(path, "x", 0, [](const NpyArray&, const Shape&) {}); }) ==
        "for_each_hdf5_batch: batch size 0, expected >= 1");
  CHECK_THROWS_WITH_AS(for_each_hdf5_batch(path, "missing", 4, [](const NpyArray&, const Shape&) {}),
                       doctest::Contains("no dataset 'missing' (datasets present: "), cohort::data::DataError);
}

namespace {

// A filter that leaves the bytes as they are, registered while a file is written and gone when it
// is read: as a file h5py compressed with LZF (its own filter, id 32000) reads where HDF5 has no
// LZF plugin. Under an id HDF5 keeps for testing, which no plugin installed here can have.
std::size_t identity_filter(unsigned, std::size_t, const unsigned[], std::size_t bytes, std::size_t*, void**) {
  return bytes;
}

}  // namespace

TEST_CASE("a dataset compressed by a filter this HDF5 lacks names the filter") {
  TempDir dir("data_hdf5_test");
  const std::string path = dir / "lzf.h5";
  constexpr H5Z_filter_t kLzf = 256;
  const H5Z_class2_t lzf{H5Z_CLASS_T_VERS, kLzf, 1, 1, "lzf", nullptr, nullptr, identity_filter};
  REQUIRE(H5Zregister(&lzf) >= 0);
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hsize_t dims[2] = {4, 3}, chunk[2] = {2, 3};
  const hid_t space = H5Screate_simple(2, dims, nullptr);
  const hid_t properties = H5Pcreate(H5P_DATASET_CREATE);
  REQUIRE(H5Pset_chunk(properties, 2, chunk) >= 0);
  REQUIRE(H5Pset_filter(properties, kLzf, H5Z_FLAG_MANDATORY, 0, nullptr) >= 0);
  const hid_t dataset = H5Dcreate2(file, "x", H5T_NATIVE_FLOAT, space, H5P_DEFAULT, properties, H5P_DEFAULT);
  const std::vector<float> values(12, 1.5f);
  REQUIRE(H5Dwrite(dataset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) >= 0);
  H5Dclose(dataset);
  H5Pclose(properties);
  H5Sclose(space);
  H5Fclose(file);
  CHECK(load_hdf5(path, "x").values.shape() == Shape{4, 3});  // read while the filter is there
  REQUIRE(H5Zunregister(kLzf) >= 0);
  CHECK(cohort::test::data_error([&] { load_hdf5(path, "x"); }) ==
        path + ": dataset 'x' is compressed with filter 'lzf' (id 256), which this HDF5 library "
               "lacks: write it with gzip compression (h5py's compression='gzip') or none");
}
