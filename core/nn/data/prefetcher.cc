#include "cohort/core/nn/data/prefetcher.h"

#include <algorithm>
#include <chrono>
#include <utility>

namespace cohort::data {
namespace {

constexpr std::size_t kRingBytes = std::size_t{64} << 20;
constexpr std::size_t kMinDepth = 2, kMaxDepth = 8;
// How long the loader sleeps between looks: from the consumer's pace, within these bounds. At
// the longest, a consumer back from a pause (an evaluation, a checkpoint) waits once at most.
constexpr std::chrono::microseconds kMinNap{20}, kMaxNap{5000};

// A full batch's bytes: features and a label or float targets per example.
std::size_t batch_bytes(const BatchIterator& iterator) {
  const Dataset& data = iterator.dataset();
  const std::size_t per_example =
      static_cast<std::size_t>(data.example_size() + data.target_size()) * sizeof(float) +
      (data.has_labels() ? sizeof(std::int32_t) : 0);
  return static_cast<std::size_t>(iterator.options().batch_size) * per_example;
}

}  // namespace

BatchPrefetcher::~BatchPrefetcher() {
  {
    std::lock_guard lock(mutex_);
    quit_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

// The first batch is filled by the caller.
void BatchPrefetcher::start() {
  Slot first;
  first.returned = iterator_.next(first.batch);
  ring_.resize(std::clamp(kRingBytes / std::max<std::size_t>(batch_bytes(iterator_), 1),
                          kMinDepth, kMaxDepth));
  ring_[0] = std::move(first);
  ready_ = 1;
  thread_ = std::thread([this] { run(); });
}

bool BatchPrefetcher::next(Batch& batch) {
  std::unique_lock lock(mutex_);
  if (!thread_.joinable()) start();
  if (ready_ == 0 && error_ == nullptr) {  // ahead of the loader: wake it rather than wait its nap
    wake_.notify_one();
    filled_.wait(lock, [&] { return ready_ > 0 || error_ != nullptr; });
  }
  if (ready_ == 0) {  // filling this batch threw: rethrown here; the loader tries it again
    std::exception_ptr error = std::exchange(error_, nullptr);
    lock.unlock();
    wake_.notify_one();
    std::rethrow_exception(error);
  }
  Slot& slot = ring_[head_];
  std::swap(batch, slot.batch);
  head_ = (head_ + 1) % depth();
  --ready_;
  ++taken_;
  if (asleep_) wake_.notify_one();  // a loader that waits for a batch to be taken
  return slot.returned;
}

void BatchPrefetcher::seek(std::int64_t epoch, std::int64_t position) {
  std::unique_lock lock(mutex_);
  paused_ = true;  // the loader finishes the batch it is filling, if any, and starts no other
  filled_.wait(lock, [&] { return !filling_; });
  std::exception_ptr bad_position;
  try {
    iterator_.seek(epoch, position);  // checks before it changes anything
    ready_ = 0;  // and whatever filling threw: those batches are not wanted
    error_ = nullptr;
  } catch (...) {
    bad_position = std::current_exception();  // the batches filled ahead stay
  }
  paused_ = false;
  lock.unlock();
  wake_.notify_one();
  if (bad_position) std::rethrow_exception(bad_position);
}

void BatchPrefetcher::run() {
  using Clock = std::chrono::steady_clock;
  std::chrono::microseconds nap = kMinNap;
  bool deep = false;  // the next sleep is untimed
  std::unique_lock lock(mutex_);
  for (;;) {
    if (quit_) return;
    if (!paused_ && !error_ && ready_ < depth()) {
      Slot& slot = ring_[(head_ + ready_) % depth()];
      filling_ = true;
      lock.unlock();
      std::exception_ptr error;
      try {
        slot.returned = iterator_.next(slot.batch);
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      filling_ = false;
      if (error) {
        error_ = error;
      } else {
        ++ready_;
      }
      filled_.notify_one();  // a system call only when next() waits
      continue;
    }
    // Full, paused or failed: sleep until about half the ring is used, or until woken (by
    // next(), seek() or the destructor). After the longest nap with no batch taken (a consumer
    // that evaluates, waits for other tasks, or takes longer than that a step), sleep until the
    // next batch is taken.
    const auto since = Clock::now();
    const std::int64_t taken = taken_;
    if (deep) {
      asleep_ = true;
      wake_.wait(lock);
      asleep_ = false;
    } else {
      wake_.wait_for(lock, nap);
    }
    const std::int64_t used = taken_ - taken;
    deep = used == 0 && nap == kMaxNap;
    if (used > 0) {
      const auto per_batch = std::chrono::duration_cast<std::chrono::microseconds>(
          (Clock::now() - since) / used);
      nap = std::clamp(per_batch * static_cast<std::int64_t>(depth() / 2), kMinNap, kMaxNap);
    } else {
      nap = std::min(nap * 2, kMaxNap);
    }
  }
}

}  // namespace cohort::data
