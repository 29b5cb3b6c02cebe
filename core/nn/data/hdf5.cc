// HDF5 files (loaders.h): two datasets of one file as a data set, through the HDF5 C library,
// which converts any integer or float type as it reads (and inflates compressed chunks).

#include <hdf5.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cohort/core/nn/data/files.h"
#include "cohort/core/nn/data/loaders.h"
#include "cohort/core/nn/data/npy.h"

namespace cohort::data {
namespace {

using detail::fail;

// An HDF5 identifier, closed with `close` when it goes.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  Handle(Handle&& other) noexcept : id_(std::exchange(other.id_, -1)), close_(other.close_) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

// What `open` returns (an HDF5 identifier, negative on failure), without the library printing its
// error stack: the failure becomes a DataError of ours.
template <typename Open>
hid_t quietly(Open&& open) {
  hid_t id = -1;
  H5E_BEGIN_TRY { id = open(); }
  H5E_END_TRY;
  return id;
}

// What a dataset of this type class holds, for a message.
std::string type_class_name(H5T_class_t kind) {
  switch (kind) {
    case H5T_STRING: return "strings";
    case H5T_COMPOUND: return "records of several fields (a structured array, or h5py's complex numbers)";
    case H5T_ENUM: return "an enumeration (h5py's booleans: store them as integers)";
    case H5T_VLEN: return "variable-length sequences";
    case H5T_ARRAY: return "arrays in each element";
    case H5T_REFERENCE: return "references";
    case H5T_OPAQUE: return "opaque bytes";
    case H5T_BITFIELD: return "bit fields";
    default: return "HDF5 type class " + std::to_string(static_cast<int>(kind));
  }
}

// The paths of every dataset in the file, for a message naming what is there.
std::string dataset_names(hid_t file) {
  std::string names;
  H5Ovisit(
      file, H5_INDEX_NAME, H5_ITER_INC,
      [](hid_t, const char* name, const H5O_info_t* info, void* out) -> herr_t {
        if (info->type == H5O_TYPE_DATASET) {
          auto& list = *static_cast<std::string*>(out);
          list += (list.empty() ? "" : ", ") + std::string(name);
        }
        return 0;
      },
      &names);
  return names.empty() ? "none" : names;
}

// Which rows of a dataset are read: start, start + stride, ... below end (where given).
struct Rows {
  hsize_t start = 0;
  hsize_t stride = 1;
  std::optional<hsize_t> end;
};

// The rows `shard` keeps: index, index + count, ...
Rows shard_rows(ShardSpec shard) {
  return {static_cast<hsize_t>(shard.index), static_cast<hsize_t>(shard.count), std::nullopt};
}

// Dataset `key` of `file`, opened and checked once (integers or floats, a shape), then read a
// selection of rows at a time. A scalar is one row.
class OpenDataset {
 public:
  OpenDataset(hid_t file, const std::string& path, const std::string& key)
      : path_(path),
        key_(key),
        dataset_(quietly([&] { return H5Dopen2(file, key.c_str(), H5P_DEFAULT); }), H5Dclose) {
    if (!dataset_.valid())
      fail(path, "no dataset '" + key + "' (datasets present: " + dataset_names(file) + ")");
    const Handle type(H5Dget_type(dataset_.get()), H5Tclose);
    kind_ = H5Tget_class(type.get());
    if (kind_ != H5T_INTEGER && kind_ != H5T_FLOAT)
      fail(path, "dataset '" + key + "' holds " + type_class_name(kind_) +
                     ", not integers or floats");
    const Handle space(H5Dget_space(dataset_.get()), H5Sclose);
    if (H5Sget_simple_extent_type(space.get()) == H5S_NULL)
      fail(path, "dataset '" + key + "' holds no data (an empty dataspace)");
    rank_ = H5Sget_simple_extent_ndims(space.get());
    dims_.resize(static_cast<std::size_t>(std::max(rank_, 0)));
    if (rank_ < 0 || H5Sget_simple_extent_dims(space.get(), dims_.data(), nullptr) < 0)
      fail(path, "dataset '" + key + "': its shape cannot be read");
    for (hsize_t d : dims_) shape_.push_back(static_cast<std::int64_t>(d));
    if (shape_.empty()) shape_ = {1};  // a scalar
  }

  // Its shape in the file ([1] for a scalar).
  const Shape& shape() const { return shape_; }

  // Its rows `rows` (every one by default), as float32.
  NpyArray read(Rows rows) const {
    const Handle space(H5Dget_space(dataset_.get()), H5Sclose);
    Shape shape = shape_;
    const hsize_t end = std::min(rows.end.value_or(static_cast<hsize_t>(shape_[0])),
                                 static_cast<hsize_t>(shape_[0]));
    const hsize_t count = end > rows.start ? (end - rows.start + rows.stride - 1) / rows.stride : 0;
    if (rank_ == 0 && count == 0) {  // a scalar is the first row's
      shape[0] = 0;
      H5Sselect_none(space.get());
    } else if (rank_ > 0 && count < dims_[0]) {
      // A hyperslab of every stride-th row from start.
      std::vector<hsize_t> start(dims_.size(), 0), stride(dims_.size(), 1), counts = dims_;
      start[0] = rows.start;
      stride[0] = rows.stride;
      counts[0] = count;
      shape[0] = static_cast<std::int64_t>(count);
      if (count > 0 && H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start.data(), stride.data(),
                                           counts.data(), nullptr) < 0)
        fail(path_, "dataset '" + key_ + "': rows from " + std::to_string(rows.start) + " cannot be selected");
      if (count == 0) H5Sselect_none(space.get());
    }
    // Loaded whole, as float32: one larger than the machine's memory is named, not a bare
    // bad_alloc (which a kernel that overcommits memory may never give); one within it that
    // the process may still not have (a job's memory limit) is named where allocation fails.
    NpyArray array{Tensor(), kind_ == H5T_INTEGER ? "<i8" : "<f8", kind_ == H5T_INTEGER};
    const std::string too_large = "dataset '" + key_ + "' " + to_string(shape) + " does not fit in memory as float32";
    std::uint64_t bytes = sizeof(float);  // the largest uint64 past it
    for (const std::int64_t d : shape)
      if (__builtin_mul_overflow(bytes, static_cast<std::uint64_t>(std::max<std::int64_t>(d, 0)), &bytes))
        bytes = std::numeric_limits<std::uint64_t>::max();
    if (bytes > detail::physical_memory()) fail(path_, too_large);
    try {
      array.values = Tensor(shape);
    } catch (const std::bad_alloc&) {
      fail(path_, too_large);
    }
    std::vector<hsize_t> memory_dims;
    for (std::int64_t d : shape) memory_dims.push_back(static_cast<hsize_t>(d));
    const Handle memory(H5Screate_simple(static_cast<int>(memory_dims.size()), memory_dims.data(),
                                         nullptr),
                        H5Sclose);
    if (!memory.valid()) fail(path_, "dataset '" + key_ + "': no memory space for " + to_string(shape));
    const herr_t status = array.values.size() == 0 ? 0 : quietly([&] {
      return H5Dread(dataset_.get(), H5T_NATIVE_FLOAT, memory.get(), space.get(), H5P_DEFAULT,
                     array.values.data());
    });
    if (status < 0) {
      if (const std::string missing = missing_filter(); !missing.empty())
        fail(path_, "dataset '" + key_ + "' is compressed with " + missing +
                        ", which this HDF5 library lacks: write it with gzip compression (h5py's "
                        "compression='gzip') or none");
      fail(path_, "dataset '" + key_ + "' cannot be read (a truncated or corrupt file?)");
    }
    return array;
  }

 private:
  // The first filter of the dataset's pipeline this HDF5 library cannot apply, "filter 'lzf'
  // (id 32000)" (h5py's LZF, a plugin), or "".
  std::string missing_filter() const {
    const Handle properties(H5Dget_create_plist(dataset_.get()), H5Pclose);
    if (!properties.valid()) return "";
    const int filters = H5Pget_nfilters(properties.get());
    for (int i = 0; i < filters; ++i) {
      unsigned flags = 0, config = 0;
      std::size_t values = 0;
      char name[256] = "";
      const H5Z_filter_t id =
          H5Pget_filter2(properties.get(), static_cast<unsigned>(i), &flags, &values, nullptr,
                         sizeof name, name, &config);
      if (id >= 0 && quietly([&] { return static_cast<hid_t>(H5Zfilter_avail(id)); }) <= 0)
        return std::string("filter '") + name + "' (id " + std::to_string(id) + ")";
    }
    return "";
  }

  std::string path_, key_;
  Handle dataset_;
  H5T_class_t kind_ = H5T_NO_CLASS;
  int rank_ = 0;
  std::vector<hsize_t> dims_;
  Shape shape_;
};

// `path` opened for reading, or a DataError saying why not.
Handle open_file(const std::string& path, ShardSpec shard) {
  detail::check_shard(shard, path);
  detail::file_size(path, "an HDF5 file");
  Handle file(quietly([&] { return H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT); }), H5Fclose);
  if (!file.valid()) {
    if (quietly([&] { return H5Fis_hdf5(path.c_str()); }) > 0)
      fail(path, "an HDF5 file that cannot be opened for reading (truncated or damaged, or locked "
                 "by a program writing it, which HDF5_USE_FILE_LOCKING=FALSE reads past)");
    fail(path, "not an HDF5 file, or not one this HDF5 library reads");
  }
  return file;
}

}  // namespace

NpyArray load_hdf5(const std::string& path, const std::string& key, ShardSpec shard) {
  const Handle file = open_file(path, shard);
  return OpenDataset(file.get(), path, key).read(shard_rows(shard));
}

void for_each_hdf5_batch(const std::string& path, const std::string& key, std::int64_t batch_size,
                         const std::function<void(const NpyArray& rows, const Shape& shape)>& take) {
  if (batch_size < 1)
    throw InvalidArgument("for_each_hdf5_batch: batch size " + std::to_string(batch_size) + ", expected >= 1");
  const Handle file = open_file(path, {});
  const OpenDataset dataset(file.get(), path, key);
  const auto size = static_cast<hsize_t>(batch_size);
  const auto rows = static_cast<hsize_t>(dataset.shape()[0]);
  hsize_t start = 0;
  do {  // one call for an empty dataset too
    take(dataset.read({start, 1, start + size}), dataset.shape());
    start += size;
  } while (start < rows);
}

Dataset dataset_from_hdf5(const std::string& path, const std::string& features_key,
                          const std::string& targets_key, int num_classes, ShardSpec shard) {
  const Handle file = open_file(path, shard);
  const OpenDataset features(file.get(), path, features_key);
  const OpenDataset targets(file.get(), path, targets_key);
  return detail::dataset_of_arrays(features.read(shard_rows(shard)), features.shape(), targets.read({}), path,
                                   features_key, targets_key, num_classes, shard);
}

}  // namespace cohort::data
