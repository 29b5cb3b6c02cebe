#pragma once
// Training summaries: scalar values written as a TensorBoard event file and as a CSV, side by side,
// and histograms of tensors (the variables) in the event file.
//
// The event file holds TFRecord records (uint64 length, masked CRC32C of the length, the data,
// masked CRC32C of the data; little-endian), each an `Event` protobuf message. The messages are
// encoded by hand in summary_writer.cc: they need five field kinds (a double, a varint, a float,
// packed doubles and length-delimited strings), about 150 lines of code, while protoc and libprotobuf
// would add a code generator, a generated .proto copy and a runtime library to every build for
// that. The CRC32C is core/base/crc32c.h (Boost.CRC). docs/SUMMARIES.md describes both formats.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cohort {

/// Writes scalar summaries for TensorBoard and a CSV of the same values into `logdir`:
///  - `events.out.tfevents.<unix seconds>.<hostname>`: a new file per writer (a suffix `.1`, `.2`,
///    ... keeps two writers started in the same second apart). Its first record is the Event with
///    file_version "brain.Event:2"; TensorBoard merges all event files of a directory. A job
///    restarted from a checkpoint adds one, which starts with add_session_start(): TensorBoard
///    then drops the points the earlier run wrote from that step on (the run that died after its
///    last checkpoint), as it does for TensorFlow's.
///  - `metrics.csv`: one row per value, columns `step,wall_time,tag,value`. The file is appended
///    to, so a restarted job continues it; the header is written only when the file is created.
///    A reader keeps, per tag, only the latest run's rows from where the steps go back
///    (scripts/plot_metrics.py does).
///
/// A directory has one writer at a time: the writer holds a lock on its metrics.csv (flock, as
/// the checkpoint directory's) until it is destroyed, and a second one, in this process or
/// another, waits for it a while (a job killed a moment before) and then throws Error naming
/// the directory. Where the file system takes no lock, nothing keeps two writers apart.
///
/// Each add_scalar() / add_scalars() call becomes one Event (one Summary holding its values) and
/// as many CSV rows. Writes are buffered; flush() hands them to the OS, the destructor flushes too.
/// Not thread-safe: use one writer from one thread (the chief's session) or lock around it.
/// Move-only; a moved-from writer may only be destroyed or assigned to.
///
///     cohort::SummaryWriter summaries("logs");
///     summaries.add_scalars({{"loss", loss}, {"accuracy", accuracy}}, step);
class SummaryWriter {
 public:
  /// Creates `logdir` (and its parents) if needed and opens both files. Throws Error naming the
  /// path when the directory or a file cannot be created or opened, or when another writer
  /// holds the directory `patience` after it started waiting for it.
  explicit SummaryWriter(const std::string& logdir,
                         std::chrono::seconds patience = std::chrono::seconds(20));

  /// Records `value` under `tag` at `step`. TensorBoard stores it as a float (the CSV keeps the
  /// full double). Throws InvalidArgument for an empty tag, Error when a write fails.
  void add_scalar(const std::string& tag, double value, std::int64_t step);

  /// Records several values at one step, as one Event. Same checks as add_scalar(); nothing is
  /// written when a tag is invalid.
  void add_scalars(const std::vector<std::pair<std::string, double>>& values, std::int64_t step);

  /// Records the distribution of `values` under `tag` at `step`, as TensorFlow's
  /// tf.summary.histogram does, for TensorBoard's Histograms and Distributions tabs: a
  /// HistogramProto with the count, min, max, sum and sum of squares, and the counts in
  /// TensorFlow's default buckets (edges at 0 and at +-1e-12 * 1.1^k up to +-1e20; a bucket holds
  /// the values from the edge below it up to, not including, its own), empty ones merged as
  /// TensorFlow writes them. Not in the CSV. Throws InvalidArgument for a bad tag (as
  /// add_scalar()) and, naming the tag, for a NaN or infinite value (TensorFlow's "Nan in summary
  /// histogram"); nothing is written then.
  void add_histogram(const std::string& tag, std::span<const float> values, std::int64_t step);

  /// Several histograms at one step, as one Event. Same checks as add_histogram().
  void add_histograms(const std::vector<std::pair<std::string, std::span<const float>>>& histograms,
                      std::int64_t step);

  /// Records that a session starts at `step` (an Event with SessionLog START, as TensorFlow's
  /// summary hook writes at its first step): TensorBoard forgets every point at `step` or later
  /// from the files before it. Not in the CSV.
  void add_session_start(std::int64_t step);

  /// Hands buffered records to the OS (fflush; no fsync). Throws Error naming the file on failure.
  void flush();

  /// Flushes and closes both files; errors are swallowed here, so call flush() first to see them.
  ~SummaryWriter();

  SummaryWriter(SummaryWriter&&) noexcept = default;
  SummaryWriter& operator=(SummaryWriter&&) noexcept = default;
  SummaryWriter(const SummaryWriter&) = delete;
  SummaryWriter& operator=(const SummaryWriter&) = delete;

  const std::string& logdir() const { return logdir_; }
  /// Path of this writer's event file.
  const std::string& event_file() const { return event_file_; }
  /// Path of metrics.csv.
  const std::string& csv_file() const { return csv_file_; }

 private:
  struct FileCloser {
    void operator()(std::FILE* file) const noexcept;
  };
  using File = std::unique_ptr<std::FILE, FileCloser>;

  void write_record(std::string_view data);

  std::string logdir_;
  std::string event_file_;
  std::string csv_file_;
  std::shared_ptr<const void> held_;  // metrics.csv among those this process's writers hold
  File events_;
  File csv_;
};

namespace summary {

/// CRC32C (Castagnoli) of `data`, as TFRecord uses it. Pure; thread-safe.
std::uint32_t crc32c(std::string_view data);

/// TFRecord's masked CRC: ((crc >> 15) | (crc << 17)) + 0xa282ead8, so that a CRC stored in the
/// data it covers does not checksum to a fixed value. Pure; thread-safe.
std::uint32_t masked_crc32c(std::string_view data);

/// The right edges of TensorFlow's default histogram buckets, ascending: -DBL_MAX, -1e20 ... -1e-12
/// (ratio 1.1), 0, 1e-12 ... 1e20, DBL_MAX (1551 edges). Bucket i holds [edge i-1, edge i).
const std::vector<double>& default_histogram_edges();

}  // namespace summary
}  // namespace cohort
