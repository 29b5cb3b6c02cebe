#pragma once
// The .npy format, internal to core/nn/data: what the .npz archive (npz.cc) and the data sets
// (numpy.cc) take from the .npy reader (npy.cc), and the data set of two arrays of one file
// (numpy.cc), which the .npz and HDF5 loaders share.

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

/// The data set of two arrays of one file (an .npz archive, an HDF5 file: `source`), as
/// dataset_from_npz makes it: `features` the rows `shard` keeps of an array of `features_shape`
/// named `features_key`, `targets` the whole array `targets_key` (labels where it is integral),
/// every value checked.
Dataset dataset_of_arrays(NpyArray features, const Shape& features_shape, NpyArray targets,
                          const std::string& source, const std::string& features_key,
                          const std::string& targets_key, int num_classes, ShardSpec shard);

}  // namespace cohort::data::detail
