#pragma once
// The .npy format, internal to core/nn/data: what the .npz archive (npz.cc) and the data sets
// (numpy.cc) take from the .npy reader (npy.cc).

#include <string>
#include <string_view>

#include "cohort/core/nn/data/dataset.h"
#include "cohort/core/nn/data/loaders.h"

namespace cohort::data::detail {

/// The first bytes of every .npy file.
inline constexpr std::string_view kNpyMagic("\x93NUMPY", 6);

/// An .npy file's bytes already in memory (an .npz member); only `shard`'s rows are converted.
/// `file_shape`, if given, receives the array's shape in the file ([1] for a 0-d array). Throws
/// DataError naming `where` for a fault of the bytes.
NpyArray parse_npy(std::string_view bytes, const std::string& where, ShardSpec shard = {},
                   Shape* file_shape = nullptr);

/// load_npy(path, shard), and the array's shape in the file ([1] for a 0-d array) into
/// `file_shape`.
NpyArray read_npy(const std::string& path, ShardSpec shard, Shape& file_shape);

}  // namespace cohort::data::detail
