#include "cohort/core/nn/data/prefetcher.h"

#include <algorithm>
#include <utility>

namespace cohort::data {
namespace {

constexpr std::size_t kRingBytes = std::size_t{64} << 20;
constexpr std::size_t kMinDepth = 2, kMaxDepth = 8;

std::size_t bytes(const Batch& batch) {
  return static_cast<std::size_t>(batch.features.size() + batch.targets.size()) * sizeof(float) +
         batch.labels.size() * sizeof(std::int32_t);
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

// The first batch is filled by the caller; its size sets the depth.
void BatchPrefetcher::start() {
  Slot first;
  first.returned = iterator_.next(first.batch);
  const std::size_t depth =
      std::clamp(kRingBytes / std::max<std::size_t>(bytes(first.batch), 1), kMinDepth, kMaxDepth);
  ring_.resize(depth);
  ring_[0] = std::move(first);
  ready_ = 1;
  thread_ = std::thread([this] { run(); });
}

bool BatchPrefetcher::next(Batch& batch) {
  std::unique_lock lock(mutex_);
  if (!thread_.joinable()) start();
  filled_.wait(lock, [&] { return ready_ > 0 || error_ != nullptr; });
  if (ready_ == 0) {  // filling this batch threw: rethrown here; the loader goes on with the next
    std::exception_ptr error = std::exchange(error_, nullptr);
    const bool wake = sleeping_;
    lock.unlock();
    if (wake) wake_.notify_one();
    std::rethrow_exception(error);
  }
  Slot& slot = ring_[head_];
  std::swap(batch, slot.batch);
  const bool returned = slot.returned;
  head_ = (head_ + 1) % depth();
  --ready_;
  const bool wake = sleeping_ && ready_ <= depth() / 2 && error_ == nullptr;
  lock.unlock();
  if (wake) wake_.notify_one();
  return returned;
}

void BatchPrefetcher::stop_filling(std::unique_lock<std::mutex>& lock) {
  paused_ = true;
  filled_.wait(lock, [&] { return !filling_; });
}

void BatchPrefetcher::seek(std::int64_t epoch, std::int64_t position) {
  std::unique_lock lock(mutex_);
  stop_filling(lock);
  ready_ = 0;  // and whatever filling threw: those batches are not wanted
  error_ = nullptr;
  paused_ = false;
  // May throw (a position past the epoch): the iterator is then where it was, and the loader
  // refills from there.
  iterator_.seek(epoch, position);
  lock.unlock();
  wake_.notify_one();
}

void BatchPrefetcher::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    sleeping_ = true;
    wake_.wait(lock, [&] { return quit_ || (!paused_ && !error_ && ready_ < depth()); });
    sleeping_ = false;
    if (quit_) return;
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
    if (paused_) {  // seek(): the batch is not wanted
      filled_.notify_one();
      continue;
    }
    if (error) {
      error_ = error;
    } else {
      ++ready_;
    }
    filled_.notify_one();
  }
}

}  // namespace cohort::data
