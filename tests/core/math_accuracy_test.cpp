// The accuracy proof of core/math.hpp: at most 1 ulp against Boost.Multiprecision
// cpp_bin_float_50 (50 decimal digits, a 166-bit significand) over 10^6 arguments per function
// and type (exp, log, sqrt over their whole finite domain, sin and cos for |x| <= 10^4), sqrt
// within 0.5 ulp (correctly rounded), and fma correctly rounded against the exact a*b + c.
// It prints the worst error of each function and the argument where it occurs; docs/numerics.md
// records them.
//
// error in ulp = |result - truth| / ulp(truth), computed in the high-precision type, where
// ulp(truth) is the spacing of T's numbers at truth (2^(e - p) for truth in [2^(e-1), 2^e),
// and the smallest subnormal below the normal range).
//
// Cost: Boost's cpp_bin_float_50 takes about 4-15 us per call, so the sweep (10^7 truths) runs
// on two threads and takes about 30-60 s; see docs/numerics.md.
#include <qkv/core/math.hpp>

#include "../support/math_samples.hpp"

#include <boost/multiprecision/cpp_bin_float.hpp>
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <vector>

// this file's own names: a unity build (tests/core/meson.build) puts it beside the other sweeps
namespace math_accuracy_test {

namespace mp = boost::multiprecision;
using qkv::test::splitmix64;

using big = mp::cpp_bin_float_50;

// A cheaper truth for float exp, log and sqrt: a 64-bit significand (one machine word, ~6x
// faster than 50 digits). Measured against cpp_bin_float_50 on 2 x 10^5 arguments each, it is at
// most 2^-33.6 (exp), 2^-37.3 (log) and 2^-41 (sqrt) ulp of float away (docs/numerics.md), so an
// error it measures is the true error to far better than the 0.01 ulp margin below. It only screens: a point whose measured error
// is above 0.49 ulp is measured again with cpp_bin_float_50, so every reported worst case, and
// every point near the limits (0.5 for sqrt, 1 for the others), is judged by cpp_bin_float_50.
using screen = mp::number<mp::cpp_bin_float<64, mp::digit_base_2>, mp::et_off>;
constexpr double screen_threshold = 0.49;

const std::uint64_t points = qkv::test::sample_points(1'000'000);  // per function and type

template <class T>
constexpr const char* type_name() {
  return std::is_same_v<T, float> ? "float" : "double";
}

// the spacing of T's numbers at x (x in the high-precision type B)
template <class T, class B>
B ulp_of(const B& x) {
  using lim = std::numeric_limits<T>;
  int e = 0;
  if (x != 0) (void)mp::frexp(mp::abs(x), &e);  // |x| = f 2^e, f in [1/2, 1)
  e = std::max(e, lim::min_exponent);           // below the normal range: the subnormal step
  return mp::ldexp(B(1), e - lim::digits);
}

template <class T, class B>
double ulp_error(T result, const B& truth) {
  if (!std::isfinite(result)) return std::numeric_limits<double>::infinity();
  return static_cast<double>(mp::abs(B(result) - truth) / ulp_of<T>(truth));
}

struct worst_case {
  double ulp = 0;
  double x = 0;
  std::uint64_t escalated = 0;  // points measured again with cpp_bin_float_50
};

// one sweep: `points` arguments from `argument`, our function against Boost's
template <class T>
struct sweep {
  std::string name;
  std::function<T(splitmix64&, std::uint64_t)> argument;
  std::function<T(T)> ours;
  std::function<big(const big&)> truth;
  std::function<screen(const screen&)> screened_truth;  // empty: always cpp_bin_float_50
  std::uint64_t seed;
};

template <class T>
worst_case run(const sweep<T>& s, std::uint64_t begin, std::uint64_t end) {
  splitmix64 g{s.seed * 0x100000001ull + begin};
  worst_case w;
  for (std::uint64_t i = begin; i < end; ++i) {
    const T x = s.argument(g, i);
    const T y = s.ours(x);
    double e = 0;
    if (s.screened_truth) {
      e = ulp_error(y, s.screened_truth(screen(x)));
      if (e > screen_threshold) {
        e = ulp_error(y, s.truth(big(x)));
        ++w.escalated;
      }
    } else {
      e = ulp_error(y, s.truth(big(x)));
    }
    if (e > w.ulp) w = {e, static_cast<double>(x), w.escalated};
  }
  return w;
}

// the sweeps in halves, on two threads taking the next half from a shared counter
template <class Job>
void run_on_two_threads(std::vector<Job>& jobs) {
  std::atomic<std::size_t> next{0};
  const auto worker = [&] {
    for (std::size_t j; (j = next++) < jobs.size();) jobs[j]();
  };
  std::thread other(worker);
  worker();
  other.join();
}

template <class T>
std::vector<worst_case> run_sweeps(const std::vector<sweep<T>>& sweeps) {
  constexpr int parts = 2;
  std::vector<worst_case> halves(sweeps.size() * parts);
  std::vector<std::function<void()>> jobs;
  for (std::size_t k = 0; k < sweeps.size(); ++k)
    for (int h = 0; h < parts; ++h)
      jobs.emplace_back([&, k, h] {
        halves[k * parts + h] = run(sweeps[k], points * h / parts, points * (h + 1) / parts);
      });
  run_on_two_threads(jobs);
  std::vector<worst_case> worst(sweeps.size());
  for (std::size_t k = 0; k < sweeps.size(); ++k)
    for (int h = 0; h < parts; ++h) {
      const worst_case& w = halves[k * parts + h];
      if (w.ulp > worst[k].ulp) worst[k] = {w.ulp, w.x, worst[k].escalated};
      worst[k].escalated += w.escalated;
    }
  return worst;
}

template <class T>
std::vector<sweep<T>> sweeps() {
  using qkv::test::exp_argument, qkv::test::log_argument, qkv::test::sqrt_argument, qkv::test::trig_argument;
  const bool is_float = std::is_same_v<T, float>;
  std::vector<sweep<T>> s{
      {"exp", exp_argument<T>, [](T x) { return qkv::exp(x); }, [](const big& x) { return big(mp::exp(x)); },
       nullptr, 1},
      {"log", log_argument<T>, [](T x) { return qkv::log(x); }, [](const big& x) { return big(mp::log(x)); },
       nullptr, 2},
      {"sqrt", sqrt_argument<T>, [](T x) { return qkv::sqrt(x); },
       [](const big& x) { return big(mp::sqrt(x)); }, nullptr, 3},
      {"sin", trig_argument<T>, [](T x) { return qkv::sin(x); }, [](const big& x) { return big(mp::sin(x)); },
       nullptr, 4},
      {"cos", trig_argument<T>, [](T x) { return qkv::cos(x); }, [](const big& x) { return big(mp::cos(x)); },
       nullptr, 5},
  };
  if (is_float) {  // sin and cos keep 50 digits: near a zero the reduction needs them
    s[0].screened_truth = [](const screen& x) { return screen(mp::exp(x)); };
    s[1].screened_truth = [](const screen& x) { return screen(mp::log(x)); };
    s[2].screened_truth = [](const screen& x) { return screen(mp::sqrt(x)); };
  }
  return s;
}

template <class T>
void check_accuracy() {
  const auto s = sweeps<T>();
  const auto worst = run_sweeps(s);
  for (std::size_t k = 0; k < s.size(); ++k) {
    std::printf("%-4s %-6s %llu points: worst %.8f ulp at x = %a (%.9g)", s[k].name.c_str(), type_name<T>(),
                static_cast<unsigned long long>(points), worst[k].ulp, worst[k].x, worst[k].x);
    if (s[k].screened_truth)
      std::printf(", %llu measured again with 50 digits",
                  static_cast<unsigned long long>(worst[k].escalated));
    std::printf("\n");
    CAPTURE(s[k].name);
    CAPTURE(worst[k].x);
    CHECK(worst[k].ulp <= (s[k].name == "sqrt" ? 0.5 : 1.0));
  }
}

TEST_CASE("exp, log, sqrt, sin and cos are within 1 ulp of cpp_bin_float_50 (double)") {
  check_accuracy<double>();
}

TEST_CASE("exp, log, sqrt, sin and cos are within 1 ulp of cpp_bin_float_50 (float)") {
  check_accuracy<float>();
}

// ---------------------------------------------------------------------------------------------
// fma: against the exact a*b + c. A double product spans 2^-2148 .. 2^2048 and c reaches
// 2^1024, so 3300 bits hold every a*b + c of doubles exactly (floats need far fewer).
// r is the correctly rounded result iff no neighbour of r is nearer to the exact value, and on
// a tie r is the even one; beyond the largest finite number the neighbour is 2^(emax+1), where
// rounding goes to infinity.

using exact = mp::number<mp::cpp_bin_float<3300, mp::digit_base_2>, mp::et_off>;

template <class T>
bool even(T x) {
  return (std::bit_cast<qkv::test::bits_of<T>>(x) & 1u) == 0;
}

template <class T>
bool correctly_rounded(T r, const exact& v) {
  using lim = std::numeric_limits<T>;
  const exact top = mp::ldexp(exact(1), lim::max_exponent);  // 2^(emax + 1)
  if (std::isinf(r))  // v at or beyond the midpoint between the largest finite and 2^(emax+1)
    return (r > 0 ? v : exact(-v)) >= (exact(lim::max()) + top) / 2;
  if (v == 0) return r == 0 && !std::signbit(r);  // exact cancellation: +0
  if (r == 0 && std::signbit(r) != (v < 0)) return false;
  const auto neighbour = [&](T toward) {
    const T n = std::nextafter(r, toward);
    return std::isinf(n) ? (n > 0 ? top : exact(-top)) : exact(n);
  };
  const exact d = mp::abs(v - exact(r));
  for (const exact& n : {neighbour(lim::infinity()), neighbour(-lim::infinity())}) {
    const exact dn = mp::abs(v - n);
    if (dn < d || (dn == d && !even(r))) return false;
  }
  return true;
}

template <class T>
struct fma_result {
  std::uint64_t wrong = 0;
  double worst_ulp = 0;
  T a = 0, b = 0, c = 0;  // the first wrong triple
};

template <class T>
fma_result<T> run_fma(std::uint64_t begin, std::uint64_t end) {
  splitmix64 g{77 + begin};
  fma_result<T> out;
  for (std::uint64_t i = begin; i < end; ++i) {
    const auto [a, b, c] = qkv::test::fma_arguments<T>(g, i);
    const T r = qkv::fma(a, b, c);
    const exact v = exact(a) * exact(b) + exact(c);
    if (!correctly_rounded(r, v)) {
      if (out.wrong++ == 0) out.a = a, out.b = b, out.c = c;
    } else if (std::isfinite(r)) {
      out.worst_ulp = std::max(out.worst_ulp, ulp_error(r, v));
    }
  }
  return out;
}

template <class T>
void check_fma() {
  fma_result<T> half[2];
  std::vector<std::function<void()>> jobs{[&] { half[0] = run_fma<T>(0, points / 2); },
                                          [&] { half[1] = run_fma<T>(points / 2, points); }};
  run_on_two_threads(jobs);
  const std::uint64_t wrong = half[0].wrong + half[1].wrong;
  const double worst = std::max(half[0].worst_ulp, half[1].worst_ulp);
  std::printf(
      "fma  %-6s %llu triples against the exact a*b + c: %llu not correctly rounded, "
      "worst %.8f ulp\n",
      type_name<T>(), static_cast<unsigned long long>(points), static_cast<unsigned long long>(wrong), worst);
  for (const auto& h : half)
    if (h.wrong != 0)
      std::printf("  first wrong: fma(%a, %a, %a) = %a\n", static_cast<double>(h.a), static_cast<double>(h.b),
                  static_cast<double>(h.c), static_cast<double>(qkv::fma(h.a, h.b, h.c)));
  CHECK(wrong == 0);
  CHECK(worst <= 0.5);
}

TEST_CASE("fma is correctly rounded against the exact a*b + c") {
  check_fma<double>();
  check_fma<float>();
}

}  // namespace math_accuracy_test
