#pragma once
// Maps C++ element types to MPI datatypes and reduction names to MPI_Op.

#include <mpi.h>

#include <cstdint>
#include <type_traits>

namespace cohort::mpi {

/// The MPI datatype of T; only the types Cohort sends are mapped.
template <typename T>
MPI_Datatype datatype() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, float>) return MPI_FLOAT;
  else if constexpr (std::is_same_v<U, double>) return MPI_DOUBLE;
  else if constexpr (std::is_same_v<U, std::int32_t>) return MPI_INT32_T;
  else if constexpr (std::is_same_v<U, std::int64_t>) return MPI_INT64_T;
  else if constexpr (std::is_same_v<U, std::uint32_t>) return MPI_UINT32_T;
  else if constexpr (std::is_same_v<U, std::uint64_t>) return MPI_UINT64_T;
  else if constexpr (std::is_same_v<U, std::uint16_t>) return MPI_UINT16_T;
  else if constexpr (std::is_same_v<U, std::uint8_t>) return MPI_UINT8_T;
  else if constexpr (std::is_same_v<U, char>) return MPI_CHAR;
  else static_assert(sizeof(U) == 0, "no MPI datatype for this type");
}

/// Element-wise reductions.
enum class Op { kSum, kMax, kMin, kReplace, kNoOp };

inline MPI_Op to_mpi(Op op) {
  switch (op) {
    case Op::kSum: return MPI_SUM;
    case Op::kMax: return MPI_MAX;
    case Op::kMin: return MPI_MIN;
    case Op::kReplace: return MPI_REPLACE;
    case Op::kNoOp: return MPI_NO_OP;
  }
  return MPI_OP_NULL;
}

}  // namespace cohort::mpi
