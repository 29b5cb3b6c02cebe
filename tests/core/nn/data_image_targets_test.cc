// BatchIterator's image options and float targets: masks cropped and flipped with their image,
// other targets left alone, augment_with_targets, targets never normalised.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "cohort/core/nn/data/batch_iterator.h"
#include "cohort/core/nn/threads.h"

using cohort::Shape;
using cohort::Tensor;
using cohort::data::Batch;
using cohort::data::BatchIterator;
using cohort::data::BatchOptions;
using cohort::data::Dataset;
using cohort::data::ImageOptions;

namespace {

constexpr std::int64_t kRows = 5, kCols = 6, kChannels = 2;

// n images [kRows, kCols, kChannels] whose values are all distinct and > 0 (so a 0 is padding).
Tensor images(std::int64_t n) {
  Tensor x({n, kRows, kCols, kChannels});
  for (std::int64_t i = 0; i < x.size(); ++i) x[i] = 1.0f + static_cast<float>(i);
  return x;
}

// The images' first channel, [n, kRows, kCols]: a mask per image.
Tensor first_channel(const Tensor& x) {
  const std::int64_t n = x.dim(0);
  Tensor mask({n, kRows, kCols});
  for (std::int64_t p = 0; p < n * kRows * kCols; ++p) mask[p] = x[p * kChannels];
  return mask;
}

// Examples made on use from a copy of `x`: a dataset not in memory.
struct TensorSource : cohort::data::ExampleSource {
  explicit TensorSource(Tensor x) : x(std::move(x)) {}
  void read(std::int64_t i, float* out) const override {
    const std::int64_t size = x.size() / x.dim(0);
    std::copy_n(x.data() + i * size, size, out);
  }
  Tensor x;
};

Dataset streamed(const Tensor& x, Tensor targets) {
  auto storage = std::make_shared<cohort::data::Storage>();
  storage->source = std::make_shared<TensorSource>(x);
  storage->source_shape = x.shape();
  storage->targets = std::move(targets);
  storage->name = "streamed";
  return Dataset(std::move(storage));
}

std::vector<float> values(const Tensor& t) { return {t.span().begin(), t.span().end()}; }

// Every target pixel is its feature pixel's `channel` (`per` target values a pixel), or
// `padding` where the features are padded; counts the padded pixels into `padded`.
void check_aligned(const Batch& batch, std::int64_t per, float padding, std::int64_t& padded) {
  const std::int64_t pixels = batch.size() * kRows * kCols;
  REQUIRE(batch.targets.size() == pixels * per);
  for (std::int64_t p = 0; p < pixels; ++p) {
    for (std::int64_t c = 0; c < per; ++c) {
      CAPTURE(p);
      const float feature = batch.features[p * kChannels + c];
      const float target = batch.targets[p * per + c];
      if (feature == 0.0f) {
        CHECK(target == padding);
      } else {
        CHECK(target == feature);
      }
    }
    padded += batch.features[p * kChannels] == 0.0f ? 1 : 0;
  }
}

// Whether some example of `batch` is not where the dataset `x` holds it: moved or flipped.
bool moved(const Batch& batch, const Tensor& x) {
  const std::int64_t size = kRows * kCols * kChannels;
  for (std::int64_t k = 0; k < batch.size(); ++k) {
    const float* example = batch.features.data() + k * size;
    bool found = false;
    for (std::int64_t i = 0; i < x.dim(0) && !found; ++i)
      found = std::equal(example, example + size, x.data() + i * size);
    if (!found) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("image-shaped targets are cropped and flipped with their image, also after seek") {
  const Tensor x = images(16);
  BatchOptions options{.batch_size = 4, .seed = 5};
  options.image.crop_padding = 2;
  options.image.horizontal_flip = true;
  SUBCASE("targets [rows, cols, channels], the images themselves; the default padding, 0") {
    BatchIterator it(Dataset::from_arrays(x, x), options);
    std::int64_t padded = 0;
    bool any_moved = false;
    Batch batch;
    for (int step = 0; step < 10; ++step) {
      REQUIRE(it.next(batch));
      check_aligned(batch, kChannels, 0.0f, padded);
      any_moved = any_moved || moved(batch, x);
    }
    CHECK(padded > 0);
    CHECK(any_moved);
    // Resumed at a saved state: the same batches, targets too.
    const std::int64_t epoch = it.epoch(), position = it.position();
    Batch expected, again;
    REQUIRE(it.next(expected));
    BatchIterator resumed(Dataset::from_arrays(x, x), options);
    resumed.seek(epoch, position);
    REQUIRE(resumed.next(again));
    CHECK(values(again.features) == values(expected.features));
    CHECK(values(again.targets) == values(expected.targets));
  }
  SUBCASE("targets [rows, cols], a class-index mask; padded with -1 (no target) when asked") {
    options.image.target_padding = -1.0f;
    BatchIterator it(Dataset::from_arrays(x, first_channel(x)), options);
    std::int64_t padded = 0;
    Batch batch;
    for (int step = 0; step < 10; ++step) {
      REQUIRE(it.next(batch));
      check_aligned(batch, 1, -1.0f, padded);
    }
    CHECK(padded > 0);
  }
}

TEST_CASE("examples made on use move their targets as examples in memory do") {
  const Tensor x = images(12);
  struct Threads {  // made on three threads; the count is put back however the case ends
    const int before = cohort::intra_op_threads();
    Threads() { cohort::set_intra_op_threads(3); }
    ~Threads() { cohort::set_intra_op_threads(before); }
  } three;
  BatchOptions options{.batch_size = 5, .seed = 2, .drop_remainder = false};
  options.image.crop_padding = 1;
  options.image.horizontal_flip = true;
  BatchIterator memory(Dataset::from_arrays(x, x), options), on_use(streamed(x, x), options);
  REQUIRE_FALSE(on_use.dataset().in_memory());
  Batch a, b;
  std::int64_t padded = 0;
  for (int step = 0; step < 8; ++step) {  // past an epoch's end, through short batches
    CAPTURE(step);
    REQUIRE(memory.next(a));
    REQUIRE(on_use.next(b));
    check_aligned(b, kChannels, 0.0f, padded);
    CHECK(values(a.features) == values(b.features));
    CHECK(values(a.targets) == values(b.targets));
  }
  CHECK(padded > 0);
}

TEST_CASE("targets that are not images of the examples' rows and cols are left alone") {
  const Tensor x = images(10);
  // Each example's number and a count: a vector, and an array of the rows but other cols.
  Tensor vector({10, 3}), near_miss({10, kRows, kCols + 1});
  for (std::int64_t i = 0; i < vector.size(); ++i)
    vector[i] = static_cast<float>(i / 3 * 100 + i % 3);
  const std::int64_t per = kRows * (kCols + 1);
  for (std::int64_t i = 0; i < near_miss.size(); ++i)
    near_miss[i] = static_cast<float>(i / per * 1000 + i % per);
  BatchOptions options{.batch_size = 5, .seed = 1};
  options.image.crop_padding = 2;
  options.image.horizontal_flip = true;
  for (const auto& [targets, scale] : {std::pair{vector, 100}, std::pair{near_miss, 1000}}) {
    BatchIterator it(Dataset::from_arrays(x, targets), options);
    const std::int64_t size = it.dataset().target_size();
    Batch batch;
    for (int step = 0; step < 6; ++step) {
      REQUIRE(it.next(batch));
      for (std::int64_t k = 0; k < batch.size(); ++k) {
        const float* target = batch.targets.data() + k * size;
        const auto id = static_cast<std::int64_t>(target[0]) / scale;
        for (std::int64_t j = 0; j < size; ++j)
          CHECK(target[j] == static_cast<float>(id * scale + j));
      }
    }
  }
}

TEST_CASE("augment_with_targets: example and target in its hands, its changes kept, after seek") {
  const Tensor x = images(8);
  ImageOptions image;
  image.horizontal_flip = true;
  // Noise from the seed on the example, and the target made twice the noisy example.
  image.augment_with_targets = [](std::span<float> example, std::span<float> target,
                                  std::uint64_t seed) {
    REQUIRE(example.size() == static_cast<std::size_t>(kRows * kCols * kChannels));
    REQUIRE(target.size() == example.size());
    std::mt19937_64 rng(seed);
    for (std::size_t i = 0; i < example.size(); ++i) {
      example[i] += static_cast<float>(rng() % 1000) / 1000.0f;
      target[i] = 2.0f * example[i];
    }
  };
  const BatchOptions options{.batch_size = 4, .seed = 9, .image = image};
  BatchIterator it(Dataset::from_arrays(x, x), options);
  Batch batch;
  REQUIRE(it.next(batch));
  REQUIRE(it.next(batch));
  bool noisy = false;
  for (std::int64_t i = 0; i < batch.features.size(); ++i) {
    CHECK(batch.targets[i] == 2.0f * batch.features[i]);
    noisy = noisy || batch.features[i] != std::floor(batch.features[i]);
  }
  CHECK(noisy);
  BatchIterator resumed(Dataset::from_arrays(x, x), options);
  resumed.seek(0, 4);
  Batch again;
  REQUIRE(resumed.next(again));
  CHECK(values(again.features) == values(batch.features));
  CHECK(values(again.targets) == values(batch.targets));
  // Evaluation batches are the data as it is.
  auto eval = BatchIterator::in_order(Dataset::from_arrays(x, x), 8, image);
  REQUIRE(eval.next(again));
  CHECK(values(again.features) == values(x));
  CHECK(values(again.targets) == values(x));
}

TEST_CASE("normalisation applies to the examples only, never to the targets") {
  const Tensor x = images(8);
  BatchOptions options{.batch_size = 4, .seed = 3};
  options.image = {.mean = {10.0f, 20.0f}, .std = {4.0f, 8.0f}, .crop_padding = 1,
                   .horizontal_flip = true};
  BatchIterator it(Dataset::from_arrays(x, x), options);
  Batch batch;
  std::int64_t padded = 0;
  for (int step = 0; step < 4; ++step) {
    REQUIRE(it.next(batch));
    for (std::int64_t i = 0; i < batch.features.size(); ++i) {
      const std::int64_t c = i % kChannels;
      const float raw = batch.features[i] * options.image.std[c] + options.image.mean[c];
      CAPTURE(i);
      if (std::abs(raw) < 1e-4f) {
        CHECK(batch.targets[i] == 0.0f);
        ++padded;
      } else {
        CHECK(batch.targets[i] == doctest::Approx(raw).epsilon(1e-5));
        CHECK(batch.targets[i] == std::round(batch.targets[i]));  // as the dataset holds it
      }
    }
  }
  CHECK(padded > 0);
  auto eval = BatchIterator::in_order(Dataset::from_arrays(x, x), 8, options.image);
  REQUIRE(eval.next(batch));
  CHECK(values(batch.targets) == values(x));
  CHECK(batch.features[0] == (x[0] - 10.0f) / 4.0f);
}

TEST_CASE("augment_with_targets is refused beside augment, and for class labels") {
  const Tensor x = images(4);
  ImageOptions image;
  image.augment_with_targets = [](std::span<float>, std::span<float>, std::uint64_t) {};
  CHECK_NOTHROW(BatchIterator(Dataset::from_arrays(x, x), {.batch_size = 2, .image = image}));
  image.augment = [](std::span<float>, std::uint64_t) {};
  CHECK_THROWS_WITH_AS(BatchIterator(Dataset::from_arrays(x, x), {.batch_size = 2, .image = image}),
                       "image options for arrays: both augment and augment_with_targets are set; "
                       "give one",
                       cohort::InvalidArgument);
  image.augment = nullptr;
  const Dataset labelled = Dataset::from_arrays(x, std::vector<std::int32_t>{0, 1, 0, 1}, 2);
  CHECK_THROWS_WITH_AS(BatchIterator(labelled, {.batch_size = 2, .image = image}),
                       "image options for arrays: augment_with_targets needs float targets, and "
                       "the examples have class labels (use augment)",
                       cohort::InvalidArgument);
}
