#pragma once
// Files replaced crash-safely and read back exactly: what checkpoints and their index are made of.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "cohort/core/base/error.h"

namespace cohort {

/// A checkpoint file (or the checkpoint index) that cannot be written or used: unreadable,
/// truncated, malformed, checksum mismatch, or an I/O failure. what() is one line that starts
/// with the file's path and names the fault.
class CheckpointError : public Error {
 public:
  using Error::Error;
};

/// A checkpoint file that exists but could not be read (an I/O or permission failure, not a
/// fault in what it holds): on a parallel file system as often a passing fault (EIO, ESTALE) as
/// a damaged disk, so restore_latest() does not fall back to an older checkpoint over it.
class CheckpointReadError : public CheckpointError {
 public:
  using CheckpointError::CheckpointError;
};

/// Called with the temporary file's path after it is written and fsynced, before it is renamed
/// over the target. A test hook: an exception thrown from it propagates and leaves the temporary
/// file behind, as a crash at that point would.
using BeforeRename = std::function<void(const std::string& temp_path)>;

/// Replaces `path` with `pieces` (written back to back) so that a crash leaves either the old file
/// or the complete new one: writes a temporary file "<path>.tmp-<pid>-<random>" in the same
/// directory, fsyncs it, calls `before_rename` (if any), renames it over `path` and fsyncs the
/// directory. On an I/O error the temporary file is removed and CheckpointError names `path`
/// and the failing step. Blocking; safe from several threads for different paths.
void write_file_atomically(const std::string& path,
                           std::span<const std::span<const std::byte>> pieces,
                           const BeforeRename& before_rename = nullptr);

/// Makes `path`'s entry in its directory durable: fsyncs the directory that holds it (a new
/// directory's entry is lost with a power cut until then). Throws CheckpointError naming `path`.
void sync_directory_entry(const std::string& path);

/// What lock_exclusively() got.
enum class FileLock {
  kHeld,          ///< the lock is this open file's until it is closed (or the process dies)
  kHeldElsewhere, ///< another open file holds it still, `patience` later
  kNotSupported,  ///< the file system takes no lock (NFS without lockd, Lustre mounted noflock)
};

/// Takes an exclusive lock (flock) on the open file `fd`, at `path`. Another process's lock (or
/// another open file's in this process) is waited for, up to `patience`, with one warning to
/// stderr naming `path`: the processes of a job killed a moment before may take a few seconds
/// to go, and the system drops their locks then. With kNotSupported, errno says why.
FileLock lock_exclusively(int fd, const std::string& path, std::chrono::seconds patience);

/// A file open for reading at any offset. Move-only; closes on destruction. Not thread-safe.
class ReadFile {
 public:
  /// Opens `path`. Throws CheckpointError naming it when it cannot be opened or is not a regular
  /// file.
  explicit ReadFile(std::string path);
  ~ReadFile();
  ReadFile(ReadFile&& other) noexcept;
  ReadFile& operator=(ReadFile&&) = delete;
  ReadFile(const ReadFile&) = delete;
  ReadFile& operator=(const ReadFile&) = delete;

  const std::string& path() const { return path_; }
  /// The file's size when it was opened.
  std::uint64_t size() const { return size_; }
  /// Reads exactly `size` bytes at `offset` into `buffer`. Throws CheckpointError naming the file
  /// and `what` on an I/O error or when the file ends first.
  void read(void* buffer, std::uint64_t size, std::uint64_t offset, const std::string& what) const;

 private:
  std::string path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

}  // namespace cohort
