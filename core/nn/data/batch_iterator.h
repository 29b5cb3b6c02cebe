#pragma once
// Mini-batches over a Dataset, reshuffled every epoch, optionally augmented, in an order that a
// restarted job can resume exactly.
//
//   BatchIterator train(dataset.shard(task, workers), {.batch_size = 64, .seed = 7});
//   Batch batch;
//   while (!session.should_stop()) { train.next(batch); ... }          // rolls over epochs
//   save(train.epoch(), train.position());  ...  train.seek(epoch, position);   // resume
//
//   auto eval = BatchIterator::in_order(test_set, 1000);              // one pass, in file order
//   while (eval.next(batch)) { ... }

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "cohort/core/nn/data/dataset.h"
#include "cohort/core/nn/loss.h"
#include "cohort/core/nn/tensor.h"

namespace cohort::data {

/// What image batches go through, for examples of shape [rows, cols, channels]. Normalisation
/// applies to every batch (evaluation too); the random crop and flip only to a training
/// iterator's (not in_order()). The random draws of an example are a function of (seed, epoch,
/// its position in the epoch), so a resumed job sees the same augmented batches.
///
/// Image-shaped float targets move with their image: targets of shape [rows, cols] or
/// [rows, cols, c] (any c), rows and cols those of the examples (a segmentation mask, a clean
/// image to denoise), are cropped and flipped as their example is, by the same draws, their
/// padded pixels set to `target_padding`. Any other targets (class labels, a vector per example,
/// an array of other rows or cols) are left as they are. Targets are never normalised.
struct ImageOptions {
  /// Per-channel (x - mean[c]) / std[c], applied last; empty: none. One entry per channel, or
  /// one for all. The examples' only, never the targets'.
  std::vector<float> mean{}, std{};
  /// Pad each image with this many zero pixels on every side and crop a random window of the
  /// original size (0: no crop).
  std::int64_t crop_padding = 0;
  /// Mirror each image left-right with probability 1/2.
  bool horizontal_flip = false;
  /// The value of an image-shaped target's pixels that a crop pads: 0 by default, as the image's
  /// own (a denoiser's padded input and target agree; a mask's border is class 0 or "off"; a
  /// one-hot mask's row of zeros has no target). For a class-index mask read by
  /// SparseCategoricalCrossEntropyLoss give -1, a pixel without a target for it and its
  /// accuracy, so that the border trains no class the image does not show. A Trainer checks the
  /// value against its loss when it is made (losses that need targets in [0, 1] refuse -1).
  float target_padding = 0.0f;
  /// The user's own augmentation of a training example (any shape, not only images): called
  /// with the example's values after the crop and flip and before normalisation, and a seed of
  /// its own, a function of (the iterator's seed, the epoch, the example's position in it), from
  /// which to draw (std::mt19937_64 rng(seed)): a resumed job sees the same batches. Called from
  /// several threads at once: it must be thread-safe (a pure function of its arguments is).
  std::function<void(std::span<float> example, std::uint64_t seed)> augment{};
  /// The same for an example and its float target together (a mask to keep aligned with its
  /// image): called with both after the crop and flip, the same seed augment would get, from
  /// several threads at once (thread-safe). The iterator refuses it beside `augment`, and for a
  /// dataset with class labels.
  std::function<void(std::span<float> example, std::span<float> target, std::uint64_t seed)>
      augment_with_targets{};

  bool normalizes() const { return !mean.empty(); }
  /// The normalisation alone, in place, on whole examples one after another (a batch): what
  /// new data to predict needs, as training and evaluation saw theirs.
  void normalize(std::span<float> values) const;
  bool randomizes() const {
    return crop_padding > 0 || horizontal_flip || augment || augment_with_targets;
  }
  bool moves_pixels() const { return crop_padding > 0 || horizontal_flip; }
};

struct BatchOptions {
  std::int64_t batch_size = 64;
  /// Shuffle each epoch. The order of epoch e depends only on (seed, e) and the dataset, and is
  /// the same with every compiler and standard library.
  bool shuffle = true;
  std::uint64_t seed = 0;
  /// Skip an epoch's last batch when it would be short (every batch then has batch_size examples).
  bool drop_remainder = true;
  /// true: next() never ends, it moves on to the next epoch by itself. false: next() returns false
  /// once at the end of each epoch (see next()).
  bool repeat = true;
  ImageOptions image{};
};

/// One batch: the features and the labels or targets of b examples.
struct Batch {
  Tensor features;                    ///< [b, example...]
  std::vector<std::int32_t> labels;   ///< b labels (a labelled dataset), else empty
  Tensor targets;                     ///< [b, target...] (float targets), else empty
  /// The labels or the targets, as a loss takes them.
  Targets view() const;
  std::int64_t size() const { return features.rank() > 0 ? features.dim(0) : 0; }
};

/// Fills caller-owned batches from a Dataset. The whole state is (epoch(), position()) plus the
/// options: seek() to a saved pair and the batches that follow are the ones the saved iterator
/// would have produced.
///
/// Holds a Dataset (its examples shared, not copied) and the current epoch's order. Not
/// thread-safe; one iterator per consumer.
class BatchIterator {
 public:
  /// Starts at epoch 0, position 0. Throws InvalidArgument when batch_size < 1, when `repeat` is
  /// set and an epoch holds no batch (fewer examples than batch_size with drop_remainder, or an
  /// empty dataset): next() could never return; and for image options that do not fit the
  /// examples (not [rows, cols, channels], or a mean/std per channel of another count), or both
  /// augment callbacks, or augment_with_targets for a dataset with class labels.
  BatchIterator(Dataset dataset, const BatchOptions& options);

  /// For evaluation: every example once per pass, in dataset order, the last batch possibly short;
  /// next() returns false after the pass (and a further loop makes another pass). `image`'s
  /// normalisation applies; its random crop and flip do not.
  static BatchIterator in_order(Dataset dataset, std::int64_t batch_size,
                                const ImageOptions& image = {});

  /// Writes the next batch, b being batch_size or, for a short last batch, fewer. Resizes the
  /// buffers, which reuse their memory: after the first full batch, steady-state calls allocate
  /// nothing for a dataset in memory (except the order of a new shuffled epoch, built in place).
  /// Examples not in memory are made on every intra-op thread (the threads of the step, if it
  /// runs meanwhile, share the cores with them). A batch that throws (a file that does not
  /// decode) is not taken: the next call tries it again.
  /// At the end of an epoch (no batch left in it): with `repeat`, goes on with the first batch of
  /// the next epoch; without, leaves the batch alone, moves to the next epoch and returns false.
  bool next(Batch& batch);
  /// The same for a labelled dataset: `images` [b, example...] and b `labels`. Throws
  /// InvalidArgument for a dataset with float targets.
  bool next(Tensor& images, std::vector<std::int32_t>& labels);

  /// Current epoch, from 0.
  std::int64_t epoch() const { return epoch_; }
  /// Examples of the current epoch already delivered (0 ... dataset size).
  std::int64_t position() const { return position_; }
  /// Resumes at a state read from epoch() and position() of an iterator with the same dataset and
  /// options. Throws InvalidArgument unless epoch >= 0 and 0 <= position <= dataset size.
  void seek(std::int64_t epoch, std::int64_t position);

  /// Batches next() delivers per epoch.
  std::int64_t batches_per_epoch() const;
  const Dataset& dataset() const { return dataset_; }
  /// Whether its crops and flips move the targets with their examples (image-shaped targets).
  bool moves_targets() const { return move_targets_; }
  const BatchOptions& options() const { return options_; }

 private:
  void start_epoch(std::int64_t epoch);
  std::int64_t remaining_batch() const;
  // Copies example `at` (storage index) into `out`, cropped, flipped and normalised as asked;
  // `k` is its position in the epoch (for the random draws). An example not in memory is made
  // in `scratch` first where it is cropped or flipped. With `target_out` (see own_targets_),
  // writes its target there too, moved and augmented with it. Thread-safe.
  void copy_example(std::int64_t at, std::int64_t k, float* out, std::vector<float>& scratch,
                    float* target_out) const;
  // The next `b` examples of a dataset not in memory into `out` (and their targets into
  // `targets` where copy_example makes them), made on every intra-op thread.
  void make_examples(std::int64_t b, float* out, float* targets) const;
  bool fill(Tensor& features, std::vector<std::int32_t>& labels, Tensor* targets);

  Dataset dataset_;
  BatchOptions options_;
  bool randomize_ = false;
  bool move_targets_ = false;  // image-shaped targets, cropped and flipped with their image
  bool own_targets_ = false;   // copy_example writes the targets (moved or augmented)
  std::int64_t epoch_ = 0;
  std::int64_t position_ = 0;
  std::vector<std::int64_t> order_;  // the dataset's example indices, in this epoch's order
  Shape batch_shape_;                // [b, example...], kept so next() allocates nothing
  Shape target_shape_;               // [b, target...]
};

}  // namespace cohort::data
