// check.hpp: compile-time proofs whose failure prints the position and the numbers.
//
//   static_assert(qkv::proven<qkv::check::near(w(0, 1), 0.2, 1e-6)>);
//
// A check (equal, near, within; on a scalar, a matrix or a stack) returns a verdict: whether it
// holds and, when it does not, a message naming the first failing element's position, the
// actual value, the expected value and the tolerance or bound. qkv::proven<verdict> is true
// when the verdict holds; when it does not, each compiler prints the numbers (measured with
// g++ 12 and clang++-16; docs/proofs.md shows the real output and tests/compile_fail/ keeps it
// true):
//   - g++ prints the value of a class-type template argument in full, strings included, so the
//     verdict, message and all, appears in "In instantiation of 'struct qkv::proof<
//     qkv::check::verdict{false, {"row 1, col 1: actual 27.0625 (0x1.b1p+4), expected 27.5"}}>'";
//   - clang prints the evaluated arguments of a constexpr function on the failing path, so on
//     clang a failing check stops the evaluation in a function named after its arguments:
//     "in call to 'failed_at_row_col_actual_expected(1, 1, 2.706250e+01, 2.750000e+01)'", and
//     for a float or double one more call with the actual value's round-trip digits:
//     "in call to 'actual_is_digits_times_ten_to(270625, -4)'".
//
// Numbers in the message are the shortest decimal that reads back to the same value, in the
// type they were compared in, and the actual value also as a hexadecimal float (its exact bits;
// C++ reads 0x1.b1p+4f back). Mixed float and double arguments are compared in double: a float
// converts to double exactly, so nothing of the float is lost, and the message shows the
// float's whole value (near(0.107f, 0.107, 1e-9) fails: 0.107f is 0.10700000077486038).
//
// static_assert(check::near(...)) alone compiles when the check holds (a verdict converts to
// bool); when it fails, the conversion calls a function that is not constexpr, whose name both
// compilers print: "static_assert_of_a_failed_check_without_proven__write_static_assert_qkv_
// proven_check_to_see_the_position_and_numbers" (issue 28: not a bare "static assertion failed").
// The numbers themselves need qkv::proven<...>.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "matrix.hpp"

namespace qkv::check {

/// the text of a failed check: a position and four numbers fit with room to spare
struct message {
  char text[240]{};
};

/// Not constexpr on purpose: a failing verdict converted to bool during constant evaluation
/// (`static_assert(check::equal(...))`, the natural first try) calls it, so that the static_assert
/// is not a constant expression and both compilers print this name instead of a bare "static
/// assertion failed". At run time it is never called.
void static_assert_of_a_failed_check_without_proven__write_static_assert_qkv_proven_check_to_see_the_position_and_numbers();

/// @brief the result of a check: holds, or the first failure's position and numbers in `why`.
/// A structural type, so it can be a template argument (qkv::proven<verdict>).
struct verdict {
  bool holds = true;
  message why{};
  // NOLINTNEXTLINE: static_assert(check::equal(...)) holds when the check holds, and names proven when it fails
  constexpr operator bool() const {
    if (!holds && std::is_constant_evaluated())
      static_assert_of_a_failed_check_without_proven__write_static_assert_qkv_proven_check_to_see_the_position_and_numbers();
    return holds;
  }
};

/// the first failing verdict of two (both checks are evaluated)
[[nodiscard]] constexpr verdict operator&&(const verdict& a, const verdict& b) { return a.holds ? b : a; }
/// a check joined with a plain condition: a false condition fails with that message
[[nodiscard]] constexpr verdict operator&&(const verdict& a, bool b) {
  if (!a.holds || b) return a;
  verdict v{false, {}};
  const char t[] = "a condition joined to a check with && is false";
  for (std::size_t k = 0; k < sizeof t; ++k) v.why.text[k] = t[k];
  return v;
}
[[nodiscard]] constexpr verdict operator&&(bool a, const verdict& b) { return b && a; }

namespace detail {

// ---------------------------------------------------------------------------------------------
// text

struct writer {
  message m{};
  std::size_t n = 0;
  constexpr void put(char c) {
    if (n + 1 < sizeof m.text) m.text[n++] = c;
  }
  constexpr void put(const char* s) {
    while (*s) put(*s++);
  }
  constexpr void put_unsigned(std::uint64_t x) {
    char d[24]{};
    int k = 0;
    do d[k++] = char('0' + x % 10);
    while ((x /= 10) != 0);
    while (k > 0) put(d[--k]);
  }
  constexpr void put_signed(std::int64_t x) {
    if (x < 0) put('-');
    put_unsigned(x < 0 ? std::uint64_t(0) - std::uint64_t(x) : std::uint64_t(x));
  }
};

// ---------------------------------------------------------------------------------------------
// a binary floating value as the shortest decimal that reads back to it.
// Exact arithmetic: M 2^E is written out in full as a decimal (a big integer in base 1e9 times
// M 5^-E when E < 0), and so are the midpoints to its two neighbours; the shortest decimal
// strictly between the midpoints is the answer (the rule of Steele & White / printf's %.17g
// made shortest). Only a failing check formats a number, so a passing proof costs nothing.

/// d[0..len) are the significant digits, value = 0.d[0]d[1]... x 10^(point)
struct decimal {
  char d[800]{};
  int len = 0;
  int point = 0;
};

constexpr decimal exact_decimal(std::uint64_t m, int e) {
  constexpr std::uint32_t base = 1000000000u;
  std::uint32_t limb[96]{};
  int n = 0;
  for (std::uint64_t x = m; x != 0; x /= base) limb[n++] = std::uint32_t(x % base);
  auto multiply = [&](std::uint32_t f) {
    std::uint64_t carry = 0;
    for (int i = 0; i < n; ++i) {
      const std::uint64_t x = std::uint64_t(limb[i]) * f + carry;
      limb[i] = std::uint32_t(x % base);
      carry = x / base;
    }
    while (carry != 0) {
      limb[n++] = std::uint32_t(carry % base);
      carry /= base;
    }
  };
  for (int k = e; k > 0; k -= 29) multiply(std::uint32_t(1) << (k < 29 ? k : 29));
  for (int k = -e; k > 0; k -= 13) {
    std::uint32_t f = 1;
    for (int i = 0; i < (k < 13 ? k : 13); ++i) f *= 5;
    multiply(f);
  }
  decimal out;
  for (int i = n - 1; i >= 0; --i) {
    char g[9]{};
    std::uint32_t x = limb[i];
    for (int j = 8; j >= 0; --j, x /= 10) g[j] = char('0' + x % 10);
    for (int j = 0; j < 9; ++j)
      if (out.len > 0 || g[j] != '0') out.d[out.len++] = g[j];
  }
  // value = digits x 10^(e < 0 ? e : 0); as 0.digits: point = len + that
  out.point = out.len + (e < 0 ? e : 0);
  while (out.len > 0 && out.d[out.len - 1] == '0') --out.len;
  return out;
}

/// a < b for positive decimals
constexpr bool less(const decimal& a, const decimal& b) {
  if (a.point != b.point) return a.point < b.point;
  const int n = a.len > b.len ? a.len : b.len;
  for (int i = 0; i < n; ++i) {
    const char x = i < a.len ? a.d[i] : '0', y = i < b.len ? b.d[i] : '0';
    if (x != y) return x < y;
  }
  return false;
}

/// x rounded to p significant digits, half up
constexpr decimal rounded(const decimal& x, int p) {
  decimal r = x;
  if (r.len <= p) return r;
  const bool up = r.d[p] >= '5';
  r.len = p;
  if (up) {
    int i = p - 1;
    while (i >= 0 && r.d[i] == '9') r.d[i--] = '0';
    if (i < 0) {
      r.d[0] = '1';
      r.len = 1;
      ++r.point;
    } else {
      ++r.d[i];
    }
  }
  while (r.len > 0 && r.d[r.len - 1] == '0') --r.len;
  return r;
}

/// the shortest decimal inside the rounding interval of m 2^e (a float of Bits mantissa bits,
/// smallest exponent EMin)
constexpr decimal shortest(std::uint64_t m, int e, int bits, int emin) {
  const decimal x = exact_decimal(m, e);
  const decimal hi = exact_decimal(2 * m + 1, e - 1);
  const bool boundary = m == (std::uint64_t(1) << (bits - 1)) && e > emin;
  const decimal lo = boundary ? exact_decimal(4 * m - 1, e - 2) : exact_decimal(2 * m - 1, e - 1);
  for (int p = 1; p < 17; ++p) {
    const decimal c = rounded(x, p);
    if (less(lo, c) && less(c, hi)) return c;
  }
  return rounded(x, 17);
}

constexpr void put_decimal(writer& w, const decimal& x) {
  const int k = x.point - 1;  // the power of ten of the first digit
  if (k >= -4 && k < 17) {
    if (k < 0) {
      w.put("0.");
      for (int i = 0; i < -k - 1; ++i) w.put('0');
      for (int i = 0; i < x.len; ++i) w.put(x.d[i]);
      return;
    }
    for (int i = 0; i <= k; ++i) w.put(i < x.len ? x.d[i] : '0');
    if (x.len > k + 1) {
      w.put('.');
      for (int i = k + 1; i < x.len; ++i) w.put(x.d[i]);
    }
    return;
  }
  w.put(x.d[0]);
  if (x.len > 1) {
    w.put('.');
    for (int i = 1; i < x.len; ++i) w.put(x.d[i]);
  }
  w.put(k < 0 ? "e-" : "e+");
  const int a = k < 0 ? -k : k;
  if (a < 10) w.put('0');
  w.put_unsigned(std::uint64_t(a));
}

/// the parts of a float or double: sign, mantissa m, exponent e (value m 2^e), and its layout
struct float_parts {
  bool negative = false, infinite = false, nan = false;
  std::uint64_t m = 0;
  int e = 0, bits = 0, emin = 0, hex_digits = 0;
};

template <class F>
constexpr float_parts parts(F x) {
  float_parts p;
  if constexpr (sizeof(F) == 4) {
    const auto b = std::bit_cast<std::uint32_t>(x);
    const int ex = int((b >> 23) & 0xff);
    p.negative = (b >> 31) != 0;
    p.m = b & 0x7fffffu;
    p.infinite = ex == 0xff && p.m == 0;
    p.nan = ex == 0xff && p.m != 0;
    p.bits = 24;
    p.emin = -149;
    p.hex_digits = 6;  // 23 bits shown as 24
    if (ex != 0) p.m |= std::uint64_t(1) << 23;
    p.e = ex == 0 ? -149 : ex - 150;
  } else {
    const auto b = std::bit_cast<std::uint64_t>(x);
    const int ex = int((b >> 52) & 0x7ff);
    p.negative = (b >> 63) != 0;
    p.m = b & ((std::uint64_t(1) << 52) - 1);
    p.infinite = ex == 0x7ff && p.m == 0;
    p.nan = ex == 0x7ff && p.m != 0;
    p.bits = 53;
    p.emin = -1074;
    p.hex_digits = 13;
    if (ex != 0) p.m |= std::uint64_t(1) << 52;
    p.e = ex == 0 ? -1074 : ex - 1075;
  }
  return p;
}

/// x as the shortest decimal that reads back to the same float or double
template <class F>
constexpr void put_float(writer& w, F x) {
  const float_parts p = parts(x);
  if (p.nan) return w.put("nan");
  if (p.negative) w.put('-');
  if (p.infinite) return w.put("inf");
  if (p.m == 0) return w.put('0');
  put_decimal(w, shortest(p.m, p.e, p.bits, p.emin));
}

/// x as C's %a: 0x1.b1p+4 (a subnormal as 0x0.8p-126 / 0x0.8p-1022), the exact bits
template <class F>
constexpr void put_hex(writer& w, F x) {
  const float_parts p = parts(x);
  if (p.nan || p.infinite) return put_float(w, x);
  if (p.negative) w.put('-');
  if (p.m == 0) return w.put("0x0p+0");
  const bool normal = p.m >> (p.bits - 1) != 0;
  w.put(normal ? "0x1" : "0x0");
  // the fraction bits, left-aligned to a whole number of hexadecimal digits
  std::uint64_t f = p.m & ((std::uint64_t(1) << (p.bits - 1)) - 1);
  f <<= 4 * p.hex_digits - (p.bits - 1);
  int digits = p.hex_digits;
  while (digits > 0 && (f & 0xf) == 0) {
    f >>= 4;
    --digits;
  }
  if (digits > 0) {
    w.put('.');
    for (int i = digits - 1; i >= 0; --i) w.put("0123456789abcdef"[(f >> (4 * i)) & 0xf]);
  }
  const int ex = normal ? p.e + p.bits - 1 : p.emin + p.bits - 1;
  w.put(ex < 0 ? "p-" : "p+");
  w.put_unsigned(std::uint64_t(ex < 0 ? -ex : ex));
}

template <class T>
concept binary_float =
    std::is_floating_point_v<T> && (sizeof(T) == 4 || sizeof(T) == 8) && std::numeric_limits<T>::is_iec559;

template <class T>
concept fraction = requires(const T& x) {
  x.numerator();
  x.denominator();
};

/// an integer of any type with %, / and comparisons (int, long long, boost's int128_t)
template <class I>
constexpr void put_integer(writer& w, const I& x) {
  char d[96]{};
  int k = 0;
  I v = x;
  const bool negative = v < I(0);
  do {
    int digit = static_cast<int>(v % I(10));
    d[k++] = char('0' + (digit < 0 ? -digit : digit));
    v = v / I(10);
  } while (!(v == I(0)) && k < 95);
  if (negative) w.put('-');
  while (k > 0) w.put(d[--k]);
}

template <class T>
constexpr void put_value(writer& w, const T& x) {
  if constexpr (binary_float<T>) {
    put_float(w, x);
  } else if constexpr (std::is_floating_point_v<T>) {
    put_float(w, static_cast<double>(x));
  } else if constexpr (std::is_same_v<T, bool>) {
    w.put(x ? "true" : "false");
  } else if constexpr (std::is_integral_v<T>) {
    put_integer(w, x);
  } else if constexpr (fraction<T>) {
    put_integer(w, x.numerator());
    if (!(x.denominator() == decltype(x.denominator())(1))) {
      w.put('/');
      put_integer(w, x.denominator());
    }
  } else {
    w.put("(a value qkv cannot print)");
  }
}

/// the actual value: its number, and for a float or double also its exact bits in hexadecimal
template <class T>
constexpr void put_actual(writer& w, const T& x) {
  put_value(w, x);
  if constexpr (binary_float<T>) {
    const float_parts p = parts(x);
    if (!p.nan && !p.infinite) {
      w.put(" (");
      put_hex(w, x);
      if constexpr (sizeof(T) == 4) w.put('f');
      w.put(')');
    }
  }
}

// ---------------------------------------------------------------------------------------------
// where a check fails

struct where {
  int dims = 0;  // 0 scalar, 2 matrix, 3 stack
  std::size_t depth = 0, row = 0, col = 0;
};

enum class rule { equal, near, within };

#if defined(__clang__)
// clang prints the evaluated arguments of each constexpr call on the failing path (arguments
// passed by value; a reference prints as its name). These functions exist to be that path,
// and their names say what the arguments are.
inline void a_qkv_proof_failed() {}

/// the shortest decimal of x as an integer and a power of ten: 27.0625 is (270625, -4)
template <class T>
constexpr std::uint64_t round_trip_digits(T x) {
  const float_parts p = parts(x);
  if (p.nan || p.infinite || p.m == 0) return 0;
  const decimal d = shortest(p.m, p.e, p.bits, p.emin);
  std::uint64_t digits = 0;
  for (int i = 0; i < d.len; ++i) digits = digits * 10 + std::uint64_t(d.d[i] - '0');
  return digits;
}
template <class T>
constexpr int round_trip_exponent(T x) {
  const float_parts p = parts(x);
  if (p.nan || p.infinite || p.m == 0) return 0;
  const decimal d = shortest(p.m, p.e, p.bits, p.emin);
  return d.point - d.len;
}

/// the actual value's magnitude, exactly: digits x 10^exponent
constexpr void actual_is_digits_times_ten_to(std::uint64_t, int) {
  if (std::is_constant_evaluated()) a_qkv_proof_failed();
}

/// the expected value's magnitude, exactly, around the actual one's: clang prints the values of
/// the failing call's arguments with 7 digits (a float 0.3f and the double 0.3 both look like
/// 3.000000e-01), so each is also shown as its shortest round-trip digits (issue 28)
template <class A>
constexpr void expected_is_digits_times_ten_to(std::uint64_t, int, A actual) {
  const float_parts p = parts(actual);
  if (!p.nan && !p.infinite && p.m != 0)
    actual_is_digits_times_ten_to(round_trip_digits(actual), round_trip_exponent(actual));
  if (std::is_constant_evaluated()) a_qkv_proof_failed();
}

template <class A>
constexpr void stop_at(A actual, A expected) {
  if constexpr (binary_float<A>) {
    const float_parts p = parts(actual), q = parts(expected);
    if (!q.nan && !q.infinite && q.m != 0)
      expected_is_digits_times_ten_to(round_trip_digits(expected), round_trip_exponent(expected), actual);
    if (!p.nan && !p.infinite && p.m != 0)
      actual_is_digits_times_ten_to(round_trip_digits(actual), round_trip_exponent(actual));
  }
  if (std::is_constant_evaluated()) a_qkv_proof_failed();
}

template <class C>
constexpr void failed_actual_expected(C a, C e) {
  stop_at(a, e);
}
template <class C>
constexpr void failed_actual_expected_tolerance(C a, C e, C) {
  stop_at(a, e);
}
template <class C>
constexpr void failed_actual_expected_bound(C a, C e, C) {
  stop_at(a, e);
}
template <class C>
constexpr void failed_at_row_col_actual_expected(std::size_t, std::size_t, C a, C e) {
  stop_at(a, e);
}
template <class C>
constexpr void failed_at_row_col_actual_expected_tolerance(std::size_t, std::size_t, C a, C e, C) {
  stop_at(a, e);
}
template <class C>
constexpr void failed_at_row_col_actual_expected_bound(std::size_t, std::size_t, C a, C e, C) {
  stop_at(a, e);
}
template <class C>
constexpr void failed_at_depth_row_col_actual_expected(std::size_t, std::size_t, std::size_t, C a, C e) {
  stop_at(a, e);
}
template <class C>
constexpr void failed_at_depth_row_col_actual_expected_tolerance(std::size_t, std::size_t, std::size_t, C a,
                                                                 C e, C) {
  stop_at(a, e);
}
template <class C>
constexpr void failed_at_depth_row_col_actual_expected_bound(std::size_t, std::size_t, std::size_t, C a, C e,
                                                             C) {
  stop_at(a, e);
}
#endif

template <class T>
constexpr bool is_nan(const T& x) {
  if constexpr (std::is_floating_point_v<T>)
    return x != x;
  else
    return false;
}
template <class T>
constexpr bool is_infinite(const T& x) {
  if constexpr (std::numeric_limits<T>::has_infinity)
    return x == std::numeric_limits<T>::infinity() || x == -std::numeric_limits<T>::infinity();
  else
    return false;
}

/// the verdict of a failed comparison, in the type C it was made in
template <rule R, class A, class C>
constexpr verdict failure(const where& at, const A& actual, const C& a, const C& e, const C& b) {
  writer w;
  if (at.dims == 3) {
    w.put("depth ");
    w.put_unsigned(at.depth);
    w.put(", ");
  }
  if (at.dims >= 2) {
    w.put("row ");
    w.put_unsigned(at.row);
    w.put(", col ");
    w.put_unsigned(at.col);
    w.put(": ");
  }
  w.put("actual ");
  put_actual(w, actual);
  if constexpr (!std::is_same_v<A, C>) {  // a float compared in double: its whole value
    writer as_a, as_c;
    put_value(as_a, actual);
    put_value(as_c, a);
    bool same = as_a.n == as_c.n;
    for (std::size_t k = 0; same && k < as_a.n; ++k) same = as_a.m.text[k] == as_c.m.text[k];
    if (!same) {
      w.put(" = ");
      put_value(w, a);
    }
  }
  w.put(R == rule::equal ? " != expected " : ", expected ");
  put_value(w, e);
  if constexpr (R != rule::equal) {
    if (!is_nan(a) && !is_nan(e) && !is_infinite(a) && !is_infinite(e)) {  // no NaN arithmetic
      w.put(", |actual - expected| ");
      put_value(w, a < e ? C(e - a) : C(a - e));
    }
    w.put(R == rule::near ? " > tolerance " : " > bound ");
    put_value(w, b);
  }
  return verdict{false, w.m};
}

/// C(x) for arithmetic types; for others (rationals) T is C already
template <class C, class T>
constexpr C as(const T& x) {
  if constexpr (std::is_same_v<C, T>)
    return x;
  else
    return static_cast<C>(x);
}

/// |a - e| <= b, in C; never does arithmetic on a NaN or an infinity (clang refuses NaN in a
/// constant expression): equal infinities are within any bound, anything else with a NaN or
/// an infinity is not
template <class C>
constexpr bool close(const C& a, const C& e, const C& b) {
  if (is_nan(a) || is_nan(e) || is_nan(b)) return false;
  if (a == e) return true;
  if (is_infinite(a) || is_infinite(e)) return false;
  return (a < e ? C(e - a) : C(a - e)) <= b;
}

/// the type a comparison is made in: double for float with double; T for T with T
template <class... T>
using compared_in = std::common_type_t<T...>;

/// whether the check holds for one element: the passing path, with no verdict (and no message
/// buffer) built, so a passing proof of a large matrix costs little more than the comparisons
template <rule R, class A, class E, class B>
constexpr bool holds(const A& actual, const E& expected, const B& bound) {
  using C = compared_in<A, E, B>;
  const C a = as<C>(actual), e = as<C>(expected);
  if constexpr (R == rule::equal)
    return !is_nan(a) && a == e;
  else
    return close(a, e, as<C>(bound));
}

/// the verdict for one element; when it fails, on clang, the failing call path that prints it
template <rule R, class A, class E, class B>
constexpr verdict compare(where at, const A& actual, const E& expected, const B& bound) {
  using C = compared_in<A, E, B>;
  const C a = as<C>(actual), e = as<C>(expected), b = as<C>(bound);
  if (holds<R>(actual, expected, bound)) return {};
#if defined(__clang__)
  if (std::is_constant_evaluated()) {
    if (at.dims == 0) {
      if constexpr (R == rule::equal)
        failed_actual_expected(a, e);
      else if constexpr (R == rule::near)
        failed_actual_expected_tolerance(a, e, b);
      else
        failed_actual_expected_bound(a, e, b);
    } else if (at.dims == 2) {
      if constexpr (R == rule::equal)
        failed_at_row_col_actual_expected(at.row, at.col, a, e);
      else if constexpr (R == rule::near)
        failed_at_row_col_actual_expected_tolerance(at.row, at.col, a, e, b);
      else
        failed_at_row_col_actual_expected_bound(at.row, at.col, a, e, b);
    } else {
      if constexpr (R == rule::equal)
        failed_at_depth_row_col_actual_expected(at.depth, at.row, at.col, a, e);
      else if constexpr (R == rule::near)
        failed_at_depth_row_col_actual_expected_tolerance(at.depth, at.row, at.col, a, e, b);
      else
        failed_at_depth_row_col_actual_expected_bound(at.depth, at.row, at.col, a, e, b);
    }
  }
#endif
  return failure<R>(at, actual, a, e, b);
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// the checks. A float with a double is compared in double (exactly); the tolerance or bound is
// in the same type.

/// actual == expected, exactly
template <class A, class E>
  requires(
      !requires { A::rows(); } && !requires { E::rows(); })
[[nodiscard]] constexpr verdict equal(const A& actual, const E& expected) {
  return detail::compare<detail::rule::equal>({}, actual, expected, expected);
}

/// |actual - expected| <= tolerance
template <class A, class E, class Tol>
  requires(
      !requires { A::rows(); } && !requires { E::rows(); })
[[nodiscard]] constexpr verdict near(const A& actual, const E& expected, const Tol& tolerance) {
  return detail::compare<detail::rule::near>({}, actual, expected, tolerance);
}

/// |actual - expected| <= bound: near, read as a derived error bound (core/bounds.hpp)
template <class A, class E, class B>
  requires(
      !requires { A::rows(); } && !requires { E::rows(); })
[[nodiscard]] constexpr verdict within(const A& actual, const E& expected, const B& bound) {
  return detail::compare<detail::rule::within>({}, actual, expected, bound);
}

/// every element exactly equal; a failure names the first element's row, column and values
template <class A, class E, std::size_t R, std::size_t C>
[[nodiscard]] constexpr verdict equal(const matrix<A, R, C>& actual, const matrix<E, R, C>& expected) {
  for (std::size_t i = 0; i < R; ++i)
    for (std::size_t j = 0; j < C; ++j) {
      if (!detail::holds<detail::rule::equal>(actual(i, j), expected(i, j), expected(i, j)))
        return detail::compare<detail::rule::equal>({2, 0, i, j}, actual(i, j), expected(i, j),
                                                    expected(i, j));
    }
  return {};
}

/// every element within tolerance; a failure names the first element's row, column and values
template <class A, class E, std::size_t R, std::size_t C, class Tol>
  requires(!requires { Tol::rows(); })
[[nodiscard]] constexpr verdict near(const matrix<A, R, C>& actual, const matrix<E, R, C>& expected,
                                     const Tol& tolerance) {
  for (std::size_t i = 0; i < R; ++i)
    for (std::size_t j = 0; j < C; ++j) {
      if (!detail::holds<detail::rule::near>(actual(i, j), expected(i, j), tolerance))
        return detail::compare<detail::rule::near>({2, 0, i, j}, actual(i, j), expected(i, j), tolerance);
    }
  return {};
}

/// |actual(i, j) - expected(i, j)| <= bound(i, j) for every element: a tolerance per element,
/// e.g. a derived rounding-error bound (core/bounds.hpp)
template <class A, class E, class B, std::size_t R, std::size_t C>
[[nodiscard]] constexpr verdict within(const matrix<A, R, C>& actual, const matrix<E, R, C>& expected,
                                       const matrix<B, R, C>& bound) {
  for (std::size_t i = 0; i < R; ++i)
    for (std::size_t j = 0; j < C; ++j) {
      if (!detail::holds<detail::rule::within>(actual(i, j), expected(i, j), bound(i, j)))
        return detail::compare<detail::rule::within>({2, 0, i, j}, actual(i, j), expected(i, j), bound(i, j));
    }
  return {};
}

/// every element of every matrix exactly equal; a failure names depth, row and column
template <class A, class E, std::size_t N, std::size_t R, std::size_t C>
[[nodiscard]] constexpr verdict equal(const stack<A, N, R, C>& actual, const stack<E, N, R, C>& expected) {
  for (std::size_t n = 0; n < N; ++n)
    for (std::size_t i = 0; i < R; ++i)
      for (std::size_t j = 0; j < C; ++j) {
        if (!detail::holds<detail::rule::equal>(actual(n, i, j), expected(n, i, j), expected(n, i, j)))
          return detail::compare<detail::rule::equal>({3, n, i, j}, actual(n, i, j), expected(n, i, j),
                                                      expected(n, i, j));
      }
  return {};
}

template <class A, class E, std::size_t N, std::size_t R, std::size_t C, class Tol>
  requires(!requires { Tol::rows(); })
[[nodiscard]] constexpr verdict near(const stack<A, N, R, C>& actual, const stack<E, N, R, C>& expected,
                                     const Tol& tolerance) {
  for (std::size_t n = 0; n < N; ++n)
    for (std::size_t i = 0; i < R; ++i)
      for (std::size_t j = 0; j < C; ++j) {
        if (!detail::holds<detail::rule::near>(actual(n, i, j), expected(n, i, j), tolerance))
          return detail::compare<detail::rule::near>({3, n, i, j}, actual(n, i, j), expected(n, i, j),
                                                     tolerance);
      }
  return {};
}

template <class A, class E, class B, std::size_t N, std::size_t R, std::size_t C>
[[nodiscard]] constexpr verdict within(const stack<A, N, R, C>& actual, const stack<E, N, R, C>& expected,
                                       const stack<B, N, R, C>& bound) {
  for (std::size_t n = 0; n < N; ++n)
    for (std::size_t i = 0; i < R; ++i)
      for (std::size_t j = 0; j < C; ++j) {
        if (!detail::holds<detail::rule::within>(actual(n, i, j), expected(n, i, j), bound(n, i, j)))
          return detail::compare<detail::rule::within>({3, n, i, j}, actual(n, i, j), expected(n, i, j),
                                                       bound(n, i, j));
      }
  return {};
}

}  // namespace qkv::check

namespace qkv {

/// @brief holds a verdict up to the compiler: a failed one stops the compilation here, and g++
/// prints the verdict (its message included) as this template's argument
template <check::verdict V>
struct proof {
  static_assert(V.holds, "a qkv proof failed: the verdict above names the position and the numbers");
  static constexpr bool value = V.holds;
};

/// @brief static_assert(qkv::proven<qkv::check::equal(actual, expected)>): true when the check
/// holds; when it fails, both g++ and clang print the position and the numbers
template <check::verdict V>
inline constexpr bool proven = proof<V>::value;

}  // namespace qkv
