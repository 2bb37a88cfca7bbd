// fixed_width.hpp: rationals over Boost.Multiprecision's fixed-width integers (q128, q256) and cpp_rational.
//
// boost::multiprecision::int128_t and int256_t are literal types whose arithmetic is constexpr
// in C++20 (g++ 12 and clang 16, Boost 1.74), so rational<int128_t> can be computed by the
// compiler. They hold magnitudes up to 2^128 - 1 and 2^256 - 1 (sign and magnitude).
// Including this header costs about 2-3 s of compile time per translation unit (cpp_int.hpp);
// a program that only needs small fractions can use rational<long long> from rational.hpp.
#pragma once

#include <boost/multiprecision/cpp_int.hpp>

#include "rational.hpp"

namespace qkv::exact {

/// a rational over 128-bit integers: enough for every exact step of the tutorials
using q128 = rational<boost::multiprecision::int128_t>;
/// a rational over 256-bit integers: room for products of float32 values (denominators up to 2^149 each)
using q256 = rational<boost::multiprecision::int256_t>;

/// the same value as Boost's arbitrary-precision cpp_rational (run time only: cpp_rational
/// allocates, so it is not a literal type)
template <class Int>
[[nodiscard]] boost::multiprecision::cpp_rational to_cpp_rational(const rational<Int>& x) {
  return boost::multiprecision::cpp_rational(boost::multiprecision::cpp_int(x.numerator()),
                                             boost::multiprecision::cpp_int(x.denominator()));
}

/// a cpp_rational as rational<Int>; a value that does not fit Int throws std::overflow_error
template <class Int>
[[nodiscard]] rational<Int> from_cpp_rational(const boost::multiprecision::cpp_rational& x) {
  const boost::multiprecision::cpp_int n = boost::multiprecision::numerator(x);
  const boost::multiprecision::cpp_int d = boost::multiprecision::denominator(x);
  const boost::multiprecision::cpp_int max(std::numeric_limits<Int>::max());
  if (n > max || n < -max || d > max) detail::rational_value_does_not_fit_the_integer_type();
  return rational<Int>(static_cast<Int>(n), static_cast<Int>(d));
}

}  // namespace qkv::exact
