// multiprecision.hpp: the reference number types (exact cpp_rational, 50-digit cpp_bin_float_50) and conversions.
//
// The reference path answers "what is the true value of this step?" at run time, so that the
// float and double paths can be judged by their real error rather than by each other:
//   qkv::reference::exact  = boost::multiprecision::cpp_rational: sums and products of float
//                            inputs with no rounding at all (projections, scores, outputs of a
//                            rational softmax);
//   qkv::reference::real   = boost::multiprecision::cpp_bin_float_50: 50 decimal digits (166
//                            bits), for the steps that leave the rationals (exp, sqrt, softmax).
// Neither type is literal, so this path is run time only (docs/design.md, "Toolchain facts"). A
// translation unit that includes it takes 8-13 s to compile: keep such files few.
#pragma once

#include <cmath>
#include <concepts>
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <string>

#include <boost/multiprecision/cpp_bin_float.hpp>
#include <boost/multiprecision/cpp_int.hpp>

#include <qkv/core/matrix.hpp>
#include <qkv/exact/rational.hpp>

namespace qkv::reference {

namespace mp = boost::multiprecision;

/// exact rationals of any size (allocating: run time only)
using exact = mp::cpp_rational;
/// 50 significant decimal digits, binary floating point (run time only)
using real = mp::cpp_bin_float_50;

/// @brief the exact value of a finite float or double: m 2^e as a rational, no rounding.
/// NaN and infinity have none: std::domain_error.
template <std::floating_point F>
[[nodiscard]] exact exact_value(F x) {
  if (!std::isfinite(x)) throw std::domain_error("qkv::reference::exact_value: NaN or infinity");
  if (x == F(0)) return exact(0);
  int e = 0;
  const F m = std::frexp(x, &e);  // x = m 2^e, 0.5 <= |m| < 1
  constexpr int p = std::numeric_limits<F>::digits;
  // m 2^p is an integer of at most p bits (exact: only the exponent changes)
  exact r(static_cast<long long>(std::ldexp(m, p)));
  const int shift = e - p;
  if (shift >= 0)
    r *= exact(mp::cpp_int(1) << shift);
  else
    r /= exact(mp::cpp_int(1) << -shift);
  return r;
}

/// an integer, exactly
template <std::integral I>
[[nodiscard]] exact exact_value(I n) {
  return exact(static_cast<long long>(n));
}

/// a qkv::exact::rational, exactly
template <class Int>
[[nodiscard]] exact exact_value(const qkv::exact::rational<Int>& q) {
  return exact(mp::cpp_int(q.numerator()), mp::cpp_int(q.denominator()));
}

/// @brief a decimal text, exactly: exact_decimal("0.9") is 9/10 (any length: cpp_int)
[[nodiscard]] inline exact exact_decimal(const char* text) {
  const char* p = text;
  bool negative = false;
  if (*p == '+' || *p == '-') negative = (*p++ == '-');
  mp::cpp_int num = 0, den = 1;
  int digits = 0;
  for (; *p >= '0' && *p <= '9'; ++p, ++digits) num = num * 10 + (*p - '0');
  if (*p == '.')
    for (++p; *p >= '0' && *p <= '9'; ++p, ++digits) {
      num = num * 10 + (*p - '0');
      den *= 10;
    }
  if (digits == 0 || *p != '\0')
    throw std::invalid_argument(std::string("qkv::reference::exact_decimal: not a decimal: ") + text);
  return exact(negative ? mp::cpp_int(-num) : num, den);
}

/// element-wise exact values: matrix of float, double, integers or qkv::exact::rational
template <class T, std::size_t R, std::size_t C>
[[nodiscard]] matrix<exact, R, C> exact_matrix(const matrix<T, R, C>& a) {
  matrix<exact, R, C> out;
  for (std::size_t k = 0; k < R * C; ++k) out.v[k] = exact_value(a.v[k]);
  return out;
}

/// a rational as a 50-digit real: numerator / denominator, each exact when it has at most 166
/// bits, then one correctly rounded division
[[nodiscard]] inline real to_real(const exact& q) {
  return real(mp::numerator(q)) / real(mp::denominator(q));
}

/// element-wise to_real
template <std::size_t R, std::size_t C>
[[nodiscard]] matrix<real, R, C> to_real(const matrix<exact, R, C>& a) {
  matrix<real, R, C> out;
  for (std::size_t k = 0; k < R * C; ++k) out.v[k] = to_real(a.v[k]);
  return out;
}

/// element-wise, from float or double: exact (50 digits hold a double's 53 bits)
template <std::floating_point F, std::size_t R, std::size_t C>
[[nodiscard]] matrix<real, R, C> to_real(const matrix<F, R, C>& a) {
  matrix<real, R, C> out;
  for (std::size_t k = 0; k < R * C; ++k) out.v[k] = real(a.v[k]);
  return out;
}

/// element-wise conversion of reference numbers to double, for printing and for bounds
template <class T, std::size_t R, std::size_t C>
  requires(std::same_as<T, real> || std::same_as<T, exact>)
[[nodiscard]] matrix<double, R, C> to_double(const matrix<T, R, C>& a) {
  matrix<double, R, C> out;
  for (std::size_t k = 0; k < R * C; ++k) out.v[k] = static_cast<double>(a.v[k]);
  return out;
}

/// @brief |computed - truth| element by element, in 50 digits: the real error of a float or
/// double result (the subtraction of a float from a 50-digit number is exact or nearly so)
template <std::floating_point F, class T, std::size_t R, std::size_t C>
  requires(std::same_as<T, real> || std::same_as<T, exact>)
[[nodiscard]] matrix<real, R, C> error(const matrix<F, R, C>& computed, const matrix<T, R, C>& truth) {
  matrix<real, R, C> out;
  for (std::size_t k = 0; k < R * C; ++k) {
    real t;
    if constexpr (std::same_as<T, exact>)
      t = to_real(truth.v[k]);
    else
      t = truth.v[k];
    out.v[k] = mp::abs(real(computed.v[k]) - t);
  }
  return out;
}

/// @brief true when every error is within its bound: error(i, j) <= bound(i, j)
template <std::size_t R, std::size_t C>
[[nodiscard]] bool within(const matrix<real, R, C>& err, const matrix<double, R, C>& bound) {
  for (std::size_t k = 0; k < R * C; ++k)
    if (!(err.v[k] <= real(bound.v[k]))) return false;
  return true;
}

}  // namespace qkv::reference
