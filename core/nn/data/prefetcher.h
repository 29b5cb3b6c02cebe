#pragma once
// Batches filled on a thread of their own while the caller trains on the previous one: the
// input pipeline's prefetch of one batch (TensorFlow's dataset.prefetch(1)). A shuffled batch is
// gathered from all over the dataset, mostly from memory rather than cache; behind a step it
// costs the step nothing.

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>

#include "cohort/core/nn/data/batch_iterator.h"

namespace cohort::data {

/// Owns a BatchIterator and keeps its next batch filling in the background. The batches, and
/// their order, are the iterator's. The loader thread starts with the first next() and sleeps
/// between batches. Not thread-safe; one consumer.
class BatchPrefetcher {
 public:
  explicit BatchPrefetcher(BatchIterator iterator) : iterator_(std::move(iterator)) {}
  ~BatchPrefetcher();
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  /// Puts the next batch into `batch` (whose buffers are reused for the batch after), returns
  /// what the iterator's next() returned for it, and starts filling the one after. An exception
  /// thrown while filling a batch is thrown here, by the call that would have returned it.
  bool next(Batch& batch);
  /// BatchIterator::seek(), dropping the batch filled ahead.
  void seek(std::int64_t epoch, std::int64_t position);

  std::int64_t batches_per_epoch() const { return iterator_.batches_per_epoch(); }
  const Dataset& dataset() const { return iterator_.dataset(); }

 private:
  void run();
  // Waits, with `lock` held, until no batch is being filled; rethrows what filling it threw.
  void wait_filled(std::unique_lock<std::mutex>& lock);

  BatchIterator iterator_;
  Batch ahead_;               // the batch filled ahead, when `ready_`
  bool ahead_returned_ = true;  // what the iterator's next() returned for it
  bool ready_ = false;
  bool filling_ = false;
  bool quit_ = false;
  std::exception_ptr error_;
  std::mutex mutex_;
  std::condition_variable wake_, filled_;
  std::thread thread_;
};

}  // namespace cohort::data
