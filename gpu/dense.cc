// Dense on cuBLAS. cuBLAS is column-major; a row-major [r, c] matrix is the column-major [c, r]
// matrix of its transpose, so each row-major product is computed as the transposed product with
// the operands swapped: Y = X W becomes Y^T = W^T X^T, with no copies.
#include <cublas_v2.h>

#include <climits>
#include <string>

#include "cohort/gpu/error.h"
#include "cohort/gpu/ops.h"

namespace cohort::gpu {
namespace {

void check_sizes(const char* what, std::int64_t n, std::int64_t in, std::int64_t out) {
  // cuBLAS takes int dimensions and leading dimensions.
  if (n < 0 || in < 1 || out < 1 || n > INT_MAX || in > INT_MAX || out > INT_MAX)
    throw InvalidArgument(std::string(what) + ": n = " + std::to_string(n) + ", in = " +
                          std::to_string(in) + ", out = " + std::to_string(out) +
                          " (need n >= 0, in >= 1, out >= 1, each below 2^31)");
}

void set_math(const CublasHandle& cublas, bool allow_tf32) {
  COHORT_CUBLAS_CALL(cublasSetMathMode(
      cublas.get(), allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
}

cudaStream_t stream_of(const CublasHandle& cublas) {
  cudaStream_t stream = nullptr;
  COHORT_CUBLAS_CALL(cublasGetStream(cublas.get(), &stream));
  return stream;
}

}  // namespace

void dense_forward(const CublasHandle& cublas, std::int64_t n, std::int64_t in, std::int64_t out,
                   const float* x, const float* w, const float* b, float* y, bool allow_tf32) {
  check_sizes("dense_forward", n, in, out);
  if (n == 0) return;
  require_device_pointer(x, "dense_forward", "x");
  require_device_pointer(w, "dense_forward", "w");
  require_device_pointer(y, "dense_forward", "y");
  set_math(cublas, allow_tf32);
  const float one = 1.0f, zero = 0.0f;
  const int ni = static_cast<int>(n), ii = static_cast<int>(in), oi = static_cast<int>(out);
  // Y^T [out, n] = W^T [out, in] * X^T [in, n].
  COHORT_CUBLAS_CALL(cublasSgemm(cublas.get(), CUBLAS_OP_N, CUBLAS_OP_N, oi, ni, ii, &one, w, oi,
                                 x, ii, &zero, y, oi));
  if (b != nullptr)
    detail::bias_add(stream_of(cublas), static_cast<std::size_t>(n), static_cast<std::size_t>(out),
                     b, y);
}

void dense_backward(const CublasHandle& cublas, std::int64_t n, std::int64_t in, std::int64_t out,
                    const float* x, const float* w, const float* dy, float* dw, float* db,
                    float* dx, bool allow_tf32) {
  check_sizes("dense_backward", n, in, out);
  require_device_pointer(dw, "dense_backward", "dw");
  if (n > 0) {
    require_device_pointer(x, "dense_backward", "x");
    require_device_pointer(dy, "dense_backward", "dy");
  }
  if (dx != nullptr && n > 0) require_device_pointer(w, "dense_backward", "w");
  set_math(cublas, allow_tf32);
  const float one = 1.0f, zero = 0.0f;
  const int ni = static_cast<int>(n), ii = static_cast<int>(in), oi = static_cast<int>(out);
  // dW^T [out, in] = dY^T [out, n] * X [n, in]; with n == 0 this writes zeros (k = 0, beta = 0).
  COHORT_CUBLAS_CALL(cublasSgemm(cublas.get(), CUBLAS_OP_N, CUBLAS_OP_T, oi, ii, ni, &one, dy, oi,
                                 x, ii, &zero, dw, oi));
  if (db != nullptr)
    detail::bias_grad(stream_of(cublas), static_cast<std::size_t>(n),
                      static_cast<std::size_t>(out), dy, db);
  if (dx == nullptr || n == 0) return;
  // dX^T [in, n] = W [in, out] * dY^T [out, n].
  COHORT_CUBLAS_CALL(cublasSgemm(cublas.get(), CUBLAS_OP_T, CUBLAS_OP_N, ii, ni, oi, &one, w, oi,
                                 dy, oi, &zero, dx, ii));
}

}  // namespace cohort::gpu
