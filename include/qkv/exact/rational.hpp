// rational.hpp: qkv::exact::rational<Int>, an exact fraction the compiler can evaluate; overflow is an error.
//
// A rational is num/den with den > 0 and gcd(|num|, den) = 1, so every value has exactly one
// representation and == compares the two integers. Int is a signed integer type with
// std::numeric_limits: long long, or Boost.Multiprecision's fixed-width int128_t / int256_t
// (constexpr in C++20 on g++ 12 and clang 16; exact/fixed_width.hpp names them q128 and q256).
//
// Overflow is detected before it happens, never wrapped: every product and sum is checked
// against the bounds of Int. In a constant expression the check calls a function that is not
// constexpr, so the compiler stops and names it, e.g.
//   g++:   error: call to non-'constexpr' function 'void qkv::exact::detail::
//          rational_multiplication_overflows_the_integer_type()'
//   clang: note: non-constexpr function 'rational_multiplication_overflows_the_integer_type'
//          cannot be used in a constant expression
// At run time the same function fails with std::overflow_error (core/fail.hpp: thrown natively;
// without exceptions, the WebAssembly build of the pages' module, the same message on stderr and
// a trap). Division by zero works the same way (std::domain_error).
//
// This header includes only the standard library (and core/fail.hpp, which does too): it does
// not include Boost, so a program that uses rational<long long> pays nothing for Boost
// (exact/fixed_width.hpp includes it).
#pragma once

// C++20 or nothing: without -std=c++20 a learner would get pages of errors (1,879 lines from
// g++ 12 in C++17 mode); this stops at once with one line. A missing header is a fatal error on
// both compilers (nothing after it is compiled), and its name says what to do.
#if (defined(_MSVC_LANG) ? _MSVC_LANG : __cplusplus) < 202002L
#include <qkv_needs_cxx20__compile_with_std_cxx20__for_example_g++_-std=c++20>
#endif

#include <bit>
#include <compare>
#include <concepts>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "../core/fail.hpp"

namespace qkv::exact {

/// a signed integer type that rational<Int> can be built on: std::numeric_limits describes it,
/// and it has the integer operators (long long, boost::multiprecision::int128_t, int256_t)
template <class Int>
concept exact_integer = std::numeric_limits<Int>::is_specialized && std::numeric_limits<Int>::is_integer &&
                        std::numeric_limits<Int>::is_signed && std::numeric_limits<Int>::is_bounded &&
                        requires(Int a, Int b, int shift) {
                          { a + b } -> std::convertible_to<Int>;
                          { a - b } -> std::convertible_to<Int>;
                          { a* b } -> std::convertible_to<Int>;
                          { a / b } -> std::convertible_to<Int>;
                          { a % b } -> std::convertible_to<Int>;
                          { -a } -> std::convertible_to<Int>;
                          { a >> shift } -> std::convertible_to<Int>;
                          { a << shift } -> std::convertible_to<Int>;
                          { a < b } -> std::convertible_to<bool>;
                          { a == b } -> std::convertible_to<bool>;
                        };

namespace detail {

// Deliberately not constexpr: reaching one of these in a constant expression is the
// compile-time error, and the compiler's message is the function's name. At run time they
// fail (core/fail.hpp: throw natively, trap with the message on stderr without exceptions).
// [[noreturn]] keeps the callers' control flow honest.
[[noreturn]] inline void rational_addition_overflows_the_integer_type() {
  ::qkv::detail::fail<std::overflow_error>(
      "qkv::exact::rational: a sum or difference overflows the integer type");
}
[[noreturn]] inline void rational_multiplication_overflows_the_integer_type() {
  ::qkv::detail::fail<std::overflow_error>("qkv::exact::rational: a product overflows the integer type");
}
[[noreturn]] inline void rational_value_does_not_fit_the_integer_type() {
  ::qkv::detail::fail<std::overflow_error>("qkv::exact::rational: the value does not fit the integer type");
}
[[noreturn]] inline void rational_division_by_zero() {
  ::qkv::detail::fail<std::domain_error>("qkv::exact::rational: division by zero");
}
[[noreturn]] inline void rational_zero_denominator() {
  ::qkv::detail::fail<std::domain_error>("qkv::exact::rational: zero denominator");
}
[[noreturn]] inline void rational_malformed_decimal_literal() {
  ::qkv::detail::fail<std::invalid_argument>(
      "qkv::exact::rational::decimal: expected [+-]digits[.digits][e[+-]digits]");
}
[[noreturn]] inline void rational_malformed_fraction() {
  ::qkv::detail::fail<std::invalid_argument>(
      "qkv::exact::rational::parse: expected a decimal or decimal/decimal, each "
      "[+-]digits[.digits][e[+-]digits]");
}
[[noreturn]] inline void rational_from_a_nan_or_infinity() {
  ::qkv::detail::fail<std::domain_error>("qkv::exact::rational: NaN and infinity have no exact value");
}

// the largest value; every rational keeps num and den within [-max, max], so -x never
// overflows (for long long this excludes LLONG_MIN; Boost's signed-magnitude integers are
// symmetric already)
template <class Int>
[[nodiscard]] constexpr Int max_value() {
  return std::numeric_limits<Int>::max();
}

template <class Int>
[[nodiscard]] constexpr Int abs(const Int& x) {
  return x < Int(0) ? Int(-x) : x;
}

/// the number of significant bits of x > 0 (x = 0 gives 0)
template <class Int>
[[nodiscard]] constexpr int bit_length(const Int& x) {
  if constexpr (std::is_integral_v<Int>) {
    return static_cast<int>(std::bit_width(static_cast<std::make_unsigned_t<Int>>(x)));
  } else if constexpr (requires { msb(x); }) {
    // Boost.Multiprecision: msb is the index of the highest set bit (x must be > 0)
    return x == Int(0) ? 0 : static_cast<int>(msb(x)) + 1;
  } else {
    int n = 0;
    for (Int y = x; y != Int(0); y = y >> 1) ++n;  // a shift by 1 is constexpr in Boost
    return n;
  }
}

/// a + b, both within [-max, max]; overflow is an error
template <class Int>
[[nodiscard]] constexpr Int checked_add(const Int& a, const Int& b) {
  const Int max = max_value<Int>();
  // -max - b cannot overflow for b < 0, nor max - b for b > 0
  if ((Int(0) < b && max - b < a) || (b < Int(0) && a < Int(-max) - b))
    rational_addition_overflows_the_integer_type();
  return a + b;
}

/// a * b, both within [-max, max]; overflow is an error
template <class Int>
[[nodiscard]] constexpr Int checked_mul(const Int& a, const Int& b) {
  if (a == Int(0) || b == Int(0)) return Int(0);
  const Int ma = abs(a), mb = abs(b);
  // fast path: bit lengths that add up to at most digits cannot overflow (2^p 2^q <= 2^digits
  // needs one bit less); otherwise the exact test |a| <= max / |b|
  if (bit_length(ma) + bit_length(mb) > std::numeric_limits<Int>::digits && max_value<Int>() / mb < ma)
    rational_multiplication_overflows_the_integer_type();
  return a * b;
}

/// a % b for b != 0, with the sign of a. For Boost's fixed-width integers it is computed as
/// a - (a / b) b: in Boost 1.74, g++ 12 refuses `%` by a divisor wider than one limb at compile
/// time (divide_unsigned_helper compares a null pointer), while `/` works.
template <class Int>
[[nodiscard]] constexpr Int rem(const Int& a, const Int& b) {
  if constexpr (std::is_integral_v<Int>)
    return a % b;
  else
    return a - (a / b) * b;
}

/// x << k and x >> k for 0 <= k < digits. In Boost 1.74 a shift by a multiple of 8 bits takes a
/// byte-copying path that is not constexpr (clang 16 refuses it), so such a shift is done as
/// two shifts, k - 1 and 1.
template <class Int>
[[nodiscard]] constexpr Int shift_left(const Int& x, int k) {
  if constexpr (!std::is_integral_v<Int>)
    if (k >= 8 && k % 8 == 0) return Int(Int(x << (k - 1)) << 1);
  return x << k;
}
template <class Int>
[[nodiscard]] constexpr Int shift_right(const Int& x, int k) {
  if constexpr (!std::is_integral_v<Int>)
    if (k >= 8 && k % 8 == 0) return Int(Int(x >> (k - 1)) >> 1);
  return x >> k;
}

/// gcd(|a|, |b|), Euclid; gcd(0, 0) = 0
template <class Int>
[[nodiscard]] constexpr Int gcd(Int a, Int b) {
  a = abs(a);
  b = abs(b);
  while (b != Int(0)) {
    Int r = rem(a, b);
    a = b;
    b = r;
  }
  return a;
}

/// an integer of any builtin type as Int, range-checked
template <class Int, std::integral I>
[[nodiscard]] constexpr Int to_int(I n) {
  if constexpr (std::is_integral_v<Int>) {
    // also refuse Int's minimum (outside the symmetric range)
    if (!std::in_range<Int>(n) ||
        (std::is_signed_v<I> && static_cast<Int>(n) == std::numeric_limits<Int>::min()))
      rational_value_does_not_fit_the_integer_type();
    return static_cast<Int>(n);
  } else {
    if constexpr (std::numeric_limits<I>::digits > std::numeric_limits<Int>::digits) {
      // a class-type Int narrower than the builtin (not the case for int128_t and wider)
      if (n > I(0) ? Int(n) > max_value<Int>() : Int(n) < Int(-max_value<Int>()))
        rational_value_does_not_fit_the_integer_type();
    }
    return Int(n);
  }
}

}  // namespace detail

/// @brief An exact fraction num/den over the signed integer type Int, usable in constant expressions.
/// Invariants: den > 0, gcd(|num|, den) = 1, zero is 0/1; num and den within [-max, max].
/// Every operation checks for overflow and division by zero (see the top of the file).
/// @tparam Int  long long, boost::multiprecision::int128_t or int256_t (see exact_integer)
template <exact_integer Int>
class rational {
 public:
  using integer_type = Int;

  /// zero
  constexpr rational() = default;

  /// an integer n, as n/1. Implicit, so matrix<rational, R, C>{{{1, 0}, {0, 2}}} reads like
  /// the same matrix of doubles.
  template <std::integral I>
  constexpr rational(I n) : num_(detail::to_int<Int>(n)) {}  // NOLINT: implicit on purpose
  constexpr rational(const Int& n)                           // NOLINT: implicit on purpose
    requires(!std::is_integral_v<Int>)
      : num_(n) {
    if (num_ < Int(-detail::max_value<Int>())) detail::rational_value_does_not_fit_the_integer_type();
  }

  /// n/d, normalised: rational(6, -4) is -3/2. d = 0 is an error.
  constexpr rational(const Int& n, const Int& d) : num_(n), den_(d) {
    if (den_ == Int(0)) detail::rational_zero_denominator();
    normalise();
  }
  template <std::integral I, std::integral J>
    requires(!std::same_as<I, Int> || !std::same_as<J, Int>)
  constexpr rational(I n, J d) : rational(detail::to_int<Int>(n), detail::to_int<Int>(d)) {}

  /// @brief the exact value of a decimal literal: decimal("0.9") is 9/10, decimal("-1.5e-3") is
  /// -3/2000. Grammar: [+-]digits[.digits][(e|E)[+-]digits]. Malformed text and values that do
  /// not fit Int are errors (at compile time: not a constant expression).
  [[nodiscard]] static constexpr rational decimal(const char* text) {
    return decimal_between(text, text + std::char_traits<char>::length(text));
  }

  /// @brief what a learner types for an exact number (the pages' editor, wasm/qkv_wasm.cpp): a
  /// decimal literal as decimal() reads it, or two of them with a '/' between, their exact
  /// quotient: parse("3/2") is 3/2, parse("0.9") 9/10, parse("-1.5e-3") -3/2000, parse("1/0.3")
  /// 10/3. No spaces. A zero denominator, malformed text and values that do not fit Int are
  /// errors (decimal()'s messages; "1/2/3", "/2" and "2/" are malformed fractions).
  [[nodiscard]] static constexpr rational parse(const char* text) {
    const char* end = text + std::char_traits<char>::length(text);
    const char* slash = text;
    while (slash != end && *slash != '/') ++slash;
    if (slash == end) return decimal_between(text, end);
    if (slash == text || slash + 1 == end) detail::rational_malformed_fraction();
    for (const char* p = slash + 1; p != end; ++p)
      if (*p == '/') detail::rational_malformed_fraction();
    const rational n = decimal_between(text, slash), d = decimal_between(slash + 1, end);
    if (d.num_ == Int(0)) detail::rational_zero_denominator();
    return n / d;
  }

  /// @brief the exact value of a binary floating-point number: every finite float or double is
  /// a dyadic rational m 2^e. exactly(0.1f) is 13421773/134217728. A value that needs more bits
  /// than Int has is an error; so are NaN and infinity.
  template <std::floating_point F>
    requires(std::numeric_limits<F>::is_iec559 && (sizeof(F) == 4 || sizeof(F) == 8))
  [[nodiscard]] static constexpr rational exactly(F x) {
    using bits_type = std::conditional_t<sizeof(F) == 4, std::uint32_t, std::uint64_t>;
    constexpr int mantissa_bits = std::numeric_limits<F>::digits - 1;        // 23 or 52 stored bits
    constexpr int exponent_bias = std::numeric_limits<F>::max_exponent - 1;  // 127 or 1023
    constexpr bits_type exponent_mask = (bits_type(1) << (sizeof(F) * 8 - 1 - mantissa_bits)) - 1;
    const bits_type bits = std::bit_cast<bits_type>(x);
    const bool negative = (bits >> (sizeof(F) * 8 - 1)) != 0;
    const int biased = static_cast<int>((bits >> mantissa_bits) & exponent_mask);
    std::uint64_t m = bits & ((bits_type(1) << mantissa_bits) - 1);
    if (biased == static_cast<int>(exponent_mask)) detail::rational_from_a_nan_or_infinity();
    // value = m 2^e: subnormals have no implicit bit and the exponent of the smallest normal
    int e = 1 - exponent_bias - mantissa_bits;
    if (biased != 0) {
      m |= std::uint64_t(1) << mantissa_bits;
      e = biased - exponent_bias - mantissa_bits;
    }
    if (m == 0) return rational();
    // strip trailing zero bits: the fraction is then already in lowest terms
    while ((m & 1) == 0) {
      m >>= 1;
      ++e;
    }
    constexpr int digits = std::numeric_limits<Int>::digits;  // Int holds up to 2^digits - 1
    const int m_bits = static_cast<int>(std::bit_width(m));
    Int num = detail::to_int<Int>(m);
    Int den(1);
    if (e >= 0) {
      if (m_bits + e > digits) detail::rational_value_does_not_fit_the_integer_type();
      num = detail::shift_left(num, e);
    } else {
      if (-e >= digits) detail::rational_value_does_not_fit_the_integer_type();
      den = detail::shift_left(den, -e);
    }
    rational r;
    r.num_ = negative ? Int(-num) : num;
    r.den_ = den;
    return r;
  }

  /// the exact value of a float or double, as exactly(x); explicit, so that
  /// qkv::matrix_cast<rational<Int>>(m) converts a float matrix exactly while no float turns
  /// into a rational silently
  template <std::floating_point F>
    requires(std::numeric_limits<F>::is_iec559 && (sizeof(F) == 4 || sizeof(F) == 8))
  explicit constexpr rational(F x) : rational(exactly(x)) {}

  [[nodiscard]] constexpr const Int& numerator() const { return num_; }
  [[nodiscard]] constexpr const Int& denominator() const { return den_; }
  [[nodiscard]] constexpr bool is_integer() const { return den_ == Int(1); }

  // --- arithmetic: every intermediate checked, results normalised ----------------------------

  [[nodiscard]] constexpr rational operator+() const { return *this; }
  [[nodiscard]] constexpr rational operator-() const {
    rational r = *this;
    r.num_ = -r.num_;  // safe: num is within [-max, max]
    return r;
  }

  /// a/b + c/d, with Knuth's gcd trick (TAOCP 4.5.1) so that intermediates stay small:
  /// g = gcd(b, d), t = a (d/g) + c (b/g), then divide t and the denominator by gcd(t, g)
  [[nodiscard]] friend constexpr rational operator+(const rational& x, const rational& y) {
    if (x.num_ == Int(0)) return y;
    if (y.num_ == Int(0)) return x;
    rational r;
    const Int g = detail::gcd(x.den_, y.den_);
    if (g == Int(1)) {
      r.num_ = detail::checked_add(detail::checked_mul(x.num_, y.den_), detail::checked_mul(y.num_, x.den_));
      r.den_ = detail::checked_mul(x.den_, y.den_);
      return r;  // already in lowest terms when the denominators are coprime
    }
    const Int t = detail::checked_add(detail::checked_mul(x.num_, Int(y.den_ / g)),
                                      detail::checked_mul(y.num_, Int(x.den_ / g)));
    if (t == Int(0)) return rational();
    const Int g2 = detail::gcd(t, g);
    r.num_ = t / g2;
    r.den_ = detail::checked_mul(Int(x.den_ / g), Int(y.den_ / g2));
    return r;
  }
  [[nodiscard]] friend constexpr rational operator-(const rational& x, const rational& y) { return x + (-y); }

  /// a/b * c/d = (a/g1 * c/g2) / (b/g2 * d/g1) with g1 = gcd(a, d), g2 = gcd(c, b): cancelling
  /// first keeps the products as small as the result
  [[nodiscard]] friend constexpr rational operator*(const rational& x, const rational& y) {
    if (x.num_ == Int(0) || y.num_ == Int(0)) return rational();
    const Int g1 = detail::gcd(x.num_, y.den_);
    const Int g2 = detail::gcd(y.num_, x.den_);
    rational r;
    r.num_ = detail::checked_mul(Int(x.num_ / g1), Int(y.num_ / g2));
    r.den_ = detail::checked_mul(Int(x.den_ / g2), Int(y.den_ / g1));
    return r;
  }

  /// x / y = x * (1 / y); y = 0 is an error
  [[nodiscard]] friend constexpr rational operator/(const rational& x, const rational& y) {
    return x * y.reciprocal();
  }

  /// 1 / x; x = 0 is an error
  [[nodiscard]] constexpr rational reciprocal() const {
    if (num_ == Int(0)) detail::rational_division_by_zero();
    rational r;
    r.num_ = num_ < Int(0) ? Int(-den_) : den_;
    r.den_ = detail::abs(num_);
    return r;
  }

  constexpr rational& operator+=(const rational& y) { return *this = *this + y; }
  constexpr rational& operator-=(const rational& y) { return *this = *this - y; }
  constexpr rational& operator*=(const rational& y) { return *this = *this * y; }
  constexpr rational& operator/=(const rational& y) { return *this = *this / y; }

  // --- comparisons ------------------------------------------------------------------------

  /// normalised, so equal values have equal numerators and denominators
  [[nodiscard]] friend constexpr bool operator==(const rational& x, const rational& y) {
    return x.num_ == y.num_ && x.den_ == y.den_;
  }

  /// ordering without the cross products a d and c b (which could overflow): compare the
  /// integer parts, then the remainders' reciprocals, as in a continued fraction expansion
  [[nodiscard]] friend constexpr std::strong_ordering operator<=>(const rational& x, const rational& y) {
    const int sx = x.sign(), sy = y.sign();
    if (sx != sy) return sx <=> sy;
    if (sx == 0) return std::strong_ordering::equal;
    if (sx < 0) return compare_positive(y.den_, Int(-y.num_), x.den_, Int(-x.num_), true);
    return compare_positive(x.den_, x.num_, y.den_, y.num_, true);
  }

  /// -1, 0 or 1
  [[nodiscard]] constexpr int sign() const { return num_ < Int(0) ? -1 : (num_ == Int(0) ? 0 : 1); }

  // --- conversion to floating point -------------------------------------------------------

  /// @brief the float or double nearest to the exact value (IEEE round to nearest, ties to
  /// even), including subnormals; a value beyond the largest finite one gives infinity.
  /// This is correctly rounded: static_cast<float>(rational(39, 5)) is 7.7999997f, the float
  /// nearest to 7.8, exactly what 39.0f / 5.0f gives.
  template <std::floating_point F>
  [[nodiscard]] constexpr F to() const {
    if (num_ == Int(0)) return F(0);
    const F magnitude = to_positive<F>(detail::abs(num_), den_);
    return num_ < Int(0) ? -magnitude : magnitude;
  }
  template <std::floating_point F>
  [[nodiscard]] explicit constexpr operator F() const {
    return to<F>();
  }

  /// a stream of anything that prints Int (std::ostream with a Boost integer or long long):
  /// "39/5", "-3/2", "7" for an integer. A template, so this header needs no <ostream>.
  template <class Ostream>
    requires requires(Ostream& os, const Int& n) {
      os << n;
      os << '/';
    }
  friend Ostream& operator<<(Ostream& os, const rational& x) {
    os << x.num_;
    if (x.den_ != Int(1)) os << '/' << x.den_;
    return os;
  }

 private:
  Int num_{0};
  Int den_{1};

  constexpr void normalise() {
    // keep the sign in the numerator; den is within [-max, max] so -den is safe
    if (den_ < Int(0)) {
      num_ = -num_;
      den_ = -den_;
    }
    if (num_ == Int(0)) {
      den_ = Int(1);
      return;
    }
    const Int g = detail::gcd(num_, den_);
    if (g != Int(1)) {
      num_ /= g;
      den_ /= g;
    }
  }

  /// decimal()'s grammar over [p, end)
  [[nodiscard]] static constexpr rational decimal_between(const char* p, const char* end) {
    bool negative = false;
    if (p != end && (*p == '+' || *p == '-')) negative = (*p++ == '-');
    Int num(0), den(1);
    int digits = 0;
    const Int ten(10);
    for (; p != end && *p >= '0' && *p <= '9'; ++p, ++digits)
      num = detail::checked_add(detail::checked_mul(num, ten), Int(*p - '0'));
    if (p != end && *p == '.') {
      for (++p; p != end && *p >= '0' && *p <= '9'; ++p, ++digits) {
        num = detail::checked_add(detail::checked_mul(num, ten), Int(*p - '0'));
        den = detail::checked_mul(den, ten);
      }
    }
    if (digits == 0) detail::rational_malformed_decimal_literal();
    if (p != end && (*p == 'e' || *p == 'E')) {
      ++p;
      bool negative_exponent = false;
      if (p != end && (*p == '+' || *p == '-')) negative_exponent = (*p++ == '-');
      if (!(p != end && *p >= '0' && *p <= '9')) detail::rational_malformed_decimal_literal();
      int e = 0;
      for (; p != end && *p >= '0' && *p <= '9'; ++p) {
        e = e * 10 + (*p - '0');
        if (e > 100000) detail::rational_value_does_not_fit_the_integer_type();
      }
      if (p != end) detail::rational_malformed_decimal_literal();
      // 10^e as a rational multiplies either side; normalise() then removes common factors.
      // Reduce first so that "1.50e2" does not overflow where 150 fits.
      rational r(negative ? Int(-num) : num, den);
      const rational scale = power_of_ten(e);
      return negative_exponent ? r / scale : r * scale;
    }
    if (p != end) detail::rational_malformed_decimal_literal();
    return rational(negative ? Int(-num) : num, den);
  }

  [[nodiscard]] static constexpr rational power_of_ten(int e) {
    rational r(1), ten(10);
    for (int i = 0; i < e; ++i) r *= ten;
    return r;
  }

  // compare a/b with c/d, all four > 0 except that a remainder may be 0 (handled);
  // `forward` flips each time the fractions are turned upside down. The arguments are
  // (den, num) pairs: compares num1/den1 with num2/den2.
  [[nodiscard]] static constexpr std::strong_ordering compare_positive(Int b, Int a, Int d, Int c,
                                                                       bool forward) {
    for (;;) {
      if (b == d) {
        const auto o = a == c ? std::strong_ordering::equal
                              : (a < c ? std::strong_ordering::less : std::strong_ordering::greater);
        return forward ? o : 0 <=> o;
      }
      const Int q1 = a / b, q2 = c / d;
      const Int r1 = a - q1 * b, r2 = c - q2 * d;
      if (q1 != q2) {
        const auto o = q1 < q2 ? std::strong_ordering::less : std::strong_ordering::greater;
        return forward ? o : 0 <=> o;
      }
      if (r1 == Int(0) || r2 == Int(0)) {
        const auto o = r1 == r2 ? std::strong_ordering::equal
                                : (r1 == Int(0) ? std::strong_ordering::less : std::strong_ordering::greater);
        return forward ? o : 0 <=> o;
      }
      // r1/b vs r2/d has the opposite order of b/r1 vs d/r2
      a = b;
      b = r1;
      c = d;
      d = r2;
      forward = !forward;
    }
  }

  // a/b > 0 rounded to F: long division gives 64 significant bits plus a sticky bit, then one
  // rounding to F's precision (narrower for subnormals), then an exact scaling by 2^k
  template <std::floating_point F>
  [[nodiscard]] static constexpr F to_positive(const Int& a, const Int& b) {
    using u64 = std::uint64_t;
    constexpr u64 top = u64(1) << 63;
    const Int q = a / b;
    Int r = a - q * b;
    u64 m = 0;  // value ~ m 2^e
    int e = 0;
    bool sticky = false;
    // the next binary digit of r/b (r < b), without forming 2r (which could overflow)
    auto next_bit = [&b](Int& rem) -> u64 {
      if (b - rem <= rem) {
        rem = rem - (b - rem);
        return 1;
      }
      rem = rem + rem;
      return 0;
    };
    const int n = detail::bit_length(q);
    if (n > 64) {
      const Int high = detail::shift_right(q, n - 64);
      m = static_cast<u64>(high);
      sticky = detail::shift_left(high, n - 64) != q || r != Int(0);
      e = n - 64;
    } else {
      m = n > 0 ? static_cast<u64>(q) : 0;
      while (m < top) {
        m = (m << 1) | next_bit(r);
        --e;
      }
      sticky = r != Int(0);
    }
    // now m in [2^63, 2^64): the leading bit has exponent lead = e + 63
    constexpr int precision = std::numeric_limits<F>::digits;             // 24 or 53
    constexpr int min_normal = std::numeric_limits<F>::min_exponent - 1;  // -126 or -1022
    constexpr int max_exp = std::numeric_limits<F>::max_exponent - 1;     // 127 or 1023
    const int lead = e + 63;
    if (lead > max_exp) return std::numeric_limits<F>::infinity();
    // bits kept: fewer below the normal range (gradual underflow), so one rounding only
    const int keep = lead >= min_normal ? precision : precision - (min_normal - lead);
    if (keep < 0) return F(0);   // below half the smallest subnormal
    const int drop = 64 - keep;  // 11..64 bits dropped
    u64 kept = drop >= 64 ? 0 : m >> drop;
    const u64 rest = drop >= 64 ? m : m & ((u64(1) << drop) - 1);
    const u64 half = u64(1) << (drop - 1);
    if (rest > half || (rest == half && (sticky || (kept & 1) != 0))) ++kept;
    // rounding up may carry into a new leading bit (kept = 2^keep): past the largest finite value?
    if (lead == max_exp && (kept >> keep) != 0) return std::numeric_limits<F>::infinity();
    // scale kept 2^(e + drop) exactly: every intermediate is a multiple of the result
    F x = static_cast<F>(kept);
    int k = e + drop;
    for (; k > 0; k -= (k > 60 ? 60 : k)) x *= static_cast<F>(u64(1) << (k > 60 ? 60 : k));
    for (; k < 0; k += (-k > 60 ? 60 : -k)) x /= static_cast<F>(u64(1) << (-k > 60 ? 60 : -k));
    return x;
  }
};

/// |x|
template <class Int>
[[nodiscard]] constexpr rational<Int> abs(const rational<Int>& x) {
  return x.sign() < 0 ? -x : x;
}

/// the largest integer <= x, as a rational
template <class Int>
[[nodiscard]] constexpr rational<Int> floor(const rational<Int>& x) {
  Int q = x.numerator() / x.denominator();  // truncates toward zero
  if (x.numerator() < Int(0) && q * x.denominator() != x.numerator()) q = q - Int(1);
  return rational<Int>(q, Int(1));
}

/// decimal<Int>("0.9") = rational<Int>::decimal("0.9")
template <class Int>
[[nodiscard]] constexpr rational<Int> decimal(const char* text) {
  return rational<Int>::decimal(text);
}

}  // namespace qkv::exact
