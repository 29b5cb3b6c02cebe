// SummaryWriter: the event file is read back by a decoder written from the formats' specs
// (support/event_decoder.h), not from the writer's code; plus the CSV, restarts, and errors.

#include "cohort/core/io/summary_writer.h"

#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cohort/core/base/error.h"
#include "support/event_decoder.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
using cohort::SummaryWriter;
using namespace cohort::test::events;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot open " << path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

TEST_CASE("crc32c and its TFRecord mask match known answers") {
  using cohort::summary::crc32c;
  using cohort::summary::masked_crc32c;
  CHECK(crc32c("123456789") == 0xE3069283u);  // the CRC catalogue's check value for CRC-32C
  CHECK(crc32c(std::string(32, '\0')) == 0x8A9136AAu);  // RFC 3720, B.4
  CHECK(crc32c(std::string(32, '\xff')) == 0x62A8AB43u);
  CHECK(crc32c("") == 0u);
  CHECK(masked_crc32c("123456789") == 0xC78AB0E5u);
  CHECK(masked_crc32c(std::string(32, '\0')) == 0x0FD7FFFAu);
  CHECK(masked_crc32c("") == 0xA282EAD8u);
}

TEST_CASE("the event file decodes to the scalars written, framed and checksummed") {
  cohort::test::TempDir dir("summary_writer_test");
  const double before = now_seconds();
  std::string event_file;
  {
    SummaryWriter writer(dir / "run");
    event_file = writer.event_file();
    CHECK(writer.csv_file() == dir / "run/metrics.csv");
    writer.add_scalar("loss", 2.5, 1);
    writer.add_scalars({{"loss", 1.25}, {"accuracy", 0.1}}, 2);
    writer.add_scalar("train/loss", -0.5, -3);
    writer.add_scalar("big", 1e30, std::int64_t{1} << 40);
    writer.add_scalars({}, 7);  // nothing to write
    writer.flush();
  }
  const double after = now_seconds();

  const std::string name = fs::path(event_file).filename().string();
  const std::string prefix = "events.out.tfevents.";
  REQUIRE(name.rfind(prefix, 0) == 0);
  const std::string seconds = name.substr(prefix.size(), name.find('.', prefix.size()) - prefix.size());
  CHECK(std::abs(std::stod(seconds) - before) <= 2);
  CHECK(fs::path(event_file).parent_path() == fs::path(dir / "run"));

  std::vector<Event> events;
  try {
    events = decode(event_file);
  } catch (const DecodeError& e) {
    FAIL("decode failed: " << e.what());
  }
  REQUIRE(events.size() == 5);
  CHECK(events[0].file_version == "brain.Event:2");
  CHECK_FALSE(events[0].has_summary);
  for (const Event& e : events) {
    CHECK(e.wall_time >= before - 1e-3);
    CHECK(e.wall_time <= after + 1e-3);
  }

  CHECK(events[1].step == 1);
  REQUIRE(events[1].values.size() == 1);
  CHECK(events[1].values[0].tag == "loss");
  CHECK(events[1].values[0].simple_value == 2.5f);

  CHECK(events[2].step == 2);
  REQUIRE(events[2].values.size() == 2);
  CHECK(events[2].values[0].tag == "loss");
  CHECK(events[2].values[0].simple_value == 1.25f);
  CHECK(events[2].values[1].tag == "accuracy");
  CHECK(events[2].values[1].simple_value == 0.1f);

  CHECK(events[3].step == -3);
  CHECK(events[3].values.at(0).tag == "train/loss");
  CHECK(events[3].values.at(0).simple_value == -0.5f);

  CHECK(events[4].step == std::int64_t{1} << 40);
  CHECK(events[4].values.at(0).simple_value == 1e30f);

  const auto lines = lines_of(read_file(dir / "run/metrics.csv"));
  REQUIRE(lines.size() == 6);
  CHECK(lines[0] == "step,wall_time,tag,value");
  // wall_time sits between the step and the tag; check the columns around it.
  const auto row = [&](std::size_t i, const std::string& step, const std::string& rest) {
    CHECK(lines[i].rfind(step + ",", 0) == 0);
    CHECK(lines[i].size() > rest.size());
    CHECK(lines[i].substr(lines[i].size() - rest.size()) == rest);
    const std::string time = lines[i].substr(step.size() + 1, lines[i].size() - rest.size() - step.size() - 1);
    CHECK(std::abs(std::stod(time) - before) <= 2);
  };
  row(1, "1", ",loss,2.5");
  row(2, "2", ",loss,1.25");
  row(3, "2", ",accuracy,0.1");  // the CSV keeps the double, shortest form
  row(4, "-3", ",train/loss,-0.5");
  row(5, "1099511627776", ",big,1e+30");
}

TEST_CASE("TensorFlow's default histogram edges: 0 and +-1e-12 * 1.1^k up to +-1e20, then +-DBL_MAX") {
  const std::vector<double>& edges = cohort::summary::default_histogram_edges();
  REQUIRE(edges.size() == 1551);
  CHECK(edges.front() == -std::numeric_limits<double>::max());
  CHECK(edges.back() == std::numeric_limits<double>::max());
  CHECK(edges[775] == 0.0);
  CHECK(edges[776] == 1e-12);
  CHECK(edges[1549] < 1e20);
  CHECK(edges[1549] * 1.1 >= 1e20);
  for (std::size_t i = 776; i + 1 < 1550; ++i) {
    CAPTURE(i);
    REQUIRE(edges[i + 1] == edges[i] * 1.1);  // grown by multiplication, to the bit
    REQUIRE(edges[1550 - i] == -edges[i]);
  }
}

TEST_CASE("a histogram holds the count, extremes, sums and the non-empty buckets of its values") {
  cohort::test::TempDir dir("summary_writer_test");
  const std::vector<float> values{1.0f, 1.0f, 1.005f, -2.5f, 0.0f, 3e30f, 1e-13f, -1e-13f};
  std::string event_file;
  {
    SummaryWriter writer(dir / "run");
    event_file = writer.event_file();
    writer.add_histograms({{"dense/kernel", values}, {"empty", {}}}, 12);
    writer.add_histogram("one", std::vector<float>{0.5f}, 13);
  }
  const std::vector<Event> events = decode(event_file);
  REQUIRE(events.size() == 3);
  CHECK(events[1].step == 12);
  REQUIRE(events[1].values.size() == 2);
  CHECK(events[1].values[0].tag == "dense/kernel");
  REQUIRE(events[1].values[0].histo.has_value());
  const Histogram& h = *events[1].values[0].histo;
  CHECK(h.num == 8);
  CHECK(h.min == -2.5);
  CHECK(h.max == static_cast<double>(3e30f));
  double sum = 0, sum_squares = 0;
  for (float v : values) {
    sum += v;
    sum_squares += static_cast<double>(v) * v;
  }
  CHECK(h.sum == sum);
  CHECK(h.sum_squares == sum_squares);

  // Every value lies in its bucket: [the limit before it, its limit).
  REQUIRE(h.bucket_limit.size() == h.bucket.size());
  REQUIRE(!h.bucket_limit.empty());
  const std::vector<double>& edges = cohort::summary::default_histogram_edges();
  double counted = 0;
  std::vector<double> expected(h.bucket.size(), 0.0);
  for (std::size_t k = 0; k < h.bucket_limit.size(); ++k) {
    CAPTURE(k);
    CHECK(std::find(edges.begin(), edges.end(), h.bucket_limit[k]) != edges.end());
    if (k > 0) CHECK(h.bucket_limit[k] > h.bucket_limit[k - 1]);
    // Runs of empty buckets are merged: no two empty buckets in a row.
    if (k > 0) CHECK((h.bucket[k] > 0 || h.bucket[k - 1] > 0));
    counted += h.bucket[k];
  }
  CHECK(counted == 8);
  for (float f : values) {
    const double v = f;
    std::size_t k = 0;
    while (h.bucket_limit[k] <= v) ++k;
    CHECK((k == 0 || h.bucket_limit[k - 1] <= v));
    expected[k] += 1;
  }
  CHECK(h.bucket == expected);
  CHECK(h.bucket_limit.back() == std::numeric_limits<double>::max());  // 3e30 is past 1e20
  // 1.0 and 1.005 share a bucket (edges 10% apart; here 0.9175... and 1.0093...).
  const auto ones = std::find(h.bucket.begin(), h.bucket.end(), 3.0);
  REQUIRE(ones != h.bucket.end());
  const double one_limit = h.bucket_limit[static_cast<std::size_t>(ones - h.bucket.begin())];
  CHECK(one_limit > 1.005);
  CHECK(one_limit <= 1.1);

  // An empty tensor, as TensorFlow writes it: no values, one bucket (DBL_MAX, 0).
  const Histogram& e = *events[1].values[1].histo;
  CHECK(e.num == 0);
  CHECK(e.min == std::numeric_limits<double>::max());
  CHECK(e.max == -std::numeric_limits<double>::max());
  CHECK(e.bucket_limit == std::vector<double>{std::numeric_limits<double>::max()});
  CHECK(e.bucket == std::vector<double>{0.0});
  CHECK(events[2].values.at(0).histo->num == 1);
}

TEST_CASE("every value of any magnitude lands in the bucket a binary search over the edges finds") {
  // Values from 1e-40 (subnormal) to FLT_MAX, both signs, zero, and the floats next to the edges.
  const std::vector<double>& edges = cohort::summary::default_histogram_edges();
  std::vector<float> values{0.0f, -0.0f, std::numeric_limits<float>::max(),
                            -std::numeric_limits<float>::max(), std::numeric_limits<float>::min(),
                            -std::numeric_limits<float>::denorm_min(), 1e-12f, -1e-12f, 1e20f, -1e20f};
  for (std::size_t i = 1; i + 1 < edges.size(); ++i) {
    const float near = static_cast<float>(edges[i]);
    values.push_back(near);
    values.push_back(std::nextafter(near, 0.0f));
    values.push_back(std::nextafter(near, std::numeric_limits<float>::infinity()));
  }
  std::uint64_t state = 12345;
  for (int i = 0; i < 20000; ++i) {
    state = state * 6364136223846793005u + 1442695040888963407u;
    const double exponent = -40.0 + 78.5 * static_cast<double>(state >> 11) * 0x1p-53;
    values.push_back(static_cast<float>((state & 1 ? -1 : 1) * std::pow(10.0, exponent)));
  }
  std::vector<double> expected(edges.size(), 0.0);
  for (float v : values)
    expected[static_cast<std::size_t>(std::upper_bound(edges.begin(), edges.end(), double{v}) -
                                      edges.begin())] += 1;

  cohort::test::TempDir dir("summary_writer_test");
  std::string event_file;
  {
    SummaryWriter writer(dir / "run");
    event_file = writer.event_file();
    writer.add_histogram("wide", values, 1);
  }
  const Histogram h = *decode(event_file).at(1).values.at(0).histo;
  CHECK(h.num == static_cast<double>(values.size()));
  // Every non-empty bucket is written with its own edge; empty runs carry only zeros.
  std::vector<double> written(edges.size(), 0.0);
  for (std::size_t k = 0; k < h.bucket_limit.size(); ++k) {
    const auto at = std::find(edges.begin(), edges.end(), h.bucket_limit[k]);
    REQUIRE(at != edges.end());
    written[static_cast<std::size_t>(at - edges.begin())] = h.bucket[k];
  }
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < edges.size(); ++i) wrong += written[i] != expected[i];
  CHECK(wrong == 0);
}

TEST_CASE("a histogram of a NaN or an infinity is refused, naming the tag; nothing is written") {
  cohort::test::TempDir dir("summary_writer_test");
  SummaryWriter writer(dir / "run");
  const std::vector<float> bad{1.0f, std::nanf(""), 2.0f};
  try {
    writer.add_histograms({{"fine", std::vector<float>{1.0f}}, {"logits/bias", bad}}, 5);
    FAIL("no error");
  } catch (const cohort::InvalidArgument& e) {
    CHECK(std::string(e.what()) == "summary histogram logits/bias at step 5: value 1 of 3 is nan");
  }
  const std::vector<float> infinite{-INFINITY};
  CHECK_THROWS_AS(writer.add_histogram("x", infinite, 6), cohort::InvalidArgument);
  CHECK_THROWS_AS(writer.add_histogram("", std::vector<float>{1.0f}, 6), cohort::InvalidArgument);
  writer.flush();
  CHECK(decode(writer.event_file()).size() == 1);  // the version event alone
}

TEST_CASE("the decoder detects a flipped byte and a truncated file") {
  cohort::test::TempDir dir("summary_writer_test");
  std::string event_file;
  {
    SummaryWriter writer(dir.path.string());
    event_file = writer.event_file();
    writer.add_scalar("loss", 0.25, 10);
  }
  const std::string good = read_file(event_file);
  REQUIRE_FALSE(decode_error(good).has_value());
  // Record 0 is the version event; record 1 starts right after it.
  const std::size_t record1 = 12 + le(good, 0, 8) + 4;
  REQUIRE(record1 + 16 < good.size());

  std::string bad = good;
  bad[record1 + 12 + 3] ^= 0x01;  // inside record 1's data
  CHECK(decode_error(bad) == "record 1 at byte " + std::to_string(record1) + ": data crc mismatch");

  bad = good;
  bad[record1] ^= 0x10;  // record 1's length
  CHECK(decode_error(bad) == "record 1 at byte " + std::to_string(record1) + ": length crc mismatch");

  bad = good;
  bad[good.size() - 1] ^= 0x80;  // the data crc itself
  CHECK(decode_error(bad) == "record 1 at byte " + std::to_string(record1) + ": data crc mismatch");

  CHECK(decode_error(good.substr(0, good.size() - 1)) ==
        "record 1 at byte " + std::to_string(record1) + ": truncated data");
}

TEST_CASE("the destructor flushes, and a restart adds an event file and appends to the CSV") {
  cohort::test::TempDir dir("summary_writer_test");
  std::string first, second;
  {
    SummaryWriter writer(dir.path.string());
    first = writer.event_file();
    writer.add_scalar("loss", 1.0, 1);
  }
  {
    SummaryWriter writer(dir.path.string());  // within the same second, most likely
    second = writer.event_file();
    writer.add_session_start(2);
    writer.add_scalar("loss", 0.5, 2);
    // A moved writer keeps writing to the same files; the moved-from one is inert.
    SummaryWriter moved = std::move(writer);
    moved.add_scalar("loss", 0.25, 3);
    CHECK(moved.event_file() == second);
    CHECK_THROWS_AS(writer.add_scalar("loss", 0, 4), cohort::Error);  // NOLINT(bugprone-use-after-move)
  }
  CHECK(first != second);
  CHECK(fs::exists(first));
  CHECK(fs::exists(second));

  const auto a = decode(first);
  REQUIRE(a.size() == 2);
  CHECK(a[1].step == 1);
  const auto b = decode(second);
  REQUIRE(b.size() == 4);
  CHECK(b[0].file_version == "brain.Event:2");
  // The session start, as TensorFlow's summary hook writes it: step, SessionLog START, no summary.
  CHECK(b[1].step == 2);
  CHECK(b[1].session_status == 1);
  CHECK_FALSE(b[1].has_summary);
  CHECK(b[2].step == 2);
  CHECK(b[2].session_status == 0);
  CHECK(b[3].step == 3);
  CHECK(b[3].values.at(0).simple_value == 0.25f);

  const auto lines = lines_of(read_file(dir / "metrics.csv"));
  REQUIRE(lines.size() == 4);  // one header, three rows
  CHECK(lines[0] == "step,wall_time,tag,value");
  CHECK(lines[1].rfind("1,", 0) == 0);
  CHECK(lines[2].rfind("2,", 0) == 0);
  CHECK(lines[3].rfind("3,", 0) == 0);
  CHECK(lines[3].substr(lines[3].size() - 10) == ",loss,0.25");
}

TEST_CASE("a CSV cut off mid-row by a run that died keeps the part row on a line of its own") {
  cohort::test::TempDir dir("summary_writer_test");
  write_file(dir / "metrics.csv", "step,wall_time,tag,value\n1,1700000000.5,loss,2.5\n2,17000");
  { SummaryWriter(dir.path.string()).add_scalar("loss", 0.5, 3); }
  const auto lines = lines_of(read_file(dir / "metrics.csv"));
  REQUIRE(lines.size() == 4);
  CHECK(lines[2] == "2,17000");
  CHECK(lines[3].rfind("3,", 0) == 0);
  CHECK(lines[3].substr(lines[3].size() - 9) == ",loss,0.5");
}

TEST_CASE("tags that need it are quoted in the CSV; bad input is refused") {
  cohort::test::TempDir dir("summary_writer_test");
  SummaryWriter writer(dir.path.string());
  writer.add_scalar("eval, \"top-1\"", 0.5, 1);
  CHECK_THROWS_AS(writer.add_scalar("", 1.0, 2), cohort::InvalidArgument);
  CHECK_THROWS_AS(writer.add_scalars({{"loss", 1.0}, {"", 2.0}}, 3), cohort::InvalidArgument);
  CHECK_THROWS_WITH_AS(writer.add_scalar("loss\xff", 1.0, 3),
                       "summary tag \"loss\\ufffd\" is not valid UTF-8 (step 3)",
                       cohort::InvalidArgument);
  writer.add_scalar("\xce\xbb", 0.25, 4);  // a UTF-8 lambda is fine
  writer.add_scalar("nan", std::nan(""), 4);
  writer.flush();
  const auto lines = lines_of(read_file(writer.csv_file()));
  REQUIRE(lines.size() == 4);  // the refused calls wrote nothing
  CHECK(lines[1].substr(lines[1].find(",\"")) == ",\"eval, \"\"top-1\"\"\",0.5");
  CHECK(lines[3].substr(lines[3].size() - 8) == ",nan,nan");
  const auto events = decode(writer.event_file());
  REQUIRE(events.size() == 4);
  CHECK(events[1].values.at(0).tag == "eval, \"top-1\"");
  CHECK(events[2].values.at(0).tag == "\xce\xbb");
  CHECK(std::isnan(events[3].values.at(0).simple_value));
}

TEST_CASE("a directory has one writer at a time; the next one takes it when that one is gone") {
  cohort::test::TempDir dir("summary_writer_test");
  const std::string logdir = dir.path.string();
  std::optional<SummaryWriter> first(std::in_place, logdir);
  first->add_scalar("loss", 1.0, 1);
  first->flush();
  // Another writer there (a second hook, or another job's evaluator) would cut the CSV's rows:
  // one of this process is refused at once, one of another process after its patience.
  const std::string here = logdir + ": another summary writer of this process is writing there; "
                                    "give each writer a directory of its own";
  CHECK_THROWS_WITH_AS(SummaryWriter(logdir + "/."), (logdir + "/." + here.substr(logdir.size())).c_str(),
                       cohort::Error);
  const auto from_another_process = [&] {
    const pid_t child = ::fork();
    if (child == 0) {
      int status = 0;
      try {
        SummaryWriter(logdir, std::chrono::seconds(0));
      } catch (const cohort::Error& e) {
        status = std::string(e.what()) == logdir + ": another summary writer is writing there (it has held " +
                                              logdir + "/metrics.csv for 0 s); give each writer a directory of its own"
                     ? 1
                     : 3;
      }
      ::_exit(status);  // 0: it took the directory
    }
    int status = -1;
    ::waitpid(child, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  CHECK(from_another_process() == 1);
  SummaryWriter moved = std::move(*first);  // the lock goes with the files
  first.reset();
  CHECK_THROWS_WITH_AS(SummaryWriter{logdir}, here.c_str(), cohort::Error);
  CHECK(from_another_process() == 1);
  moved.add_scalar("loss", 0.5, 2);
  { SummaryWriter gone = std::move(moved); }
  CHECK(from_another_process() == 0);
  SummaryWriter next(logdir, std::chrono::seconds(0));
  next.add_scalar("loss", 0.25, 3);
  next.flush();
  const auto lines = lines_of(read_file(dir / "metrics.csv"));
  REQUIRE(lines.size() == 4);  // the refused writers wrote nothing
  CHECK(lines[3].substr(lines[3].size() - 10) == ",loss,0.25");
}

TEST_CASE("a logdir that cannot be created is reported by path") {
  cohort::test::TempDir dir("summary_writer_test");
  write_file(dir / "file", "not a directory");
  const std::string logdir = dir / "file/run";
  const std::string file = dir / "file";
  CHECK_THROWS_WITH_AS(SummaryWriter{logdir}, doctest::Contains(logdir.c_str()), cohort::Error);
  CHECK_THROWS_WITH_AS(SummaryWriter{file}, ("summary logdir " + file + " exists but is not a directory").c_str(),
                       cohort::Error);
  CHECK_THROWS_AS(SummaryWriter{""}, cohort::InvalidArgument);
}

// Writes a run shaped like training (loss falling, accuracy rising, an eval accuracy every 50
// steps) for the plotting script's test, into $COHORT_SUMMARY_PLOT_LOGDIR when set: a first run
// to step 280 (every 5 steps) that died after its checkpoint at 200, and the run restarted from
// there to 300 (every 10). What counts: 0-195 of the first (40 points) and the second's 11.
TEST_CASE("a training-shaped run for the plotting script") {
  cohort::test::TempDir dir("summary_writer_test");
  const char* env = std::getenv("COHORT_SUMMARY_PLOT_LOGDIR");
  const std::string logdir = env != nullptr && *env != '\0' ? std::string(env) : dir / "plot";
  std::error_code ec;
  fs::remove_all(logdir, ec);
  for (const auto& [first, last, every] : {std::tuple{0, 280, 5}, std::tuple{200, 300, 10}}) {
    SummaryWriter writer(logdir);
    writer.add_session_start(first);
    for (int step = first; step <= last; step += every) {
      const double t = step / 100.0;
      const double wiggle = 0.03 * std::sin(step * 0.7);
      writer.add_scalars({{"loss", 2.3 * std::exp(-t) + 0.3 + wiggle},
                          {"accuracy", 0.9 - 0.8 * std::exp(-1.5 * t) + wiggle / 3}},
                         step);
      if (step % 50 == 0) writer.add_scalar("eval/accuracy", 0.88 - 0.78 * std::exp(-1.4 * t), step);
    }
  }
  const auto lines = lines_of(read_file(logdir + "/metrics.csv"));
  CHECK(lines.size() == 1 + (57 + 11) * 2 + (6 + 3));
  std::size_t scalars = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(logdir))
    if (entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0)
      for (const Event& e : decode(entry.path().string())) scalars += e.values.size();
  CHECK(scalars == (57 + 11) * 2 + (6 + 3));
}
