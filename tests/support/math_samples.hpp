// math_samples.hpp: the arguments on which the math tests measure qkv::exp, log, sqrt, sin, cos
// and fma: uniform in value, uniform in bit patterns (so every binade counts the same), and the
// edge regions where each algorithm is hardest. Deterministic (splitmix64), shared by
// math_test.cpp (against libm) and math_accuracy_test.cpp (against Boost.Multiprecision).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <limits>
#include <type_traits>

namespace qkv::test {

// How many points a slow sweep measures: `full`, or a tenth of it when QKV_TEST_SAMPLE=small
// (scripts/test.sh sets it in the sanitizer builds, where Boost's arithmetic runs ~10x slower;
// the plain builds always measure the full sample). Says so on stdout when it shrinks.
inline std::uint64_t sample_points(std::uint64_t full) {
  const char* sample = std::getenv("QKV_TEST_SAMPLE");
  if (sample == nullptr || std::string_view(sample) != "small") return full;
  std::printf("QKV_TEST_SAMPLE=small: %llu of the %llu points of the full sweep\n",
              static_cast<unsigned long long>(full / 10), static_cast<unsigned long long>(full));
  return full / 10;
}

// splitmix64 (Steele, Lea, Flood 2014): a full-period 64-bit generator, good enough to sample
struct splitmix64 {
  std::uint64_t state;
  constexpr std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // uniform in [0, 1) with 53 bits
  constexpr double unit() { return static_cast<double>(next() >> 11) * 0x1p-53; }
  constexpr double uniform(double lo, double hi) { return lo + (hi - lo) * unit(); }
  constexpr std::int64_t integer(std::int64_t lo, std::int64_t hi) {  // in [lo, hi]
    return lo + static_cast<std::int64_t>(next() % static_cast<std::uint64_t>(hi - lo + 1));
  }
};

template <class T>
using bits_of = std::conditional_t<std::is_same_v<T, float>, std::uint32_t, std::uint64_t>;

// uniform in bit patterns over [lo, hi], 0 <= lo <= hi: every binade equally likely
template <class T>
constexpr T uniform_bits(splitmix64& g, T lo, T hi) {
  using B = bits_of<T>;
  const B a = std::bit_cast<B>(lo), b = std::bit_cast<B>(hi);
  return std::bit_cast<T>(static_cast<B>(a + g.next() % (std::uint64_t{b} - a + 1)));
}

// x moved by k units in the last place, away from 0 for k > 0 (k may be negative)
template <class T>
constexpr T ulps_away(T x, std::int64_t k) {
  using B = bits_of<T>;
  return std::bit_cast<T>(static_cast<B>(std::bit_cast<B>(x) + static_cast<B>(k)));  // modulo 2^n
}

template <class T>
constexpr T random_sign(splitmix64& g, T x) {
  return (g.next() & 1) != 0 ? -x : x;
}

// exp: the whole range where e^x is neither +inf nor below half the smallest subnormal
template <class T>
struct exp_domain;
template <>
struct exp_domain<double> {
  static constexpr double lo = -745.13, hi = 709.78;
};
template <>
struct exp_domain<float> {
  static constexpr float lo = -103.97f, hi = 88.72f;
};

template <class T>
constexpr T exp_argument(splitmix64& g, std::uint64_t i) {
  constexpr T lo = exp_domain<T>::lo, hi = exp_domain<T>::hi;
  constexpr double ln2 = 0.69314718055994530942;
  switch (i % 10) {
    case 0:
    case 1:
    case 2:
    case 3: return static_cast<T>(g.uniform(lo, hi));
    case 4:
    case 5: return uniform_bits<T>(g, T(0), -lo) * T(-1);     // every binade of x < 0
    case 6: return uniform_bits<T>(g, T(0), hi);              // and of x > 0
    case 7: return static_cast<T>(g.uniform(hi - 2.0, hi));   // results near the largest
    case 8: return static_cast<T>(g.uniform(lo, lo + 40.0));  // subnormal results
    default: {  // near the reduction's boundaries (k + 1/2) ln2, where k changes
      const double k = static_cast<double>(g.integer(-1000, 1000)) + 0.5;
      const T x = static_cast<T>(k * ln2);
      return x < lo || x > hi ? T(1) : ulps_away(x, g.integer(-8, 8) * (x < 0 ? -1 : 1));
    }
  }
}

// log: every positive finite number
template <class T>
constexpr T log_argument(splitmix64& g, std::uint64_t i) {
  using lim = std::numeric_limits<T>;
  switch (i % 10) {
    case 0:
    case 1:
    case 2:
    case 3:
    case 4: return uniform_bits<T>(g, lim::denorm_min(), lim::max());
    case 5: return uniform_bits<T>(g, lim::denorm_min(), lim::min());  // subnormals
    case 6:
    case 7: return static_cast<T>(g.uniform(1.0 - 0x1p-6, 1.0 + 0x1p-6));  // log ~ 0
    case 8: {  // a few units in the last place from 1 (the hardest cancellation)
      const T x = ulps_away(T(1), g.integer(-64, 64));
      return x == T(1) ? T(2) : x;
    }
    default: return static_cast<T>(g.uniform(0.0, 16.0));
  }
}

// sqrt: every positive finite number
template <class T>
constexpr T sqrt_argument(splitmix64& g, std::uint64_t i) {
  using lim = std::numeric_limits<T>;
  switch (i % 10) {
    case 7: return uniform_bits<T>(g, lim::denorm_min(), lim::min());
    case 8: {  // next to perfect squares, where a wrong last bit would show
      const double r = static_cast<double>(g.integer(1, 1 << 20));
      const T sq = static_cast<T>(r * r);
      return ulps_away(sq, g.integer(-3, 3));
    }
    case 9: return static_cast<T>(g.uniform(0.0, 100.0));
    default: return uniform_bits<T>(g, lim::denorm_min(), lim::max());
  }
}

// sin and cos: |x| <= 10^4, with arguments next to multiples of pi/2 (where sin or cos is
// near 0 and the reduction cancels most bits)
template <class T>
constexpr T trig_argument(splitmix64& g, std::uint64_t i) {
  switch (i % 10) {
    case 0:
    case 1:
    case 2:
    case 3: return static_cast<T>(g.uniform(-1e4, 1e4));
    case 4:
    case 5: return random_sign(g, uniform_bits<T>(g, T(0), T(1e4)));
    case 6:
    case 7: {
      constexpr double pio2 = 1.57079632679489661923;
      const T x = static_cast<T>(static_cast<double>(g.integer(1, 6366)) * pio2);
      return random_sign(g, ulps_away(x, g.integer(-20, 20)));
    }
    case 8: return static_cast<T>(g.uniform(-0.785398, 0.785398));  // no reduction
    default: return static_cast<T>(g.uniform(-10.0, 10.0));
  }
}

// tanh: |x| < 22 (beyond, tanh(x) rounds to +-1), every binade down to the subnormals, and
// |x| in [0.5, 1], where E / (E + 2) would amplify an error in E = e^2x - 1 the most
template <class T>
constexpr T tanh_argument(splitmix64& g, std::uint64_t i) {
  switch (i % 10) {
    case 0:
    case 1:
    case 2: return static_cast<T>(g.uniform(-22.0, 22.0));
    case 3:
    case 4: return random_sign(g, uniform_bits<T>(g, T(0), T(22)));
    case 5:
    case 6: return random_sign(g, static_cast<T>(g.uniform(0.5, 1.0)));
    case 7: return random_sign(g, uniform_bits<T>(g, std::numeric_limits<T>::denorm_min(), T(0x1p-20)));
    default: return static_cast<T>(g.uniform(-4.0, 4.0));
  }
}

// erf: |x| < 6 (beyond, erf(x) rounds to +-1), every binade down to the subnormals, and both
// sides of 2, where the series gives way to the continued fraction
template <class T>
constexpr T erf_argument(splitmix64& g, std::uint64_t i) {
  switch (i % 10) {
    case 0:
    case 1:
    case 2: return static_cast<T>(g.uniform(-6.0, 6.0));
    case 3:
    case 4: return random_sign(g, uniform_bits<T>(g, T(0), T(6)));
    case 5:
    case 6: return static_cast<T>(g.uniform(-2.5, 2.5));
    case 7: return random_sign(g, uniform_bits<T>(g, std::numeric_limits<T>::denorm_min(), T(0x1p-20)));
    case 8: return random_sign(g, static_cast<T>(g.uniform(1.9, 2.1)));
    default: return static_cast<T>(g.uniform(-1.0, 1.0));
  }
}

// any finite number, every binade equally likely (for sin and cos beyond 10^4)
template <class T>
constexpr T any_finite(splitmix64& g) {
  return random_sign(g, uniform_bits<T>(g, T(0), std::numeric_limits<T>::max()));
}

// fma triples (a, b, c): random binades, cancellation (c close to -a b), ties, subnormal and
// overflowing results
template <class T>
struct triple {
  T a, b, c;
};

template <class T>
triple<T> fma_arguments(splitmix64& g, std::uint64_t i) {
  using lim = std::numeric_limits<T>;
  constexpr int p = lim::digits;
  const auto mantissa = [&] { return static_cast<T>(g.uniform(1.0, 2.0)); };
  const auto scaled = [&](int lo, int hi) {
    return random_sign(
        g, static_cast<T>(std::ldexp(static_cast<double>(mantissa()), static_cast<int>(g.integer(lo, hi)))));
  };
  switch (i % 8) {
    case 0:
    case 1: {  // moderate exponents, c anywhere from far below to far above a b
      const T a = scaled(-40, 40), b = scaled(-40, 40);
      return {a, b, scaled(-100, 100)};
    }
    case 2:
    case 3: {  // cancellation: c = -(a b rounded), moved by a few ulps
      const T a = scaled(-60, 60), b = scaled(-60, 60);
      const T ab = a * b;
      const T c = ulps_away(std::fabs(ab), g.integer(-4, 4));
      return {a, b, ab < 0 ? c : -c};
    }
    case 4: {  // short mantissas: exact halfway cases and exact results
      const auto short_mantissa = [&] {
        return static_cast<T>(std::ldexp(static_cast<double>(g.integer(1, (1 << (p / 2)) - 1)),
                                         static_cast<int>(g.integer(-p / 2, p / 2))));
      };
      const T a = random_sign(g, short_mantissa()), b = short_mantissa();
      const T c = static_cast<T>(
          std::ldexp(static_cast<double>(g.integer(-8, 8)), static_cast<int>(g.integer(-2 * p, 0))));
      return {a, b, c};
    }
    case 5: {  // subnormal and underflowing results
      const int emin = lim::min_exponent;
      const T a = scaled(emin / 2 - p, emin / 2), b = scaled(emin / 2 - p, emin / 2);
      return {a, b, (g.next() & 1) != 0 ? scaled(emin - p, emin + 2) : T(0)};
    }
    case 6: {  // near overflow
      const int emax = lim::max_exponent;
      return {scaled(emax / 2 - 2, emax / 2), scaled(emax / 2 - 2, emax / 2), scaled(emax - 4, emax - 1)};
    }
    default:  // any finite numbers
      return {any_finite<T>(g), any_finite<T>(g), any_finite<T>(g)};
  }
}

}  // namespace qkv::test
