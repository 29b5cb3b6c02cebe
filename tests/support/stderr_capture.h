#pragma once
// Collects what a test's code writes to stderr, for checking its warnings line by line.

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace cohort::test {

/// Redirects fd 2 into `file` while it lives (or until lines() is called). Not thread-safe:
/// the whole process's stderr goes to the file.
class StderrCapture {
 public:
  explicit StderrCapture(std::string file) : file_(std::move(file)) {
    std::fflush(stderr);
    saved_ = ::dup(2);
    const int fd = ::open(file_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 2);
    ::close(fd);
  }
  ~StderrCapture() { restore(); }
  StderrCapture(const StderrCapture&) = delete;
  StderrCapture& operator=(const StderrCapture&) = delete;

  /// Restores stderr and returns the lines written meanwhile.
  std::vector<std::string> lines() {
    restore();
    std::vector<std::string> out;
    std::ifstream in(file_);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    ::dup2(saved_, 2);
    ::close(saved_);
    saved_ = -1;
  }
  std::string file_;
  int saved_ = -1;
};

}  // namespace cohort::test
