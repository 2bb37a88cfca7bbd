// core/erf.hpp (qkv::erf_fdlibm, the fallback until math.hpp's qkv::erf is in main) against Boost.Multiprecision (cpp_bin_float_50, 50 decimal digits): the 1-ulp
// rule of core/math.hpp, on every stage's interval and the special values; and the same bits
// at compile time and at run time.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include <boost/math/special_functions/erf.hpp>
#include <boost/multiprecision/cpp_bin_float.hpp>

#include <qkv/core/erf.hpp>

namespace {

using big = boost::multiprecision::cpp_bin_float_50;

/// |computed - exact| in units of the last place of the exact value's binade in F
template <class F>
double ulp_error(F computed, const big& exact) {
  const big a = abs(exact);
  if (a == 0) return computed == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  int e = 0;
  frexp(a, &e);  // a = m 2^e, m in [0.5, 1)
  const int digits = std::numeric_limits<F>::digits;
  const int min_e = std::numeric_limits<F>::min_exponent;
  const big ulp = ldexp(big(1), std::max(e, min_e) - digits);
  return static_cast<double>(abs(big(computed) - exact) / ulp);
}

/// the worst ulp error over n points uniform in [lo, hi]
template <class F>
double worst_over(double lo, double hi, int n, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  double worst = 0;
  for (int k = 0; k < n; ++k) {
    const F x = static_cast<F>(u(g));
    worst = std::max(worst, ulp_error<F>(qkv::erf_fdlibm(x), boost::math::erf(big(x))));
  }
  return worst;
}

}  // namespace

TEST_CASE_TEMPLATE("erf is within 1 ulp of the 50-digit truth on every interval of the algorithm", F, double, float) {
  // the intervals of s_erf.c's stages, both signs, and the tiny range
  const double edges[][2] = {{0x1p-40, 0x1p-28}, {0x1p-28, 0.84375}, {0.84375, 1.25}, {1.25, 1 / 0.35}, {1 / 0.35, 6.0}, {6.0, 30.0}};
  std::uint64_t seed = 1;
  for (const auto& e : edges) {
    const double w = std::max(worst_over<F>(e[0], e[1], 2000, seed), worst_over<F>(-e[1], -e[0], 2000, seed + 1));
    seed += 2;
    INFO("[" << e[0] << ", " << e[1] << "]: worst " << w << " ulp");
    CHECK(w <= 1.0);
  }
}

TEST_CASE("erf's special values") {
  CHECK(qkv::erf_fdlibm(0.0) == 0.0);
  CHECK(std::signbit(qkv::erf_fdlibm(-0.0)));
  CHECK(qkv::erf_fdlibm(std::numeric_limits<double>::infinity()) == 1.0);
  CHECK(qkv::erf_fdlibm(-std::numeric_limits<double>::infinity()) == -1.0);
  CHECK(std::isnan(qkv::erf_fdlibm(std::numeric_limits<double>::quiet_NaN())));
  CHECK(qkv::erf_fdlibm(std::numeric_limits<double>::denorm_min()) == std::numeric_limits<double>::denorm_min());
  CHECK(std::isnan(qkv::erf_fdlibm(std::numeric_limits<float>::quiet_NaN())));
  CHECK(qkv::erf_fdlibm(100.0f) == 1.0f);
}

TEST_CASE("erf gives the same bits at compile time and at run time") {
  constexpr double xs[] = {-5.5, -2.0, -1.0, -0.5, 1e-10, 0.3, 0.84375, 1.0, 1.3, 2.9, 4.0};
  constexpr double at_compile_time[] = {qkv::erf_fdlibm(xs[0]), qkv::erf_fdlibm(xs[1]), qkv::erf_fdlibm(xs[2]), qkv::erf_fdlibm(xs[3]),
                                        qkv::erf_fdlibm(xs[4]), qkv::erf_fdlibm(xs[5]), qkv::erf_fdlibm(xs[6]), qkv::erf_fdlibm(xs[7]),
                                        qkv::erf_fdlibm(xs[8]), qkv::erf_fdlibm(xs[9]), qkv::erf_fdlibm(xs[10])};
  for (std::size_t k = 0; k < 11; ++k) {
    volatile double x = xs[k];
    CHECK(qkv::erf_fdlibm(double(x)) == at_compile_time[k]);
  }
}
