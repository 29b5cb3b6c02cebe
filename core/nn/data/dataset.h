#pragma once
// Image-classification datasets: loading Fashion-MNIST / MNIST IDX files, a synthetic stand-in for
// tests, and sharding over workers without copying the pixels.
//
//   auto train = cohort::data::fashion_mnist(cohort::data::Split::kTrain);   // --data_dir
//   auto mine  = train.shard(server.task_index(), cluster.num_tasks("worker"));
//   cohort::data::BatchIterator batches(mine, {.batch_size = 64, .seed = 1});   // batch_iterator.h
//
// Pixels are stored as float32 in [0, 1] (the byte value / 255), with no mean/std normalisation,
// the same for every split; a model that wants centred inputs does that itself.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/tensor.h"

namespace cohort::data {

/// A data file that cannot be used: missing, not IDX, truncated, inconsistent. what() names the
/// file and the fault in one line.
class DataError : public Error {
 public:
  using Error::Error;
};

/// The loaded examples, immutable once built and shared (std::shared_ptr<const Storage>) by every
/// Dataset that views them, so a process holds the pixels once however it shards them.
struct Storage {
  Tensor images;                      ///< [n, rows, cols, 1] (NHWC), values in [0, 1]
  std::vector<std::int32_t> labels;   ///< n labels in [0, num_classes)
  int num_classes = 10;
  std::string name;                   ///< where the examples came from, for messages
};

/// A view of some examples of a Storage, in a fixed order given by an index list.
///
/// Copying a Dataset copies the index list (8 bytes per example), never the pixels. Const methods
/// are safe to call from several threads.
class Dataset {
 public:
  /// An empty dataset (28x28x1 images, 10 classes), a placeholder to assign a real one to.
  Dataset();
  /// Every example of `storage`, in storage order. Throws InvalidArgument when the storage is null
  /// or inconsistent (image shape not [n, rows, cols, 1], label count or range wrong).
  explicit Dataset(std::shared_ptr<const Storage> storage);

  std::int64_t size() const { return static_cast<std::int64_t>(indices_.size()); }
  /// {rows, cols, 1}: one example's shape (HWC); {28, 28, 1} for (Fashion-)MNIST.
  Shape image_shape() const;
  /// Floats per example (rows * cols).
  std::int64_t image_size() const { return image_size_; }
  int num_classes() const { return storage_->num_classes; }
  const std::string& name() const { return storage_->name; }

  /// Pixels of example `i` (0 <= i < size()), a view into the shared storage.
  std::span<const float> image(std::int64_t i) const;
  std::int32_t label(std::int64_t i) const;

  /// Worker `index` of `count` gets examples index, index + count, index + 2 * count, ... of this
  /// dataset: the shards are disjoint, cover the dataset, and their sizes differ by at most one.
  /// Striding (not blocks) keeps every shard's class mix close to the whole even when the file is
  /// sorted by class. Shares the storage. Throws InvalidArgument unless 0 <= index < count.
  Dataset shard(int index, int count) const;

  /// The shared storage (the same pointer for a dataset and all its shards) and the positions of
  /// this dataset's examples in it.
  const std::shared_ptr<const Storage>& storage() const { return storage_; }
  std::span<const std::int64_t> indices() const { return indices_; }

 private:
  Dataset(std::shared_ptr<const Storage> storage, std::vector<std::int64_t> indices);

  std::shared_ptr<const Storage> storage_;
  std::vector<std::int64_t> indices_;
  std::int64_t image_size_ = 0;
};

/// What load_idx expects of the files.
struct IdxOptions {
  std::int64_t rows = 28;
  std::int64_t cols = 28;
  int num_classes = 10;
};

/// Reads an IDX image file (magic 0x00000803: n, rows, cols, then uint8 pixels) and an IDX label
/// file (magic 0x00000801: n, then uint8 labels). Each file may be gzip-compressed or raw; which
/// one is told by the gzip magic bytes, not the file name. Blocking; thread-safe.
/// Throws DataError naming the file for: a missing or unreadable file, a wrong magic (found vs
/// expected), a truncated or overlong file (bytes expected vs present), images not rows x cols,
/// a label count different from the image count, a label >= num_classes (with its index).
Dataset load_idx(const std::string& images_path, const std::string& labels_path,
                 const IdxOptions& options = {});

enum class Split { kTrain, kTest };

/// Fashion-MNIST (or MNIST, same layout) from `dir`: train-{images-idx3,labels-idx1}-ubyte or
/// t10k-..., each as NAME.gz or NAME (the first that exists). Throws DataError when neither does.
Dataset fashion_mnist(const std::string& dir, Split split);
/// The same from the directory given by the `data_dir` flag (default
/// /usr/share/datasets/fashion-mnist, Debian's dataset-fashion-mnist package).
Dataset fashion_mnist(Split split);

/// Shape and difficulty of synthetic().
struct SyntheticOptions {
  std::int64_t rows = 28;
  std::int64_t cols = 28;
  int num_classes = 10;
  float noise = 0.25f;  ///< amplitude of the uniform pixel noise, in [-noise, noise]
};

/// `n` learnable examples without any file: class c is a bright blob whose centre sits at angle
/// 2*pi*c/num_classes on a circle around the image centre, jittered by up to one pixel, scaled in
/// brightness and covered with uniform noise, clipped to [0, 1]. Labels are drawn uniformly. The
/// class patterns do not depend on `seed`, so two seeds give a train and a test set of the same
/// task. Deterministic: the labels and random draws are the same on every platform; pixel values
/// may differ in the last bit where libm's exp() does.
Dataset synthetic(std::int64_t n, std::uint64_t seed, const SyntheticOptions& options = {});

}  // namespace cohort::data
