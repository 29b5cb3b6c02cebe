#pragma once
// An .npz archive open for reading, internal to core/nn/data (load_npz and the data sets).

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cohort/core/nn/data/dataset.h"
#include "cohort/core/nn/data/loaders.h"

struct zip;  // libzip's archive, zip_t

namespace cohort::data::detail {

/// An .npz archive (a zip of NAME.npy members, stored or deflated) open for reading, its .npy
/// members by key (the name without ".npy"). Throws DataError naming the file for a file that is
/// not one (empty, a .npy file, a damaged or truncated zip), or a member named twice. Not
/// thread-safe.
class NpzArchive {
 public:
  explicit NpzArchive(const std::string& path);
  ~NpzArchive();
  NpzArchive(const NpzArchive&) = delete;
  NpzArchive& operator=(const NpzArchive&) = delete;

  /// Members that are not NAME.npy.
  const std::vector<std::string>& others() const { return others_; }
  /// The .npy members: key -> index in the archive.
  const std::map<std::string, std::uint64_t>& members() const { return members_; }
  /// "'x', 'y'", or "none".
  std::string keys() const;
  /// Member `key` (one of members()), inflated and checked against its CRC-32, of which only
  /// `shard`'s rows are converted; its shape in the file into `file_shape` if given. Throws
  /// DataError naming the archive and the member.
  NpyArray read(const std::string& key, ShardSpec shard = {}, Shape* file_shape = nullptr) const;

 private:
  struct Closer {
    void operator()(zip* archive) const noexcept;
  };
  std::string path_;
  std::unique_ptr<zip, Closer> archive_;
  std::map<std::string, std::uint64_t> members_;
  std::vector<std::string> others_;
};

}  // namespace cohort::data::detail
