// 03b_walking_through_the_math_exact.cpp: tutorial 002's sums over the exact values of its float32 inputs.
//
// Tutorial 002's inputs are numbers TensorFlow printed, stored as float32. A float32 is an
// exact dyadic rational, m / 2^k, so every sum of products of them (the barebones scores
// x_2ᵀ x_j, the projections W x, the scores q_2ᵀ k_i) has an exact rational value, and the
// compiler can compute it: here with qkv::exact::q128, fractions of Boost.Multiprecision
// int128_t (the scores q_2ᵀ k_i need denominators near 2^104: beyond 64 bits). Against those
// exact values, example 03's float32 arithmetic and the same arithmetic in double are judged
// by their actual errors, computed without rounding, and the textbook bound
// |fl(sum) - sum| <= gamma_n sum |a_i b_i| is checked in exact arithmetic, not in floats.
// The softmax (exp) has no exact value and stays in example 03.
#include <cstdio>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <qkv/core/check.hpp>
#include <qkv/core/matrix.hpp>
#include <qkv/exact/fixed_width.hpp>
#include <qkv/exact/rational.hpp>

namespace qkv::examples::the_math_exact {

namespace check = qkv::check;
using qkv::matrix;
using q = qkv::exact::q128;

// the inputs, as printed (float32), the same literals as example 03: (d, 1) column vectors
constexpr matrix<float, 4, 1> x_1{{{-0.20886648f}, {0.5476398f}, {0.72447395f}, {-1.1310507f}}};
constexpr matrix<float, 4, 1> x_2{{{0.1870852f}, {-1.3414632f}, {-1.1067361f}, {-1.3406332f}}};
constexpr matrix<float, 4, 1> x_3{{{-1.4844604f}, {0.60378075f}, {0.39966342f}, {-0.7903915f}}};
constexpr matrix<float, 4, 1> x_4{{{-0.39180905f}, {-1.2203115f}, {1.0298591f}, {-0.23658466f}}};
constexpr matrix<float, 4, 4> W_q{{{0.0558263f, -1.7287809f, 0.06325671f, 0.8925434f},
                                   {0.44502732f, 2.3946028f, -0.7817421f, -0.5631514f},
                                   {0.8664166f, 0.14898889f, -1.2681427f, -1.3942317f},
                                   {-0.52701306f, 0.6796619f, 0.95935136f, -0.8240369f}}};
constexpr matrix<float, 4, 4> W_k{{{1.4865062f, 0.53539854f, 0.707822f, -0.3496642f},
                                   {-0.36981565f, -0.43839103f, 0.06208184f, -0.34790948f},
                                   {1.5218863f, -1.1896831f, 0.3180406f, 1.2518362f},
                                   {0.4551281f, -1.190138f, 1.8135393f, 0.6393279f}}};

// X: the inputs side by side, one token per column (d, t) = (4, 4)
constexpr auto X = qkv::hconcat(qkv::hconcat(x_1, x_2), qkv::hconcat(x_3, x_4));

// 0.1870852f is not 0.1870852: it is the float nearest it, 12555075 / 2^26
static_assert(q::exactly(0.1870852f) == q(12555075, 1LL << 26));
static_assert(q::exactly(0.1870852f) != q::decimal("0.1870852"));

/// a dot product of float or double values done exactly: its value and sum |a_k b_k|
struct exact_dot {
  q value;
  q sum_abs;
};
template <class In, std::size_t N>
constexpr exact_dot dot_exactly(const matrix<In, N, 1>& a, const matrix<In, N, 1>& b) {
  exact_dot d{0, 0};
  for (std::size_t k = 0; k < N; ++k) {
    const q p = q::exactly(a[k]) * q::exactly(b[k]);
    d.value += p;
    d.sum_abs += qkv::exact::abs(p);
  }
  return d;
}

/// @brief the textbook bound for a dot product of n terms rounded in F (n products, n - 1
/// additions, any order): |computed - exact| <= gamma_n sum |a_k b_k|, gamma_n = n u / (1 - n u),
/// u = 2^-24 (float) or 2^-53 (double). Checked in exact arithmetic: no rounding in the check.
/// sum |a_k b_k| of two scores' inputs has a denominator near 2^104, and gamma_4 of double one
/// near 2^51: their product would not fit 128 bits (the rational type stops the compilation
/// if it is tried). So the sum is first rounded up to a multiple of 2^-60: a bound a little
/// larger (by at most 2^-60), still rigorous.
constexpr q rounded_up(const q& x) {
  const q scale(1LL << 60);
  return (qkv::exact::floor(x * scale) + 1) / scale;
}
template <class F>
constexpr bool within_gamma(F computed, const exact_dot& d, long long n) {
  const q u = std::numeric_limits<F>::digits == 24 ? q(1, 1LL << 24) : q(1, 1LL << 53);
  const q gamma = q(n) * u / (q(1) - q(n) * u);
  return qkv::exact::abs(q::exactly(computed) - d.value) <= gamma * rounded_up(d.sum_abs);
}

/// the exact value of each element
template <class F, std::size_t R, std::size_t C>
constexpr matrix<q, R, C> exact_values(const matrix<F, R, C>& m) {
  return qkv::map(m, [](F e) { return q::exactly(e); });
}
/// the nearest F to each exact element (correctly rounded)
template <class F, std::size_t R, std::size_t C>
constexpr matrix<F, R, C> rounded(const matrix<q, R, C>& m) {
  return qkv::map(m, [](const q& e) { return e.to<F>(); });
}

// ---------------------------------------------------------------------------------------------
// Barebones: w'_2j = x_2ᵀ x_j, exactly
constexpr auto EX = exact_values(X);
constexpr auto w_prime_2 = qkv::matrix_product(qkv::transposed(qkv::column(EX, 1)), EX);  // (1, 4)
constexpr auto w_prime_2_f32 = qkv::matrix_product(qkv::transposed(x_2), X);
constexpr auto w_prime_2_f64 = qkv::matrix_product(qkv::transposed(qkv::matrix_cast<double>(x_2)),
                                                   qkv::matrix_cast<double>(X));

// w'_22 = |x_2|^2 = 21872570963540233 / 2^52 = 4.85669..., the exact sum of the squares
static_assert(w_prime_2(0, 1) == q(21872570963540233LL, 1LL << 52));

// Exact sums do not depend on the order: x_2 . x_1 summed from the last term to the first is
// the same rational, while float32 gets the two orders different in the last bit.
constexpr q w_prime_21_backwards =
    EX(3, 1) * EX(3, 0) + EX(2, 1) * EX(2, 0) + EX(1, 1) * EX(1, 0) + EX(0, 1) * EX(0, 0);
static_assert(w_prime_21_backwards == w_prime_2(0, 0));
constexpr float w_prime_21_backwards_f32 =
    X(3, 1) * X(3, 0) + X(2, 1) * X(2, 0) + X(1, 1) * X(1, 0) + X(0, 1) * X(0, 0);
static_assert(w_prime_21_backwards_f32 != w_prime_2_f32(0, 0));

// double: a product of two 24-bit significands has at most 48 bits, which double holds, so
// the only roundings are in the 3 additions. Three of the four sums fit 53 bits and come out
// exact; |x_2|^2 needs more and rounds once, by 2^-52 (a quarter of its ulp, 2^-50).
// All four are the correctly rounded doubles of the exact sums.
static_assert(q::exactly(w_prime_2_f64(0, 0)) == w_prime_2(0, 0) &&
              q::exactly(w_prime_2_f64(0, 2)) == w_prime_2(0, 2) &&
              q::exactly(w_prime_2_f64(0, 3)) == w_prime_2(0, 3));
static_assert(qkv::exact::abs(q::exactly(w_prime_2_f64(0, 1)) - w_prime_2(0, 1)) == q(1, 1LL << 52));
static_assert(w_prime_2_f64 == rounded<double>(w_prime_2));
// float32 rounds each product and each partial sum: 7 roundings. It still lands on the
// nearest float for w'_22 and w'_23, not for w'_21 and w'_24
static_assert(w_prime_2_f32(0, 1) == w_prime_2(0, 1).to<float>() &&
              w_prime_2_f32(0, 2) == w_prime_2(0, 2).to<float>());
static_assert(w_prime_2_f32(0, 0) != w_prime_2(0, 0).to<float>() &&
              w_prime_2_f32(0, 3) != w_prime_2(0, 3).to<float>());
// and every float32 error is within gamma_4 sum |x_2k x_jk|, checked in exact arithmetic
static_assert([] {
  for (std::size_t j = 0; j < 4; ++j)
    if (!within_gamma<float>(w_prime_2_f32(0, j), dot_exactly(x_2, qkv::column(X, j)), 4)) return false;
  return true;
}());

// ---------------------------------------------------------------------------------------------
// Enter query and key: q_2 = W_q x_2, k_i = W_k x_i, w_T_2i = q_2ᵀ k_i
constexpr auto q_2 = qkv::matrix_product(exact_values(W_q), qkv::column(EX, 1));  // (4, 1)
constexpr auto K = qkv::matrix_product(exact_values(W_k), EX);  // (4, 4): column i is k_i
constexpr auto w_T_2 = qkv::matrix_product(qkv::transposed(q_2), K);  // (1, 4), exact

// the float32 path of example 03 (the same core functions in the same order: the same bits)
constexpr auto q_2_f32 = qkv::matrix_product(W_q, x_2);
constexpr auto K_f32 = qkv::matrix_product(W_k, X);
constexpr auto w_T_2_f32 = qkv::matrix_product(qkv::transposed(q_2_f32), K_f32);
// and in double, from the same float32 inputs
constexpr auto q_2_f64 = qkv::matrix_product(qkv::matrix_cast<double>(W_q), qkv::matrix_cast<double>(x_2));
constexpr auto K_f64 = qkv::matrix_product(qkv::matrix_cast<double>(W_k), qkv::matrix_cast<double>(X));
constexpr auto w_T_2_f64 = qkv::matrix_product(qkv::transposed(q_2_f64), K_f64);

// The projections in double: all 16 key elements exact; q_2 exact but for its first
// element, one rounding of 2^-53
static_assert(exact_values(K_f64) == K);
static_assert(qkv::block<3, 1>(exact_values(q_2_f64), 1, 0) == qkv::block<3, 1>(q_2, 1, 0));
static_assert(qkv::exact::abs(q::exactly(q_2_f64[0]) - q_2[0]) == q(1, 1LL << 53));
// in float32, each within gamma_4 sum |W_ik x_k| of the exact value
static_assert([] {
  for (std::size_t i = 0; i < 4; ++i)
    if (!within_gamma<float>(q_2_f32[i], dot_exactly(qkv::transposed(qkv::row(W_q, i)), x_2), 4))
      return false;
  return true;
}());

// The scores multiply those sums: their exact values have denominators near 2^104, so even
// double must round them. The error of a computed score splits, exactly, into
//   fl(q'.k') - q.k = (fl(q'.k') - q'.k')   this step's rounding, within gamma_4 sum |q'_k k'_k|
//                   + (q'.k' - q.k)         the errors of q' and k' carried through
// and both parts are computed here without rounding.
static_assert(exact_values(w_T_2_f64) != w_T_2);
// (one static_assert per score: each constant evaluation has its own step budget in clang)
template <std::size_t I>
constexpr bool score_within_gamma = within_gamma<float>(w_T_2_f32(0, I), dot_exactly(q_2_f32, qkv::column(K_f32, I)), 4);
template <std::size_t I>
constexpr bool score_within_gamma_f64 =
    within_gamma<double>(w_T_2_f64(0, I), dot_exactly(q_2_f64, qkv::column(K_f64, I)), 4);
static_assert(score_within_gamma<0> && score_within_gamma<1> && score_within_gamma<2> && score_within_gamma<3>);
static_assert(score_within_gamma_f64<0> && score_within_gamma_f64<1> && score_within_gamma_f64<2> &&
              score_within_gamma_f64<3>);
// the most negative score, w_T_23 = -13.57..., where q_2 and k_3 point apart
static_assert(w_T_2(0, 2) < q(-13) && w_T_2(0, 2) > q(-14));
// each path's total error on it, exactly, and in units of its own last place (an ulp of a
// number in [8, 16) is 2^-20 in float32 and 2^-49 in double)
constexpr q err_f32 = qkv::exact::abs(q::exactly(w_T_2_f32(0, 2)) - w_T_2(0, 2));
constexpr q err_f64 = qkv::exact::abs(q::exactly(w_T_2_f64(0, 2)) - w_T_2(0, 2));
constexpr q ulp_f32(1, 1LL << 20);
constexpr q ulp_f64(1, 1LL << 49);
// the carried part of double's error: q_2's first element is 2^-53 off and the keys are
// exact, so it is that error times k_3's first element
constexpr q carried_f64 = dot_exactly(q_2_f64, qkv::column(K_f64, 2)).value - w_T_2(0, 2);
static_assert(carried_f64 == (q::exactly(q_2_f64[0]) - q_2[0]) * K(0, 2));

// ---------------------------------------------------------------------------------------------
inline void walkthrough() {
  // std::cout only (qkv explain captures std::cout); snprintf formats the numbers
  auto number = [](const char* spec, double x) {
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, spec, x);
    return std::string(buffer);
  };
  std::cout << "Walking through the math (tutorial 002): its sums over the exact values of its float32 inputs\n"
            << "(qkv::exact::q128, fractions of Boost.Multiprecision int128_t, computed by the compiler)\n\n"
            << "x_2 is not [0.1870852, ...]: its first element is exactly " << q::exactly(x_2[0]) << "\n\n"
            << "Barebones: w'_2j = x_2 . x_j, exactly, and its error in double and in float32:\n";
  for (std::size_t j = 0; j < 4; ++j)
    std::cout << "  w'_2" << j + 1 << " = " << w_prime_2(0, j) << "\n"
              << "        ~ " << number("%.17g", w_prime_2(0, j).to<double>()) << "   double error "
              << number("%.1e", qkv::exact::abs(q::exactly(w_prime_2_f64(0, j)) - w_prime_2(0, j)).to<double>())
              << "   float32 " << number("%.9g", static_cast<double>(w_prime_2_f32(0, j))) << ", error "
              << number("%.1e", qkv::exact::abs(q::exactly(w_prime_2_f32(0, j)) - w_prime_2(0, j)).to<double>())
              << "\n";
  std::cout << "\nScores w_T_2i = q_2 . k_i, exactly:\n";
  for (std::size_t i = 0; i < 4; ++i)
    std::cout << "  w_T_2" << i + 1 << " = " << w_T_2(0, i) << "\n"
              << "         ~ " << number("%.17g", w_T_2(0, i).to<double>()) << "   double "
              << number("%.17g", w_T_2_f64(0, i)) << "   float32 "
              << number("%.9g", static_cast<double>(w_T_2_f32(0, i))) << "\n";
  std::cout << "\nw_T_23: float32 is " << number("%.3f", (err_f32 / ulp_f32).to<double>())
            << " float32 ulps from the exact score, double " << number("%.3f", (err_f64 / ulp_f64).to<double>())
            << " double ulps\n";
}

}  // namespace qkv::examples::the_math_exact

// the learner's page (qkv explain the_math_exact --html FILE): each float32 and double result
// next to its exact value, with its error against it in ulps; the proofs are this file's
// static_asserts (scripts/page_notes.py)
namespace qkv::examples::the_math_exact {

/// the error of each computed element against the exact value, in ulps of F at the exact value,
/// computed in rationals: (exactly(computed) - exact) / ulp(exact), the ulp a power of two
template <class F, std::size_t R, std::size_t C>
std::vector<double> ulps_against(const matrix<F, R, C>& computed, const matrix<q, R, C>& exact) {
  std::vector<double> out;
  for (std::size_t i = 0; i < R; ++i)
    for (std::size_t j = 0; j < C; ++j) {
      double a = exact(i, j).template to<double>(), ulp = 1;
      a = a < 0 ? -a : a;
      if (a == 0) {
        out.push_back((q::exactly(computed(i, j)) - exact(i, j)).template to<double>());
        continue;
      }
      for (; a >= 2; a /= 2) ulp *= 2;  // ulp(a) = 2^(exponent - digits + 1)
      for (; a < 1; a *= 2) ulp /= 2;
      for (int k = 1; k < std::numeric_limits<F>::digits; ++k) ulp /= 2;
      out.push_back((q::exactly(computed(i, j)) - exact(i, j)).template to<double>() / ulp);
    }
  return out;
}
template <std::size_t R, std::size_t C>
std::vector<std::string> fractions(const matrix<q, R, C>& m) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < R; ++i)
    for (std::size_t j = 0; j < C; ++j) {
      std::ostringstream os;
      os << m(i, j);
      out.push_back(os.str());
    }
  return out;
}

template <class Page>
void page(Page& p) {
  using how = typename Page::how;
  const auto xs = Page::labels("x_", 4), ks = Page::labels("k_", 4);
  const std::string exact_name = "the exact rational", f32 = "float32", f64 = "double";
  // its matrices without a how are inputs, or marked derived(): X, W_q and W_k are editable and
  // every step is recomputed by the page's module, each in its own type: the float32 run, the
  // double run (the inputs cast to double, as the example casts them: how::cast) and the exact
  // values (the inputs' exact rationals, how::cast, then sums and products); the exact scores
  // w_T_2 (denominators near 2^104) do not fit the module's rationals of 64-bit integers: the
  // page recomputes them over the example's own 128-bit ones, in a second module (wasm/qkv_wide.cpp)
  p.with_truth();
  p.step(1);
  p.text("Editing this page: X, W_q and W_k can be edited, and every step is recomputed by qkv's "
         "C++ in the page, each in its own type: the float32 run, the double run (the inputs cast "
         "to double) and the exact values (each input's exact rational, then exact sums and "
         "products). The module's exact numbers are rationals of 64-bit integers; the exact scores "
         "w_T_2, whose denominators are near 2^104, are computed over the example's 128-bit ones "
         "by a second module in the page. NaN and infinity have no exact value: the page refuses them.");
  p.matrix("X", X).cols(xs);
  p.matrix("EX", EX).cols(xs).caption("EX (X exactly)").how(how::cast("X"));
  p.matrix("Xᵀ", qkv::transposed(X)).rows(xs).hidden().how(how::transposed("X"));
  p.matrix("x_2ᵀ", qkv::transposed(qkv::column(X, 1))).rows({"x_2"}).hidden().how(how::block("Xᵀ", 1));
  p.matrix("x_2ᵀ (exact)", qkv::transposed(qkv::column(EX, 1))).rows({"x_2"}).hidden().how(how::cast("x_2ᵀ"));
  // the double run's operands: the float32 inputs cast to double (exactly), as the example casts them
  p.matrix("X (double)", qkv::matrix_cast<double>(X)).cols(xs).hidden().how(how::cast("X"));
  p.matrix("x_2ᵀ (double)", qkv::transposed(qkv::matrix_cast<double>(x_2))).rows({"x_2"}).hidden().how(how::cast("x_2ᵀ"));
  p.matrix("w_prime_2", w_prime_2).rows({"x_2"}).cols(xs).how(how::matmul("x_2ᵀ (exact)", "EX", 4));
  p.matrix("w_prime_2_f32", w_prime_2_f32).rows({"x_2"}).cols(xs).how(how::matmul("x_2ᵀ", "X", 4))
      .truth(ulps_against(w_prime_2_f32, w_prime_2), fractions(w_prime_2), exact_name + " w_prime_2");
  p.matrix("w_prime_2_f64", w_prime_2_f64).rows({"x_2"}).cols(xs).how(how::matmul("x_2ᵀ (double)", "X (double)", 4))
      .truth(ulps_against(w_prime_2_f64, w_prime_2), fractions(w_prime_2), exact_name + " w_prime_2");
  p.step(2);
  p.matrix("W_q", W_q);
  p.matrix("W_k", W_k);
  p.matrix("W_q (double)", qkv::matrix_cast<double>(W_q)).hidden().how(how::cast("W_q"));
  p.matrix("W_k (double)", qkv::matrix_cast<double>(W_k)).hidden().how(how::cast("W_k"));
  p.matrix("W_q (exact)", exact_values(W_q)).hidden().how(how::cast("W_q"));
  p.matrix("W_k (exact)", exact_values(W_k)).hidden().how(how::cast("W_k"));
  p.matrix("q_2", q_2).cols({"q_2"}).how(how::matmul("W_q (exact)", "EX", 4, 0, 0, 1));
  p.matrix("K", K).cols(ks).how(how::matmul("W_k (exact)", "EX", 4));
  p.matrix("q_2ᵀ (exact)", qkv::transposed(q_2)).rows({"q_2"}).hidden().how(how::transposed("q_2"));
  p.matrix("w_T_2", w_T_2).rows({"q_2"}).cols(ks).how(how::matmul("q_2ᵀ (exact)", "K", 4));
  p.matrix("q_2_f32", q_2_f32).cols({"q_2"}).how(how::matmul("W_q", "X", 4, 0, 0, 1))
      .truth(ulps_against(q_2_f32, q_2), fractions(q_2), exact_name + " q_2");
  p.matrix("K_f32", K_f32).cols(ks).how(how::matmul("W_k", "X", 4)).truth(ulps_against(K_f32, K), fractions(K), exact_name + " K");
  p.matrix("q_2_f32ᵀ", qkv::transposed(q_2_f32)).rows({"q_2"}).hidden().how(how::transposed("q_2_f32"));
  p.matrix("w_T_2_f32", w_T_2_f32).rows({"q_2"}).cols(ks).how(how::matmul("q_2_f32ᵀ", "K_f32", 4))
      .truth(ulps_against(w_T_2_f32, w_T_2), fractions(w_T_2), exact_name + " w_T_2");
  p.matrix("q_2_f64", q_2_f64).cols({"q_2"}).how(how::matmul("W_q (double)", "X (double)", 4, 0, 0, 1))
      .truth(ulps_against(q_2_f64, q_2), fractions(q_2), exact_name + " q_2");
  p.matrix("K_f64", K_f64).cols(ks).how(how::matmul("W_k (double)", "X (double)", 4)).truth(ulps_against(K_f64, K), fractions(K), exact_name + " K");
  p.matrix("q_2_f64ᵀ", qkv::transposed(q_2_f64)).rows({"q_2"}).hidden().how(how::transposed("q_2_f64"));
  p.matrix("w_T_2_f64", w_T_2_f64).rows({"q_2"}).cols(ks).how(how::matmul("q_2_f64ᵀ", "K_f64", 4))
      .truth(ulps_against(w_T_2_f64, w_T_2), fractions(w_T_2), exact_name + " w_T_2");
}

}  // namespace qkv::examples::the_math_exact

#ifndef QKV_EXAMPLE_NO_MAIN
int main() { qkv::examples::the_math_exact::walkthrough(); }
#endif
