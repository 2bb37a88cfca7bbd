// The accuracy proof of qkv::tanh and qkv::erf (core/math.hpp): at most 1 ulp over 10^6
// arguments per function and type, with the worst case and where it occurs printed
// (docs/numerics.md records them). ulp as in math_accuracy_test.cpp: |result - truth| / ulp(truth).
//
// The truth, in three tiers, because Boost's 50-digit tanh and erf cost 0.1 ms and 1.6 ms a call
// (boost::math::erf has no fast path above 113 bits), too slow for 4 x 10^6 points:
//   1. every point: the C library's long double tanhl / erfl (x87, a 64-bit significand,
//      within a few units of 2^-64 relative): an error it measures is within 2^-8 ulp of double
//      of the true error, and within 2^-37 ulp of float;
//   2. every point measured above 0.49 ulp by (1), and one point in 100 whatever its error: Boost,
//      tanh from cpp_bin_float_50's exp, (e^2x - 1)/(e^2x + 1) (a Taylor series below 2^-20,
//      where e^2x - 1 would cancel), and erf from boost::math::erf on cpp_bin_float_quad (113
//      bits: 60 bits beyond double). Every reported worst case comes from this tier, and the
//      largest gap between (1) and (2) is printed and must stay below 0.01 ulp (the margin
//      between 0.49 and 0.5);
//   3. one point in 5000: cpp_bin_float_50 itself (mp::tanh, boost::math::erf), which must agree
//      with (2) to 2^-40 ulp.
#include <qkv/core/math.hpp>

#include "../support/math_samples.hpp"

#include <boost/math/special_functions/erf.hpp>
#include <boost/multiprecision/cpp_bin_float.hpp>
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <thread>

// this file's own names: a unity build (tests/core/meson.build) puts it beside the other sweeps
namespace math_tanh_erf_accuracy_test {

namespace mp = boost::multiprecision;
using qkv::test::splitmix64;
using big = mp::cpp_bin_float_50;
using quad = mp::cpp_bin_float_quad;

const std::uint64_t points = qkv::test::sample_points(1'000'000);  // per function and type
constexpr double screen_threshold = 0.49;

template <class T>
constexpr const char* type_name() {
  return std::is_same_v<T, float> ? "float" : "double";
}

// the spacing of T's numbers at x, for x in any floating type F
template <class T, class F>
F ulp_of(const F& x) {
  using std::frexp, std::ldexp, std::abs;
  using lim = std::numeric_limits<T>;
  int e = 0;
  if (x != 0) (void)frexp(abs(x), &e);
  e = std::max(e, lim::min_exponent);
  return ldexp(F(1), e - lim::digits);
}

template <class T, class F>
double ulp_error(T result, const F& truth) {
  using std::abs;
  if (!std::isfinite(result)) return std::numeric_limits<double>::infinity();
  return static_cast<double>(abs(F(result) - truth) / ulp_of<T>(truth));
}

// tier 2 and 3 truths
big tanh_from_exp(const big& x) {
  const big a = mp::abs(x);
  big t;
  if (a < mp::ldexp(big(1), -20)) {  // x - x^3/3 + 2x^5/15 - 17x^7/315, next term ~x^9 < 2^-180
    const big x2 = a * a;
    t = a * (1 - x2 * (big(1) / 3 - x2 * (big(2) / 15 - x2 * big(17) / 315)));
  } else {
    const big e = mp::exp(2 * a);
    t = (e - 1) / (e + 1);
  }
  return x < 0 ? big(-t) : t;
}

enum class function { tanh, erf };

struct outcome {
  double worst = 0;  // ulp, by the best truth at that point
  double worst_x = 0;
  double screen_gap = 0;        // largest |tier 1 - tier 2| seen, in ulp of T
  double quad_gap = 0;          // largest |tier 2 - tier 3| seen, in ulp of T
  std::uint64_t escalated = 0;  // points measured with tier 2
};

template <class T>
outcome run(function f, std::uint64_t begin, std::uint64_t end) {
  splitmix64 g{(f == function::tanh ? 31u : 32u) * 0x100000001ull + begin};
  outcome out;
  for (std::uint64_t i = begin; i < end; ++i) {
    const T x = f == function::tanh ? qkv::test::tanh_argument<T>(g, i) : qkv::test::erf_argument<T>(g, i);
    const T y = f == function::tanh ? qkv::tanh(x) : qkv::erf(x);
    const long double lx = x;
    const long double screen = f == function::tanh ? tanhl(lx) : erfl(lx);
    double e = ulp_error(y, screen);
    if (e > screen_threshold || i % 100 == 0) {
      ++out.escalated;
      double e2 = 0, gap = 0;
      if (f == function::tanh) {
        const big t = tanh_from_exp(big(x));
        e2 = ulp_error(y, t);
        gap = static_cast<double>(mp::abs(big(screen) - t) / ulp_of<T>(t));
        if (i % 5000 == 0) {
          const big t50 = mp::tanh(big(x));
          out.quad_gap = std::max(out.quad_gap, static_cast<double>(mp::abs(t50 - t) / ulp_of<T>(t50)));
        }
      } else {
        const quad t = boost::math::erf(quad(x));
        e2 = ulp_error(y, t);
        gap = static_cast<double>(mp::abs(quad(screen) - t) / ulp_of<T>(t));
        if (i % 5000 == 0) {
          const big t50 = boost::math::erf(big(x));
          out.quad_gap = std::max(out.quad_gap, static_cast<double>(mp::abs(t50 - big(t)) / ulp_of<T>(t50)));
          e2 = ulp_error(y, t50);
        }
      }
      out.screen_gap = std::max(out.screen_gap, gap);
      e = e2;
    }
    if (e > out.worst) out.worst = e, out.worst_x = static_cast<double>(x);
  }
  return out;
}

template <class T>
void check(function f, const char* name) {
  outcome half[2];
  std::thread other([&] { half[1] = run<T>(f, points / 2, points); });
  half[0] = run<T>(f, 0, points / 2);
  other.join();
  const outcome& w = half[0].worst >= half[1].worst ? half[0] : half[1];
  const double screen_gap = std::max(half[0].screen_gap, half[1].screen_gap);
  const double quad_gap = std::max(half[0].quad_gap, half[1].quad_gap);
  std::printf(
      "%-4s %-6s %llu points: worst %.8f ulp at x = %a (%.9g); %llu measured with Boost,"
      " long double within %.2g ulp of it, Boost's two truths within %.2g ulp\n",
      name, type_name<T>(), static_cast<unsigned long long>(points), w.worst, w.worst_x, w.worst_x,
      static_cast<unsigned long long>(half[0].escalated + half[1].escalated), screen_gap, quad_gap);
  CHECK(w.worst <= 1.0);
  CHECK(screen_gap < 1.0 - screen_threshold - 0.5);  // the screen cannot hide an error above 0.5
  CHECK(quad_gap < 0x1p-40);
}

TEST_CASE("tanh is within 1 ulp of Boost.Multiprecision") {
  check<double>(function::tanh, "tanh");
  check<float>(function::tanh, "tanh");
}

TEST_CASE("erf is within 1 ulp of Boost.Multiprecision") {
  check<double>(function::erf, "erf");
  check<float>(function::erf, "erf");
}

}  // namespace math_tanh_erf_accuracy_test
