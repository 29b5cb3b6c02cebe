// The .npy format: its header, the conversion of its dtypes, reading (whole, or a shard's rows)
// and writing (load_npy and save_npy of loaders.h; .npz archives: npz.cc; data sets: numpy.cc).

#include "cohort/core/nn/data/npy.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "cohort/core/nn/data/files.h"

namespace cohort::data {
namespace detail {
namespace {

// Every dtype below is read by copying its bytes into the C++ type, which is right only where
// the host's byte order is the files' ('<'). Every platform Cohort runs on is little-endian.
static_assert(std::endian::native == std::endian::little, "the .npy reader assumes little-endian");

// What the header of a .npy file says.
struct NpyHeader {
  std::string descr;
  char kind = 0;       // 'b' bool, 'i' signed, 'u' unsigned, 'f' float
  int item_size = 0;   // bytes per element
  bool big_endian = false;
  Shape shape;         // as the file gives it: empty for a 0-d array
  std::int64_t count = 1;
  std::uint64_t data_bytes = 0;

  // Stored in the other byte order than this machine's (numpy's '>f4' on x86-64).
  bool swapped() const { return big_endian != (std::endian::native == std::endian::big); }

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
         (kind == 'f' && (size == 2 || size == 4 || size == 8)));
    if (!supported)
      fail(where_, "unsupported dtype '" + descr +
                       "' (supported: bool, int8-64, uint8-64, float16, float32, float64)");
    if (order == '|' && size > 1) fail(where_, "dtype '" + descr + "' has no byte order");
    header.kind = kind;
    header.item_size = size;
    header.big_endian = size > 1 && (order == '>' || (order == '=' && std::endian::native == std::endian::big));
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

// Converts `n` elements of type T at `in`, of the other byte order than this machine's where
// `swap`, to float32 at `out`.
template <typename T>
void convert_as(const char* in, std::int64_t n, float* out, bool swap) {
  for (std::int64_t i = 0; i < n; ++i) {
    char bytes[sizeof(T)];
    std::memcpy(bytes, in + i * static_cast<std::int64_t>(sizeof(T)), sizeof(T));
    if (swap) std::reverse(bytes, bytes + sizeof(T));
    T v;
    std::memcpy(&v, bytes, sizeof(T));
    out[i] = static_cast<float>(v);
  }
}

// Converts `n` elements of the header's dtype at `in` to float32 at `out`, byte-swapped where
// the file has the other byte order.
void convert(const NpyHeader& h, const char* in, std::int64_t n, float* out) {
  const bool swap = h.swapped();
  switch (h.kind * 16 + h.item_size) {
    case 'b' * 16 + 1:
      for (std::int64_t i = 0; i < n; ++i) out[i] = in[i] != 0 ? 1.0f : 0.0f;
      break;
    case 'i' * 16 + 1: convert_as<std::int8_t>(in, n, out, false); break;
    case 'i' * 16 + 2: convert_as<std::int16_t>(in, n, out, swap); break;
    case 'i' * 16 + 4: convert_as<std::int32_t>(in, n, out, swap); break;
    case 'i' * 16 + 8: convert_as<std::int64_t>(in, n, out, swap); break;
    case 'u' * 16 + 1: convert_as<std::uint8_t>(in, n, out, false); break;
    case 'u' * 16 + 2: convert_as<std::uint16_t>(in, n, out, swap); break;
    case 'u' * 16 + 4: convert_as<std::uint32_t>(in, n, out, swap); break;
    case 'u' * 16 + 8: convert_as<std::uint64_t>(in, n, out, swap); break;
    case 'f' * 16 + 2: convert_as<Eigen::half>(in, n, out, swap); break;  // IEEE binary16
    case 'f' * 16 + 4:
      if (swap) convert_as<float>(in, n, out, true);
      else if (n > 0) std::memcpy(out, in, static_cast<std::size_t>(n) * 4);  // no null pointers to memcpy
      break;
    case 'f' * 16 + 8: convert_as<double>(in, n, out, swap); break;
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

}  // namespace

NpyArray parse_npy(std::string_view bytes, const std::string& where, ShardSpec shard,
                   Shape* file_shape) {
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

namespace {

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

}  // namespace

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
  if (header.kind == 'f' && header.item_size == 4 && !header.swapped()) {
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

}  // namespace detail

NpyArray load_npy(const std::string& path, ShardSpec shard) {
  Shape file_shape;
  return detail::read_npy(path, shard, file_shape);
}

namespace {

using detail::fail;
using detail::kNpyMagic;

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
  if (!out) detail::fail_io(path, "cannot create", errno);
  out.write(head.data(), static_cast<std::streamsize>(head.size()));
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  out.close();
  if (!out) detail::fail_io(path, "write error", errno);
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

}  // namespace cohort::data
