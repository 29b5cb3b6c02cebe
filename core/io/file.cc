#include "cohort/core/io/file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>
#include <utility>

namespace cohort {
namespace {

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  // Closes now so that the caller sees close()'s error (NFS reports write errors there).
  int close() { return ::close(std::exchange(fd_, -1)); }

 private:
  int fd_;
};

CheckpointError io_error(const std::string& path, const std::string& what, int err) {
  return CheckpointError(path + ": " + what + ": " + std::strerror(err));
}

// A file there that could not be read; one that is not there (any more) is only missing.
[[noreturn]] void throw_read_error(const std::string& path, const std::string& what, int err) {
  const std::string text = path + ": " + what + ": " + std::strerror(err);
  if (err == ENOENT) throw CheckpointError(text, kInputStatus);
  throw CheckpointReadError(text);
}

void write_all(int fd, std::span<const std::byte> bytes, const std::string& path,
               const std::string& temp) {
  while (!bytes.empty()) {
    const ::ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      throw io_error(path, "cannot write the temporary file " + temp, err);
    }
    bytes = bytes.subspan(static_cast<std::size_t>(n));
  }
}

// The rename is durable only once the directory entry is on disk.
void fsync_directory(const std::filesystem::path& dir, const std::string& path) {
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) {
    const int err = errno;
    throw io_error(path, "cannot open its directory " + dir.string() + " to fsync it", err);
  }
  // Some file systems cannot fsync a directory (EINVAL); the rename is then as durable as they
  // make it.
  if (::fsync(fd.get()) != 0 && errno != EINVAL) {
    const int err = errno;
    throw io_error(path, "cannot fsync its directory " + dir.string(), err);
  }
}

}  // namespace

FileLock lock_exclusively(int fd, const std::string& path, std::chrono::seconds patience) {
  const auto deadline = std::chrono::steady_clock::now() + patience;
  bool told = false;
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    if (errno != EWOULDBLOCK) return FileLock::kNotSupported;
    if (std::chrono::steady_clock::now() >= deadline) return FileLock::kHeldElsewhere;
    if (!told)
      std::fprintf(stderr, "[%s] warning: waiting for %s, held by another process (a job still "
                   "writing here?)\n", process_label().c_str(), path.c_str());
    told = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return FileLock::kHeld;
}

void sync_directory_entry(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::absolute(path).lexically_normal().parent_path();
  fsync_directory(parent.empty() ? std::filesystem::path(".") : parent, path);
}

void write_file_atomically(const std::string& path,
                           std::span<const std::span<const std::byte>> pieces,
                           const BeforeRename& before_rename) {
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  // Unique per process and call, so concurrent writers never share a temporary file.
  std::random_device random;
  char suffix[48];
  std::snprintf(suffix, sizeof suffix, ".tmp-%ld-%08x", static_cast<long>(::getpid()), random());
  const std::string temp = path + suffix;

  Fd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666));
  if (fd.get() < 0) {
    const int err = errno;
    throw io_error(path, "cannot create the temporary file " + temp, err);
  }
  try {
    for (const auto& piece : pieces) write_all(fd.get(), piece, path, temp);
    if (::fsync(fd.get()) != 0) {
      const int err = errno;
      throw io_error(path, "cannot fsync the temporary file " + temp, err);
    }
    if (fd.close() != 0) {
      const int err = errno;
      throw io_error(path, "cannot close the temporary file " + temp, err);
    }
  } catch (...) {
    ::unlink(temp.c_str());
    throw;
  }
  if (before_rename) before_rename(temp);
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    throw io_error(path, "cannot rename the temporary file " + temp + " over it", err);
  }
  fsync_directory(dir, path);
}

ReadFile::ReadFile(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) {
    const int err = errno;
    throw_read_error(path_, "cannot open", err);
  }
  struct ::stat status {};
  if (::fstat(fd_, &status) != 0) {
    const int err = errno;
    ::close(fd_);
    throw_read_error(path_, "cannot stat", err);
  }
  if (!S_ISREG(status.st_mode)) {
    ::close(fd_);
    throw CheckpointError(path_ + ": not a regular file");
  }
  size_ = static_cast<std::uint64_t>(status.st_size);
}

ReadFile::~ReadFile() {
  if (fd_ >= 0) ::close(fd_);
}

ReadFile::ReadFile(ReadFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)), size_(other.size_) {}

void ReadFile::read(void* buffer, std::uint64_t size, std::uint64_t offset,
                    const std::string& what) const {
  auto* out = static_cast<char*>(buffer);
  while (size > 0) {
    const ::ssize_t n = ::pread(fd_, out, size, static_cast<::off_t>(offset));
    if (n < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      throw_read_error(path_, "cannot read " + what, err);
    }
    // Callers check sizes against size(), so only a file shrinking under us ends early.
    if (n == 0) throw CheckpointError(path_ + ": truncated while reading " + what);
    out += n;
    offset += static_cast<std::uint64_t>(n);
    size -= static_cast<std::uint64_t>(n);
  }
}

}  // namespace cohort
