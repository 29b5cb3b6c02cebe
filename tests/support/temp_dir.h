#pragma once
// Scratch directories and whole-file reads and writes, for tests that touch the file system.

#include <doctest/doctest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>

namespace cohort::test {

/// A directory <system temp dir>/cohort_<tag>_<pid>_<n>, fresh (made empty, or left absent with
/// kAbsent for code that must create it), removed with its contents at scope end.
struct TempDir {
  enum Start { kEmpty, kAbsent };
  std::filesystem::path path;

  explicit TempDir(const std::string& tag = "test", Start start = kEmpty) {
    static std::atomic<int> counter{0};
    path = std::filesystem::temp_directory_path() /
           ("cohort_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path);
    if (start == kEmpty) std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string str() const { return path.string(); }
  /// The path of `name` inside the directory.
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

/// The whole file at `path` (empty when it cannot be read).
inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Replaces the file at `path` with `bytes`.
inline void spit(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

}  // namespace cohort::test
