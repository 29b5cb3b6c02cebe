#include "cohort/core/nn/initializer.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "cohort/core/base/error.h"

using cohort::Initializer;
using cohort::Shape;
using cohort::num_elements;
using cohort::to_string;

namespace {

std::vector<float> filled(const Initializer& init, const Shape& shape, std::uint64_t seed) {
  std::vector<float> out(static_cast<std::size_t>(cohort::num_elements(shape)), -123.0f);
  init.fill(shape, seed, out);
  return out;
}

struct Moments {
  double mean = 0, stddev = 0;
};

Moments moments(const std::vector<float>& v) {
  double sum = 0, sum2 = 0;
  for (float x : v) sum += x;
  const double mean = sum / static_cast<double>(v.size());
  for (float x : v) sum2 += (x - mean) * (x - mean);
  return {mean, std::sqrt(sum2 / static_cast<double>(v.size()))};
}

}  // namespace

TEST_CASE("fans follow the shape: scalar, vector, [in, out] and HWIO") {
  CHECK(cohort::compute_fans({}).in == 1);
  CHECK(cohort::compute_fans({}).out == 1);
  CHECK(cohort::compute_fans({7}).in == 7);
  CHECK(cohort::compute_fans({7}).out == 7);
  CHECK(cohort::compute_fans({784, 256}).in == 784);
  CHECK(cohort::compute_fans({784, 256}).out == 256);
  CHECK(cohort::compute_fans({5, 3, 16, 32}).in == 5 * 3 * 16);
  CHECK(cohort::compute_fans({5, 3, 16, 32}).out == 5 * 3 * 32);
}

TEST_CASE("zeros and constant") {
  for (float x : filled(Initializer::zeros(), {3, 4}, 1)) CHECK(x == 0.0f);
  for (float x : filled(Initializer::constant(0.25f), {5}, 1)) CHECK(x == 0.25f);
  CHECK(filled(Initializer::constant(-2.0f), {}, 9) == std::vector<float>{-2.0f});
}

TEST_CASE("Glorot uniform stays within sqrt(6 / (fan_in + fan_out)) and fills it evenly") {
  const Shape shape{300, 200};
  const double limit = std::sqrt(6.0 / 500.0);
  const auto v = filled(Initializer::glorot_uniform(), shape, 42);
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  CHECK(*lo >= -limit);
  CHECK(*hi < limit);
  // 60000 draws reach close to both ends; a uniform on [-l, l] has stddev l / sqrt(3).
  CHECK(*lo < -0.99 * limit);
  CHECK(*hi > 0.99 * limit);
  const Moments m = moments(v);
  CHECK(std::abs(m.mean) < 0.01 * limit);
  CHECK(m.stddev == doctest::Approx(limit / std::sqrt(3.0)).epsilon(0.02));

  // HWIO: fans h*w*i and h*w*o.
  const double conv_limit = std::sqrt(6.0 / (3 * 3 * 8 + 3 * 3 * 16));
  for (float x : filled(Initializer::glorot_uniform(), {3, 3, 8, 16}, 7))
    CHECK(std::abs(x) <= conv_limit);
}

TEST_CASE("He normal has mean 0 and stddev sqrt(2 / fan_in) within 5%") {
  const Shape shape{512, 400};
  const auto v = filled(Initializer::he_normal(), shape, 3);
  const double expected = std::sqrt(2.0 / 512.0);
  const Moments m = moments(v);
  CHECK(m.stddev == doctest::Approx(expected).epsilon(0.05));
  CHECK(std::abs(m.mean) < 0.02 * expected);
  // About 68% within one stddev, as a normal should be (not a uniform of the same stddev: 58%).
  const auto inside = std::count_if(v.begin(), v.end(),
                                    [&](float x) { return std::abs(x) < expected; });
  CHECK(static_cast<double>(inside) / static_cast<double>(v.size()) ==
        doctest::Approx(0.6827).epsilon(0.02));

  const auto conv = filled(Initializer::he_normal(), {3, 3, 64, 64}, 5);
  CHECK(moments(conv).stddev == doctest::Approx(std::sqrt(2.0 / (9 * 64))).epsilon(0.05));
}

TEST_CASE("normal(stddev) and odd sizes") {
  const auto v = filled(Initializer::normal(0.1f), {100001}, 11);  // odd: last value unpaired
  CHECK(moments(v).stddev == doctest::Approx(0.1).epsilon(0.05));
  CHECK(v.back() != -123.0f);
  CHECK(filled(Initializer::normal(0.0f), {4}, 1) == std::vector<float>(4, 0.0f));
  std::vector<float> out(4);
  CHECK_THROWS_AS(Initializer::normal(-1.0f).fill({4}, 1, out), cohort::InvalidArgument);
}

TEST_CASE("fill is deterministic in the seed and differs between seeds") {
  for (const Initializer init : {Initializer::glorot_uniform(), Initializer::he_normal(),
                                 Initializer::normal(1.0f)}) {
    const auto a = filled(init, {64, 32}, 1234);
    CHECK(a == filled(init, {64, 32}, 1234));
    const auto b = filled(init, {64, 32}, 1235);
    CHECK(a != b);
    std::size_t same = 0;
    for (std::size_t i = 0; i < a.size(); ++i) same += a[i] == b[i];
    CHECK(same < 5);
  }
}

TEST_CASE("the generator is fixed: known values for a known seed") {
  // std::mt19937_64's sequence is fixed by the standard and the mappings are ours, so these
  // values hold with any standard library. A change here changes every model's initial values.
  const auto u = filled(Initializer::glorot_uniform(), {2, 1}, 5489);
  const auto n = filled(Initializer::normal(1.0f), {2}, 5489);
  CAPTURE(u[0]);
  CAPTURE(u[1]);
  CAPTURE(n[0]);
  CAPTURE(n[1]);
  // mt19937_64 seeded with 5489 starts 14514284786278117030, 4620546740167642908.
  const double limit = std::sqrt(2.0);
  const double u0 = static_cast<double>(14514284786278117030ull >> 11) * 0x1.0p-53;
  const double u1 = static_cast<double>(4620546740167642908ull >> 11) * 0x1.0p-53;
  CHECK(u[0] == static_cast<float>(limit * (2 * u0 - 1)));
  CHECK(u[1] == static_cast<float>(limit * (2 * u1 - 1)));
  const double u0_open = static_cast<double>((14514284786278117030ull >> 11) + 1) * 0x1.0p-53;
  const double r = std::sqrt(-2.0 * std::log(u0_open));
  CHECK(n[0] == doctest::Approx(r * std::cos(2 * std::numbers::pi * u1)).epsilon(1e-6));
  CHECK(n[1] == doctest::Approx(r * std::sin(2 * std::numbers::pi * u1)).epsilon(1e-6));
}

TEST_CASE("a wrong output size is an InvalidArgument") {
  std::vector<float> out(5);
  CHECK_THROWS_WITH_AS(Initializer::zeros().fill({2, 3}, 0, out),
                       "Initializer::fill: 5 values for shape [2, 3]", cohort::InvalidArgument);
  std::vector<float> none;
  CHECK_NOTHROW(Initializer::he_normal().fill({0, 3}, 0, none));
}

TEST_CASE("orthogonal: orthonormal rows of a wide variable, columns of a tall one, times the gain") {
  struct Case {
    Shape shape;
    float gain;
  };
  for (const Case& c : {Case{{8, 8}, 1.0f}, Case{{4, 12}, 1.0f}, Case{{12, 4}, 2.0f},
                        Case{{2, 3, 5}, 1.0f}}) {
    CAPTURE(to_string(c.shape));
    const std::int64_t cols = c.shape.back(), rows = num_elements(c.shape) / cols;
    std::vector<float> values(static_cast<std::size_t>(rows * cols));
    Initializer::orthogonal(c.gain).fill(c.shape, 7, values);
    // The Gram matrix of the shorter side's vectors is gain^2 times the identity.
    const bool wide = rows <= cols;
    const std::int64_t vectors = wide ? rows : cols, length = wide ? cols : rows;
    auto at = [&](std::int64_t v, std::int64_t k) {
      return static_cast<double>(values[static_cast<std::size_t>(wide ? v * cols + k : k * cols + v)]);
    };
    for (std::int64_t a = 0; a < vectors; ++a)
      for (std::int64_t b = 0; b < vectors; ++b) {
        double dot = 0;
        for (std::int64_t k = 0; k < length; ++k) dot += at(a, k) * at(b, k);
        CHECK(dot == doctest::Approx(a == b ? c.gain * c.gain : 0.0).epsilon(1e-5).scale(1));
      }
    std::vector<float> again(values.size());
    Initializer::orthogonal(c.gain).fill(c.shape, 7, again);
    CHECK(again == values);
  }
}
