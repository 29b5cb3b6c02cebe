#pragma once
// Handle<T>: the one owner type for every CUDA, cuBLAS and cuDNN object Cohort makes (streams,
// events, library handles, cuDNN descriptors).

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <utility>

namespace cohort::gpu {

/// Destroys one object of each kind (defined in gpu/handle.cc). Destruction failures cannot be
/// reported from a destructor and only follow a context that is already broken, which a checked
/// call has reported or will report; they are ignored.
void destroy(cudaStream_t stream) noexcept;
void destroy(cudaEvent_t event) noexcept;
void destroy(cublasHandle_t handle) noexcept;
void destroy(cudnnHandle_t handle) noexcept;
void destroy(cudnnTensorDescriptor_t descriptor) noexcept;
void destroy(cudnnFilterDescriptor_t descriptor) noexcept;
void destroy(cudnnConvolutionDescriptor_t descriptor) noexcept;
void destroy(cudnnPoolingDescriptor_t descriptor) noexcept;

/// Owns one object of an opaque CUDA library type T (a pointer type with a destroy() overload
/// above). Made empty; a create call fills it through receive():
///
///   Handle<cudnnTensorDescriptor_t> x;
///   COHORT_CUDNN_CALL(cudnnCreateTensorDescriptor(x.receive()));
///
/// Move-only: a move leaves the source empty. Types holding Handles need no destructor or move
/// operations of their own (the defaults are right). Not thread-safe.
template <typename T>
class Handle {
 public:
  Handle() = default;
  Handle(Handle&& other) noexcept : raw_(std::exchange(other.raw_, nullptr)) {}
  Handle& operator=(Handle&& other) noexcept {
    if (this != &other) {
      reset();
      raw_ = std::exchange(other.raw_, nullptr);
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }

  T get() const noexcept { return raw_; }
  explicit operator bool() const noexcept { return raw_ != nullptr; }
  /// Destroys what is held and returns where a create call writes the new object.
  T* receive() noexcept {
    reset();
    return &raw_;
  }
  /// Destroys what is held, leaving the handle empty.
  void reset() noexcept {
    if (raw_ != nullptr) destroy(raw_);
    raw_ = nullptr;
  }

 private:
  T raw_ = nullptr;
};

}  // namespace cohort::gpu
