#pragma once
// Checks and files shared by the data loader tests (data_idx_test.cc, data_loaders_test.cc,
// data_csv_test.cc, data_images_test.cc, data_tfrecord_test.cc).

#include <doctest/doctest.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <functional>
#include <string>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/data/dataset.h"

namespace cohort::test {

// The DataError message `f` throws, or "(no error)".
inline std::string data_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const data::DataError& e) {
    return e.what();
  }
  return "(no error)";
}

// The InvalidArgument message `f` throws (the caller's mistakes), or "(no InvalidArgument)".
inline std::string invalid_argument(const std::function<void()>& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(no InvalidArgument)";
}

// Whether `a` holds exactly `b`'s examples, targets and classes.
inline void check_same_dataset(const data::Dataset& a, const data::Dataset& b) {
  REQUIRE(a.size() == b.size());
  REQUIRE(a.example_size() == b.example_size());
  REQUIRE(a.has_labels() == b.has_labels());
  if (a.has_labels()) CHECK(a.num_classes() == b.num_classes());
  for (std::int64_t i = 0; i < a.size(); ++i) {
    CAPTURE(i);
    const auto x = a.example(i), y = b.example(i);
    CHECK(std::equal(x.begin(), x.end(), y.begin(), y.end()));
    if (a.has_labels()) {
      CHECK(a.label(i) == b.label(i));
    } else {
      const auto s = a.target(i), t = b.target(i);
      CHECK(std::equal(s.begin(), s.end(), t.begin(), t.end()));
    }
  }
}

// Writes `bytes` gzip-compressed to `path`.
inline void write_gzip(const std::string& path, const std::string& bytes) {
  gzFile file = gzopen(path.c_str(), "wb");
  REQUIRE(file != nullptr);
  REQUIRE(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())) == static_cast<int>(bytes.size()));
  REQUIRE(gzclose(file) == Z_OK);
}

// A "VmRSS" or "VmHWM" figure of /proc/self/status, in KiB (-1 where there is none).
inline long status_kib(const std::string& key) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind(key + ":", 0) == 0) return std::stol(line.substr(key.size() + 1));
  return -1;
}

}  // namespace cohort::test
