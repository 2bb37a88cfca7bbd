// 01b_illustrated_exact.cpp: tutorial 000 over exact rationals: every step proven with ==, no tolerance.
//
// Example 01 computes "Illustrated: Self-Attention" in float32, as the tutorial does, and has
// to prove its softmax outputs within derived tolerances. This example takes the same inputs
// as exact numbers, qkv::exact::rational: a fraction in lowest terms that the compiler can
// evaluate. Inputs, weights, keys, querys, values and scores are integers; with the tutorial's
// rounded softmax [[0, .5, .5], [0, 1, 0], [0, .9, .1]] the weighted values and the outputs are
// exact fractions, [[2, 7, 3/2], [2, 8, 0], [2, 39/5, 3/10]], and each is proven equal, not
// near. Then the same sums in float32 and double, side by side: where they lose the exact
// answer, by exactly how much, and why.
//
// Tutorial 000's fractions fit 63 bits, so the integers are long long and the file needs no
// Boost (it compiles in about 0.4 s; Boost's int128_t would cost about 2.5 s more, measured in
// docs/examples/01b_illustrated_exact.md). Narrow integers are safe here because every
// operation checks for overflow: a step that did not fit would stop the compilation, naming
// the check. Example 03b needs wider integers and uses Boost's.
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>

#include <qkv/core/attention.hpp>
#include <qkv/core/check.hpp>
#include <qkv/core/matrix.hpp>
#include <qkv/exact/rational.hpp>

namespace qkv::examples::illustrated_exact {

namespace check = qkv::check;
using qkv::matrix;
using q = qkv::exact::rational<long long>;  // exact; an overflow is a compile-time error

// ---------------------------------------------------------------------------------------------
// Steps 1-2: inputs and weights, the tutorial's integers, now exact numbers
constexpr matrix<q, 3, 4> x{{
    {1, 0, 1, 0},  // Input 1
    {0, 2, 0, 2},  // Input 2
    {1, 1, 1, 1},  // Input 3
}};
constexpr matrix<q, 4, 3> w_key{{{0, 0, 1}, {1, 1, 0}, {0, 1, 0}, {1, 1, 0}}};
constexpr matrix<q, 4, 3> w_query{{{1, 0, 1}, {1, 0, 0}, {0, 0, 1}, {0, 1, 1}}};
constexpr matrix<q, 4, 3> w_value{{{0, 2, 0}, {0, 3, 0}, {1, 0, 3}, {1, 1, 0}}};

// Step 3: keys, querys, values = x @ w, the same core function as example 01 (qkv::project is
// generic over the number type)
constexpr auto keys = qkv::project(x, w_key, qkv::in_out);
constexpr auto querys = qkv::project(x, w_query, qkv::in_out);
constexpr auto values = qkv::project(x, w_value, qkv::in_out);
// [1, 0, 1, 0] x w_key = [0, 1, 1]; [0, 2, 0, 2] x w_key = [4, 4, 0]; [1, 1, 1, 1] x w_key = [2, 3, 1]
static_assert(proven<check::equal(keys, matrix<q, 3, 3>{{{0, 1, 1}, {4, 4, 0}, {2, 3, 1}}})>);
// [1, 0, 1, 0] x w_query = [1, 0, 2]; [0, 2, 0, 2] x w_query = [2, 2, 2]; [1, 1, 1, 1] -> [2, 1, 3]
static_assert(proven<check::equal(querys, matrix<q, 3, 3>{{{1, 0, 2}, {2, 2, 2}, {2, 1, 3}}})>);
// [1, 0, 1, 0] x w_value = [1, 2, 3]; [0, 2, 0, 2] x w_value = [2, 8, 0]; [1, 1, 1, 1] -> [2, 6, 3]
static_assert(proven<check::equal(values, matrix<q, 3, 3>{{{1, 2, 3}, {2, 8, 0}, {2, 6, 3}}})>);

// Step 4: scores = querys @ keys.T, no scaling
constexpr auto attn_scores = qkv::scores(querys, keys);
// [1, 0, 2] . [0, 1, 1] = 2, . [4, 4, 0] = 4, . [2, 3, 1] = 4
// [2, 2, 2] . ...       = 4,               16,              12
// [2, 1, 3] . ...       = 4,               12,              10
static_assert(proven<check::equal(attn_scores, matrix<q, 3, 3>{{{2, 4, 4}, {4, 16, 12}, {4, 12, 10}}})>);

// Step 5: the softmax has no exact value (e^2 is irrational), so, like the tutorial, use its
// rounded weights. decimal("0.9") is exactly 9/10, which no binary float is.
constexpr matrix<q, 3, 3> attn_scores_softmax_rounded{{
    {0, q::decimal("0.5"), q::decimal("0.5")},
    {0, 1, 0},
    {0, q::decimal("0.9"), q::decimal("0.1")},
}};
static_assert(q::decimal("0.9") == q(9, 10) && q::decimal("0.1") == q(1, 10));
// every row sums to exactly 1 (in float32, 0.9f + 0.1f is 1 only because the rounding errors
// of the two literals happen to cancel in the addition)
static_assert(proven<check::equal(qkv::row_sums(attn_scores_softmax_rounded), matrix<q, 3, 1>{{{1}, {1}, {1}}})>);

// Step 6: weighted values, [i][j] = softmax[j][i] * values[i] (value i weighted for query j)
constexpr auto weighted_values = qkv::weighted_values(attn_scores_softmax_rounded, values);
// value 1 [1, 2, 3] x [0, 0, 0]        -> 0, 0, 0
// value 2 [2, 8, 0] x [1/2, 1, 9/10]   -> [1, 4, 0], [2, 8, 0], [9/5, 36/5, 0]
// value 3 [2, 6, 3] x [1/2, 0, 1/10]   -> [1, 3, 3/2], [0, 0, 0], [1/5, 3/5, 3/10]
static_assert(proven<check::equal(weighted_values,
                                  qkv::stack<q, 3, 3, 3>{{
                                      matrix<q, 3, 3>{},
                                      matrix<q, 3, 3>{{{1, 4, 0}, {2, 8, 0}, {q(9, 5), q(36, 5), 0}}},
                                      matrix<q, 3, 3>{{{1, 3, q(3, 2)}, {0, 0, 0}, {q(1, 5), q(3, 5), q(3, 10)}}},
                                  }})>);

// Step 7: outputs = the sum of the weighted values
constexpr auto outputs = qkv::sum(weighted_values);
// Output 1 = [1, 4, 0] + [1, 3, 3/2]        = [2, 7, 3/2]
// Output 2 = [2, 8, 0]                      = [2, 8, 0]
// Output 3 = [9/5, 36/5, 0] + [1/5, 3/5, 3/10] = [10/5, 39/5, 3/10] = [2, 39/5, 3/10]
constexpr matrix<q, 3, 3> outputs_exact{{{2, 7, q(3, 2)}, {2, 8, 0}, {2, q(39, 5), q(3, 10)}}};
static_assert(proven<check::equal(outputs, outputs_exact)>);
// softmax @ values is the same sums: over exact numbers, the order cannot matter
static_assert(qkv::context(attn_scores_softmax_rounded, values) == outputs_exact);

// ---------------------------------------------------------------------------------------------
// Side by side: the same two steps in float32 and in double, from the same rounded softmax.
// The only inputs that are not integers are 0.5, 0.9 and 0.1; 0.5 is a binary fraction, 0.9 and
// 0.1 are not, so float and double start from 0.9f = 15099494 / 2^24 and 0.1f = 13421773 / 2^27.
template <class F>
constexpr auto outputs_in = qkv::sum(qkv::weighted_values(
    matrix<F, 3, 3>{{{0, F(0.5), F(0.5)}, {0, 1, 0}, {0, F(0.9), F(0.1)}}},
    qkv::matrix_cast<F>(values)));

constexpr auto outputs_f32 = outputs_in<float>;
constexpr auto outputs_f64 = outputs_in<double>;

// Outputs 1 and 2 and the first and last column of output 3 survive in both: they are sums of
// halves and integers, or (2 x 0.9f + 2 x 0.1f, 3 x 0.1f) round to the float nearest the answer.
static_assert(qkv::matrix_cast<float>(outputs_exact) == qkv::matrix_cast<float>(matrix<q, 3, 3>{
                  {{2, 7, q(3, 2)}, {2, 8, 0}, {2, q(39, 5), q(3, 10)}}}));
static_assert(outputs_f32(0, 2) == 1.5f && outputs_f32(2, 0) == 2.0f && outputs_f32(2, 2) == 0.3f);

// The 7.8: exactly what each representation holds, as fractions (q::exactly reads a float's
// bits; both sides of each == are computed by the compiler)
constexpr q out_f32 = q::exactly(outputs_f32(2, 1));
constexpr q out_f64 = q::exactly(outputs_f64(2, 1));
// float32: 0.9f x 8 = 7.2f and 0.1f x 6 = 0.6f are exact products of the rounded weights, but
// 7.2f + 0.6f = 7.79999983... lies between two floats and rounds down to 16357785 / 2^21 =
// 7.7999997138977050781 (the TensorFlow print 7.7999997): 3/10485760 = 2.9e-7 below 39/5,
// and one float32 ulp (2^-21) below 7.8f, the float nearest 39/5.
static_assert(out_f32 == q(16357785, 1 << 21));
static_assert(q(39, 5) - out_f32 == q(3, 10485760));
static_assert(q::exactly(7.8f) - out_f32 == q(1, 1 << 21));
static_assert(outputs_f32(2, 1) != 7.8f);
// double: 0.9 x 8 is exact again, 0.1 x 6 is a tie that rounds to even (0.6000000000000000888),
// and 7.2 + 0.6 is a tie again, rounded up to 8782019273372468 / 2^50: 1/1407374883553280 =
// 7.1e-16 above 39/5, and one double ulp (2^-50) above 7.8, the double nearest 39/5.
static_assert(out_f64 == q(8782019273372468LL, 1LL << 50));
static_assert(out_f64 - q(39, 5) == q(1, 1407374883553280LL));
static_assert(out_f64 - q::exactly(7.8) == q(1, 1LL << 50));
static_assert(outputs_f64(2, 1) != 7.8);
// and the exact 39/5 converts, correctly rounded, to the nearest float and double: 7.8f, 7.8
static_assert(q(39, 5).to<float>() == 7.8f && q(39, 5).to<double>() == 7.8);

// ---------------------------------------------------------------------------------------------
// the trace

template <class T, std::size_t R, std::size_t C>
std::string rows_str(const matrix<T, R, C>& m) {
  std::ostringstream out;
  out << "[";
  for (std::size_t i = 0; i < R; ++i) {
    out << (i ? ",\n [" : "[");
    for (std::size_t j = 0; j < C; ++j) out << (j ? ", " : "") << m(i, j);
    out << "]";
  }
  out << "]";
  return out.str();
}

inline void walkthrough() {
  std::cout << "Illustrated: Self-Attention (tutorial 000) over exact rationals (qkv::exact::rational<long long>)\n\n"
            << "Keys:\n" << rows_str(keys) << "\nQuerys:\n" << rows_str(querys) << "\nValues:\n"
            << rows_str(values) << "\n\nAttention scores (querys @ keys.T):\n" << rows_str(attn_scores)
            << "\n\nThe tutorial's rounded softmax, as exact fractions:\n" << rows_str(attn_scores_softmax_rounded)
            << "\n\nWeighted values (value i weighted for query j):\n";
  for (std::size_t i = 0; i < 3; ++i) std::cout << rows_str(weighted_values[i]) << "\n";
  std::cout << "\nOutputs, exactly:\n" << rows_str(outputs) << "\n\n";
  // std::cout only (qkv explain captures std::cout); snprintf formats the numbers
  auto number = [](const char* spec, double x) {
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, spec, x);
    return std::string(buffer);
  };
  std::cout << "Output 3, column 2, in three representations:\n"
            << "  exact    39/5  = 7.8\n"
            << "  double   " << number("%.17g", outputs_f64(2, 1)) << " = 39/5 + " << (out_f64 - q(39, 5)) << "\n"
            << "  float32  " << number("%.8g", static_cast<double>(outputs_f32(2, 1))) << "  = 39/5 - "
            << (q(39, 5) - out_f32) << "\n";
}

}  // namespace qkv::examples::illustrated_exact

// ---------------------------------------------------------------------------------------------
// the learner's page (qkv explain illustrated_exact --html FILE): the steps above over exact
// rationals, every cell shown as its fraction; the proofs are this file's static_asserts
namespace qkv::examples::illustrated_exact {

template <class Page>
void page(Page& p) {
  using how = typename Page::how;
  const auto q3 = Page::labels("q", 3), k3 = Page::labels("k", 3), v3 = Page::labels("v", 3);
  // its matrices without a how are exact inputs: editable, every step recomputed over exact
  // rationals by the page's module
  p.with_truth();
  p.step(1);
  p.matrix("x", x).rows(Page::labels("input ", 3));
  p.matrix("w_key", w_key);
  p.matrix("w_query", w_query);
  p.matrix("w_value", w_value);
  p.step(3);
  p.matrix("keys", keys).rows(k3).how(how::matmul("x", "w_key", 4));
  p.matrix("querys", querys).rows(q3).how(how::matmul("x", "w_query", 4));
  p.matrix("values", values).rows(v3).how(how::matmul("x", "w_value", 4));
  p.step(4);
  p.matrix("attn_scores", attn_scores).rows(q3).cols(k3).how(how::dot("querys", "keys", 3));
  p.step(5);
  p.matrix("attn_scores_softmax_rounded", attn_scores_softmax_rounded).rows(q3).cols(k3);
  p.heatmap("the rounded weights", {"attn_scores_softmax_rounded"});
  p.step(6);
  for (std::size_t n = 0; n < 3; ++n)
    p.matrix("weighted_values[" + std::to_string(n) + "]", Page::slice(weighted_values, n))
        .rows(q3).how(how::matmul("attn_scores_softmax_rounded", "values", 1, n, n));
  p.step(7);
  p.matrix("outputs", outputs).rows(q3).how(how::matmul("attn_scores_softmax_rounded", "values", 3))
      .proven(outputs_exact, "outputs_exact", 0);
}

}  // namespace qkv::examples::illustrated_exact

#ifndef QKV_EXAMPLE_NO_MAIN
int main() { qkv::examples::illustrated_exact::walkthrough(); }
#endif
