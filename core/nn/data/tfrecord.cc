// load_tfrecord(): TFRecord files of tf.train.Example records.
//
// A record is framed as uint64 length, uint32 masked CRC-32C of those 8 bytes, the data, uint32
// masked CRC-32C of the data (little-endian; mask ((c >> 15) | (c << 17)) + 0xa282ead8), the
// whole file optionally compressed (gzip or zlib: TensorFlow's "GZIP" and "ZLIB"). The data is a
// tf.train.Example, whose protobuf wire format is read here by hand, as the summary writer writes
// Events: the messages take five field kinds, while protoc and libprotobuf would add a code
// generator and a runtime library to every build. The fields
// (tensorflow/core/example/example.proto, feature.proto):
//   Example  { Features features = 1; }
//   Features { map<string, Feature> feature = 1; }      // entries { string key = 1; Feature value = 2; }
//   Feature  { oneof { BytesList bytes_list = 1; FloatList float_list = 2; Int64List int64_list = 3; } }
//   BytesList { repeated bytes value = 1; }  FloatList { repeated float value = 1 [packed]; }
//   Int64List { repeated int64 value = 1 [packed]; }
// Packed and unpacked repeated numbers are both read, as protobuf parsers must; unknown fields are
// skipped.

#include <glob.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <utility>

#include "cohort/core/base/crc32c.h"
#include "cohort/core/base/error.h"
#include "cohort/core/nn/data/files.h"
#include "cohort/core/nn/data/image_decode.h"
#include "cohort/core/nn/data/loaders.h"

namespace cohort::data {
namespace {

// ---- Files and records ----------------------------------------------------------------------

bool has_wildcard(const std::string& path) { return path.find_first_of("*?[") != std::string::npos; }

// The files named, each pattern replaced by the files it matches, sorted.
std::vector<std::string> expand(const std::vector<std::string>& given) {
  std::vector<std::string> files;
  for (const std::string& name : given) {
    if (!has_wildcard(name)) {
      files.push_back(name);
      continue;
    }
    glob_t found{};
    const int status = ::glob(name.c_str(), 0, nullptr, &found);
    std::vector<std::string> matched(found.gl_pathv, found.gl_pathv + found.gl_pathc);
    ::globfree(&found);
    if (status == GLOB_NOMATCH || matched.empty()) detail::fail(name, "no file matches");
    if (status != 0) detail::fail(name, "cannot list the files it matches");
    std::sort(matched.begin(), matched.end());
    files.insert(files.end(), matched.begin(), matched.end());
  }
  if (files.empty()) throw InvalidArgument("load_tfrecord: no files");
  // A file given twice (by two patterns, or spelt two ways) would weigh its examples double.
  std::set<std::filesystem::path> distinct;
  for (const std::string& file : files) {
    std::error_code ec;
    const std::filesystem::path place = std::filesystem::weakly_canonical(file, ec);
    if (!ec && !distinct.insert(place).second)
      detail::fail(file, "named twice among the files to read (its records would count twice)");
  }
  return files;
}

std::uint32_t masked_crc(std::string_view bytes) {
  return masked_crc32c(std::as_bytes(std::span(bytes)));
}

std::uint64_t little_endian(const unsigned char* p, int size) {
  std::uint64_t v = 0;
  for (int i = size - 1; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

constexpr const char* kTFRecordFile = "a TFRecord file";

// The records of one file, in order, each checked against both its checksums.
class RecordReader {
 public:
  // Plain or gzip. zlib tells gzip by the first two bytes (1f 8b), which a plain file's first
  // record length may begin with too (35615 + 65536 k bytes): a plain file is told by its first
  // length's checksum instead, read before anything else.
  explicit RecordReader(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {  // a pipe cannot be read twice: zlib decides
      file_.emplace(path, kTFRecordFile, detail::GzReader::Compression::kDetect);
      return;
    }
    file_.emplace(path, kTFRecordFile, detail::GzReader::Compression::kNone);
    pending_.resize(12);
    pending_.resize(static_cast<std::size_t>(file_->read(pending_.data(), 12)));
    const bool plain = pending_.size() == 12 && length_checksum_holds(pending_);
    if (!plain) {
      file_.emplace(path, kTFRecordFile,
                    zlib_header(pending_) ? detail::GzReader::Compression::kZlib
                                          : detail::GzReader::Compression::kDetect);
      pending_.clear();
    }
  }

  // The next record's data into `data`; false at the end of the file.
  bool next(std::string& data) {
    std::string header = std::move(pending_);
    pending_.clear();
    const std::size_t had = header.size();
    header.resize(12);
    const std::int64_t got = static_cast<std::int64_t>(had) + file_->read(header.data() + had, static_cast<std::int64_t>(12 - had));
    if (got == 0) {
      // A gzip stream cut where a record ends would otherwise lose the rest in silence.
      if (file_->stream_cut())
        fail(std::string("the ") + file_->compression() + " stream ends early (a truncated file)");
      return false;
    }
    if (got < 12) fail("truncated: " + std::to_string(got) + " of the 12 header bytes" + cut());
    if (!length_checksum_holds(header))
      fail("the length's checksum does not match (not a TFRecord file, or a corrupt one)");
    const std::uint64_t length = little_endian(reinterpret_cast<const unsigned char*>(header.data()), 8);
    // Above any file (and where length + 4 would wrap): a length the checksum let through.
    if (length > (std::uint64_t{1} << 62))
      fail("a record claims " + std::to_string(length) + " bytes, more than any file holds (a corrupt length)");
    // Read as it arrives, so a corrupt length the checksum missed cannot ask for terabytes.
    const std::uint64_t want = length + 4;
    data.clear();
    while (data.size() < want) {
      const std::size_t at = data.size();
      const auto piece = static_cast<std::size_t>(std::min<std::uint64_t>(want - at, 1 << 26));
      data.resize(at + piece);
      const std::int64_t read = file_->read(data.data() + at, static_cast<std::int64_t>(piece));
      data.resize(at + static_cast<std::size_t>(read));
      if (read < static_cast<std::int64_t>(piece)) break;
    }
    if (data.size() < want)
      fail("truncated: " + std::to_string(data.size()) + " of the record's " +
           std::to_string(want) + " bytes" + cut());
    const auto crc = little_endian(reinterpret_cast<const unsigned char*>(data.data()) + length, 4);
    data.resize(static_cast<std::size_t>(length));
    if (crc != masked_crc(data)) fail("the data's checksum does not match (a corrupt file)");
    offset_ += 16 + length;
    ++index_;
    return true;
  }

  // Where the current record is, for messages: "PATH: record N" (0-based, in this file).
  std::string where() const { return file_->path() + ": record " + std::to_string(index()); }
  // The current record's index in its file.
  std::int64_t index() const { return index_ - 1; }

 private:
  static bool length_checksum_holds(std::string_view header) {
    return little_endian(reinterpret_cast<const unsigned char*>(header.data()) + 8, 4) ==
           masked_crc(header.substr(0, 8));
  }

  // The two bytes a zlib stream starts with (RFC 1950): deflate with a window of at most 32 KiB,
  // no preset dictionary (TensorFlow's have none), and a check that makes them a multiple of 31.
  // gzip's (1f 8b) are not such bytes.
  static bool zlib_header(std::string_view bytes) {
    if (bytes.size() < 2) return false;
    const auto method = static_cast<unsigned char>(bytes[0]), flags = static_cast<unsigned char>(bytes[1]);
    return (method & 0x0f) == 8 && (method >> 4) <= 7 && (flags & 0x20) == 0 &&
           (method * 256 + flags) % 31 == 0;
  }

  std::string cut() const {
    return file_->stream_cut() ? std::string(", the ") + file_->compression() + " stream ends early" : "";
  }

  [[noreturn]] void fail(const std::string& fault) const {
    detail::fail(file_->path(), "record " + std::to_string(index_) + " at byte " +
                                    std::to_string(offset_) +
                                    (file_->gzip() ? " of the inflated data" : "") + ": " + fault);
  }

  std::optional<detail::GzReader> file_;
  std::string pending_;  // bytes read to tell the file's kind, not yet taken
  std::uint64_t offset_ = 0;
  std::int64_t index_ = 0;
};

// ---- tf.train.Example ------------------------------------------------------------------------

struct ParseError {
  std::string what;
};

enum WireType : std::uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// Reads protobuf fields from a message's bytes; anything malformed is a ParseError.
class Wire {
 public:
  explicit Wire(std::string_view bytes) : bytes_(bytes) {}
  bool done() const { return at_ == bytes_.size(); }

  std::uint64_t varint() {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (at_ >= bytes_.size()) throw ParseError{"a number runs past its message"};
      const auto byte = static_cast<unsigned char>(bytes_[at_++]);
      v |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return v;
    }
    throw ParseError{"a number longer than 10 bytes"};
  }
  std::string_view take(std::size_t n) {
    if (n > bytes_.size() - at_) throw ParseError{"a field runs past its message"};
    const std::string_view out = bytes_.substr(at_, n);
    at_ += n;
    return out;
  }
  std::string_view length_delimited() { return take(static_cast<std::size_t>(varint())); }
  float fixed32_float() {
    const std::string_view b = take(4);
    return std::bit_cast<float>(static_cast<std::uint32_t>(
        little_endian(reinterpret_cast<const unsigned char*>(b.data()), 4)));
  }
  void skip(std::uint64_t key) {
    switch (key & 7) {
      case kVarint: varint(); break;
      case kFixed64: take(8); break;
      case kLengthDelimited: length_delimited(); break;
      case kFixed32: take(4); break;
      default: throw ParseError{"a field of wire type " + std::to_string(key & 7)};
    }
  }

 private:
  std::string_view bytes_;
  std::size_t at_ = 0;
};

// One feature's values, as the record holds them.
struct Feature {
  bool present = false;  // the record names it (it may still hold no list)
  enum Kind { kMissing, kBytes, kFloat, kInt64 } kind = kMissing;
  std::vector<std::string_view> bytes;
  std::vector<float> floats;
  std::vector<std::int64_t> ints;

  std::size_t size() const {
    return kind == kBytes ? bytes.size() : kind == kFloat ? floats.size() : ints.size();
  }
};

const char* kind_name(Feature::Kind kind) {
  switch (kind) {
    case Feature::kBytes: return "a bytes_list";
    case Feature::kFloat: return "a float_list";
    case Feature::kInt64: return "an int64_list";
    case Feature::kMissing: break;
  }
  return "missing";
}

// The list inside a Feature (its value = 1 fields, packed or not), added to `out`'s values: a
// list field given twice merges, as protobuf merges it; another kind of list replaces it (oneof).
void parse_list(std::string_view bytes, Feature::Kind kind, Feature& out) {
  if (out.kind != kind) {
    out.bytes.clear();
    out.floats.clear();
    out.ints.clear();
    out.kind = kind;
  }
  Wire wire(bytes);
  while (!wire.done()) {
    const std::uint64_t key = wire.varint();
    if (key >> 3 != 1) {
      wire.skip(key);
      continue;
    }
    const auto type = static_cast<std::uint32_t>(key & 7);
    if (kind == Feature::kBytes && type == kLengthDelimited) {
      out.bytes.push_back(wire.length_delimited());
    } else if (kind == Feature::kFloat && type == kFixed32) {
      out.floats.push_back(wire.fixed32_float());
    } else if (kind == Feature::kFloat && type == kLengthDelimited) {
      Wire packed(wire.length_delimited());
      while (!packed.done()) out.floats.push_back(packed.fixed32_float());
    } else if (kind == Feature::kInt64 && type == kVarint) {
      out.ints.push_back(static_cast<std::int64_t>(wire.varint()));
    } else if (kind == Feature::kInt64 && type == kLengthDelimited) {
      Wire packed(wire.length_delimited());
      while (!packed.done()) out.ints.push_back(static_cast<std::int64_t>(packed.varint()));
    } else {
      throw ParseError{std::string("a value of wire type ") + std::to_string(type) + " in " +
                       kind_name(kind)};
    }
  }
}

// Fills out[k] with the feature names[k] of the Example in `bytes` (kMissing where the record
// lacks it); `seen`, if given, receives every feature's name (for a message about one missing).
void parse_example(std::string_view bytes, const std::vector<std::string>& names,
                   std::vector<Feature>& out, std::vector<std::string>* seen) {
  for (Feature& f : out) f = Feature{};
  Wire example(bytes);
  while (!example.done()) {
    const std::uint64_t key = example.varint();
    if (key != (1 << 3 | kLengthDelimited)) {
      example.skip(key);
      continue;
    }
    Wire features(example.length_delimited());
    while (!features.done()) {
      const std::uint64_t entry_key = features.varint();
      if (entry_key != (1 << 3 | kLengthDelimited)) {
        features.skip(entry_key);
        continue;
      }
      Wire entry(features.length_delimited());
      std::string_view name, value;
      while (!entry.done()) {
        const std::uint64_t field = entry.varint();
        if (field == (1 << 3 | kLengthDelimited)) {
          name = entry.length_delimited();
        } else if (field == (2 << 3 | kLengthDelimited)) {
          value = entry.length_delimited();
        } else {
          entry.skip(field);
        }
      }
      if (seen != nullptr) seen->emplace_back(name);
      const auto wanted = std::find(names.begin(), names.end(), name);
      if (wanted == names.end()) continue;
      Feature& feature = out[static_cast<std::size_t>(wanted - names.begin())];
      feature = Feature{};  // a key given twice: the last entry holds (map semantics)
      feature.present = true;
      Wire oneof(value);
      while (!oneof.done()) {
        const std::uint64_t field = oneof.varint();
        const auto number = field >> 3;
        if ((field & 7) == kLengthDelimited && number >= 1 && number <= 3) {
          parse_list(oneof.length_delimited(), static_cast<Feature::Kind>(number), feature);
        } else {
          oneof.skip(field);
        }
      }
    }
  }
}

std::string join(const std::vector<std::string>& names) {
  std::string text;
  for (std::size_t i = 0; i < names.size() && i < 12; ++i) text += (i ? ", " : "") + names[i];
  if (names.size() > 12) text += ", ...";
  return text.empty() ? "none" : text;
}

bool encoded_image(std::string_view bytes) {
  return bytes.starts_with("\x89PNG\r\n\x1a\n") || bytes.starts_with("\xff\xd8\xff");
}

// The number of classes: `given`, or the largest of every record's `labels` + 1 (warned of where
// some of those have no label and `warn`); a DataError naming `name` when a label is not below it.
int resolve_classes(const std::vector<std::int64_t>& labels, int given, const std::string& name,
                    bool warn) {
  const std::int64_t largest = *std::max_element(labels.begin(), labels.end());
  const int num_classes = given > 0 ? given : static_cast<int>(largest) + 1;
  if (largest >= num_classes) {
    const auto at = std::find(labels.begin(), labels.end(), largest) - labels.begin();
    detail::fail(name, "label " + std::to_string(largest) + " (record " + std::to_string(at) +
                           " of all) is not below num_classes " + std::to_string(num_classes));
  }
  if (given == 0 && warn && num_classes <= (1 << 20)) {
    std::vector<bool> seen(static_cast<std::size_t>(num_classes));
    for (const std::int64_t label : labels) seen[static_cast<std::size_t>(label)] = true;
    detail::warn_classes_without_examples(name, seen);
  }
  return num_classes;
}

// What load_tfrecord gathers, record by record: the layout the first record sets, the checks of
// every record against it, and the shard's values; then the dataset.
class Collector {
 public:
  explicit Collector(const TFRecordOptions& options)
      : options_(options), outcome_(options.label.empty() ? options.target : options.label) {}

  // The features and outcome of the record at `where` (file `file`, its record `record`).
  void add(const Feature& x, const Feature& y, const std::string& where, bool kept,
           std::size_t file, std::int64_t record) {
    if (!input_) learn_layout(x, y, where);
    check_features(x, where);
    check_outcome(x, y, where);
    if (kept) keep(x, y, file, record);
    ++records_;
  }

  Dataset dataset(const std::vector<std::string>& files) {
    const std::string name = check_records(files);
    auto storage = std::make_shared<Storage>();
    storage->name = name;
    if (options_.label.empty()) {
      storage->targets = Tensor({kept_, static_cast<std::int64_t>(targets_per_record_)}, targets_);
      storage->num_classes = 0;
    } else {
      storage->labels = std::move(kept_labels_);
      storage->num_classes = resolve_classes(labels_, options_.num_classes, name, options_.shard.index == 0);
    }
    if (*input_ == Input::kImage && !options_.in_memory) {
      const detail::ImageLayout layout = image_layout();
      storage->source_shape = {kept_, layout.height, layout.width, layout.channels};
      storage->source = detail::encoded_images(std::move(images_), image_name(files), layout, name);
    } else {
      storage->features = features(files, name);
    }
    return Dataset(std::move(storage));
  }

  // The kept records' features alone, [kept, example...] (load_tfrecord_features), which are
  // then let go: the next call gives the records kept after them.
  Tensor take_features(const std::vector<std::string>& files) {
    Tensor out = features(files, check_records(files));
    numbers_.clear();
    images_.clear();
    image_records_.clear();
    kept_ = 0;
    return out;
  }

  std::int64_t kept() const { return kept_; }

 private:
  // The files' name in messages; a DataError when they hold no record.
  std::string check_records(const std::vector<std::string>& files) const {
    if (records_ == 0)
      detail::fail(files.front(), "no records" + std::string(files.size() > 1 ? " in any of the files" : ""));
    return files.size() == 1 ? files.front() : files.front() + " and " + std::to_string(files.size() - 1) + " more";
  }

  // Numbers as they are, or images decoded.
  Tensor features(const std::vector<std::string>& files, const std::string& name) {
    if (*input_ != Input::kImage) {
      Shape shape{kept_};
      const Shape example = options_.shape.empty()
                                ? Shape{static_cast<std::int64_t>(values_per_record_)}
                                : options_.shape;
      shape.insert(shape.end(), example.begin(), example.end());
      return Tensor(shape, numbers_);
    }
    return detail::decode_images(
        kept_, [&](std::int64_t i) { return images_[static_cast<std::size_t>(i)]; },
        image_name(files), image_layout(), name);
  }

  // An image's name in messages, made when needed: "PATH: record N (feature 'F')".
  std::function<std::string(std::int64_t)> image_name(const std::vector<std::string>& files) {
    return [files, records = std::move(image_records_), feature = options_.features](std::int64_t i) {
      const auto& [file, record] = records[static_cast<std::size_t>(i)];
      return files[file] + ": record " + std::to_string(record) + " (feature '" + feature + "')";
    };
  }

  detail::ImageLayout image_layout() const {
    return detail::image_layout(options_.height, options_.width, options_.channels, first_image_, first_);
  }


  // How the features of every record are read, from the first record.
  enum class Input { kNumbers, kImage, kRawBytes };

  [[noreturn]] void fail_features(const std::string& where, const std::string& fault) const {
    detail::fail(where, "feature '" + options_.features + "' " + fault);
  }

  // The first record says how the features are held; every other must agree.
  void learn_layout(const Feature& x, const Feature& y, const std::string& where) {
    first_ = where;
    if (x.kind == Feature::kBytes) {
      if (x.bytes.size() != 1)
        fail_features(where, "holds " + std::to_string(x.bytes.size()) +
                                 " byte strings, expected one (an encoded image or raw bytes)");
      // With a shape, raw values (whatever their first bytes look like); else an image.
      if (!options_.shape.empty()) {
        input_ = Input::kRawBytes;
      } else if (encoded_image(x.bytes[0])) {
        input_ = Input::kImage;
        first_image_ = std::string(x.bytes[0]);
      } else {
        fail_features(where, "holds bytes that are not a PNG or JPEG image: give the shape of its "
                             "raw uint8 values (TFRecordOptions::shape)");
      }
    } else {
      input_ = Input::kNumbers;
    }
    values_per_record_ = x.kind == Feature::kBytes ? x.bytes[0].size() : x.size();
    targets_per_record_ = y.size();
    if (values_per_record_ == 0) fail_features(where, "holds no values");
    if (!options_.target.empty() && targets_per_record_ == 0)
      detail::fail(where, "target feature '" + options_.target + "' holds no values");
    if (*input_ != Input::kImage && !options_.shape.empty() &&
        num_elements(options_.shape) != static_cast<std::int64_t>(values_per_record_))
      fail_features(where, "holds " + std::to_string(values_per_record_) + " values, which shape " +
                               to_string(options_.shape) + " does not hold");
  }

  void check_features(const Feature& x, const std::string& where) const {
    const bool bytes_expected = *input_ != Input::kNumbers;
    if ((x.kind == Feature::kBytes) != bytes_expected)
      fail_features(where, std::string("is ") + kind_name(x.kind) + ", where " + first_ + " has " +
                               (bytes_expected ? "a bytes_list" : "numbers"));
    if (x.kind == Feature::kBytes && x.bytes.size() != 1)
      fail_features(where, "holds " + std::to_string(x.bytes.size()) + " byte strings, expected one" +
                               (*input_ == Input::kImage ? " image" : ""));
    if (*input_ != Input::kImage) {
      const std::size_t count = x.kind == Feature::kBytes ? x.bytes[0].size() : x.size();
      if (count != values_per_record_)
        fail_features(where, "holds " + std::to_string(count) + " values, where " + first_ +
                                 " holds " + std::to_string(values_per_record_));
    }
  }

  void check_outcome(const Feature& x, const Feature& y, const std::string& where) {
    // Every record's numbers are checked, as CSV rows are, so every shard of a bad file fails
    // alike: a NaN (a missing value's usual mark) or an infinity would surface as a NaN loss.
    for (const Feature* f : {&x, &y})
      for (std::size_t i = 0; i < f->floats.size(); ++i)
        if (!std::isfinite(f->floats[i]))
          detail::fail(where, "feature '" + (f == &x ? options_.features : outcome_) + "' value " +
                                  std::to_string(i) + " is " +
                                  (std::isnan(f->floats[i]) ? "nan" : "infinite") + " (a missing value?)");
    if (!options_.label.empty()) {
      if (y.kind != Feature::kInt64 || y.ints.size() != 1)
        detail::fail(where, "label feature '" + options_.label + "' is " + kind_name(y.kind) +
                                " of " + std::to_string(y.size()) +
                                " values, expected an int64_list of one class label" +
                                (y.kind == Feature::kFloat ? " (floats are targets)" : ""));
      if (y.ints[0] < 0 || y.ints[0] >= std::numeric_limits<std::int32_t>::max())
        detail::fail(where, "label " + std::to_string(y.ints[0]) + " is not a class index");
      labels_.push_back(y.ints[0]);
      return;
    }
    if (options_.target.empty()) return;  // features alone
    if (y.kind == Feature::kBytes)
      detail::fail(where, "target feature '" + options_.target + "' is a bytes_list, expected numbers");
    if (y.size() != targets_per_record_)
      detail::fail(where, "target feature '" + options_.target + "' holds " +
                              std::to_string(y.size()) + " values, where " + first_ + " holds " +
                              std::to_string(targets_per_record_));
  }

  // Floats of a number list, appended to `out`.
  static void append(const Feature& f, std::vector<float>& out) {
    if (f.kind == Feature::kFloat) {
      out.insert(out.end(), f.floats.begin(), f.floats.end());
    } else {
      for (const std::int64_t v : f.ints) out.push_back(static_cast<float>(v));
    }
  }

  void keep(const Feature& x, const Feature& y, std::size_t file, std::int64_t record) {
    switch (*input_) {
      case Input::kImage:
        images_.emplace_back(x.bytes[0]);
        image_records_.emplace_back(file, record);
        break;
      case Input::kRawBytes:
        for (const char c : x.bytes[0])
          numbers_.push_back(static_cast<float>(static_cast<unsigned char>(c)) / 255.0f);
        break;
      case Input::kNumbers:
        append(x, numbers_);
        break;
    }
    if (!options_.label.empty()) {
      kept_labels_.push_back(static_cast<std::int32_t>(y.ints[0]));
    } else if (!options_.target.empty()) {
      append(y, targets_);
    }
    ++kept_;
  }

  const TFRecordOptions& options_;
  const std::string& outcome_;
  std::optional<Input> input_;
  std::size_t values_per_record_ = 0, targets_per_record_ = 0;
  std::string first_;  // the first record, for messages and the image layout
  std::string first_image_;
  std::int64_t records_ = 0;  // over all files
  std::int64_t kept_ = 0;
  std::vector<float> numbers_, targets_;
  std::vector<std::string> images_;                                  // the shard's encoded images
  std::vector<std::pair<std::size_t, std::int64_t>> image_records_;  // their file and record
  std::vector<std::int64_t> labels_;                                 // every record's, checked
  std::vector<std::int32_t> kept_labels_;
};

}  // namespace

namespace {

// Reads every record of `files` (patterns expanded) into `collector`: the features, and the
// label or target where `options` names one, calling `after_each` (where given) with the files
// after each record. Returns the files read.
std::vector<std::string> read_records(
    const std::vector<std::string>& file_names, const TFRecordOptions& options, Collector& collector,
    const char* caller, const std::function<void(const std::vector<std::string>&)>& after_each = {}) {
  detail::check_shard(options.shard, caller);
  if (options.num_classes < 0)
    throw InvalidArgument(std::string(caller) + ": num_classes " + std::to_string(options.num_classes));
  detail::check_image_options(caller, options.height, options.width, options.channels);
  if (options.features.empty()) throw InvalidArgument(std::string(caller) + ": no features feature named");
  if (options.features == options.label || options.features == options.target)
    throw InvalidArgument(std::string(caller) + ": feature '" + options.features +
                          "' named both as the features and as the label or target");
  const std::vector<std::string> files = expand(file_names);
  std::vector<std::string> names{options.features};
  if (!options.label.empty() || !options.target.empty())
    names.push_back(options.label.empty() ? options.target : options.label);
  std::vector<Feature> parsed(names.size());
  const Feature none;  // the outcome of a record read for its features alone
  std::vector<std::string> seen;  // every feature's name, for a message about one missing
  std::string data;
  std::int64_t index = 0;  // over all files
  for (std::size_t file = 0; file < files.size(); ++file) {
    RecordReader reader(files[file]);
    while (reader.next(data)) {
      seen.clear();
      try {
        parse_example(data, names, parsed, &seen);
      } catch (const ParseError& e) {
        detail::fail(reader.where(), "not a tf.train.Example: " + e.what);
      }
      const std::string where = reader.where();
      for (std::size_t k = 0; k < names.size(); ++k) {
        if (!parsed[k].present)
          detail::fail(where, "no feature '" + names[k] + "' (it has: " + join(seen) + ")");
        if (parsed[k].kind == Feature::kMissing)
          detail::fail(where, "feature '" + names[k] + "' holds no list (an empty Feature)");
      }
      collector.add(parsed[0], names.size() > 1 ? parsed[1] : none, where,
                    index++ % options.shard.count == options.shard.index, file, reader.index());
      if (after_each) after_each(files);
    }
  }
  return files;
}

// The features alone of `file_names`' records, handed to `take` each `batch_size` kept records
// as they are read, and at the end the rest: at least once, where the shard keeps no record too.
void read_features(const std::vector<std::string>& file_names, TFRecordOptions options,
                   std::int64_t batch_size, const std::function<void(Tensor)>& take) {
  if (!options.label.empty() || !options.target.empty())
    throw InvalidArgument("load_tfrecord_features reads features alone: no label or target (other "
                          "features are not read)");
  if (batch_size < 1)
    throw InvalidArgument("for_each_tfrecord_batch: batch size " + std::to_string(batch_size) + ", expected >= 1");
  options.in_memory = true;
  Collector collector(options);
  bool taken = false;
  const std::vector<std::string> files =
      read_records(file_names, options, collector, "load_tfrecord_features", [&](const std::vector<std::string>& files) {
        if (collector.kept() < batch_size) return;
        take(collector.take_features(files));
        taken = true;
      });
  // The last batch; or the error of files without a record.
  if (collector.kept() > 0 || !taken) take(collector.take_features(files));
}

}  // namespace

Dataset load_tfrecord(const std::vector<std::string>& file_names, const TFRecordOptions& options) {
  if (options.label.empty() == options.target.empty())
    throw InvalidArgument("load_tfrecord: name a label feature or a target feature (one of them)");
  Collector collector(options);
  const std::vector<std::string> files = read_records(file_names, options, collector, "load_tfrecord");
  return collector.dataset(files);
}

Tensor load_tfrecord_features(const std::vector<std::string>& file_names, TFRecordOptions options) {
  Tensor all;
  read_features(file_names, std::move(options), std::numeric_limits<std::int64_t>::max(),
                [&](Tensor features) { all = std::move(features); });
  return all;
}

void for_each_tfrecord_batch(const std::vector<std::string>& file_names, TFRecordOptions options,
                             std::int64_t batch_size, const std::function<void(const Tensor&)>& take) {
  read_features(file_names, std::move(options), batch_size, [&](Tensor features) { take(features); });
}

}  // namespace cohort::data
