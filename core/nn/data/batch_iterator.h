#pragma once
// Mini-batches over a Dataset, reshuffled every epoch, in an order that a restarted job can
// resume exactly.
//
//   BatchIterator train(dataset.shard(task, workers), {.batch_size = 64, .seed = 7});
//   Tensor x;  std::vector<std::int32_t> y;
//   while (!session.should_stop()) { train.next(x, y); ... }           // rolls over epochs
//   save(train.epoch(), train.position());  ...  train.seek(epoch, position);   // resume
//
//   auto eval = BatchIterator::in_order(test_set, 1000);              // one pass, in file order
//   while (eval.next(x, y)) { ... }

#include <cstdint>
#include <vector>

#include "cohort/core/nn/data/dataset.h"
#include "cohort/core/nn/tensor.h"

namespace cohort::data {

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
};

/// Fills caller-owned batches from a Dataset. The whole state is (epoch(), position()) plus the
/// options: seek() to a saved pair and the batches that follow are the ones the saved iterator
/// would have produced.
///
/// Holds a Dataset (shared pixels, its own index list) and the current epoch's order. Not
/// thread-safe; one iterator per consumer.
class BatchIterator {
 public:
  /// Starts at epoch 0, position 0. Throws InvalidArgument when batch_size < 1, or when `repeat`
  /// is set and an epoch holds no batch (fewer examples than batch_size with drop_remainder, or
  /// an empty dataset): next() could never return.
  BatchIterator(Dataset dataset, const BatchOptions& options);

  /// For evaluation: every example once per pass, in dataset order, the last batch possibly short;
  /// next() returns false after the pass (and a further loop makes another pass).
  static BatchIterator in_order(Dataset dataset, std::int64_t batch_size);

  /// Writes the next batch into `images` ([b, rows, cols, 1]) and `labels` (b entries), b being
  /// batch_size or, for a short last batch, fewer. Resizes the buffers, which reuse their memory:
  /// after the first full batch, steady-state calls allocate nothing (except the order of a new
  /// shuffled epoch, built in place).
  /// At the end of an epoch (no batch left in it): with `repeat`, goes on with the first batch of
  /// the next epoch; without, leaves the buffers alone, moves to the next epoch and returns false.
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
  const BatchOptions& options() const { return options_; }

 private:
  void start_epoch(std::int64_t epoch);
  std::int64_t remaining_batch() const;

  Dataset dataset_;
  BatchOptions options_;
  std::int64_t epoch_ = 0;
  std::int64_t position_ = 0;
  std::vector<std::int64_t> order_;  // storage indices of this epoch, in delivery order
  Shape batch_shape_;                // [b, rows, cols, 1], kept so next() allocates nothing
};

}  // namespace cohort::data
