#pragma once
// Batches filled on a thread of their own while the caller trains on earlier ones: the input
// pipeline's prefetch (TensorFlow's dataset.prefetch(N)). A shuffled batch is gathered from all
// over the dataset, mostly from memory rather than cache; behind a step it costs the step nothing.

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>

#include "cohort/core/nn/data/batch_iterator.h"

namespace cohort::data {

/// Owns a BatchIterator and keeps up to depth() batches filled ahead in the background. The
/// batches, and their order, are the iterator's. The loader thread starts with the first next()
/// and fills until depth() batches wait. Then it sleeps on a timer of its own, for about the time
/// the consumer takes to use half of them (measured as it goes), and tops them up when it wakes.
/// A fast consumer wakes it only when it finds no batch ready: waking a thread costs the waker a
/// system call (and, in a virtual machine, an interrupt between CPUs), and one every few steps
/// was 2% of a small model's step. A slow or idle one (no batch taken in the longest nap, 5 ms)
/// lets it sleep until the next batch is taken. Not thread-safe; one consumer.
class BatchPrefetcher {
 public:
  explicit BatchPrefetcher(BatchIterator iterator) : iterator_(std::move(iterator)) {}
  ~BatchPrefetcher();
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  /// Puts the next batch into `batch` (whose buffers are reused for a batch after), and returns
  /// what the iterator's next() returned for it. An exception thrown while filling a batch is
  /// thrown here, by the call that would have returned it.
  bool next(Batch& batch);
  /// BatchIterator::seek(), dropping the batches filled ahead. A position it refuses throws and
  /// changes nothing.
  void seek(std::int64_t epoch, std::int64_t position);

  std::int64_t batches_per_epoch() const { return iterator_.batches_per_epoch(); }
  const Dataset& dataset() const { return iterator_.dataset(); }
  bool moves_targets() const { return iterator_.moves_targets(); }
  /// Batches filled ahead at most: as many full batches as fit in 64 MB, from 2 to 8 (set by the
  /// first next()).
  std::size_t depth() const { return ring_.size(); }

 private:
  struct Slot {
    Batch batch;
    bool returned = true;  // what the iterator's next() returned for it
  };
  void run();
  void start();

  BatchIterator iterator_;
  std::vector<Slot> ring_;     // ready_ filled batches from head_ on; the rest free
  std::size_t head_ = 0;
  std::size_t ready_ = 0;
  std::int64_t taken_ = 0;     // batches next() has returned
  bool asleep_ = false;        // the loader sleeps until next() takes a batch
  bool filling_ = false;       // the loader is filling ring_[(head_ + ready_) % depth()]
  bool paused_ = false;        // seek(): the loader must not start another batch
  bool quit_ = false;
  std::exception_ptr error_;   // thrown filling the batch after the ready ones
  std::mutex mutex_;
  std::condition_variable wake_, filled_;
  std::thread thread_;
};

}  // namespace cohort::data
