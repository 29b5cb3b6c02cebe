#include "cohort/core/nn/data/dataset.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "cohort/core/nn/data/random.h"
#include "cohort/core/nn/layer.h"

namespace cohort::data {

namespace {

std::shared_ptr<const Storage> empty_storage() {
  auto storage = std::make_shared<Storage>();
  storage->features.resize({0, 28, 28, 1});
  storage->name = "empty";
  return storage;
}

// Every count-th example of another source's from index: example i is its index + i * count.
class StridedSource : public ExampleSource {
 public:
  StridedSource(std::shared_ptr<const ExampleSource> all, std::int64_t index, std::int64_t count)
      : all_(std::move(all)), index_(index), count_(count) {}
  void read(std::int64_t i, float* out) const override { all_->read(index_ + i * count_, out); }

 private:
  std::shared_ptr<const ExampleSource> all_;
  std::int64_t index_, count_;
};

// Some of another source's examples: example i is its indices[i].
class SubsetSource : public ExampleSource {
 public:
  SubsetSource(std::shared_ptr<const ExampleSource> all, std::vector<std::int64_t> indices)
      : all_(std::move(all)), indices_(std::move(indices)) {}
  void read(std::int64_t i, float* out) const override { all_->read(index(i), out); }
  std::int64_t index(std::int64_t i) const { return indices_[static_cast<std::size_t>(i)]; }
  const std::shared_ptr<const ExampleSource>& all() const { return all_; }

 private:
  std::shared_ptr<const ExampleSource> all_;
  std::vector<std::int64_t> indices_;
};

// Windows of consecutive examples of a series: example i is the series' examples i * stride to
// i * stride + length - 1, one after the other.
class WindowSource : public ExampleSource {
 public:
  WindowSource(Dataset series, std::int64_t length, std::int64_t stride)
      : series_(std::move(series)), length_(length), stride_(stride) {}
  void read(std::int64_t i, float* out) const override {
    const std::int64_t step = series_.example_size();
    for (std::int64_t k = 0; k < length_; ++k)
      series_.read_example(i * stride_ + k, out + k * step);
  }

 private:
  Dataset series_;
  std::int64_t length_, stride_;
};

// Checks a storage; returns its example count.
std::int64_t check(const Storage& s) {
  const std::string what = "Dataset " + s.name + ": ";
  if (s.source != nullptr && s.features.rank() != 0)
    throw InvalidArgument(what + "holds both features and a source of examples; give one");
  const Shape& shape = s.source != nullptr ? s.source_shape : s.features.shape();
  if (shape.size() < 2)
    throw InvalidArgument(what + "features have shape " + to_string(shape) +
                          ", expected [n, ...] (a batch dimension and an example shape)");
  const std::int64_t n = shape[0];
  for (std::size_t d = 1; d < shape.size(); ++d)
    if (shape[d] < 1)
      throw InvalidArgument(what + "features have shape " + to_string(shape) +
                            ", an empty example shape");
  if (s.targets.rank() > 0) {
    if (!s.labels.empty())
      throw InvalidArgument(what + "has both labels and float targets; give one");
    if (s.targets.rank() < 2 || s.targets.dim(0) != n)
      throw InvalidArgument(what + "targets " + to_string(s.targets.shape()) + " for " +
                            std::to_string(n) + " examples (expected [" + std::to_string(n) +
                            ", ...])");
    return n;
  }
  if (static_cast<std::int64_t>(s.labels.size()) != n)
    throw InvalidArgument(what + std::to_string(s.labels.size()) + " labels for " +
                          std::to_string(n) + " examples");
  if (s.num_classes < 1)
    throw InvalidArgument(what + "num_classes " + std::to_string(s.num_classes));
  for (std::size_t i = 0; i < s.labels.size(); ++i)
    if (s.labels[i] < 0 || s.labels[i] >= s.num_classes)
      throw InvalidArgument(what + "label " + std::to_string(s.labels[i]) + " at index " +
                            std::to_string(i) + " is outside [0, " +
                            std::to_string(s.num_classes) + ")");
  return n;
}

}  // namespace

Dataset::Dataset() : Dataset(empty_storage()) {}

Dataset::Dataset(std::shared_ptr<const Storage> storage) : storage_(std::move(storage)) {
  if (!storage_) throw InvalidArgument("Dataset: null storage");
  size_ = check(*storage_);
  example_size_ = num_elements(example_shape());
  target_size_ = has_labels() ? 0 : num_elements(target_shape());
}

Dataset Dataset::from_arrays(Tensor features, std::vector<std::int32_t> labels, int num_classes,
                             std::string name) {
  auto storage = std::make_shared<Storage>();
  storage->features = std::move(features);
  storage->labels = std::move(labels);
  storage->num_classes = num_classes;
  storage->name = std::move(name);
  return Dataset(std::move(storage));
}

Dataset Dataset::from_arrays(Tensor features, Tensor targets, std::string name) {
  auto storage = std::make_shared<Storage>();
  storage->features = std::move(features);
  storage->targets = std::move(targets);
  storage->num_classes = 0;
  storage->name = std::move(name);
  return Dataset(std::move(storage));
}

const Shape& Dataset::full_shape() const {
  return in_memory() ? storage_->features.shape() : storage_->source_shape;
}

Shape Dataset::example_shape() const {
  const Shape& shape = full_shape();
  return Shape(shape.begin() + 1, shape.end());
}

Shape Dataset::target_shape() const {
  if (has_labels()) return {};
  const Shape& shape = storage_->targets.shape();
  return Shape(shape.begin() + 1, shape.end());
}

TargetSpec Dataset::target_spec() const {
  return has_labels() ? TargetSpec::classes(num_classes()) : TargetSpec::values(target_shape());
}

void Dataset::check_index(std::int64_t i) const {
  if (i < 0 || i >= size_)
    throw std::out_of_range("Dataset " + name() + ": example " + std::to_string(i) + " of " +
                            std::to_string(size_));
}

std::span<const float> Dataset::example(std::int64_t i) const {
  if (!in_memory())
    throw Error("Dataset " + name() + ": its examples are made as they are used, so there is none "
                "to view: read them with read_example()");
  check_index(i);
  return {storage_->features.data() + i * example_size_, static_cast<std::size_t>(example_size_)};
}

void Dataset::read_example(std::int64_t i, float* out) const {
  check_index(i);
  if (in_memory()) {
    std::copy_n(storage_->features.data() + i * example_size_, example_size_, out);
  } else {
    storage_->source->read(i, out);
  }
}

std::int32_t Dataset::label(std::int64_t i) const {
  if (!has_labels()) throw InvalidArgument("Dataset " + name() + " has float targets, not labels");
  check_index(i);
  return storage_->labels[static_cast<std::size_t>(i)];
}

std::span<const float> Dataset::target(std::int64_t i) const {
  if (has_labels()) throw InvalidArgument("Dataset " + name() + " has labels, not float targets");
  check_index(i);
  return {storage_->targets.data() + i * target_size_, static_cast<std::size_t>(target_size_)};
}

Dataset Dataset::shard(int index, int count) const {
  if (count < 1 || index < 0 || index >= count)
    throw InvalidArgument("Dataset::shard: index " + std::to_string(index) + " of count " +
                          std::to_string(count) + " (need 0 <= index < count)");
  if (count == 1) return *this;
  std::vector<std::int64_t> indices;  // index, index + count, ...
  for (std::int64_t i = index; i < size_; i += count) indices.push_back(i);
  Dataset part = subset(indices);
  if (in_memory()) return part;
  // Examples made on use: a source that strides, not one that keeps every index.
  auto storage = std::make_shared<Storage>(*part.storage());
  storage->source = std::make_shared<StridedSource>(storage_->source, index, count);
  return Dataset(std::move(storage));
}

Dataset Dataset::subset(std::span<const std::int64_t> indices) const {
  for (const std::int64_t i : indices) check_index(i);
  const auto n = static_cast<std::int64_t>(indices.size());
  // The chosen rows, copied into storage of the subset's own.
  const auto rows = [&](const Tensor& all, std::int64_t row_size) {
    Shape shape = all.shape();
    shape[0] = n;
    Tensor out(shape);
    for (std::int64_t i = 0; i < n; ++i)
      std::copy_n(all.data() + indices[static_cast<std::size_t>(i)] * row_size, row_size,
                  out.data() + i * row_size);
    return out;
  };
  auto storage = std::make_shared<Storage>();
  if (in_memory()) {
    storage->features = rows(storage_->features, example_size_);
  } else {
    // Over the source this one reads from: a subset of a subset reads the original directly.
    std::shared_ptr<const ExampleSource> source = storage_->source;
    std::vector<std::int64_t> at(indices.begin(), indices.end());
    if (const auto* inner = dynamic_cast<const SubsetSource*>(source.get())) {
      for (std::int64_t& i : at) i = inner->index(i);
      source = inner->all();
    }
    storage->source = std::make_shared<SubsetSource>(std::move(source), std::move(at));
    storage->source_shape = storage_->source_shape;
    storage->source_shape[0] = n;
  }
  if (has_labels()) {
    storage->labels.reserve(indices.size());
    for (const std::int64_t i : indices) storage->labels.push_back(storage_->labels[static_cast<std::size_t>(i)]);
  } else {
    storage->targets = rows(storage_->targets, target_size_);
  }
  storage->num_classes = storage_->num_classes;
  storage->name = storage_->name;
  return Dataset(std::move(storage));
}

Dataset Dataset::windows(std::int64_t length, std::int64_t horizon, std::int64_t stride) const {
  const std::string what = "Dataset " + name() + ": windows of " + std::to_string(length) +
                           " steps, horizon " + std::to_string(horizon) + ", stride " +
                           std::to_string(stride);
  if (length < 1 || stride < 1 || horizon < 0)
    throw InvalidArgument(what + ": the length and stride must be >= 1, the horizon >= 0");
  if (size_ < length + horizon)
    throw InvalidArgument(what + ": the series has " + std::to_string(size_) +
                          " steps, fewer than length + horizon");
  const std::int64_t n = (size_ - length - horizon) / stride + 1;
  auto storage = std::make_shared<Storage>();
  storage->source = std::make_shared<WindowSource>(*this, length, stride);
  storage->source_shape = {n, length};
  const Shape step = example_shape();
  storage->source_shape.insert(storage->source_shape.end(), step.begin(), step.end());
  // Window i's label or target: the series' at i * stride + length - 1 + horizon.
  const auto at = [&](std::int64_t i) { return i * stride + length - 1 + horizon; };
  if (has_labels()) {
    for (std::int64_t i = 0; i < n; ++i) storage->labels.push_back(label(at(i)));
  } else {
    Shape shape = target_shape();
    shape.insert(shape.begin(), n);
    storage->targets = Tensor(shape);
    for (std::int64_t i = 0; i < n; ++i) {
      const std::span<const float> t = target(at(i));
      std::copy(t.begin(), t.end(), storage->targets.data() + i * target_size_);
    }
  }
  storage->num_classes = storage_->num_classes;
  storage->name = storage_->name + " (windows of " + std::to_string(length) + ")";
  return Dataset(std::move(storage));
}

std::array<std::vector<std::int64_t>, 2> Dataset::split_indices(double fraction, std::uint64_t seed) const {
  char text[32];
  std::snprintf(text, sizeof text, "%g", fraction);
  const std::string what = "Dataset " + name() + ": validation split " + text;
  if (!(fraction > 0 && fraction < 1))
    throw InvalidArgument(what + " is not a fraction in (0, 1)");
  const auto n = static_cast<std::size_t>(size_);
  const auto validation = static_cast<std::size_t>(fraction * static_cast<double>(n));
  if (validation == 0 || validation == n)
    throw InvalidArgument(what + " of " + std::to_string(n) + " examples leaves the " +
                          (validation == 0 ? "validation" : "training") + " part empty");
  const std::vector<char> held = detail::held_out(n, validation, seed);
  std::array<std::vector<std::int64_t>, 2> parts;
  for (std::size_t i = 0; i < n; ++i) parts[held[i] != 0].push_back(static_cast<std::int64_t>(i));
  return parts;
}

std::pair<Dataset, Dataset> Dataset::split(double fraction, std::uint64_t seed) const {
  const auto parts = split_indices(fraction, seed);
  return {subset(parts[0]), subset(parts[1])};
}

Dataset Dataset::split_part(double fraction, std::uint64_t seed, bool validation, int index, int count) const {
  if (count < 1 || index < 0 || index >= count)
    throw InvalidArgument("Dataset " + name() + ": shard " + std::to_string(index) + " of " +
                          std::to_string(count));
  const std::vector<std::int64_t> part = split_indices(fraction, seed)[validation ? 1 : 0];
  std::vector<std::int64_t> mine;
  for (std::size_t i = static_cast<std::size_t>(index); i < part.size(); i += static_cast<std::size_t>(count))
    mine.push_back(part[i]);
  return subset(mine);
}

FeatureSums feature_sums(const Dataset& data) {
  const Shape shape = data.example_shape();
  const auto features = static_cast<std::size_t>(shape.empty() ? 1 : shape.back());
  FeatureSums sums{data.size(), std::vector<double>(features), std::vector<double>(features)};
  std::vector<float> x(static_cast<std::size_t>(data.example_size()));
  for (std::int64_t i = 0; i < data.size(); ++i) {
    data.read_example(i, x.data());
    for (std::size_t j = 0; j < x.size(); ++j) {
      const double v = x[j];
      sums.sum[j % features] += v;
      sums.sum_squares[j % features] += v * v;
    }
  }
  // Each feature appears once per position in front of the last axis.
  sums.count *= data.example_size() / static_cast<std::int64_t>(features);
  return sums;
}

std::string scale_mismatch(FeatureSums reference, const Dataset& data) {
  if (reference.count <= 0 || data.size() == 0) return {};
  FeatureSums other = feature_sums(data);
  reference.pool();
  other.pool();
  const auto moments = [](const FeatureSums& s) {
    const double mean = s.sum[0] / static_cast<double>(s.count);
    return std::pair{mean, std::sqrt(std::max(0.0, s.sum_squares[0] / static_cast<double>(s.count) - mean * mean))};
  };
  const auto [mean, deviation] = moments(reference);
  const auto [their_mean, their_deviation] = moments(other);
  if (!(deviation > 0) || !std::isfinite(their_mean)) return {};
  const bool shifted = std::abs(their_mean - mean) > 10 * deviation;
  const bool spread = their_deviation > 20 * deviation || (their_deviation > 0 && 20 * their_deviation < deviation);
  if (!shifted && !spread) return {};
  char text[256];
  std::snprintf(text, sizeof text,
                "its values have mean %.4g and standard deviation %.4g, the training data's %.4g and "
                "%.4g: prepared otherwise (bytes 0-255 beside values in [0, 1], one set standardised "
                "and not the other)?",
                their_mean, their_deviation, mean, deviation);
  return text;
}

void FeatureSums::add_over(CrossReplicaSum& replicas) {
  // One reduction: the count (exact in a double up to 2^53) and both sums.
  std::vector<double> all{static_cast<double>(count)};
  all.insert(all.end(), sum.begin(), sum.end());
  all.insert(all.end(), sum_squares.begin(), sum_squares.end());
  replicas.sum(all);
  count = static_cast<std::int64_t>(all[0]);
  const auto features = static_cast<std::ptrdiff_t>(sum.size());
  std::copy(all.begin() + 1, all.begin() + 1 + features, sum.begin());
  std::copy(all.begin() + 1 + features, all.end(), sum_squares.begin());
}

void FeatureSums::pool() {
  count *= static_cast<std::int64_t>(sum.size());
  sum = {std::accumulate(sum.begin(), sum.end(), 0.0)};
  sum_squares = {std::accumulate(sum_squares.begin(), sum_squares.end(), 0.0)};
}

void FeatureSums::moments(std::vector<float>& mean, std::vector<float>& std) const {
  if (count <= 0) throw InvalidArgument("feature moments of no examples");
  mean.resize(sum.size());
  std.resize(sum.size());
  const auto n = static_cast<double>(count);
  for (std::size_t j = 0; j < sum.size(); ++j) {
    const double m = sum[j] / n;
    const double variance = std::max(0.0, sum_squares[j] / n - m * m);
    mean[j] = static_cast<float>(m);
    // Relative to the mean's size: a spread that is rounding error is no spread.
    std[j] = variance > 1e-12 * std::max(1.0, m * m) ? static_cast<float>(std::sqrt(variance)) : 1.0f;
  }
}

}  // namespace cohort::data

namespace cohort::data {

namespace {

// A list of weights >= 0 separated by commas, at least one of them positive (plain decimal or
// exponent notation, no spaces); InvalidArgument naming `what` and `spec` otherwise.
std::vector<float> parse_weights(const std::string& spec, const std::string& what) {
  std::vector<float> weights;
  std::size_t begin = 0;
  for (;;) {
    const std::size_t end = std::min(spec.find(',', begin), spec.size());
    const std::string item = spec.substr(begin, end - begin);
    float w = 0;
    const auto [stop, error] =
        std::from_chars(item.data(), item.data() + item.size(), w, std::chars_format::general);
    if (item.empty() || error != std::errc() || stop != item.data() + item.size() ||
        !std::isfinite(w) || w < 0)
      throw InvalidArgument(what + " '" + spec + "': '" + item + "' is not a finite number >= 0 "
                            "(give \"balanced\", or weights separated by commas)");
    weights.push_back(w);
    if (end < spec.size()) {
      begin = end + 1;
      continue;
    }
    if (std::none_of(weights.begin(), weights.end(), [](float v) { return v > 0; }))
      throw InvalidArgument(what + " '" + spec + "': every weight is 0, which would train nothing");
    return weights;
  }
}

}  // namespace

std::vector<float> class_weights(const std::string& spec, const Dataset& data,
                                 CrossReplicaSum* replicas, const std::string& what) {
  if (!data.has_labels())
    throw InvalidArgument(what + " '" + spec + "': the data has float targets, not class labels");
  const int classes = data.num_classes();
  if (spec == "balanced") {
    // Each class's examples, with the total last, summed over the replicas in one reduction.
    std::vector<double> counts(static_cast<std::size_t>(classes) + 1, 0.0);
    for (std::int64_t i = 0; i < data.size(); ++i)
      if (const std::int32_t label = data.label(i); label >= 0 && label < classes)
        counts[static_cast<std::size_t>(label)] += 1;
    counts.back() = static_cast<double>(data.size());
    if (replicas) replicas->sum(counts);
    std::vector<float> weights(static_cast<std::size_t>(classes), 1.0f);
    for (std::size_t c = 0; c < weights.size(); ++c)
      if (counts[c] > 0) weights[c] = static_cast<float>(counts.back() / (classes * counts[c]));
    return weights;
  }
  std::vector<float> weights = parse_weights(spec, what);
  if (static_cast<int>(weights.size()) != classes)
    throw InvalidArgument(what + " '" + spec + "': " + std::to_string(weights.size()) +
                          (weights.size() == 1 ? " weight" : " weights") + " for " +
                          std::to_string(classes) + " classes");
  return weights;
}

std::vector<float> positive_weights(const std::string& spec, const Dataset& data,
                                    CrossReplicaSum* replicas, const std::string& what) {
  if (data.has_labels())
    throw InvalidArgument(what + " '" + spec + "': the data has class labels, not float targets");
  const auto outputs = static_cast<std::size_t>(data.target_size());
  if (spec == "balanced") {
    // Each output's positives, with the examples last, summed over the replicas in one reduction.
    std::vector<double> sums(outputs + 1, 0.0);
    for (std::int64_t i = 0; i < data.size(); ++i) {
      const std::span<const float> t = data.target(i);
      for (std::size_t j = 0; j < outputs; ++j) sums[j] += static_cast<double>(t[j]);
    }
    sums.back() = static_cast<double>(data.size());
    if (replicas) replicas->sum(sums);
    std::vector<float> weights(outputs, 1.0f);
    for (std::size_t j = 0; j < outputs; ++j)
      if (sums[j] > 0) weights[j] = static_cast<float>((sums.back() - sums[j]) / sums[j]);
    return weights;
  }
  std::vector<float> weights = parse_weights(spec, what);
  if (weights.size() != 1 && weights.size() != outputs)
    throw InvalidArgument(what + " '" + spec + "': " + std::to_string(weights.size()) +
                          " weights for " + std::to_string(outputs) +
                          (outputs == 1 ? " output (give one)" : " outputs (give one for each, or one for all)"));
  return weights;
}

std::string describe_class_weights(const std::vector<float>& weights, const std::string& what) {
  std::string text = what + ":";
  for (const float w : weights) {
    char item[32];
    std::snprintf(item, sizeof item, " %.4g", static_cast<double>(w));
    text += item;
  }
  return text;
}

}  // namespace cohort::data
