#include "cohort/core/nn/data/batch_iterator.h"

#include <algorithm>
#include <utility>

#include "cohort/core/nn/data/random.h"

namespace cohort::data {

BatchIterator::BatchIterator(Dataset dataset, const BatchOptions& options)
    : dataset_(std::move(dataset)), options_(options) {
  if (options_.batch_size < 1)
    throw InvalidArgument("BatchIterator: batch_size " + std::to_string(options_.batch_size) +
                          " (need >= 1)");
  if (options_.repeat && batches_per_epoch() == 0)
    throw InvalidArgument("BatchIterator: " + dataset_.name() + " view of " +
                          std::to_string(dataset_.size()) + " examples gives no batch of " +
                          std::to_string(options_.batch_size) +
                          (options_.drop_remainder ? " with drop_remainder" : "") +
                          ", so a repeating next() could never return");
  batch_shape_ = dataset_.image_shape();
  batch_shape_.insert(batch_shape_.begin(), options_.batch_size);
  start_epoch(0);
}

BatchIterator BatchIterator::in_order(Dataset dataset, std::int64_t batch_size) {
  return BatchIterator(std::move(dataset), {.batch_size = batch_size,
                                            .shuffle = false,
                                            .drop_remainder = false,
                                            .repeat = false});
}

std::int64_t BatchIterator::batches_per_epoch() const {
  const std::int64_t n = dataset_.size(), b = options_.batch_size;
  return options_.drop_remainder ? n / b : (n + b - 1) / b;
}

void BatchIterator::start_epoch(std::int64_t epoch) {
  epoch_ = epoch;
  position_ = 0;
  const auto indices = dataset_.indices();
  order_.assign(indices.begin(), indices.end());
  if (!options_.shuffle) return;
  // Fisher-Yates with our own bounded draw (random.h): std::shuffle's order differs between
  // standard libraries, and a resumed job must see the same order whatever it was built with.
  std::mt19937_64 engine(detail::mix_seed(options_.seed, static_cast<std::uint64_t>(epoch)));
  for (std::size_t i = order_.size(); i > 1; --i) {
    const std::size_t j = detail::uniform_below(engine, i);
    std::swap(order_[i - 1], order_[j]);
  }
}

std::int64_t BatchIterator::remaining_batch() const {
  const std::int64_t left = dataset_.size() - position_;
  if (left >= options_.batch_size) return options_.batch_size;
  return options_.drop_remainder ? 0 : left;
}

void BatchIterator::seek(std::int64_t epoch, std::int64_t position) {
  if (epoch < 0 || position < 0 || position > dataset_.size())
    throw InvalidArgument("BatchIterator::seek: epoch " + std::to_string(epoch) + ", position " +
                          std::to_string(position) + " (need epoch >= 0, 0 <= position <= " +
                          std::to_string(dataset_.size()) + ")");
  if (epoch != epoch_ || order_.empty()) start_epoch(epoch);
  position_ = position;
}

bool BatchIterator::next(Tensor& images, std::vector<std::int32_t>& labels) {
  std::int64_t b = remaining_batch();
  if (b == 0) {
    start_epoch(epoch_ + 1);
    if (!options_.repeat) return false;
    b = remaining_batch();  // > 0: the constructor refused epochs without a batch
  }
  batch_shape_[0] = b;
  images.resize(batch_shape_);
  labels.resize(static_cast<std::size_t>(b));
  const Storage& storage = *dataset_.storage();
  const std::int64_t stride = dataset_.image_size();
  const float* source = storage.images.data();
  float* out = images.data();
  for (std::int64_t k = 0; k < b; ++k) {
    const std::int64_t at = order_[static_cast<std::size_t>(position_ + k)];
    std::copy_n(source + at * stride, stride, out + k * stride);
    labels[static_cast<std::size_t>(k)] = storage.labels[static_cast<std::size_t>(at)];
  }
  position_ += b;
  return true;
}

}  // namespace cohort::data
