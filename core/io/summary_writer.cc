// SummaryWriter: TFRecord framing and hand-encoded Event/Summary protobuf messages, plus the CSV.

#include "cohort/core/io/summary_writer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>
#include <set>
#include <span>
#include <system_error>
#include <tuple>

#include <nlohmann/json.hpp>

#include "cohort/core/base/crc32c.h"
#include "cohort/core/base/error.h"
#include "cohort/core/io/file.h"
#include "cohort/core/nn/data/loaders.h"

namespace cohort {
namespace summary {

std::uint32_t crc32c(std::string_view data) { return cohort::crc32c(std::as_bytes(std::span(data))); }

std::uint32_t masked_crc32c(std::string_view data) {
  return cohort::masked_crc32c(std::as_bytes(std::span(data)));
}

const std::vector<double>& default_histogram_edges() {
  static const std::vector<double> edges = [] {
    // Grown by repeated multiplication, as TensorFlow grows them, so the edges agree to the bit.
    std::vector<double> positive;
    for (double v = 1e-12; v < 1e20; v *= 1.1) positive.push_back(v);
    positive.push_back(std::numeric_limits<double>::max());
    std::vector<double> all;
    for (auto it = positive.rbegin(); it != positive.rend(); ++it) all.push_back(-*it);
    all.push_back(0.0);
    all.insert(all.end(), positive.begin(), positive.end());
    return all;
  }();
  return edges;
}

}  // namespace summary

namespace {

// Protobuf wire format, only what tensorflow/core/util/event.proto and summary.proto need for
// scalars and histograms. Field numbers: Event{wall_time=1 double, step=2 int64, file_version=3
// string, summary=5 Summary, session_log=7 SessionLog}; Summary{value=1 repeated Value};
// Value{tag=1 string, simple_value=2 float, histo=5 HistogramProto}; HistogramProto{min=1,
// max=2, num=3, sum=4, sum_squares=5 double, bucket_limit=6, bucket=7 repeated double (packed)};
// SessionLog{status=1 enum, START = 1}.
enum WireType : std::uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_key(std::string& out, std::uint32_t field, WireType type) {
  put_varint(out, (static_cast<std::uint64_t>(field) << 3) | type);
}

// Little-endian whatever the host, as both protobuf's fixed fields and TFRecord want.
template <typename U>
void put_le(std::string& out, U v) {
  for (std::size_t i = 0; i < sizeof(U); ++i) out.push_back(static_cast<char>(v >> (8 * i) & 0xff));
}

void put_bytes(std::string& out, std::uint32_t field, std::string_view bytes) {
  put_key(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out.append(bytes);
}

// A proto3 double field, left out when it is +0.0 (the default), as libprotobuf does.
void put_double(std::string& out, std::uint32_t field, double v) {
  if (std::bit_cast<std::uint64_t>(v) == 0) return;
  put_key(out, field, kFixed64);
  put_le(out, std::bit_cast<std::uint64_t>(v));
}

void put_packed_doubles(std::string& out, std::uint32_t field, const std::vector<double>& values) {
  if (values.empty()) return;
  put_key(out, field, kLengthDelimited);
  put_varint(out, values.size() * sizeof(double));
  for (double v : values) put_le(out, std::bit_cast<std::uint64_t>(v));
}

std::string wall_time_field(double wall_time) {
  std::string event;
  put_key(event, 1, kFixed64);
  put_le(event, std::bit_cast<std::uint64_t>(wall_time));
  return event;
}

// The first record of every event file, as TensorFlow writes it: wall time and version, no step.
std::string version_event(double wall_time) {
  std::string event = wall_time_field(wall_time);
  put_bytes(event, 3, "brain.Event:2");
  return event;
}

// As protobuf does: a zero step (the default) is left out, a negative one is sign-extended to
// ten bytes. The bytes then match libprotobuf's own encoding of the same message.
void put_step(std::string& event, std::int64_t step) {
  if (step == 0) return;
  put_key(event, 2, kVarint);
  put_varint(event, static_cast<std::uint64_t>(step));
}

std::string session_start_event(double wall_time, std::int64_t step) {
  std::string event = wall_time_field(wall_time);
  put_step(event, step);
  std::string session_log;
  put_key(session_log, 1, kVarint);
  put_varint(session_log, 1);  // SessionLog.START
  put_bytes(event, 7, session_log);
  return event;
}

std::string scalar_event(const std::vector<std::pair<std::string, double>>& values,
                         double wall_time, std::int64_t step) {
  std::string summary;
  for (const auto& [tag, value] : values) {
    std::string entry;
    put_bytes(entry, 1, tag);
    put_key(entry, 2, kFixed32);
    put_le(entry, std::bit_cast<std::uint32_t>(static_cast<float>(value)));
    put_bytes(summary, 1, entry);
  }
  std::string event = wall_time_field(wall_time);
  put_step(event, step);
  put_bytes(event, 5, summary);
  return event;
}

// The bucket of `v` among the default edges: the first edge above it (std::upper_bound's
// answer). log2 |v| from the binary exponent, the mantissa's log taken as linear (low by at most
// 0.09, under one bucket's 0.1375), gives a place at most a few edges below the answer; branch-free
// steps up then reach it exactly. About four times faster than a binary search over the 1551
// edges, whose branches the values' randomness mispredicts (2 against 8 ms for 235k here).
std::size_t default_bucket(double v, const std::vector<double>& edges) {
  const auto last = static_cast<std::ptrdiff_t>(edges.size()) - 1;
  const std::ptrdiff_t zero = last / 2;  // edges[zero] == 0; +-1e-12 * 1.1^j at zero +- (1 + j)
  constexpr double kMinusLog2Of1e12 = 39.86313713864835;
  constexpr double kLog2Of1_1 = 0.13750352374993502;
  std::ptrdiff_t at = zero - 1;  // below the answer for |v| < 1e-12 (zero or zero + 1)
  if (const double magnitude = std::abs(v); magnitude >= 1e-12) {
    // A normal double: 2^(e - 1023) * (1 + f / 2^52), log2 taken as (e - 1023) + f / 2^52.
    const auto bits = std::bit_cast<std::uint64_t>(magnitude);
    const double log2 = static_cast<double>(static_cast<int>(bits >> 52) - 1023) +
                        static_cast<double>(bits & ((std::uint64_t{1} << 52) - 1)) * 0x1p-52;
    // j: about floor(log_1.1(|v| / 1e-12)), at most one low (or, by rounding, one high).
    const auto j = static_cast<std::ptrdiff_t>((log2 + kMinusLog2Of1e12) / kLog2Of1_1);
    at = std::clamp<std::ptrdiff_t>(v > 0 ? zero + j - 1 : zero - j - 4, 0, last);
  }
  // The answer is at most five edges up; an edge above v stops the steps (the last is DBL_MAX).
  for (int step = 0; step < 5; ++step) at += edges[static_cast<std::size_t>(at)] <= v;
  return static_cast<std::size_t>(at);
}

// A HistogramProto of `values` (all finite) over the default buckets. As TensorFlow writes it:
// each run of empty buckets becomes one, with the run's last edge, and an empty tensor has min
// DBL_MAX, max -DBL_MAX and the one bucket (DBL_MAX, 0).
std::string histogram_proto(std::span<const float> values) {
  const std::vector<double>& edges = summary::default_histogram_edges();
  std::vector<double> counts(edges.size());
  double min = std::numeric_limits<double>::max(), max = -min, sum = 0, sum_squares = 0;
  for (const float f : values) {
    const double v = f;
    min = std::min(min, v);
    max = std::max(max, v);
    sum += v;
    sum_squares += v * v;
    counts[default_bucket(v, edges)] += 1;
  }
  std::vector<double> limits, buckets;
  for (std::size_t i = 0; i < counts.size();) {
    std::size_t j = i;
    if (counts[i] == 0)
      while (j + 1 < counts.size() && counts[j + 1] == 0) ++j;
    limits.push_back(edges[j]);
    buckets.push_back(counts[j]);
    i = j + 1;
  }
  std::string histo;
  put_double(histo, 1, min);
  put_double(histo, 2, max);
  put_double(histo, 3, static_cast<double>(values.size()));
  put_double(histo, 4, sum);
  put_double(histo, 5, sum_squares);
  put_packed_doubles(histo, 6, limits);
  put_packed_doubles(histo, 7, buckets);
  return histo;
}

std::string histogram_event(
    const std::vector<std::pair<std::string, std::span<const float>>>& histograms,
    double wall_time, std::int64_t step) {
  std::string summary;
  for (const auto& [tag, values] : histograms) {
    std::string entry;
    put_bytes(entry, 1, tag);
    put_bytes(entry, 5, histogram_proto(values));
    put_bytes(summary, 1, entry);
  }
  std::string event = wall_time_field(wall_time);
  put_step(event, step);
  put_bytes(event, 5, summary);
  return event;
}

// The metrics.csv files (device, inode) this process's writers hold, and the process: a child
// made by fork() inherits the list, but a writer of its own is another process's.
using HeldFile = std::tuple<dev_t, ino_t, pid_t>;
std::mutex held_mutex;
std::set<HeldFile> held_files;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void write_all(std::FILE* file, const std::string& path, std::string_view bytes) {
  if (std::fwrite(bytes.data(), 1, bytes.size(), file) != bytes.size())
    throw Error("cannot write " + path + ": " + std::strerror(errno));
}

std::string hostname() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

// Shortest text that reads back to the same double ("nan", "inf" for the non-finite ones, which
// Python's float() and strtod both accept).
std::string shortest(double v) {
  char text[32];
  const auto result = std::to_chars(text, text + sizeof text, v);
  return std::string(text, result.ptr);
}

// A tag is a protobuf string, which TensorBoard's reader refuses unless it is UTF-8.
void check_tag(const std::string& tag, std::int64_t step) {
  if (tag.empty()) throw InvalidArgument("summary tag is empty (step " + std::to_string(step) + ")");
  try {
    (void)nlohmann::json(tag).dump();
  } catch (const nlohmann::json::type_error&) {
    throw InvalidArgument("summary tag " +
                          nlohmann::json(tag).dump(-1, ' ', true,
                                                   nlohmann::json::error_handler_t::replace) +
                          " is not valid UTF-8 (step " + std::to_string(step) + ")");
  }
}

}  // namespace

void SummaryWriter::FileCloser::operator()(std::FILE* file) const noexcept { std::fclose(file); }

SummaryWriter::SummaryWriter(const std::string& logdir, std::chrono::seconds patience)
    : logdir_(logdir) {
  if (logdir.empty()) throw InvalidArgument("summary logdir is empty");
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(logdir, ec) && !fs::is_directory(logdir, ec))
    throw Error("summary logdir " + logdir + " exists but is not a directory");
  fs::create_directories(logdir, ec);
  if (ec) throw Error("cannot create summary logdir " + logdir + ": " + ec.message());

  // The CSV first: a directory where it cannot be opened is left without an empty event file.
  csv_file_ = (fs::path(logdir) / "metrics.csv").string();
  // "e": close-on-exec, so that a program the process runs does not hold the lock below.
  csv_.reset(std::fopen(csv_file_.c_str(), "abe"));
  if (!csv_) throw Error("summaries: cannot open " + csv_file_ + ": " + std::strerror(errno));
  // One writer a directory: two would cut each other's CSV rows (and mix their curves). One of
  // this process is not waited for (nothing here will let it go), another's is (a job killed a
  // moment before).
  struct stat file{};
  if (::fstat(::fileno(csv_.get()), &file) != 0)
    throw Error("summaries: cannot stat " + csv_file_ + ": " + std::strerror(errno));
  const HeldFile key{file.st_dev, file.st_ino, ::getpid()};
  {
    const std::lock_guard<std::mutex> lock(held_mutex);
    if (held_files.contains(key))
      throw Error(logdir + ": another summary writer of this process is writing there; give "
                  "each writer a directory of its own");
    if (lock_exclusively(::fileno(csv_.get()), csv_file_, patience) == FileLock::kHeldElsewhere)
      throw Error(logdir + ": another summary writer is writing there (it has held " + csv_file_ +
                  " for " + std::to_string(patience.count()) +
                  " s); give each writer a directory of its own");
    held_files.insert(key);
  }
  held_ = std::shared_ptr<const void>(nullptr, [key](const void*) {
    const std::lock_guard<std::mutex> lock(held_mutex);
    held_files.erase(key);
  });

  // "x" (exclusive create) rather than a separate existence check, so two writers racing for
  // the same name cannot both get it.
  const double start = now_seconds();
  const std::string base = (fs::path(logdir) / ("events.out.tfevents." +
                            std::to_string(static_cast<std::int64_t>(start)) + "." + hostname()))
                               .string();
  for (int n = 0; !events_; ++n) {
    event_file_ = n == 0 ? base : base + "." + std::to_string(n);
    events_.reset(std::fopen(event_file_.c_str(), "wbxe"));
    if (!events_ && (errno != EEXIST || n == 1000))
      throw Error("cannot create event file " + event_file_ + ": " + std::strerror(errno));
  }

  // Append mode puts the position at the end, so an empty position means a new (or empty) file.
  // A file that does not end a line was cut off mid-row by a run that died (a full disk, a
  // kill): its part row keeps a line of its own rather than run into the first new one.
  if (const long size = std::ftell(csv_.get()); size == 0) {
    write_all(csv_.get(), csv_file_, "step,wall_time,tag,value\n");
  } else if (size > 0) {
    std::ifstream existing(csv_file_, std::ios::binary);
    char last = '\n';
    if (existing.seekg(size - 1) && existing.get(last) && last != '\n')
      write_all(csv_.get(), csv_file_, "\n");
  }

  write_record(version_event(start));
  flush();
}

SummaryWriter::~SummaryWriter() {
  try {
    flush();
  } catch (...) {
    // A destructor must not throw; the unique_ptrs still close both files.
  }
}

void SummaryWriter::add_scalar(const std::string& tag, double value, std::int64_t step) {
  add_scalars({{tag, value}}, step);
}

void SummaryWriter::add_scalars(const std::vector<std::pair<std::string, double>>& values,
                                std::int64_t step) {
  if (!events_) throw Error("SummaryWriter used after it was moved from");
  for (const auto& [tag, value] : values) check_tag(tag, step);
  if (values.empty()) return;

  const double wall_time = now_seconds();
  write_record(scalar_event(values, wall_time, step));

  char time_text[32];
  std::snprintf(time_text, sizeof time_text, "%.6f", wall_time);
  std::string rows;
  for (const auto& [tag, value] : values)
    rows += std::to_string(step) + "," + time_text + "," + data::csv_field(tag) + "," + shortest(value) + "\n";
  write_all(csv_.get(), csv_file_, rows);
}

void SummaryWriter::add_histogram(const std::string& tag, std::span<const float> values,
                                  std::int64_t step) {
  add_histograms({{tag, values}}, step);
}

void SummaryWriter::add_histograms(
    const std::vector<std::pair<std::string, std::span<const float>>>& histograms,
    std::int64_t step) {
  if (!events_) throw Error("SummaryWriter used after it was moved from");
  for (const auto& [tag, values] : histograms) {
    check_tag(tag, step);
    for (std::size_t i = 0; i < values.size(); ++i)
      if (!std::isfinite(values[i]))
        throw InvalidArgument("summary histogram " + tag + " at step " + std::to_string(step) +
                              ": value " + std::to_string(i) + " of " +
                              std::to_string(values.size()) + " is " + shortest(values[i]));
  }
  if (histograms.empty()) return;
  write_record(histogram_event(histograms, now_seconds(), step));
}

void SummaryWriter::add_session_start(std::int64_t step) {
  if (!events_) throw Error("SummaryWriter used after it was moved from");
  write_record(session_start_event(now_seconds(), step));
}

void SummaryWriter::flush() {
  if (events_ && std::fflush(events_.get()) != 0)
    throw Error("cannot write event file " + event_file_ + ": " + std::strerror(errno));
  if (csv_ && std::fflush(csv_.get()) != 0)
    throw Error("cannot write " + csv_file_ + ": " + std::strerror(errno));
}

void SummaryWriter::write_record(std::string_view data) {
  std::string record;
  record.reserve(data.size() + 16);
  put_le(record, static_cast<std::uint64_t>(data.size()));
  put_le(record, summary::masked_crc32c(record));
  record.append(data);
  put_le(record, summary::masked_crc32c(data));
  write_all(events_.get(), event_file_, record);
}

}  // namespace cohort
