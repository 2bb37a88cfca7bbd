// static proofs of exact/rational.hpp and exact/fixed_width.hpp: if this file compiles, they hold.
// rational.hpp first: it must compile on its own, with no help from Boost's includes
#include <qkv/exact/rational.hpp>

#include <limits>
#include <type_traits>

#include <qkv/core/check.hpp>
#include <qkv/core/matrix.hpp>
#include <qkv/exact/fixed_width.hpp>

namespace {

using qkv::matrix;
using qkv::exact::q128;
using qkv::exact::q256;
using r64 = qkv::exact::rational<long long>;
namespace check = qkv::check;

// F{}() is a constant expression, or it is not: an overflowing expression makes the template
// argument ill-formed, which a requires-expression turns into `false` instead of an error.
// The same trick works in g++ 12 and clang 16. (A lambda in decltype is C++20.)
template <class F>
concept constant_expression = requires { typename std::bool_constant<(F{}(), true)>; };

// --- normalisation: den > 0, lowest terms, the sign in the numerator, zero is 0/1 ---
// 6 / -4: gcd(6, 4) = 2, sign moves up: -3/2
static_assert(r64(6, -4).numerator() == -3 && r64(6, -4).denominator() == 2);
static_assert(r64(-6, -4) == r64(3, 2));
static_assert(r64(0, -5).numerator() == 0 && r64(0, -5).denominator() == 1);
static_assert(r64(0, -5) == r64());
static_assert(r64(14, 7).is_integer() && r64(14, 7) == 2);
static_assert(q128(6, -4).numerator() == -3 && q128(6, -4).denominator() == 2);

// --- arithmetic ---
// 1/3 + 1/6: g = gcd(3, 6) = 3, t = 1*(6/3) + 1*(3/3) = 3, gcd(3, 3) = 3 -> 1 / (1 * 2) = 1/2
static_assert(r64(1, 3) + r64(1, 6) == r64(1, 2));
// 1/2 + 1/3 = 3/6 + 2/6 = 5/6 (coprime denominators)
static_assert(r64(1, 2) + r64(1, 3) == r64(5, 6));
// 3/4 - 3/4 = 0, and zero is normalised to 0/1
static_assert(r64(3, 4) - r64(3, 4) == 0 && (r64(3, 4) - r64(3, 4)).denominator() == 1);
// 1/6 - 2/3 = 1/6 - 4/6 = -3/6 = -1/2
static_assert(r64(1, 6) - r64(2, 3) == r64(-1, 2));
// 2/3 * 9/4 = 18/12 = 3/2 (cancelled before multiplying: (2/2 * 9/3) / (3/3 * 4/2))
static_assert(r64(2, 3) * r64(9, 4) == r64(3, 2));
// -1/2 * -2 = 1
static_assert(r64(-1, 2) * -2 == 1);
// (3/4) / (-9/8) = 3/4 * -8/9 = -24/36 = -2/3
static_assert(r64(3, 4) / r64(-9, 8) == r64(-2, 3));
static_assert(r64(-7, 3).reciprocal() == r64(-3, 7));
// compound: ((1/2 + 1/3) * 6 - 5) / 2 = (5 - 5) / 2 = 0
static_assert([] {
  r64 r(1, 2);
  r += r64(1, 3);
  r *= 6;
  r -= 5;
  r /= 2;
  return r == 0;
}());
// 0.9 * 7 + 0.1 * 9 = 6.3 + 0.9 = 7.2 = 36/5, the kind of sum tutorial 000 makes
static_assert(r64::decimal("0.9") * 7 + r64::decimal("0.1") * 9 == r64(36, 5));
// the same over 128 and 256 bits
static_assert(q128(1, 3) + q128(1, 6) == q128(1, 2));
static_assert(q256(2, 3) * q256(9, 4) == q256(3, 2));
static_assert(q128(3, 4) / q128(-9, 8) == q128(-2, 3));
// 2^100 / 2^99 = 2: values far beyond 64 bits, at compile time
static_assert(q128(boost::multiprecision::int128_t(1) << 100) / q128(boost::multiprecision::int128_t(1) << 99) == 2);
// floor and abs: floor(-7/2) = -4, floor(7/2) = 3, |-7/2| = 7/2
static_assert(qkv::exact::floor(r64(-7, 2)) == -4 && qkv::exact::floor(r64(7, 2)) == 3);
static_assert(qkv::exact::abs(r64(-7, 2)) == r64(7, 2));

// --- comparisons ---
//   1/3 < 1/2        -1/2 < -1/3        3/2 < 5/3        -1 < 0 < 1/1000
static_assert(r64(1, 3) < r64(1, 2));
static_assert(r64(-1, 2) < r64(-1, 3));
static_assert(r64(3, 2) < r64(5, 3) && r64(5, 3) > r64(3, 2));
static_assert(r64(-1) < 0 && 0 < r64(1, 1000));
static_assert(r64(2, 4) <= r64(1, 2) && r64(2, 4) >= r64(1, 2) && r64(1, 2) != r64(1, 3));
static_assert((r64(1, 3) <=> r64(2, 6)) == 0);
// neighbours whose cross products overflow 64 bits: (M-2)/(M-1) < (M-1)/M with M = 2^62,
// since 1 - 1/(M-1) < 1 - 1/M. The comparison never forms (M-2) M.
constexpr long long m62 = 1LL << 62;
static_assert(r64(m62 - 2, m62 - 1) < r64(m62 - 1, m62));
static_assert(!(r64(m62 - 1, m62) < r64(m62 - 2, m62 - 1)));
static_assert(r64(-(m62 - 1), m62) < r64(-(m62 - 2), m62 - 1));
static_assert(q128(7, 5) > q128(4, 3) && q128(-7, 5) < q128(-4, 3));

// --- decimal literals: the decimal text, exactly ---
static_assert(r64::decimal("0.9") == r64(9, 10));
static_assert(r64::decimal("0.1") == r64(1, 10));
static_assert(r64::decimal("-1.5e-3") == r64(-3, 2000));
static_assert(r64::decimal("+2.50E2") == 250);
static_assert(r64::decimal("7.8") == r64(39, 5));
static_assert(r64::decimal(".5") == r64(1, 2) && r64::decimal("3.") == 3);
static_assert(qkv::exact::decimal<boost::multiprecision::int128_t>("0.3") == q128(3, 10));
static_assert(!constant_expression<decltype([] { return r64::decimal("1.2.3"); })>);
static_assert(!constant_expression<decltype([] { return r64::decimal("e5"); })>);
static_assert(!constant_expression<decltype([] { return r64::decimal(""); })>);
// 20 nines do not fit 63 bits
static_assert(!constant_expression<decltype([] { return r64::decimal("99999999999999999999"); })>);
static_assert(constant_expression<decltype([] { return q128::decimal("99999999999999999999"); })>);

// --- exact values of binary floating-point numbers ---
// 0.1f is 13421773 / 2^27 (the float nearest 0.1); 0.5 is 1/2; -3.0 is -3
static_assert(r64::exactly(0.1f) == r64(13421773, 134217728));
static_assert(r64::exactly(0.5) == r64(1, 2) && r64::exactly(-3.0) == -3);
static_assert(r64::exactly(0.0) == 0 && r64::exactly(-0.0f) == 0);
// 7.7999997f = 8178893 / 2^20: the float32 result of tutorial 000 is not 39/5
static_assert(r64::exactly(7.8f) == r64(8178893, 1 << 20));
static_assert(r64::exactly(7.8f) != r64::decimal("7.8"));
// the smallest positive float is 2^-149: 256 bits hold it, 64 do not
static_assert(q256::exactly(std::numeric_limits<float>::denorm_min()).denominator() ==
              boost::multiprecision::int256_t(1) << 149);
// explicitly from a float: the same exact value; matrix_cast converts a whole matrix
static_assert(r64(0.75f) == r64(3, 4) && static_cast<r64>(-2.5) == r64(-5, 2));
static_assert(qkv::matrix_cast<r64>(matrix<float, 1, 2>{{{0.1f, 7.8f}}}) ==
              matrix<r64, 1, 2>{{{r64::exactly(0.1f), r64(8178893, 1 << 20)}}});
static_assert(!std::is_convertible_v<float, r64> && std::is_constructible_v<r64, float>);
static_assert(!constant_expression<decltype([] { return r64::exactly(1e-30f); })>);
static_assert(!constant_expression<decltype([] { return r64::exactly(1e30); })>);
static_assert(!constant_expression<decltype([] { return r64::exactly(std::numeric_limits<double>::infinity()); })>);
static_assert(!constant_expression<decltype([] { return r64::exactly(std::numeric_limits<float>::quiet_NaN()); })>);

// --- conversion to float and double: correctly rounded ---
// for integers below 2^53, a/b in double is one IEEE division, correctly rounded by definition
static_assert(r64(1, 3).to<double>() == 1.0 / 3.0 && r64(2, 3).to<float>() == 2.0f / 3.0f);
static_assert(static_cast<double>(r64(-5, 7)) == -5.0 / 7.0);
// 39/5 is 7.8 in decimal, 7.7999997f as the nearest float (and 7.8 as the nearest double)
static_assert(r64(39, 5).to<float>() == 7.8f && r64(39, 5).to<double>() == 7.8);
// ties go to even: 2^24 + 1 lies halfway between the floats 2^24 and 2^24 + 2 -> 2^24;
// 2^24 + 3 halfway between 2^24 + 2 and 2^24 + 4 -> 2^24 + 4
static_assert(r64((1 << 24) + 1).to<float>() == 16777216.0f);
static_assert(r64((1 << 24) + 3).to<float>() == 16777220.0f);
// just above a tie rounds up: (2^25 + 3) / 2 = 2^24 + 1.5 -> 2^24 + 2
static_assert(r64((1 << 25) + 3, 2).to<float>() == 16777218.0f);
// every float and double converts back to itself
static_assert(r64::exactly(0.1).to<double>() == 0.1 && r64::exactly(7.8f).to<float>() == 7.8f);
static_assert(q256::exactly(3e38f).to<float>() == 3e38f);
// 2^100 + 1 rounds to 2^100 in double (the +1 is 100 bits down)
static_assert(q128((boost::multiprecision::int128_t(1) << 100) + 1).to<double>() == 1267650600228229401496703205376.0);
// subnormals, one rounding only: 1/2^149 is the smallest float; 1/2^150 is a tie -> 0 (even);
// 3/2^151 = 0.75 * 2^-149 -> 2^-149
constexpr auto two_149 = boost::multiprecision::int256_t(1) << 149;
static_assert(q256(1, two_149).to<float>() == std::numeric_limits<float>::denorm_min());
static_assert(q256(1, two_149 * 2).to<float>() == 0.0f);
static_assert(q256(3, two_149 * 4).to<float>() == std::numeric_limits<float>::denorm_min());
// beyond the largest float: 2^128 -> infinity (float's maximum is (2 - 2^-23) 2^127)
static_assert(q256(boost::multiprecision::int256_t(1) << 128).to<float>() == std::numeric_limits<float>::infinity());
static_assert(q256(-(boost::multiprecision::int256_t(1) << 128)).to<float>() == -std::numeric_limits<float>::infinity());

// --- overflow is detected, not wrapped: the negative tests ---
// 2^40/3 * 2^20 = 2^60/3 fits 63 bits; 2^40/3 * 2^40/3 needs 80 bits
constexpr r64 big(1LL << 40, 3);
static_assert(constant_expression<decltype([] { return big * r64(1 << 20); })>);
static_assert(!constant_expression<decltype([] { return big * big; })>);
// a sum: (2^62 - 1) + 2^62 = 2^63 - 1 is the largest long long; 2^62 + 2^62 is one more
static_assert(constant_expression<decltype([] { return r64(m62 - 1) + r64(m62); })>);
static_assert(!constant_expression<decltype([] { return r64(m62) + r64(m62); })>);
static_assert(!constant_expression<decltype([] { return r64(-m62) - r64(m62); })>);
// a denominator: 1/2^62 + 1/3 needs 3 * 2^62 > 2^63 - 1
static_assert(!constant_expression<decltype([] { return r64(1, m62) + r64(1, 3); })>);
// LLONG_MIN is outside the symmetric range [-max, max], so -x can never overflow
static_assert(!constant_expression<decltype([] { return r64(std::numeric_limits<long long>::min()); })>);
// 128 bits: 2^127 * 2 fits (2^128 - 1 is the largest magnitude), 2^127 * 4 does not
constexpr auto two_127 = boost::multiprecision::int128_t(1) << 127;
static_assert(constant_expression<decltype([] { return q128(two_127 / 2) * 2; })>);
static_assert(!constant_expression<decltype([] { return q128(two_127) * 4; })>);
static_assert(!constant_expression<decltype([] { return q128(two_127) + q128(two_127); })>);
// division by zero and a zero denominator are errors too
static_assert(!constant_expression<decltype([] { return r64(1) / r64(0); })>);
static_assert(!constant_expression<decltype([] { return r64(0).reciprocal(); })>);
static_assert(!constant_expression<decltype([] { return r64(1, 0); })>);
static_assert(!constant_expression<decltype([] { return q128(3, 4) / 0; })>);

// --- rationals in qkv::matrix: tutorial 000's keys, exactly ---
// [1,0,1,0] W_key = [0, 1, 1]; [0,2,0,2] W_key = [4, 4, 0]; [1,1,1,1] W_key = [2, 3, 1]
constexpr matrix<q128, 3, 4> x{{{1, 0, 1, 0}, {0, 2, 0, 2}, {1, 1, 1, 1}}};
constexpr matrix<q128, 4, 3> w_key{{{0, 0, 1}, {1, 1, 0}, {0, 1, 0}, {1, 1, 0}}};
static_assert(qkv::proven<check::equal(qkv::matrix_product(x, w_key), matrix<q128, 3, 3>{{{0, 1, 1}, {4, 4, 0}, {2, 3, 1}}})>);
// a third of the keys, scaled back: exact, so (k / 3) * 3 == k with no tolerance
static_assert(qkv::scaled(q128(3), qkv::divided(qkv::matrix_product(x, w_key), q128(3))) ==
              qkv::matrix_product(x, w_key));
// [0.9, 0.1] [[1, 2], [3, 4]] = [0.9 + 0.3, 1.8 + 0.4] = [6/5, 11/5]
static_assert(qkv::proven<check::equal(qkv::matrix_product(matrix<r64, 1, 2>{{{r64::decimal("0.9"), r64::decimal("0.1")}}},
                                                           matrix<r64, 2, 2>{{{1, 2}, {3, 4}}}),
                                       matrix<r64, 1, 2>{{{r64(6, 5), r64(11, 5)}}})>);
// magnitude (used by approx_equal) and matrix_cast to float work through the rational's operators
static_assert(qkv::magnitude(r64(-1, 3)) == r64(1, 3));
static_assert(qkv::matrix_cast<float>(matrix<r64, 1, 2>{{{r64(39, 5), r64(3, 10)}}}) ==
              matrix<float, 1, 2>{{{7.8f, 0.3f}}});

}  // namespace
