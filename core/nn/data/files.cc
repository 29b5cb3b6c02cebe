#include "cohort/core/nn/data/files.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <system_error>
#include <vector>

#include "cohort/core/base/error.h"

namespace cohort::data::detail {

[[noreturn]] void fail(const std::string& where, const std::string& fault) {
  throw DataError(where + ": " + fault);
}

[[noreturn]] void fail_io(const std::string& where, const std::string& what, int err) {
  const bool input = err == ENOENT || err == ENOTDIR || err == EACCES || err == EISDIR;
  throw DataError(where + ": " + what + ": " + std::strerror(err), input ? kInputStatus : kFaultStatus);
}

void check_shard(ShardSpec shard, const std::string& where) {
  if (shard.count < 1 || shard.index < 0 || shard.index >= shard.count)
    throw InvalidArgument(where + ": shard index " + std::to_string(shard.index) + " of count " +
                          std::to_string(shard.count) + " (need 0 <= index < count)");
}

namespace {

// A DataError saying why unless `path` names something to read that is not a directory (a file,
// a pipe). `what` names the format expected, for the message.
void check_file(const std::string& path, const char* what) {
  if (path.empty())
    throw DataError(std::string("an empty file name where ") + what + " was expected");
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(status)) fail(path, "no such file");
  if (std::filesystem::is_directory(status))
    fail(path, std::string("is a directory, not ") + what);
}

}  // namespace

std::uint64_t physical_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return std::numeric_limits<std::uint64_t>::max();
  return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page);
}

void warn_classes_without_examples(const std::string& where, const std::vector<bool>& seen) {
  std::string missing;
  std::size_t count = 0;
  for (std::size_t c = 0; c < seen.size(); ++c) {
    if (seen[c]) continue;
    if (count++ < 8) missing += (missing.empty() ? "" : ", ") + std::to_string(c);
  }
  if (count == 0) return;
  std::fprintf(stderr,
               "[%s] warning: %s: %zu classes counted as the largest label + 1, %zu of which no "
               "example has (%s%s): a mistyped label? (a num_classes given refuses labels from it on)\n",
               process_label().c_str(), where.c_str(), seen.size(), count, missing.c_str(),
               count > 8 ? ", ..." : "");
}

std::uint64_t file_size(const std::string& path, const char* what) {
  check_file(path, what);
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) fail(path, "cannot read its size: " + ec.message());
  return size;
}

std::ifstream open_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_io(path, "cannot open", errno);
  return in;
}

// Reads exactly `n` bytes; anything less is a fault (the file changed, or a read error).
void read_exactly(std::ifstream& in, char* out, std::uint64_t n, const std::string& path) {
  in.read(out, static_cast<std::streamsize>(n));
  if (static_cast<std::uint64_t>(in.gcount()) != n)
    fail(path, "read error: got " + std::to_string(in.gcount()) + " of " + std::to_string(n) +
                   " bytes (did the file change while it was read?)");
}

std::string read_whole_file(const std::string& path, const char* what) {
  const std::uint64_t size = file_size(path, what);
  std::ifstream in = open_file(path);
  std::string text(static_cast<std::size_t>(size), '\0');
  read_exactly(in, text.data(), size, path);
  return text;
}

// Through zlib's gz* interface, or stdio (Compression::kNone: zlib cannot be told to read a file
// as it is; kZlib: a zlib stream, which the gz* interface does not read, inflated here).
struct GzReader::File {
  gzFile gz = nullptr;
  std::FILE* plain = nullptr;
  std::unique_ptr<z_stream> zlib;  // kZlib's stream, over `plain`
  std::vector<unsigned char> input;
  bool zlib_end = false;  // the stream's end is read
  ~File() {
    if (gz != nullptr) gzclose(gz);
    if (zlib) inflateEnd(zlib.get());
    if (plain != nullptr) std::fclose(plain);
  }

  // Inflates up to `n` bytes into `out`; fewer at the stream's end or the file's (`cut` then).
  std::int64_t inflate_into(unsigned char* out, std::int64_t n, const std::string& path, bool& cut) {
    z_stream& z = *zlib;
    std::int64_t total = 0;
    while (total < n && !zlib_end) {
      if (z.avail_in == 0) {
        const std::size_t got = std::fread(input.data(), 1, input.size(), plain);
        if (got == 0) {
          if (std::ferror(plain)) fail_io(path, "read error", errno);
          cut = true;
          break;
        }
        z.next_in = input.data();
        z.avail_in = static_cast<uInt>(got);
      }
      const auto want = static_cast<uInt>(std::min<std::int64_t>(n - total, 1 << 30));
      z.next_out = out + total;
      z.avail_out = want;
      const int status = inflate(&z, Z_NO_FLUSH);
      total += want - z.avail_out;
      if (status == Z_STREAM_END) zlib_end = true;
      else if (status != Z_OK && status != Z_BUF_ERROR)
        fail(path, std::string("corrupt zlib data: ") + (z.msg != nullptr ? z.msg : "inflate failed"));
    }
    return total;
  }
};

GzReader::GzReader(const std::string& path, const char* what, Compression compression)
    : path_(path), file_(std::make_unique<File>()) {
  check_file(path, what);  // a missing file or a directory, said as such (a pipe is fine)
  if (compression != Compression::kDetect) {
    file_->plain = std::fopen(path.c_str(), "rb");
    if (file_->plain == nullptr) fail_io(path, "cannot open", errno);
    if (compression == Compression::kZlib) {
      file_->zlib = std::make_unique<z_stream>();
      if (inflateInit(file_->zlib.get()) != Z_OK) fail(path, "zlib cannot start inflating");
      file_->input.resize(1 << 18);
      gzip_ = true;
    }
    return;
  }
  file_->gz = gzopen(path.c_str(), "rb");
  if (file_->gz == nullptr) fail_io(path, "cannot open", errno);
  // A large buffer roughly halves the time to inflate Fashion-MNIST's 26 MB of training images.
  gzbuffer(file_->gz, 1 << 18);
  gzip_ = gzdirect(file_->gz) == 0;
}

GzReader::~GzReader() = default;

const char* GzReader::compression() const { return file_->zlib ? "zlib" : "gzip"; }

std::int64_t GzReader::read(void* buffer, std::int64_t n) {
  std::int64_t total = 0;
  auto* out = static_cast<unsigned char*>(buffer);
  if (file_->zlib) return file_->inflate_into(out, n, path_, stream_cut_);
  if (file_->plain != nullptr) {
    total = static_cast<std::int64_t>(std::fread(out, 1, static_cast<std::size_t>(n), file_->plain));
    if (total < n && std::ferror(file_->plain)) fail_io(path_, "read error", errno);
    return total;
  }
  while (total < n) {
    const auto want = static_cast<unsigned>(std::min<std::int64_t>(n - total, 1 << 30));
    const int got = gzread(file_->gz, out + total, want);
    if (got < 0) {
      int code = 0;
      std::string message = gzerror(file_->gz, &code);
      // zlib puts the path before its message; ours is at the line's start already.
      if (message.starts_with(path_ + ": ")) message.erase(0, path_.size() + 2);
      fail(path_, std::string(gzip_ ? "corrupt gzip data: " : "read error: ") +
                      (code == Z_ERRNO ? std::strerror(errno) : message));
    }
    if (got == 0) break;
    total += got;
  }
  if (total < n && gzip_) {
    int code = Z_OK;
    gzerror(file_->gz, &code);
    stream_cut_ = code == Z_BUF_ERROR;
  }
  return total;
}

}  // namespace cohort::data::detail
