#pragma once
// Eigen views of tensors, for the ops that compute with Eigen expressions. Kept apart from
// tensor.h so that the many files that only hold or pass tensors do not parse Eigen, which is
// most of what compiling such a file costs.

#include <Eigen/Core>

#include <cstdint>

#include "cohort/core/nn/tensor.h"

namespace cohort {

/// Row-major matrix and vector types the ops compute with.
using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixMap = Eigen::Map<Matrix, Eigen::Aligned64>;
using ConstMatrixMap = Eigen::Map<const Matrix, Eigen::Aligned64>;
using VectorMap = Eigen::Map<Eigen::VectorXf, Eigen::Aligned64>;
using ConstVectorMap = Eigen::Map<const Eigen::VectorXf, Eigen::Aligned64>;

/// t as a rows x cols matrix; InvalidArgument unless rows * cols == t.size().
MatrixMap matrix(Tensor& t, std::int64_t rows, std::int64_t cols);
ConstMatrixMap matrix(const Tensor& t, std::int64_t rows, std::int64_t cols);

/// t's elements as one vector.
inline VectorMap flat(Tensor& t) { return VectorMap(t.data(), t.size()); }
inline ConstVectorMap flat(const Tensor& t) { return ConstVectorMap(t.data(), t.size()); }

}  // namespace cohort
