#include <doctest/doctest.h>

#include <omp.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <random>
#include <thread>
#include <vector>

#include "cohort/core/nn/ops/gemm.h"

using cohort::ops_detail::gemm;

namespace {

struct Product {
  std::int64_t m, n, k;
};

// Products on both sides of the point where the large ones go to oneDNN (a million multiply-adds
// with an inner dimension of 32 or more), the shapes the built-in models make.
const std::vector<Product> kProducts = {
    {64, 256, 784},  // a dense layer: oneDNN where built with it
    {1176, 32, 144}, // an im2col convolution chunk: oneDNN
    {40, 64, 64},    // a Winograd position: OpenBLAS
    {2000, 16, 9},   // the first layer's columns, inner dimension 9: OpenBLAS
    {64, 10, 1568},  // just under a million: OpenBLAS
};

std::vector<float> random_values(std::size_t count, std::mt19937& rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> v(count);
  for (float& x : v) x = uniform(rng);
  return v;
}

// Row-major C = alpha op(A) op(B) + beta C in double, with the same operand conventions as gemm.
void reference(bool ta, bool tb, const Product& p, float alpha, const std::vector<float>& a,
               std::int64_t lda, const std::vector<float>& b, std::int64_t ldb, float beta,
               std::vector<double>& c, std::int64_t ldc) {
  for (std::int64_t i = 0; i < p.m; ++i) {
    for (std::int64_t j = 0; j < p.n; ++j) {
      double sum = 0.0;
      for (std::int64_t l = 0; l < p.k; ++l) {
        const double x = a[static_cast<std::size_t>(ta ? l * lda + i : i * lda + l)];
        const double y = b[static_cast<std::size_t>(tb ? j * ldb + l : l * ldb + j)];
        sum += x * y;
      }
      double& out = c[static_cast<std::size_t>(i * ldc + j)];
      out = alpha * sum + (beta == 0.0f ? 0.0 : beta * out);
    }
  }
}

// Runs every product with both transposes, padded leading dimensions and beta 0 and 1 on the
// calling thread, and checks each against the reference: the sums to a relative 1e-5 of the
// operands' scale, and the padding columns of C untouched.
void check_products(std::uint32_t seed) {
  std::mt19937 rng(seed);
  for (const Product& p : kProducts) {
    for (int t = 0; t < 4; ++t) {
      const bool ta = (t & 1) != 0, tb = (t & 2) != 0;
      for (const float beta : {0.0f, 1.0f}) {
        const std::int64_t lda = (ta ? p.m : p.k) + 3, ldb = (tb ? p.k : p.n) + 5, ldc = p.n + 2;
        const auto a = random_values(static_cast<std::size_t>((ta ? p.k : p.m) * lda), rng);
        const auto b = random_values(static_cast<std::size_t>((tb ? p.n : p.k) * ldb), rng);
        std::vector<float> c = random_values(static_cast<std::size_t>(p.m * ldc), rng);
        std::vector<double> want(c.begin(), c.end());
        reference(ta, tb, p, 0.5f, a, lda, b, ldb, beta, want, ldc);
        gemm(ta, tb, p.m, p.n, p.k, 0.5f, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
        const double tolerance = 1e-5 * static_cast<double>(p.k);
        std::int64_t wrong = 0;
        for (std::size_t i = 0; i < c.size(); ++i)
          if (std::abs(static_cast<double>(c[i]) - want[i]) > tolerance) ++wrong;
        INFO("m " << p.m << " n " << p.n << " k " << p.k << " transposes " << ta << tb << " beta "
                  << beta);
        CHECK(wrong == 0);
      }
    }
  }
}

// Threads of this process (Linux: /proc/self/task).
int process_threads() {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    (void)entry;
    ++count;
  }
  return count;
}

}  // namespace

TEST_CASE("matrix products match a plain loop through either library: transposes, strides, beta") {
  INFO(cohort::ops_detail::gemm_libraries());
  check_products(1);
}

TEST_CASE("matrix products stay on the calling thread and leave its thread count as it was") {
  // A thread OpenMP has not seen gets a thread pool of its own at its first parallel region: had
  // a library threaded a product called outside one, the process would have more threads after.
  int before = 0, after = 0, max_threads = 0;
  std::thread caller([&] {
    omp_set_num_threads(2);
    float one = 1.0f, product = 0.0f;
    gemm(false, false, 1, 1, 1, &one, &one, 0.0f, &product);  // libraries initialised
    before = process_threads();
    check_products(2);
    after = process_threads();
    max_threads = omp_get_max_threads();
  });
  caller.join();
  CHECK(after == before);
  CHECK(max_threads == 2);
  // Two threads multiplying at once, as the ops' intra-op threads do.
#pragma omp parallel num_threads(2)
  check_products(3 + static_cast<std::uint32_t>(omp_get_thread_num()));
}

TEST_CASE("a recorder sees every product's shape, layout and beta until it is unset") {
  std::vector<cohort::ops_detail::GemmCall> calls;
  std::vector<float> a(6 * 8, 1.0f), b(8 * 5, 1.0f), c(6 * 7, 0.0f);
  cohort::ops_detail::record_gemm_calls(&calls);
  gemm(false, true, 6, 5, 8, 1.0f, a.data(), 8, b.data(), 8, 0.0f, c.data(), 7);
  gemm(true, false, 8, 5, 6, 1.0f, a.data(), 8, b.data(), 5, 1.0f, c.data(), 5);
  cohort::ops_detail::record_gemm_calls(nullptr);
  CHECK(c[0] == 14.0f);  // recorded calls are carried out too: 8 (first) + 6 (second)
  gemm(false, false, 6, 5, 8, a.data(), b.data(), 0.0f, c.data());
  REQUIRE(calls.size() == 2);
  CHECK((!calls[0].transpose_a && calls[0].transpose_b));
  CHECK((calls[0].m == 6 && calls[0].n == 5 && calls[0].k == 8));
  CHECK((calls[0].lda == 8 && calls[0].ldb == 8 && calls[0].ldc == 7 && calls[0].beta == 0.0f));
  CHECK((calls[1].transpose_a && !calls[1].transpose_b));
  CHECK((calls[1].m == 8 && calls[1].k == 6 && calls[1].ldc == 5 && calls[1].beta == 1.0f));
}
