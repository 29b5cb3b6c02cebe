#include "cohort/core/io/safetensors.h"

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <limits>
#include <optional>
#include <set>
#include <string_view>
#include <utility>

#include <Eigen/Core>
#include <nlohmann/json.hpp>

#include "cohort/core/base/bfloat16.h"
#include "cohort/core/base/crc32c.h"

namespace cohort {
namespace {

// Tensor bytes are copied to and from the file as they lie in memory; the format is little-endian
// IEEE-754, so that is only right on such a machine.
static_assert(std::endian::native == std::endian::little,
              "checkpoint I/O assumes a little-endian machine");
static_assert(sizeof(float) == 4 && std::numeric_limits<float>::is_iec559);

using ordered_json = nlohmann::ordered_json;

constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;  // the reference implementation's limit
constexpr std::uint64_t kFloatBytes = sizeof(float);
const std::string kMetadataKey = "__metadata__";
const std::string kFormatVersion = "2";           // what this build writes
const std::string kUncheckedHeaderVersion = "1";  // before header_crc32c; still read
const std::string kHeaderCrcKey = "header_crc32c";
// How the writer's compact JSON spells the field; the reader looks for exactly this.
const std::string kHeaderCrcPrefix = "\"" + kHeaderCrcKey + "\":\"";
constexpr std::size_t kHexDigits = 8;
// The metadata fields that hold counts; all of them are checked wherever a file is read.
constexpr std::array<const char*, 2> kCountFields = {"global_step", "optimizer_iterations"};

std::string hex8(std::uint32_t value) {
  char text[9];
  std::snprintf(text, sizeof text, "%08x", value);
  return text;
}

// Exactly the spelling hex8() writes: a checksum has one spelling, so any changed byte in it is
// a fault (from_chars alone would also take upper case).
std::optional<std::uint32_t> parse_hex8(std::string_view text) {
  if (text.size() != kHexDigits) return std::nullopt;
  for (char c : text)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return std::nullopt;
  std::uint32_t value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value, 16);
  return value;
}

// The one parser of count fields: exactly the spelling std::to_string gives a count in range.
std::optional<std::int64_t> parse_count(std::string_view text) {
  if (text.empty() || (text[0] == '0' && text.size() > 1)) return std::nullopt;
  for (char c : text)
    if (c < '0' || c > '9') return std::nullopt;
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || value > kMaxCheckpointCount) return std::nullopt;
  return value;
}

std::string count_fault(const std::string& field, const std::string& text) {
  return "metadata " + field + " " + quote(text) + " is not a whole decimal number from 0 to " +
         std::to_string(kMaxCheckpointCount);
}

// Where header_crc32c's digits start in the header text; nullopt when the field is not there.
// The prefix's quotes cannot be escaped, so a match is the key itself, never part of a string.
std::optional<std::size_t> find_header_crc(std::string_view text,
                                           const std::function<void(const std::string&)>& fail) {
  const std::size_t at = text.find(kHeaderCrcPrefix);
  if (at == text.npos) return std::nullopt;
  if (text.find(kHeaderCrcPrefix, at + 1) != text.npos)
    fail("header holds " + kHeaderCrcKey + " more than once");
  return at + kHeaderCrcPrefix.size();
}

// The header checksum: the length field and the header with header_crc32c's digits as zeros.
std::uint32_t header_crc(std::span<const std::byte, 8> length, std::string_view text,
                         std::size_t digits) {
  const std::string zeros(kHexDigits, '0');
  const std::size_t after = std::min(text.size(), digits + kHexDigits);
  Crc32c crc;
  crc.update(length);
  crc.update(text.data(), digits);
  crc.update(zeros.data(), after - digits);
  crc.update(text.data() + after, text.size() - after);
  return crc.value();
}

// `element` bytes times the element count of `shape`, or nullopt when that does not fit in 63
// bits.
std::optional<std::uint64_t> tensor_bytes(const std::vector<std::uint64_t>& dims, std::uint64_t element) {
  if (std::find(dims.begin(), dims.end(), 0) != dims.end()) return 0;
  std::uint64_t bytes = element;
  for (std::uint64_t d : dims) {
    if (bytes > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) / d)
      return std::nullopt;
    bytes *= d;
  }
  return bytes;
}

// The dtypes of the safetensors format, with their sizes: the first four, floating point, are
// read as float32 from another framework's file; the others (a PyTorch BatchNorm's I64
// num_batches_tracked, say) are passed over there. Cohort writes F32.
constexpr std::array<std::pair<std::string_view, std::uint64_t>, 15> kDtypes = {
    {{"F32", 4}, {"F16", 2}, {"BF16", 2}, {"F64", 8}, {"I64", 8}, {"I32", 4}, {"I16", 2}, {"I8", 1},
     {"U64", 8}, {"U32", 4}, {"U16", 2}, {"U8", 1}, {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}}};
constexpr std::size_t kFloatDtypes = 4;

// One header entry, validated, before the layout checks.
struct Entry {
  std::string name;
  Shape shape;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  std::string dtype = "F32";
  bool floating = true;  // one of the first kFloatDtypes of kDtypes
};

std::string offsets_text(const Entry& e) {
  // Built by appending: GCC 12 warns falsely (-Wrestrict) about "literal" + std::string&&.
  std::string text = "[";
  text += std::to_string(e.begin);
  text += ", ";
  text += std::to_string(e.end);
  text += "]";
  return text;
}

class HeaderParser {
 public:
  explicit HeaderParser(const std::string& path) : path_(path) {}

  [[noreturn]] void fail(const std::string& fault) const {
    throw CheckpointError(path_ + ": " + fault, kInputStatus);
  }

  // `foreign`: a file of another framework's, whose tensors may be of any of kDtypes; else a
  // Cohort checkpoint's, of F32.
  Entry entry(const std::string& name, const ordered_json& value, bool foreign) const {
    const std::string tensor = "tensor " + quote(name);
    if (!value.is_object()) fail(tensor + ": header entry is not a JSON object");
    const auto dtype = value.find("dtype");
    if (dtype == value.end() || !dtype->is_string()) fail(tensor + ": no \"dtype\" string");
    const std::string type = dtype->get<std::string>();
    const auto known = std::find_if(kDtypes.begin(), kDtypes.end(), [&](const auto& d) { return d.first == type; });
    if (!foreign && type != "F32")
      fail(tensor + " has dtype " + type + ", expected F32 (Cohort checkpoints hold float32 tensors only)");
    if (known == kDtypes.end()) fail(tensor + " has dtype " + type + ", not one of the safetensors format's");

    const auto shape = value.find("shape");
    if (shape == value.end()) fail(tensor + ": no \"shape\"");
    std::vector<std::uint64_t> dims;
    bool shape_ok = shape->is_array();
    for (const auto& d : shape_ok ? *shape : ordered_json::array()) {
      shape_ok = d.is_number_unsigned() &&
                 d.get<std::uint64_t>() <= std::uint64_t{std::numeric_limits<std::int64_t>::max()};
      if (!shape_ok) break;
      dims.push_back(d.get<std::uint64_t>());
    }
    if (!shape_ok)
      fail(tensor + ": shape must be an array of non-negative integers, found " + shape->dump());

    const auto offsets = value.find("data_offsets");
    if (offsets == value.end()) fail(tensor + ": no \"data_offsets\"");
    if (!offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
        !(*offsets)[1].is_number_unsigned() ||
        (*offsets)[0].get<std::uint64_t>() > (*offsets)[1].get<std::uint64_t>())
      fail(tensor + ": data_offsets must be [begin, end] with 0 <= begin <= end, found " +
           offsets->dump());

    Entry e{name, Shape(dims.begin(), dims.end()), (*offsets)[0].get<std::uint64_t>(),
            (*offsets)[1].get<std::uint64_t>(), type,
            static_cast<std::size_t>(known - kDtypes.begin()) < kFloatDtypes};
    const auto bytes = tensor_bytes(dims, known->second);
    if (!bytes) fail(tensor + ": shape " + to_string(e.shape) + " is too large");
    if (*bytes != e.end - e.begin)
      fail(tensor + ": shape " + to_string(e.shape) + " of " + type + " needs " + std::to_string(*bytes) +
           " bytes, but data_offsets " + offsets_text(e) + " span " +
           std::to_string(e.end - e.begin));
    return e;
  }

  std::map<std::string, std::string> metadata(const ordered_json& value) const {
    if (!value.is_object()) fail(kMetadataKey + " is not a JSON object");
    std::map<std::string, std::string> out;
    for (const auto& [key, v] : value.items()) {
      if (!v.is_string())
        fail(kMetadataKey + " entry " + quote(key) + " is " + v.dump() +
             ", not a string (safetensors metadata maps strings to strings)");
      out[key] = v.get<std::string>();
    }
    return out;
  }

  // The safetensors layout rule: sorted by offset, the tensors tile [0, data_size) exactly.
  // Afterwards `entries` is in file order (stable, so empty tensors keep their header order).
  void check_layout(std::vector<Entry>& entries, std::uint64_t data_size,
                    std::uint64_t file_size) const {
    std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    std::uint64_t covered = 0;
    const Entry* previous = nullptr;
    for (const Entry& e : entries) {
      if (e.begin < covered)
        fail("tensors " + quote(previous->name) + " (data_offsets " + offsets_text(*previous) +
             ") and " + quote(e.name) + " (data_offsets " + offsets_text(e) + ") overlap");
      if (e.begin > covered)
        fail("bytes [" + std::to_string(covered) + ", " + std::to_string(e.begin) +
             ") of the data region belong to no tensor (a hole before " + quote(e.name) +
             "; safetensors requires the tensors to cover the data region exactly)");
      covered = e.end;
      previous = &e;
    }
    if (covered > data_size) {
      const Entry& e = *std::find_if(entries.begin(), entries.end(),
                                     [&](const Entry& x) { return x.end > data_size; });
      fail("tensor " + quote(e.name) + " data_offsets " + offsets_text(e) +
           " run past the end of the " + std::to_string(data_size) +
           "-byte data region: the file is truncated or its offsets are out of bounds (file " +
           std::to_string(file_size) + " bytes, the header describes " +
           std::to_string(file_size - data_size + covered) + ")");
    }
    if (covered < data_size)
      fail(std::to_string(data_size - covered) +
           " trailing bytes after the last tensor's data (the header describes a " +
           std::to_string(covered) + "-byte data region, the file holds " +
           std::to_string(data_size) + ")");
  }

  // Cohort's own requirements on __metadata__; returns the stored data checksum. `header_crc`
  // is the header_crc32c found (and verified) in the header text, if any.
  std::uint32_t check_metadata(const std::map<std::string, std::string>& metadata,
                               const std::optional<std::string>& header_crc) const {
    const auto version = metadata.find("format_version");
    if (version == metadata.end()) fail(kMetadataKey + " has no format_version");
    if (version->second != kFormatVersion && version->second != kUncheckedHeaderVersion)
      fail("format_version " + quote(version->second) + " is not supported (this build reads " +
           kUncheckedHeaderVersion + " and " + kFormatVersion + ")");
    const auto stored = metadata.find(kHeaderCrcKey);
    if (!header_crc && version->second == kFormatVersion)
      fail(kMetadataKey + (stored == metadata.end()
                               ? " has no " + kHeaderCrcKey + ", so the header cannot be verified"
                               : " " + kHeaderCrcKey + " is not spelled " + kHeaderCrcPrefix +
                                     "<8 hex digits>\", so the header cannot be verified"));
    if (header_crc && (stored == metadata.end() || stored->second != *header_crc))
      fail(kHeaderCrcKey + " appears in the header outside " + kMetadataKey);
    if (metadata.find("global_step") == metadata.end()) fail(kMetadataKey + " has no global_step");
    for (const char* field : kCountFields) {
      const auto it = metadata.find(field);
      if (it != metadata.end() && !parse_count(it->second)) fail(count_fault(field, it->second));
    }
    const auto crc = metadata.find("crc32c");
    if (crc == metadata.end())
      fail(kMetadataKey + " has no crc32c, so the data cannot be verified");
    const auto value = parse_hex8(crc->second);
    if (!value)
      fail(kMetadataKey + " crc32c " + quote(crc->second) + " is not 8 lower-case hex digits");
    return *value;
  }

 private:
  const std::string& path_;
};

[[noreturn]] void throw_bad_checkpoint(const std::string& path, const std::string& fault) {
  throw InvalidArgument("cannot write checkpoint " + path + ": " + fault);
}

}  // namespace

std::int64_t Checkpoint::global_step() const {
  const auto step = count("global_step");
  if (!step) throw CheckpointError("checkpoint metadata has no global_step", kInputStatus);
  return *step;
}

std::optional<std::int64_t> Checkpoint::count(const std::string& field) const {
  const auto it = metadata.find(field);
  if (it == metadata.end()) return std::nullopt;
  const auto value = parse_count(it->second);
  if (!value) throw CheckpointError("checkpoint " + count_fault(field, it->second), kInputStatus);
  return value;
}

const CheckpointTensor* Checkpoint::find(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

void write_checkpoint(const std::string& path, const Checkpoint& checkpoint,
                      const BeforeRename& before_rename) {
  auto bad = [&](const std::string& fault) { throw_bad_checkpoint(path, fault); };
  auto metadata = checkpoint.metadata;
  if (metadata.find("global_step") == metadata.end()) bad("its metadata has no global_step");
  for (const char* field : kCountFields) {
    const auto it = metadata.find(field);
    if (it != metadata.end() && !parse_count(it->second)) bad(count_fault(field, it->second));
  }
  metadata.try_emplace("model", "");
  metadata.try_emplace("mode", "");
  metadata["format_version"] = kFormatVersion;
  metadata[kHeaderCrcKey] = std::string(kHexDigits, '0');  // the digits are filled in below

  std::set<std::string> names;
  std::vector<std::pair<std::string, ordered_json>> entries;
  std::vector<std::span<const std::byte>> pieces(2);  // header length, header; then the tensors
  Crc32c crc;
  std::uint64_t offset = 0;
  for (const CheckpointTensor& t : checkpoint.tensors) {
    if (t.name.empty()) bad("tensor " + std::to_string(entries.size()) + " has an empty name");
    if (t.name == kMetadataKey) bad("the tensor name " + kMetadataKey + " is reserved");
    if (!names.insert(t.name).second) bad("two tensors are named " + quote(t.name));
    std::vector<std::uint64_t> dims;
    for (std::int64_t d : t.shape) {
      if (d < 0) bad("tensor " + quote(t.name) + " has a negative dimension: " + to_string(t.shape));
      dims.push_back(static_cast<std::uint64_t>(d));
    }
    const auto bytes = tensor_bytes(dims, kFloatBytes);
    if (!bytes || *bytes / kFloatBytes != t.values.size())
      bad("tensor " + quote(t.name) + " has shape " + to_string(t.shape) + " but holds " +
          std::to_string(t.values.size()) + " values");
    entries.emplace_back(t.name, ordered_json{{"dtype", "F32"},
                                              {"shape", t.shape},
                                              {"data_offsets", {offset, offset + *bytes}}});
    const auto data = std::as_bytes(std::span(t.values));
    crc.update(data);
    pieces.push_back(data);
    offset += *bytes;
  }
  metadata["crc32c"] = hex8(crc.value());

  ordered_json header = ordered_json::object();
  header[kMetadataKey] = metadata;
  for (auto& [name, entry] : entries) header[name] = std::move(entry);
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::type_error& e) {  // strings that are not UTF-8
    bad(std::string("tensor names and metadata must be valid UTF-8 (") + e.what() + ")");
  }
  // Data starts 8-byte aligned (safetensors convention), so a reader may map it as floats.
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');
  std::array<std::byte, 8> length;
  for (std::size_t i = 0; i < 8; ++i)
    length[i] = static_cast<std::byte>(static_cast<std::uint64_t>(text.size()) >> (8 * i));
  const auto digits = find_header_crc(text, [&](const std::string& fault) { bad(fault); });
  if (!digits) bad(kHeaderCrcKey + " is missing from the header text");  // cannot happen
  const std::uint32_t sealed = header_crc(std::as_bytes(std::span(length)), text, *digits);
  text.replace(*digits, kHexDigits, hex8(sealed));
  pieces[0] = length;
  pieces[1] = std::as_bytes(std::span(text));
  write_file_atomically(path, pieces, before_rename);
}

namespace {

// `out[i]` = element i of `raw`, an array of T, as a double through `value`, each finite and
// within float32's range (another framework's weights, checked as they come in).
template <typename T, typename Value>
void convert_as(const HeaderParser& parser, const std::string& name, std::span<const std::byte> raw,
                std::span<float> out, Value value) {
  for (std::size_t i = 0; i < out.size(); ++i) {
    T element;
    std::memcpy(&element, raw.data() + sizeof(T) * i, sizeof(T));
    const double v = value(element);
    if (!std::isfinite(v) || std::abs(v) > std::numeric_limits<float>::max())
      parser.fail("tensor " + quote(name) + " element " + std::to_string(i) + " is " + std::to_string(v) +
                  (std::isfinite(v) ? ", beyond float32's range" : ", not a finite weight"));
    out[i] = static_cast<float>(v);
  }
}

// Tensor `name`'s `raw` elements of `dtype` (F32, F16, BF16, F64) as float32 at `out`.
void convert_to_float(const HeaderParser& parser, const std::string& name, const std::string& dtype,
                      std::span<const std::byte> raw, std::span<float> out) {
  if (dtype == "F64") return convert_as<double>(parser, name, raw, out, [](double v) { return v; });
  if (dtype == "F32") return convert_as<float>(parser, name, raw, out, [](float v) { return double{v}; });
  if (dtype == "BF16")
    return convert_as<std::uint16_t>(parser, name, raw, out, [](std::uint16_t b) { return double{bf16::to_float(b)}; });
  convert_as<std::uint16_t>(parser, name, raw, out, [](std::uint16_t b) {
    return static_cast<double>(static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(b)));
  });
}

// A Cohort checkpoint, verified; or where `foreign` and the file's metadata has no
// format_version, another program's safetensors file (read_safetensors()). With `header_only`,
// its metadata alone, from the header, verified as far as the header goes.
Checkpoint read_file(const std::string& path, bool foreign, bool header_only = false) {
  const HeaderParser parser(path);
  const ReadFile file(path);
  const std::uint64_t file_size = file.size();
  if (file_size < 8)
    parser.fail("truncated: " + std::to_string(file_size) +
                " bytes, too short for the 8-byte header length");

  std::array<unsigned char, 8> length_bytes;
  file.read(length_bytes.data(), 8, 0, "the header length");
  std::uint64_t header_size = 0;
  for (std::size_t i = 0; i < 8; ++i) header_size |= std::uint64_t{length_bytes[i]} << (8 * i);
  if (header_size > kMaxHeaderBytes)
    parser.fail("header length " + std::to_string(header_size) + " exceeds the limit of " +
                std::to_string(kMaxHeaderBytes) + " bytes (corrupt, or not a safetensors file)");
  if (header_size > file_size - 8)
    parser.fail("truncated: the header length is " + std::to_string(header_size) +
                " bytes but only " + std::to_string(file_size - 8) + " bytes follow it");

  std::string text(header_size, ' ');
  file.read(text.data(), header_size, 8, "the header");
  // The header checksum comes first: a damaged header is reported as such, not by whichever
  // check its damage happens to upset.
  std::optional<std::string> header_crc_text;
  if (const auto digits =
          find_header_crc(text, [&](const std::string& fault) { parser.fail(fault); })) {
    header_crc_text = text.substr(*digits, kHexDigits);
    const auto stored = parse_hex8(*header_crc_text);
    if (!stored || text.size() <= *digits + kHexDigits || text[*digits + kHexDigits] != '"')
      parser.fail(kMetadataKey + " " + kHeaderCrcKey + " " +
                  quote(text.substr(*digits, kHexDigits + 1)) +
                  " is not 8 lower-case hex digits and a closing quote");
    const std::uint32_t actual =
        header_crc(std::as_bytes(std::span(length_bytes)), text, *digits);
    if (actual != *stored)
      parser.fail("header checksum mismatch: the header's crc32c is " + hex8(actual) + ", " +
                  kMetadataKey + " " + kHeaderCrcKey + " says " + hex8(*stored) +
                  " (the header is corrupt)");
  }
  ordered_json header;
  try {
    header = ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    // A syntax error, or a number beyond a double (out_of_range.406). Drop nlohmann's
    // "[json.exception.parse_error.101] " prefix; keep where and why.
    std::string why = e.what();
    if (const auto close = why.find("] "); why.starts_with("[json.") && close != why.npos)
      why.erase(0, close + 2);
    parser.fail("header is not valid JSON: " + why);
  }
  if (!header.is_object())
    parser.fail(std::string("header is a JSON ") + header.type_name() + ", not an object");

  Checkpoint checkpoint;
  const auto metadata = header.find(kMetadataKey);
  if (metadata != header.end()) checkpoint.metadata = parser.metadata(*metadata);
  // A file that says it is Cohort's is held to a checkpoint's rules, however it is read.
  const bool cohort = !foreign || checkpoint.metadata.contains("format_version");
  std::vector<Entry> entries;
  for (const auto& [key, value] : header.items())
    if (key != kMetadataKey) entries.push_back(parser.entry(key, value, !cohort));
  const std::uint64_t data_begin = 8 + header_size;
  parser.check_layout(entries, file_size - data_begin, file_size);
  std::optional<std::uint32_t> expected_crc;
  if (cohort) {
    if (metadata == header.end())
      parser.fail("header has no " + kMetadataKey +
                  " (a Cohort checkpoint records format_version, global_step and its checksums "
                  "there)");
    expected_crc = parser.check_metadata(checkpoint.metadata, header_crc_text);
  }
  if (header_only) return checkpoint;

  Crc32c crc;
  std::vector<std::byte> raw;  // another framework's tensor, before its conversion
  checkpoint.tensors.reserve(entries.size());
  for (Entry& e : entries) {
    if (!e.floating) {  // another framework's counter or mask: no weight
      checkpoint.passed_over[e.name] = e.dtype;
      continue;
    }
    CheckpointTensor& t = checkpoint.tensors.emplace_back();
    t.name = std::move(e.name);
    t.shape = std::move(e.shape);
    t.values.resize(static_cast<std::size_t>(num_elements(t.shape)));
    const std::string what = "the data of tensor " + quote(t.name);
    if (cohort) {
      file.read(t.values.data(), e.end - e.begin, data_begin + e.begin, what);
      crc.update(t.values.data(), e.end - e.begin);
    } else {
      raw.resize(e.end - e.begin);
      file.read(raw.data(), e.end - e.begin, data_begin + e.begin, what);
      convert_to_float(parser, t.name, e.dtype, raw, t.values);
    }
  }
  if (expected_crc && crc.value() != *expected_crc)
    parser.fail("checksum mismatch: the data region's crc32c is " + hex8(crc.value()) +
                ", " + kMetadataKey + " says " + hex8(*expected_crc) + " (the data is corrupt)");
  return checkpoint;
}

}  // namespace

Checkpoint read_checkpoint(const std::string& path) { return read_file(path, false); }

Checkpoint read_checkpoint_header(const std::string& path) { return read_file(path, false, true); }

Checkpoint read_safetensors(const std::string& path) { return read_file(path, true); }

}  // namespace cohort
