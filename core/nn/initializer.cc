#include "cohort/core/nn/initializer.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include <Eigen/Dense>

#include "cohort/core/base/error.h"

namespace cohort {
namespace {

// std::uniform_real_distribution and std::normal_distribution are implementation-defined, so
// two standard libraries draw different values from the same engine. These mappings are ours and
// portable.

// 53 random bits as a double in [0, 1).
double uniform01(std::mt19937_64& engine) {
  return static_cast<double>(engine() >> 11) * 0x1.0p-53;
}

// Box-Muller; u1 in (0, 1] keeps the log finite. Writes two independent standard normals.
void normal_pair(std::mt19937_64& engine, double& z0, double& z1) {
  const double u1 = static_cast<double>((engine() >> 11) + 1) * 0x1.0p-53;
  const double u2 = uniform01(engine);
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double theta = 2.0 * std::numbers::pi * u2;
  z0 = r * std::cos(theta);
  z1 = r * std::sin(theta);
}

void fill_normal(std::mt19937_64& engine, double stddev, std::span<float> out) {
  std::size_t i = 0;
  for (; i + 1 < out.size(); i += 2) {
    double z0, z1;
    normal_pair(engine, z0, z1);
    out[i] = static_cast<float>(stddev * z0);
    out[i + 1] = static_cast<float>(stddev * z1);
  }
  if (i < out.size()) {
    double z0, z1;
    normal_pair(engine, z0, z1);
    out[i] = static_cast<float>(stddev * z0);
  }
}

// Keras's Orthogonal: a normal matrix of the larger dimension by the smaller, its QR
// decomposition's Q with each column's sign made that of R's diagonal entry (so that Q is
// uniformly distributed), transposed when the variable has fewer rows than columns.
void fill_orthogonal(std::mt19937_64& engine, const Shape& shape, double gain,
                     std::span<float> out) {
  const std::int64_t cols = shape.empty() ? 1 : shape.back();
  const std::int64_t rows = static_cast<std::int64_t>(out.size()) / cols;
  const std::int64_t tall = std::max(rows, cols), narrow = std::min(rows, cols);
  std::vector<float> normals(static_cast<std::size_t>(tall * narrow));
  fill_normal(engine, 1.0, normals);
  Eigen::MatrixXd a(tall, narrow);
  for (std::int64_t i = 0; i < tall; ++i)
    for (std::int64_t j = 0; j < narrow; ++j)
      a(i, j) = normals[static_cast<std::size_t>(i * narrow + j)];
  const Eigen::HouseholderQR<Eigen::MatrixXd> qr(a);
  Eigen::MatrixXd q = qr.householderQ() * Eigen::MatrixXd::Identity(tall, narrow);
  const Eigen::MatrixXd r = qr.matrixQR().topRows(narrow).triangularView<Eigen::Upper>();
  for (std::int64_t j = 0; j < narrow; ++j)
    if (r(j, j) < 0) q.col(j) = -q.col(j);
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j)
      out[static_cast<std::size_t>(i * cols + j)] =
          static_cast<float>(gain * (rows >= cols ? q(i, j) : q(j, i)));
}

}  // namespace

Fans compute_fans(const Shape& shape) {
  if (shape.empty()) return {1, 1};
  if (shape.size() == 1) return {shape[0], shape[0]};
  std::int64_t receptive_field = 1;
  for (std::size_t i = 0; i + 2 < shape.size(); ++i) receptive_field *= shape[i];
  return {receptive_field * shape[shape.size() - 2], receptive_field * shape.back()};
}

void Initializer::fill(const Shape& shape, std::uint64_t seed, std::span<float> out) const {
  const std::int64_t n = num_elements(shape);
  if (static_cast<std::int64_t>(out.size()) != n)
    throw InvalidArgument("Initializer::fill: " + std::to_string(out.size()) +
                          " values for shape " + to_string(shape));
  if (n == 0) return;
  // A dimension of 0 already returned above, so the fans below are positive.
  const Fans fans = compute_fans(shape);
  std::mt19937_64 engine(seed);

  switch (kind) {
    case Kind::kZeros:
      std::fill(out.begin(), out.end(), 0.0f);
      return;
    case Kind::kConstant:
      std::fill(out.begin(), out.end(), value);
      return;
    case Kind::kGlorotUniform: {
      const double limit = std::sqrt(6.0 / static_cast<double>(fans.in + fans.out));
      for (float& x : out) {
        // float rounding could turn a value just below limit into limit itself; clamp below it.
        const float v = static_cast<float>(limit * (2.0 * uniform01(engine) - 1.0));
        x = std::min(v, std::nextafter(static_cast<float>(limit), 0.0f));
      }
      return;
    }
    case Kind::kHeNormal:
      fill_normal(engine, std::sqrt(2.0 / static_cast<double>(fans.in)), out);
      return;
    case Kind::kNormal:
      if (!(value >= 0.0f))
        throw InvalidArgument("Initializer::normal: stddev " + std::to_string(value) +
                              " is not >= 0");
      fill_normal(engine, value, out);
      return;
    case Kind::kOrthogonal:
      fill_orthogonal(engine, shape, value, out);
      return;
  }
  throw InvalidArgument("Initializer::fill: unknown kind " +
                        std::to_string(static_cast<int>(kind)));
}

}  // namespace cohort
