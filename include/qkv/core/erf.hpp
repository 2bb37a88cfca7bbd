// erf.hpp: constexpr erf for float and double (fdlibm s_erf.c), for GELU's exact form.
//
// A fallback, in its own header and under its own name (qkv::erf_fdlibm), because core/math.hpp's
// qkv::erf had not reached main when the encoder (issue 6) needed it. When it has, GELU
// (core/layers.hpp) should call qkv::erf and this header go. Same style, same rules as math.hpp:
// the same code at compile time and at run time, no std::is_constant_evaluated, special values
// first, then named stages.
//
// The algorithm is fdlibm's s_erf.c as kept in FreeBSD's msun (Sun Microsystems, 1993:
// "Permission to use, copy, modify, and distribute this software is freely granted, provided
// that this notice is preserved"), ported to constexpr C++ with std::bit_cast:
//   |x| < 0.84375         erf(x) = x + x R(x^2), R a rational of degree 8/10, |R - (erf(x) - x)/x| <= 2^-57.90
//   0.84375 <= |x| < 1.25 erf(x) = erx + P1(s)/Q1(s), s = |x| - 1, erx = 0.84506291151 rounded to 24 bits,
//                         |P1/Q1 - (erf(|x|) - erx)| <= 2^-59.06
//   1.25 <= |x| < 6       erf(x) = 1 - erfc(x), erfc(x) = exp(-z^2 - 0.5625) exp((z - x)(z + x) + R/S) / x,
//                         z = x with its low 32 bits cleared (so z^2 is exact), R/S a rational in
//                         1/x^2 of degree 7/8 below 1/0.35 and 6/7 above, error < 2^-61.52
//   |x| >= 6              erf(x) = +-1 (1 - erf(6) < 2^-53: the nearest double)
// Accuracy, measured against Boost cpp_bin_float_50 by tests/runtime/erf_test.cpp: double within
// 1 ulp; float evaluated in double and rounded once, so within 0.5 + 2^-29 ulp.
// Special values: erf(NaN) = NaN, erf(+-0) = +-0, erf(+-inf) = +-1; subnormals: erf(x) = x + (2/sqrt(pi) - 1) x.
#pragma once

#include <bit>
#include <cstdint>
#include <limits>

#include "math.hpp"

namespace qkv {

namespace detail {

// the coefficients of s_erf.c, with their bit patterns (high word, low word)
inline constexpr double fdlibm_erx = 8.45062911510467529297e-01;   // 0x3FEB0AC1 60000000
inline constexpr double fdlibm_efx = 1.28379167095512586316e-01;   // 0x3FC06EBA 8214DB69: 2/sqrt(pi) - 1
inline constexpr double fdlibm_efx8 = 1.02703333676410069053e+00;  // 0x3FF06EBA 8214DB69: 8 efx
// erf on [0, 0.84375]
inline constexpr double fdlibm_erf_pp[5] = {1.28379167095512558561e-01, -3.25042107247001499370e-01, -2.84817495755985104766e-02,
                                     -5.77027029648944159157e-03, -2.37630166566501626084e-05};
inline constexpr double fdlibm_erf_qq[5] = {3.97917223959155352819e-01, 6.50222499887672944485e-02, 5.08130628187576562776e-03,
                                     1.32494738004321644526e-04, -3.96022827877536812320e-06};
// erf on [0.84375, 1.25]
inline constexpr double fdlibm_erf_pa[7] = {-2.36211856075265944077e-03, 4.14856118683748331666e-01, -3.72207876035701323847e-01,
                                     3.18346619901161753674e-01,  -1.10894694282396677476e-01, 3.54783043256182359371e-02,
                                     -2.16637559486879084300e-03};
inline constexpr double fdlibm_erf_qa[6] = {1.06420880400844228286e-01, 5.40397917702171048937e-01, 7.18286544141962662868e-02,
                                     1.26171219808761642112e-01, 1.36370839120290507362e-02, 1.19844998467991074170e-02};
// erfc on [1.25, 1/0.35]
inline constexpr double fdlibm_erf_ra[8] = {-9.86494403484714822705e-03, -6.93858572707181764372e-01, -1.05586262253232909814e+01,
                                     -6.23753324503260060396e+01, -1.62396669462573470355e+02, -1.84605092906711035994e+02,
                                     -8.12874355063065934246e+01, -9.81432934416914548592e+00};
inline constexpr double fdlibm_erf_sa[8] = {1.96512716674392571292e+01, 1.37657754143519042600e+02, 4.34565877475229228821e+02,
                                     6.45387271733267880336e+02, 4.29008140027567833386e+02, 1.08635005541779435134e+02,
                                     6.57024977031928170135e+00, -6.04244152148580987438e-02};
// erfc on [1/0.35, 6]
inline constexpr double fdlibm_erf_rb[7] = {-9.86494292470009928597e-03, -7.99283237680523006574e-01, -1.77579549177547519889e+01,
                                     -1.60636384855821916062e+02, -6.37566443368389627722e+02, -1.02509513161107724954e+03,
                                     -4.83519191608651397019e+02};
inline constexpr double fdlibm_erf_sb[7] = {3.03380607434824582924e+01, 3.25792512996573918826e+02, 1.53672958608443695994e+03,
                                     3.19985821950859553908e+03, 2.55305040643316442583e+03, 4.74528541206955367215e+02,
                                     -2.24409524465858183362e+01};

/// c[0] + z (c[1] + z (c[2] + ...)): Horner, innermost first, as s_erf.c writes it
template <std::size_t N>
[[nodiscard]] constexpr double fdlibm_erf_poly(const double (&c)[N], double z) {
  double r = c[N - 1];
  for (std::size_t k = N - 1; k-- > 0;) r = c[k] + z * r;
  return r;
}

/// 1 + z (c[0] + z (c[1] + ...)): the denominators
template <std::size_t N>
[[nodiscard]] constexpr double fdlibm_erf_poly1(const double (&c)[N], double z) {
  return 1.0 + z * fdlibm_erf_poly(c, z);
}

/// stage 1: |x| < 0.84375
[[nodiscard]] constexpr double fdlibm_erf_small(double x, std::uint32_t ix) {
  if (ix < 0x3e300000u) {                                // |x| < 2^-28: erf(x) = x + efx x
    if (ix < 0x00800000u) return 0.125 * (8.0 * x + fdlibm_efx8 * x);  // avoid underflow
    return x + fdlibm_efx * x;
  }
  const double z = x * x;
  return x + x * (fdlibm_erf_poly(fdlibm_erf_pp, z) / fdlibm_erf_poly1(fdlibm_erf_qq, z));
}

/// stage 2: 0.84375 <= |x| < 1.25
[[nodiscard]] constexpr double fdlibm_erf_middle(double x) {
  const double s = (x < 0 ? -x : x) - 1.0;
  const double pq = fdlibm_erf_poly(fdlibm_erf_pa, s) / fdlibm_erf_poly1(fdlibm_erf_qa, s);
  return x >= 0 ? fdlibm_erx + pq : -fdlibm_erx - pq;
}

/// stage 3: 1.25 <= |x| < 6, through erfc(|x|) = exp(-z^2 - 0.5625) exp((z - a)(z + a) + R/S) / a
[[nodiscard]] constexpr double fdlibm_erf_large(double x, std::uint32_t ix) {
  const double a = x < 0 ? -x : x;
  const double s = 1.0 / (a * a);
  double r_over_s = 0;
  if (ix < 0x4006db6eu)  // |x| < 1/0.35
    r_over_s = fdlibm_erf_poly(fdlibm_erf_ra, s) / fdlibm_erf_poly1(fdlibm_erf_sa, s);
  else
    r_over_s = fdlibm_erf_poly(fdlibm_erf_rb, s) / fdlibm_erf_poly1(fdlibm_erf_sb, s);
  const double z = std::bit_cast<double>(std::bit_cast<std::uint64_t>(a) & 0xffffffff00000000ull);  // low word 0
  const double r = qkv::exp(-z * z - 0.5625) * qkv::exp((z - a) * (z + a) + r_over_s);
  return x >= 0 ? 1.0 - r / a : r / a - 1.0;
}

[[nodiscard]] constexpr double fdlibm_erf_check(double x) {
  if (is_nan(x)) return x;
  const std::uint32_t ix = static_cast<std::uint32_t>(high_word(x)) & 0x7fffffffu;
  if (ix >= 0x7ff00000u) return x > 0 ? 1.0 : -1.0;  // +-inf
  if (x == 0) return x;                               // +-0, sign kept
  if (ix < 0x3feb0000u) return fdlibm_erf_small(x, ix);       // |x| < 0.84375
  if (ix < 0x3ff40000u) return fdlibm_erf_middle(x);          // |x| < 1.25
  if (ix >= 0x40180000u) return x > 0 ? 1.0 : -1.0;    // |x| >= 6
  return fdlibm_erf_large(x, ix);
}

// float: erf in double, rounded once
[[nodiscard]] constexpr float fdlibm_erf_check(float x) {
  if (is_nan(x)) return x;
  return static_cast<float>(fdlibm_erf_check(static_cast<double>(x)));
}

}  // namespace detail

/// @brief the error function (fdlibm; the fallback until math.hpp's qkv::erf is in main) 2/sqrt(pi) int_0^x e^(-t^2) dt, within 1 ulp; erf(NaN) = NaN,
/// erf(+-0) = +-0, erf(+-inf) = +-1
[[nodiscard]] constexpr double erf_fdlibm(double x) { return detail::fdlibm_erf_check(x); }
[[nodiscard]] constexpr float erf_fdlibm(float x) { return detail::fdlibm_erf_check(x); }

}  // namespace qkv
