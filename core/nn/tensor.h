#pragma once
// Dense float32 tensors. Eigen views of them: tensor_eigen.h.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cohort/core/base/shape.h"

namespace cohort {

namespace tensor_detail {

/// Tensor storage: 64-byte aligned; blocks of 2 MB and more are aligned to 2 MB and offered to
/// the kernel as transparent huge pages (where it takes them on request only, as Debian's
/// default does), so the passes over large activations miss the TLB 512 times less often.
void* allocate(std::size_t bytes);
void deallocate(void* p) noexcept;

template <typename T>
struct Allocator {
  using value_type = T;
  Allocator() = default;
  template <typename U>
  Allocator(const Allocator<U>&) {}  // NOLINT: rebinding, as std::allocator
  T* allocate(std::size_t n) { return static_cast<T*>(tensor_detail::allocate(n * sizeof(T))); }
  void deallocate(T* p, std::size_t) noexcept { tensor_detail::deallocate(p); }
  template <typename U>
  bool operator==(const Allocator<U>&) const { return true; }
};

}  // namespace tensor_detail

/// A dense float32 tensor that owns 64-byte-aligned storage.
///
/// resize() keeps the storage when it is large enough, so an op that resizes its output to the
/// same shape every step allocates only on the first. Copyable (a deep copy) and movable.
/// Not thread-safe for concurrent writes.
class Tensor {
 public:
  Tensor() = default;
  /// Zero-filled.
  explicit Tensor(Shape shape);
  Tensor(Shape shape, std::span<const float> values);

  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  std::int64_t dim(int i) const { return shape_.at(static_cast<std::size_t>(i)); }
  std::int64_t size() const { return size_; }

  float* data() { return data_.data(); }
  const float* data() const { return data_.data(); }
  std::span<float> span() { return {data_.data(), static_cast<std::size_t>(size_)}; }
  std::span<const float> span() const { return {data_.data(), static_cast<std::size_t>(size_)}; }
  float& operator[](std::int64_t i) { return data_[static_cast<std::size_t>(i)]; }
  float operator[](std::int64_t i) const { return data_[static_cast<std::size_t>(i)]; }

  /// Changes the shape; contents are unspecified afterwards. Allocates only when growing past the
  /// largest size this tensor has held.
  void resize(const Shape& shape);
  void set_zero();
  /// Changes the shape to one of the same number of elements, keeping the contents (a view of
  /// the same values: [N, 1, T, C] as [N, T, C]). InvalidArgument when the sizes differ.
  void reshape(const Shape& shape);


 private:
  Shape shape_;
  std::int64_t size_ = 0;
  std::vector<float, tensor_detail::Allocator<float>> data_;
};

}  // namespace cohort
