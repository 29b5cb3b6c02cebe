#pragma once
// Datasets of N-dimensional float examples with class labels or float targets: Fashion-MNIST /
// MNIST IDX files, NumPy .npy/.npz, CSV, image and TFRecord files (loaders.h), text folders
// (text.h), the user's own arrays, a synthetic stand-in for tests; sharded over workers, each
// keeping a copy of its part. The examples are held as floats, or made as they are used (an
// ExampleSource: images decoded from their files as batches take them, a series' windows).
//
//   auto mine = cohort::data::fashion_mnist(cohort::data::Split::kTrain)     // --data_dir
//                   .shard(server.replica_index(), server.num_replicas());    // the rest dropped
//   cohort::data::BatchIterator batches(mine, {.batch_size = 64, .seed = 1});   // batch_iterator.h
//
//   auto mine = cohort::data::Dataset::from_arrays(features, labels, /*num_classes=*/3);
//
// Fashion-MNIST pixels are stored as float32 in [0, 1] (the byte value / 255); per-channel
// normalisation is a batch option (ImageOptions in batch_iterator.h).

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/loss.h"
#include "cohort/core/nn/tensor.h"

namespace cohort {
class CrossReplicaSum;
}  // namespace cohort

namespace cohort::data {

/// A data file that cannot be used: missing, of the wrong format, truncated, inconsistent. what()
/// names the file and the fault in one line. kInputStatus, but for a read or write that failed
/// and may not fail again (EIO, ESTALE, a full disk: kFaultStatus).
class DataError : public Error {
 public:
  explicit DataError(const std::string& what, int exit_status = kInputStatus) : Error(what, exit_status) {}
};

/// Examples made as they are used instead of held as floats (images decoded from their files as
/// batches take them): a Storage's `source`. Implementations must be thread-safe.
class ExampleSource {
 public:
  virtual ~ExampleSource() = default;
  /// Writes example `i` of the storage (its example size in floats) to `out`. Throws DataError
  /// naming the file for a fault of the data.
  virtual void read(std::int64_t i, float* out) const = 0;
};

/// The loaded examples, immutable once built and shared (std::shared_ptr<const Storage>) by every
/// copy of a Dataset that views them.
struct Storage {
  Tensor features;                    ///< [n, ...]: images are [n, rows, cols, channels] (NHWC)
  /// Or, features left empty, examples made on use by `source`, of shape `source_shape` [n, ...].
  std::shared_ptr<const ExampleSource> source{};
  Shape source_shape{};
  std::vector<std::int32_t> labels;   ///< n class labels in [0, num_classes), or none
  Tensor targets;                     ///< [n, ...] float targets, or empty (then labels)
  int num_classes = 10;               ///< with labels
  std::string name;                   ///< where the examples came from, for messages
};

/// The examples of a Storage, in storage order.
///
/// Copying a Dataset shares the storage; it never copies the examples. Const methods are safe to
/// call from several threads.
class Dataset {
 public:
  /// An empty dataset (28x28x1 images, 10 classes), a placeholder to assign a real one to.
  Dataset();
  /// Every example of `storage`, in storage order. Throws InvalidArgument when the storage is null
  /// or inconsistent (features without a batch dimension, neither or both of labels and targets,
  /// a count that differs from the features', a label out of range).
  explicit Dataset(std::shared_ptr<const Storage> storage);

  /// The caller's arrays as a dataset (moved in, held once): features [n, ...] with n class labels
  /// in [0, num_classes), or with float targets [n, ...]. Throws InvalidArgument as the
  /// constructor does, naming `name`.
  static Dataset from_arrays(Tensor features, std::vector<std::int32_t> labels, int num_classes,
                             std::string name = "arrays");
  static Dataset from_arrays(Tensor features, Tensor targets, std::string name = "arrays");

  std::int64_t size() const { return size_; }
  /// One example's shape: {28, 28, 1} for (Fashion-)MNIST, {d} for feature vectors.
  Shape example_shape() const;
  /// Floats per example.
  std::int64_t example_size() const { return example_size_; }
  /// Class labels (true), or float targets.
  bool has_labels() const { return storage_->targets.rank() == 0; }
  int num_classes() const { return storage_->num_classes; }
  /// One example's target shape (float targets), {} with labels.
  Shape target_shape() const;
  std::int64_t target_size() const { return target_size_; }
  /// What the examples are compared with, for Model::check_data().
  TargetSpec target_spec() const;
  const std::string& name() const { return storage_->name; }

  /// Whether the examples are held as floats (else they are made as they are used: example()
  /// has nothing to view, read_example() makes them).
  bool in_memory() const { return storage_->source == nullptr; }
  /// Example `i` (0 <= i < size()), a view into the shared storage. Throws Error for a dataset
  /// not in memory.
  std::span<const float> example(std::int64_t i) const;
  /// Example `i` written to `out` (example_size() floats), in memory or not. Thread-safe.
  void read_example(std::int64_t i, float* out) const;
  std::int32_t label(std::int64_t i) const;
  std::span<const float> target(std::int64_t i) const;
  /// The names for image data: example_shape(), example_size(), example().
  Shape image_shape() const { return example_shape(); }
  std::int64_t image_size() const { return example_size_; }
  std::span<const float> image(std::int64_t i) const { return example(i); }

  /// Worker `index` of `count` gets examples index, index + count, index + 2 * count, ... of this
  /// dataset: the shards are disjoint, cover the dataset, and their sizes differ by at most one.
  /// Striding (not blocks) keeps every shard's class mix close to the whole even when the file is
  /// sorted by class. A shard holds a copy of its own examples (with count 1, the dataset itself),
  /// so a worker that drops the whole dataset keeps 1/count of it in memory, not all of it (a
  /// dataset not in memory gives one that makes its examples from the same source). Throws
  /// InvalidArgument unless 0 <= index < count.
  Dataset shard(int index, int count) const;

  /// The examples at `indices` (each in [0, size()), in any order, repeats allowed), in that
  /// order, in storage of their own (a dataset not in memory gives one that makes its examples
  /// from the same source). Throws std::out_of_range for an index outside.
  Dataset subset(std::span<const std::int64_t> indices) const;

  /// Keras's validation_split: {training, validation}, the validation part holding
  /// floor(fraction * size()) examples chosen by a shuffle seeded with `seed`, each part in this
  /// dataset's order. Every process that splits the same dataset with the same seed gets the
  /// same parts (load_image_folder's validation_split chooses the same positions). Throws
  /// InvalidArgument unless 0 < fraction < 1 and both parts hold an example.
  std::pair<Dataset, Dataset> split(double fraction, std::uint64_t seed) const;
  /// One part of split(fraction, seed) (the validation part if `validation`), and of it the
  /// examples shard(index, count) would keep, without copies of the rest: a worker's share of
  /// the training part, or the chief's validation part.
  Dataset split_part(double fraction, std::uint64_t seed, bool validation, int index = 0, int count = 1) const;

  /// A time series' windows (Keras's timeseries_dataset_from_array): this dataset's examples
  /// are the series' steps in order (a table's rows), and window i is the `length` steps from
  /// i * stride on, [length, example...], with the label or target of the step `horizon` after
  /// its last (horizon 0: its last step's own; a target column that is the next value, say).
  /// The windows are made as they are used, from this dataset's storage, which they share: a
  /// long series is never held `length` times. Throws InvalidArgument for a length or stride
  /// below 1, a negative horizon, or a series shorter than length + horizon.
  Dataset windows(std::int64_t length, std::int64_t horizon = 1, std::int64_t stride = 1) const;

  /// The storage the examples are in, shared by copies of this dataset: example i is its i-th.
  const std::shared_ptr<const Storage>& storage() const { return storage_; }

 private:
  // split()'s positions: {training, validation}, each in this dataset's order.
  std::array<std::vector<std::int64_t>, 2> split_indices(double fraction, std::uint64_t seed) const;
  // Throws std::out_of_range unless 0 <= i < size().
  void check_index(std::int64_t i) const;
  // [n, example...]: the features', or the source's.
  const Shape& full_shape() const;

  std::shared_ptr<const Storage> storage_;
  std::int64_t size_ = 0;
  std::int64_t example_size_ = 0;
  std::int64_t target_size_ = 0;
};

/// What standardising a dataset's features takes: per feature (the last axis of the example
/// shape, the channels of ImageOptions), the sum and the sum of squares over the examples, and
/// their count. Those of several shards add up to the whole set's (add_over).
struct FeatureSums {
  std::int64_t count = 0;
  std::vector<double> sum{}, sum_squares{};

  /// Every replica's sums added up, so that each holds the whole set's: collective over
  /// `replicas` (e.g. ReplicaSum over Server::replicas()), every replica with as many features.
  void add_over(CrossReplicaSum& replicas);
  /// One feature for all: the sums of every feature together (the pixels of grey images
  /// [height, width], whose last axis is a row's, not channels).
  void pool();

  /// The per-feature mean and standard deviation for ImageOptions::mean and std (a constant
  /// feature's deviation is 1, so it only loses its mean). Throws InvalidArgument when count is
  /// not positive.
  void moments(std::vector<float>& mean, std::vector<float>& std) const;
};
/// Sums over every example of `data`.
FeatureSums feature_sums(const Dataset& data);

/// Empty when `data`'s values lie on the scale of those `reference` summed (a training set's
/// feature_sums()), else why not, in words: pooled over every feature, a mean more than 10 of
/// the reference's standard deviations from its mean, or a standard deviation 20 times larger
/// or smaller. Data prepared otherwise than the training data give that (bytes 0-255 beside
/// values scaled to [0, 1]; values of a large scale standardised in one file and not in the
/// other), and a model's outputs on them mean nothing. A milder drift is not told.
std::string scale_mismatch(FeatureSums reference, const Dataset& data);

/// Class weights for SoftmaxCrossEntropyLoss from `spec`: "balanced", n / (classes * n_c) for
/// each class c of data's labels, so that every class weighs as much in all (scikit-learn's
/// compute_class_weight("balanced") where every class has examples; a class without any weighs
/// 1, and still counts among the classes), counted over every replica's part when `replicas` is
/// given (collective: each replica passes its own); or one weight >= 0 per class, separated by
/// commas, not all 0. InvalidArgument naming `what` (a flag) for another spec, a list of another
/// length than data's classes, or data without class labels.
std::vector<float> class_weights(const std::string& spec, const Dataset& data,
                                 CrossReplicaSum* replicas = nullptr,
                                 const std::string& what = "class weights");
/// Positive weights for SigmoidCrossEntropyLoss from `spec`: "balanced", for each output the
/// negatives over the positives among data's float targets (a target t counting t positive and
/// 1 - t negative; an output never positive weighs 1), counted over every replica's part when
/// `replicas` is given (collective: each replica passes its own); or one weight >= 0 for every
/// output, or one per output, separated by commas, not all 0. InvalidArgument naming `what` (a
/// flag) for another spec, a list of another length, or data with class labels.
std::vector<float> positive_weights(const std::string& spec, const Dataset& data,
                                    CrossReplicaSum* replicas = nullptr,
                                    const std::string& what = "positive weights");
/// "class weights: 0.5279 9.464" (`what`: "class weights"), each to 4 significant digits, for
/// a program's log.
std::string describe_class_weights(const std::vector<float>& weights,
                                   const std::string& what = "class weights");

/// A worker's share of a dataset: the examples index, index + count, index + 2 count, ... (what
/// Dataset::shard(index, count) keeps).
struct ShardSpec {
  int index = 0;
  int count = 1;
};

/// What load_idx expects of the files, and which examples it keeps.
struct IdxOptions {
  std::int64_t rows = 28;
  std::int64_t cols = 28;
  int num_classes = 10;
  /// Only these examples are converted and kept: a worker reading its shard never holds the
  /// whole set as floats, only its bytes while they are read.
  ShardSpec shard{};
};

/// Reads an IDX image file (magic 0x00000803: n, rows, cols, then uint8 pixels) and an IDX label
/// file (magic 0x00000801: n, then uint8 labels). Each file may be gzip-compressed or raw; which
/// one is told by the gzip magic bytes, not the file name. Blocking; thread-safe.
/// Throws DataError naming the file for: a missing or unreadable file, a wrong magic (found vs
/// expected), a truncated or overlong file (bytes expected vs present), images not rows x cols,
/// a label count different from the image count, a label >= num_classes (with its index); every
/// example is checked, also where options.shard keeps a part of them.
Dataset load_idx(const std::string& images_path, const std::string& labels_path,
                 const IdxOptions& options = {});

enum class Split { kTrain, kTest };

/// Fashion-MNIST (or MNIST, same layout) from `dir`: train-{images-idx3,labels-idx1}-ubyte or
/// t10k-..., each as NAME.gz or NAME (the first that exists); `shard` of it alone (IdxOptions).
/// Throws DataError when neither file exists.
Dataset fashion_mnist(const std::string& dir, Split split, ShardSpec shard = {});
/// The same from the directory given by the `data_dir` flag (default
/// /usr/share/datasets/fashion-mnist, Debian's dataset-fashion-mnist package).
Dataset fashion_mnist(Split split, ShardSpec shard = {});

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
