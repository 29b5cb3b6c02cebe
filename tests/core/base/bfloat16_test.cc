// bfloat16 conversions: round to nearest, ties to even; NaN, infinities and overflow.
#include "cohort/core/base/bfloat16.h"

#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace cohort {
namespace {

float round_trip(float x) { return bf16::to_float(bf16::from_float(x)); }

TEST_CASE("bfloat16 keeps float32's upper half: exact values stay exact") {
  for (float x : {0.0f, 1.0f, -2.5f, 3.0f, 1024.0f, 0.15625f, -196608.0f, 0x1.fep+127f}) {
    REQUIRE(std::bit_cast<std::uint32_t>(x) % 0x10000u == 0);  // the low half is empty
    CHECK(round_trip(x) == x);
  }
  CHECK(bf16::from_float(1.0f) == 0x3f80u);
  CHECK(bf16::from_float(-2.0f) == 0xc000u);
  CHECK(std::signbit(round_trip(-0.0f)));
}

TEST_CASE("bfloat16 rounds to nearest, ties to even") {
  const float ulp = std::ldexp(1.0f, -7);  // bfloat16's spacing in [1, 2)
  CHECK(round_trip(1.0f + 0.49f * ulp) == 1.0f);
  CHECK(round_trip(1.0f + 0.51f * ulp) == 1.0f + ulp);
  CHECK(round_trip(1.0f + 0.5f * ulp) == 1.0f);                    // tie: 1.0 is even
  CHECK(round_trip(1.0f + 1.5f * ulp) == 1.0f + 2.0f * ulp);       // tie: up to the even one
  CHECK(round_trip(-(1.0f + 0.51f * ulp)) == -(1.0f + ulp));       // symmetric
  // Carries into the exponent.
  CHECK(round_trip(std::nextafter(2.0f, 0.0f)) == 2.0f);
}

TEST_CASE("bfloat16: infinities, overflow and NaN") {
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(round_trip(inf) == inf);
  CHECK(round_trip(-inf) == -inf);
  CHECK(round_trip(std::numeric_limits<float>::max()) == inf);  // past bfloat16's largest
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(std::isnan(round_trip(nan)));
  CHECK(std::isnan(round_trip(-nan)));
  // A NaN whose payload sits in the dropped half must not become an infinity.
  CHECK(std::isnan(round_trip(std::bit_cast<float>(0x7f800001u))));
  CHECK(std::isnan(round_trip(std::bit_cast<float>(0xff800001u))));
}

TEST_CASE("bfloat16 array conversions match the scalar ones") {
  std::vector<float> in{0.1f, -3.3f, 7e5f, 1e-3f, 42.0f};
  std::vector<std::uint16_t> bits(in.size());
  std::vector<float> out(in.size());
  bf16::from_float(in, bits);
  bf16::to_float(bits, out);
  for (std::size_t i = 0; i < in.size(); ++i) {
    CHECK(bits[i] == bf16::from_float(in[i]));
    CHECK(out[i] == round_trip(in[i]));
    CHECK(std::abs(out[i] - in[i]) <= std::abs(in[i]) * std::ldexp(1.0f, -8));
  }
}

}  // namespace
}  // namespace cohort
