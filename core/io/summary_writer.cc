// SummaryWriter: TFRecord framing and hand-encoded Event/Summary protobuf messages, plus the CSV.

#include "cohort/core/io/summary_writer.h"

#include <unistd.h>

#include <bit>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <system_error>

#include <nlohmann/json.hpp>

#include "cohort/core/base/error.h"
#include "cohort/core/io/crc32c.h"

namespace cohort {
namespace summary {

std::uint32_t crc32c(std::string_view data) { return cohort::crc32c(std::as_bytes(std::span(data))); }

std::uint32_t masked_crc32c(std::string_view data) {
  const std::uint32_t crc = crc32c(data);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

}  // namespace summary

namespace {

// Protobuf wire format, only what tensorflow/core/util/event.proto and summary.proto need for
// scalars. Field numbers: Event{wall_time=1 double, step=2 int64, file_version=3 string,
// summary=5 Summary, session_log=7 SessionLog}; Summary{value=1 repeated Value}; Value{tag=1
// string, simple_value=2 float}; SessionLog{status=1 enum, START = 1}.
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

// RFC 4180 quoting, only when a tag needs it, so ordinary tags stay plain for awk and gnuplot.
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + '"';
}

// Shortest text that reads back to the same double ("nan", "inf" for the non-finite ones, which
// Python's float() and strtod both accept).
std::string shortest(double v) {
  char text[32];
  const auto result = std::to_chars(text, text + sizeof text, v);
  return std::string(text, result.ptr);
}

}  // namespace

void SummaryWriter::FileCloser::operator()(std::FILE* file) const noexcept { std::fclose(file); }

SummaryWriter::SummaryWriter(const std::string& logdir) : logdir_(logdir) {
  if (logdir.empty()) throw InvalidArgument("summary logdir is empty");
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(logdir, ec) && !fs::is_directory(logdir, ec))
    throw Error("summary logdir " + logdir + " exists but is not a directory");
  fs::create_directories(logdir, ec);
  if (ec) throw Error("cannot create summary logdir " + logdir + ": " + ec.message());

  // The CSV first: a directory where it cannot be opened is left without an empty event file.
  csv_file_ = (fs::path(logdir) / "metrics.csv").string();
  csv_.reset(std::fopen(csv_file_.c_str(), "ab"));
  if (!csv_) throw Error("summaries: cannot open " + csv_file_ + ": " + std::strerror(errno));

  // "x" (exclusive create) rather than a separate existence check, so two writers racing for
  // the same name cannot both get it.
  const double start = now_seconds();
  const std::string base = (fs::path(logdir) / ("events.out.tfevents." +
                            std::to_string(static_cast<std::int64_t>(start)) + "." + hostname()))
                               .string();
  for (int n = 0; !events_; ++n) {
    event_file_ = n == 0 ? base : base + "." + std::to_string(n);
    events_.reset(std::fopen(event_file_.c_str(), "wbx"));
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
  for (const auto& [tag, value] : values) {
    if (tag.empty()) throw InvalidArgument("summary tag is empty (step " + std::to_string(step) + ")");
    // A tag is a protobuf string, which TensorBoard's reader refuses unless it is UTF-8.
    try {
      (void)nlohmann::json(tag).dump();
    } catch (const nlohmann::json::type_error&) {
      throw InvalidArgument("summary tag " + nlohmann::json(tag).dump(-1, ' ', true,
                                                                      nlohmann::json::error_handler_t::replace) +
                            " is not valid UTF-8 (step " + std::to_string(step) + ")");
    }
  }
  if (values.empty()) return;

  const double wall_time = now_seconds();
  write_record(scalar_event(values, wall_time, step));

  char time_text[32];
  std::snprintf(time_text, sizeof time_text, "%.6f", wall_time);
  std::string rows;
  for (const auto& [tag, value] : values)
    rows += std::to_string(step) + "," + time_text + "," + csv_field(tag) + "," + shortest(value) + "\n";
  write_all(csv_.get(), csv_file_, rows);
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
