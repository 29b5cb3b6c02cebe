#include "cohort/core/nn/data/dataset.h"

#include <numeric>
#include <utility>

namespace cohort::data {

namespace {

std::shared_ptr<const Storage> empty_storage() {
  auto storage = std::make_shared<Storage>();
  storage->images.resize({0, 28, 28, 1});
  storage->name = "empty";
  return storage;
}

}  // namespace

Dataset::Dataset() : Dataset(empty_storage()) {}

Dataset::Dataset(std::shared_ptr<const Storage> storage) : storage_(std::move(storage)) {
  if (!storage_) throw InvalidArgument("Dataset: null storage");
  const Storage& s = *storage_;
  const Shape& shape = s.images.shape();
  if (shape.size() != 4 || shape[3] != 1)
    throw InvalidArgument("Dataset " + s.name + ": images have shape " + to_string(shape) +
                          ", expected [n, rows, cols, 1]");
  if (static_cast<std::size_t>(shape[0]) != s.labels.size())
    throw InvalidArgument("Dataset " + s.name + ": " + std::to_string(s.labels.size()) +
                          " labels for " + std::to_string(shape[0]) + " images");
  if (s.num_classes < 1)
    throw InvalidArgument("Dataset " + s.name + ": num_classes " + std::to_string(s.num_classes));
  for (std::size_t i = 0; i < s.labels.size(); ++i)
    if (s.labels[i] < 0 || s.labels[i] >= s.num_classes)
      throw InvalidArgument("Dataset " + s.name + ": label " + std::to_string(s.labels[i]) +
                            " at index " + std::to_string(i) + " is outside [0, " +
                            std::to_string(s.num_classes) + ")");
  image_size_ = shape[1] * shape[2];
  indices_.resize(static_cast<std::size_t>(shape[0]));
  std::iota(indices_.begin(), indices_.end(), std::int64_t{0});
}

Dataset::Dataset(std::shared_ptr<const Storage> storage, std::vector<std::int64_t> indices)
    : storage_(std::move(storage)), indices_(std::move(indices)) {
  const Shape& shape = storage_->images.shape();
  image_size_ = shape[1] * shape[2];
}

Shape Dataset::image_shape() const {
  const Shape& shape = storage_->images.shape();
  return {shape[1], shape[2], shape[3]};
}

std::span<const float> Dataset::image(std::int64_t i) const {
  const std::int64_t at = indices_.at(static_cast<std::size_t>(i));
  return {storage_->images.data() + at * image_size_, static_cast<std::size_t>(image_size_)};
}

std::int32_t Dataset::label(std::int64_t i) const {
  return storage_->labels[static_cast<std::size_t>(indices_.at(static_cast<std::size_t>(i)))];
}

Dataset Dataset::shard(int index, int count) const {
  if (count < 1 || index < 0 || index >= count)
    throw InvalidArgument("Dataset::shard: index " + std::to_string(index) + " of count " +
                          std::to_string(count) + " (need 0 <= index < count)");
  std::vector<std::int64_t> mine;
  mine.reserve(indices_.size() / static_cast<std::size_t>(count) + 1);
  for (std::size_t i = static_cast<std::size_t>(index); i < indices_.size();
       i += static_cast<std::size_t>(count))
    mine.push_back(indices_[i]);
  return Dataset(storage_, std::move(mine));
}

}  // namespace cohort::data
