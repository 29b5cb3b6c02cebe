// The data sets of NumPy arrays (loaders.h): from two .npy files, two members of an .npz archive
// (or two datasets of an HDF5 file, hdf5.cc), or arrays in memory, checked; sharded where asked.
// The formats: npy.cc, npz.cc.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cohort/core/nn/data/files.h"
#include "cohort/core/nn/data/loaders.h"
#include "cohort/core/nn/data/npy.h"
#include "cohort/core/nn/data/npz.h"

namespace cohort::data {
namespace {

using detail::check_shard;
using detail::fail;
using detail::NpzArchive;
using detail::read_npy;

// Where the examples came from, for messages.
struct Names {
  std::string dataset;   // the prefix of count mismatches
  std::string features;  // "features", "features 'x'"
  std::string targets;   // "targets", "targets y.npy"
  std::string labels;    // the prefix of label faults
  std::string name;      // the Dataset's name (its sources, for later messages)
};

// Every value a finite float32: NaN (a missing value's usual mark) or an infinity (or a float64
// beyond float32's range) would only come out later as a NaN loss that names no file. `values`
// are the rows `shard` keeps of the file's; the message names the file's example and index.
void check_finite(const Tensor& values, const std::string& where, const std::string& what,
                  ShardSpec shard = {}) {
  const std::span<const float> v = values.span();
  const auto bad = std::find_if(v.begin(), v.end(), [](float x) { return !std::isfinite(x); });
  if (bad == v.end()) return;
  const auto at = static_cast<std::int64_t>(bad - v.begin());
  const std::int64_t per_example = values.rank() > 0 && values.dim(0) > 0 ? values.size() / values.dim(0) : 1;
  const std::int64_t example = shard.index + at / per_example * shard.count;
  const std::int64_t i = example * per_example + at % per_example;
  fail(where, (what.empty() ? "" : what + ": ") + "the value at flat index " + std::to_string(i) + " (example " +
                  std::to_string(example) + ") is " +
                  (std::isnan(*bad) ? std::string("NaN (a missing value?)")
                                    : std::string("infinite, or beyond float32's range")));
}

// A copy of `t` as [n, 1] (t is [n]): Tensor::resize leaves contents unspecified.
Tensor as_column(const Tensor& t) { return Tensor({t.dim(0), 1}, t.span()); }

// Fails unless features of `features_shape` and targets of `targets_shape` hold as many
// examples.
void check_same_count(const Shape& features_shape, const Shape& targets_shape, const Names& names) {
  if (features_shape.empty()) fail(names.dataset, names.features + " are empty");
  if (targets_shape.empty()) fail(names.dataset, names.targets + " are empty");
  if (targets_shape[0] != features_shape[0])
    fail(names.dataset, names.features + " " + to_string(features_shape) + " and " + names.targets +
                            " " + to_string(targets_shape) + " differ in their first dimension: " +
                            std::to_string(features_shape[0]) + " vs " +
                            std::to_string(targets_shape[0]) + " examples");
}

// An integral array of n values ([n] or [n, 1]) is class labels; anything else, float targets.
bool are_labels(const NpyArray& targets) {
  const Tensor& t = targets.values;
  return targets.integral && (t.rank() == 1 || (t.rank() == 2 && t.dim(1) == 1));
}

// A whole number held in a float, in full (a label of 2^63 as well as 7).
std::string whole(float value) {
  char text[64];
  std::snprintf(text, sizeof text, "%.0f", static_cast<double>(value));
  return text;
}

// The class labels of `targets` (are_labels), each checked; `num_classes` 0 becomes the largest
// label + 1 (2 for booleans), warned of where some of those classes have no label and `warn`.
std::vector<std::int32_t> checked_labels(const NpyArray& targets, const Names& names,
                                         int& num_classes, bool warn) {
  const Tensor& t = targets.values;
  const std::int64_t n = t.dim(0);
  // Labels above 2^24 would not have come through float32 exactly.
  const std::int64_t limit = num_classes > 0 ? num_classes : std::int64_t{1} << 24;
  std::vector<std::int32_t> labels(static_cast<std::size_t>(n));
  std::int32_t largest = -1;
  for (std::int64_t i = 0; i < n; ++i) {
    const float label = t[i];
    const std::string at = " at index " + std::to_string(i);
    if (label < 0)
      fail(names.labels,
           "label " + std::to_string(static_cast<std::int64_t>(label)) + at + " is negative");
    // Integers from 2^24 on were rounded on their way to float32: not named as if exact.
    if (label >= static_cast<float>(limit))
      fail(names.labels, (label < 0x1p24f ? "label " : "a label of about ") + whole(label) + at +
                             (num_classes > 0
                                  ? " is outside [0, " + std::to_string(num_classes) + ")"
                                  : " is too large for a class label"));
    labels[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(label);
    largest = std::max(largest, labels[static_cast<std::size_t>(i)]);
  }
  if (num_classes != 0) return labels;
  if (targets.dtype.ends_with("b1")) {
    num_classes = 2;
    return labels;
  }
  num_classes = std::max(1, largest + 1);
  if (warn && n > 0) {
    std::vector<bool> seen(static_cast<std::size_t>(num_classes));
    for (const std::int32_t label : labels) seen[static_cast<std::size_t>(label)] = true;
    detail::warn_classes_without_examples(names.labels, seen);
  }
  return labels;
}

// `features` and `targets` are the rows `shard` keeps of the files' (for the messages).
Dataset make_dataset(NpyArray features, NpyArray targets, const Names& names, int num_classes,
                     ShardSpec shard = {}) {
  if (num_classes < 0)
    throw InvalidArgument(names.dataset + ": num_classes " + std::to_string(num_classes));
  check_same_count(features.values.shape(), targets.values.shape(), names);
  check_finite(features.values, names.dataset, names.features, shard);
  Tensor x = features.values.rank() == 1 ? as_column(features.values) : std::move(features.values);
  if (!are_labels(targets)) {
    const Tensor& t = targets.values;
    check_finite(t, names.labels, "");
    Tensor y = t.rank() == 1 ? as_column(t) : std::move(targets.values);
    return Dataset::from_arrays(std::move(x), std::move(y), names.name);
  }
  std::vector<std::int32_t> labels = checked_labels(targets, names, num_classes, shard.index == 0);
  return Dataset::from_arrays(std::move(x), std::move(labels), num_classes, names.name);
}

// A shard's dataset: `features` are the shard's rows of an array of `features_shape`, `targets`
// the whole array. Every target is checked, and num_classes counts them all, so that every
// worker's shard agrees with the others'; then the shard's rows of them are kept.
Dataset make_shard(NpyArray features, const Shape& features_shape, NpyArray targets,
                   const Names& names, int num_classes, ShardSpec shard) {
  if (num_classes < 0)
    throw InvalidArgument(names.dataset + ": num_classes " + std::to_string(num_classes));
  check_same_count(features_shape, targets.values.shape(), names);
  if (are_labels(targets)) checked_labels(targets, names, num_classes, shard.index == 0);
  else check_finite(targets.values, names.labels, "");
  const std::int64_t row = targets.values.size() / std::max<std::int64_t>(1, targets.values.dim(0));
  Shape shape = targets.values.shape();
  shape[0] = features.values.dim(0);
  NpyArray mine{Tensor(shape), targets.dtype, targets.integral};
  for (std::int64_t i = 0; i < shape[0]; ++i)
    std::copy_n(targets.values.data() + (shard.index + i * shard.count) * row, row,
                mine.values.data() + i * row);
  return make_dataset(std::move(features), std::move(mine), names, num_classes, shard);
}

}  // namespace

Dataset dataset_from_arrays(NpyArray features, NpyArray targets, const std::string& name,
                            int num_classes) {
  return make_dataset(std::move(features), std::move(targets),
                      {name, "features", "targets", name + ": targets", name}, num_classes);
}

Dataset dataset_from_npy(const std::string& features_path, const std::string& targets_path,
                         int num_classes, ShardSpec shard) {
  const Names names{features_path, "features", "targets " + targets_path, targets_path,
                    features_path + ", " + targets_path};
  if (shard.count == 1 && shard.index == 0)
    return make_dataset(load_npy(features_path), load_npy(targets_path), names, num_classes);
  Shape features_shape;
  NpyArray features = read_npy(features_path, shard, features_shape);
  return make_shard(std::move(features), features_shape, load_npy(targets_path), names,
                    num_classes, shard);
}

Dataset dataset_from_npz(const std::string& path, const std::string& features_key,
                         const std::string& targets_key, int num_classes, ShardSpec shard) {
  check_shard(shard, path);
  const NpzArchive archive(path);
  for (const std::string& key : {features_key, targets_key})
    if (!archive.members().contains(key))
      fail(path, "no array '" + key + "' (keys present: " + archive.keys() + ")");
  // Only the two arrays asked for are inflated, and of the features only the shard's rows are
  // converted.
  Shape features_shape;
  NpyArray features = archive.read(features_key, shard, &features_shape);
  NpyArray targets = archive.read(targets_key);
  return detail::dataset_of_arrays(std::move(features), features_shape, std::move(targets), path,
                                   features_key, targets_key, num_classes, shard);
}

namespace {

// Whether `d` is a plausible channel count of an image: grey, RGB or RGBA.
bool image_channels(std::int64_t d) { return d == 1 || d == 3 || d == 4; }

}  // namespace

Tensor channels_last(const Tensor& images, const std::string& what) {
  if (images.rank() != 4)  // the examples' shape: the file's row count may be a shard's
    throw InvalidArgument(what + ": examples of " +
                          (images.rank() == 0 ? std::string("[]")
                                              : to_string(Shape(images.shape().begin() + 1, images.shape().end()))) +
                          ", not images [channels, height, width] to turn channels-last");
  if (!image_channels(images.dim(1)) && image_channels(images.dim(3)))
    throw InvalidArgument(what + ": images of " + to_string(Shape(images.shape().begin() + 1, images.shape().end())) +
                          " look channels-last already ([height, width, channels]), not [channels, height, width]");
  const std::int64_t n = images.dim(0), c = images.dim(1), hw = images.dim(2) * images.dim(3);
  Tensor out({n, images.dim(2), images.dim(3), c});
  for (std::int64_t i = 0; i < n; ++i) {
    const float* in = images.data() + i * c * hw;
    float* o = out.data() + i * c * hw;
    for (std::int64_t ch = 0; ch < c; ++ch)
      for (std::int64_t p = 0; p < hw; ++p) o[p * c + ch] = in[ch * hw + p];
  }
  return out;
}

Dataset channels_last(const Dataset& data, const std::string& what) {
  auto storage = std::make_shared<Storage>(*data.storage());
  if (storage->source) throw InvalidArgument(what + ": images read as they are used cannot be turned channels-last");
  storage->features = channels_last(storage->features, what);
  return Dataset(std::move(storage));
}

void check_not_channels_first(const Shape& example, const std::string& what, const std::string& remedy) {
  if (example.size() == 3 && image_channels(example[0]) && example[1] > 4 && example[2] > 4)
    throw InvalidArgument(what + ": images of " + to_string(example) +
                          " look channels-first ([channels, height, width], PyTorch's layout), where Cohort's are "
                          "[height, width, channels]: " + remedy);
}

Dataset detail::dataset_of_arrays(NpyArray features, const Shape& features_shape,
                                  NpyArray targets, const std::string& source,
                                  const std::string& features_key,
                                  const std::string& targets_key, int num_classes,
                                  ShardSpec shard) {
  if (features_key == targets_key)
    fail(source, "the features and the targets are both array '" + features_key +
                     "': name the targets' own array (a model would learn to copy its input)");
  const Names names{source, "features '" + features_key + "'", "targets '" + targets_key + "'",
                    source + ": targets '" + targets_key + "'", source};
  if (shard.count == 1) return make_dataset(std::move(features), std::move(targets), names, num_classes);
  return make_shard(std::move(features), features_shape, std::move(targets), names, num_classes,
                    shard);
}

}  // namespace cohort::data