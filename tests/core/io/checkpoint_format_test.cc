// The safetensors checkpoint format: a bit-exact round trip, the byte layout, and every kind of
// damaged or malformed file (crafted byte by byte in a temp dir under the build tree), each
// rejected with a CheckpointError naming the file and the fault.

#include <doctest/doctest.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cohort/core/io/safetensors.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
using cohort::Checkpoint;
using cohort::CheckpointError;
using cohort::CheckpointTensor;

namespace {

using cohort::test::TempDir;
using cohort::test::slurp;
using cohort::test::spit;

std::string le64(std::uint64_t v) {
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i) & 0xff));
  return out;
}

std::string floats(const std::vector<float>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
}

std::string crc_hex(const std::string& data) {
  char text[9];
  std::snprintf(text, sizeof text, "%08x", cohort::crc32c(std::as_bytes(std::span(data))));
  return text;
}

// A file with this header and data region; the header is used verbatim (no padding).
std::string raw_file(const std::string& header, const std::string& data) {
  return le64(header.size()) + header + data;
}

// A well-formed header for `data` with the given tensor entries, metadata completed with a
// matching checksum unless `metadata` overrides it. Format version 1, without a header checksum,
// so that each crafted fault reaches the check it is aimed at.
std::string header_for(nlohmann::ordered_json entries, const std::string& data,
                       nlohmann::ordered_json metadata = nlohmann::ordered_json::object()) {
  nlohmann::ordered_json meta{{"format_version", "1"}, {"global_step", "7"},
                              {"crc32c", crc_hex(data)}};
  for (auto& [k, v] : metadata.items()) {
    if (v.is_null())
      meta.erase(k);
    else
      meta[k] = v;
  }
  nlohmann::ordered_json header{{"__metadata__", meta}};
  for (auto& [k, v] : entries.items()) header[k] = v;
  return header.dump();
}

nlohmann::ordered_json f32(std::vector<std::int64_t> shape, std::uint64_t begin,
                           std::uint64_t end) {
  return {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {begin, end}}};
}

std::string read_error(const std::string& path) {
  try {
    cohort::read_checkpoint(path);
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "(read_checkpoint accepted the file)";
}

// The error for `path` starts with the path and contains every one of `parts`.
void check_error(const std::string& path, std::initializer_list<std::string> parts) {
  const std::string message = read_error(path);
  INFO("message: " << message);
  CHECK(message.rfind(path + ": ", 0) == 0);
  for (const auto& part : parts) CHECK_MESSAGE(message.find(part) != std::string::npos, part);
  CHECK(message.find('\n') == std::string::npos);
}

std::uint32_t bits(float f) { return std::bit_cast<std::uint32_t>(f); }

Checkpoint sample() {
  Checkpoint c;
  c.metadata = {{"global_step", "300"}, {"model", "mlp"}, {"mode", "async"}, {"note", "x y"}};
  std::vector<float> kernel(12);
  for (int i = 0; i < 12; ++i) kernel[static_cast<std::size_t>(i)] = 0.1f * static_cast<float>(i) - 0.5f;
  // Values that a text round trip or a float conversion would change.
  kernel[0] = -0.0f;
  kernel[1] = std::numeric_limits<float>::infinity();
  kernel[2] = std::numeric_limits<float>::denorm_min();
  kernel[3] = std::bit_cast<float>(0x7fc12345u);  // a NaN with a payload
  kernel[4] = std::numeric_limits<float>::max();
  c.tensors.push_back({"hidden1/kernel", {3, 4}, kernel});
  c.tensors.push_back({"hidden1/bias", {4}, {1.f, 2.f, 3.f, 4.f}});
  c.tensors.push_back({"empty", {0, 5}, {}});
  c.tensors.push_back({"scalar", {}, {42.5f}});
  c.tensors.push_back({"optimizer/momentum", {2, 2}, {-1.f, 1e-30f, 1e30f, 7.f}});
  return c;
}

}  // namespace

TEST_CASE("crc32c is CRC-32C (Castagnoli)") {
  const std::string check = "123456789";  // the standard check input
  CHECK(cohort::crc32c(std::as_bytes(std::span(check))) == 0xE3069283u);
  CHECK(cohort::crc32c({}) == 0u);
}

TEST_CASE("a checkpoint's header alone: its metadata, no tensors; a damaged header is named") {
  TempDir dir("ckpt_format_header");
  const Checkpoint original = sample();
  const std::string path = dir / "model.ckpt-300.safetensors";
  cohort::write_checkpoint(path, original);
  const Checkpoint header = cohort::read_checkpoint_header(path);
  CHECK(header.tensors.empty());
  CHECK(header.global_step() == original.global_step());
  CHECK(header.metadata.at("model") == original.metadata.at("model"));
  // The data is not read: a byte flipped there passes; one in the header does not.
  const std::string bytes = slurp(path);
  std::string data_flipped = bytes;
  data_flipped.back() ^= 1;
  spit(path, data_flipped);
  CHECK(cohort::read_checkpoint_header(path).global_step() == original.global_step());
  CHECK_THROWS_AS(cohort::read_checkpoint(path), cohort::CheckpointError);
  std::string header_flipped = bytes;
  header_flipped[12] ^= 1;
  spit(path, header_flipped);
  CHECK_THROWS_AS(cohort::read_checkpoint_header(path), cohort::CheckpointError);
}

TEST_CASE("a checkpoint round-trips bit-exactly") {
  TempDir dir("ckpt_format_roundtrip");
  const Checkpoint original = sample();
  const std::string path = dir / "model.ckpt-300.safetensors";
  cohort::write_checkpoint(path, original);
  const Checkpoint back = cohort::read_checkpoint(path);

  REQUIRE(back.tensors.size() == original.tensors.size());
  for (std::size_t t = 0; t < original.tensors.size(); ++t) {
    const CheckpointTensor& a = original.tensors[t];
    const CheckpointTensor& b = back.tensors[t];
    INFO("tensor " << a.name);
    CHECK(b.name == a.name);
    CHECK(b.shape == a.shape);
    REQUIRE(b.values.size() == a.values.size());
    for (std::size_t i = 0; i < a.values.size(); ++i) CHECK(bits(b.values[i]) == bits(a.values[i]));
  }
  CHECK(back.global_step() == 300);
  CHECK(back.metadata.at("model") == "mlp");
  CHECK(back.metadata.at("mode") == "async");
  CHECK(back.metadata.at("note") == "x y");
  CHECK(back.metadata.at("format_version") == "2");
  CHECK(back.metadata.at("crc32c").size() == 8);
  CHECK(back.metadata.at("header_crc32c").size() == 8);
  REQUIRE(back.find("hidden1/bias") != nullptr);
  CHECK(back.find("hidden1/bias")->values[3] == 4.f);
  CHECK(back.find("nope") == nullptr);

  // Absent model and mode are recorded as empty strings; the caller's crc32c is replaced.
  Checkpoint bare;
  bare.metadata = {{"global_step", "0"}, {"crc32c", "00000000"}};
  cohort::write_checkpoint(dir / "bare.safetensors", bare);
  const Checkpoint bare_back = cohort::read_checkpoint(dir / "bare.safetensors");
  CHECK(bare_back.tensors.empty());
  CHECK(bare_back.metadata.at("model").empty());
  CHECK(bare_back.metadata.at("mode").empty());
  CHECK(bare_back.metadata.at("crc32c") == crc_hex(""));
}

TEST_CASE("the file is safetensors: length, padded JSON header, contiguous data") {
  TempDir dir("ckpt_format_layout");
  const Checkpoint c = sample();
  const std::string path = dir / "a.safetensors";
  cohort::write_checkpoint(path, c);
  const std::string bytes = slurp(path);
  REQUIRE(bytes.size() >= 8);
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= std::uint64_t{static_cast<unsigned char>(bytes[i])} << (8 * i);
  CHECK((8 + n) % 8 == 0);
  const std::string header_text = bytes.substr(8, n);
  CHECK(header_text.front() == '{');
  CHECK(header_text.find_last_not_of(' ') == header_text.rfind('}'));
  const auto header = nlohmann::ordered_json::parse(header_text);
  CHECK(header.begin().key() == "__metadata__");
  for (const auto& [key, value] : header["__metadata__"].items()) CHECK(value.is_string());

  // Header entries in tensor order, tiling the data region in that order.
  std::uint64_t offset = 0;
  std::size_t t = 0;
  std::string data;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") continue;
    REQUIRE(t < c.tensors.size());
    CHECK(key == c.tensors[t].name);
    CHECK(value["dtype"] == "F32");
    CHECK(value["shape"].get<std::vector<std::int64_t>>() == c.tensors[t].shape);
    CHECK(value["data_offsets"][0].get<std::uint64_t>() == offset);
    offset += 4 * c.tensors[t].values.size();
    CHECK(value["data_offsets"][1].get<std::uint64_t>() == offset);
    data += floats(c.tensors[t].values);
    ++t;
  }
  CHECK(t == c.tensors.size());
  CHECK(bytes.size() == 8 + n + offset);
  CHECK(bytes.substr(8 + n) == data);
  CHECK(header["__metadata__"]["crc32c"] == crc_hex(data));

  // Deterministic: the same checkpoint gives the same bytes; no temporary file is left.
  cohort::write_checkpoint(dir / "b.safetensors", c);
  CHECK(slurp(dir / "b.safetensors") == bytes);
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir.path)) files += entry.is_regular_file();
  CHECK(files == 2);
}

TEST_CASE("write_checkpoint rejects malformed checkpoints") {
  TempDir dir("ckpt_format_write");
  const std::string path = dir / "x.safetensors";
  auto error_of = [&](const Checkpoint& c) -> std::string {
    try {
      cohort::write_checkpoint(path, c);
    } catch (const cohort::InvalidArgument& e) {
      return e.what();
    }
    return "(accepted)";
  };
  Checkpoint c;
  c.metadata["global_step"] = "1";
  SUBCASE("duplicate names") {
    c.tensors = {{"w", {1}, {1.f}}, {"w", {1}, {2.f}}};
    CHECK(error_of(c).find("two tensors are named 'w'") != std::string::npos);
  }
  SUBCASE("value count") {
    c.tensors = {{"w", {2, 3}, {1.f}}};
    CHECK(error_of(c).find("tensor 'w' has shape [2, 3] but holds 1 values") != std::string::npos);
  }
  SUBCASE("negative dimension") {
    c.tensors = {{"w", {-1}, {}}};
    CHECK(error_of(c).find("negative dimension") != std::string::npos);
  }
  SUBCASE("reserved and empty names") {
    c.tensors = {{"__metadata__", {1}, {1.f}}};
    CHECK(error_of(c).find("reserved") != std::string::npos);
    c.tensors = {{"", {1}, {1.f}}};
    CHECK(error_of(c).find("empty name") != std::string::npos);
  }
  SUBCASE("global_step") {
    c.metadata.clear();
    CHECK(error_of(c).find("no global_step") != std::string::npos);
    c.metadata["global_step"] = "-3";
    CHECK(error_of(c).find("global_step '-3' is not a whole decimal number") != std::string::npos);
  }
  CHECK_FALSE(fs::exists(path));
  CHECK(fs::is_empty(dir.path));  // no temporary file either
}

TEST_CASE("write_checkpoint reports I/O failures with the path") {
  TempDir dir("ckpt_format_io");
  Checkpoint c;
  c.metadata["global_step"] = "1";
  const std::string path = dir / "missing_dir/x.safetensors";
  const std::string expected = path + ": cannot create the temporary file";
  CHECK_THROWS_WITH_AS(cohort::write_checkpoint(path, c), doctest::Contains(expected.c_str()),
                       CheckpointError);
}

TEST_CASE("damaged and malformed files are rejected precisely") {
  TempDir dir("ckpt_format_corrupt");
  const std::string path = dir / "bad.safetensors";
  const std::string data8 = floats({1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f, 8.f});  // 32 bytes

  SUBCASE("missing file") { check_error(dir / "nothing.safetensors", {"cannot open", "No such file"}); }
  SUBCASE("shorter than the length field") {
    spit(path, "abc");
    check_error(path, {"truncated: 3 bytes, too short for the 8-byte header length"});
  }
  SUBCASE("truncated in the header") {
    spit(path, le64(500) + "{\"__meta");
    check_error(path, {"truncated: the header length is 500 bytes but only 8 bytes follow it"});
  }
  SUBCASE("truncated in the data") {
    cohort::write_checkpoint(path, sample());
    const std::string whole = slurp(path);
    spit(path, whole.substr(0, whole.size() - 10));
    check_error(path, {"tensor 'optimizer/momentum'", "run past the end", "truncated",
                       "file " + std::to_string(whole.size() - 10) + " bytes, the header describes " +
                           std::to_string(whole.size())});
  }
  SUBCASE("a flipped data byte") {
    cohort::write_checkpoint(path, sample());
    std::string whole = slurp(path);
    whole[whole.size() - 3] ^= 0x10;
    spit(path, whole);
    check_error(path, {"checksum mismatch: the data region's crc32c is", "says"});
  }
  SUBCASE("a header length of 2^63") {
    spit(path, le64(std::uint64_t{1} << 63) + "{}");
    check_error(path, {"header length 9223372036854775808 exceeds the limit of 100000000 bytes"});
  }
  SUBCASE("garbage JSON") {
    spit(path, raw_file("{\"a\": [1, 2", data8));
    check_error(path, {"header is not valid JSON: parse error"});
  }
  SUBCASE("a number beyond a double") {
    spit(path, raw_file("{\"a\": 1e400}", ""));
    check_error(path, {"header is not valid JSON: number overflow"});
  }
  SUBCASE("a header that is not an object") {
    spit(path, raw_file("[1, 2, 3]", ""));
    check_error(path, {"header is a JSON array, not an object"});
  }
  SUBCASE("overlapping offsets") {
    spit(path, raw_file(header_for({{"a", f32({4}, 0, 16)}, {"b", f32({4}, 8, 24)}}, data8), data8));
    check_error(path, {"tensors 'a' (data_offsets [0, 16]) and 'b' (data_offsets [8, 24]) overlap"});
  }
  SUBCASE("a hole between tensors") {
    spit(path, raw_file(header_for({{"a", f32({2}, 0, 8)}, {"b", f32({4}, 16, 32)}}, data8), data8));
    check_error(path, {"bytes [8, 16) of the data region belong to no tensor", "before 'b'"});
  }
  SUBCASE("offsets out of bounds") {
    spit(path, raw_file(header_for({{"a", f32({4}, 0, 16)}, {"b", f32({100}, 16, 416)}}, data8), data8));
    check_error(path, {"tensor 'b' data_offsets [16, 416] run past the end of the 32-byte data region"});
  }
  SUBCASE("trailing bytes") {
    spit(path, raw_file(header_for({{"a", f32({4}, 0, 16)}}, data8), data8));
    check_error(path, {"16 trailing bytes after the last tensor's data"});
  }
  SUBCASE("wrong dtype") {
    auto entry = f32({16}, 0, 32);
    entry["dtype"] = "F16";
    spit(path, raw_file(header_for({{"half", entry}}, data8), data8));
    check_error(path, {"tensor 'half' has dtype F16, expected F32"});
  }
  SUBCASE("shape times dtype size differs from the byte count") {
    spit(path, raw_file(header_for({{"w", f32({2, 3}, 0, 32)}}, data8), data8));
    check_error(path, {"tensor 'w': shape [2, 3] of F32 needs 24 bytes, but data_offsets [0, 32] span 32"});
  }
  SUBCASE("a negative dimension") {
    spit(path, raw_file(header_for({{"w", f32({-8}, 0, 32)}}, data8), data8));
    check_error(path, {"tensor 'w': shape must be an array of non-negative integers, found [-8]"});
  }
  SUBCASE("reversed offsets") {
    spit(path, raw_file(header_for({{"w", f32({8}, 32, 0)}}, data8), data8));
    check_error(path, {"tensor 'w': data_offsets must be [begin, end] with 0 <= begin <= end"});
  }
  SUBCASE("no crc32c") {
    spit(path, raw_file(header_for({{"w", f32({8}, 0, 32)}}, data8, {{"crc32c", nullptr}}), data8));
    check_error(path, {"__metadata__ has no crc32c"});
  }
  SUBCASE("a malformed crc32c") {
    spit(path, raw_file(header_for({{"w", f32({8}, 0, 32)}}, data8, {{"crc32c", "xyz"}}), data8));
    check_error(path, {"crc32c 'xyz' is not 8 lower-case hex digits"});
  }
  SUBCASE("no __metadata__") {
    const nlohmann::ordered_json header{{"w", f32({8}, 0, 32)}};
    spit(path, raw_file(header.dump(), data8));
    check_error(path, {"header has no __metadata__"});
  }
  SUBCASE("metadata values that are not strings") {
    spit(path, raw_file(header_for({{"w", f32({8}, 0, 32)}}, data8, {{"global_step", 7}}), data8));
    check_error(path, {"__metadata__ entry 'global_step' is 7, not a string"});
  }
  SUBCASE("an unknown format version") {
    spit(path, raw_file(header_for({{"w", f32({8}, 0, 32)}}, data8, {{"format_version", "3"}}), data8));
    check_error(path, {"format_version '3' is not supported"});
  }
  SUBCASE("no global_step") {
    spit(path, raw_file(header_for({{"w", f32({8}, 0, 32)}}, data8, {{"global_step", nullptr}}), data8));
    check_error(path, {"__metadata__ has no global_step"});
  }
  SUBCASE("a file the crafted headers accept when correct") {
    // The control: the same construction, consistent, reads back.
    spit(path, raw_file(header_for({{"a", f32({2}, 0, 8)}, {"b", f32({6}, 8, 32)}}, data8), data8));
    const Checkpoint c = cohort::read_checkpoint(path);
    REQUIRE(c.tensors.size() == 2);
    CHECK(c.tensors[1].values[5] == 8.f);
    CHECK(c.global_step() == 7);
  }
}

// Writes the files core_checkpoint_python_reader checks: a checkpoint and, in JSON, what it
// must find in it (float values as their IEEE-754 bit patterns, so the comparison is exact).
TEST_CASE("read_safetensors takes another framework's file: F16, BF16 and F64 to float32, no metadata") {
  const TempDir dir("safetensors_foreign");
  const std::string path = dir / "weights.safetensors";
  // 1.0, -2.0, 0.5 and 65504 (the largest half), then a half subnormal (2^-24): exact in float32.
  const std::vector<std::uint16_t> f16 = {0x3c00, 0xc000, 0x3800, 0x7bff, 0x0001};
  const std::vector<std::uint16_t> bf16 = {0x3f80, 0xc040, 0x7f7f};  // 1, -3, bfloat16's largest
  const std::vector<double> f64 = {0.1, -1e-30, 3e38};
  const std::vector<float> f32 = {4.5f, -0.25f};
  std::string data;
  data.append(reinterpret_cast<const char*>(f16.data()), 10);
  data.append(reinterpret_cast<const char*>(bf16.data()), 6);
  data.append(reinterpret_cast<const char*>(f64.data()), 24);
  data += floats(f32);
  auto entry = [](const char* dtype, std::vector<std::int64_t> shape, std::uint64_t begin, std::uint64_t end) {
    return nlohmann::ordered_json{{"dtype", dtype}, {"shape", shape}, {"data_offsets", {begin, end}}};
  };
  // As Hugging Face's save_file writes it: no __metadata__ at all, or one of its own.
  nlohmann::ordered_json header{{"fc.weight", entry("F16", {5}, 0, 10)},
                                {"fc.bias", entry("BF16", {3}, 10, 16)},
                                {"head.weight", entry("F64", {3, 1}, 16, 40)},
                                {"head.bias", entry("F32", {2}, 40, 48)}};
  spit(path, raw_file(header.dump(), data));
  for (const bool with_metadata : {false, true}) {
    CAPTURE(with_metadata);
    if (with_metadata) {
      header["__metadata__"] = {{"format", "pt"}};
      spit(path, raw_file(header.dump(), data));
    }
    const Checkpoint c = cohort::read_safetensors(path);
    CHECK(c.metadata.size() == (with_metadata ? 1u : 0u));
    REQUIRE(c.tensors.size() == 4);
    CHECK(c.find("fc.weight")->values == std::vector<float>{1.0f, -2.0f, 0.5f, 65504.0f, std::ldexp(1.0f, -24)});
    CHECK(c.find("fc.bias")->values == std::vector<float>{1.0f, -3.0f, std::bit_cast<float>(0x7f7f0000u)});
    CHECK(c.find("head.weight")->shape == cohort::Shape{3, 1});
    CHECK(c.find("head.weight")->values == std::vector<float>{static_cast<float>(f64[0]), static_cast<float>(f64[1]),
                                                              static_cast<float>(f64[2])});
    CHECK(c.find("head.bias")->values == f32);
    CHECK_FALSE(c.count("global_step"));
    // read_checkpoint holds it to a Cohort checkpoint's rules.
    CHECK_THROWS_AS(cohort::read_checkpoint(path), CheckpointError);
  }

  const auto error = [&](const nlohmann::ordered_json& h, const std::string& d) {
    spit(path, raw_file(h.dump(), d));
    try {
      cohort::read_safetensors(path);
    } catch (const CheckpointError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  const std::vector<double> huge = {1e39};
  CHECK(error({{"w", entry("F64", {1}, 0, 8)}}, std::string(reinterpret_cast<const char*>(huge.data()), 8)) ==
        path + ": tensor 'w' element 0 is " + std::to_string(1e39) + ", beyond float32's range");
  CHECK(error({{"w", entry("F8_E9", {1}, 0, 1)}}, std::string(1, '\0')) ==
        path + ": tensor 'w' has dtype F8_E9, not one of the safetensors format's");
  const std::vector<std::uint16_t> half_nan = {0x3c00, 0x7e00};
  CHECK(error({{"w", entry("F16", {2}, 0, 4)}}, std::string(reinterpret_cast<const char*>(half_nan.data()), 4)) ==
        path + ": tensor 'w' element 1 is nan, not a finite weight");
  // A tensor of integers (a PyTorch BatchNorm's num_batches_tracked) is passed over: no weight.
  spit(path, raw_file(nlohmann::ordered_json{{"bn.num_batches_tracked", entry("I64", {}, 0, 8)},
                                             {"bn.weight", entry("F32", {2}, 8, 16)}}
                          .dump(),
                      std::string(8, '\0') + floats({1.5f, 2.5f})));
  const Checkpoint with_counter = cohort::read_safetensors(path);
  REQUIRE(with_counter.tensors.size() == 1);
  CHECK(with_counter.passed_over == std::map<std::string, std::string>{{"bn.num_batches_tracked", "I64"}});
  CHECK(with_counter.tensors[0].name == "bn.weight");
  CHECK(with_counter.tensors[0].values == std::vector<float>{1.5f, 2.5f});
  CHECK(error({{"w", entry("BF16", {3}, 0, 8)}}, std::string(8, '\0')) ==
        path + ": tensor 'w': shape [3] of BF16 needs 6 bytes, but data_offsets [0, 8] span 8");
  CHECK(error({{"w", entry("F16", {4}, 0, 8)}}, std::string(6, '\0')).find("run past the end") != std::string::npos);

  // A Cohort checkpoint read this way is verified as read_checkpoint verifies it.
  Checkpoint own = sample();
  cohort::write_checkpoint(path, own);
  CHECK(cohort::read_safetensors(path).tensors.size() == own.tensors.size());
  std::string bytes = slurp(path);
  bytes.back() = static_cast<char>(bytes.back() ^ 1);
  spit(path, bytes);
  CHECK_THROWS_WITH_AS(cohort::read_safetensors(path), doctest::Contains("checksum mismatch"), CheckpointError);
}

TEST_CASE("files for the numpy reader") {
  const fs::path dir = COHORT_CHECKPOINT_PYTHON_DIR;
  fs::create_directories(dir);
  Checkpoint c = sample();
  c.metadata["global_step"] = "42";
  std::vector<float> big(64 * 33);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = std::sin(static_cast<float>(i)) * 1e3f;
  c.tensors.push_back({"hidden2/kernel", {64, 33}, big});
  cohort::write_checkpoint((dir / "model.ckpt-42.safetensors").string(), c);

  nlohmann::ordered_json expected{{"metadata", cohort::read_checkpoint(
                                                   (dir / "model.ckpt-42.safetensors").string())
                                                   .metadata},
                                  {"tensors", nlohmann::ordered_json::array()}};
  for (const auto& t : c.tensors) {
    std::vector<std::uint32_t> b;
    for (float v : t.values) b.push_back(bits(v));
    expected["tensors"].push_back({{"name", t.name}, {"shape", t.shape}, {"bits", b}});
  }
  std::ofstream((dir / "expected.json").string()) << expected.dump() << "\n";
  CHECK(fs::file_size(dir / "expected.json") > 0);
}
