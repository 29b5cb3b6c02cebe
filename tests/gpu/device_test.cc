// The GPU library on a real device: buffers, kernels against a CPU oracle, streams and events,
// library handles, and errors from failing calls. Every case passes, saying so, without a device.

#include <cublas_v2.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "cohort/gpu/buffer.h"
#include "cohort/gpu/device.h"
#include "cohort/gpu/error.h"
#include "cohort/gpu/handles.h"
#include "cohort/gpu/kernels.h"
#include "cohort/gpu/pinned.h"
#include "cohort/gpu/stream.h"
#include "support/gpu_test.h"

namespace gpu = cohort::gpu;

namespace {

std::vector<float> random_floats(std::size_t n, std::uint32_t seed) {
  std::mt19937 engine(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(n);
  for (float& v : values) v = dist(engine);
  return values;
}

// Not a multiple of the block size, and more than one block per SM.
constexpr std::size_t kN = (1u << 20) + 3;

}  // namespace

TEST_CASE("devices are described") {
  if (cohort::test::no_device()) return;
  MESSAGE(gpu::describe_devices());
  const gpu::DeviceProperties props = gpu::device_properties(0);
  CHECK_FALSE(props.name.empty());
  CHECK(props.compute_major >= 7);  // CUDA 13 supports sm_75 and newer.
  CHECK(props.total_memory > (std::size_t{1} << 30));
  CHECK(props.multiprocessors > 0);
  gpu::set_device(0);
  CHECK(gpu::current_device() == 0);
  CHECK_THROWS_AS(gpu::device_properties(gpu::device_count()), gpu::CudaError);
}

TEST_CASE("DeviceBuffer round trip, zero and moves") {
  if (cohort::test::no_device()) return;
  const std::vector<float> host = random_floats(kN, 1);
  gpu::DeviceBuffer<float> buffer(kN);
  CHECK(buffer.size() == kN);
  CHECK(buffer.size_bytes() == kN * sizeof(float));
  buffer.copy_from_host(host);
  std::vector<float> back(kN, 42.0f);
  buffer.copy_to_host(back);
  CHECK(back == host);

  buffer.zero();
  buffer.copy_to_host(back);
  CHECK(std::all_of(back.begin(), back.end(), [](float v) { return v == 0.0f; }));

  std::vector<float> too_short(kN - 1);
  CHECK_THROWS_WITH_AS(buffer.copy_to_host(too_short),
                       "DeviceBuffer::copy_to_host: host span has 1048578 elements, the buffer "
                       "1048579",
                       cohort::InvalidArgument);

  float* const address = buffer.data();
  gpu::DeviceBuffer<float> moved(std::move(buffer));
  CHECK(moved.data() == address);
  CHECK(moved.size() == kN);
  CHECK(buffer.data() == nullptr);  // NOLINT(bugprone-use-after-move): moves leave it empty
  CHECK(buffer.empty());
  buffer = std::move(moved);
  CHECK(buffer.data() == address);
  CHECK(moved.empty());  // NOLINT(bugprone-use-after-move)

  gpu::DeviceBuffer<double> none(0);
  CHECK(none.data() == nullptr);
  CHECK_NOTHROW(none.zero());
}

TEST_CASE("async copies on a stream") {
  if (cohort::test::no_device()) return;
  gpu::Stream stream;
  const std::vector<float> host = random_floats(kN, 2);
  gpu::DeviceBuffer<float> buffer(kN);
  std::vector<float> back(kN, 0.0f);
  buffer.copy_from_host_async(host, stream);
  buffer.copy_to_host_async(back, stream);
  stream.synchronize();
  CHECK(stream.query());
  CHECK(back == host);
  buffer.zero_async(stream);
  buffer.copy_to_host_async(back, stream);
  stream.synchronize();
  CHECK(std::all_of(back.begin(), back.end(), [](float v) { return v == 0.0f; }));
}

// `n` floats on pages of their own, so that two registrations never share a page.
class OwnPages {
 public:
  explicit OwnPages(std::size_t n) : size_(n) {
    const std::size_t bytes = (n * sizeof(float) + kPage - 1) / kPage * kPage;
    data_ = static_cast<float*>(std::aligned_alloc(kPage, bytes));
    REQUIRE(data_ != nullptr);
  }
  OwnPages(const OwnPages&) = delete;
  OwnPages& operator=(const OwnPages&) = delete;
  ~OwnPages() { std::free(data_); }
  std::span<float> span() { return {data_, size_}; }

 private:
  static constexpr std::size_t kPage = 4096;
  std::size_t size_;
  float* data_ = nullptr;
};

TEST_CASE("HostRegistration page-locks a range until its last registration goes") {
  if (cohort::test::no_device()) return;
  OwnPages host_pages(kN), back_pages(kN);
  const std::span<float> host = host_pages.span(), back = back_pages.span();
  const std::vector<float> values = random_floats(kN, 3);
  std::copy(values.begin(), values.end(), host.begin());
  std::fill(back.begin(), back.end(), 0.0f);
  CHECK_FALSE(gpu::is_registered_host_memory(host.data()));
  {
    const gpu::HostRegistration first(host.data(), host.size_bytes());
    REQUIRE(first.registered());
    CHECK(gpu::is_registered_host_memory(host.data()));
    {
      const gpu::HostRegistration again(host.data(), host.size_bytes());  // counted, not twice
      CHECK(again.registered());
      const gpu::HostRegistration other_range(host.data(), host.size_bytes() / 2);
      CHECK_FALSE(other_range.registered());
    }
    CHECK(gpu::is_registered_host_memory(host.data()));  // `first` still holds it
    gpu::HostRegistration moved_to;
    {
      gpu::HostRegistration target(back.data(), back.size_bytes());
      REQUIRE(target.registered());
      moved_to = std::move(target);
    }
    CHECK(gpu::is_registered_host_memory(back.data()));  // the move carried the registration
    gpu::Stream stream;
    gpu::DeviceBuffer<float> buffer(kN);
    buffer.copy_from_host_async(std::span<const float>(host), stream);
    buffer.copy_to_host_async(back, stream);
    stream.synchronize();
    CHECK(std::equal(back.begin(), back.end(), values.begin(), values.end()));
  }
  CHECK_FALSE(gpu::is_registered_host_memory(host.data()));
  CHECK_FALSE(gpu::is_registered_host_memory(back.data()));
  CHECK_FALSE(gpu::HostRegistration(nullptr, 16).registered());
  CHECK_FALSE(gpu::HostRegistration(host.data(), 0).registered());
}

TEST_CASE("fill, axpy and scale match the CPU") {
  if (cohort::test::no_device()) return;
  gpu::Stream stream;
  const std::vector<float> x = random_floats(kN, 3);
  std::vector<float> y = random_floats(kN, 4);
  gpu::DeviceBuffer<float> dx(kN), dy(kN);
  dx.copy_from_host(x);
  dy.copy_from_host(y);

  const float a = 0.37f;
  gpu::axpy(kN, a, dx.data(), dy.data(), stream);
  for (std::size_t i = 0; i < kN; ++i) y[i] = std::fma(a, x[i], y[i]);
  std::vector<float> got(kN);
  dy.copy_to_host_async(got, stream);
  stream.synchronize();
  CHECK(got == y);  // fmaf on both sides: bit-identical.

  gpu::scale(kN, -2.5f, dy.data(), stream);
  for (float& v : y) v *= -2.5f;
  dy.copy_to_host_async(got, stream);
  stream.synchronize();
  CHECK(got == y);

  gpu::fill(kN, 1.5f, dx.data(), stream);
  dx.copy_to_host_async(got, stream);
  stream.synchronize();
  CHECK(std::all_of(got.begin(), got.end(), [](float v) { return v == 1.5f; }));

  // n == 0 queues nothing, even with null pointers; a null pointer with n > 0 is refused.
  CHECK_NOTHROW(gpu::axpy(0, a, nullptr, nullptr, stream));
  CHECK_THROWS_AS(gpu::scale(4, a, nullptr, stream), cohort::InvalidArgument);

  // Sync debug mode waits for each kernel; results are the same.
  gpu::set_sync_debug(true);
  gpu::fill(kN, 2.0f, dx.data(), stream);
  gpu::set_sync_debug(false);
  dx.copy_to_host_async(got, stream);
  stream.synchronize();
  CHECK(got.front() == 2.0f);
  CHECK(got.back() == 2.0f);
}

TEST_CASE("events time and order streams") {
  if (cohort::test::no_device()) return;
  gpu::Stream first, second;
  gpu::DeviceBuffer<float> buffer(kN);
  gpu::Event start, stop;
  gpu::Event done(false);
  start.record(first);
  for (int i = 0; i < 20; ++i) gpu::fill(kN, static_cast<float>(i), buffer.data(), first);
  stop.record(first);
  done.record(first);
  // The second stream scales only after the first has filled.
  second.wait(done);
  gpu::scale(kN, 2.0f, buffer.data(), second);
  std::vector<float> got(kN);
  buffer.copy_to_host_async(got, second);
  second.synchronize();
  CHECK(got.front() == 38.0f);
  CHECK(got.back() == 38.0f);

  stop.synchronize();
  CHECK(stop.query());
  const float ms = stop.elapsed_ms(start);
  MESSAGE("20 fills of 4 MiB: " << ms << " ms");
  CHECK(ms > 0.0f);
  CHECK(ms < 10000.0f);
  // An event made without timing cannot be timed.
  CHECK_THROWS_AS(done.elapsed_ms(start), gpu::CudaError);

  gpu::Event moved(std::move(start));
  CHECK(start.get() == nullptr);  // NOLINT(bugprone-use-after-move)
  CHECK(moved.get() != nullptr);
  gpu::Stream moved_stream(std::move(first));
  CHECK(first.get() == nullptr);  // NOLINT(bugprone-use-after-move)
  CHECK(moved_stream.get() != nullptr);
}

TEST_CASE("cuBLAS and cuDNN handles are bound to their stream") {
  if (cohort::test::no_device()) return;
  gpu::Stream stream;
  gpu::CublasHandle blas(stream);
  gpu::CudnnHandle dnn(stream);
  REQUIRE(blas.get() != nullptr);
  REQUIRE(dnn.get() != nullptr);

  cudaStream_t bound = nullptr;
  COHORT_CUBLAS_CALL(cublasGetStream(blas.get(), &bound));
  CHECK(bound == stream.get());
  COHORT_CUDNN_CALL(cudnnGetStream(dnn.get(), &bound));
  CHECK(bound == stream.get());

  // cuBLAS's saxpy agrees with ours to rounding.
  const std::vector<float> x = random_floats(kN, 5);
  const std::vector<float> y = random_floats(kN, 6);
  gpu::DeviceBuffer<float> dx(kN), dy(kN), dz(kN);
  dx.copy_from_host(x);
  dy.copy_from_host(y);
  dz.copy_from_host(y);
  const float a = -0.75f;
  COHORT_CUBLAS_CALL(cublasSaxpy(blas.get(), static_cast<int>(kN), &a, dx.data(), 1, dy.data(), 1));
  gpu::axpy(kN, a, dx.data(), dz.data(), stream);
  std::vector<float> from_blas(kN), ours(kN);
  dy.copy_to_host_async(from_blas, stream);
  dz.copy_to_host_async(ours, stream);
  stream.synchronize();
  for (std::size_t i = 0; i < kN; i += 4099)
    CHECK(from_blas[i] == doctest::Approx(ours[i]).epsilon(1e-6));

  gpu::Stream other;
  blas.set_stream(other);
  COHORT_CUBLAS_CALL(cublasGetStream(blas.get(), &bound));
  CHECK(bound == other.get());

  gpu::CublasHandle moved(std::move(blas));
  CHECK(blas.get() == nullptr);  // NOLINT(bugprone-use-after-move)
  CHECK(moved.get() != nullptr);
}

TEST_CASE("a failing call throws CudaError naming it, and leaves no stale error behind") {
  if (cohort::test::no_device()) return;
  // 1 PiB: more than any device has.
  const std::size_t huge = std::size_t{1} << 50;
  try {
    gpu::DeviceBuffer<char> buffer(huge);
    FAIL("allocated 1 PiB");
  } catch (const gpu::CudaError& e) {
    const std::string what = e.what();
    CHECK(what.find("cudaMalloc(reinterpret_cast<void**>(&data_), size_bytes()) failed: "
                    "cudaErrorMemoryAllocation") != std::string::npos);
    // The header's path is relative, however it was included.
    CHECK(what.find("[device 0, gpu/buffer.h:") != std::string::npos);
    CHECK(e.code() == static_cast<int>(cudaErrorMemoryAllocation));
  }
  // The failed cudaMalloc must not be blamed on the next kernel launch.
  CHECK_NOTHROW(COHORT_CUDA_CHECK_LAUNCH());
  gpu::Stream stream;
  gpu::DeviceBuffer<float> small(16);
  CHECK_NOTHROW(gpu::fill(16, 0.0f, small.data(), stream));
  stream.synchronize();

  CHECK_THROWS_WITH_AS(gpu::set_device(gpu::device_count() + 3),
                       doctest::Contains("cudaErrorInvalidDevice"), gpu::CudaError);
  CHECK_NOTHROW(COHORT_CUDA_CHECK_LAUNCH());
}
