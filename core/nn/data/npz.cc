// .npz archives through libzip: NpzArchive (npz.h) and load_npz (loaders.h).

#include "cohort/core/nn/data/npz.h"

#include <zip.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "cohort/core/nn/data/files.h"
#include "cohort/core/nn/data/npy.h"

namespace cohort::data {
namespace detail {
namespace {

struct ZipFileCloser {
  void operator()(zip_file_t* file) const noexcept { zip_fclose(file); }
};

}  // namespace

void NpzArchive::Closer::operator()(zip* archive) const noexcept {
  if (zip_close(archive) != 0) zip_discard(archive);
}

NpzArchive::NpzArchive(const std::string& path) : path_(path) {
  if (file_size(path, "an .npz archive") == 0)
    fail(path, "empty file, not a zip archive (an .npz file is one)");
  int code = ZIP_ER_OK;
  archive_.reset(zip_open(path.c_str(), ZIP_RDONLY, &code));
  if (archive_ == nullptr) {
    zip_error_t error;
    zip_error_init_with_code(&error, code);
    std::string message = zip_error_strerror(&error);
    zip_error_fini(&error);
    if (code == ZIP_ER_NOZIP) {
      std::ifstream in(path, std::ios::binary);
      char head[6] = {};
      in.read(head, sizeof head);
      const std::string_view start(head, sizeof head);
      message = start == kNpyMagic ? "a .npy file, not an .npz archive (use load_npy)"
                : start.starts_with("PK\x03\x04")
                    ? "a damaged or truncated zip archive (its directory at the end is missing)"
                    : "not a zip archive (an .npz file is one)";
    }
    fail(path, code == ZIP_ER_NOZIP ? message : "cannot open as a zip archive: " + message);
  }
  const zip_int64_t count = zip_get_num_entries(archive_.get(), 0);
  for (zip_int64_t i = 0; i < count; ++i) {
    const char* name = zip_get_name(archive_.get(), static_cast<std::uint64_t>(i), 0);
    if (name == nullptr) fail(path, std::string("bad entry: ") + zip_strerror(archive_.get()));
    std::string key = name;
    if (!key.empty() && key.back() == '/') continue;  // a directory holds no data
    if (key.size() > 4 && key.ends_with(".npy")) {
      key.resize(key.size() - 4);
      if (!members_.emplace(key, static_cast<std::uint64_t>(i)).second)
        fail(path, "two members named '" + std::string(name) + "'");
    } else {
      others_.push_back(name);
    }
  }
}

NpzArchive::~NpzArchive() = default;

std::string NpzArchive::keys() const {
  std::string out;
  for (const auto& [key, index] : members_) out += (out.empty() ? "'" : ", '") + key + "'";
  return out.empty() ? "none" : out;
}

NpyArray NpzArchive::read(const std::string& key, ShardSpec shard, Shape* file_shape) const {
  const zip_uint64_t index = members_.at(key);
  const std::string where = path_ + ": member " + key + ".npy";
  zip_stat_t stat;
  zip_stat_init(&stat);
  if (zip_stat_index(archive_.get(), index, 0, &stat) != 0 || !(stat.valid & ZIP_STAT_SIZE))
    fail(where, std::string("cannot stat: ") + zip_strerror(archive_.get()));
  const std::unique_ptr<zip_file_t, ZipFileCloser> file(
      zip_fopen_index(archive_.get(), index, 0));
  if (file == nullptr) fail(where, std::string("cannot open: ") + zip_strerror(archive_.get()));
  // A corrupt size must not make us allocate terabytes before the data runs out, so the buffer
  // grows as data actually arrives.
  const std::uint64_t size = stat.size;
  std::string bytes(static_cast<std::size_t>(std::min<std::uint64_t>(size, 1 << 28)), '\0');
  std::uint64_t have = 0;
  for (;;) {
    if (have == bytes.size()) {
      if (have == size) break;
      bytes.resize(static_cast<std::size_t>(std::min(size, 2 * have)));
    }
    const zip_int64_t got = zip_fread(file.get(), bytes.data() + have, bytes.size() - have);
    if (got < 0) fail(where, std::string("read error: ") + zip_file_strerror(file.get()));
    if (got == 0) break;
    have += static_cast<std::uint64_t>(got);
  }
  if (have < size)
    fail(where, "truncated: " + std::to_string(have) + " of " + std::to_string(size) +
                    " bytes");
  // libzip compares the member's CRC-32 when a read finds its end: one more read, which must
  // find nothing, so that a damaged archive is refused (as NumPy refuses it), not trained on.
  char past_end = 0;
  const zip_int64_t more = zip_fread(file.get(), &past_end, 1);
  if (more < 0) fail(where, std::string("damaged: ") + zip_file_strerror(file.get()));
  if (more > 0) fail(where, "more data than its stated " + std::to_string(size) + " bytes");
  return parse_npy(bytes, where, shard, file_shape);
}

}  // namespace detail

std::map<std::string, NpyArray> load_npz(const std::string& path) {
  const detail::NpzArchive archive(path);
  if (!archive.others().empty())
    detail::fail(path, "member '" + archive.others().front() +
                           "' is not a .npy file (an .npz archive holds NAME.npy arrays)");
  std::map<std::string, NpyArray> arrays;
  for (const auto& [key, index] : archive.members()) arrays.emplace(key, archive.read(key));
  return arrays;
}

}  // namespace cohort::data
