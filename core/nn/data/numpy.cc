// The NumPy .npy/.npz readers and writer behind loaders.h (CSV: csv.cc).

#include "cohort/core/nn/data/files.h"
#include "cohort/core/nn/data/loaders.h"

#include <zip.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <set>
#include <string_view>
#include <system_error>
#include <utility>

namespace cohort::data {
namespace {

// Every dtype below is read by copying its bytes into the C++ type, which is right only where
// the host's byte order is the files' ('<'). Every platform Cohort runs on is little-endian.
static_assert(std::endian::native == std::endian::little, "the .npy reader assumes little-endian");

constexpr std::string_view kNpyMagic("\x93NUMPY", 6);

using detail::fail;
using detail::file_size;
using detail::check_shard;
using detail::open_file;
using detail::read_exactly;
using detail::read_whole_file;

// ---- .npy ------------------------------------------------------------------------------------

// What the header of a .npy file says.
struct NpyHeader {
  std::string descr;
  char kind = 0;       // 'b' bool, 'i' signed, 'u' unsigned, 'f' float
  int item_size = 0;   // bytes per element
  Shape shape;         // as the file gives it: empty for a 0-d array
  std::int64_t count = 1;
  std::uint64_t data_bytes = 0;

  std::string layout() const {
    return "shape " + to_string(shape) + " of '" + descr + "'";
  }
};

// A parser of the small Python literal that is a .npy header, e.g.
//   {'descr': '<f4', 'fortran_order': False, 'shape': (60000, 784), }
// numpy writes it with repr() and reads it with ast.literal_eval, so anything a Python literal
// allows (either quote, any key order, spacing, a trailing comma, Python 2's 3L) may appear.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& where) : text_(text), where_(where) {}

  NpyHeader parse() {
    const Value dict = value(0);
    skip_space();
    if (pos_ != text_.size()) bad("unexpected text after the dictionary");
    if (dict.kind != Value::kDict) bad("not a dictionary");
    const Value* descr = nullptr;
    const Value* fortran = nullptr;
    const Value* shape = nullptr;
    for (const auto& [key, item] : dict.entries) {
      if (key == "descr") descr = &item;
      if (key == "fortran_order") fortran = &item;
      if (key == "shape") shape = &item;
    }
    for (const auto& [key, item] : {std::pair{"descr", descr}, std::pair{"fortran_order", fortran},
                                    std::pair{"shape", shape}})
      if (item == nullptr) bad(std::string("no '") + key + "' key");

    NpyHeader header;
    if (shape->kind != Value::kSequence) bad("'shape' is not a tuple");
    for (const Value& d : shape->items) {
      if (d.kind != Value::kInt || d.number < 0) bad("'shape' holds a value that is not a size");
      header.shape.push_back(d.number);
    }
    for (const std::int64_t d : header.shape) {
      if (d != 0 && header.count > std::numeric_limits<std::int64_t>::max() / 16 / d)
        fail(where_, "shape " + to_string(header.shape) + " is too large");
      header.count *= d;
    }
    if (descr->kind == Value::kSequence)
      fail(where_, "unsupported dtype: a structured (record) array, descr " + descr->source);
    if (descr->kind != Value::kString) bad("'descr' is not a string");
    parse_dtype(descr->text, header);
    if (fortran->kind != Value::kBool) bad("'fortran_order' is not True or False");
    // With at most one dimension longer than 1, Fortran and C order lay the elements out alike.
    const auto long_dims = std::count_if(header.shape.begin(), header.shape.end(),
                                         [](std::int64_t d) { return d > 1; });
    if (fortran->flag && long_dims > 1)
      fail(where_, "fortran_order True (column-major " + header.layout() +
                       ") is not supported: save a C-order array (numpy.ascontiguousarray)");
    header.data_bytes = static_cast<std::uint64_t>(header.count) *
                        static_cast<std::uint64_t>(header.item_size);
    return header;
  }

 private:
  struct Value {
    enum Kind { kString, kBool, kNone, kInt, kSequence, kDict } kind = kNone;
    std::string text;  // a string's contents
    bool flag = false;
    std::int64_t number = 0;
    std::vector<Value> items;                            // a tuple's or list's
    std::vector<std::pair<std::string, Value>> entries;  // a dict's
    std::string source;                                  // the literal as written
  };

  [[noreturn]] void bad(const std::string& fault) const {
    std::string header(text_);
    while (!header.empty() && (header.back() == ' ' || header.back() == '\n')) header.pop_back();
    fail(where_, "bad header: " + fault + " (at offset " + std::to_string(pos_) + " of " +
                     quote_bytes(header, 200) + ")");
  }

  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\r' || text_[pos_] == '\n'))
      ++pos_;
  }

  bool consume(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  // Items up to `close`, separated by commas, a trailing comma allowed. `item` parses one.
  template <typename Item>
  void items(char close, Item item) {
    while (!consume(close)) {
      item();
      if (consume(close)) return;
      if (!consume(',')) bad(std::string("expected ',' or '") + close + "'");
    }
  }

  Value value(int depth) {
    // A malicious header must not recurse the stack away.
    if (depth > 16) bad("nested too deeply");
    skip_space();
    if (pos_ >= text_.size()) bad("unexpected end");
    const std::size_t start = pos_;
    Value v;
    const char c = text_[pos_];
    if (c == '\'' || c == '"') {
      v.kind = Value::kString;
      v.text = string_literal();
    } else if (c == '{') {
      ++pos_;
      v.kind = Value::kDict;
      items('}', [&] {
        Value key = value(depth + 1);
        if (key.kind != Value::kString) bad("a key that is not a string");
        if (!consume(':')) bad("expected ':'");
        v.entries.emplace_back(std::move(key.text), value(depth + 1));
      });
    } else if (c == '(' || c == '[') {
      ++pos_;
      v.kind = Value::kSequence;
      items(c == '(' ? ')' : ']', [&] { v.items.push_back(value(depth + 1)); });
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      v.kind = Value::kInt;
      const auto [end, error] = std::from_chars(text_.data() + pos_,
                                                text_.data() + text_.size(), v.number);
      if (error != std::errc()) bad("a bad integer");
      pos_ = static_cast<std::size_t>(end - text_.data());
      if (pos_ < text_.size() && (text_[pos_] == 'L' || text_[pos_] == 'l')) ++pos_;  // Python 2
    } else {
      std::size_t end = pos_;
      while (end < text_.size() && std::isalpha(static_cast<unsigned char>(text_[end]))) ++end;
      const std::string_view word = text_.substr(pos_, end - pos_);
      if (word == "True" || word == "False") {
        v.kind = Value::kBool;
        v.flag = word == "True";
      } else if (word != "None") {
        bad("unexpected " + quote_bytes(text_.substr(pos_, 1)));
      }
      pos_ = end;
    }
    v.source = std::string(text_.substr(start, pos_ - start));
    return v;
  }

  std::string string_literal() {
    const char quote = text_[pos_++];
    std::string out;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      if (text_[pos_] == '\\' && pos_ + 1 < text_.size()) ++pos_;
      out.push_back(text_[pos_++]);
    }
    if (pos_ >= text_.size()) bad("an unterminated string");
    ++pos_;
    return out;
  }

  // '<f4', '|u1', '=i8', 'f8' (native): byte order, kind, size.
  void parse_dtype(const std::string& descr, NpyHeader& header) const {
    header.descr = descr;
    std::string_view rest = descr;
    char order = '=';
    if (!rest.empty() && std::strchr("<>|=", rest[0]) != nullptr) {
      order = rest[0];
      rest.remove_prefix(1);
    }
    int size = 0;
    const char kind = rest.empty() ? 0 : rest[0];
    const char* digits = rest.data() + (rest.empty() ? 0 : 1);
    const auto [end, error] = std::from_chars(digits, rest.data() + rest.size(), size);
    const bool supported =
        error == std::errc() && end == rest.data() + rest.size() &&
        ((kind == 'b' && size == 1) ||
         ((kind == 'i' || kind == 'u') && (size == 1 || size == 2 || size == 4 || size == 8)) ||
         (kind == 'f' && (size == 4 || size == 8)));
    if (!supported)
      fail(where_, "unsupported dtype '" + descr +
                       "' (supported: bool, int8-64, uint8-64, float32, float64)");
    if (order == '>' && size > 1)
      fail(where_, "big-endian dtype '" + descr +
                       "' is not supported: save little-endian (e.g. a.astype('<" + kind +
                       std::to_string(size) + "'))");
    if (order == '|' && size > 1) fail(where_, "dtype '" + descr + "' has no byte order");
    header.kind = kind;
    header.item_size = size;
  }

  std::string_view text_;
  const std::string& where_;
  std::size_t pos_ = 0;
};

// The fixed part before the header: magic, version, header length.
struct Preamble {
  int major = 0;
  int minor = 0;
  std::uint64_t size = 0;         // bytes of the preamble: 10 or 12
  std::uint64_t header_size = 0;  // bytes of the header text that follows
};

// Parses the preamble from the first bytes of a file of `total` bytes (`head` holds at least
// min(total, 12) of them).
Preamble parse_preamble(std::string_view head, std::uint64_t total, const std::string& where) {
  const std::string_view magic = head.substr(0, std::min<std::size_t>(head.size(), 6));
  if (magic != kNpyMagic.substr(0, magic.size()) || total == 0)
    fail(where, "not a .npy file: found " + quote_bytes(head.substr(0, 8)) + ", expected " +
                    quote_bytes(kNpyMagic) +
                    (head.substr(0, 2) == "PK" ? " (a zip archive: an .npz? use load_npz)" : ""));
  Preamble p;
  if (head.size() >= 8) {
    p.major = static_cast<unsigned char>(head[6]);
    p.minor = static_cast<unsigned char>(head[7]);
    if (p.major < 1 || p.major > 3 || p.minor != 0)
      fail(where, "unsupported .npy format version " + std::to_string(p.major) + "." +
                      std::to_string(p.minor) + " (1.0, 2.0 and 3.0 are read)");
  }
  p.size = p.major == 1 ? 10 : 12;
  if (head.size() < 8 || head.size() < p.size)
    fail(where, "truncated: " + std::to_string(total) + " bytes, less than the .npy preamble");
  const auto* b = reinterpret_cast<const unsigned char*>(head.data());
  p.header_size = p.major == 1 ? std::uint64_t{b[8]} | std::uint64_t{b[9]} << 8
                               : std::uint64_t{b[8]} | std::uint64_t{b[9]} << 8 |
                                     std::uint64_t{b[10]} << 16 | std::uint64_t{b[11]} << 24;
  if (p.size + p.header_size > total)
    fail(where, "truncated: the header needs " + std::to_string(p.size + p.header_size) +
                    " bytes, present " + std::to_string(total));
  return p;
}

void check_data_size(const NpyHeader& header, std::uint64_t present, const std::string& where) {
  const std::string expected =
      "expected " + std::to_string(header.data_bytes) + " bytes of data (" + header.layout() +
      "), present " + std::to_string(present);
  if (present < header.data_bytes) fail(where, "truncated: " + expected);
  if (present > header.data_bytes)
    fail(where, std::to_string(present - header.data_bytes) + " bytes after the data: " + expected);
}

template <typename T>
void convert_as(const char* in, std::int64_t n, float* out) {
  for (std::int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, in + i * static_cast<std::int64_t>(sizeof(T)), sizeof(T));
    out[i] = static_cast<float>(v);
  }
}

// Converts `n` elements of the header's dtype at `in` to float32 at `out`.
void convert(const NpyHeader& h, const char* in, std::int64_t n, float* out) {
  switch (h.kind * 16 + h.item_size) {
    case 'b' * 16 + 1:
      for (std::int64_t i = 0; i < n; ++i) out[i] = in[i] != 0 ? 1.0f : 0.0f;
      break;
    case 'i' * 16 + 1: convert_as<std::int8_t>(in, n, out); break;
    case 'i' * 16 + 2: convert_as<std::int16_t>(in, n, out); break;
    case 'i' * 16 + 4: convert_as<std::int32_t>(in, n, out); break;
    case 'i' * 16 + 8: convert_as<std::int64_t>(in, n, out); break;
    case 'u' * 16 + 1: convert_as<std::uint8_t>(in, n, out); break;
    case 'u' * 16 + 2: convert_as<std::uint16_t>(in, n, out); break;
    case 'u' * 16 + 4: convert_as<std::uint32_t>(in, n, out); break;
    case 'u' * 16 + 8: convert_as<std::uint64_t>(in, n, out); break;
    case 'f' * 16 + 4: std::memcpy(out, in, static_cast<std::size_t>(n) * 4); break;
    case 'f' * 16 + 8: convert_as<double>(in, n, out); break;
  }
}

// The rows (entries of the first dimension) a shard keeps: index, index + count, ...
struct ShardRows {
  std::int64_t total = 1;     // in the file; a 0-d array is one row
  std::int64_t kept = 1;
  std::int64_t elements = 1;  // per row
};

ShardRows shard_rows(const NpyHeader& header, ShardSpec shard) {
  ShardRows rows;
  rows.total = header.shape.empty() ? 1 : header.shape[0];
  rows.elements = rows.total == 0 ? 0 : header.count / rows.total;
  rows.kept = rows.total > shard.index ? (rows.total - shard.index + shard.count - 1) / shard.count : 0;
  return rows;
}

// The array of a shard's rows, unfilled.
NpyArray empty_array(const NpyHeader& header, const ShardRows& rows) {
  NpyArray array;
  array.dtype = header.descr;
  array.integral = header.kind != 'f';
  Shape shape = header.shape.empty() ? Shape{1} : header.shape;
  shape[0] = rows.kept;
  array.values.resize(shape);
  return array;
}

// An .npy file's bytes already in memory (an .npz member); only the shard's rows are converted.
// `file_shape`, if given, receives the array's shape in the file ([1] for a 0-d array).
NpyArray parse_npy(std::string_view bytes, const std::string& where, ShardSpec shard = {},
                   Shape* file_shape = nullptr) {
  const Preamble p = parse_preamble(bytes.substr(0, 12), bytes.size(), where);
  const NpyHeader header =
      HeaderParser(bytes.substr(p.size, p.header_size), where).parse();
  const std::uint64_t offset = p.size + p.header_size;
  check_data_size(header, bytes.size() - offset, where);
  if (file_shape != nullptr) *file_shape = header.shape.empty() ? Shape{1} : header.shape;
  const ShardRows rows = shard_rows(header, shard);
  NpyArray array = empty_array(header, rows);
  const std::int64_t row_bytes = rows.elements * header.item_size;
  for (std::int64_t i = 0; i < rows.kept; ++i)
    convert(header, bytes.data() + offset + (shard.index + i * shard.count) * row_bytes,
            rows.elements, array.values.data() + i * rows.elements);
  return array;
}

// ---- .npz ------------------------------------------------------------------------------------

struct ZipCloser {
  void operator()(zip_t* archive) const noexcept {
    if (zip_close(archive) != 0) zip_discard(archive);
  }
};
struct ZipFileCloser {
  void operator()(zip_file_t* file) const noexcept { zip_fclose(file); }
};

// An .npz archive open for reading, its .npy members by key (the name without ".npy").
class NpzArchive {
 public:
  explicit NpzArchive(const std::string& path) : path_(path) {
    if (file_size(path, "an .npz archive") == 0)
      fail(path, "empty file, not a zip archive (an .npz file is one)");
    int code = ZIP_ER_OK;
    archive_.reset(zip_open(path.c_str(), ZIP_RDONLY, &code));
    if (archive_ == nullptr) {
      zip_error_t error;
      zip_error_init_with_code(&error, code);
      std::string message = zip_error_strerror(&error);
      zip_error_fini(&error);
      if (code == ZIP_ER_NOZIP) {
        std::ifstream in(path, std::ios::binary);
        char head[6] = {};
        in.read(head, sizeof head);
        const std::string_view start(head, sizeof head);
        message = start == kNpyMagic ? "a .npy file, not an .npz archive (use load_npy)"
                  : start.starts_with("PK\x03\x04")
                      ? "a damaged or truncated zip archive (its directory at the end is missing)"
                      : "not a zip archive (an .npz file is one)";
      }
      fail(path, code == ZIP_ER_NOZIP ? message : "cannot open as a zip archive: " + message);
    }
    const zip_int64_t count = zip_get_num_entries(archive_.get(), 0);
    for (zip_int64_t i = 0; i < count; ++i) {
      const char* name = zip_get_name(archive_.get(), static_cast<zip_uint64_t>(i), 0);
      if (name == nullptr) fail(path, std::string("bad entry: ") + zip_strerror(archive_.get()));
      std::string key = name;
      if (!key.empty() && key.back() == '/') continue;  // a directory holds no data
      if (key.size() > 4 && key.ends_with(".npy")) {
        key.resize(key.size() - 4);
        if (!members_.emplace(key, static_cast<zip_uint64_t>(i)).second)
          fail(path, "two members named '" + std::string(name) + "'");
      } else {
        others_.push_back(name);
      }
    }
  }

  // Members that are not NAME.npy.
  const std::vector<std::string>& others() const { return others_; }
  const std::map<std::string, zip_uint64_t>& members() const { return members_; }

  // "'x', 'y'", or "none".
  std::string keys() const {
    std::string out;
    for (const auto& [key, index] : members_) out += (out.empty() ? "'" : ", '") + key + "'";
    return out.empty() ? "none" : out;
  }

  NpyArray read(const std::string& key, ShardSpec shard = {}, Shape* file_shape = nullptr) const {
    const zip_uint64_t index = members_.at(key);
    const std::string where = path_ + ": member " + key + ".npy";
    zip_stat_t stat;
    zip_stat_init(&stat);
    if (zip_stat_index(archive_.get(), index, 0, &stat) != 0 || !(stat.valid & ZIP_STAT_SIZE))
      fail(where, std::string("cannot stat: ") + zip_strerror(archive_.get()));
    const std::unique_ptr<zip_file_t, ZipFileCloser> file(
        zip_fopen_index(archive_.get(), index, 0));
    if (file == nullptr) fail(where, std::string("cannot open: ") + zip_strerror(archive_.get()));
    // A corrupt size must not make us allocate terabytes before the data runs out, so the buffer
    // grows as data actually arrives.
    const std::uint64_t size = stat.size;
    std::string bytes(static_cast<std::size_t>(std::min<std::uint64_t>(size, 1 << 28)), '\0');
    std::uint64_t have = 0;
    for (;;) {
      if (have == bytes.size()) {
        if (have == size) break;
        bytes.resize(static_cast<std::size_t>(std::min(size, 2 * have)));
      }
      const zip_int64_t got = zip_fread(file.get(), bytes.data() + have, bytes.size() - have);
      if (got < 0) fail(where, std::string("read error: ") + zip_file_strerror(file.get()));
      if (got == 0) break;
      have += static_cast<std::uint64_t>(got);
    }
    if (have < size)
      fail(where, "truncated: " + std::to_string(have) + " of " + std::to_string(size) +
                      " bytes");
    // libzip compares the member's CRC-32 when a read finds its end: one more read, which must
    // find nothing, so that a damaged archive is refused (as NumPy refuses it), not trained on.
    char past_end = 0;
    const zip_int64_t more = zip_fread(file.get(), &past_end, 1);
    if (more < 0) fail(where, std::string("damaged: ") + zip_file_strerror(file.get()));
    if (more > 0) fail(where, "more data than its stated " + std::to_string(size) + " bytes");
    return parse_npy(bytes, where, shard, file_shape);
  }

 private:
  std::string path_;
  std::unique_ptr<zip_t, ZipCloser> archive_;
  std::map<std::string, zip_uint64_t> members_;
  std::vector<std::string> others_;
};

// ---- datasets --------------------------------------------------------------------------------

// Where the examples came from, for messages.
struct Names {
  std::string dataset;   // the prefix of count mismatches
  std::string features;  // "features", "features 'x'"
  std::string targets;   // "targets", "targets y.npy"
  std::string labels;    // the prefix of label faults
  std::string name;      // the Dataset's name (its sources, for later messages)
};

// Every value a finite float32: NaN (a missing value's usual mark) or an infinity (or a float64
// beyond float32's range) would only come out later as a NaN loss that names no file. `values`
// are the rows `shard` keeps of the file's; the message names the file's example and index.
void check_finite(const Tensor& values, const std::string& where, const std::string& what,
                  ShardSpec shard = {}) {
  const std::span<const float> v = values.span();
  const auto bad = std::find_if(v.begin(), v.end(), [](float x) { return !std::isfinite(x); });
  if (bad == v.end()) return;
  const auto at = static_cast<std::int64_t>(bad - v.begin());
  const std::int64_t per_example = values.rank() > 0 && values.dim(0) > 0 ? values.size() / values.dim(0) : 1;
  const std::int64_t example = shard.index + at / per_example * shard.count;
  const std::int64_t i = example * per_example + at % per_example;
  fail(where, (what.empty() ? "" : what + ": ") + "the value at flat index " + std::to_string(i) + " (example " +
                  std::to_string(example) + ") is " +
                  (std::isnan(*bad) ? std::string("NaN (a missing value?)")
                                    : std::string("infinite, or beyond float32's range")));
}

// A copy of `t` as [n, 1] (t is [n]): Tensor::resize leaves contents unspecified.
Tensor as_column(const Tensor& t) { return Tensor({t.dim(0), 1}, t.span()); }

// Fails unless features of `features_shape` and targets of `targets_shape` hold as many
// examples.
void check_same_count(const Shape& features_shape, const Shape& targets_shape, const Names& names) {
  if (features_shape.empty()) fail(names.dataset, names.features + " are empty");
  if (targets_shape.empty()) fail(names.dataset, names.targets + " are empty");
  if (targets_shape[0] != features_shape[0])
    fail(names.dataset, names.features + " " + to_string(features_shape) + " and " + names.targets +
                            " " + to_string(targets_shape) + " differ in their first dimension: " +
                            std::to_string(features_shape[0]) + " vs " +
                            std::to_string(targets_shape[0]) + " examples");
}

// An integral array of n values ([n] or [n, 1]) is class labels; anything else, float targets.
bool are_labels(const NpyArray& targets) {
  const Tensor& t = targets.values;
  return targets.integral && (t.rank() == 1 || (t.rank() == 2 && t.dim(1) == 1));
}

// The class labels of `targets` (are_labels), each checked; `num_classes` 0 becomes the largest
// label + 1 (2 for booleans).
std::vector<std::int32_t> checked_labels(const NpyArray& targets, const Names& names,
                                         int& num_classes) {
  const Tensor& t = targets.values;
  const std::int64_t n = t.dim(0);
  // Labels above 2^24 would not have come through float32 exactly.
  const std::int64_t limit = num_classes > 0 ? num_classes : std::int64_t{1} << 24;
  std::vector<std::int32_t> labels(static_cast<std::size_t>(n));
  std::int32_t largest = -1;
  for (std::int64_t i = 0; i < n; ++i) {
    const float label = t[i];
    const std::string at = " at index " + std::to_string(i);
    if (label < 0)
      fail(names.labels,
           "label " + std::to_string(static_cast<std::int64_t>(label)) + at + " is negative");
    if (label >= static_cast<float>(limit))
      fail(names.labels, "label " + std::to_string(static_cast<std::int64_t>(label)) + at +
                             (num_classes > 0
                                  ? " is outside [0, " + std::to_string(num_classes) + ")"
                                  : " is too large for a class label"));
    labels[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(label);
    largest = std::max(largest, labels[static_cast<std::size_t>(i)]);
  }
  if (num_classes == 0) num_classes = targets.dtype.ends_with("b1") ? 2 : std::max(1, largest + 1);
  return labels;
}

// `features` and `targets` are the rows `shard` keeps of the files' (for the messages).
Dataset make_dataset(NpyArray features, NpyArray targets, const Names& names, int num_classes,
                     ShardSpec shard = {}) {
  if (num_classes < 0)
    throw InvalidArgument(names.dataset + ": num_classes " + std::to_string(num_classes));
  check_same_count(features.values.shape(), targets.values.shape(), names);
  check_finite(features.values, names.dataset, names.features, shard);
  Tensor x = features.values.rank() == 1 ? as_column(features.values) : std::move(features.values);
  if (!are_labels(targets)) {
    const Tensor& t = targets.values;
    check_finite(t, names.labels, "");
    Tensor y = t.rank() == 1 ? as_column(t) : std::move(targets.values);
    return Dataset::from_arrays(std::move(x), std::move(y), names.name);
  }
  std::vector<std::int32_t> labels = checked_labels(targets, names, num_classes);
  return Dataset::from_arrays(std::move(x), std::move(labels), num_classes, names.name);
}

// A shard's dataset: `features` are the shard's rows of an array of `features_shape`, `targets`
// the whole array. Every target is checked, and num_classes counts them all, so that every
// worker's shard agrees with the others'; then the shard's rows of them are kept.
Dataset make_shard(NpyArray features, const Shape& features_shape, NpyArray targets,
                   const Names& names, int num_classes, ShardSpec shard) {
  if (num_classes < 0)
    throw InvalidArgument(names.dataset + ": num_classes " + std::to_string(num_classes));
  check_same_count(features_shape, targets.values.shape(), names);
  if (are_labels(targets)) checked_labels(targets, names, num_classes);
  else check_finite(targets.values, names.labels, "");
  const std::int64_t row = targets.values.size() / std::max<std::int64_t>(1, targets.values.dim(0));
  Shape shape = targets.values.shape();
  shape[0] = features.values.dim(0);
  NpyArray mine{Tensor(shape), targets.dtype, targets.integral};
  for (std::int64_t i = 0; i < shape[0]; ++i)
    std::copy_n(targets.values.data() + (shard.index + i * shard.count) * row, row,
                mine.values.data() + i * row);
  return make_dataset(std::move(features), std::move(mine), names, num_classes, shard);
}

// A .npy file opened and its header read: the stream stands at the first byte of the data.
struct OpenNpy {
  std::ifstream in;
  NpyHeader header;
  std::uint64_t data_offset = 0;
};

OpenNpy open_npy(const std::string& path) {
  const std::uint64_t total = file_size(path, "a .npy file");
  OpenNpy f{open_file(path), {}, 0};
  std::string head(static_cast<std::size_t>(std::min<std::uint64_t>(total, 12)), '\0');
  read_exactly(f.in, head.data(), head.size(), path);
  const Preamble p = parse_preamble(head, total, path);
  std::string text(static_cast<std::size_t>(p.header_size), '\0');
  f.in.seekg(static_cast<std::streamoff>(p.size));
  read_exactly(f.in, text.data(), text.size(), path);
  f.header = HeaderParser(text, path).parse();
  f.data_offset = p.size + p.header_size;
  check_data_size(f.header, total - f.data_offset, path);
  return f;
}

// load_npy, and the array's shape in the file ([1] for a 0-d array) into `file_shape`.
NpyArray read_npy(const std::string& path, ShardSpec shard, Shape& file_shape) {
  check_shard(shard, path);
  OpenNpy f = open_npy(path);
  const NpyHeader& header = f.header;
  file_shape = header.shape.empty() ? Shape{1} : header.shape;
  const ShardRows rows = shard_rows(header, shard);
  NpyArray array = empty_array(header, rows);
  float* out = array.values.data();
  if (shard.count > 1) {
    // The shard's rows alone are converted and kept. The file is read in windows of whole
    // strides (`count` rows, one of them the shard's) of about a megabyte, or, where one stride
    // is larger, one row at a time where it lies.
    const std::int64_t row_bytes = rows.elements * header.item_size;
    const std::int64_t stride_bytes = row_bytes * shard.count;
    const std::int64_t strides =
        std::max<std::int64_t>(1, (std::int64_t{1} << 20) / std::max<std::int64_t>(1, stride_bytes));
    const bool windows = strides > 1;
    std::vector<char> buffer(static_cast<std::size_t>(windows ? strides * stride_bytes : row_bytes));
    for (std::int64_t i = 0; i < rows.kept;) {
      const std::int64_t first_row = shard.index + i * shard.count;
      const std::int64_t take = windows ? std::min(strides, rows.kept - i) : 1;
      // The window ends at the last kept row's end, which the file holds.
      const std::int64_t bytes = ((take - 1) * shard.count + 1) * row_bytes;
      f.in.seekg(static_cast<std::streamoff>(f.data_offset +
                                             static_cast<std::uint64_t>(first_row * row_bytes)));
      read_exactly(f.in, buffer.data(), static_cast<std::uint64_t>(bytes), path);
      for (std::int64_t j = 0; j < take; ++j, ++i)
        convert(header, buffer.data() + j * stride_bytes, rows.elements, out + i * rows.elements);
    }
    return array;
  }
  if (header.kind == 'f' && header.item_size == 4) {
    // The common case (float32 images) goes straight from the file into the tensor.
    read_exactly(f.in, reinterpret_cast<char*>(out), header.data_bytes, path);
    return array;
  }
  // Others are converted a block at a time, so a float64 file never needs twice its size.
  constexpr std::int64_t kBlock = 1 << 20;
  std::vector<char> block(static_cast<std::size_t>(
      std::min<std::int64_t>(header.count, kBlock) * header.item_size));
  for (std::int64_t done = 0; done < header.count;) {
    const std::int64_t n = std::min(kBlock, header.count - done);
    read_exactly(f.in, block.data(), static_cast<std::uint64_t>(n * header.item_size), path);
    convert(header, block.data(), n, out + done);
    done += n;
  }
  return array;
}

}  // namespace

NpyArray load_npy(const std::string& path, ShardSpec shard) {
  Shape file_shape;
  return read_npy(path, shard, file_shape);
}

std::map<std::string, NpyArray> load_npz(const std::string& path) {
  const NpzArchive archive(path);
  if (!archive.others().empty())
    fail(path, "member '" + archive.others().front() +
                   "' is not a .npy file (an .npz archive holds NAME.npy arrays)");
  std::map<std::string, NpyArray> arrays;
  for (const auto& [key, index] : archive.members()) arrays.emplace(key, archive.read(key));
  return arrays;
}

namespace {

// Writes a .npy file of `descr` elements: numpy's own layout, version 1.0 (2.0 for a header over
// 64 KiB), the data 64-byte aligned, which lets a reader map it in place.
void write_npy(const std::string& path, const char* descr, const Shape& dims, const void* data,
               std::size_t bytes) {
  std::string shape = "(";
  for (std::size_t d = 0; d < dims.size(); ++d)
    shape += (d > 0 ? ", " : "") + std::to_string(dims[d]);
  shape += dims.size() == 1 ? ",)" : ")";  // Python's one-element tuple
  std::string header = std::string("{'descr': '") + descr +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  const bool wide = 10 + header.size() + 1 > 65535;
  const std::size_t preamble = wide ? 12 : 10;
  header.append((64 - (preamble + header.size() + 1) % 64) % 64, ' ');
  header.push_back('\n');
  std::string head(kNpyMagic);
  head.push_back(static_cast<char>(wide ? 2 : 1));
  head.push_back(0);
  for (std::size_t i = 0; i < preamble - 8; ++i)
    head.push_back(static_cast<char>(header.size() >> (8 * i) & 0xff));

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail(path, std::string("cannot create: ") + std::strerror(errno));
  out.write(head.data(), static_cast<std::streamsize>(head.size()));
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  out.close();
  if (!out) fail(path, std::string("write error: ") + std::strerror(errno));
}

}  // namespace

void save_npy(const std::string& path, const Tensor& values) {
  if (values.rank() == 0 && values.size() == 0)
    throw InvalidArgument(path + ": save_npy of an empty (default) tensor");
  write_npy(path, "<f4", values.shape(), values.data(),
            static_cast<std::size_t>(values.size()) * sizeof(float));
}

void save_npy(const std::string& path, std::span<const std::int32_t> labels) {
  write_npy(path, "<i4", {static_cast<std::int64_t>(labels.size())}, labels.data(),
            labels.size_bytes());
}

Dataset dataset_from_arrays(NpyArray features, NpyArray targets, const std::string& name,
                            int num_classes) {
  return make_dataset(std::move(features), std::move(targets),
                      {name, "features", "targets", name + ": targets", name}, num_classes);
}

Dataset dataset_from_npy(const std::string& features_path, const std::string& targets_path,
                         int num_classes, ShardSpec shard) {
  const Names names{features_path, "features", "targets " + targets_path, targets_path,
                    features_path + ", " + targets_path};
  if (shard.count == 1 && shard.index == 0)
    return make_dataset(load_npy(features_path), load_npy(targets_path), names, num_classes);
  Shape features_shape;
  NpyArray features = read_npy(features_path, shard, features_shape);
  return make_shard(std::move(features), features_shape, load_npy(targets_path), names,
                    num_classes, shard);
}

Dataset dataset_from_npz(const std::string& path, const std::string& features_key,
                         const std::string& targets_key, int num_classes, ShardSpec shard) {
  check_shard(shard, path);
  const NpzArchive archive(path);
  for (const std::string& key : {features_key, targets_key})
    if (!archive.members().contains(key))
      fail(path, "no array '" + key + "' (keys present: " + archive.keys() + ")");
  // Only the two arrays asked for are inflated, and of the features only the shard's rows are
  // converted.
  const Names names{path, "features '" + features_key + "'", "targets '" + targets_key + "'",
                    path + ": targets '" + targets_key + "'", path};
  Shape features_shape;
  NpyArray features = archive.read(features_key, shard, &features_shape);
  NpyArray targets = archive.read(targets_key);
  if (shard.count == 1) return make_dataset(std::move(features), std::move(targets), names, num_classes);
  return make_shard(std::move(features), features_shape, std::move(targets), names, num_classes,
                    shard);
}

}  // namespace cohort::data
