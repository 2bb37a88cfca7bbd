// runtime tests of exact/rational.hpp against Boost's arbitrary-precision cpp_rational.
//
// cpp_rational never overflows, so it is the truth: for thousands of operand pairs of every
// size up to the full width, a rational<Int> result either equals cpp_rational's or the
// operation threw std::overflow_error, and it always throws when the exact result does not fit.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>

#include <qkv/exact/fixed_width.hpp>
#include <qkv/exact/rational.hpp>

namespace {

namespace mp = boost::multiprecision;
using qkv::exact::q128;
using qkv::exact::q256;
using qkv::exact::to_cpp_rational;
using r64 = qkv::exact::rational<long long>;

// a random integer of `bits` random bits (the top one set), of either sign
template <class Int>
Int random_integer(std::mt19937_64& gen, int bits, bool allow_negative) {
  Int x(0);
  for (int b = 0; b < bits; b += 32) {
    const int take = bits - b < 32 ? bits - b : 32;
    x = (x << take) | Int(gen() & ((std::uint64_t(1) << take) - 1));
  }
  x |= Int(1) << (bits - 1);
  if (allow_negative && (gen() & 1)) x = -x;
  return x;
}

// a random rational whose numerator and denominator have up to max_bits bits each; small
// sizes are as likely as large ones, so both the fitting and the overflowing cases occur
template <class Int>
qkv::exact::rational<Int> random_rational(std::mt19937_64& gen, int max_bits) {
  // half of the operands are at most half as wide as Int, so many results fit
  std::uniform_int_distribution<int> size(1, (gen() & 1) ? max_bits : max_bits / 2);
  const Int n = random_integer<Int>(gen, size(gen), true);
  const Int d = random_integer<Int>(gen, size(gen), false);
  return qkv::exact::rational<Int>(n, d);
}

bool fits(const mp::cpp_rational& x, const mp::cpp_int& max) {
  return mp::abs(mp::numerator(x)) <= max && mp::denominator(x) <= max;
}

// the exact rational value of a finite double or float
template <class F>
mp::cpp_rational exact_value(F x) {
  int e = 0;
  const F m = std::frexp(x, &e);  // x = m 2^e, 0.5 <= |m| < 1
  const auto scaled = static_cast<long long>(std::ldexp(m, std::numeric_limits<F>::digits));
  mp::cpp_rational r(scaled);
  const int shift = e - std::numeric_limits<F>::digits;
  if (shift >= 0)
    r *= mp::cpp_rational(mp::cpp_int(1) << shift);
  else
    r /= mp::cpp_rational(mp::cpp_int(1) << -shift);
  return r;
}

// f is the correctly rounded F of x: no other F is nearer, and on a tie f's significand is even
template <class F>
void check_correctly_rounded(const mp::cpp_rational& x, F f) {
  if (std::isinf(f)) {
    // beyond the largest finite F by half an ulp of it or more: max = (2 - 2^(1-p)) 2^emax and
    // its significand is odd, so the tie at max + 2^(emax-p) rounds up, to infinity
    constexpr F max = std::numeric_limits<F>::max();
    const mp::cpp_rational half_ulp = exact_value(max) - exact_value(std::nextafter(max, F(0)));
    CHECK(mp::abs(x) >= exact_value(max) + half_ulp / 2);
    CHECK((f > 0) == (x > 0));
    return;
  }
  const mp::cpp_rational err = mp::abs(exact_value(f) - x);
  for (F neighbour : {std::nextafter(f, std::numeric_limits<F>::infinity()),
                      std::nextafter(f, -std::numeric_limits<F>::infinity())}) {
    if (!std::isfinite(neighbour)) continue;
    const mp::cpp_rational other = mp::abs(exact_value(neighbour) - x);
    CHECK(err <= other);
    if (err == other) {
      int e = 0;
      const auto sig = static_cast<long long>(std::ldexp(std::frexp(f, &e), std::numeric_limits<F>::digits));
      CHECK(sig % 2 == 0);
    }
  }
}

template <class Int>
void check_against_cpp_rational(int max_bits, int pairs) {
  std::mt19937_64 gen(20240611);
  const mp::cpp_int max(std::numeric_limits<Int>::max());
  int exact_results = 0, overflows = 0;
  for (int i = 0; i < pairs; ++i) {
    const auto a = random_rational<Int>(gen, max_bits);
    const auto b = random_rational<Int>(gen, max_bits);
    const mp::cpp_rational ea = to_cpp_rational(a), eb = to_cpp_rational(b);
    // comparisons never overflow
    CHECK((a < b) == (ea < eb));
    CHECK((a == b) == (ea == eb));
    CHECK((a > b) == (ea > eb));
    const mp::cpp_rational truth[] = {ea + eb, ea - eb, ea * eb, ea / eb};
    for (int op = 0; op < 4; ++op) {
      try {
        const auto r = op == 0 ? a + b : op == 1 ? a - b : op == 2 ? a * b : a / b;
        // no throw: the result is the exact one, normalised (cpp_rational is too)
        CHECK(to_cpp_rational(r) == truth[op]);
        CHECK(r.denominator() > Int(0));
        ++exact_results;
      } catch (const std::overflow_error&) {
        // a product's or quotient's operands are cancelled first, so it throws only when the
        // exact result does not fit; a sum may also throw when an intermediate does not fit
        if (op >= 2) CHECK_FALSE(fits(truth[op], max));
        ++overflows;
      }
      // and whenever the exact result does not fit, the operation threw
    }
    for (int op = 0; op < 4; ++op)
      if (!fits(truth[op], max))
        CHECK_THROWS_AS((void)(op == 0   ? a + b
                               : op == 1 ? a - b
                               : op == 2 ? a * b
                                         : a / b),
                        std::overflow_error);
    // correctly rounded conversions
    check_correctly_rounded(ea, a.template to<double>());
    check_correctly_rounded(ea, a.template to<float>());
  }
  // both outcomes occurred many times: the test exercised the overflow checks
  CHECK(exact_results > pairs);
  CHECK(overflows > pairs / 10);
  MESSAGE(exact_results << " exact results and " << overflows << " detected overflows in " << 4 * pairs
                        << " operations");
}

}  // namespace

TEST_CASE("rational<long long> arithmetic equals cpp_rational or reports the overflow") {
  check_against_cpp_rational<long long>(62, 3000);
}

TEST_CASE("q128 arithmetic equals cpp_rational or reports the overflow") {
  check_against_cpp_rational<mp::int128_t>(127, 2000);
}

TEST_CASE("q256 arithmetic equals cpp_rational or reports the overflow") {
  check_against_cpp_rational<mp::int256_t>(255, 500);
}

TEST_CASE("division by zero throws domain_error at run time") {
  CHECK_THROWS_AS((void)(q128(1, 3) / q128(0)), std::domain_error);
  CHECK_THROWS_AS((void)q128(1, 0), std::domain_error);
  CHECK_THROWS_AS((void)r64(0).reciprocal(), std::domain_error);
}

TEST_CASE("every float and double, also subnormal, converts exactly and back") {
  std::mt19937 gen(7);
  for (int i = 0; i < 20000; ++i) {
    const auto bits = static_cast<std::uint32_t>(gen());
    const float f = std::bit_cast<float>(bits);
    if (!std::isfinite(f)) continue;
    const q256 q = q256::exactly(f);
    CHECK(to_cpp_rational(q) == exact_value(f));
    CHECK(std::bit_cast<std::uint32_t>(q.to<float>()) ==
          (f == 0 ? std::bit_cast<std::uint32_t>(0.0f) : bits));
    // a float as a double: the same value
    CHECK(q.to<double>() == static_cast<double>(f));
  }
  std::mt19937_64 gen64(11);
  for (int i = 0; i < 5000; ++i) {
    // doubles of moderate exponent: 2^-120 .. 2^120 fits 256 bits with a 53-bit significand
    const double d = std::ldexp(std::uniform_real_distribution<double>(-1, 1)(gen64),
                                std::uniform_int_distribution<int>(-120, 120)(gen64));
    const q256 q = q256::exactly(d);
    CHECK(to_cpp_rational(q) == exact_value(d));
    CHECK(q.to<double>() == d);
    check_correctly_rounded(exact_value(d), q.to<float>());
  }
}

TEST_CASE("decimal literals are the exact decimal value") {
  std::mt19937_64 gen(3);
  for (int i = 0; i < 2000; ++i) {
    // d.ddd...: up to 18 digits before and 18 after the point
    const std::uint64_t whole = gen() % 1000000000000000000ULL, frac = gen() % 1000000000000000000ULL;
    const std::string frac_text = std::to_string(frac);
    const bool negative = gen() & 1;
    const std::string text = (negative ? "-" : "") + std::to_string(whole) + "." + frac_text;
    const q128 q = q128::decimal(text.c_str());
    // whole + frac / 10^digits(frac)
    mp::cpp_int ten_power(1);
    for (std::size_t k = 0; k < frac_text.size(); ++k) ten_power *= 10;
    mp::cpp_rational expected(mp::cpp_int(whole) * ten_power + mp::cpp_int(frac), ten_power);
    if (negative) expected = -expected;
    CHECK(to_cpp_rational(q) == expected);
  }
  CHECK_THROWS_AS((void)r64::decimal("1.5x"), std::invalid_argument);
  CHECK_THROWS_AS((void)r64::decimal("-"), std::invalid_argument);
  CHECK_THROWS_AS((void)r64::decimal("123456789012345678901234567890"), std::overflow_error);
}

TEST_CASE("parse reads what a learner types: a decimal, or a quotient of two") {
  // the exact pages' editor (wasm/qkv_wasm.cpp's qkv_q64_parse): its values and its messages
  static_assert(r64::parse("3/2") == r64(3, 2) && r64::parse("0.9") == r64(9, 10));
  static_assert(r64::parse("-1.5e-3") == r64(-3, 2000) && r64::parse("1/0.3") == r64(10, 3));
  static_assert(r64::parse("6/-4") == r64(-3, 2) && r64::parse("2.5e1/10") == r64(5, 2));
  std::mt19937_64 gen(5);
  for (int i = 0; i < 2000; ++i) {  // n.nnn/d.ddd: the quotient of the two decimals, exactly
    const std::uint64_t a = gen() % 100000000, b = 1 + gen() % 100000000;
    const int pa = static_cast<int>(gen() % 5), pb = static_cast<int>(gen() % 5);
    auto text = [](std::uint64_t n, int point) {
      std::string s = std::to_string(n);
      while (static_cast<int>(s.size()) <= point) s = "0" + s;
      return point ? s.insert(s.size() - static_cast<std::size_t>(point), ".") : s;
    };
    const std::string t = text(a, pa) + "/" + text(b, pb);
    mp::cpp_int ta(1), tb(1);
    for (int k = 0; k < pa; ++k) ta *= 10;
    for (int k = 0; k < pb; ++k) tb *= 10;
    CHECK(to_cpp_rational(q128::parse(t.c_str())) ==
          mp::cpp_rational(mp::cpp_int(a), ta) / mp::cpp_rational(mp::cpp_int(b), tb));
  }
  CHECK_THROWS_WITH_AS((void)r64::parse("1/0"), "qkv::exact::rational: zero denominator", std::domain_error);
  CHECK_THROWS_WITH_AS((void)r64::parse("1/0.00"), "qkv::exact::rational: zero denominator",
                       std::domain_error);
  for (const char* bad : {"1/2/3", "/2", "2/"})
    CHECK_THROWS_WITH_AS((void)r64::parse(bad),
                         "qkv::exact::rational::parse: expected a decimal or decimal/decimal, each "
                         "[+-]digits[.digits][e[+-]digits]",
                         std::invalid_argument);
  for (const char* bad : {"abc", "1.5x", "1e5x", "1/x", "", "3 / 2"})
    CHECK_THROWS_AS((void)r64::parse(bad), std::invalid_argument);
  CHECK_THROWS_WITH_AS((void)r64::parse("99999999999999999999/3"),
                       "qkv::exact::rational: a product overflows the integer type", std::overflow_error);
}

TEST_CASE("a cpp_rational that fits converts to q128 and back") {
  const mp::cpp_rational third(1, 3);
  CHECK(qkv::exact::from_cpp_rational<mp::int128_t>(third) == q128(1, 3));
  CHECK(to_cpp_rational(qkv::exact::from_cpp_rational<mp::int128_t>(-third)) == -third);
  const mp::cpp_rational huge(mp::cpp_int(1) << 200);
  CHECK_THROWS_AS((void)qkv::exact::from_cpp_rational<mp::int128_t>(huge), std::overflow_error);
  CHECK(to_cpp_rational(qkv::exact::from_cpp_rational<mp::int256_t>(huge)) == huge);
}
