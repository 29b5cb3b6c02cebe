#include "cohort/core/nn/data/batch_iterator.h"

#include <algorithm>
#include <exception>
#include <numeric>
#include <utility>

#include "cohort/core/nn/data/random.h"
#include "cohort/core/nn/threads.h"

namespace cohort::data {

void ImageOptions::normalize(std::span<float> values) const {
  const std::size_t channels = mean.size();
  if (channels == 0) return;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const std::size_t c = channels == 1 ? 0 : i % channels;
    values[i] = (values[i] - mean[c]) / std[c];
  }
}
namespace {

void check_image_options(const ImageOptions& image, const Dataset& dataset) {
  if (!image.normalizes() && !image.randomizes()) return;
  const Shape shape = dataset.example_shape();
  const std::string what = "image options for " + dataset.name() + ": ";
  if (image.moves_pixels() && shape.size() != 3)
    throw InvalidArgument(what + "random crops and flips need [rows, cols, channels] examples, "
                          "these are " + to_string(shape));
  if (image.crop_padding < 0)
    throw InvalidArgument(what + "crop padding " + std::to_string(image.crop_padding) + " < 0");
  if (image.mean.size() != image.std.size())
    throw InvalidArgument(what + std::to_string(image.mean.size()) + " means for " +
                          std::to_string(image.std.size()) + " standard deviations");
  const std::int64_t channels = shape.empty() ? 1 : shape.back();
  if (image.normalizes() && image.mean.size() != 1 &&
      static_cast<std::int64_t>(image.mean.size()) != channels)
    throw InvalidArgument(what + std::to_string(image.mean.size()) + " means for " +
                          std::to_string(channels) + " channels (give one, or one per channel)");
  for (float sd : image.std)
    if (!(sd > 0)) throw InvalidArgument(what + "a standard deviation is not > 0");
  if (image.augment && image.augment_with_targets)
    throw InvalidArgument(what + "both augment and augment_with_targets are set; give one");
  if (image.augment_with_targets && dataset.has_labels())
    throw InvalidArgument(what + "augment_with_targets needs float targets, and the examples have "
                          "class labels (use augment)");
}

// Whether `dataset`'s targets are images of its examples' rows and cols ([rows, cols] or
// [rows, cols, c]), which a crop or flip must move as it moves the examples.
bool image_shaped_targets(const Dataset& dataset) {
  if (dataset.has_labels()) return false;
  const Shape example = dataset.example_shape(), target = dataset.target_shape();
  return example.size() == 3 && (target.size() == 2 || target.size() == 3) &&
         target[0] == example[0] && target[1] == example[1] && example[0] * example[1] > 0;
}

// Writes to `out` the [rows, cols, channels] image `source` moved by (dy, dx) after a left-right
// flip, the pixels from outside it set to `pad`.
void move_pixels(const float* source, float* out, std::int64_t rows, std::int64_t cols,
                 std::int64_t channels, std::int64_t dy, std::int64_t dx, bool flip, float pad) {
  for (std::int64_t y = 0; y < rows; ++y) {
    const std::int64_t sy = y + dy;
    for (std::int64_t x = 0; x < cols; ++x) {
      const std::int64_t sx = (flip ? cols - 1 - x : x) + dx;
      float* o = out + (y * cols + x) * channels;
      if (sy < 0 || sy >= rows || sx < 0 || sx >= cols)
        std::fill_n(o, channels, pad);
      else
        std::copy_n(source + (sy * cols + sx) * channels, channels, o);
    }
  }
}

}  // namespace

Targets Batch::view() const {
  if (targets.rank() > 0) return Targets{{}, &targets};
  return Targets{labels, nullptr};
}

BatchIterator::BatchIterator(Dataset dataset, const BatchOptions& options)
    : dataset_(std::move(dataset)), options_(options) {
  if (options_.batch_size < 1)
    throw InvalidArgument("BatchIterator: batch_size " + std::to_string(options_.batch_size) +
                          " (need >= 1)");
  // A repeating next() could never return.
  if (options_.repeat && batches_per_epoch() == 0)
    throw InvalidArgument(
        dataset_.size() == 0
            ? "no examples of " + dataset_.name() +
                  " to train on here: use fewer workers or more data"
            : "batch size " + std::to_string(options_.batch_size) + " is larger than the " +
                  std::to_string(dataset_.size()) + " examples of " + dataset_.name() +
                  " to train on here: lower it, or use fewer workers or more data");
  check_image_options(options_.image, dataset_);
  randomize_ = options_.image.randomizes();
  move_targets_ = randomize_ && options_.image.moves_pixels() && image_shaped_targets(dataset_);
  own_targets_ = move_targets_ || (randomize_ && options_.image.augment_with_targets);
  batch_shape_ = dataset_.example_shape();
  batch_shape_.insert(batch_shape_.begin(), options_.batch_size);
  target_shape_ = dataset_.target_shape();
  target_shape_.insert(target_shape_.begin(), options_.batch_size);
  start_epoch(0);
}

BatchIterator BatchIterator::in_order(Dataset dataset, std::int64_t batch_size,
                                      const ImageOptions& image) {
  ImageOptions normalize_only;
  normalize_only.mean = image.mean;
  normalize_only.std = image.std;
  return BatchIterator(std::move(dataset), {.batch_size = batch_size,
                                            .shuffle = false,
                                            .drop_remainder = false,
                                            .repeat = false,
                                            .image = normalize_only});
}

std::int64_t BatchIterator::batches_per_epoch() const {
  const std::int64_t n = dataset_.size(), b = options_.batch_size;
  return options_.drop_remainder ? n / b : (n + b - 1) / b;
}

void BatchIterator::start_epoch(std::int64_t epoch) {
  epoch_ = epoch;
  position_ = 0;
  order_.resize(static_cast<std::size_t>(dataset_.size()));
  std::iota(order_.begin(), order_.end(), std::int64_t{0});
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

void BatchIterator::copy_example(std::int64_t at, std::int64_t k, float* out,
                                 std::vector<float>& scratch, float* target_out) const {
  const std::int64_t size = dataset_.example_size();
  const ImageOptions& image = options_.image;
  const bool moves = randomize_ && image.moves_pixels();
  // One seed per example, keyed by (seed, epoch, position in the epoch).
  const std::uint64_t seed = detail::mix_seed(
      detail::mix_seed(options_.seed ^ 0x5bd1e995u, static_cast<std::uint64_t>(epoch_)),
      static_cast<std::uint64_t>(k));
  const float* source = nullptr;
  if (dataset_.in_memory()) {
    source = dataset_.storage()->features.data() + at * size;
  } else if (!moves) {
    dataset_.read_example(at, out);  // made in place
  } else {
    scratch.resize(static_cast<std::size_t>(size));
    dataset_.read_example(at, scratch.data());
    source = scratch.data();
  }
  // Float targets are held in memory whether the examples are or not.
  const std::int64_t target_size = dataset_.target_size();
  const float* target = target_out != nullptr
                            ? dataset_.storage()->targets.data() + at * target_size
                            : nullptr;
  if (!moves) {
    if (source != nullptr) std::copy_n(source, size, out);
  } else {
    const Shape shape = dataset_.example_shape();
    const std::int64_t rows = shape[0], cols = shape[1], channels = shape[2];
    std::mt19937_64 engine(seed);
    const std::int64_t p = image.crop_padding;
    const auto span = static_cast<std::uint64_t>(2 * p + 1);
    const auto offset = [&] {
      return p > 0 ? static_cast<std::int64_t>(detail::uniform_below(engine, span)) - p : 0;
    };
    const std::int64_t dy = offset();
    const std::int64_t dx = offset();
    const bool flip = image.horizontal_flip && (engine() >> 63) != 0;
    move_pixels(source, out, rows, cols, channels, dy, dx, flip, 0.0f);
    if (target != nullptr && move_targets_)  // the same window and flip as its image
      move_pixels(target, target_out, rows, cols, target_size / (rows * cols), dy, dx, flip,
                  image.target_padding);
  }
  // (move_targets_ only where the pixels move.)
  if (target != nullptr && !move_targets_) std::copy_n(target, target_size, target_out);
  // The callbacks' own stream: the crops and flips draw as before.
  const std::uint64_t augment_seed = detail::mix_seed(seed, 0xa6);
  const std::span<float> example(out, static_cast<std::size_t>(size));
  if (randomize_ && image.augment) image.augment(example, augment_seed);
  if (randomize_ && image.augment_with_targets && target_out != nullptr)
    image.augment_with_targets(
        example, std::span<float>(target_out, static_cast<std::size_t>(target_size)),
        augment_seed);
  image.normalize(example);
}

void BatchIterator::make_examples(std::int64_t b, float* out, float* targets) const {
  const std::int64_t stride = dataset_.example_size();
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(b));
#pragma omp parallel num_threads(intra_op_threads())
  {
    std::vector<float> scratch;
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t k = 0; k < b; ++k) {
      try {
        copy_example(order_[static_cast<std::size_t>(position_ + k)], position_ + k,
                     out + k * stride, scratch,
                     targets != nullptr ? targets + k * dataset_.target_size() : nullptr);
      } catch (...) {  // nothing may leave the parallel region
        errors[static_cast<std::size_t>(k)] = std::current_exception();
      }
    }
  }
  for (const std::exception_ptr& error : errors)
    if (error) std::rethrow_exception(error);
}

bool BatchIterator::fill(Tensor& features, std::vector<std::int32_t>& labels, Tensor* targets) {
  std::int64_t b = remaining_batch();
  if (b == 0) {
    start_epoch(epoch_ + 1);
    if (!options_.repeat) return false;
    b = remaining_batch();  // > 0: the constructor refused epochs without a batch
  }
  batch_shape_[0] = b;
  features.resize(batch_shape_);
  const std::int64_t stride = dataset_.example_size();
  float* out = features.data();
  const Storage& storage = *dataset_.storage();
  const bool with_labels = dataset_.has_labels();
  labels.resize(with_labels ? static_cast<std::size_t>(b) : 0);
  if (!with_labels && targets != nullptr) {
    target_shape_[0] = b;
    targets->resize(target_shape_);
  }
  const std::int64_t target_stride = dataset_.target_size();
  // The examples of a shuffled batch lie anywhere in the dataset, mostly out of cache: each one
  // is fetched a few examples ahead, so that several are on their way from memory at once rather
  // than one after another (train's mlp, one thread: 7% more images/s).
  constexpr std::int64_t kAhead = 4;
  const auto prefetch = [&](std::int64_t k) {
    if (k >= b) return;
    const std::int64_t at = order_[static_cast<std::size_t>(position_ + k)];
    const auto* first = reinterpret_cast<const char*>(storage.features.data() + at * stride);
    const std::int64_t bytes = stride * std::int64_t{sizeof(float)};
    for (std::int64_t offset = 0; offset < bytes; offset += 64) __builtin_prefetch(first + offset);
  };
  const bool in_memory = dataset_.in_memory();
  // Targets that move or change with their example are made with it, the others copied below.
  float* own_targets = own_targets_ && targets != nullptr ? targets->data() : nullptr;
  if (!in_memory) make_examples(b, out, own_targets);
  std::vector<float> scratch;  // not used for examples in memory
  for (std::int64_t k = 0; k < kAhead && in_memory; ++k) prefetch(k);
  for (std::int64_t k = 0; k < b; ++k) {
    const std::int64_t at = order_[static_cast<std::size_t>(position_ + k)];
    if (in_memory) {
      prefetch(k + kAhead);
      copy_example(at, position_ + k, out + k * stride, scratch,
                   own_targets != nullptr ? own_targets + k * target_stride : nullptr);
    }
    if (with_labels)
      labels[static_cast<std::size_t>(k)] = storage.labels[static_cast<std::size_t>(at)];
    else if (targets != nullptr && own_targets == nullptr)
      std::copy_n(storage.targets.data() + at * target_stride, target_stride,
                  targets->data() + k * target_stride);
  }
  position_ += b;
  return true;
}

bool BatchIterator::next(Batch& batch) {
  if (dataset_.has_labels()) batch.targets = Tensor();
  return fill(batch.features, batch.labels, dataset_.has_labels() ? nullptr : &batch.targets);
}

bool BatchIterator::next(Tensor& images, std::vector<std::int32_t>& labels) {
  if (!dataset_.has_labels())
    throw InvalidArgument("BatchIterator: " + dataset_.name() +
                          " has float targets; take its batches with next(Batch&)");
  return fill(images, labels, nullptr);
}

}  // namespace cohort::data
