// Every byte of a checkpoint under a checksum, and metadata counts parsed strictly: each damaged
// or out-of-range file is rejected, and CheckpointManager::restore_latest() falls back past it
// with one warning naming the file and the fault. Files from before the header checksum load.
//
// The header checksum is recomputed here from its description in core/io/safetensors.h (reseal()),
// so these tests also hold the writer to the documented scheme.

#include <doctest/doctest.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cohort/core/io/checkpoint.h"
#include "support/stderr_capture.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
using cohort::Checkpoint;
using cohort::CheckpointError;
using cohort::CheckpointManager;

namespace {

using cohort::test::slurp;
using cohort::test::spit;
using cohort::test::StderrCapture;
using cohort::test::TempDir;
using ordered_json = nlohmann::ordered_json;

const std::string kMaxCount = std::to_string(cohort::kMaxCheckpointCount);

std::string le64(std::uint64_t v) {
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i) & 0xff));
  return out;
}

// 8 + N: the length field and the header, the bytes the header checksum covers.
std::size_t header_end(const std::string& file) {
  REQUIRE(file.size() >= 8);
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= std::uint64_t{static_cast<unsigned char>(file[i])} << (8 * i);
  REQUIRE(8 + n <= file.size());
  return static_cast<std::size_t>(8 + n);
}

std::string crc_hex(const std::string& bytes) {
  char text[9];
  std::snprintf(text, sizeof text, "%08x", cohort::crc32c(std::as_bytes(std::span(bytes))));
  return text;
}

const std::string kHeaderCrcKey = "\"header_crc32c\":\"";

std::string header_text(const std::string& file) {
  return file.substr(8, header_end(file) - 8);
}

// `file` with the header text replaced by `text` (padded with spaces to 8-byte alignment, the
// length field to match), its data region kept.
std::string with_header(std::string text, const std::string& file) {
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');
  return le64(text.size()) + text + file.substr(header_end(file));
}

// `file` with its header's __metadata__ changed by `edit`, written back the way the format
// describes: compact JSON, padded; then, when the metadata holds header_crc32c, that field's
// digits set to the CRC-32C of the length field and the header with those digits read as zeros.
std::string reseal(const std::string& file, const std::function<void(ordered_json&)>& edit) {
  ordered_json header = ordered_json::parse(header_text(file));
  edit(header["__metadata__"]);
  const bool sealed = header["__metadata__"].contains("header_crc32c");
  if (sealed) header["__metadata__"]["header_crc32c"] = "00000000";
  std::string out = with_header(header.dump(), file);
  if (sealed) {
    const std::size_t digits = out.find(kHeaderCrcKey) + kHeaderCrcKey.size();
    REQUIRE(out.find(kHeaderCrcKey, digits) == std::string::npos);
    out.replace(digits, 8, crc_hex(out.substr(0, header_end(out))));
  }
  return out;
}

std::string set_field(const std::string& file, const std::string& field, const std::string& value) {
  return reseal(file, [&](ordered_json& meta) { meta[field] = value; });
}

// What a model's checkpoint holds, small: values that tell which step wrote them.
Checkpoint at_step(std::int64_t step) {
  Checkpoint c;
  c.metadata = {{"model", "mlp"},
                {"mode", "sync"},
                {"optimizer", "momentum"},
                {"optimizer_iterations", std::to_string(step)}};
  const float s = static_cast<float>(step);
  c.tensors.push_back({"hidden1/kernel", {2, 3}, {s, s + 1, s + 2, s + 3, s + 4, s + 5}});
  c.tensors.push_back({"hidden1/bias", {3}, {s, s, s}});
  c.tensors.push_back({"optimizer/momentum", {9}, std::vector<float>(9, -s)});
  return c;
}

std::string read_error(const std::string& path) {
  try {
    cohort::read_checkpoint(path);
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "(read_checkpoint accepted the file)";
}

// A directory with checkpoints at steps 1 and 2; tests damage the latest, step 2.
struct TwoCheckpoints {
  TempDir dir;
  CheckpointManager manager;
  std::string previous, latest, original;

  explicit TwoCheckpoints(const std::string& tag)
      : dir(tag),
        manager(dir.str()),
        previous(manager.save(1, at_step(1))),
        latest(manager.save(2, at_step(2))),
        original(slurp(latest)) {}

  // restore_latest() with `bytes` as the latest file: the fallback's one warning line, or a
  // description of what went wrong instead.
  std::string fall_back(const std::string& bytes) {
    // Fresh files, not truncated ones: ext4 flushes a file truncated and rewritten when it is
    // closed, which would make the thousands of calls below wait for the disk.
    fs::remove(latest);
    fs::remove(dir / "stderr.txt");
    spit(latest, bytes);
    StderrCapture err(dir / "stderr.txt");
    std::optional<Checkpoint> restored;
    try {
      restored = manager.restore_latest();
    } catch (const std::exception& e) {
      return std::string("(restore_latest threw: ") + e.what() + ")";
    }
    const std::vector<std::string> lines = err.lines();
    if (!restored || restored->global_step() != 1) return "(did not restore step 1)";
    if (lines.size() != 1) return "(" + std::to_string(lines.size()) + " warning lines)";
    return lines[0];
  }
};

// The warning restore_latest() prints for a latest file it rejects.
void check_fallback_warning(const TwoCheckpoints& c, const std::string& line) {
  CHECK(line.find("warning: " + c.latest + ": ") != std::string::npos);
  CHECK(line.find("; restoring " + c.previous + " instead") != std::string::npos);
}

}  // namespace

TEST_CASE("the writer follows the documented header checksum") {
  TwoCheckpoints c("ckpt_integrity_scheme");
  const Checkpoint back = cohort::read_checkpoint(c.latest);
  CHECK(back.metadata.at("format_version") == "2");
  CHECK(back.metadata.at("optimizer_iterations") == "2");
  CHECK(back.count("optimizer_iterations") == 2);
  CHECK_FALSE(back.count("no_such_field").has_value());
  // Recomputed independently, the checksum gives the writer's bytes exactly.
  CHECK(reseal(c.original, [](ordered_json&) {}) == c.original);
  // It is a plain metadata string to a safetensors reader.
  const ordered_json header =
      ordered_json::parse(c.original.substr(8, header_end(c.original) - 8));
  CHECK(header["__metadata__"]["header_crc32c"].is_string());
}

TEST_CASE("every flipped header bit is caught, and restore_latest falls back past it") {
  TwoCheckpoints c("ckpt_integrity_flips");
  const std::size_t end = header_end(c.original);
  REQUIRE(end > 200);  // the length field, the metadata and three tensor entries
  // The field itself, "header_crc32c":"<8 digits>": damage there is reported as a missing or
  // malformed field rather than as a mismatch. So is damage to the length field, mostly, which
  // is checked before the header is read (a length past the file, or past the limit).
  const std::size_t field = c.original.find(kHeaderCrcKey);
  const std::size_t field_end = field + kHeaderCrcKey.size() + 9;
  int flips = 0, by_header_checksum = 0;
  for (std::size_t i = 0; i < end; ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string damaged = c.original;
      damaged[i] = static_cast<char>(damaged[i] ^ (1 << bit));
      INFO("byte " << i << " ('" << c.original[i] << "'), bit " << bit);
      const std::string line = c.fall_back(damaged);
      check_fallback_warning(c, line);
      ++flips;
      const bool mismatch = line.find(c.latest + ": header checksum mismatch") != std::string::npos;
      by_header_checksum += mismatch;
      if (i >= 8 && (i < field || i >= field_end)) CHECK(mismatch);
    }
  }
  MESSAGE(flips << " flipped bits rejected, " << by_header_checksum
                << " of them by the header checksum");
  CHECK(flips == 8 * static_cast<int>(end));
  // The original is still fine: restored without a warning.
  spit(c.latest, c.original);
  StderrCapture err(c.dir / "stderr.txt");
  CHECK(c.manager.restore_latest()->global_step() == 2);
  CHECK(err.lines().empty());
}

TEST_CASE("header damage that leaves valid JSON is the header checksum's to find") {
  TwoCheckpoints c("ckpt_integrity_valid_json");
  const std::size_t end = header_end(c.original);
  std::string damaged = c.original;

  SUBCASE("a changed metadata value") {
    const std::size_t at = damaged.find("\"model\":\"mlp\"");
    REQUIRE(at < end);
    damaged[at + 11] = 'q';  // mlp -> mlq
  }
  SUBCASE("a changed shape of the same size") {
    const std::size_t at = damaged.find("\"shape\":[2,3]");
    REQUIRE(at < end);
    damaged[at + 9] = '3';
    damaged[at + 11] = '2';  // [2,3] -> [3,2]: same size, another shape
  }
  SUBCASE("padding turned into other whitespace") {
    REQUIRE(damaged[end - 1] == ' ');  // 8-byte alignment leaves padding here
    damaged[end - 1] = '\n';
  }
  spit(c.latest, damaged);
  CHECK(read_error(c.latest).find(c.latest + ": header checksum mismatch") == 0);
  check_fallback_warning(c, c.fall_back(damaged));
}

TEST_CASE("a version 2 file must carry its header checksum, in lower-case hex") {
  TwoCheckpoints c("ckpt_integrity_field");
  std::string damaged = c.original;
  std::string expected;
  SUBCASE("removed") {
    damaged = reseal(c.original, [](ordered_json& meta) { meta.erase("header_crc32c"); });
    expected = "__metadata__ has no header_crc32c, so the header cannot be verified";
  }
  SUBCASE("spelled otherwise (not as the writer spells it)") {
    std::string text = header_text(c.original);
    text.insert(text.find(kHeaderCrcKey) + kHeaderCrcKey.size() - 1, " ");  // ": " for ":"
    damaged = with_header(text, c.original);
    expected = "header_crc32c is not spelled";
  }
  SUBCASE("in upper case") {
    const std::size_t digits = damaged.find(kHeaderCrcKey) + kHeaderCrcKey.size();
    const std::string value = damaged.substr(digits, 8);
    std::string upper = value;
    for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    if (upper == value) upper[0] = 'x';  // all digits, no letter to raise: damage it otherwise
    damaged.replace(digits, 8, upper);
    expected = "is not 8 lower-case hex digits";
  }
  SUBCASE("twice") {
    // In a tensor entry, where a reader that took any match would find it first.
    std::string text = header_text(c.original);
    const std::string entry = "\"hidden1/kernel\":{";
    text.insert(text.find(entry) + entry.size(), "\"header_crc32c\":\"00000000\",");
    damaged = with_header(text, c.original);
    expected = "header holds header_crc32c more than once";
  }
  spit(c.latest, damaged);
  const std::string message = read_error(c.latest);
  INFO(message);
  CHECK(message.find(expected) != std::string::npos);
  check_fallback_warning(c, c.fall_back(damaged));
}

TEST_CASE("metadata counts are whole decimal numbers in range, or the file is unusable") {
  TwoCheckpoints c("ckpt_integrity_counts");
  const std::vector<std::string> bad = {
      "-1", "-0", "-9223372036854775808",                        // negative
      "100000000001", "9223372036854775807", "9223372036854775808",  // huge
      "99999999999999999999999999",
      "abc", "nan", "inf", "0x10", "",                              // not numbers
      "12abc", " 12", "12 ", "+12", "1e3", "1.0", "012", "1,000", "\xd9\xa1"};  // mixed
  for (const std::string field : {"global_step", "optimizer_iterations"}) {
    for (const std::string& value : bad) {
      INFO(field << " = '" << value << "'");
      const std::string line = c.fall_back(set_field(c.original, field, value));
      check_fallback_warning(c, line);
      CHECK(line.find(field + " '" + value + "' is not a whole decimal number from 0 to " +
                      kMaxCount) != std::string::npos);
    }
  }
  // The bound itself is a count; one more is not.
  spit(c.latest, set_field(c.original, "optimizer_iterations", kMaxCount));
  CHECK(cohort::read_checkpoint(c.latest).count("optimizer_iterations") ==
        cohort::kMaxCheckpointCount);
  spit(c.latest, set_field(c.original, "global_step", kMaxCount));
  CHECK(cohort::read_checkpoint(c.latest).global_step() == cohort::kMaxCheckpointCount);
  spit(c.latest, set_field(c.original, "global_step", "0"));
  CHECK(cohort::read_checkpoint(c.latest).global_step() == 0);

  // A checkpoint made in memory is held to the same rule by its accessors and by the writer.
  Checkpoint memory = at_step(3);
  memory.metadata["global_step"] = "3";
  memory.metadata["optimizer_iterations"] = "-7";
  CHECK_THROWS_WITH_AS(memory.count("optimizer_iterations"),
                       doctest::Contains("optimizer_iterations '-7' is not a whole decimal number"),
                       CheckpointError);
  CHECK_THROWS_WITH_AS(c.manager.save(3, memory),
                       doctest::Contains("optimizer_iterations '-7' is not a whole decimal number"),
                       cohort::InvalidArgument);
  memory.metadata["global_step"] = "12abc";
  CHECK_THROWS_WITH_AS(memory.global_step(), doctest::Contains("global_step '12abc'"),
                       CheckpointError);
  const std::string too_big = std::to_string(cohort::kMaxCheckpointCount + 1);
  CHECK_THROWS_WITH_AS(c.manager.save(cohort::kMaxCheckpointCount + 1, at_step(3)),
                       doctest::Contains(("global_step '" + too_big + "'").c_str()),
                       cohort::InvalidArgument);
}

// Written by Cohort 0.1, before the header checksum (tests/core/io/data).
TEST_CASE("a file from before the header checksum still loads, and still has its counts checked") {
  const std::string old_file = COHORT_TEST_DATA_DIR "/mlp_hidden8_before_state.safetensors";
  const Checkpoint old = cohort::read_checkpoint(old_file);
  CHECK(old.metadata.at("format_version") == "1");
  CHECK(old.metadata.count("header_crc32c") == 0);
  CHECK(old.global_step() == 5);
  CHECK(old.count("optimizer_iterations") == 5);

  TempDir dir("ckpt_integrity_old");
  CheckpointManager manager(dir.str());
  const std::string path = dir / "model.ckpt-5.safetensors";
  fs::copy_file(old_file, path);
  {
    StderrCapture err(dir / "stderr.txt");
    const auto restored = manager.restore_latest();
    CHECK(err.lines().empty());
    REQUIRE(restored.has_value());
    CHECK(restored->global_step() == 5);
    CHECK(restored->find("optimizer/momentum") != nullptr);
  }
  // Its data is still checksummed, and its counts are still parsed strictly.
  const std::string bytes = slurp(old_file);
  std::string flipped = bytes;
  flipped.back() = static_cast<char>(flipped.back() ^ 0x01);
  spit(path, flipped);
  CHECK(read_error(path).find("checksum mismatch: the data region's crc32c") != std::string::npos);
  spit(path, set_field(bytes, "optimizer_iterations", "-5"));
  CHECK(read_error(path).find("optimizer_iterations '-5'") != std::string::npos);
  // A version 1 file that does carry header_crc32c has it verified.
  std::string sealed = reseal(bytes, [](ordered_json& meta) { meta["header_crc32c"] = ""; });
  spit(path, sealed);
  CHECK(cohort::read_checkpoint(path).global_step() == 5);
  sealed[sealed.find("\"model\":\"mlp\"") + 11] = 'q';
  spit(path, sealed);
  CHECK(read_error(path).find("header checksum mismatch") != std::string::npos);
}
