#include "cohort/core/nn/tensor.h"

#include <algorithm>
#include <cstdlib>
#include <new>
#include <sstream>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "cohort/core/base/error.h"
#include "cohort/core/nn/tensor_eigen.h"

namespace cohort {
namespace tensor_detail {

void* allocate(std::size_t bytes) {
  constexpr std::size_t kHugePage = std::size_t{2} << 20, kLine = 64;
  const std::size_t align = bytes >= kHugePage ? kHugePage : kLine;
  const std::size_t size = (std::max<std::size_t>(bytes, 1) + align - 1) / align * align;
  void* p = std::aligned_alloc(align, size);
  if (p == nullptr) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (align == kHugePage) madvise(p, size, MADV_HUGEPAGE);  // advice only: failure is harmless
#endif
  return p;
}

void deallocate(void* p) noexcept { std::free(p); }

}  // namespace tensor_detail

Tensor::Tensor(Shape shape) {
  resize(shape);
  set_zero();
}

Tensor::Tensor(Shape shape, std::span<const float> values) {
  resize(shape);
  if (values.size() != static_cast<std::size_t>(size_))
    throw InvalidArgument("Tensor: " + std::to_string(values.size()) + " values for shape " +
                          to_string(shape_));
  std::copy(values.begin(), values.end(), data_.begin());
}

void Tensor::resize(const Shape& shape) {
  for (std::int64_t d : shape)
    if (d < 0) throw InvalidArgument("Tensor: negative dimension in shape " + to_string(shape));
  shape_ = shape;
  size_ = num_elements(shape_);
  // The vector never shrinks, so a steady-state step reuses its buffer.
  if (static_cast<std::size_t>(size_) > data_.size()) data_.resize(static_cast<std::size_t>(size_));
}

void Tensor::set_zero() { std::fill_n(data_.begin(), size_, 0.0f); }

void Tensor::reshape(const Shape& shape) {
  if (std::ranges::any_of(shape, [](std::int64_t d) { return d < 0; }) ||
      num_elements(shape) != size_)
    throw InvalidArgument("Tensor: cannot reshape " + to_string(shape_) + " to " +
                          to_string(shape));
  shape_ = shape;
}

namespace {

void check_view(const Tensor& t, std::int64_t rows, std::int64_t cols) {
  if (rows * cols != t.size())
    throw InvalidArgument("Tensor: cannot view " + to_string(t.shape()) + " as " +
                          std::to_string(rows) + "x" + std::to_string(cols));
}

}  // namespace

MatrixMap matrix(Tensor& t, std::int64_t rows, std::int64_t cols) {
  check_view(t, rows, cols);
  return MatrixMap(t.data(), rows, cols);
}

ConstMatrixMap matrix(const Tensor& t, std::int64_t rows, std::int64_t cols) {
  check_view(t, rows, cols);
  return ConstMatrixMap(t.data(), rows, cols);
}

}  // namespace cohort
