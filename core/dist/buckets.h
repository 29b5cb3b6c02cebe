#pragma once
// The flat gradient buffer cut into buckets for sending while the backward pass still runs, as
// PyTorch DDP and Horovod send them: from the buffer's end (the last layers' variables, whose
// gradients backward finishes first) down, each bucket started as soon as the pass reports it
// final (GradientListener). Every mode that sends during backward (allreduce, and the ps modes'
// pushes) cuts the same way.

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace cohort {

class Buckets {
 public:
  /// The most buckets a buffer is cut into. Open MPI moves its non-blocking operations on by
  /// walking all of those still open at each test, so the cost of a step grows with the square
  /// of the buckets in flight: an mlp's 235,146 gradients on 2 workers ran at 164k images/s in
  /// 4 buckets, 109k in 256, 60k in 1,024 and 8.5k in 4,096 (240k without buckets).
  static constexpr std::int64_t kMaxBuckets = 256;

  Buckets() = default;
  /// `size` elements in buckets of at most `bucket_elements` (at least 1), or of as many as
  /// kMaxBuckets buckets need where that is more; none started.
  Buckets(std::int64_t size, std::int64_t bucket_elements)
      : size_(size),
        bucket_(std::max({std::int64_t{1}, bucket_elements, (size + kMaxBuckets - 1) / kMaxBuckets})) {}

  std::size_t count() const { return static_cast<std::size_t>((size_ + bucket_ - 1) / bucket_); }
  /// Bucket k holds elements [begin(k), end(k)); bucket 0 the buffer's last ones.
  std::int64_t end(std::size_t k) const { return size_ - static_cast<std::int64_t>(k) * bucket_; }
  std::int64_t begin(std::size_t k) const { return std::max<std::int64_t>(0, end(k) - bucket_); }
  std::int64_t size(std::size_t k) const { return end(k) - begin(k); }
  /// Buckets started so far, in order: 0 .. started() - 1.
  std::size_t started() const { return started_; }

  /// Every element from `from` on is final: calls start(k) for each bucket not yet started that
  /// lies there, in order; returns how many it started.
  template <typename Start>
  std::size_t start_final(std::int64_t from, Start&& start) {
    const std::size_t before = started_;
    while (started_ < count() && begin(started_) >= from) start(started_++);
    return started_ - before;
  }
  /// The buffer is final: starts the rest; returns how many.
  template <typename Start>
  std::size_t start_rest(Start&& start) {
    return start_final(0, start);
  }

 private:
  std::int64_t size_ = 0;
  std::int64_t bucket_ = 1;
  std::size_t started_ = 0;
};

}  // namespace cohort
