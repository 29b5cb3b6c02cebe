#include "cohort/core/nn/data/prefetcher.h"

#include <algorithm>
#include <utility>

namespace cohort::data {
namespace {

constexpr std::size_t kRingBytes = std::size_t{64} << 20;
constexpr std::size_t kMinDepth = 2, kMaxDepth = 8;

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
  filled_.wait(lock, [&] { return ready_ > 0 || error_ != nullptr; });
  if (ready_ == 0) {  // filling this batch threw: rethrown here; the loader goes on with the next
    std::exception_ptr error = std::exchange(error_, nullptr);
    lock.unlock();
    wake_.notify_one();
    std::rethrow_exception(error);
  }
  Slot& slot = ring_[head_];
  std::swap(batch, slot.batch);
  const bool returned = slot.returned;
  head_ = (head_ + 1) % depth();
  --ready_;
  // A notification nobody waits for costs no system call: only a sleeping loader's does.
  const bool wake = ready_ <= depth() / 2 && error_ == nullptr;
  lock.unlock();
  if (wake) wake_.notify_one();
  return returned;
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
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return quit_ || (!paused_ && !error_ && ready_ < depth()); });
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
    if (error) {
      error_ = error;
    } else {
      ++ready_;
    }
    filled_.notify_one();
  }
}

}  // namespace cohort::data
