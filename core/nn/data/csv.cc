// The CSV reader behind load_csv() (loaders.h).

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <utility>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/data/files.h"
#include "cohort/core/nn/data/loaders.h"

namespace cohort::data {
namespace {

using detail::check_shard;
using detail::fail;

// A file's lines, without their '\n', read a piece at a time (plain or gzip), so that a worker
// holds its shard's values and not the whole file's text.
class LineReader {
 public:
  explicit LineReader(const std::string& path) : file_(path, "a CSV file") {}

  // The next line, valid until the next call; false after the last.
  bool next(std::string_view& line) {
    for (;;) {
      const std::size_t end = buffer_.find('\n', scanned_);
      if (end != std::string::npos) {
        seen_line_break_ = true;
        line = std::string_view(buffer_).substr(start_, end - start_);
        start_ = scanned_ = end + 1;
        return true;
      }
      if (at_end_) {
        if (!seen_line_break_) refuse_cr_alone();
        if (start_ == buffer_.size()) return false;
        line = std::string_view(buffer_).substr(start_);  // a last line without '\n'
        start_ = scanned_ = buffer_.size();
        return true;
      }
      // No line break in the file's first megabyte, but a CR: its lines end in CR alone (the check
      // at the end of a smaller file is the one below).
      if (!seen_line_break_ && buffer_.size() >= kPiece) refuse_cr_alone();
      // The partial line moves to the front, and the next piece comes after it.
      buffer_.erase(0, start_);
      scanned_ = buffer_.size();
      start_ = 0;
      buffer_.resize(scanned_ + kPiece);
      const std::int64_t got = file_.read(buffer_.data() + scanned_, static_cast<std::int64_t>(kPiece));
      buffer_.resize(scanned_ + static_cast<std::size_t>(got));
      if (got < static_cast<std::int64_t>(kPiece)) {
        at_end_ = true;
        if (file_.stream_cut()) fail(file_.path(), "the gzip stream ends early (a truncated file)");
      }
    }
  }

 private:
  // A file without '\n' but with '\r': its lines end in CR alone (old Mac OS).
  void refuse_cr_alone() const {
    if (buffer_.find('\r', start_) != std::string::npos)
      fail(file_.path(), "its lines end in CR alone (old Mac OS): save it with LF or CRLF line ends");
  }

  static constexpr std::size_t kPiece = 1 << 20;
  detail::GzReader file_;
  std::string buffer_;
  std::size_t start_ = 0;    // the next line's first byte
  std::size_t scanned_ = 0;  // bytes from start_ up to here hold no '\n'
  bool at_end_ = false;
  bool seen_line_break_ = false;
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// split()'s verdict on a line whose quoted field goes on past its end (onto the next lines).
constexpr const char* kOpenQuote = "a quoted field does not end on its line";

// A blank around a field: a space, tab or carriage return that is not the delimiter (which may
// be a tab or a space).
bool blank(char c, char delimiter) { return c != delimiter && (c == ' ' || c == '\t' || c == '\r'); }

// Whether a record whose quoted field is open where `line` starts still has one open where it
// ends, by split()'s rules: inside quotes, "" is one quote and a lone quote closes the field;
// outside, a field that starts (after blanks) with a quote opens one, and any other quote is a
// character. Linear in the line, so that a long record is not split again at every line.
bool still_open(std::string_view line, char delimiter) {
  bool inside = true;
  for (std::size_t i = 0;;) {
    if (inside) {
      for (;; i += 2) {
        i = line.find('"', i);
        if (i == std::string_view::npos) return true;
        if (i + 1 == line.size() || line[i + 1] != '"') break;  // "" is one quote
      }
      inside = false;
      ++i;
    } else {
      while (i < line.size() && blank(line[i], delimiter)) ++i;
      if (i < line.size() && line[i] == '"') {
        inside = true;
        ++i;
        continue;
      }
    }
    // The rest of this field (text after a closing quote is split()'s to refuse), then the next.
    const std::size_t end = line.find(delimiter, i);
    if (end == std::string_view::npos) return false;
    i = end + 1;
  }
}

// The most a record of several lines may hold: a quote left open by mistake fails here rather
// than reading the rest of a large file into memory.
constexpr std::size_t kLongestRecord = std::size_t{16} << 20;

// Splits a line into its fields, as RFC 4180 (and pandas) write them: a field in double quotes
// may hold the delimiter and line breaks, and "" in it stands for one quote (those fields are
// unescaped into `unescaped`, which the views then point into); blanks around a field, and
// inside its quotes, are dropped. Without options.quotes a quote is a character like any other.
// Returns what is wrong with the line's quotes (kOpenQuote: a field still open), or nullptr.
const char* split(std::string_view line, const CsvOptions& options,
                  std::vector<std::string_view>& fields, std::deque<std::string>& unescaped) {
  const char delimiter = options.delimiter;
  fields.clear();
  unescaped.clear();
  std::size_t i = 0;
  for (;;) {
    while (i < line.size() && blank(line[i], delimiter)) ++i;
    if (i == line.size() || line[i] != '"' || !options.quotes) {
      const std::size_t end = line.find(delimiter, i);
      fields.push_back(trim(line.substr(i, end == std::string_view::npos ? end : end - i)));
      if (end == std::string_view::npos) return nullptr;
      i = end + 1;
      continue;
    }
    std::size_t close = i + 1;
    bool escaped = false;
    for (;; close += 2) {
      close = line.find('"', close);
      if (close == std::string_view::npos) return kOpenQuote;
      if (close + 1 == line.size() || line[close + 1] != '"') break;
      escaped = true;
    }
    std::string_view inside = line.substr(i + 1, close - i - 1);
    if (escaped) {
      std::string& text = unescaped.emplace_back();
      for (std::size_t k = 0; k < inside.size(); ++k)
        if (text.push_back(inside[k]); inside[k] == '"') ++k;  // "" is one quote
      inside = text;
    }
    fields.push_back(trim(inside));
    i = close + 1;
    while (i < line.size() && blank(line[i], delimiter)) ++i;
    if (i == line.size()) return nullptr;
    if (line[i] != delimiter) return "text after a field's closing quote";
    ++i;
  }
}

// Parses a whole field as a number: std::errc() when it is one, result_out_of_range when it is
// one outside T's range, else invalid_argument. Takes the '+' sign that from_chars does not.
template <typename T>
std::errc parse_number(std::string_view field, T& value) {
  if (field.size() > 1 && field[0] == '+' && field[1] != '-' && field[1] != '+')
    field.remove_prefix(1);
  const char* last = field.data() + field.size();
  const auto [end, error] = std::from_chars(field.data(), last, value);
  return end == last ? error : std::errc::invalid_argument;
}

class CsvReader {
 public:
  CsvReader(const std::string& path, const CsvOptions& options)
      : path_(path), options_(options) {}

  Dataset read() {
    if (options_.label_column.empty() && options_.target_columns.empty())
      throw InvalidArgument(path_ + ": load_csv needs a label_column or target_columns");
    if (!options_.label_column.empty() && !options_.target_columns.empty())
      throw InvalidArgument(path_ + ": load_csv takes a label_column or target_columns, not both");
    if (!options_.class_names.empty() && options_.num_classes != 0)
      throw InvalidArgument(path_ + ": load_csv takes class_names or num_classes, not both");
    const auto [kept, rows, largest] = read_rows();
    const auto nf = static_cast<std::int64_t>(feature_columns_.size());
    Tensor x({kept, nf}, features_);
    if (label_column_ < 0) {
      const auto nt = static_cast<std::int64_t>(target_columns_.size());
      return Dataset::from_arrays(std::move(x), Tensor({kept, nt}, targets_), path_);
    }
    const int num_classes = classes(rows, largest);
    return Dataset::from_arrays(std::move(x), std::move(labels_), num_classes, path_);
  }

  // The texts of options' one feature column, as they are, and the labels, of the rows kept
  // (load_text_csv's table); the number of classes.
  // Warnings are `warn`'s (every row is read, by every worker). Without a label column, no
  // labels and no classes (0).
  int read_texts(std::vector<std::string>& texts, std::vector<std::int32_t>& labels, bool warn) {
    if (options_.feature_columns.size() != 1)
      throw InvalidArgument(path_ + ": a table of texts has one text column");
    if (!options_.class_names.empty() && options_.num_classes != 0)
      throw InvalidArgument(path_ + ": class_names or num_classes, not both");
    texts_ = &texts;
    warn_ = warn;
    const auto [kept, rows, largest] = read_rows();
    if (label_column_ < 0) return 0;
    const int num_classes = classes(rows, largest);
    labels = std::move(labels_);
    return num_classes;
  }

  // The classes' names read() found, sorted (the given class_names, or none for a column of
  // class indices).
  const std::vector<std::string>& class_names() const { return class_names_; }

 private:
  // The number of classes of the labels read from `rows` rows, the largest label index
  // `largest`: given, or counted (names numbered in sorted order), and warned of where it looks
  // wrong.
  int classes(std::int64_t rows, std::int32_t largest) {
    int num_classes = options_.num_classes;
    if (num_classes == 0) num_classes = largest + 1;
    if (label_names_) {
      // Names found where indices were asked for (num_classes: a test file of a table whose
      // training file holds indices) would be numbered on their own, matched to nothing.
      if (options_.num_classes != 0 && options_.class_names.empty())
        fail(path_, "label column " + quote(options_.label_column) + " holds class names (" +
                        quote(name_ids_.begin()->first) + ", ...) where class indices below " +
                        std::to_string(options_.num_classes) + " were asked for (num_classes)");
      number_names();
      num_classes = static_cast<int>(class_names_.size());
    }
    if (!warn_) return num_classes;
    // More classes than rows, by far: most likely a column of values to predict (a price, an
    // id) taken for labels, which would make a model with that many outputs.
    if (options_.num_classes == 0 && options_.class_names.empty() && num_classes > 1000 && num_classes > rows)
      std::fprintf(stderr,
                   "[%s] warning: %s: label column %s counts %d classes (%s) for %lld rows: values "
                   "to predict are target_columns, not a label\n",
                   process_label().c_str(), path_.c_str(), quote(options_.label_column).c_str(),
                   num_classes, label_names_ ? "distinct names" : "its largest label + 1",
                   static_cast<long long>(rows));
    else if (options_.num_classes == 0 && !label_names_ && num_classes <= 1000)
      detail::warn_classes_without_examples(path_ + ": label column " + quote(options_.label_column), seen_);
    return num_classes;
  }

 public:
  // The feature columns alone (load_csv_features), or with a `take`, handed to it `batch` rows
  // at a time (for_each_csv_features_batch).
  Tensor read_features(std::int64_t batch = 0, const std::function<void(const Tensor&)>* take = nullptr) {
    if (!options_.label_column.empty() || !options_.target_columns.empty())
      throw InvalidArgument(path_ + ": load_csv_features reads features alone: no label_column or "
                            "target_columns (other columns are not read)");
    if (options_.feature_columns.empty())
      throw InvalidArgument(path_ + ": load_csv_features needs the feature_columns");
    if (take && batch < 1) throw InvalidArgument(path_ + ": a batch of " + std::to_string(batch) + " rows");
    batch_ = batch;
    take_ = take;
    const std::int64_t kept = std::get<0>(read_rows());
    if (take_) {
      hand_over();
      return {};
    }
    return Tensor({kept, static_cast<std::int64_t>(feature_columns_.size())}, features_);
  }

 private:
  // Reads every row, keeping the shard's values: {rows kept, rows in the file, largest label}.
  std::tuple<std::int64_t, std::int64_t, std::int32_t> read_rows() {
    if (options_.num_classes < 0)
      throw InvalidArgument(path_ + ": num_classes " + std::to_string(options_.num_classes));
    const ShardSpec shard = options_.shard;
    check_shard(shard, path_);
    if (options_.delimiter == '\n' || options_.delimiter == '\r' || options_.delimiter == '"')
      throw InvalidArgument(path_ + ": bad delimiter " +
                            quote_bytes(std::string_view(&options_.delimiter, 1)));

    LineReader lines(path_);
    std::string_view line;
    std::vector<std::string_view> fields;
    std::deque<std::string> unescaped;  // fields that held "" (the views point into it)
    std::string record;  // a record of several lines (the views point into it)
    std::int64_t line_number = 0;
    std::int64_t first_line = 0;  // the line that set the field count
    std::int64_t rows = 0;     // data rows in the file
    std::int64_t kept = 0;     // of them, the shard's
    std::int32_t largest = 0;  // label, of every row
    bool resolved = false;
    while (lines.next(line)) {
      if (++line_number == 1 && line.starts_with("\xef\xbb\xbf"))
        line.remove_prefix(3);  // a UTF-8 byte order mark
      if (line_number == 1 && (line.starts_with("\xff\xfe") || line.starts_with("\xfe\xff")))
        fail(path_, "UTF-16 text (its byte-order mark says so): save it as UTF-8");
      if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
      const std::int64_t at = line_number;  // the record's first line, which messages name
      const char* wrong = split(line, options_, fields, unescaped);
      if (wrong == kOpenQuote) {
        // A quoted field that holds line breaks: the record goes on over the next lines, and is
        // split again once one of them leaves no field open.
        record.assign(line);
        for (std::string_view more; wrong == kOpenQuote;) {
          if (!lines.next(more))
            fail(path_, "line " + std::to_string(at) + ": a quoted field does not end before the file does");
          ++line_number;
          if (record.ends_with('\r')) record.pop_back();  // CRLF: the break is one '\n'
          record += '\n';
          record += more;
          if (record.size() > kLongestRecord)
            fail(path_, "line " + std::to_string(at) + ": a quoted field runs on over " +
                            std::to_string(line_number - at) + " lines (" +
                            std::to_string(kLongestRecord >> 20) +
                            " MiB): a stray quote? (quotes = false reads quotes as characters)");
          if (!still_open(more, options_.delimiter)) wrong = split(record, options_, fields, unescaped);
        }
        line = record;
        if (wrong) fail(path_, "lines " + std::to_string(at) + "-" + std::to_string(line_number) + ": " + wrong);
      }
      if (wrong) fail(path_, "line " + std::to_string(at) + ": " + wrong);
      if (!resolved) {
        first_line = at;
        columns_ = static_cast<int>(fields.size());
        if (options_.header) {
          names_.assign(fields.begin(), fields.end());
          check_header(at);
        }
        resolve();
        resolved = true;
        if (options_.header) continue;
      }
      if (static_cast<int>(fields.size()) != columns_)
        fail(path_, "line " + std::to_string(at) + " has " +
                        std::to_string(fields.size()) + " fields, expected " +
                        std::to_string(columns_) + " (as line " + std::to_string(first_line) +
                        ")");
      // Every row is checked, so that every shard of a bad file fails alike, and every label
      // counts towards num_classes; the shard's rows alone are kept.
      // The first row's label says how the column holds classes: by index, or by name.
      if (rows == 0 && label_column_ >= 0) start_labels(fields);
      if (rows++ % shard.count != shard.index) {
        if (!texts_)
          for (int c : feature_columns_) number(fields, c, at);
        for (int c : target_columns_) number(fields, c, at);
        if (label_column_ >= 0) largest = std::max(largest, label(fields, at));
        continue;
      }
      if (texts_)
        texts_->emplace_back(fields[static_cast<std::size_t>(feature_columns_.front())]);
      else
        for (int c : feature_columns_) features_.push_back(number(fields, c, at));
      for (int c : target_columns_) targets_.push_back(number(fields, c, at));
      if (label_column_ >= 0)
        largest = std::max(largest, labels_.emplace_back(label(fields, at)));
      ++kept;
      if (take_ && kept % batch_ == 0) hand_over();
    }
    if (!resolved) fail(path_, "empty file: no rows");
    if (rows == 0) fail(path_, "no data rows, only a header");
    return {kept, rows, largest};
  }

 public:
  // The feature columns read() used, by name (by index without a header).
  std::vector<std::string> feature_names() const {
    std::vector<std::string> out;
    for (int c : feature_columns_)
      out.push_back(names_.empty() ? std::to_string(c) : names_[static_cast<std::size_t>(c)]);
    return out;
  }

 private:
  // The rows of features_ to take_, then none held.
  void hand_over() {
    if (features_.empty()) return;
    const auto nf = static_cast<std::int64_t>(feature_columns_.size());
    (*take_)(Tensor({static_cast<std::int64_t>(features_.size()) / nf, nf}, features_));
    features_.clear();
  }

  // "column 3 ('price')", or "column 3" without a header.
  std::string column_name(int c) const {
    std::string out = "column " + std::to_string(c);
    if (!names_.empty()) out += " (" + quote(names_[static_cast<std::size_t>(c)]) + ")";
    return out;
  }

  [[noreturn]] void field_error(std::int64_t line, int c, const std::string& fault) const {
    fail(path_, "line " + std::to_string(line) + ", " + column_name(c) + ": " + fault);
  }

  float number(const std::vector<std::string_view>& fields, int c, std::int64_t line) const {
    const std::string_view field = fields[static_cast<std::size_t>(c)];
    if (field.empty()) field_error(line, c, "empty field, expected a number");
    float value = 0;
    const std::errc error = parse_number(field, value);
    if (error == std::errc()) {
      if (!std::isfinite(value))
        field_error(line, c, quote(field) + " is not a finite number (a missing value?)");
      return value;
    }
    if (error == std::errc::invalid_argument)
      field_error(line, c, quote(field) + " is not a number");
    // from_chars<float> may call a value below float's smallest normal out of range; it is not.
    double wide = 0;
    if (parse_number(field, wide) == std::errc() &&
        std::fabs(wide) <= std::numeric_limits<float>::max())
      return static_cast<float>(wide);
    field_error(line, c, quote(field) + " is out of range for float32");
  }

  // Class names, given (a second file of the table) or where the first row's label is not a
  // number: every label is then a name ("setosa"; "1" too).
  void start_labels(const std::vector<std::string_view>& fields) {
    double value = 0;
    const std::string_view first = fields[static_cast<std::size_t>(label_column_)];
    label_names_ = !options_.class_names.empty() ||
                   (!first.empty() && parse_number(first, value) == std::errc::invalid_argument);
    if (!options_.class_names.empty()) {
      class_names_ = options_.class_names;
      for (std::size_t i = 0; i < class_names_.size(); ++i)
        if (!name_ids_.emplace(class_names_[i], static_cast<std::int32_t>(i)).second)
          throw InvalidArgument(path_ + ": class_names holds " + quote(class_names_[i]) + " twice");
    }
  }

  // Ids in the order the names came (given names: their index), then sorted.
  std::int32_t name_id(std::string_view field, std::int64_t line) {
    if (field.empty()) field_error(line, label_column_, "empty label, expected a class name");
    if (const auto found = name_ids_.find(field); found != name_ids_.end()) return found->second;
    if (!options_.class_names.empty())
      field_error(line, label_column_, "label " + quote(field) + " is not one of the " +
                                           std::to_string(class_names_.size()) +
                                           " classes (class_names; the training file's)");
    const auto id = static_cast<std::int32_t>(name_ids_.size());
    name_ids_.emplace(std::string(field), id);
    return id;
  }

  // Found names: numbered in sorted order (Keras's StringLookup and scikit-learn's LabelEncoder
  // number them so), which every worker's shard agrees on, since every row's label is read.
  void number_names() {
    if (!options_.class_names.empty()) return;
    std::vector<std::int32_t> sorted(name_ids_.size());
    for (const auto& [name, id] : name_ids_) {  // std::map: in sorted order
      sorted[static_cast<std::size_t>(id)] = static_cast<std::int32_t>(class_names_.size());
      class_names_.push_back(name);
    }
    for (std::int32_t& label : labels_) label = sorted[static_cast<std::size_t>(label)];
  }

  std::int32_t label(const std::vector<std::string_view>& fields, std::int64_t line) {
    const int c = label_column_;
    const std::string_view field = fields[static_cast<std::size_t>(c)];
    if (label_names_) return name_id(field, line);
    if (field.empty()) field_error(line, c, "empty label, expected a class index");
    double value = 0;
    const std::errc parsed = parse_number(field, value);
    if (parsed == std::errc::invalid_argument)
      field_error(line, c, "label " + quote(field) + " is a name, where the first row's is a class "
                           "index (a column of class names must start with a name)");
    if (parsed != std::errc()) field_error(line, c, "label " + quote(field) + " is not an integer");
    // "3.0" is a label too: pandas writes an integer column that way once it held a NaN.
    if (!std::isfinite(value) || value != std::floor(value))
      field_error(line, c, "label " + quote(field) + " is not an integer");
    if (value < 0) field_error(line, c, "label " + std::string(field) + " is negative");
    const int num_classes = options_.num_classes;
    const double limit = num_classes > 0 ? num_classes : std::numeric_limits<std::int32_t>::max();
    if (value >= limit)
      field_error(line, c, "label " + std::string(field) +
                               (num_classes > 0
                                    ? " is outside [0, " + std::to_string(num_classes) + ")"
                                    : " is too large"));
    // The classes labelled, for a warning of those counted without an example (below 2^16: a
    // column of more is warned of as values to predict).
    if (value < 65536) {
      if (value >= static_cast<double>(seen_.size())) seen_.resize(static_cast<std::size_t>(value) + 1);
      seen_[static_cast<std::size_t>(value)] = true;
    }
    return static_cast<std::int32_t>(value);
  }

  // "'a', 'b', 'c'" or "0 to 4 (no header)".
  std::string present() const {
    if (names_.empty()) return "0 to " + std::to_string(columns_ - 1) + " (no header)";
    std::string out;
    for (std::size_t i = 0; i < names_.size(); ++i) {
      if (i == 32) return out + ", ... (" + std::to_string(names_.size()) + " in all)";
      out += (i == 0 ? "" : ", ") + quote(names_[i]);
    }
    return out;
  }

  // A first row of numbers only may be data read as a header (a file without one), its row lost:
  // said on stderr, unless they are the columns' own indices, as pandas names unnamed columns.
  // (Numbers can be names too: wavelengths, years.)
  void check_header(std::int64_t line) const {
    bool indices = true;
    for (std::size_t c = 0; c < names_.size(); ++c) {
      double value = 0;
      if (names_[c].empty() || parse_number(std::string_view(names_[c]), value) != std::errc())
        return;
      indices = indices && names_[c] == std::to_string(c);
    }
    if (!indices)
      std::fprintf(stderr,
                   "[%s] warning: %s: line %lld, read as the header, holds numbers only; if the "
                   "file has no header, read it with header = false, or its first row is lost\n",
                   process_label().c_str(), path_.c_str(), static_cast<long long>(line));
  }

  // The column's index as `column` spells it, or -1.
  int index_of(const std::string& column) const {
    int index = -1;
    const auto [end, error] = std::from_chars(column.data(), column.data() + column.size(), index);
    if (error == std::errc() && end == column.data() + column.size() && index >= 0 &&
        index < columns_)
      return index;
    return -1;
  }

  int find(const std::string& column) const {
    const int index = index_of(column);
    const auto named = std::find(names_.begin(), names_.end(), column);
    if (named != names_.end()) {
      const int at = static_cast<int>(named - names_.begin());
      // A name the header gives twice would pick one of its columns unseen.
      const auto again = std::find(named + 1, names_.end(), column);
      if (again != names_.end())
        fail(path_, "the header names column " + std::to_string(at) + " and column " +
                        std::to_string(again - names_.begin()) + " both " + quote(column));
      if (index >= 0 && index != at)
        throw InvalidArgument(path_ + ": column " + quote(column) + " is ambiguous: the header " +
                              "names column " + std::to_string(at) + " so, and it is also the " +
                              "index of " + column_name(index));
      return at;
    }
    if (index >= 0) return index;
    throw InvalidArgument(path_ + ": no column " + quote(column) + " (columns: " + present() + ")");
  }

  void resolve() {
    if (!options_.feature_columns.empty() && !options_.ignore_columns.empty())
      throw InvalidArgument(path_ + ": give feature_columns or ignore_columns, not both");
    // Each column has one role: a label among the features would be learned from itself.
    std::map<int, std::string> used;  // column -> its role
    const auto take = [&](const std::string& column, const std::string& role) {
      const int index = find(column);
      if (const auto [at, fresh] = used.emplace(index, role);
          !fresh && !(options_.targets_as_features && at->second == "a target" && role == "a feature"))
        throw InvalidArgument(path_ + ": column " + quote(column) + " is given as " + at->second +
                              " and as " + role);
      return index;
    };
    if (!options_.label_column.empty()) label_column_ = take(options_.label_column, "the label");
    for (const std::string& column : options_.target_columns)
      target_columns_.push_back(take(column, "a target"));
    for (const std::string& column : options_.feature_columns)
      feature_columns_.push_back(take(column, "a feature"));
    for (const std::string& column : options_.ignore_columns) take(column, "ignored");
    if (options_.feature_columns.empty())
      for (int c = 0; c < columns_; ++c)
        if (!used.contains(c)) feature_columns_.push_back(c);
    if (feature_columns_.empty() && options_.targets_as_features) feature_columns_ = target_columns_;
    if (feature_columns_.empty())
      fail(path_, "no feature columns: all " + std::to_string(columns_) + " columns are the label" +
                      (options_.ignore_columns.empty() ? " or targets" : ", targets or ignored"));
    check_feature_names();
  }

  // Under a header, a feature is known by its name (a test file's columns are found by it): a
  // column without one taken as a feature by default, such as the row index pandas writes first
  // unless told index=False, would be learned from unseen (row numbers, in the order written).
  void check_feature_names() const {
    if (names_.empty() || !options_.feature_columns.empty()) return;  // chosen, not taken by default
    for (const int c : feature_columns_)
      if (names_[static_cast<std::size_t>(c)].find_first_not_of(" \t") == std::string::npos)
        fail(path_, "column " + std::to_string(c) + " has no name in the header" +
                        (c == 0 ? " (the row index pandas writes unless to_csv is given index=False?)"
                                : "") +
                        ": name it, or leave it out with ignore_columns (\"" + std::to_string(c) +
                        "\")");
  }

  const std::string& path_;
  const CsvOptions& options_;
  int columns_ = 0;
  std::vector<std::string> names_;  // from the header, else empty
  int label_column_ = -1;
  std::vector<int> target_columns_;
  std::vector<int> feature_columns_;
  std::vector<float> features_;  // of the rows kept (with a take_, those not yet handed over)
  std::vector<std::string>* texts_ = nullptr;  // read_texts(): the text column's, for features_
  bool warn_ = options_.shard.index == 0;      // of the classes (one worker does)
  std::int64_t batch_ = 0;       // rows a take_ gets at a time
  const std::function<void(const Tensor&)>* take_ = nullptr;
  std::vector<float> targets_;
  std::vector<std::int32_t> labels_;
  std::vector<bool> seen_;  // the class indices labelled, of every row (below 2^16)
  bool label_names_ = false;  // the label column holds class names
  std::map<std::string, std::int32_t, std::less<>> name_ids_;
  std::vector<std::string> class_names_;
};

}  // namespace

Dataset load_csv(const std::string& path, const CsvOptions& options,
                 std::vector<std::string>* feature_columns, std::vector<std::string>* class_names) {
  CsvReader reader(path, options);
  Dataset data = reader.read();
  if (feature_columns) *feature_columns = reader.feature_names();
  if (class_names) *class_names = reader.class_names();
  return data;
}

int detail::read_csv_texts(const std::string& path, const CsvOptions& options,
                           std::vector<std::string>& texts, std::vector<std::int32_t>& labels,
                           std::vector<std::string>& class_names, bool warn) {
  CsvReader reader(path, options);
  const int num_classes = reader.read_texts(texts, labels, warn);
  class_names = reader.class_names();
  return num_classes;
}

std::string csv_field(std::string_view text) {
  if (text.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(text);
  std::string quoted = "\"";
  for (const char c : text) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + '"';
}

std::string csv_row(const std::vector<std::string>& fields) {
  std::string row;
  for (std::size_t i = 0; i < fields.size(); ++i) row += (i == 0 ? "" : ",") + csv_field(fields[i]);
  return row;
}

Tensor load_csv_features(const std::string& path, const CsvOptions& options) {
  return CsvReader(path, options).read_features();
}

void for_each_csv_features_batch(const std::string& path, const CsvOptions& options, std::int64_t batch_size,
                                 const std::function<void(const Tensor&)>& take) {
  CsvReader(path, options).read_features(batch_size, &take);
}

}  // namespace cohort::data
