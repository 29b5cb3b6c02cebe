// NumPy .npy/.npz loading: files written byte by byte, by libzip and by numpy itself in a temp
// dir, and every kind of bad file; and how fast a large .npy and CSV file load. CSV files:
// data_csv_test.cc.

#include "cohort/core/nn/data/loaders.h"

#include <doctest/doctest.h>
#include <zip.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "loader_checks.h"
#include "support/skip.h"
#include "support/stderr_capture.h"
#include "support/temp_dir.h"

using cohort::Shape;
using cohort::Tensor;
using cohort::data::CsvOptions;
using cohort::data::DataError;
using cohort::data::Dataset;
using cohort::data::NpyArray;
using cohort::test::check_same_dataset;
using cohort::test::data_error;
using cohort::test::invalid_argument;
using cohort::test::slurp;
using cohort::test::spit;
using cohort::test::TempDir;

namespace {

// A .npy file: magic, version, header length, the header dict padded to 64 bytes, then `data`.
std::string npy(const std::string& dict, const std::string& data, int version = 1) {
  const std::size_t preamble = version == 1 ? 10 : 12;
  std::string header = dict;
  header.append((64 - (preamble + header.size() + 1) % 64) % 64, ' ');
  header.push_back('\n');
  std::string out("\x93NUMPY", 6);
  out.push_back(static_cast<char>(version));
  out.push_back(0);
  for (std::size_t i = 0; i < preamble - 8; ++i)
    out.push_back(static_cast<char>(header.size() >> (8 * i) & 0xff));
  return out + header + data;
}

std::string dict(const std::string& descr, const std::string& shape, bool fortran = false) {
  return "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
         ", 'shape': " + shape + ", }";
}

// The bytes of `values` as the host (little-endian) holds them.
template <typename T>
std::string raw(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// `bytes` with each `size`-byte element reversed: a little-endian host's values as big-endian.
std::string big_endian(std::string bytes, std::size_t size) {
  for (std::size_t i = 0; i + size <= bytes.size(); i += size)
    std::reverse(bytes.begin() + static_cast<std::ptrdiff_t>(i), bytes.begin() + static_cast<std::ptrdiff_t>(i + size));
  return bytes;
}

std::vector<float> values_of(const Tensor& t) { return {t.span().begin(), t.span().end()}; }

std::string npy_error(const std::string& path) {
  return data_error([&] { cohort::data::load_npy(path); });
}

using Members = std::vector<std::pair<std::string, std::string>>;

// A zip archive of `members` (name, bytes), each stored or deflated as `method` says.
void write_zip(const std::string& path, const Members& members, zip_int32_t method) {
  int code = 0;
  zip_t* archive = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &code);
  REQUIRE(archive != nullptr);
  for (const auto& [name, bytes] : members) {
    // The buffers outlive zip_close (members is the caller's), so libzip need not copy them.
    zip_source_t* source = zip_source_buffer(archive, bytes.data(), bytes.size(), 0);
    REQUIRE(source != nullptr);
    const zip_int64_t index = zip_file_add(archive, name.c_str(), source, ZIP_FL_ENC_UTF_8);
    REQUIRE(index >= 0);
    REQUIRE(zip_set_file_compression(archive, static_cast<zip_uint64_t>(index), method, 0) == 0);
  }
  REQUIRE(zip_close(archive) == 0);
}

// The compression method of member `name` of the archive at `path`.
zip_uint16_t compression_of(const std::string& path, const std::string& name) {
  int code = 0;
  zip_t* archive = zip_open(path.c_str(), ZIP_RDONLY, &code);
  REQUIRE(archive != nullptr);
  zip_stat_t stat;
  zip_stat_init(&stat);
  REQUIRE(zip_stat(archive, name.c_str(), 0, &stat) == 0);
  zip_discard(archive);
  return stat.comp_method;
}

bool have_numpy() {
  static const bool have = std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
  return have;
}

// Runs a python3 script (numpy available) in `dir`; its exit status.
int run_python(const TempDir& dir, const std::string& script) {
  spit(dir / "script.py", script);
  const std::string command =
      "cd '" + dir.str() + "' && /usr/bin/python3 script.py > python.log 2>&1";
  const int status = std::system(command.c_str());
  if (status != 0) MESSAGE("python3 said: " << slurp(dir / "python.log"));
  return status;
}

}  // namespace

// ---- .npy ----------------------------------------------------------------------------------

TEST_CASE("save_npy then load_npy gives the shape and values back") {
  TempDir dir("data_loaders_test");
  for (const Shape& shape : {Shape{2, 3, 4}, Shape{5}, Shape{1, 1}, Shape{0, 3}}) {
    CAPTURE(cohort::to_string(shape));
    Tensor t(shape);
    for (std::int64_t i = 0; i < t.size(); ++i) t[i] = static_cast<float>(i) * 0.37f - 3.0f;
    cohort::data::save_npy(dir / "t.npy", t);
    const std::string bytes = slurp(dir / "t.npy");
    REQUIRE(bytes.size() >= 10);
    CHECK(bytes.substr(0, 8) == std::string("\x93NUMPY\x01\x00", 8));
    const std::size_t header = static_cast<unsigned char>(bytes[8]) |
                               static_cast<std::size_t>(static_cast<unsigned char>(bytes[9])) << 8;
    // numpy's alignment: the data starts at a multiple of 64 bytes, the header ends in '\n'.
    CHECK((10 + header) % 64 == 0);
    CHECK(bytes[10 + header - 1] == '\n');
    CHECK(bytes.size() == 10 + header + static_cast<std::size_t>(t.size()) * 4);
    CHECK(bytes.find("'descr': '<f4'") != std::string::npos);
    CHECK(bytes.find("'fortran_order': False") != std::string::npos);

    const NpyArray a = cohort::data::load_npy(dir / "t.npy");
    CHECK(a.values.shape() == shape);
    CHECK(values_of(a.values) == values_of(t));
    CHECK(a.dtype == "<f4");
    CHECK_FALSE(a.integral);
  }
  // A scalar tensor is a 0-d array, read back as [1].
  Tensor scalar(Shape{});
  scalar[0] = 2.5f;
  cohort::data::save_npy(dir / "s.npy", scalar);
  CHECK(slurp(dir / "s.npy").find("'shape': ()") != std::string::npos);
  const NpyArray s = cohort::data::load_npy(dir / "s.npy");
  CHECK(s.values.shape() == Shape{1});
  CHECK(s.values[0] == 2.5f);
}

TEST_CASE("hand-written .npy files of every dtype convert exactly") {
  TempDir dir("data_loaders_test");
  struct Case {
    std::string name, bytes, dtype;
    Shape shape;
    std::vector<float> values;
    bool integral;
  };
  const std::vector<Case> cases = {
      {"bool, version 2.0", npy(dict("|b1", "(4,)"), std::string("\0\1\1\0", 4), 2), "|b1",
       {4}, {0, 1, 1, 0}, true},
      {"uint8", npy(dict("|u1", "(3,)"), raw<std::uint8_t>({0, 128, 255})), "|u1", {3},
       {0, 128, 255}, true},
      {"int8", npy(dict("|i1", "(2,)"), raw<std::int8_t>({-128, 127})), "|i1", {2},
       {-128, 127}, true},
      {"int16", npy(dict("<i2", "(2, 2)"), raw<std::int16_t>({-3, 7, 32767, -32768})), "<i2",
       {2, 2}, {-3, 7, 32767, -32768}, true},
      {"uint16", npy(dict("<u2", "(1,)"), raw<std::uint16_t>({65535})), "<u2", {1}, {65535},
       true},
      {"int32, version 3.0", npy(dict("<i4", "(2,)"), raw<std::int32_t>({-100000, 1 << 24}), 3),
       "<i4", {2}, {-100000, 16777216}, true},
      {"uint32", npy(dict("<u4", "(1,)"), raw<std::uint32_t>({4000000000u})), "<u4", {1},
       {4e9f}, true},
      {"int64", npy(dict("<i8", "(3, 1)"),
                    raw<std::int64_t>({-5, std::int64_t{1} << 40, 9})), "<i8", {3, 1},
       {-5, 1099511627776.0f, 9}, true},
      {"uint64", npy(dict("<u8", "(1,)"), raw<std::uint64_t>({std::uint64_t{1} << 63})), "<u8",
       {1}, {9223372036854775808.0f}, true},
      {"float64", npy(dict("<f8", "(2, 1)"), raw<double>({0.1, -2.5})), "<f8", {2, 1},
       {static_cast<float>(0.1), -2.5f}, false},
      {"native float32 '='", npy(dict("=f4", "(2,)"), raw<float>({1.5f, -0.25f})), "=f4", {2},
       {1.5f, -0.25f}, false},
      {"0-d float64", npy(dict("<f8", "()"), raw<double>({3.25})), "<f8", {1}, {3.25f}, false},
      // float16 (numpy's half): 1, -2.5, the largest, the smallest subnormal, infinity.
      {"float16", npy(dict("<f2", "(5,)"), raw<std::uint16_t>({0x3C00, 0xC100, 0x7BFF, 0x0001, 0x7C00})),
       "<f2", {5}, {1.0f, -2.5f, 65504.0f, 0x1p-24f, std::numeric_limits<float>::infinity()}, false},
      // Big-endian files (numpy's '>' dtypes, as written on a big-endian machine or asked for).
      {"big-endian float32", npy(dict(">f4", "(2,)"), big_endian(raw<float>({1.5f, -0.25f}), 4)), ">f4",
       {2}, {1.5f, -0.25f}, false},
      {"big-endian float16", npy(dict(">f2", "(1,)"), std::string("\x3c\x00", 2)), ">f2", {1}, {1.0f}, false},
      {"big-endian int16", npy(dict(">i2", "(2,)"), big_endian(raw<std::int16_t>({-3, 300}), 2)), ">i2",
       {2}, {-3, 300}, true},
      {"big-endian int64", npy(dict(">i8", "(1,)"), big_endian(raw<std::int64_t>({-(std::int64_t{1} << 40)}), 8)),
       ">i8", {1}, {-1099511627776.0f}, true},
      {"big-endian float64", npy(dict(">f8", "(1,)"), big_endian(raw<double>({0.1}), 8)), ">f8", {1},
       {static_cast<float>(0.1)}, false},
      {"empty", npy(dict("<f4", "(0, 3)"), ""), "<f4", {0, 3}, {}, false},
      // What ast.literal_eval accepts: any key order, double quotes, spacing, no trailing comma,
      // Python 2's long integers.
      {"odd header", npy("{ \"shape\" : ( 2 , 1L ) ,'fortran_order':False,\"descr\":\"<i4\"}",
                         raw<std::int32_t>({4, -4})), "<i4", {2, 1}, {4, -4}, true},
      // Fortran and C order coincide with at most one dimension longer than 1.
      {"fortran 1-d", npy(dict("<f4", "(1, 3)", true), raw<float>({1, 2, 3})), "<f4", {1, 3},
       {1, 2, 3}, false},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    spit(dir / "a.npy", c.bytes);
    const NpyArray a = cohort::data::load_npy(dir / "a.npy");
    CHECK(a.dtype == c.dtype);
    CHECK(a.values.shape() == c.shape);
    CHECK(values_of(a.values) == c.values);
    CHECK(a.integral == c.integral);
  }
}

TEST_CASE("bad .npy files: a DataError naming the file and the fault") {
  TempDir dir("data_loaders_test");
  const std::string path = dir / "bad.npy";
  const auto error_for = [&](const std::string& bytes) {
    spit(path, bytes);
    return npy_error(path);
  };
  const std::string floats = raw<float>({1, 2, 3, 4, 5, 6});

  CHECK(npy_error(dir / "missing.npy") == dir / "missing.npy" + ": no such file");
  CHECK(npy_error("") == "an empty file name where a .npy file was expected");
  CHECK_THROWS_WITH_AS(cohort::data::load_npy(dir.str()), doctest::Contains("is a directory"),
                       DataError);
  CHECK_THROWS_WITH_AS(cohort::data::load_npy(dir / "missing.npy"),
                       doctest::Contains("missing.npy: no such file"), DataError);
  CHECK(error_for("GIF89a and some more bytes") ==
        path + ": not a .npy file: found \"GIF89a a\", expected \"\\x93NUMPY\"");
  CHECK(error_for("") == path + ": not a .npy file: found \"\", expected \"\\x93NUMPY\"");
  CHECK(error_for(std::string("PK\3\4zip")).find("use load_npz") != std::string::npos);
  CHECK(error_for(npy(dict("|f4", "(2, 3)"), floats)) == path + ": dtype '|f4' has no byte order");
  CHECK(error_for(npy(dict("<f4", "(2, 3)", true), floats)) ==
        path + ": fortran_order True (column-major shape [2, 3] of '<f4') is not supported: "
               "save a C-order array (numpy.ascontiguousarray)");
  CHECK(error_for(npy(dict("<f4", "(2, 3)"), floats.substr(0, 20))) ==
        path + ": truncated: expected 24 bytes of data (shape [2, 3] of '<f4'), present 20");
  CHECK(error_for(npy(dict("<f4", "(2, 3)"), floats + "xy")) ==
        path + ": 2 bytes after the data: expected 24 bytes of data (shape [2, 3] of '<f4'), "
               "present 26");
  CHECK(error_for(npy(dict("<c8", "(3,)"), floats)) ==
        path + ": unsupported dtype '<c8' (supported: bool, int8-64, uint8-64, float16, float32, "
               "float64)");
  for (const std::string descr : {"|O", "<U5", "|S3", "<f16", "<M8[ns]", "<i3", ""})
    CHECK(error_for(npy(dict(descr, "(1,)"), "")).find(": unsupported dtype '" + descr + "'") !=
          std::string::npos);
  CHECK(error_for(npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}",
                      "abcd")) ==
        path + ": unsupported dtype: a structured (record) array, descr [('a', '<f4')]");
  CHECK(error_for(npy("{'descr': '<f4', 'shape': (1,)}", "abcd"))
            .starts_with(path + ": bad header: no 'fortran_order' key"));
  CHECK(error_for(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,", "abcd"))
            .starts_with(path + ": bad header: "));
  CHECK(error_for(npy(dict("<f4", "(-1,)"), "")).starts_with(path + ": bad header: "));
  std::string v4 = npy(dict("<f4", "(1,)"), "abcd");
  v4[6] = 4;
  CHECK(error_for(v4) ==
        path + ": unsupported .npy format version 4.0 (1.0, 2.0 and 3.0 are read)");
  const std::string whole = npy(dict("<f4", "(1,)"), "abcd");
  CHECK(error_for(whole.substr(0, 9)) ==
        path + ": truncated: 9 bytes, less than the .npy preamble");
  CHECK(error_for(whole.substr(0, 40)) ==
        path + ": truncated: the header needs 128 bytes, present 40");
  // A header whose shape overflows must not allocate anything.
  CHECK(error_for(npy(dict("<f4", "(4294967296, 4294967296)"), "")).find("is too large") !=
        std::string::npos);
  // The message shows the file's whole shape, not the dimensions read before the overflow.
  CHECK(error_for(npy(dict("<f4", "(4294967296, 4294967296, 4294967296, 1)"), ""))
            .find("shape [4294967296, 4294967296, 4294967296, 1] is too large") != std::string::npos);
}

// ---- .npz ----------------------------------------------------------------------------------

TEST_CASE(".npz archives, stored and deflated, load by name and as datasets") {
  TempDir dir("data_loaders_test");
  std::vector<float> x(4 * 3);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) / 8.0f;
  const Members members = {
      {"x.npy", npy(dict("<f4", "(4, 3)"), raw(x))},
      {"y.npy", npy(dict("<i8", "(4,)"), raw<std::int64_t>({2, 0, 1, 2}))},
      {"t.npy", npy(dict("<f8", "(4,)"), raw<double>({0.5, -1, 2, 4}))},
  };
  for (const zip_int32_t method : {ZIP_CM_STORE, ZIP_CM_DEFLATE}) {
    CAPTURE(method);
    const std::string path = dir / "d.npz";
    write_zip(path, members, method);
    REQUIRE(compression_of(path, "x.npy") == method);

    const auto arrays = cohort::data::load_npz(path);
    REQUIRE(arrays.size() == 3);
    REQUIRE(arrays.contains("x"));
    CHECK(arrays.at("x").values.shape() == Shape{4, 3});
    CHECK(values_of(arrays.at("x").values) == x);
    CHECK(arrays.at("y").dtype == "<i8");
    CHECK(arrays.at("y").integral);
    CHECK(values_of(arrays.at("y").values) == std::vector<float>{2, 0, 1, 2});
    CHECK(values_of(arrays.at("t").values) == std::vector<float>{0.5f, -1, 2, 4});

    const Dataset labelled = cohort::data::dataset_from_npz(path);
    CHECK(labelled.size() == 4);
    CHECK(labelled.example_shape() == Shape{3});
    REQUIRE(labelled.has_labels());
    CHECK(labelled.num_classes() == 3);
    CHECK(labelled.label(0) == 2);
    CHECK(labelled.label(1) == 0);
    CHECK(labelled.label(3) == 2);
    CHECK(labelled.example(1)[2] == 5.0f / 8.0f);
    CHECK(labelled.name() == path);
    CHECK(cohort::data::dataset_from_npz(path, "x", "y", 7).num_classes() == 7);

    const Dataset regression = cohort::data::dataset_from_npz(path, "x", "t");
    REQUIRE_FALSE(regression.has_labels());
    CHECK(regression.target_shape() == Shape{1});
    CHECK(regression.target(3)[0] == 4.0f);

    CHECK(data_error([&] { cohort::data::dataset_from_npz(path, "x", "labels"); }) ==
          path + ": no array 'labels' (keys present: 't', 'x', 'y')");
    CHECK(data_error([&] { cohort::data::dataset_from_npz(path, "x", "x"); }) ==
          path + ": the features and the targets are both array 'x': name the targets' own array "
                 "(a model would learn to copy its input)");
  }
}

TEST_CASE("bad .npz archives: a DataError naming the archive and the member") {
  TempDir dir("data_loaders_test");
  const std::string path = dir / "bad.npz";
  const auto npz_error = [&] { return data_error([&] { cohort::data::load_npz(path); }); };

  CHECK(data_error([&] { cohort::data::load_npz(dir / "none.npz"); }) ==
        dir / "none.npz" + ": no such file");
  spit(path, "this is plain text, not a zip archive at all, but long enough to look at");
  CHECK(npz_error() == path + ": not a zip archive (an .npz file is one)");
  CHECK(data_error([&] { cohort::data::dataset_from_npz(path); }) ==
        path + ": not a zip archive (an .npz file is one)");
  spit(path, "");
  CHECK(npz_error() == path + ": empty file, not a zip archive (an .npz file is one)");
  spit(path, npy(dict("<f4", "(1,)"), "abcd"));
  CHECK(npz_error() == path + ": a .npy file, not an .npz archive (use load_npy)");

  const std::string good = npy(dict("<f4", "(1,)"), "abcd");
  const Members with_text = {{"x.npy", good},
                                                                      {"notes.txt", "hello"}};
  write_zip(path, with_text, ZIP_CM_STORE);
  CHECK(npz_error() == path + ": member 'notes.txt' is not a .npy file (an .npz archive holds "
                              "NAME.npy arrays)");

  const Members bad_member = {
      {"x.npy", good}, {"y.npy", npy(dict("<c8", "(1,)"), "12345678")}};
  write_zip(path, bad_member, ZIP_CM_DEFLATE);
  CHECK(npz_error() == path + ": member y.npy: unsupported dtype '<c8' (supported: bool, int8-64, "
                              "uint8-64, float16, float32, float64)");
  const Members short_member = {
      {"x.npy", good.substr(0, good.size() - 1)}};
  write_zip(path, short_member, ZIP_CM_STORE);
  CHECK(npz_error() == path + ": member x.npy: truncated: expected 4 bytes of data (shape [1] "
                              "of '<f4'), present 3");

  // A damaged deflate stream: libzip's CRC or inflate check names the fault.
  std::string payload(4096, '\0');
  const Members big = {
      {"x.npy", npy(dict("<f4", "(1024,)"), payload)}};
  write_zip(path, big, ZIP_CM_DEFLATE);
  std::string zip = slurp(path);
  zip[40] = static_cast<char>(zip[40] ^ 0x55);
  spit(path, zip);
  CHECK(npz_error().starts_with(path + ": member x.npy: "));

  // A flipped byte in a member's data, stored or deflated: the CRC-32 refuses it, as NumPy does.
  for (const zip_int32_t method : {ZIP_CM_STORE, ZIP_CM_DEFLATE}) {
    CAPTURE(method);
    std::vector<float> values(1024);
    // Values that deflate hardly at all, so that the flipped byte is in the member's data.
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = std::sin(static_cast<float>(i));
    const Members members = {{"x.npy", npy(dict("<f4", "(1024,)"), raw(values))}};
    write_zip(path, members, method);
    std::string damaged = slurp(path);
    const std::size_t at = damaged.find("x.npy") + 1000;
    damaged[at] = static_cast<char>(damaged[at] ^ 0x01);
    spit(path, damaged);
    CHECK(npz_error().starts_with(path + ": member x.npy: "));
  }
  // Cut short, as an interrupted copy leaves it: a zip archive still, but damaged.
  const Members whole = {{"x.npy", good}};
  write_zip(path, whole, ZIP_CM_STORE);
  const std::string zip_bytes = slurp(path);
  spit(path, zip_bytes.substr(0, zip_bytes.size() / 2));
  CHECK(npz_error() == path + ": a damaged or truncated zip archive (its directory at the end is missing)");
}

// ---- numpy itself ----------------------------------------------------------------------------

TEST_CASE("files written by numpy load, and numpy reads save_npy's") {
  if (!have_numpy()) return cohort::test::skip("/usr/bin/python3 cannot import numpy (Debian: python3-numpy)");
  TempDir dir("data_loaders_test");
  Tensor ours({2, 3});
  for (std::int64_t i = 0; i < ours.size(); ++i) ours[i] = static_cast<float>(i) - 1.75f;
  cohort::data::save_npy(dir / "ours.npy", ours);
  REQUIRE(run_python(dir, R"(
import numpy as np
x = (np.arange(15, dtype=np.float32) / 4).reshape(5, 3)
y = np.array([0, 2, 1, 2, 0], dtype=np.int64)
np.save('x.npy', x)
np.save('y.npy', y)
np.savez_compressed('d.npz', x=x, y=y)
np.savez('stored.npz', features=x, labels=y.astype(np.uint8))
z = np.linspace(-1, 1, 7)
np.save('z.npy', z)
np.save('z32.npy', z.astype(np.float32))
np.save('b.npy', np.array([[True, False], [False, True]]))
np.save('s.npy', np.float32(2.5))
np.save('big.npy', x.astype('>f4'))
np.save('half.npy', x.astype(np.float16))
np.save('f.npy', np.asfortranarray(x))
with open('v2.npy', 'wb') as f:
    np.lib.format.write_array(f, x, version=(2, 0))
a = np.load('ours.npy')
assert a.dtype == np.float32 and a.shape == (2, 3), (a.dtype, a.shape)
assert (a == np.arange(6, dtype=np.float32).reshape(2, 3) - 1.75).all(), a
)") == 0);

  std::vector<float> x(15);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) / 4.0f;
  const NpyArray xa = cohort::data::load_npy(dir / "x.npy");
  CHECK(xa.values.shape() == Shape{5, 3});
  CHECK(values_of(xa.values) == x);
  CHECK(values_of(cohort::data::load_npy(dir / "v2.npy").values) == x);
  const NpyArray ya = cohort::data::load_npy(dir / "y.npy");
  CHECK(ya.dtype == "<i8");
  CHECK(values_of(ya.values) == std::vector<float>{0, 2, 1, 2, 0});

  const NpyArray z = cohort::data::load_npy(dir / "z.npy");
  CHECK(z.dtype == "<f8");
  REQUIRE(z.values.shape() == Shape{7});
  CHECK(values_of(z.values) == values_of(cohort::data::load_npy(dir / "z32.npy").values));
  CHECK(z.values[6] == 1.0f);
  const NpyArray b = cohort::data::load_npy(dir / "b.npy");
  CHECK(b.dtype == "|b1");
  CHECK(values_of(b.values) == std::vector<float>{1, 0, 0, 1});
  CHECK(cohort::data::load_npy(dir / "s.npy").values.shape() == Shape{1});
  CHECK(values_of(cohort::data::load_npy(dir / "big.npy").values) == x);
  CHECK(values_of(cohort::data::load_npy(dir / "half.npy").values) == x);  // quarters: exact in float16
  CHECK(npy_error(dir / "f.npy").find("fortran_order True") != std::string::npos);

  const Dataset d = cohort::data::dataset_from_npy(dir / "x.npy", dir / "y.npy");
  CHECK(d.size() == 5);
  CHECK(d.num_classes() == 3);
  CHECK(d.label(1) == 2);
  CHECK(d.example(4)[2] == 14.0f / 4.0f);

  const auto npz = cohort::data::load_npz(dir / "d.npz");
  REQUIRE(npz.size() == 2);
  CHECK(values_of(npz.at("x").values) == x);
  const Dataset compressed = cohort::data::dataset_from_npz(dir / "d.npz");
  CHECK(compressed.size() == 5);
  CHECK(compressed.label(3) == 2);
  const Dataset stored = cohort::data::dataset_from_npz(dir / "stored.npz", "features", "labels");
  CHECK(stored.num_classes() == 3);
  CHECK(stored.label(1) == 2);
}

// ---- dataset_from_arrays -------------------------------------------------------------------

namespace {

NpyArray array(Shape shape, std::vector<float> values, std::string dtype) {
  NpyArray a;
  a.values = Tensor(std::move(shape), values);
  a.integral = dtype != "<f4" && dtype != "<f8";
  a.dtype = std::move(dtype);
  return a;
}

}  // namespace

TEST_CASE("dataset_from_arrays: labels from integers, float targets from floats") {
  const NpyArray x = array({4, 2}, {0, 1, 2, 3, 4, 5, 6, 7}, "<f4");

  TempDir dir("data_loaders_test");
  std::vector<std::string> warnings;
  Dataset labels;
  {
    cohort::test::StderrCapture err(dir / "stderr.txt");
    labels = cohort::data::dataset_from_arrays(x, array({4}, {1, 0, 3, 1}, "<i8"), "mine");
    warnings = err.lines();
  }
  REQUIRE(labels.has_labels());
  CHECK(labels.num_classes() == 4);
  // Class 2 counted without an example: a mistyped label, most likely.
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].ends_with("warning: mine: targets: 4 classes counted as the largest label + 1, 1 of which "
                              "no example has (2): a mistyped label? (a num_classes given refuses labels "
                              "from it on)"));
  CHECK(labels.label(2) == 3);
  CHECK(labels.name() == "mine");
  CHECK(labels.example(3)[1] == 7.0f);

  const Dataset given = cohort::data::dataset_from_arrays(x, array({4, 1}, {1, 0, 3, 1}, "|u1"),
                                                          "mine", 10);
  CHECK(given.num_classes() == 10);
  CHECK(given.label(0) == 1);
  CHECK(cohort::data::dataset_from_arrays(x, array({4}, {0, 0, 0, 0}, "|b1"), "b").num_classes() ==
        2);

  const Dataset floats = cohort::data::dataset_from_arrays(x, array({4}, {0.5f, 1, 2, 3}, "<f4"),
                                                           "mine");
  REQUIRE_FALSE(floats.has_labels());
  CHECK(floats.target_shape() == Shape{1});
  CHECK(floats.target(0)[0] == 0.5f);
  // Integers of another shape are float targets too (one-hot rows, say).
  const Dataset onehot = cohort::data::dataset_from_arrays(
      x, array({4, 2}, {1, 0, 0, 1, 1, 0, 0, 1}, "<i4"), "mine");
  REQUIRE_FALSE(onehot.has_labels());
  CHECK(onehot.target_shape() == Shape{2});

  const Dataset column = cohort::data::dataset_from_arrays(
      array({3}, {7, 8, 9}, "<f4"), array({3}, {0, 1, 0}, "<i4"), "mine");
  CHECK(column.example_shape() == Shape{1});
  CHECK(column.example(2)[0] == 9.0f);

  CHECK(data_error([&] {
          cohort::data::dataset_from_arrays(x, array({3}, {0, 1, 0}, "<i4"), "mine");
        }) == "mine: features [4, 2] and targets [3] differ in their first dimension: 4 vs 3 "
              "examples");
  CHECK(data_error([&] {
          cohort::data::dataset_from_arrays(x, array({4}, {0, 1, -1, 0}, "<i4"), "mine");
        }) == "mine: targets: label -1 at index 2 is negative");
  CHECK(data_error([&] {
          cohort::data::dataset_from_arrays(x, array({4}, {0, 1, 5, 0}, "<i4"), "mine", 5);
        }) == "mine: targets: label 5 at index 2 is outside [0, 5)");
  // A label as large as 2^63 (a uint64 in the file) is printed as it is, not wrapped around;
  // from 2^24 on, float32 holds integers rounded (2^31 + 1 reads as 2^31): "about".
  CHECK(data_error([&] {
          cohort::data::dataset_from_arrays(x, array({4}, {0, 1, 9223372036854775808.0f, 0}, "<u8"), "mine");
        }) == "mine: targets: a label of about 9223372036854775808 at index 2 is too large for a class label");
}

TEST_CASE("NaN, infinities and float64 beyond float32 are refused, naming the file and the example") {
  TempDir dir("data_loaders_test");
  const float nan = std::numeric_limits<float>::quiet_NaN();
  spit(dir / "y.npy", npy(dict("<i4", "(3,)"), raw<std::int32_t>({0, 1, 2})));
  spit(dir / "x.npy", npy(dict("<f4", "(3, 2)"), raw<float>({1, 2, 3, 4, nan, 6})));
  CHECK(data_error([&] { cohort::data::dataset_from_npy(dir / "x.npy", dir / "y.npy"); }) ==
        dir / "x.npy" + ": features: the value at flat index 4 (example 2) is NaN (a missing value?)");
  spit(dir / "x.npy", npy(dict("<f8", "(3,)"), raw<double>({1, 1e300, 3})));
  CHECK(data_error([&] { cohort::data::dataset_from_npy(dir / "x.npy", dir / "y.npy"); }) ==
        dir / "x.npy" + ": features: the value at flat index 1 (example 1) is infinite, or beyond "
                        "float32's range");
  spit(dir / "x.npy", npy(dict("<f4", "(3,)"), raw<float>({1, 2, 3})));
  spit(dir / "t.npy", npy(dict("<f4", "(3,)"), raw<float>({1, -std::numeric_limits<float>::infinity(), 3})));
  CHECK(data_error([&] { cohort::data::dataset_from_npy(dir / "x.npy", dir / "t.npy"); }) ==
        dir / "t.npy" + ": the value at flat index 1 (example 1) is infinite, or beyond float32's range");
  CHECK(cohort::data::dataset_from_npy(dir / "x.npy", dir / "y.npy").size() == 3);
  // In a shard, the file's example and index: worker 1 of 2 holds examples 1, 3 and 5.
  spit(dir / "y6.npy", npy(dict("<i4", "(6,)"), raw<std::int32_t>({0, 1, 2, 0, 1, 2})));
  spit(dir / "x6.npy", npy(dict("<f4", "(6, 2)"), raw<float>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, nan})));
  CHECK(data_error([&] { cohort::data::dataset_from_npy(dir / "x6.npy", dir / "y6.npy", 0, {1, 2}); }) ==
        dir / "x6.npy" + ": features: the value at flat index 11 (example 5) is NaN (a missing value?)");
  CHECK(cohort::data::dataset_from_npy(dir / "x6.npy", dir / "y6.npy", 0, {0, 2}).size() == 3);
}

TEST_CASE("dataset_from_npy names the files in its errors") {
  TempDir dir("data_loaders_test");
  Tensor x({3, 2});
  cohort::data::save_npy(dir / "x.npy", x);
  spit(dir / "y.npy", npy(dict("<i4", "(2,)"), raw<std::int32_t>({0, 1})));
  CHECK(data_error([&] { cohort::data::dataset_from_npy(dir / "x.npy", dir / "y.npy"); }) ==
        dir / "x.npy" + ": features [3, 2] and targets " + dir / "y.npy" +
            " [2] differ in their first dimension: 3 vs 2 examples");
  spit(dir / "y.npy", npy(dict("<i4", "(3,)"), raw<std::int32_t>({0, 1, 4})));
  CHECK(data_error([&] { cohort::data::dataset_from_npy(dir / "x.npy", dir / "y.npy", 3); }) ==
        dir / "y.npy" + ": label 4 at index 2 is outside [0, 3)");
  CHECK(cohort::data::dataset_from_npy(dir / "x.npy", dir / "y.npy").num_classes() == 5);
  CHECK(npy_error(dir / "nope.npy") == dir / "nope.npy" + ": no such file");
}

TEST_CASE("a shard of a .npy or .npz dataset, read alone, is the dataset's shard") {
  TempDir dir("data_loaders_test");
  constexpr int kRows = 11;
  std::vector<std::uint8_t> pixels(kRows * 2 * 3);
  std::vector<double> wide(kRows * 2);
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<std::uint8_t>(i * 7 % 251);
  for (std::size_t i = 0; i < wide.size(); ++i) wide[i] = 0.25 * static_cast<double>(i) - 3.0;
  // The largest label (6) is in row 9 only: every shard must still count 7 classes.
  const std::vector<std::int64_t> labels = {0, 1, 2, 0, 1, 2, 0, 1, 2, 6, 0};
  std::vector<float> targets(kRows * 2);
  for (std::size_t i = 0; i < targets.size(); ++i) targets[i] = static_cast<float>(i) / 3.0f;
  spit(dir / "x.npy", npy(dict("|u1", "(11, 2, 3)"), raw(pixels)));
  spit(dir / "w.npy", npy(dict("<f8", "(11, 2)"), raw(wide)));
  spit(dir / "y.npy", npy(dict("<i8", "(11,)"), raw(labels)));
  spit(dir / "t.npy", npy(dict("<f4", "(11, 2)"), raw(targets)));
  spit(dir / "f.npy", npy(dict("<f4", "(11, 2)"), raw(targets)));  // float32 features too
  write_zip(dir / "d.npz",
            {{"x.npy", slurp(dir / "x.npy")}, {"y.npy", slurp(dir / "y.npy")},
             {"t.npy", slurp(dir / "t.npy")}},
            ZIP_CM_DEFLATE);

  for (const int count : {1, 2, 3, 4, 12}) {
    for (int index = 0; index < count; ++index) {
      CAPTURE(count);
      CAPTURE(index);
      const cohort::data::ShardSpec shard{index, count};
      const auto whole = cohort::data::load_npy(dir / "x.npy");
      const auto part = cohort::data::load_npy(dir / "x.npy", shard);
      const std::int64_t kept = index < kRows ? (kRows - index + count - 1) / count : 0;
      CHECK(part.values.shape() == Shape{kept, 2, 3});
      CHECK(part.dtype == "|u1");
      for (std::int64_t r = 0; r < kept; ++r)
        for (std::int64_t j = 0; j < 6; ++j)
          CHECK(part.values[r * 6 + j] == whole.values[(index + r * count) * 6 + j]);

      check_same_dataset(cohort::data::dataset_from_npy(dir / "x.npy", dir / "y.npy", 0, shard),
                         cohort::data::dataset_from_npy(dir / "x.npy", dir / "y.npy").shard(index, count));
      check_same_dataset(cohort::data::dataset_from_npy(dir / "w.npy", dir / "t.npy", 0, shard),
                         cohort::data::dataset_from_npy(dir / "w.npy", dir / "t.npy").shard(index, count));
      check_same_dataset(cohort::data::dataset_from_npy(dir / "f.npy", dir / "y.npy", 0, shard),
                         cohort::data::dataset_from_npy(dir / "f.npy", dir / "y.npy").shard(index, count));
      check_same_dataset(cohort::data::dataset_from_npz(dir / "d.npz", "x", "y", 0, shard),
                         cohort::data::dataset_from_npz(dir / "d.npz").shard(index, count));
      check_same_dataset(cohort::data::dataset_from_npz(dir / "d.npz", "x", "t", 0, shard),
                         cohort::data::dataset_from_npz(dir / "d.npz", "x", "t").shard(index, count));
    }
  }
  // Every label is checked, also those of other shards; counts are compared in the files.
  spit(dir / "bad.npy", npy(dict("<i8", "(11,)"), raw<std::int64_t>({0, 1, 2, 0, 1, 2, 0, 1, 2, 9, 0})));
  CHECK(data_error([&] { cohort::data::dataset_from_npy(dir / "x.npy", dir / "bad.npy", 7, {0, 2}); }) ==
        dir / "bad.npy" + ": label 9 at index 9 is outside [0, 7)");
  spit(dir / "short.npy", npy(dict("<i8", "(10,)"), raw<std::int64_t>(std::vector<std::int64_t>(10, 1))));
  CHECK(data_error([&] { cohort::data::dataset_from_npy(dir / "x.npy", dir / "short.npy", 0, {1, 3}); }) ==
        dir / "x.npy" + ": features [11, 2, 3] and targets " + dir / "short.npy" +
            " [10] differ in their first dimension: 11 vs 10 examples");
  CHECK(invalid_argument([&] { cohort::data::load_npy(dir / "x.npy", {2, 2}); }) ==
        dir / "x.npy" + ": shard index 2 of count 2 (need 0 <= index < count)");
  CHECK(invalid_argument([&] { cohort::data::dataset_from_npy(dir / "x.npy", dir / "y.npy", 0, {-1, 2}); }) ==
        dir / "x.npy" + ": shard index -1 of count 2 (need 0 <= index < count)");
  CHECK(invalid_argument([&] { cohort::data::dataset_from_npz(dir / "d.npz", "x", "y", 0, {0, 0}); }) ==
        dir / "d.npz" + ": shard index 0 of count 0 (need 0 <= index < count)");
  // A 0-d array is one row; rows of nothing, and no rows, shard too.
  spit(dir / "scalar.npy", npy(dict("<f4", "()"), raw<float>({2.5f})));
  CHECK(cohort::data::load_npy(dir / "scalar.npy", {0, 2}).values.shape() == Shape{1});
  CHECK(cohort::data::load_npy(dir / "scalar.npy", {1, 2}).values.shape() == Shape{0});
  spit(dir / "narrow.npy", npy(dict("<f4", "(5, 0)"), ""));
  CHECK(cohort::data::load_npy(dir / "narrow.npy", {1, 2}).values.shape() == Shape{2, 0});
  spit(dir / "none.npy", npy(dict("<f4", "(0, 3)"), ""));
  CHECK(cohort::data::load_npy(dir / "none.npy", {0, 3}).values.shape() == Shape{0, 3});
  // Rows larger than a window of about a megabyte are read one at a time.
  std::vector<float> big(3 * 300000);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i % 1000);
  spit(dir / "big.npy", npy(dict("<f4", "(3, 300000)"), raw(big)));
  const auto middle = cohort::data::load_npy(dir / "big.npy", {1, 2});
  REQUIRE(middle.values.shape() == Shape{1, 300000});
  CHECK(std::equal(middle.values.span().begin(), middle.values.span().end(), big.begin() + 300000));
}

TEST_CASE("a 60000 x 784 float32 .npy and a 100000-row CSV load whole and exact") {
  // Sizes of real data: a quadratic path would run into the test's timeout (tests check what
  // is loaded, not how fast).
  TempDir dir("data_loaders_test");
  Tensor images({60000, 784});
  for (std::int64_t i = 0; i < images.size(); ++i) images[i] = static_cast<float>(i % 251) / 251;
  cohort::data::save_npy(dir / "images.npy", images);
  const NpyArray loaded = cohort::data::load_npy(dir / "images.npy");
  CHECK(loaded.values.shape() == images.shape());
  CHECK(std::memcmp(loaded.values.data(), images.data(), images.size() * 4) == 0);

  std::string text = "a,b,c,d,label\n";
  for (int i = 0; i < 100000; ++i)
    text += std::to_string(i) + ",0.25,-1.5e3, 7 ," + std::to_string(i % 10) + "\n";
  spit(dir / "big.csv", text);
  const Dataset table = cohort::data::load_csv(dir / "big.csv", {.label_column = "label"});
  CHECK(table.size() == 100000);
  CHECK(table.label(99999) == 9);
  CHECK(table.example(99999)[0] == 99999.0f);
}

TEST_CASE("save_npy of int32 labels reads back as class labels") {
  cohort::test::TempDir dir("loaders_labels");
  const std::vector<std::int32_t> labels = {3, 0, 2, 2};
  cohort::data::save_npy(dir / "y.npy", labels);
  const auto array = cohort::data::load_npy(dir / "y.npy");
  CHECK(array.integral);
  CHECK(array.dtype == "<i4");
  cohort::Tensor x({4, 2});
  cohort::data::save_npy(dir / "x.npy", x);
  const auto data = cohort::data::dataset_from_npy(dir / "x.npy", dir / "y.npy");
  REQUIRE(data.has_labels());
  CHECK(data.num_classes() == 4);
  for (std::int64_t i = 0; i < 4; ++i) CHECK(data.label(i) == labels[static_cast<std::size_t>(i)]);
}

TEST_CASE("channels_last turns PyTorch's image layout into Cohort's; check_not_channels_first spots it") {
  // Two images of 3 channels, 2 x 5 pixels: value 100 i + 10 c + p for image i, channel c, pixel p.
  Tensor nchw({2, 3, 2, 5});
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t c = 0; c < 3; ++c)
      for (std::int64_t p = 0; p < 10; ++p) nchw.data()[(i * 3 + c) * 10 + p] = static_cast<float>(100 * i + 10 * c + p);
  const Tensor nhwc = cohort::data::channels_last(nchw, "x.npy");
  CHECK(nhwc.shape() == Shape{2, 2, 5, 3});
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t p = 0; p < 10; ++p)
      for (std::int64_t c = 0; c < 3; ++c)
        CHECK(nhwc.data()[(i * 10 + p) * 3 + c] == static_cast<float>(100 * i + 10 * c + p));
  // Images channels-last already: turning them would make 32 channels of 3 columns.
  CHECK_THROWS_WITH_AS(cohort::data::channels_last(Tensor({2, 32, 32, 3}), "x.npy"),
                       "x.npy: images of [32, 32, 3] look channels-last already ([height, width, channels]), not "
                       "[channels, height, width]",
                       cohort::InvalidArgument);
  CHECK_THROWS_WITH_AS(cohort::data::channels_last(Tensor({2, 28, 28}), "x.npy"),
                       "x.npy: examples of [28, 28], not images [channels, height, width] to turn channels-last",
                       cohort::InvalidArgument);

  for (const Shape& pytorch : {Shape{3, 32, 32}, Shape{1, 28, 28}, Shape{4, 64, 48}}) {
    CAPTURE(pytorch);
    CHECK_THROWS_AS(cohort::data::check_not_channels_first(pytorch, "x.npy", "give --channels_first to turn them"),
                    cohort::InvalidArgument);
  }
  CHECK_THROWS_WITH_AS(cohort::data::check_not_channels_first({3, 32, 32}, "--train=x.npy", "give --channels_first to turn them"),
                       "--train=x.npy: images of [3, 32, 32] look channels-first ([channels, height, width], "
                       "PyTorch's layout), where Cohort's are [height, width, channels]: give --channels_first "
                       "to turn them",
                       cohort::InvalidArgument);
  for (const Shape& cohort_layout : {Shape{32, 32, 3}, Shape{28, 28, 1}, Shape{28, 28}, Shape{3, 4, 4}, Shape{1, 1, 8}})
    CHECK_NOTHROW(cohort::data::check_not_channels_first(cohort_layout, "x.npy", "give --channels_first to turn them"));
}
