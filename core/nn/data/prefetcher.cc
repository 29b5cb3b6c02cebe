#include "cohort/core/nn/data/prefetcher.h"

#include <utility>

namespace cohort::data {

BatchPrefetcher::~BatchPrefetcher() {
  {
    std::lock_guard lock(mutex_);
    quit_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void BatchPrefetcher::wait_filled(std::unique_lock<std::mutex>& lock) {
  filled_.wait(lock, [&] { return !filling_; });
  if (error_) {
    std::exception_ptr error = std::exchange(error_, nullptr);
    std::rethrow_exception(error);
  }
}

bool BatchPrefetcher::next(Batch& batch) {
  std::unique_lock lock(mutex_);
  wait_filled(lock);
  bool returned;
  if (ready_) {
    std::swap(batch, ahead_);
    returned = ahead_returned_;
    ready_ = false;
  } else {  // the first batch, or the first after a seek: nothing was filled ahead
    returned = iterator_.next(batch);
  }
  filling_ = true;
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  lock.unlock();
  wake_.notify_one();
  return returned;
}

void BatchPrefetcher::seek(std::int64_t epoch, std::int64_t position) {
  std::unique_lock lock(mutex_);
  filled_.wait(lock, [&] { return !filling_; });
  ready_ = false;  // and whatever filling it threw: the batch is not wanted
  error_ = nullptr;
  iterator_.seek(epoch, position);
}

void BatchPrefetcher::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return quit_ || filling_; });
    if (quit_) return;
    lock.unlock();
    std::exception_ptr error;
    bool returned = false;
    try {
      returned = iterator_.next(ahead_);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    ahead_returned_ = returned;
    ready_ = error == nullptr;
    error_ = error;
    filling_ = false;
    filled_.notify_one();
  }
}

}  // namespace cohort::data
