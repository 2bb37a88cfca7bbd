// math.hpp: constexpr exp, log, sqrt, sin, cos, tanh, erf and an exactly rounded fma, for float and double.
//
// Why: std::exp and friends are not constexpr on clang (g++ folds them with MPFR, a GCC
// extension), so the library carries its own. The same code runs at compile time and at run
// time, so both give the same bits (the project builds with -ffp-contract=off: no silent fma).
// Nothing here switches on std::is_constant_evaluated().
//
// Accuracy (measured against Boost.Multiprecision by tests/core/math_accuracy_test.cpp and
// math_tanh_erf_accuracy_test.cpp, numbers in docs/numerics.md): exp, tanh, erf < 1 ulp; sqrt
// and fma correctly rounded; log, and sin and cos below 2^20 pi/2, correctly rounded in double
// (math_cr_test.cpp; fdlibm's versions, < 1 ulp, remain as float's base and above 2^20 pi/2).
//
// exp, log, sin and cos are fdlibm's algorithms and coefficients as kept in FreeBSD's msun (Sun
// Microsystems, 1993-2004, "Permission to use, copy, modify, and distribute this software is
// freely granted, provided that this notice is preserved"), ported to constexpr C++ with
// std::bit_cast; the others are cited one by one:
//   exp  e_exp.c       (argument reduction x = k ln2 + r, Remez rational in r, scale by 2^k)
//   log  e_log.c       (x = 2^k (1 + f), s = f/(2+f), Remez polynomial in s^2)
//   sin  s_sin.c + k_sin.c, cos s_cos.c + k_cos.c (minimax polynomials on [-pi/4, pi/4])
//   reduction modulo pi/2: e_rem_pio2.c's medium path (three-part Cody-Waite pi/2, 33+33+53
//        bits) for |x| < 2^20 pi/2, and a Payne-Hanek reduction with 2/pi's bits otherwise
//   sqrt an exact integer square root (e_sqrt.c's integer test, Newton for the first guess),
//        correctly rounded
//   tanh E/(E + 2) with E = e^2|x| - 1 (s_tanh.c's form), in double-double arithmetic
//   erf  A&S 7.1.6 series with positive terms (|x| < 2) and 7.1.14 continued fraction for erfc
//        (2 <= |x| < 6), in double-double where it matters
//   fma  musl's src/math/fma.c (Szabolcs Nagy, 2018, MIT): exact 106-bit product in integers,
//        aligned addition with a sticky bit, one rounding at the end
// float versions evaluate in double and round once: the double result is within 1 ulp of
// double, i.e. 2^-29 ulp of float, so the float result is within 0.5 + 2^-29 ulp of float.
// sqrt in double rounded to float is correctly rounded (53 >= 2*24 + 2, Figueroa 1995).
//
// Special values (IEEE 754 / C Annex F): NaN in, NaN out; exp(+inf) = +inf, exp(-inf) = +0,
// overflow returns +inf and underflow +0 explicitly (g++ refuses a constexpr overflow);
// log(+-0) = -inf, log(x < 0) = NaN, log(+inf) = +inf; sqrt(-0) = -0, sqrt(x < 0) = NaN;
// sin(+-0) = +-0, sin(+-inf) = cos(+-inf) = NaN; subnormal inputs and outputs are exact cases
// of the same algorithms.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace qkv {

namespace detail {

// --- bits and special values -----------------------------------------------------------------

[[nodiscard]] constexpr std::uint64_t to_bits(double x) { return std::bit_cast<std::uint64_t>(x); }
[[nodiscard]] constexpr std::uint32_t to_bits(float x) { return std::bit_cast<std::uint32_t>(x); }
[[nodiscard]] constexpr double double_from_bits(std::uint64_t b) { return std::bit_cast<double>(b); }
[[nodiscard]] constexpr float float_from_bits(std::uint32_t b) { return std::bit_cast<float>(b); }

// the high 32 bits of a double, as fdlibm's GET_HIGH_WORD (signed, so that x < 0 reads hx < 0)
[[nodiscard]] constexpr std::int32_t high_word(double x) {
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(to_bits(x) >> 32));
}
[[nodiscard]] constexpr std::uint32_t low_word(double x) { return static_cast<std::uint32_t>(to_bits(x)); }
[[nodiscard]] constexpr double with_high_word(double x, std::uint32_t hi) {
  return double_from_bits((std::uint64_t{hi} << 32) | low_word(x));
}

template <class T>
[[nodiscard]] constexpr bool is_nan(T x) {
  return x != x;
}
template <class T>
[[nodiscard]] constexpr bool is_inf(T x) {
  return x == std::numeric_limits<T>::infinity() || x == -std::numeric_limits<T>::infinity();
}
template <class T>
[[nodiscard]] constexpr bool sign_bit(T x) {
  return (to_bits(x) >> (sizeof(T) * 8 - 1)) != 0;
}
template <class T>
[[nodiscard]] constexpr T infinity() {
  return std::numeric_limits<T>::infinity();
}
template <class T>
[[nodiscard]] constexpr T quiet_nan() {
  return std::numeric_limits<T>::quiet_NaN();
}

// 2^k for a normal exponent, k in [-1022, 1023], by building the bits
[[nodiscard]] constexpr double two_to(int k) {
  return double_from_bits(static_cast<std::uint64_t>(0x3ff + k) << 52);
}

// --- one rounding: a 63-bit significand with a sticky bit, to float or double --------------
//
// value = (-1)^negative * sig * 2^e with sig in [2^62, 2^63); bit 0 of sig is a sticky bit (set
// when nonzero bits were dropped below it). Rounds to nearest, ties to even, into T, with
// gradual underflow and overflow to infinity, using integers only.
template <class T>
[[nodiscard]] constexpr T round_pack(bool negative, std::uint64_t sig, int e) {
  using bits_t = std::conditional_t<std::is_same_v<T, float>, std::uint32_t, std::uint64_t>;
  constexpr int p = std::numeric_limits<T>::digits;               // 24 or 53
  constexpr int emin = std::numeric_limits<T>::min_exponent - 1;  // -126 or -1022
  constexpr int emax = std::numeric_limits<T>::max_exponent - 1;  // 127 or 1023
  constexpr std::uint64_t inf_bits = std::uint64_t{2 * emax + 1} << (p - 1);
  const T signed_zero = negative ? -T(0) : T(0);
  const T signed_inf = negative ? -infinity<T>() : infinity<T>();

  const int exponent = e + 62;  // value = 1.xxx * 2^exponent before rounding
  if (exponent > emax) return signed_inf;
  int shift = 63 - p;                             // bits dropped for a normal result
  if (exponent < emin) shift += emin - exponent;  // and more for a subnormal one
  if (shift >= 64) return signed_zero;            // below half the smallest subnormal: sig < 2^63 = half

  std::uint64_t kept = sig >> shift;
  const std::uint64_t rest = sig & ((std::uint64_t{1} << shift) - 1);
  const std::uint64_t half = std::uint64_t{1} << (shift - 1);
  if (rest > half || (rest == half && (kept & 1) != 0)) ++kept;  // a carry moves the exponent

  // normal: the implicit bit in kept adds the 1 of the biased exponent (exponent - emin + 1)
  const std::uint64_t b =
      exponent >= emin ? (static_cast<std::uint64_t>(exponent - emin) << (p - 1)) + kept : kept;
  if (b >= inf_bits) return signed_inf;
  const bits_t sign = negative ? bits_t{1} << (sizeof(T) * 8 - 1) : bits_t{0};
  return std::bit_cast<T>(static_cast<bits_t>(sign | static_cast<bits_t>(b)));
}

// x y = hi 2^64 + lo exactly, with 32-bit halves, for x, y < 2^60 (the middle sum must not wrap)
constexpr void multiply_128(std::uint64_t x, std::uint64_t y, std::uint64_t& hi, std::uint64_t& lo) {
  const std::uint64_t xlo = static_cast<std::uint32_t>(x), xhi = x >> 32;
  const std::uint64_t ylo = static_cast<std::uint32_t>(y), yhi = y >> 32;
  const std::uint64_t t1 = xlo * ylo;
  const std::uint64_t t2 = xlo * yhi + xhi * ylo;  // < 2^61
  const std::uint64_t t3 = xhi * yhi;
  lo = t1 + (t2 << 32);
  hi = t3 + (t2 >> 32) + (t1 > lo ? 1u : 0u);
}

// --- exp (fdlibm e_exp.c) ----------------------------------------------------------------------
//
// 1. reduction: x = k ln2 + r, |r| <= 0.5 ln2, with ln2 = ln2_hi + ln2_lo (ln2_hi has 32 bits,
//    so k * ln2_hi is exact for |k| < 2^21): r = hi - lo.
// 2. polynomial: R(r^2) ~ r (e^r + 1)/(e^r - 1) on [0, 0.34658], Remez, error < 2^-59;
//    c = r - r^2 R(r^2) and e^r = 1 + r + r c / (2 - c) = 1 - ((lo - (r c)/(2 - c)) - hi).
// 3. reconstruction: e^x = 2^k e^r, with 2^k built from bits; a subnormal result is scaled
//    in two steps so that it is rounded once.
inline constexpr double exp_overflow = 7.09782712893383973096e+02;    // above: +inf
inline constexpr double exp_underflow = -7.45133219101941108420e+02;  // below: +0

struct exp_reduced {
  double hi, lo, r;  // r = hi - lo
  int k;
};

[[nodiscard]] constexpr exp_reduced exp_reduce(double x) {
  constexpr double ln2_hi = 6.93147180369123816490e-01;  // 0x3fe62e42 fee00000
  constexpr double ln2_lo = 1.90821492927058770002e-10;  // 0x3dea39ef 35793c76
  constexpr double inv_ln2 = 1.44269504088896338700e+00;
  const std::uint32_t hx = static_cast<std::uint32_t>(high_word(x)) & 0x7fffffffu;
  const bool negative = x < 0;
  if (hx > 0x3fd62e42u) {    // |x| > 0.5 ln2
    if (hx < 0x3ff0a2b2u) {  // |x| < 1.5 ln2: k = +-1
      const double hi = negative ? x + ln2_hi : x - ln2_hi;
      const double lo = negative ? -ln2_lo : ln2_lo;
      return {hi, lo, hi - lo, negative ? -1 : 1};
    }
    // k = round(x / ln2), truncation after adding +-0.5
    const int k = static_cast<int>(inv_ln2 * x + (negative ? -0.5 : 0.5));
    const double t = k;
    const double hi = x - t * ln2_hi;  // exact
    const double lo = t * ln2_lo;
    return {hi, lo, hi - lo, k};
  }
  return {x, 0.0, x, 0};
}

// c = r - r^2 (P1 + r^2 (P2 + ... + r^2 P5))
[[nodiscard]] constexpr double exp_poly(double r) {
  constexpr double P1 = 1.66666666666666019037e-01;
  constexpr double P2 = -2.77777777770155933842e-03;
  constexpr double P3 = 6.61375632143793436117e-05;
  constexpr double P4 = -1.65339022054652515390e-06;
  constexpr double P5 = 4.13813679705723846039e-08;
  const double t = r * r;
  return r - t * (P1 + t * (P2 + t * (P3 + t * (P4 + t * P5))));
}

[[nodiscard]] constexpr double exp_reconstruct(const exp_reduced& s, double c) {
  const double r = s.r;
  if (s.k == 0) return 1.0 - ((r * c) / (c - 2.0) - r);
  const double y = 1.0 - ((s.lo - (r * c) / (2.0 - c)) - s.hi);  // e^r, in [0.7, 1.42]
  if (s.k >= -1021) {
    if (s.k == 1024) return y * 2.0 * two_to(1023);
    return y * two_to(s.k);
  }
  return y * two_to(s.k + 1000) * two_to(-1000);  // subnormal: one rounding, in the last step
}

[[nodiscard]] constexpr double exp_check(double x) {
  if (is_nan(x)) return x;
  if (x > exp_overflow) return infinity<double>();  // includes +inf
  if (x < exp_underflow) return 0.0;                // includes -inf
  const std::uint32_t hx = static_cast<std::uint32_t>(high_word(x)) & 0x7fffffffu;
  if (hx < 0x3e300000u) return 1.0 + x;  // |x| < 2^-28: e^x = 1 + x to within 2^-56
  const exp_reduced s = exp_reduce(x);
  return exp_reconstruct(s, exp_poly(s.r));
}

// float: e^x in double, rounded once; results at or above FLT_MAX + ulp/2 round to +inf
[[nodiscard]] constexpr float exp_check(float x) {
  if (is_nan(x)) return x;
  const double d = exp_check(static_cast<double>(x));
  if (d >= 0x1.ffffffp127) return infinity<float>();
  return static_cast<float>(d);
}

// --- log (fdlibm e_log.c) ----------------------------------------------------------------------
//
// 1. reduction: x = 2^k (1 + f) with sqrt(2)/2 < 1 + f < sqrt(2); subnormals scaled by 2^54.
// 2. polynomial: with s = f / (2 + f), log(1 + f) = 2s + 2/3 s^3 + ... = 2s + s R(s^2);
//    R is a Remez polynomial of degree 14 in s (Lg1..Lg7), error < 2^-58.45.
// 3. reconstruction: log(x) = k ln2_hi + (f - (hfsq - (s (hfsq + R) + k ln2_lo))),
//    hfsq = f^2 / 2; k ln2_hi is exact (ln2_hi has 32 bits).
inline constexpr double ln2_hi = 6.93147180369123816490e-01;  // 0x3fe62e42 fee00000
inline constexpr double ln2_lo = 1.90821492927058770002e-10;  // 0x3dea39ef 35793c76

struct log_reduced {
  double f;         // x / 2^k - 1
  int k;            // the exponent
  std::int32_t hx;  // high word of 1 + f without the exponent, picks the evaluation form
};

[[nodiscard]] constexpr log_reduced log_reduce(double x) {  // x positive, finite
  int k = 0;
  std::int32_t hx = high_word(x);
  if (hx < 0x00100000) {  // subnormal: scale up by 2^54
    k -= 54;
    x *= 0x1p54;
    hx = high_word(x);
  }
  k += (hx >> 20) - 1023;
  hx &= 0x000fffff;
  const std::int32_t i = (hx + 0x95f64) & 0x100000;  // 1 when the mantissa is above sqrt(2)
  x = with_high_word(x, static_cast<std::uint32_t>(hx | (i ^ 0x3ff00000)));  // x or x/2
  k += i >> 20;
  return {x - 1.0, k, hx};
}

[[nodiscard]] constexpr double log_reconstruct(const log_reduced& s) {
  constexpr double Lg1 = 6.666666666666735130e-01;  // 3fe55555 55555593
  constexpr double Lg2 = 3.999999999940941908e-01;  // 3fd99999 9997fa04
  constexpr double Lg3 = 2.857142874366239149e-01;  // 3fd24924 94229359
  constexpr double Lg4 = 2.222219843214978396e-01;  // 3fcc71c5 1d8e78af
  constexpr double Lg5 = 1.818357216161805012e-01;  // 3fc74664 96cb03de
  constexpr double Lg6 = 1.531383769920937332e-01;  // 3fc39a09 d078c69f
  constexpr double Lg7 = 1.479819860511658591e-01;  // 3fc2f112 df3e5244
  const double f = s.f;
  const int k = s.k;
  const double dk = k;
  if ((0x000fffff & (2 + s.hx)) < 3) {  // -2^-20 <= f < 2^-20: a short series is enough
    if (f == 0.0) return k == 0 ? 0.0 : dk * ln2_hi + dk * ln2_lo;
    const double R = f * f * (0.5 - 0.33333333333333333 * f);
    return k == 0 ? f - R : dk * ln2_hi - ((R - dk * ln2_lo) - f);
  }
  const double s_ = f / (2.0 + f);
  const double z = s_ * s_;
  const double w = z * z;
  const std::int32_t i = (s.hx - 0x6147a) | (0x6b851 - s.hx);  // > 0: f in a middle range
  const double t1 = w * (Lg2 + w * (Lg4 + w * Lg6));
  const double t2 = z * (Lg1 + w * (Lg3 + w * (Lg5 + w * Lg7)));
  const double R = t2 + t1;
  if (i > 0) {
    const double hfsq = 0.5 * f * f;
    return k == 0 ? f - (hfsq - s_ * (hfsq + R))
                  : dk * ln2_hi - ((hfsq - (s_ * (hfsq + R) + dk * ln2_lo)) - f);
  }
  return k == 0 ? f - s_ * (f - R) : dk * ln2_hi - ((s_ * (f - R) - dk * ln2_lo) - f);
}

template <class T>
[[nodiscard]] constexpr T log_check(T x) {
  if (is_nan(x)) return x;
  if (x == T(0)) return -infinity<T>();  // log(+-0) = -inf
  if (x < T(0)) return quiet_nan<T>();
  if (x == infinity<T>()) return x;
  // float: log in double, rounded once (log of a float never overflows or underflows a float)
  return static_cast<T>(log_reconstruct(log_reduce(static_cast<double>(x))));
}

// --- sqrt ---------------------------------------------------------------------------------------
//
// x = m 2^e with m an integer and e even, so sqrt(x) = sqrt(M) 2^((e - 54)/2) with M = m 2^54
// (108 bits). q = floor(sqrt(M)), 54 bits, is found exactly: Newton's iteration in double
// gives it to within a few units, and comparing q^2 with M in 128-bit integers corrects it
// (the integer check of fdlibm e_sqrt.c's bit-by-bit method, without its 54 iterations:
// about 100 clang evaluation steps instead of 470). q and a sticky bit for q^2 != M, rounded
// once (round_pack), are the correctly rounded square root.

// q^2 <= M, for q < 2^55 and M = (m_hi, m_lo)
[[nodiscard]] constexpr bool square_at_most(std::uint64_t q, std::uint64_t m_hi, std::uint64_t m_lo) {
  std::uint64_t hi = 0, lo = 0;
  multiply_128(q, q, hi, lo);
  return hi < m_hi || (hi == m_hi && lo <= m_lo);
}

[[nodiscard]] constexpr double sqrt_positive(double x) {  // x positive, finite
  const std::uint64_t b = to_bits(x);
  const int biased = static_cast<int>(b >> 52);
  std::uint64_t m = b & ((std::uint64_t{1} << 52) - 1);
  int e = 0;
  if (biased == 0) {  // subnormal: normalise m to [2^52, 2^53)
    const int s = std::countl_zero(m) - 11;
    m <<= s;
    e = -1074 - s;
  } else {
    m |= std::uint64_t{1} << 52;
    e = biased - 1075;
  }
  if ((e & 1) != 0) {  // make e even: m in [2^52, 2^54), still exact as a double
    m <<= 1;
    e -= 1;
  }
  // Newton for sqrt(t), t = m 2^-52 in [1, 4): from (t + 2)/3 (within 6%), 4 steps reach
  // double precision (relative error squares: 6e-2, 2e-3, 2e-6, 2e-12, below 2^-52)
  const double t = static_cast<double>(m) * 0x1p-52;
  double y = (t + 2.0) / 3.0;
  for (int i = 0; i < 4; ++i) y = 0.5 * (y + t / y);
  // sqrt(M) = sqrt(t) 2^53; the candidate is within a few units of floor(sqrt(M))
  std::uint64_t q = static_cast<std::uint64_t>(y * 0x1p53);
  const std::uint64_t m_hi = m >> 10, m_lo = m << 54;  // M = m 2^54
  while (!square_at_most(q, m_hi, m_lo)) --q;
  while (square_at_most(q + 1, m_hi, m_lo)) ++q;
  std::uint64_t q2_hi = 0, q2_lo = 0;
  multiply_128(q, q, q2_hi, q2_lo);
  const bool exact = q2_hi == m_hi && q2_lo == m_lo;
  // q in [2^53, 2^54): q << 9 is in [2^62, 2^63), bit 0 the sticky bit
  return round_pack<double>(false, (q << 9) | (exact ? 0u : 1u), (e - 54) / 2 - 9);
}

template <class T>
[[nodiscard]] constexpr T sqrt_check(T x) {
  if (is_nan(x)) return x;
  if (x == T(0)) return x;  // sqrt(-0) = -0
  if (x < T(0)) return quiet_nan<T>();
  if (x == infinity<T>()) return x;
  return static_cast<T>(sqrt_positive(static_cast<double>(x)));
}

// --- sin and cos (fdlibm k_sin.c, k_cos.c, e_rem_pio2.c) ----------------------------------------
//
// 1. reduction: x = n pi/2 + (y0 + y1), |y0 + y1| <= pi/4 (a double-double remainder).
// 2. kernels on [-pi/4, pi/4]: sin(y) = y + y^3 (S1 + y^2 S2 + ... + y^10 S6), |error| < 2^-58;
//    cos(y) = 1 - y^2/2 + y^4 (C1 + ... + y^10 C6), |error| < 2^-58; the tail y1 enters through
//    sin(y0 + y1) ~ sin(y0) + y1 cos(y0) and cos(y0 + y1) ~ cos(y0) - y1 sin(y0).
// 3. the quadrant n mod 4 picks +-sin or +-cos.
[[nodiscard]] constexpr double kernel_sin(double x, double y, bool has_tail) {
  constexpr double S1 = -1.66666666666666324348e-01;  // 0xbfc55555 55555549
  constexpr double S2 = 8.33333333332248946124e-03;   // 0x3f811111 1110f8a6
  constexpr double S3 = -1.98412698298579493134e-04;  // 0xbf2a01a0 19c161d5
  constexpr double S4 = 2.75573137070700676789e-06;   // 0x3ec71de3 57b1fe7d
  constexpr double S5 = -2.50507602534068634195e-08;  // 0xbe5ae5e6 8a2b9ceb
  constexpr double S6 = 1.58969099521155010221e-10;   // 0x3de5d93a 5acfd57c
  const double z = x * x;
  const double w = z * z;
  const double r = S2 + z * (S3 + z * S4) + z * w * (S5 + z * S6);
  const double v = z * x;
  if (!has_tail) return x + v * (S1 + z * r);
  return x - ((z * (0.5 * y - v * r) - y) - v * S1);
}

[[nodiscard]] constexpr double kernel_cos(double x, double y) {
  constexpr double C1 = 4.16666666666666019037e-02;   // 0x3fa55555 5555554c
  constexpr double C2 = -1.38888888888741095749e-03;  // 0xbf56c16c 16c15177
  constexpr double C3 = 2.48015872894767294178e-05;   // 0x3efa01a0 19cb1590
  constexpr double C4 = -2.75573143513906633035e-07;  // 0xbe927e4f 809c52ad
  constexpr double C5 = 2.08757232129817482790e-09;   // 0x3e21ee9e bdb4b1c4
  constexpr double C6 = -1.13596475577881948265e-11;  // 0xbda8fae9 be8838d4
  const double z = x * x;
  double w = z * z;
  const double r = z * (C1 + z * (C2 + z * C3)) + w * w * (C4 + z * (C5 + z * C6));
  const double hz = 0.5 * z;
  w = 1.0 - hz;
  return w + (((1.0 - w) - hz) + (z * r - x * y));  // 1 - hz with its rounding error kept
}

struct pio2_reduced {
  double y0, y1;  // x - n pi/2 = y0 + y1, |y1| <= ulp(y0)/2
  int n;          // the quadrant (only n mod 4 matters)
};

// medium path of e_rem_pio2.c, |x| < 2^20 pi/2: n = round(x 2/pi), then x - n pi/2 with pi/2 in
// three 33-bit parts (pio2_1 + pio2_2 + pio2_3, each with a tail) as far as cancellation needs:
// n pio2_k is exact (n < 2^20 and pio2_k has 33 bits), so each round only loses the tail's error.
[[nodiscard]] constexpr pio2_reduced rem_pio2_medium(double x) {
  constexpr double inv_pio2 = 6.36619772367581382433e-01;  // 0x3fe45f30 6dc9c883
  constexpr double pio2_1 = 1.57079632673412561417e+00;    // 0x3ff921fb 54400000
  constexpr double pio2_1t = 6.07710050650619224932e-11;   // 0x3dd0b461 1a626331
  constexpr double pio2_2 = 6.07710050630396597660e-11;    // 0x3dd0b461 1a600000
  constexpr double pio2_2t = 2.02226624879595063154e-21;   // 0x3ba3198a 2e037073
  constexpr double pio2_3 = 2.02226624871116645580e-21;    // 0x3ba3198a 2e000000
  constexpr double pio2_3t = 8.47842766036889956997e-32;   // 0x397b839a 252049c1
  constexpr double to_int = 0x1.8p52;                      // adding and subtracting it rounds to an integer
  const double fn = (x * inv_pio2 + to_int) - to_int;
  const int n = static_cast<int>(fn);
  double r = x - fn * pio2_1;
  double w = fn * pio2_1t;  // first round: good to 85 bits
  double y0 = r - w;
  const int j = static_cast<int>((to_bits(x) >> 52) & 0x7ff);
  int i = j - static_cast<int>((to_bits(y0) >> 52) & 0x7ff);
  if (i > 16) {  // second round: good to 118 bits
    double t = r;
    w = fn * pio2_2;
    r = t - w;
    w = fn * pio2_2t - ((t - r) - w);
    y0 = r - w;
    i = j - static_cast<int>((to_bits(y0) >> 52) & 0x7ff);
    if (i > 49) {  // third round: good to 151 bits, covers all cases
      t = r;
      w = fn * pio2_3;
      r = t - w;
      w = fn * pio2_3t - ((t - r) - w);
      y0 = r - w;
    }
  }
  return {y0, (r - y0) - w, n};
}

// 2/pi in binary, 32 bits per word, from the first bit after the point:
// 2/pi = 0.a2f9836e 4e441529 fc2757d1 ... (hex). 1280 bits: enough for the largest double,
// whose reduction needs the bits from 2^-970 to 2^-1194.
inline constexpr std::uint32_t two_over_pi_bits[40] = {
    0xa2f9836e, 0x4e441529, 0xfc2757d1, 0xf534ddc0, 0xdb629599, 0x3c439041, 0xfe5163ab, 0xdebbc561,
    0xb7246e3a, 0x424dd2e0, 0x06492eea, 0x09d1921c, 0xfe1deb1c, 0xb129a73e, 0xe88235f5, 0x2ebb4484,
    0xe99c7026, 0xb45f7e41, 0x3991d639, 0x835339f4, 0x9c845f8b, 0xbdf9283b, 0x1ff897ff, 0xde05980f,
    0xef2f118b, 0x5a0a6d1f, 0x6d367ecf, 0x27cb09b7, 0x4f463f66, 0x9e5fea2d, 0x7527bac7, 0xebe5f17b,
    0x3d0739f7, 0x8a5292ea, 0x6bfb5fb1, 0x1f8d5d08, 0x56033046, 0xfc7b6bab, 0xf0cfbc20, 0x9af4361d};

// a*b = p + err exactly (Dekker's product with Veltkamp's split; no fma, no overflow here)
struct double_double {
  double hi, lo;
};
[[nodiscard]] constexpr double_double split(double a) {
  const double c = 134217729.0 * a;  // 2^27 + 1
  const double hi = c - (c - a);
  return {hi, a - hi};
}
[[nodiscard]] constexpr double_double two_product(double a, double b) {
  const double p = a * b;
  const double_double sa = split(a), sb = split(b);
  const double err = ((sa.hi * sb.hi - p) + sa.hi * sb.lo + sa.lo * sb.hi) + sa.lo * sb.lo;
  return {p, err};
}

// bits [pos, pos + count) of a little-endian array of 32-bit words, count <= 64, whole words
// at a time (a bit loop would cost clang's constant evaluator thousands of steps per call)
template <std::size_t N>
[[nodiscard]] constexpr std::uint64_t bits_at(const std::uint32_t (&w)[N], int pos, int count) {
  const int i = pos / 32, o = pos % 32;
  const auto word = [&](int k) -> std::uint64_t { return k < static_cast<int>(N) ? w[k] : 0u; };
  const std::uint64_t lo = word(i) | (word(i + 1) << 32);  // bits [32 i, 32 i + 64)
  std::uint64_t r = lo >> o;
  if (o != 0) r |= word(i + 2) << (64 - o);
  return count == 64 ? r : r & ((std::uint64_t{1} << count) - 1);
}

// Payne-Hanek for |x| >= 2^20 pi/2 (x positive here): with x = m 2^e (m a 53-bit integer),
// x 2/pi mod 4 needs only the bits of 2/pi from 2^-(e-1) on (earlier ones give multiples of 4).
// A 224-bit window W of them times m, exactly in integers, gives n mod 4 and 128 bits of the
// fraction, to within 2^-138; the closest a double comes to a multiple of pi/2 is ~2^-61 (Kahan,
// McDonald), so at least 70 bits of the remainder are right. The fraction times pi/2 (a
// double-double) is y0 + y1.
[[nodiscard]] constexpr pio2_reduced rem_pio2_large(double x) {
  const std::uint64_t b = to_bits(x);
  const std::uint64_t m = (b & ((std::uint64_t{1} << 52) - 1)) | (std::uint64_t{1} << 52);
  const int e = static_cast<int>((b >> 52) & 0x7ff) - 1075;  // x = m 2^e, e >= -32 here
  const int k0 = e - 1 > 1 ? e - 1 : 1;                      // first bit of 2/pi that counts
  const int i0 = (k0 - 1) / 32;                              // its word
  // window, little-endian: w[6] = two_over_pi_bits[i0], ..., w[0] = two_over_pi_bits[i0 + 6]
  std::uint32_t w[7]{};
  for (int j = 0; j < 7; ++j) w[j] = two_over_pi_bits[i0 + 6 - j];
  // P = m W, 53 + 224 bits in 9 words (schoolbook, 32-bit limbs)
  const std::uint32_t mw[2] = {static_cast<std::uint32_t>(m), static_cast<std::uint32_t>(m >> 32)};
  std::uint32_t prod[9]{};
  for (int i = 0; i < 2; ++i) {
    std::uint64_t carry = 0;
    for (int j = 0; j < 7; ++j) {
      const std::uint64_t t = std::uint64_t{mw[i]} * w[j] + prod[i + j] + carry;
      prod[i + j] = static_cast<std::uint32_t>(t);
      carry = t >> 32;
    }
    prod[i + 7] = static_cast<std::uint32_t>(carry);
  }
  // x 2/pi = P 2^-sh (mod 4), sh in [191, 256]
  const int sh = 32 * i0 + 224 - e;
  int n = static_cast<int>(bits_at(prod, sh, 2));
  std::uint64_t f_hi = bits_at(prod, sh - 64, 64), f_lo = bits_at(prod, sh - 128, 64);
  bool negative = false;
  if ((f_hi >> 63) != 0) {  // fraction >= 1/2: take the next quadrant, fraction - 1
    n += 1;
    negative = true;
    f_lo = ~f_lo + 1;
    f_hi = ~f_hi + (f_lo == 0 ? 1u : 0u);
  }
  if (f_hi == 0 && f_lo == 0) return {0.0, 0.0, n};
  // normalise the 128-bit magnitude, then split it into two 53-bit doubles
  int z = 0;
  if (f_hi == 0) {
    f_hi = f_lo;
    f_lo = 0;
    z = 64;
  }
  const int s = std::countl_zero(f_hi);
  if (s > 0) {
    f_hi = (f_hi << s) | (f_lo >> (64 - s));
    f_lo <<= s;
  }
  z += s;  // fraction = (f_hi 2^64 + f_lo) 2^(-128 - z), top bit of f_hi set
  const double fh = static_cast<double>(f_hi >> 11) * two_to(-53 - z);
  const double fl = static_cast<double>(((f_hi & 0x7ff) << 42) | (f_lo >> 22)) * two_to(-106 - z);
  // y = fraction pi/2 with pi/2 = pio2_hi + pio2_lo
  constexpr double pio2_hi = 0x1.921fb54442d18p+0, pio2_lo = 0x1.1a62633145c07p-54;
  const double_double p = two_product(fh, pio2_hi);
  const double tail = p.lo + (fh * pio2_lo + fl * pio2_hi);
  const double y0 = p.hi + tail;
  const double y1 = tail - (y0 - p.hi);
  return negative ? pio2_reduced{-y0, -y1, n} : pio2_reduced{y0, y1, n};
}

// x = n pi/2 + y0 + y1: the medium path below 2^20 pi/2, Payne-Hanek above; odd in x
[[nodiscard]] constexpr pio2_reduced rem_pio2(double x) {
  const std::uint32_t ix = static_cast<std::uint32_t>(high_word(x)) & 0x7fffffffu;
  if (ix < 0x413921fbu) return rem_pio2_medium(x);
  if (x > 0) return rem_pio2_large(x);
  const pio2_reduced r = rem_pio2_large(-x);
  return {-r.y0, -r.y1, -r.n};
}

[[nodiscard]] constexpr double sin_check(double x) {
  if (is_nan(x)) return x;
  if (is_inf(x)) return quiet_nan<double>();
  const std::uint32_t ix = static_cast<std::uint32_t>(high_word(x)) & 0x7fffffffu;
  if (ix <= 0x3fe921fbu) {           // |x| <= pi/4
    if (ix < 0x3e500000u) return x;  // |x| < 2^-26: sin(x) = x (also +-0, subnormals)
    return kernel_sin(x, 0.0, false);
  }
  const pio2_reduced y = rem_pio2(x);
  switch (y.n & 3) {
    case 0: return kernel_sin(y.y0, y.y1, true);
    case 1: return kernel_cos(y.y0, y.y1);
    case 2: return -kernel_sin(y.y0, y.y1, true);
    default: return -kernel_cos(y.y0, y.y1);
  }
}

[[nodiscard]] constexpr double cos_check(double x) {
  if (is_nan(x)) return x;
  if (is_inf(x)) return quiet_nan<double>();
  const std::uint32_t ix = static_cast<std::uint32_t>(high_word(x)) & 0x7fffffffu;
  if (ix <= 0x3fe921fbu) {             // |x| <= pi/4
    if (ix < 0x3e46a09eu) return 1.0;  // |x| < 2^-27 sqrt(2): cos(x) = 1 to within 2^-55
    return kernel_cos(x, 0.0);
  }
  const pio2_reduced y = rem_pio2(x);
  switch (y.n & 3) {
    case 0: return kernel_cos(y.y0, y.y1);
    case 1: return -kernel_sin(y.y0, y.y1, true);
    case 2: return -kernel_cos(y.y0, y.y1);
    default: return kernel_sin(y.y0, y.y1, true);
  }
}

[[nodiscard]] constexpr float sin_check(float x) {
  return static_cast<float>(sin_check(static_cast<double>(x)));
}
[[nodiscard]] constexpr float cos_check(float x) {
  return static_cast<float>(cos_check(static_cast<double>(x)));
}

// --- double-double arithmetic (Dekker 1971; Knuth, TAOCP vol. 2, 4.2.2) ---------------------
//
// hi + lo with |lo| <= ulp(hi)/2: about 106 bits, from error-free transformations of double
// operations. Used where a result must be right to well beyond double before its one rounding.

// a + b = s + err exactly (Knuth's two-sum, any order of magnitude)
[[nodiscard]] constexpr double_double two_sum(double a, double b) {
  const double s = a + b;
  const double bb = s - a;
  return {s, (a - (s - bb)) + (b - bb)};
}

// the same when |a| >= |b| (Dekker's fast two-sum)
[[nodiscard]] constexpr double_double fast_two_sum(double a, double b) {
  const double s = a + b;
  return {s, b - (s - a)};
}

[[nodiscard]] constexpr double_double dd_add(double_double a, double_double b) {
  double_double s = two_sum(a.hi, b.hi);
  const double_double t = two_sum(a.lo, b.lo);
  s.lo += t.hi;
  s = fast_two_sum(s.hi, s.lo);
  s.lo += t.lo;
  return fast_two_sum(s.hi, s.lo);
}

[[nodiscard]] constexpr double_double dd_mul(double_double a, double_double b) {
  double_double p = two_product(a.hi, b.hi);
  p.lo += a.hi * b.lo + a.lo * b.hi;
  return fast_two_sum(p.hi, p.lo);
}

// a / b: a first quotient, then the quotients of the exact remainders
[[nodiscard]] constexpr double_double dd_div(double_double a, double_double b) {
  const double q1 = a.hi / b.hi;
  const double_double r = dd_add(a, dd_mul(b, {-q1, 0.0}));
  const double q2 = r.hi / b.hi;
  const double_double r2 = dd_add(r, dd_mul(b, {-q2, 0.0}));
  return dd_add(fast_two_sum(q1, q2), {r2.hi / b.hi, 0.0});
}

// a / b for a double b: the quotient, then the quotient of the exact remainder
[[nodiscard]] constexpr double_double dd_div(double_double a, double b) {
  const double q1 = a.hi / b;
  const double_double p = two_product(q1, b);
  const double r = ((a.hi - p.hi) - p.lo) + a.lo;
  return fast_two_sum(q1, r / b);
}

[[nodiscard]] constexpr double_double dd_scale(double_double a, int k) {  // a 2^k, no overflow
  return {a.hi * two_to(k), a.lo * two_to(k)};
}

// e^a - 1 and the exponent k, for a double-double a with |a| < 700: a = k ln2 + r,
// |r| <= ln2/2 + tiny, and e^r - 1 = r (1 + r/2 (1 + r/3 (... (1 + r/22)))) in double-double
// (Taylor: r^23/23! < 2^-102 r). ln2 = L1 + L2 + L3 with L1 of 40 bits, so k L1 is exact.
struct expm1_reduced {
  double_double em1;  // e^r - 1
  int k;
};

[[nodiscard]] constexpr expm1_reduced exp_dd_reduce(double_double a) {
  constexpr double L1 = 0x1.62e42fefa4000p-1, L2 = -0x1.8432a1b0e2634p-43, L3 = 0x1.f97b57a079a19p-103;
  constexpr double inv_ln2 = 0x1.71547652b82fep+0;
  constexpr double to_int = 0x1.8p52;
  const double kd = (a.hi * inv_ln2 + to_int) - to_int;
  double_double r = dd_add(two_sum(a.hi, -kd * L1), {a.lo, 0.0});
  r = dd_add(r, two_product(-kd, L2));
  r = dd_add(r, {-kd * L3, 0.0});
  double_double p{1.0, 0.0};
  for (int n = 22; n >= 2; --n) p = dd_add({1.0, 0.0}, dd_div(dd_mul(r, p), static_cast<double>(n)));
  return {dd_mul(r, p), static_cast<int>(kd)};
}

// e^a as a double-double, |a| < 700 and the result normal
[[nodiscard]] constexpr double_double exp_dd(double_double a) {
  const expm1_reduced e = exp_dd_reduce(a);
  return dd_scale(dd_add({1.0, 0.0}, e.em1), e.k);
}

// e^u - 1 as a double-double, for 0 <= u < 700: 2^k (e^r - 1) + 2^k - 1 (just e^r - 1 for k = 0)
[[nodiscard]] constexpr double_double expm1_dd(double u) {
  const expm1_reduced e = exp_dd_reduce({u, 0.0});
  if (e.k == 0) return e.em1;
  return dd_add(dd_add(dd_scale(e.em1, e.k), {two_to(e.k), 0.0}), {-1.0, 0.0});
}

// --- correctly rounded log, sin and cos in double ----------------------------------------------
//
// PyTorch's float64 Box-Muller calls the C library's log, sin and cos; glibc's are correctly
// rounded on all but about one argument in a thousand, and these are correctly rounded on all
// (docs/numerics.md, "Correctly rounded log, sin and cos", has the derivations). Each function:
// 1. a fast path in double-double arithmetic with a derived bound err on |hi + lo - f(x)|;
// 2. Ziv's rounding test: when every value within err of hi + lo rounds to hi, hi is the
//    correctly rounded f(x) (about one argument in 1400 fails it for log, one in 30 000 or
//    fewer for sin and cos);
// 3. otherwise an accurate path in 288-bit fixed point (error below 2^-201 for log, 2^-234 for
//    sin and cos, absolute), rounded once.
// float keeps the functions above (double result rounded to float), so float bits do not move.

// is RN(t) = hi for every t within err of hi + lo? (hi normal; false: take the accurate path)
[[nodiscard]] constexpr bool rounding_is_safe(double hi, double lo, double err) {
  const std::uint64_t b = to_bits(hi) & ~(std::uint64_t{1} << 63);
  const int biased = static_cast<int>(b >> 52);
  if (biased < 54 || biased > 0x7fd) return false;  // ulp(hi) must be a normal double
  const double u = double_from_bits(static_cast<std::uint64_t>(biased - 52) << 52);  // ulp(|hi|)
  const bool power_of_two = (b & ((std::uint64_t{1} << 52) - 1)) == 0;
  const double half_up = 0.5 * u;                              // to the midpoint above |hi|
  const double half_down = power_of_two ? 0.25 * u : half_up;  // to the midpoint below
  const double l = sign_bit(hi) ? -lo : lo;                    // lo in the direction of |hi|
  if (8.0 * err >= half_down) return false;
  // the gap is computed with one rounding (relative error <= 2^-53): 2 err < gap is safe
  if (l >= 0.0) return 2.0 * err < half_up - l;
  return 2.0 * err < half_down + l;
}

// fixed-point numbers for the accurate path: two's complement, value = (w[8] ... w[0]) 2^-256,
// so 31 integer bits, a sign and 256 fraction bits; truncation error 2^-256 per product
struct fixed {
  std::uint32_t w[9]{};
};

[[nodiscard]] constexpr bool fx_negative(const fixed& a) { return (a.w[8] >> 31) != 0; }

[[nodiscard]] constexpr fixed fx_add(const fixed& a, const fixed& b) {
  fixed r;
  std::uint64_t carry = 0;
  for (int i = 0; i < 9; ++i) {
    const std::uint64_t t = std::uint64_t{a.w[i]} + b.w[i] + carry;
    r.w[i] = static_cast<std::uint32_t>(t);
    carry = t >> 32;
  }
  return r;
}

[[nodiscard]] constexpr fixed fx_neg(const fixed& a) {
  fixed r;
  std::uint64_t carry = 1;
  for (int i = 0; i < 9; ++i) {
    const std::uint64_t t = std::uint64_t{static_cast<std::uint32_t>(~a.w[i])} + carry;
    r.w[i] = static_cast<std::uint32_t>(t);
    carry = t >> 32;
  }
  return r;
}

[[nodiscard]] constexpr fixed fx_sub(const fixed& a, const fixed& b) { return fx_add(a, fx_neg(b)); }
[[nodiscard]] constexpr fixed fx_abs(const fixed& a) { return fx_negative(a) ? fx_neg(a) : a; }

// a b, the magnitude truncated to 256 fraction bits (|a b| < 2^31)
[[nodiscard]] constexpr fixed fx_mul(const fixed& a, const fixed& b) {
  const fixed x = fx_abs(a), y = fx_abs(b);
  std::uint32_t p[18]{};
  for (int i = 0; i < 9; ++i) {
    if (x.w[i] == 0) continue;
    std::uint64_t carry = 0;
    for (int j = 0; j < 9; ++j) {
      const std::uint64_t t = std::uint64_t{x.w[i]} * y.w[j] + p[i + j] + carry;
      p[i + j] = static_cast<std::uint32_t>(t);
      carry = t >> 32;
    }
    p[i + 9] = static_cast<std::uint32_t>(carry);
  }
  fixed r;
  for (int i = 0; i < 9; ++i) r.w[i] = p[i + 8];
  return fx_negative(a) != fx_negative(b) ? fx_neg(r) : r;
}

// a / d and a d for a small positive integer d, on the magnitude
[[nodiscard]] constexpr fixed fx_div(const fixed& a, std::uint32_t d) {
  const fixed x = fx_abs(a);
  fixed q;
  std::uint64_t rem = 0;
  for (int i = 8; i >= 0; --i) {
    const std::uint64_t cur = (rem << 32) | x.w[i];
    q.w[i] = static_cast<std::uint32_t>(cur / d);
    rem = cur % d;
  }
  return fx_negative(a) ? fx_neg(q) : q;
}
[[nodiscard]] constexpr fixed fx_mul(const fixed& a, std::int32_t k) {
  const fixed x = fx_abs(a);
  const std::uint64_t m = static_cast<std::uint64_t>(k < 0 ? -static_cast<std::int64_t>(k) : k);
  fixed r;
  std::uint64_t carry = 0;
  for (int i = 0; i < 9; ++i) {
    const std::uint64_t t = x.w[i] * m + carry;
    r.w[i] = static_cast<std::uint32_t>(t);
    carry = t >> 32;
  }
  return (fx_negative(a) != (k < 0)) ? fx_neg(r) : r;
}

// |x| = m 2^e with m the integer significand (the implicit bit set for a normal x; a subnormal's
// m is below 2^52 and e = -1074); x finite
struct integer_significand {
  std::uint64_t m;
  int e;
};
[[nodiscard]] constexpr integer_significand significand_of(double x) {
  const std::uint64_t b = to_bits(x);
  const int biased = static_cast<int>((b >> 52) & 0x7ff);
  const std::uint64_t m = b & ((std::uint64_t{1} << 52) - 1);
  if (biased == 0) return {m, -1074};
  return {m | (std::uint64_t{1} << 52), biased - 1075};
}

// x exactly when |x| < 2^31 and x is a multiple of 2^-256 (otherwise truncated toward zero)
[[nodiscard]] constexpr fixed fx_from(double x) {
  fixed r;
  if (x == 0.0) return r;
  auto [m, e] = significand_of(x);
  int s = e + 256;  // x 2^256 = m 2^s
  if (s < 0) {
    if (s <= -64) return r;
    m >>= -s;
    s = 0;
  }
  const int i = s / 32, o = s % 32;  // m << o spans limbs i .. i + 2
  const std::uint64_t lo = m << o, hi = o == 0 ? 0 : m >> (64 - o);
  if (i < 9) r.w[i] = static_cast<std::uint32_t>(lo);
  if (i + 1 < 9) r.w[i + 1] = static_cast<std::uint32_t>(lo >> 32);
  if (i + 2 < 9) r.w[i + 2] = static_cast<std::uint32_t>(hi);
  return sign_bit(x) ? fx_neg(r) : r;
}

// the fixed-point value rounded once to the nearest double (ties to even)
[[nodiscard]] constexpr double fx_to_double(const fixed& a) {
  const fixed x = fx_abs(a);
  int top = 8;
  while (top >= 0 && x.w[top] == 0) --top;
  if (top < 0) return 0.0;
  const int p = 32 * top + 31 - std::countl_zero(x.w[top]);  // highest set bit
  // the 63 bits [p - 62, p] and a sticky bit for everything below
  std::uint64_t sig = 0;
  bool sticky = false;
  if (p >= 62) {
    sig = bits_at(x.w, p - 62, 63);
    const int below = p - 62;  // bits [0, below) are dropped
    for (int i = 0; i < 9 && 32 * i < below; ++i) {
      const int n = below - 32 * i;
      const std::uint32_t mask = n >= 32 ? 0xffffffffu : ((std::uint32_t{1} << n) - 1);
      if ((x.w[i] & mask) != 0) sticky = true;
    }
  } else {
    sig = bits_at(x.w, 0, 64) << (62 - p);
  }
  return round_pack<double>(fx_negative(a), sig | (sticky ? 1u : 0u), p - 62 - 256);
}

inline constexpr fixed fx_one{{0, 0, 0, 0, 0, 0, 0, 0, 1}};
// ln 2 and pi/2 truncated to 256 fraction bits (error < 2^-256)
inline constexpr fixed fx_ln2{{0x8baafa2b, 0x8a0d175b, 0x7298b62d, 0x40f34326, 0x03f2f6af, 0xc9e3b398,
                               0xd1cf79ab, 0xb17217f7, 0x00000000}};
inline constexpr fixed fx_pio2{{0x76273644, 0x04177d4c, 0x14cf98e8, 0x52049c11, 0x01b839a2, 0x898cc517,
                                0x42d18469, 0x921fb544, 0x00000001}};

// accurate log: x = 2^k m, y0 within 2^-50 of log(m), |y0| < 0.35. E = e^(-y0) by its Taylor
// series (50 terms: 0.35^51/51! < 2^-290), t = m E - 1 (|t| < 2^-49), and
// log(x) = k ln2 + y0 + t - t^2/2 + t^3/3 (the next term is below 2^-196).
[[nodiscard]] constexpr double log_accurate(int k, double m, double y0) {
  const fixed y = fx_from(-y0);
  fixed term = fx_one, e = fx_one;
  for (std::uint32_t n = 1; n <= 50; ++n) {
    term = fx_div(fx_mul(term, y), n);
    e = fx_add(e, term);
  }
  const fixed t = fx_sub(fx_mul(fx_from(m), e), fx_one);
  const fixed t2 = fx_mul(t, t);
  fixed r = fx_add(fx_from(y0), t);
  r = fx_sub(r, fx_div(t2, 2));
  r = fx_add(r, fx_div(fx_mul(t2, t), 3));
  r = fx_add(r, fx_mul(fx_ln2, static_cast<std::int32_t>(k)));
  return fx_to_double(r);
}

// accurate sin and cos: r = x - n pi/2 in fixed point (|x| < 2^21, so exact but for pi/2's
// 2^-256 times n), then the Taylor series of sin r and cos r (|r| < 0.8: 30 terms each,
// 0.8^61/61! < 2^-290); the quadrant n mod 4 picks +-sin r or +-cos r
[[nodiscard]] constexpr double sin_cos_accurate(double x, int n, bool cosine) {
  const fixed r = fx_sub(fx_from(x), fx_mul(fx_pio2, static_cast<std::int32_t>(n)));
  const fixed z = fx_mul(r, r);
  const int q = (n + (cosine ? 1 : 0)) & 3;  // cos x = sin(x + pi/2)
  const bool use_cos = (q & 1) != 0;
  fixed term = use_cos ? fx_one : r;
  fixed sum = term;
  for (std::uint32_t j = 1; j <= 30; ++j) {
    const std::uint32_t d = use_cos ? (2 * j - 1) * (2 * j) : (2 * j) * (2 * j + 1);
    term = fx_neg(fx_div(fx_mul(term, z), d));
    sum = fx_add(sum, term);
  }
  return fx_to_double(q >= 2 ? fx_neg(sum) : sum);
}

// --- the fast paths ---

// log: x = 2^k m, m = 1 + f in [0.7071, 1.4142), s = f/(2 + f) (|s| < 0.1716, z = s^2 < 0.0295),
// log(m) = 2 atanh(s) = 2 (s + s^3/3 + s^5/5 + s^5 z V(z)), V(z) = 1/7 + z/9 + ... + z^13/33;
// s, s^3/3 and s^5/5 in double-double, s^5 z V in double (it is below 2^-18 of s).
// Relative error below 2^-65.9 (docs/numerics.md), used as 2^-65.
inline constexpr double_double dd_third{0x1.5555555555555p-2, 0x1.5555555555555p-56};
inline constexpr double_double dd_fifth{0x1.999999999999ap-3, -0x1.999999999999ap-57};

// the fast path's verdict: hi, and whether hi is certainly the correctly rounded value
struct cr_attempt {
  double hi;
  bool rounded;
  int n;  // sin, cos: the quadrant used
};

// log for positive, finite x other than 1
[[nodiscard]] constexpr cr_attempt log_fast(double x) {
  const log_reduced red = log_reduce(x);
  const double f = red.f;
  const int k = red.k;
  const double_double s = dd_div(double_double{f, 0.0}, two_sum(2.0, f));
  const double_double z2 = dd_mul(s, s);
  const double_double s3 = dd_mul(s, z2);
  const double_double s5 = dd_mul(s3, z2);
  const double z = z2.hi;
  double v = 1.0 / 33.0;
  for (int j = 15; j >= 3; --j) v = v * z + 1.0 / (2 * j + 1);
  const double tail = (s5.hi * z) * v;
  double_double lm = dd_add(dd_mul(s5, dd_fifth), {tail, 0.0});
  lm = dd_add(dd_mul(s3, dd_third), lm);
  lm = dd_add(s, lm);
  lm = {2.0 * lm.hi, 2.0 * lm.lo};  // log(m)
  // k ln2 with ln2 = L1 + L2 + L3 (L1 of 40 bits: k L1 exact; k L2 exact as a two-product)
  constexpr double L1 = 0x1.62e42fefa4000p-1, L2 = -0x1.8432a1b0e2634p-43, L3 = 0x1.f97b57a079a19p-103;
  const double dk = k;
  double_double kl = dd_add({dk * L1, 0.0}, two_product(dk, L2));
  kl = dd_add(kl, {dk * L3, 0.0});
  const double_double r = dd_add(kl, lm);
  const double a = r.hi < 0 ? -r.hi : r.hi;
  return {r.hi, rounding_is_safe(r.hi, r.lo, 0x1p-65 * a), 0};
}

[[nodiscard]] constexpr double log_slow(double x) {
  const log_reduced red = log_reduce(x);
  return log_accurate(red.k, 1.0 + red.f, log_reconstruct({red.f, 0, red.hx}));  // y0 = log(m) within 1 ulp
}

[[nodiscard]] constexpr double log_cr(double x) {
  if (is_nan(x)) return x;
  if (x == 0.0) return -infinity<double>();
  if (x < 0.0) return quiet_nan<double>();
  if (x == infinity<double>() || x == 1.0) return x == 1.0 ? 0.0 : x;
  const cr_attempt a = log_fast(x);
  return a.rounded ? a.hi : log_slow(x);
}

// sin and cos: for |x| <= pi/4 r = x; below 2^20 pi/2, x = n pi/2 + r with pi/2 = C1 + C2 + C3 + C4
// (C1..C3 of at most 33 bits, so n Ck is exact; x - n C1 is exact by Sterbenz), r as a
// double-double to within 2^-134 absolute (plus 2^-104 relative); then
// sin r = r (1 - z/3! + z^2/5! - z^3/7! + z^4/9! + z^5 Ts(z)), cos r = 1 - z/2! + ... + z^5 Tc(z),
// z = r^2, the first five coefficients in double-double and the tails in double. Relative
// error below 2^-73 (docs/numerics.md), used as 2^-70. Above 2^20 pi/2 the functions above.
inline constexpr double_double sin_coefficients[5] = {{1.0, 0.0},
                                                      {-0x1.5555555555555p-3, -0x1.5555555555555p-57},
                                                      {0x1.1111111111111p-7, 0x1.1111111111111p-63},
                                                      {-0x1.a01a01a01a01ap-13, -0x1.a01a01a01a01ap-73},
                                                      {0x1.71de3a556c734p-19, -0x1.c154f8ddc6c00p-73}};
inline constexpr double sin_tail[7] = {-0x1.ae64567f544e4p-26, 0x1.6124613a86d09p-33,  -0x1.ae7f3e733b81fp-41,
                                       0x1.952c77030ad4ap-49,  -0x1.2f49b46814157p-57, 0x1.71b8ef6dcf572p-66,
                                       -0x1.761b41316381ap-75};
inline constexpr double_double cos_coefficients[5] = {{1.0, 0.0},
                                                      {-0x1.0000000000000p-1, 0.0},
                                                      {0x1.5555555555555p-5, 0x1.5555555555555p-59},
                                                      {-0x1.6c16c16c16c17p-10, 0x1.f49f49f49f49fp-65},
                                                      {0x1.a01a01a01a01ap-16, 0x1.a01a01a01a01ap-76}};
inline constexpr double cos_tail[8] = {-0x1.27e4fb7789f5cp-22, 0x1.1eed8eff8d898p-29,  -0x1.93974a8c07c9dp-37,
                                       0x1.ae7f3e733b81fp-45,  -0x1.6827863b97d97p-53, 0x1.e542ba4020225p-62,
                                       -0x1.0ce396db7f853p-70, 0x1.f2cf01972f578p-80};

template <std::size_t N>
[[nodiscard]] constexpr double_double sin_cos_poly(const double_double (&c)[5], const double (&tail)[N],
                                                   double_double z2) {
  const double z = z2.hi;
  double t = tail[N - 1];
  for (std::size_t j = N - 1; j-- > 0;) t = t * z + tail[j];
  double_double p{t, 0.0};
  for (int j = 4; j >= 0; --j) p = dd_add(dd_mul(p, z2), c[j]);
  return p;
}

[[nodiscard]] constexpr cr_attempt sin_cos_fast(double x, bool cosine) {
  const std::uint32_t ix = static_cast<std::uint32_t>(high_word(x)) & 0x7fffffffu;
  int n = 0;
  double_double r{x, 0.0};
  double reduction_error = 0.0;
  if (ix > 0x3fe921fbu) {  // |x| > pi/4 (about): reduce
    constexpr double C1 = 0x1.921fb544p+0, C2 = 0x1.0b4611a6p-34, C3 = 0x1.3198a2ep-69,
                     C4 = 0x1.b839a252049c1p-104;
    constexpr double inv_pio2 = 6.36619772367581382433e-01;
    constexpr double to_int = 0x1.8p52;
    const double fn = (x * inv_pio2 + to_int) - to_int;
    n = static_cast<int>(fn);
    r = two_sum(x - fn * C1, -(fn * C2));
    r = dd_add(r, {-(fn * C3), 0.0});
    r = dd_add(r, {-(fn * C4), 0.0});
    reduction_error = 0x1p-134;
  }
  const int q = (n + (cosine ? 1 : 0)) & 3;  // cos x = sin(x + pi/2)
  const double_double z2 = dd_mul(r, r);
  double_double v = (q & 1) != 0 ? sin_cos_poly(cos_coefficients, cos_tail, z2)
                                 : dd_mul(r, sin_cos_poly(sin_coefficients, sin_tail, z2));
  if (q >= 2) v = {-v.hi, -v.lo};
  const double hi = v.hi < 0 ? -v.hi : v.hi;
  return {v.hi, rounding_is_safe(v.hi, v.lo, 0x1p-70 * hi + reduction_error), n};
}

[[nodiscard]] constexpr double sin_cos_cr(double x, bool cosine) {
  const cr_attempt a = sin_cos_fast(x, cosine);
  return a.rounded ? a.hi : sin_cos_accurate(x, a.n, cosine);
}

[[nodiscard]] constexpr double sin_cr(double x) {
  if (is_nan(x)) return x;
  if (is_inf(x)) return quiet_nan<double>();
  const std::uint32_t ix = static_cast<std::uint32_t>(high_word(x)) & 0x7fffffffu;
  if (ix < 0x3e500000u) return x;              // |x| < 2^-26: x^3/6 < ulp(x)/3, sin x rounds to x
  if (ix >= 0x413921fbu) return sin_check(x);  // |x| >= 2^20 pi/2: within 1 ulp only
  return sin_cos_cr(x, false);
}

[[nodiscard]] constexpr double cos_cr(double x) {
  if (is_nan(x)) return x;
  if (is_inf(x)) return quiet_nan<double>();
  const std::uint32_t ix = static_cast<std::uint32_t>(high_word(x)) & 0x7fffffffu;
  if (ix < 0x3e46a09eu) return 1.0;  // |x| < 2^-27 sqrt(2): 1 - x^2/2 is above 1 - 2^-54
  if (ix >= 0x413921fbu) return cos_check(x);
  return sin_cos_cr(x, true);
}

// --- tanh ---------------------------------------------------------------------------------------
//
// tanh(x) = E / (E + 2) with E = e^(2|x|) - 1 (the form of fdlibm s_tanh.c), but E and the
// quotient in double-double, so the one rounding at the end is the only one that counts
// (fdlibm's double version reaches 2 ulp near |x| = 0.55, where E + 2 amplifies E's error).
// |x| < 2^-28: tanh(x) = x (x^3/3 is below half an ulp); |x| >= 22: tanh(x) = +-1 (1 - tanh(22)
// = 2 e^-44 is below half an ulp of 1).
[[nodiscard]] constexpr double tanh_check(double x) {
  if (is_nan(x)) return x;
  const double ax = x < 0 ? -x : x;
  if (ax < 0x1p-28) return x;                 // also +-0 and subnormals
  if (ax >= 22.0) return x < 0 ? -1.0 : 1.0;  // also +-inf
  const double_double e = expm1_dd(2.0 * ax);
  const double_double q = dd_div(e, dd_add(e, {2.0, 0.0}));
  const double t = q.hi + q.lo;
  return x < 0 ? -t : t;
}
[[nodiscard]] constexpr float tanh_check(float x) {
  return static_cast<float>(tanh_check(static_cast<double>(x)));
}

// --- erf ----------------------------------------------------------------------------------------
//
// |x| < 2^-28: erf(x) = 2x/sqrt(pi) (the next term, x^3/3, is below half an ulp), scaled by
// 2^200 first so that a subnormal result is rounded once.
// |x| < 2: the series with positive terms (Abramowitz & Stegun 7.1.6)
//   erf(x) = 2/sqrt(pi) e^(-x^2) sum_n 2^n x^(2n+1) / (1 3 5 ... (2n+1)),
//   summed in double-double until a term is below 2^-106 of the sum (at most 46 terms).
// 2 <= |x| < 6: erf(x) = 1 - erfc(x), with erfc by its continued fraction (A&S 7.1.14)
//   erfc(x) = e^(-x^2)/sqrt(pi) 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))),
//   64 levels evaluated backwards in double: erfc(x) <= 0.0047 there, so its relative error of
//   ~2^-50 is below 2^-57 absolute, a tenth of an ulp of erf.
// |x| >= 6: erf(x) = +-1 (erfc(6) = 2.2e-17 is below half an ulp of 1).
inline constexpr double_double two_over_sqrt_pi{0x1.20dd750429b6dp+0, 0x1.1ae3a914fed80p-56};

[[nodiscard]] constexpr double erf_series(double ax) {  // 2^-28 <= ax < 2
  const double_double x2 = two_product(ax, ax);
  const double_double two_x2 = {2.0 * x2.hi, 2.0 * x2.lo};
  double_double term{ax, 0.0}, sum{ax, 0.0};
  for (int n = 1; n < 64; ++n) {
    term = dd_div(dd_mul(term, two_x2), static_cast<double>(2 * n + 1));
    sum = dd_add(sum, term);
    if (term.hi < sum.hi * 0x1p-106) break;
  }
  const double_double r = dd_mul(dd_mul(two_over_sqrt_pi, exp_dd({-x2.hi, -x2.lo})), sum);
  return r.hi + r.lo;
}

[[nodiscard]] constexpr double erfc_fraction(double ax) {  // 2 <= ax < 6
  double t = 0.0;
  for (int n = 64; n >= 1; --n) t = (0.5 * n) / (ax + t);
  const double_double x2 = two_product(ax, ax);
  const double_double e = exp_dd({-x2.hi, -x2.lo});
  return (e.hi + e.lo) * (0.5 * two_over_sqrt_pi.hi) / (ax + t);
}

[[nodiscard]] constexpr double erf_check(double x) {
  if (is_nan(x)) return x;
  const double ax = x < 0 ? -x : x;
  if (x == 0.0) return x;  // +-0
  if (ax < 0x1p-28) {
    const double_double p = dd_mul(two_over_sqrt_pi, {x * 0x1p200, 0.0});
    return (p.hi + p.lo) * 0x1p-200;  // subnormals included
  }
  double r = 0.0;
  if (ax < 2.0) {
    r = erf_series(ax);
  } else if (ax < 6.0) {
    r = 1.0 - erfc_fraction(ax);
  } else {
    r = 1.0;  // also +-inf
  }
  return x < 0 ? -r : r;
}
[[nodiscard]] constexpr float erf_check(float x) {
  return static_cast<float>(erf_check(static_cast<double>(x)));
}

// --- fma (musl fma.c): a*b + c with one rounding, in integers ---------------------------------
//
// Each operand as m 2^e with m in [2^53, 2^54) (top 10 bits and bit 0 of a 64-bit word are 0);
// the product is exact in 128 bits; c is aligned to it, the bits shifted out are or-ed into a
// sticky bit; the sum or difference is normalised to 63 bits plus sticky and rounded once
// (round_pack). float operands are exact as doubles and take the same path, rounded to float.
struct unpacked {
  std::uint64_t m;  // in [2^53, 2^54)
  int e;            // value = +-m 2^e
  bool negative;
};

[[nodiscard]] constexpr unpacked unpack(double x) {  // x finite, nonzero
  const auto [m, e] = significand_of(x);
  const int s = std::countl_zero(m) - 10;
  return {m << s, e - s, sign_bit(x)};
}

template <class T>
[[nodiscard]] constexpr T fma_finite(double x, double y, double z) {  // x, y nonzero; all finite
  const unpacked nx = unpack(x), ny = unpack(y);
  std::uint64_t rhi = 0, rlo = 0;
  multiply_128(nx.m, ny.m, rhi, rlo);  // in [2^106, 2^108): top 20 bits of rhi are 0
  int e = nx.e + ny.e;
  bool negative = nx.negative != ny.negative;

  if (z != 0.0) {
    const unpacked nz = unpack(z);
    std::uint64_t zhi = 0, zlo = 0;
    int d = nz.e - e;  // align: shift z left or the product right, so both share exponent e
    if (d > 0) {
      if (d < 64) {
        zlo = nz.m << d;
        zhi = nz.m >> (64 - d);
      } else {  // z is far larger: z << 64 and the product shifted right with a sticky bit
        zhi = nz.m;
        e = nz.e - 64;
        d -= 64;
        if (d == 0) {
        } else if (d < 64) {
          rlo = (rhi << (64 - d)) | (rlo >> d) | ((rlo << (64 - d)) != 0 ? 1u : 0u);
          rhi = rhi >> d;
        } else {
          rlo = 1;
          rhi = 0;
        }
      }
    } else {
      d = -d;
      if (d == 0) {
        zlo = nz.m;
      } else if (d < 64) {
        zlo = (nz.m >> d) | ((nz.m << (64 - d)) != 0 ? 1u : 0u);
      } else {
        zlo = 1;
      }
    }
    if (negative == nz.negative) {  // r += z
      rlo += zlo;
      rhi += zhi + (rlo < zlo ? 1u : 0u);
    } else {  // r -= z, and flip the sign if it went negative
      const std::uint64_t t = rlo;
      rlo -= zlo;
      rhi = rhi - zhi - (t < rlo ? 1u : 0u);
      if ((rhi >> 63) != 0) {
        rlo = ~rlo + 1;
        rhi = ~rhi + (rlo == 0 ? 1u : 0u);
        negative = !negative;
      }
    }
  }

  // normalise: the top 63 bits in [2^62, 2^63), the rest or-ed into bit 0
  std::uint64_t sig = 0;
  if (rhi != 0) {
    const int d = std::countl_zero(rhi) - 1;
    e += 64;
    if (d == 0) {
      sig = rhi | (rlo != 0 ? 1u : 0u);
    } else if (d > 0) {
      sig = (rhi << d) | (rlo >> (64 - d)) | ((rlo << d) != 0 ? 1u : 0u);
    } else {  // rhi has its top bit set: cannot happen after the sign flip, kept for safety
      sig = (rhi >> 1) | ((rhi & 1) | (rlo != 0 ? 1u : 0u));
      e += 1;
    }
    e -= d > 0 ? d : 0;
  } else if (rlo != 0) {
    const int d = std::countl_zero(rlo) - 1;
    if (d < 0) {
      sig = (rlo >> 1) | (rlo & 1);
      e += 1;
    } else {
      sig = rlo << d;
      e -= d;
    }
  } else {
    return T(0);  // exact cancellation: +0 when rounding to nearest
  }
  return round_pack<T>(negative, sig, e);
}

template <class T>
[[nodiscard]] constexpr T fma_check(T a, T b, T c) {
  if (is_nan(a)) return a;  // NaN in, NaN out: the first NaN operand
  if (is_nan(b)) return b;
  if (is_nan(c)) return c;
  if (is_inf(a) || is_inf(b)) {
    if (a == T(0) || b == T(0)) return quiet_nan<T>();  // inf * 0
    const bool negative = sign_bit(a) != sign_bit(b);
    if (is_inf(c) && sign_bit(c) != negative) return quiet_nan<T>();  // inf - inf
    return negative ? -infinity<T>() : infinity<T>();
  }
  if (is_inf(c)) return c;
  if (a == T(0) || b == T(0)) return a * b + c;  // the product is an exact signed zero
  return fma_finite<T>(static_cast<double>(a), static_cast<double>(b), static_cast<double>(c));
}

}  // namespace detail

/// @brief e^x, within 1 ulp; exp(NaN) = NaN, exp(+inf) = +inf, exp(-inf) = +0, overflow +inf.
[[nodiscard]] constexpr double exp(double x) { return detail::exp_check(x); }
[[nodiscard]] constexpr float exp(float x) { return detail::exp_check(x); }

/// @brief natural logarithm, within 1 ulp; log(+-0) = -inf, log(x < 0) = NaN, log(+inf) = +inf.
[[nodiscard]] constexpr double log(double x) { return detail::log_cr(x); }
[[nodiscard]] constexpr float log(float x) { return detail::log_check(x); }

/// @brief square root, correctly rounded; sqrt(-0) = -0, sqrt(x < 0) = NaN.
[[nodiscard]] constexpr double sqrt(double x) { return detail::sqrt_check(x); }
[[nodiscard]] constexpr float sqrt(float x) { return detail::sqrt_check(x); }

/// @brief sine (radians), within 1 ulp; sin(+-0) = +-0, sin(+-inf) = NaN.
[[nodiscard]] constexpr double sin(double x) { return detail::sin_cr(x); }
[[nodiscard]] constexpr float sin(float x) { return detail::sin_check(x); }

/// @brief cosine (radians), within 1 ulp; cos(+-inf) = NaN.
[[nodiscard]] constexpr double cos(double x) { return detail::cos_cr(x); }
[[nodiscard]] constexpr float cos(float x) { return detail::cos_check(x); }

/// @brief hyperbolic tangent, within 1 ulp; tanh(+-0) = +-0, tanh(+-inf) = +-1.
[[nodiscard]] constexpr double tanh(double x) { return detail::tanh_check(x); }
[[nodiscard]] constexpr float tanh(float x) { return detail::tanh_check(x); }

/// @brief the error function 2/sqrt(pi) int_0^x e^(-t^2) dt, within 1 ulp; erf(+-inf) = +-1.
[[nodiscard]] constexpr double erf(double x) { return detail::erf_check(x); }
[[nodiscard]] constexpr float erf(float x) { return detail::erf_check(x); }

/// @brief a*b + c rounded once (to nearest, ties to even), as IEEE 754 fusedMultiplyAdd,
/// emulated with integers: no hardware fma, same bits at compile time and at run time.
[[nodiscard]] constexpr double fma(double a, double b, double c) { return detail::fma_check(a, b, c); }
[[nodiscard]] constexpr float fma(float a, float b, float c) { return detail::fma_check(a, b, c); }

// integer arguments are computed in double, as <cmath> does
template <class I>
  requires std::is_integral_v<I>
[[nodiscard]] constexpr double exp(I x) {
  return exp(static_cast<double>(x));
}
template <class I>
  requires std::is_integral_v<I>
[[nodiscard]] constexpr double log(I x) {
  return log(static_cast<double>(x));
}
template <class I>
  requires std::is_integral_v<I>
[[nodiscard]] constexpr double sqrt(I x) {
  return sqrt(static_cast<double>(x));
}
template <class I>
  requires std::is_integral_v<I>
[[nodiscard]] constexpr double sin(I x) {
  return sin(static_cast<double>(x));
}
template <class I>
  requires std::is_integral_v<I>
[[nodiscard]] constexpr double cos(I x) {
  return cos(static_cast<double>(x));
}

template <class I>
  requires std::is_integral_v<I>
[[nodiscard]] constexpr double tanh(I x) {
  return tanh(static_cast<double>(x));
}
template <class I>
  requires std::is_integral_v<I>
[[nodiscard]] constexpr double erf(I x) {
  return erf(static_cast<double>(x));
}

}  // namespace qkv
