#pragma once
// File reading the data loaders share (internal to core/nn/data): every fault is a DataError
// naming the file.

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cohort/core/nn/data/dataset.h"

namespace cohort::data {
struct CsvOptions;
}  // namespace cohort::data

namespace cohort::data::detail {

/// Throws DataError("<where>: <fault>").
[[noreturn]] void fail(const std::string& where, const std::string& fault);
/// Throws DataError("<where>: <what>: <strerror(err)>"): an input fault (kInputStatus) for a file
/// that is not there or may not be read (ENOENT, ENOTDIR, EACCES, EISDIR), else a fault of the
/// system that may pass (kFaultStatus: EIO, ESTALE, a full disk).
[[noreturn]] void fail_io(const std::string& where, const std::string& what, int err);

/// Throws InvalidArgument("<where>: shard index I of count C (...)") unless 0 <= index < count.
void check_shard(ShardSpec shard, const std::string& where);

/// The size of the regular file `path`; a DataError saying why when it is missing, a directory
/// or unreadable. `what` names the format expected, for the message.
std::uint64_t file_size(const std::string& path, const char* what);

/// The machine's physical memory in bytes (the most any array read into memory can take; the
/// largest uint64 where it is unknown).
std::uint64_t physical_memory();

/// After a loader counted the classes as the largest label + 1 (seen.size()): a warning on
/// stderr, naming `where`, of the classes no label names (`seen[c]` false), if any. A mistyped
/// label, a 7 among 0s and 1s, otherwise makes 8 classes, 6 of which no example trains.
void warn_classes_without_examples(const std::string& where, const std::vector<bool>& seen);

std::ifstream open_file(const std::string& path);

/// The rows of a CSV file of texts (load_text_csv): the text of options' one feature column and
/// the label of each row the shard keeps, in `texts` and `labels`; returns the number of classes,
/// and their names in `class_names` where the labels are names (empty for indices). Warnings of
/// the classes where `warn`.
int read_csv_texts(const std::string& path, const CsvOptions& options, std::vector<std::string>& texts,
                   std::vector<std::int32_t>& labels, std::vector<std::string>& class_names, bool warn);

/// Reads exactly `n` bytes; anything less is a fault (the file changed, or a read error).
void read_exactly(std::ifstream& in, char* out, std::uint64_t n, const std::string& path);

std::string read_whole_file(const std::string& path, const char* what);

/// A file read through zlib's gz* interface: gzread inflates a gzip stream and passes any other
/// file through unchanged, told apart by the gzip magic bytes, so a file's name plays no part.
/// Every fault is a DataError naming the file.
class GzReader {
 public:
  /// kDetect: gzip or plain by the magic bytes; kNone: plain whatever the first bytes are (a
  /// format whose own first bytes may look like gzip's); kZlib: one zlib stream (RFC 1950, what
  /// TensorFlow's "ZLIB" compression writes), which has no magic bytes of its own.
  enum class Compression { kDetect, kNone, kZlib };

  /// Opens `path` (missing, a directory or unreadable: a DataError saying so; `what` names the
  /// format expected, e.g. "an IDX file").
  GzReader(const std::string& path, const char* what, Compression compression = Compression::kDetect);
  ~GzReader();
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;

  /// Reads up to `n` bytes; fewer only at the end of the data. A compressed stream that stops
  /// mid-way reads as an early end (stream_cut() then says so); corrupt compressed data throws.
  std::int64_t read(void* buffer, std::int64_t n);

  const std::string& path() const { return path_; }
  /// The file is gzip-compressed (or, with kZlib, zlib-compressed).
  bool gzip() const { return gzip_; }
  /// "gzip" or "zlib", for messages.
  const char* compression() const;
  /// The last read ended early because the compressed stream stops mid-way.
  bool stream_cut() const { return stream_cut_; }
  /// " (after gunzip)" for a gzip file, "" otherwise: for messages about sizes.
  const char* decompressed() const { return gzip_ ? " (after gunzip)" : ""; }

 private:
  struct File;
  std::string path_;
  std::unique_ptr<File> file_;
  bool gzip_ = false;
  bool stream_cut_ = false;
};

}  // namespace cohort::data::detail
