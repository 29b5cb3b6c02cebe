#include "cohort/core/nn/data/files.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "cohort/core/base/error.h"

namespace cohort::data::detail {

[[noreturn]] void fail(const std::string& where, const std::string& fault) {
  throw DataError(where + ": " + fault);
}

void check_shard(ShardSpec shard, const std::string& where) {
  if (shard.count < 1 || shard.index < 0 || shard.index >= shard.count)
    throw InvalidArgument(where + ": shard index " + std::to_string(shard.index) + " of count " +
                          std::to_string(shard.count) + " (need 0 <= index < count)");
}

// Checks that `path` names a regular file that exists, else throws the DataError saying why.
// `what` names the format expected, for the message.
std::uint64_t file_size(const std::string& path, const char* what) {
  if (path.empty())
    throw DataError(std::string("an empty file name where ") + what + " was expected");
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(status)) fail(path, "no such file");
  if (std::filesystem::is_directory(status))
    fail(path, std::string("is a directory, not ") + what);
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) fail(path, "cannot read its size: " + ec.message());
  return size;
}

std::ifstream open_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, std::string("cannot open: ") + std::strerror(errno));
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

}  // namespace cohort::data::detail
