// Datasets, sharding and the synthetic dataset.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/data/dataset.h"

using cohort::Shape;
using cohort::Tensor;
using cohort::data::Dataset;
using cohort::data::FeatureSums;
using cohort::data::Storage;
using cohort::data::feature_sums;

namespace {

// Example i of a and example j of b are the same example: pixels and label.
bool same_example(const Dataset& a, std::int64_t i, const Dataset& b, std::int64_t j) {
  const auto x = a.image(i), y = b.image(j);
  return std::equal(x.begin(), x.end(), y.begin(), y.end()) && a.label(i) == b.label(j);
}

bool same_pixels(const Dataset& a, const Dataset& b) {
  const auto x = a.storage()->features.span(), y = b.storage()->features.span();
  return std::equal(x.begin(), x.end(), y.begin(), y.end());
}

}  // namespace

TEST_CASE("synthetic: shape, ranges, determinism") {
  const Dataset d = cohort::data::synthetic(500, 7);
  CHECK(d.size() == 500);
  CHECK(d.image_shape() == Shape{28, 28, 1});
  CHECK(d.image_size() == 784);
  CHECK(d.num_classes() == 10);
  CHECK(d.storage()->features.shape() == Shape{500, 28, 28, 1});
  std::vector<int> per_class(10);
  for (std::int64_t i = 0; i < d.size(); ++i) {
    REQUIRE(d.label(i) >= 0);
    REQUIRE(d.label(i) < 10);
    ++per_class[static_cast<std::size_t>(d.label(i))];
  }
  for (int count : per_class) CHECK(count > 20);  // every class drawn, roughly 50 each
  const auto pixels = d.storage()->features.span();
  CHECK(*std::min_element(pixels.begin(), pixels.end()) >= 0.0f);
  CHECK(*std::max_element(pixels.begin(), pixels.end()) <= 1.0f);
  CHECK(*std::max_element(pixels.begin(), pixels.end()) > 0.5f);

  const Dataset again = cohort::data::synthetic(500, 7);
  CHECK(again.storage()->labels == d.storage()->labels);
  CHECK(same_pixels(again, d));
  const Dataset other = cohort::data::synthetic(500, 8);
  CHECK(other.storage()->labels != d.storage()->labels);
  CHECK_FALSE(same_pixels(other, d));

  const Dataset small = cohort::data::synthetic(3, 1, {.rows = 8, .cols = 6, .num_classes = 4});
  CHECK(small.image_shape() == Shape{8, 6, 1});
  CHECK(small.num_classes() == 4);
  CHECK_THROWS_AS(cohort::data::synthetic(-1, 1), cohort::InvalidArgument);
}

TEST_CASE("synthetic: a set from another seed is classified by the class means of the first") {
  const Dataset train = cohort::data::synthetic(2000, 1), test = cohort::data::synthetic(1000, 2);
  const std::int64_t p = train.image_size();
  std::vector<double> mean(static_cast<std::size_t>(10 * p));
  std::vector<int> count(10);
  for (std::int64_t i = 0; i < train.size(); ++i) {
    const auto c = static_cast<std::size_t>(train.label(i));
    ++count[c];
    const auto image = train.image(i);
    for (std::int64_t k = 0; k < p; ++k) mean[c * p + k] += image[static_cast<std::size_t>(k)];
  }
  for (std::size_t c = 0; c < 10; ++c)
    for (std::int64_t k = 0; k < p; ++k) mean[c * p + k] /= count[c];
  int right = 0;
  for (std::int64_t i = 0; i < test.size(); ++i) {
    const auto image = test.image(i);
    double best = 1e300;
    int guess = -1;
    for (std::size_t c = 0; c < 10; ++c) {
      double d = 0;
      for (std::int64_t k = 0; k < p; ++k) {
        const double diff = image[static_cast<std::size_t>(k)] - mean[c * p + k];
        d += diff * diff;
      }
      if (d < best) best = d, guess = static_cast<int>(c);
    }
    right += guess == test.label(i);
  }
  MESSAGE("nearest class mean accuracy on synthetic data: " << right / 1000.0);
  CHECK(right > 900);
}

TEST_CASE("shard: disjoint, covering, balanced, each a copy of its own examples") {
  const Dataset whole = cohort::data::synthetic(103, 3);
  // Every synthetic example differs from the others, so content identifies it.
  for (std::int64_t i = 1; i < whole.size(); ++i) REQUIRE_FALSE(same_example(whole, i, whole, i - 1));
  for (int count = 1; count <= 5; ++count) {
    CAPTURE(count);
    std::int64_t total = 0, smallest = whole.size(), largest = 0;
    for (int index = 0; index < count; ++index) {
      const Dataset part = whole.shard(index, count);
      // A copy (the whole dataset can be dropped), except the one shard of one.
      CHECK((part.storage() == whole.storage()) == (count == 1));
      CHECK(part.name() == whole.name());
      CHECK(part.num_classes() == whole.num_classes());
      smallest = std::min(smallest, part.size());
      largest = std::max(largest, part.size());
      total += part.size();
      for (std::int64_t i = 0; i < part.size(); ++i)
        CHECK(same_example(part, i, whole, index + i * count));
    }
    CHECK(total == whole.size());
    CHECK(largest - smallest <= 1);
  }
  // Shards of shards stay within their parent.
  const Dataset half = whole.shard(1, 2);
  const Dataset quarter = half.shard(0, 2);
  for (std::int64_t i = 0; i < quarter.size(); ++i) CHECK(same_example(quarter, i, half, 2 * i));
  CHECK(quarter.size() + half.shard(1, 2).size() == half.size());
  // Float targets are copied with their examples.
  Tensor x({5, 2}), y({5, 3});
  for (std::int64_t i = 0; i < 10; ++i) x[i] = static_cast<float>(i);
  for (std::int64_t i = 0; i < 15; ++i) y[i] = static_cast<float>(100 + i);
  const Dataset table = Dataset::from_arrays(x, y, "table");
  const Dataset odd = table.shard(1, 2);
  REQUIRE(odd.size() == 2);
  CHECK(odd.example(1)[0] == 6.0f);
  CHECK(odd.target(1)[2] == 111.0f);
  CHECK(odd.target_shape() == Shape{3});
  CHECK_THROWS_AS(odd.example(2), std::out_of_range);
  // More workers than examples: some shards are empty, none fails.
  const Dataset tiny = cohort::data::synthetic(2, 3);
  CHECK(tiny.shard(4, 5).size() == 0);
  CHECK(tiny.shard(1, 5).size() == 1);

  CHECK_THROWS_AS(whole.shard(2, 2), cohort::InvalidArgument);
  CHECK_THROWS_AS(whole.shard(-1, 2), cohort::InvalidArgument);
  CHECK_THROWS_AS(whole.shard(0, 0), cohort::InvalidArgument);
  CHECK_THROWS_WITH_AS(whole.shard(3, 2), "Dataset::shard: index 3 of count 2 (need 0 <= index < count)",
                       cohort::InvalidArgument);
}

TEST_CASE("subset and split: chosen examples in their order, Keras's validation split, alike everywhere") {
  const Dataset whole = cohort::data::synthetic(103, 3);
  const std::vector<std::int64_t> chosen{7, 2, 2, 100};
  const Dataset some = whole.subset(chosen);
  REQUIRE(some.size() == 4);
  for (std::size_t i = 0; i < chosen.size(); ++i)
    CHECK(same_example(some, static_cast<std::int64_t>(i), whole, chosen[i]));
  CHECK(some.storage() != whole.storage());
  CHECK(some.name() == whole.name());
  const std::vector<std::int64_t> outside{3, 103};
  CHECK_THROWS_AS(whole.subset(outside), std::out_of_range);

  const auto [training, validation] = whole.split(0.2, 9);
  CHECK(validation.size() == 20);  // floor(0.2 * 103)
  CHECK(training.size() == 83);
  // Each part in the dataset's order, the two disjoint and covering it.
  std::vector<std::int64_t> from;
  for (const Dataset* part : {&training, &validation}) {
    std::int64_t at = -1;
    for (std::int64_t i = 0; i < part->size(); ++i) {
      std::int64_t j = at + 1;
      while (j < whole.size() && !same_example(*part, i, whole, j)) ++j;
      REQUIRE(j < whole.size());
      from.push_back(at = j);
    }
  }
  std::sort(from.begin(), from.end());
  for (std::int64_t i = 0; i < whole.size(); ++i) CHECK(from[static_cast<std::size_t>(i)] == i);
  // The same seed, the same parts (every worker splits alike); another seed, others.
  const auto again = whole.split(0.2, 9);
  const auto other = whole.split(0.2, 10);
  CHECK(same_pixels(again.second, validation));
  CHECK_FALSE(same_pixels(other.second, validation));
  // One part alone, and a worker's shard of it: what split() and shard() would give.
  CHECK(same_pixels(whole.split_part(0.2, 9, true), validation));
  for (int index = 0; index < 3; ++index)
    CHECK(same_pixels(whole.split_part(0.2, 9, false, index, 3), training.shard(index, 3)));
  CHECK_THROWS_AS(whole.split_part(0.2, 9, false, 3, 3), cohort::InvalidArgument);
  CHECK_THROWS_AS(whole.split_part(1.0, 9, false), cohort::InvalidArgument);

  CHECK_THROWS_WITH_AS(whole.split(1.0, 1), "Dataset synthetic(n=103, seed=3): validation split 1 is not a fraction in (0, 1)",
                       cohort::InvalidArgument);
  CHECK_THROWS_WITH_AS(whole.split(0.005, 1), "Dataset synthetic(n=103, seed=3): validation split 0.005 of 103 examples leaves the "
                       "validation part empty",
                       cohort::InvalidArgument);
}

TEST_CASE("a subset of examples made on use reads them from the same source") {
  // A source that says which example it was asked for.
  struct Counting : cohort::data::ExampleSource {
    void read(std::int64_t i, float* out) const override { out[0] = static_cast<float>(i); }
  };
  auto storage = std::make_shared<Storage>();
  storage->source = std::make_shared<Counting>();
  storage->source_shape = {10, 1};
  storage->labels.assign(10, 0);
  storage->num_classes = 1;
  storage->name = "counting";
  const Dataset all(storage);
  REQUIRE_FALSE(all.in_memory());
  // A subset of a shard of a split: each still reads the original's example.
  const Dataset training = all.split(0.3, 4).first;
  const Dataset second_half = training.shard(1, 2);
  const std::vector<std::int64_t> last{second_half.size() - 1};
  const Dataset one = second_half.subset(last);
  CHECK_FALSE(one.in_memory());
  float value = -1;
  one.read_example(0, &value);
  float expected = -1;
  training.read_example(2 * (second_half.size() - 1) + 1, &expected);
  CHECK(value == expected);
  CHECK(value >= 0);
}

TEST_CASE("scale_mismatch tells data prepared otherwise than the training data's") {
  // Training values in [0, 1]; test sets of the same, of bytes, standardised, shifted far.
  Tensor unit({200, 4}), bytes({50, 4}), standardised({50, 4}), shifted({50, 4}), near({50, 4});
  for (std::int64_t i = 0; i < unit.size(); ++i) unit[i] = static_cast<float>((i * 37) % 101) / 100;
  for (std::int64_t i = 0; i < bytes.size(); ++i) {
    bytes[i] = 255 * unit[i];
    standardised[i] = (bytes[i] - 127.5f) / 73.6f;
    shifted[i] = unit[i] + 5;
    near[i] = unit[i + 7] * 1.5f + 0.2f;  // another sample, a little off: not a fault
  }
  const std::vector<std::int32_t> labels(200, 0);
  const auto set = [&](const Tensor& x) {
    return Dataset::from_arrays(x, std::vector<std::int32_t>(labels.begin(), labels.begin() + x.shape()[0]), 2);
  };
  const FeatureSums reference = feature_sums(set(unit));
  CHECK(scale_mismatch(reference, set(unit)).empty());
  CHECK(scale_mismatch(reference, set(near)).empty());
  CHECK(scale_mismatch(reference, set(bytes)).starts_with("its values have mean 12"));
  const std::string message = scale_mismatch(reference, set(bytes));
  CAPTURE(message);
  CHECK(message.ends_with(", the training data's 0.5002 and 0.2916: prepared otherwise (bytes 0-255 beside "
                          "values in [0, 1], one set standardised and not the other)?"));
  // Bytes standardised beside bytes as they are (values in [0, 1] and standardised ones are too
  // near each other to tell from a drift).
  CHECK_FALSE(scale_mismatch(feature_sums(set(bytes)), set(standardised)).empty());
  CHECK(scale_mismatch(feature_sums(set(standardised)), set(unit)).empty());
  CHECK_FALSE(scale_mismatch(reference, set(shifted)).empty());
}

TEST_CASE("feature_sums: per feature (the last axis), shards add up to the whole, moments") {
  // 4 examples of shape [2, 3]: feature j of example i, row r is 10 * j + i + r.
  Tensor x({4, 2, 3});
  for (std::int64_t i = 0; i < 4; ++i)
    for (std::int64_t r = 0; r < 2; ++r)
      for (std::int64_t j = 0; j < 3; ++j) x[(i * 2 + r) * 3 + j] = static_cast<float>(10 * j + i + r);
  const Dataset data = Dataset::from_arrays(x, {0, 1, 0, 1}, 2);
  const FeatureSums whole = feature_sums(data);
  CHECK(whole.count == 8);  // 4 examples, 2 rows each
  // Feature 0 takes i + r: 0,1, 1,2, 2,3, 3,4.
  CHECK(whole.sum[0] == 16);
  CHECK(whole.sum_squares[0] == 0 + 1 + 1 + 4 + 4 + 9 + 9 + 16);
  // Two shards add up to the whole.
  FeatureSums parts = feature_sums(data.shard(0, 2));
  const FeatureSums other = feature_sums(data.shard(1, 2));
  parts.count += other.count;
  for (std::size_t j = 0; j < 3; ++j) {
    parts.sum[j] += other.sum[j];
    parts.sum_squares[j] += other.sum_squares[j];
    CHECK(parts.sum[j] == whole.sum[j]);
    CHECK(parts.sum_squares[j] == whole.sum_squares[j]);
  }
  CHECK(parts.count == whole.count);
  // Pooled: one feature of every value, 24 of them.
  FeatureSums pooled = whole;
  pooled.pool();
  CHECK(pooled.count == 24);
  CHECK(pooled.sum == std::vector<double>{whole.sum[0] + whole.sum[1] + whole.sum[2]});
  std::vector<float> mean, std;
  whole.moments(mean, std);
  REQUIRE(mean.size() == 3);
  CHECK(mean[0] == doctest::Approx(2.0));
  CHECK(std[0] == doctest::Approx(std::sqrt(1.5)));  // squared deviations 4,1,1,0,0,1,1,4 over 8
  CHECK(mean[1] == doctest::Approx(12.0));
  // A constant feature keeps a deviation of 1.
  const FeatureSums constant{4, {20.0}, {100.0}};
  constant.moments(mean, std);
  CHECK(mean == std::vector<float>{5.0f});
  CHECK(std == std::vector<float>{1.0f});
  CHECK_THROWS_AS(FeatureSums{}.moments(mean, std), cohort::InvalidArgument);
}

TEST_CASE("class_weights: balanced by the label counts, or one given per class") {
  // 6 examples of 4 classes, the last absent: n / (classes n_c) = 6 / 16, 6 / 4, 6 / 4, and 1.
  const Dataset data = Dataset::from_arrays(Tensor({6, 2}), {0, 0, 0, 0, 1, 2}, 4);
  CHECK(class_weights("balanced", data) == std::vector<float>{0.375f, 1.5f, 1.5f, 1.0f});
  CHECK(class_weights("1,2.5,0,1e-3", data) == std::vector<float>{1.0f, 2.5f, 0.0f, 1e-3f});
  CHECK_THROWS_WITH_AS(class_weights("1,2", data, nullptr, "--class_weights"),
                       "--class_weights '1,2': 2 weights for 4 classes", cohort::InvalidArgument);
  for (const char* bad : {"1,,2,3", "1,2,3,", "1,-2,3,4", "1,x,3,4", "1,nan,3,4", "Balanced", "1, 2,3,4",
                          "1 ,2,3,4", "0x1,2,3,4", "+1,2,3,4", "1e40,2,3,4", "inf,2,3,4"})
    CHECK_THROWS_WITH_AS(class_weights(bad, data), doctest::Contains("is not a finite number >= 0"),
                         cohort::InvalidArgument);
  CHECK_THROWS_WITH_AS(class_weights("0,0,0,0", data), "class weights '0,0,0,0': every weight is 0, which would train nothing",
                       cohort::InvalidArgument);
  CHECK_THROWS_WITH_AS(class_weights("balanced", Dataset::from_arrays(Tensor({2, 2}), Tensor({2, 1}))),
                       "class weights 'balanced': the data has float targets, not class labels",
                       cohort::InvalidArgument);
}

TEST_CASE("positive_weights: balanced by each output's negatives over its positives, or as given") {
  // 4 examples of 3 outputs: the first positive once, the second twice and a half, the third never.
  Tensor targets({4, 3});
  const float rows[4][3] = {{1, 1, 0}, {0, 1, 0}, {0, 0.5f, 0}, {0, 0, 0}};
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) targets[i * 3 + j] = rows[i][j];
  const Dataset data = Dataset::from_arrays(Tensor({4, 2}), targets);
  CHECK(positive_weights("balanced", data) == std::vector<float>{3.0f, 1.5f / 2.5f, 1.0f});
  CHECK(positive_weights("2", data) == std::vector<float>{2.0f});
  CHECK(positive_weights("2,0.5,1", data) == std::vector<float>{2.0f, 0.5f, 1.0f});
  CHECK_THROWS_WITH_AS(positive_weights("1,2", data, nullptr, "--pos_weight"),
                       "--pos_weight '1,2': 2 weights for 3 outputs (give one for each, or one for all)",
                       cohort::InvalidArgument);
  CHECK_THROWS_WITH_AS(positive_weights("1,-1,1", data), doctest::Contains("is not a finite number >= 0"),
                       cohort::InvalidArgument);
  CHECK_THROWS_WITH_AS(positive_weights("balanced", Dataset::from_arrays(Tensor({2, 2}), {0, 1}, 2)),
                       "positive weights 'balanced': the data has class labels, not float targets",
                       cohort::InvalidArgument);
}

TEST_CASE("a default Dataset is empty and usable") {
  const Dataset empty;
  CHECK(empty.size() == 0);
  CHECK(empty.image_shape() == Shape{28, 28, 1});
  CHECK(empty.num_classes() == 10);
  CHECK(empty.shard(0, 2).size() == 0);
}

TEST_CASE("a Dataset checks the storage it is given") {
  CHECK_THROWS_AS(Dataset(nullptr), cohort::InvalidArgument);
  auto storage = std::make_shared<Storage>();
  storage->features.resize({2, 4, 4, 1});
  storage->labels = {1, 2};
  storage->name = "mine";
  CHECK(Dataset(storage).size() == 2);
  storage->labels = {1, 10};
  CHECK_THROWS_WITH_AS(Dataset{storage}, "Dataset mine: label 10 at index 1 is outside [0, 10)",
                       cohort::InvalidArgument);
  storage->labels = {1};
  CHECK_THROWS_AS(Dataset{storage}, cohort::InvalidArgument);
  storage->labels = {1, 2};
  storage->features.resize({2, 16});  // feature vectors are examples too
  CHECK(Dataset(storage).example_shape() == Shape{16});
  storage->features.resize({2});  // no example shape
  CHECK_THROWS_AS(Dataset{storage}, cohort::InvalidArgument);
}

TEST_CASE("windows of a series: consecutive steps, the label or target horizon steps on") {
  // 10 steps of 2 features: step s is (s, 100 + s), its label s % 3 and its target 10 s.
  Tensor steps({10, 2});
  Tensor values({10, 1});
  std::vector<std::int32_t> labels;
  for (int s = 0; s < 10; ++s) {
    steps[2 * s] = static_cast<float>(s);
    steps[2 * s + 1] = static_cast<float>(100 + s);
    values[s] = static_cast<float>(10 * s);
    labels.push_back(s % 3);
  }
  const Dataset classes = Dataset::from_arrays(steps, labels, 3, "series");
  const Dataset windows = classes.windows(3, /*horizon=*/1, /*stride=*/2);
  CHECK(windows.size() == 4);  // starts 0, 2, 4, 6: the last window's label is step 9's
  CHECK(windows.example_shape() == Shape{3, 2});
  CHECK_FALSE(windows.in_memory());
  std::vector<float> window(6);
  windows.read_example(1, window.data());  // steps 2, 3, 4
  CHECK(window == std::vector<float>{2, 102, 3, 103, 4, 104});
  CHECK(windows.label(1) == 5 % 3);
  CHECK(windows.label(3) == 9 % 3);
  // Shards of the windows read from the same series.
  const Dataset second = windows.shard(1, 2);
  CHECK(second.size() == 2);
  second.read_example(1, window.data());  // window 3: steps 6, 7, 8
  CHECK(window == std::vector<float>{6, 106, 7, 107, 8, 108});
  CHECK(second.label(1) == 9 % 3);

  const Dataset regression = Dataset::from_arrays(steps, values, "series");
  const Dataset same_step = regression.windows(4, /*horizon=*/0);
  CHECK(same_step.size() == 7);
  CHECK(same_step.target(0)[0] == 30.0f);  // step 3's own target
  CHECK(same_step.target(6)[0] == 90.0f);
  CHECK_THROWS_WITH_AS(regression.windows(8, 3),
                       "Dataset series: windows of 8 steps, horizon 3, stride 1: the series has 10 "
                       "steps, fewer than length + horizon",
                       cohort::InvalidArgument);
  CHECK_THROWS_AS(regression.windows(0), cohort::InvalidArgument);
}
