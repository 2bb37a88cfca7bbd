// The Boost.Multiprecision reference (include/qkv/reference/) as the truth for the float paths.
//
// For tutorials 000, 001, 002 and 004 the reference computes every step from the float32 inputs'
// exact values: projections and scores in cpp_rational (no rounding at all), the scaling,
// softmax and context in cpp_bin_float_50. Then four float results are judged against that
// truth, each with a bound derived from the standard model of rounding (core/bounds.hpp):
//   PyTorch's float32 and float64 results (tests/data/reference/, any summation order, FMA or
//   not: gamma_n bounds hold for every order) and core's float and double results computed
//   here at run time. For tutorial 001 (inputs from core/torch.hpp's generator, bit-exact with
//   PyTorch's) the PyTorch float64 results are those of tests/data/reference_001.hpp.
// Where a step is exact in floating point (tutorial 000's integer sums), the test asks for ==.
#include <doctest/doctest.h>

#include <array>
#include <cstddef>
#include <string>
#include <type_traits>

#include <qkv/core/attention.hpp>
#include <qkv/core/bounds.hpp>
#include <qkv/core/matrix.hpp>
#include <qkv/core/torch.hpp>
#include <qkv/reference/attention.hpp>
#include <qkv/reference/multiprecision.hpp>

#include "../data/reference_001.hpp"
#include "../support/reference_data.hpp"

namespace {

using qkv::matrix;
using qkv::reference::exact;
using qkv::reference::real;
using qkv::testing::at_run_time;
using qkv::testing::reference_file;
namespace ref = qkv::reference;
namespace bounds = qkv::bounds;

// The bounds are computed in double from values converted to double: each is off by a few
// double roundings, i.e. by a relative 1e-15 or so. 1e-9 relative on top covers that and
// nothing else (a float32 error is judged against a bound of order 1e-7 relative).
constexpr double bound_slack = 1.0 + 1e-9;

/// every |computed - truth| within bound; reports the worst error and its bound (llm.c style)
template <class F, class T, std::size_t R, std::size_t C>
void expect_within(const matrix<F, R, C>& computed, const matrix<T, R, C>& truth,
                   const matrix<double, R, C>& bound, const std::string& what) {
  const auto err = ref::error(computed, truth);
  std::size_t bad = 0, worst_k = 0;
  for (std::size_t k = 0; k < R * C; ++k) {
    if (!(err.v[k] <= real(bound.v[k] * bound_slack))) ++bad;
    if (err.v[k] > err.v[worst_k]) worst_k = k;
  }
  INFO(what << ": max error " << static_cast<double>(err.v[worst_k]) << " against the truth (its bound "
            << bound.v[worst_k] << ")");
  CHECK(bad == 0);
}

/// computed == truth exactly, element by element
template <class F, std::size_t R, std::size_t C>
void expect_exact(const matrix<F, R, C>& computed, const matrix<exact, R, C>& truth,
                  const std::string& what) {
  INFO(what << " is computed without rounding");
  CHECK(ref::exact_matrix(computed) == truth);
}

template <std::size_t R, std::size_t C>
matrix<double, R, C> zeros() {
  return matrix<double, R, C>{};
}

// ---------------------------------------------------------------------------------------------
// tutorial 000: x @ W (in x out), unscaled, softmax of each row, then the rounded softmax

TEST_CASE("tutorial 000: the reference's exact steps are the hand arithmetic") {
  const reference_file data("000_illustrated_self_attention.json");
  const auto x = data.get<float, 3, 4>("float32", "x");
  const auto r = ref::self_attention(
      x, data.get<float, 4, 3>("float32", "w_query"), data.get<float, 4, 3>("float32", "w_key"),
      data.get<float, 4, 3>("float32", "w_value"), qkv::in_out, ref::scaling::none());
  // querys [1,0,2],[2,2,2],[2,1,3]; keys [0,1,1],[4,4,0],[2,3,1]; scores = querys keysᵀ
  CHECK(r.scores == ref::exact_matrix(matrix<int, 3, 3>{{{2, 4, 4}, {4, 16, 12}, {4, 12, 10}}}));
  // softmax([2, 4, 4]) = [1, e^2, e^2] / (1 + 2 e^2): to 50 digits
  const real e2 = ref::exp(real(2));
  CHECK(boost::multiprecision::abs(r.weights(0, 0) - 1 / (1 + 2 * e2)) < real("1e-48"));
  CHECK(boost::multiprecision::abs(r.weights(0, 1) - e2 / (1 + 2 * e2)) < real("1e-48"));

  // with the tutorial's rounded softmax, the outputs are exact rationals:
  // [0, .5, .5] V = [2, 7, 3/2]; [0, 1, 0] V = [2, 8, 0]; [0, .9, .1] V = [1.8 + .2, 7.2 + .6, .3]
  const matrix<exact, 3, 3> rounded{{{0, ref::exact_decimal("0.5"), ref::exact_decimal("0.5")},
                                     {0, 1, 0},
                                     {0, ref::exact_decimal("0.9"), ref::exact_decimal("0.1")}}};
  const auto outputs = qkv::context(rounded, r.values);
  const matrix<exact, 3, 3> expected{{{2, 7, exact(3, 2)}, {2, 8, 0}, {2, exact(39, 5), exact(3, 10)}}};
  CHECK(outputs == expected);
}

template <class F>
void check_tutorial_000(const char* section) {
  const reference_file data("000_illustrated_self_attention.json");
  const std::string s = section;
  const auto x = at_run_time(data.get<F, 3, 4>("float32", "x"));
  const auto w_query = data.get<F, 4, 3>("float32", "w_query");
  const auto w_key = data.get<F, 4, 3>("float32", "w_key");
  const auto w_value = data.get<F, 4, 3>("float32", "w_value");
  const auto truth = ref::self_attention(x, w_query, w_key, w_value, qkv::in_out, ref::scaling::none());
  const auto core = qkv::self_attention(x, w_query, w_key, w_value, qkv::in_out, {qkv::scaling<F>::none()});

  // projections and scores: sums of small integers, exact in float and double
  expect_exact(data.get<F, 3, 3>(s, "querys"), truth.queries, s + " querys (PyTorch)");
  expect_exact(data.get<F, 3, 3>(s, "keys"), truth.keys, s + " keys (PyTorch)");
  expect_exact(data.get<F, 3, 3>(s, "values"), truth.values, s + " values (PyTorch)");
  expect_exact(data.get<F, 3, 3>(s, "attn_scores"), truth.scores, s + " scores (PyTorch)");
  expect_exact(core.queries, truth.queries, s + " querys (core)");
  expect_exact(core.keys, truth.keys, s + " keys (core)");
  expect_exact(core.values, truth.values, s + " values (core)");
  expect_exact(core.scores, truth.scores, s + " scores (core)");

  // softmax from exact scores: core/bounds.hpp's bound with ds = 0
  const auto scores = ref::to_double(truth.scores);
  const auto w = ref::to_double(truth.weights);
  const auto dw = bounds::softmax_rows_error<F>(scores, w, zeros<3, 3>());
  expect_within(data.get<F, 3, 3>(s, "attn_scores_softmax"), truth.weights, dw, s + " softmax (PyTorch)");
  expect_within(core.weights, truth.weights, dw, s + " softmax (core)");

  // outputs = weights V: gamma_3 (|w| + dw) |v| + dw |v| (V exact)
  const auto v = ref::to_double(truth.values);
  const auto dout = bounds::product_error<F>(w, dw, v, zeros<3, 3>());
  expect_within(data.get<F, 3, 3>(s, "outputs_exact_softmax"), truth.context, dout, s + " outputs (PyTorch)");
  expect_within(data.get<F, 3, 3>(s, "outputs_exact_softmax_matmul"), truth.context, dout,
                s + " outputs, matmul (PyTorch)");
  expect_within(core.context, truth.context, dout, s + " outputs (core)");

  // the rounded softmax as F (0.9 and 0.1 are not exact in binary): the truth for the float
  // path is the exact product of its actual inputs, and the float result is within gamma_3 of it
  const auto rounded = data.get<F, 3, 3>(s, "attn_scores_softmax_rounded");
  const auto rounded_truth = qkv::context(ref::exact_matrix(rounded), truth.values);
  const auto drounded = bounds::product_error<F>(qkv::matrix_cast<double>(rounded), v);
  expect_within(data.get<F, 3, 3>(s, "outputs_rounded_softmax"), rounded_truth, drounded,
                s + " outputs of the rounded softmax (PyTorch)");
  expect_within(qkv::context(rounded, core.values), rounded_truth, drounded,
                s + " outputs of the rounded softmax (core)");
}

TEST_CASE("tutorial 000 in float32 is within its derived bounds of the 50-digit truth") {
  check_tutorial_000<float>("float32");
}

TEST_CASE("tutorial 000 in float64 is within its derived bounds of the 50-digit truth") {
  check_tutorial_000<double>("float64");
}

TEST_CASE("tutorial 000: float32 gives 39/5 - 3/10485760 where the exact answer is 39/5") {
  const reference_file data("000_illustrated_self_attention.json");
  const exact f32 = ref::exact_value(data.get<float, 3, 3>("float32", "outputs_rounded_softmax")(2, 1));
  const exact f64 = ref::exact_value(data.get<double, 3, 3>("float64", "outputs_rounded_softmax")(2, 1));
  const exact truth(39, 5);
  MESSAGE("float32 output - 39/5 = " << (f32 - truth) << ", float64 output - 39/5 = " << (f64 - truth));
  // 7.7999997f = 16357785 / 2^21, and 39/5 = 81788928 / (5 2^21) while 16357785 / 2^21 =
  // 81788925 / (5 2^21): the float32 result is 3 / (5 2^21) = 3/10485760 below 39/5
  CHECK(f32 == ref::exact_value(7.79999971389770507812f));
  CHECK(truth - f32 == exact(3, 10485760));
  // and one float32 ulp (2^-21 between 4 and 8) below 7.8f = 8178893 / 2^20, the float nearest
  // 7.8: the inputs 0.9f and 0.1f and the sum 7.2f + 0.6f each rounded once
  CHECK(ref::exact_value(7.8f) - f32 == exact(1, 1 << 21));
  // float64: the inputs 0.9 and 0.1 are off by at most u = 2^-53 relative, the two products
  // and the sum round once each: |f64 - 39/5| <= (0.9 * 8 + 0.1 * 6) (u + gamma_2) < 3 * 7.8 u
  CHECK(boost::multiprecision::abs(f64 - truth) <=
        exact(234, 10) * exact(1, boost::multiprecision::cpp_int(1) << 53));
}

// ---------------------------------------------------------------------------------------------
// tutorial 002: column vectors, q_2 = W_q x_2, no scaling, the softmax written out by hand

template <class F>
void check_tutorial_002(const char* section) {
  const reference_file data("002_self_attention_math_tf_values.json");
  const std::string s = section;
  // X: the four inputs as columns (d, t) = (4, 4)
  matrix<F, 4, 4> X;
  for (std::size_t t = 0; t < 4; ++t) {
    const auto x_t = data.get<F, 4, 1>("float32", "x_" + std::to_string(t + 1));
    for (std::size_t i = 0; i < 4; ++i) X(i, t) = x_t(i, 0);
  }
  X = at_run_time(X);
  const auto W_q = data.get<F, 4, 4>("float32", "W_q");
  const auto W_k = data.get<F, 4, 4>("float32", "W_k");
  const auto W_v = data.get<F, 4, 4>("float32", "W_v");
  const auto truth = ref::self_attention(X, W_q, W_k, W_v, qkv::columns, ref::scaling::none());
  const auto core = qkv::self_attention(X, W_q, W_k, W_v, qkv::columns, {qkv::scaling<F>::none()});

  // projections, tokens as rows: Xᵀ Wᵀ, gamma_4 |Xᵀ| |Wᵀ| (inputs exact)
  const auto Xt = qkv::transposed(qkv::matrix_cast<double>(X));
  const auto dq = bounds::product_error<F>(Xt, qkv::transposed(qkv::matrix_cast<double>(W_q)));
  const auto dk = bounds::product_error<F>(Xt, qkv::transposed(qkv::matrix_cast<double>(W_k)));
  const auto dv = bounds::product_error<F>(Xt, qkv::transposed(qkv::matrix_cast<double>(W_v)));
  expect_within(core.queries, truth.queries, dq, s + " queries (core)");
  expect_within(core.keys, truth.keys, dk, s + " keys (core)");
  expect_within(core.values, truth.values, dv, s + " values (core)");
  // PyTorch computed q_2 and k_1..k_4, v_1..v_4 as column vectors: row t of the truth
  expect_within(data.get<F, 1, 4>(s, "q_2"), qkv::row(truth.queries, 1), qkv::row(dq, 1),
                s + " q_2 (PyTorch)");
  for (std::size_t t = 0; t < 4; ++t) {
    const std::string n = std::to_string(t + 1);
    expect_within(data.get<F, 1, 4>(s, "k_" + n), qkv::row(truth.keys, t), qkv::row(dk, t),
                  s + " k_" + n + " (PyTorch)");
    expect_within(data.get<F, 1, 4>(s, "v_" + n), qkv::row(truth.values, t), qkv::row(dv, t),
                  s + " v_" + n + " (PyTorch)");
  }

  // scores from the computed q and k: gamma_4 (|q| + dq)(|k| + dk) + dq |k| + |q| dk + dq dk
  const auto q = ref::to_double(truth.queries), k = ref::to_double(truth.keys);
  const auto ds = bounds::product_error<F>(q, dq, qkv::transposed(k), qkv::transposed(dk));
  expect_within(core.scores, truth.scores, ds, s + " scores (core)");
  matrix<F, 1, 4> w_T_2;
  for (std::size_t t = 0; t < 4; ++t)
    w_T_2(0, t) = data.get<F, 1, 1>(s, "w_T_2" + std::to_string(t + 1))(0, 0);
  expect_within(w_T_2, qkv::row(truth.scores, 1), qkv::row(ds, 1), s + " w_T_2i (PyTorch)");

  // the hand softmax: exp(s + ds) = e^s e^ds, and exp within 1 ulp (2u):
  // de <= e ((e^ds - 1) + 2u e^ds) <= e (ds (1 + ds) + 2u (1 + ds)) for ds < 1
  constexpr double u = bounds::unit_roundoff<F>();
  const auto e_truth =
      qkv::map(qkv::row(truth.scores, 1), [](const exact& x) { return ref::exp(ref::to_real(x)); });
  matrix<F, 1, 4> exp_w;
  matrix<double, 1, 4> de;
  for (std::size_t t = 0; t < 4; ++t) {
    exp_w(0, t) = data.get<F, 1, 1>(s, "exp_w_T_2" + std::to_string(t + 1))(0, 0);
    const double e = static_cast<double>(e_truth(0, t)), d = ds(1, t);
    de(0, t) = e * (d * (1 + d) + 2 * u * (1 + d)) * 1.01;
  }
  expect_within(exp_w, e_truth, de, s + " exp_w_T_2i (PyTorch)");

  // weights: core/bounds.hpp's softmax bound covers both the hand softmax and core's
  // max-subtracted one (the hand one has no subtraction to round)
  const auto w = ref::to_double(truth.weights);
  const auto dw = bounds::softmax_rows_error<F>(ref::to_double(truth.scores), w, ds);
  expect_within(core.weights, truth.weights, dw, s + " weights (core)");
  matrix<F, 1, 4> w_2;
  for (std::size_t t = 0; t < 4; ++t) w_2(0, t) = data.get<F, 1, 1>(s, "w_2" + std::to_string(t + 1))(0, 0);
  expect_within(w_2, qkv::row(truth.weights, 1), qkv::row(dw, 1), s + " w_2i (PyTorch)");

  // y_2 = sum_i w_2i v_i: gamma_4 (|w| + dw)(|v| + dv) + dw |v| + |w| dv + dw dv
  const auto v = ref::to_double(truth.values);
  const auto dy = bounds::product_error<F>(w, dw, v, dv);
  expect_within(core.context, truth.context, dy, s + " context (core)");
  expect_within(data.get<F, 1, 4>(s, "y_2"), qkv::row(truth.context, 1), qkv::row(dy, 1),
                s + " y_2 (PyTorch)");
}

TEST_CASE("tutorial 002 in float32 is within its derived bounds of the 50-digit truth") {
  check_tutorial_002<float>("float32");
}

TEST_CASE("tutorial 002 in float64 is within its derived bounds of the 50-digit truth") {
  check_tutorial_002<double>("float64");
}

TEST_CASE("tutorial 002: the barebones scores x_2ᵀ x_j are exact rationals, and float32 rounds them") {
  const reference_file data("002_self_attention_math_tf_values.json");
  matrix<float, 4, 4> X;
  for (std::size_t t = 0; t < 4; ++t) {
    const auto x_t = data.get<float, 4, 1>("float32", "x_" + std::to_string(t + 1));
    for (std::size_t i = 0; i < 4; ++i) X(i, t) = x_t(i, 0);
  }
  X = at_run_time(X);
  // w'_2j = x_2ᵀ x_j over the inputs' exact values: no rounding anywhere
  const auto EX = ref::exact_matrix(X);
  const auto w_prime_exact = qkv::matrix_product(qkv::transposed(qkv::column(EX, 1)), EX);  // (1, 4)
  const auto w_prime_f32 = qkv::matrix_product(qkv::transposed(qkv::column(X, 1)), X);
  const auto w_prime_f64 = qkv::matrix_product(qkv::transposed(qkv::column(qkv::matrix_cast<double>(X), 1)),
                                               qkv::matrix_cast<double>(X));
  // each input has a 24-bit significand, so each product has at most 48 significant bits and
  // the exact sum of four at most 48 + (exponent spread) bits: double holds it exactly when
  // the spread is small, float32 cannot. Show both against the exact value.
  const auto bound32 = bounds::product_error<float>(
      qkv::transposed(qkv::column(qkv::matrix_cast<double>(X), 1)), qkv::matrix_cast<double>(X));
  expect_within(w_prime_f32, w_prime_exact, bound32, "barebones scores in float32");
  const auto bound64 = bounds::product_error<double>(
      qkv::transposed(qkv::column(qkv::matrix_cast<double>(X), 1)), qkv::matrix_cast<double>(X));
  expect_within(w_prime_f64, w_prime_exact, bound64, "barebones scores in float64");
  // w'_22 = |x_2|^2 > 0 exactly, and no other score comes near it
  CHECK(w_prime_exact(0, 1) > exact(4));
  CHECK(w_prime_exact(0, 3) < exact(1));
  MESSAGE("w'_22 = " << w_prime_exact(0, 1) << " exactly; float32 " << w_prime_f32(0, 1));
}

// ---------------------------------------------------------------------------------------------
// tutorial 004: nn.Linear (out x in, no bias), scores / sqrt(2), softmax of each row

template <class F>
void check_tutorial_004(const char* section) {
  const reference_file data("004_statquest_self_attention.json");
  const std::string s = section;
  const auto enc = at_run_time(data.get<F, 3, 2>("float32", "encodings_matrix"));
  const auto W_q = data.get<F, 2, 2>("float32", "W_q_weight");
  const auto W_k = data.get<F, 2, 2>("float32", "W_k_weight");
  const auto W_v = data.get<F, 2, 2>("float32", "W_v_weight");
  const auto truth = ref::self_attention(enc, W_q, W_k, W_v, qkv::out_in, ref::scaling::divide_by_sqrt_dk());
  const auto core = qkv::self_attention(enc, W_q, W_k, W_v, qkv::out_in);

  // q = enc W_qᵀ: gamma_2 |enc| |W_q|ᵀ
  const auto E = qkv::matrix_cast<double>(enc);
  const auto dq = bounds::product_error<F>(E, qkv::transposed(qkv::matrix_cast<double>(W_q)));
  const auto dk = bounds::product_error<F>(E, qkv::transposed(qkv::matrix_cast<double>(W_k)));
  const auto dv = bounds::product_error<F>(E, qkv::transposed(qkv::matrix_cast<double>(W_v)));
  expect_within(data.get<F, 3, 2>(s, "q"), truth.queries, dq, s + " q (PyTorch)");
  expect_within(data.get<F, 3, 2>(s, "k"), truth.keys, dk, s + " k (PyTorch)");
  expect_within(data.get<F, 3, 2>(s, "v"), truth.values, dv, s + " v (PyTorch)");
  expect_within(core.queries, truth.queries, dq, s + " q (core)");
  expect_within(core.keys, truth.keys, dk, s + " k (core)");
  expect_within(core.values, truth.values, dv, s + " v (core)");

  const auto q = ref::to_double(truth.queries), k = ref::to_double(truth.keys);
  const auto ds = bounds::product_error<F>(q, dq, qkv::transposed(k), qkv::transposed(dk));
  expect_within(data.get<F, 3, 3>(s, "sims"), truth.scores, ds, s + " sims (PyTorch)");
  expect_within(core.scores, truth.scores, ds, s + " sims (core)");

  // scaled = fl(s' / c') with s' = s + e and c' = sqrt(2) (1 + eta), |eta| <= 2u (sqrt within
  // 1 ulp), and the division rounding delta: |s'(1 + delta) / c' - s / c|
  //   <= (|e| + |s| (|delta| + |eta|)) / (c (1 - |eta|)) <= (ds + 3u |s|) / sqrt(2) (1 + 3u)
  constexpr double u = bounds::unit_roundoff<F>();
  const auto s_abs = bounds::abs(ref::to_double(truth.scores));
  matrix<double, 3, 3> dscaled;
  for (std::size_t i = 0; i < 9; ++i)
    dscaled.v[i] = (ds.v[i] + 3 * u * s_abs.v[i]) / 1.4142135623730951 * (1 + 3 * u);
  expect_within(data.get<F, 3, 3>(s, "scaled_sims"), truth.scaled_scores, dscaled,
                s + " scaled sims (PyTorch)");
  expect_within(core.scaled_scores, truth.scaled_scores, dscaled, s + " scaled sims (core)");

  const auto w = ref::to_double(truth.weights);
  const auto dw = bounds::softmax_rows_error<F>(ref::to_double(truth.scaled_scores), w, dscaled);
  expect_within(data.get<F, 3, 3>(s, "attention_percents"), truth.weights, dw,
                s + " attention percents (PyTorch)");
  expect_within(core.weights, truth.weights, dw, s + " attention percents (core)");

  const auto dout = bounds::product_error<F>(w, dw, ref::to_double(truth.values), dv);
  expect_within(data.get<F, 3, 2>(s, "output"), truth.context, dout, s + " output (PyTorch)");
  expect_within(core.context, truth.context, dout, s + " output (core)");
}

TEST_CASE("tutorial 004 in float32 is within its derived bounds of the 50-digit truth") {
  check_tutorial_004<float>("float32");
}

TEST_CASE("tutorial 004 in float64 is within its derived bounds of the 50-digit truth") {
  check_tutorial_004<double>("float64");
}

TEST_CASE("the reference's exact values and conversions") {
  // 0.1f is 13421773 / 2^27; 7.8 as a double is 8782019273372467 / 2^50
  CHECK(ref::exact_value(0.1f) == exact(13421773, 134217728));
  CHECK(ref::exact_value(7.8) ==
        exact(boost::multiprecision::cpp_int(8782019273372467LL), boost::multiprecision::cpp_int(1) << 50));
  CHECK(ref::exact_value(-3) == exact(-3));
  CHECK(ref::exact_value(qkv::exact::rational<long long>(39, 5)) == exact(39, 5));
  CHECK(ref::exact_decimal("-0.25") == exact(-1, 4));
  CHECK_THROWS_AS((void)ref::exact_decimal("0.2.5"), std::invalid_argument);
  CHECK_THROWS_AS((void)ref::exact_value(std::numeric_limits<double>::infinity()), std::domain_error);
  // sqrt(2)^2 = 2 to 50 digits
  CHECK(boost::multiprecision::abs(ref::sqrt(real(2)) * ref::sqrt(real(2)) - 2) < real("1e-48"));
  // a softmax row sums to 1 to 50 digits
  const auto w = ref::softmax_rows(matrix<real, 1, 3>{{{real(1), real(-30), real(700)}}});
  CHECK(boost::multiprecision::abs(w(0, 0) + w(0, 1) + w(0, 2) - 1) < real("1e-48"));
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// tutorial 001: "Life is short, eat dessert first", the generator's embedding and weights;
// column vectors (W x), scores / sqrt(24)

namespace {

template <class F>
void check_tutorial_001(const char* precision) {
  const std::string s = precision;
  // torch.manual_seed(123); nn.Embedding(6, 16); the sentence's ids [0, 4, 5, 2, 1, 3]
  qkv::torch::generator embedding_generator{123};
  const auto embedding = embedding_generator.embedding<float, 6, 16>();
  const auto E = qkv::torch::embedding_lookup(embedding, std::array<std::size_t, 6>{0, 4, 5, 2, 1, 3});
  // torch.manual_seed(123) again; W_query, W_key = rand(24, 16), W_value = rand(28, 16)
  qkv::torch::generator weight_generator{123};
  const auto W_q = weight_generator.rand<float, 24, 16>();
  const auto W_k = weight_generator.rand<float, 24, 16>();
  const auto W_v = weight_generator.rand<float, 28, 16>();
  // tokens as columns: X (16, 6)
  const auto X = at_run_time(qkv::matrix_cast<F>(qkv::transposed(E)));
  const auto truth =
      ref::self_attention(X, qkv::matrix_cast<F>(W_q), qkv::matrix_cast<F>(W_k), qkv::matrix_cast<F>(W_v),
                          qkv::columns, ref::scaling::divide_by_sqrt_dk());
  const auto core = qkv::self_attention(X, qkv::matrix_cast<F>(W_q), qkv::matrix_cast<F>(W_k),
                                        qkv::matrix_cast<F>(W_v), qkv::columns);

  // projections: gamma_16 |x| |W|ᵀ
  const auto Ed = qkv::matrix_cast<double>(E);
  const auto dq = bounds::product_error<F>(Ed, qkv::transposed(qkv::matrix_cast<double>(W_q)));
  const auto dk = bounds::product_error<F>(Ed, qkv::transposed(qkv::matrix_cast<double>(W_k)));
  const auto dv = bounds::product_error<F>(Ed, qkv::transposed(qkv::matrix_cast<double>(W_v)));
  expect_within(core.queries, truth.queries, dq, s + " queries (core)");
  expect_within(core.keys, truth.keys, dk, s + " keys (core)");
  expect_within(core.values, truth.values, dv, s + " values (core)");
  // scores: gamma_24 (|q| + dq)(|k| + dk) + ...
  const auto q = ref::to_double(truth.queries), k = ref::to_double(truth.keys);
  const auto ds = bounds::product_error<F>(q, dq, qkv::transposed(k), qkv::transposed(dk));
  expect_within(core.scores, truth.scores, ds, s + " omega (core)");
  // scaled by the divisor sqrt(24) rounded to F (sqrt within 1 ulp), as in tutorial 004
  constexpr double u = bounds::unit_roundoff<F>();
  const auto s_abs = bounds::abs(ref::to_double(truth.scores));
  matrix<double, 6, 6> dscaled;
  for (std::size_t i = 0; i < 36; ++i)
    dscaled.v[i] = (ds.v[i] + 3 * u * s_abs.v[i]) / 4.898979485566356 * (1 + 3 * u);
  expect_within(core.scaled_scores, truth.scaled_scores, dscaled, s + " omega / sqrt(24) (core)");
  const auto w = ref::to_double(truth.weights);
  const auto dw = bounds::softmax_rows_error<F>(ref::to_double(truth.scaled_scores), w, dscaled);
  expect_within(core.weights, truth.weights, dw, s + " attention weights (core)");
  const auto dout = bounds::product_error<F>(w, dw, ref::to_double(truth.values), dv);
  expect_within(core.context, truth.context, dout, s + " context (core)");

  if constexpr (std::is_same_v<F, double>) {
    // PyTorch's float64 run on the same float32 inputs (tests/data/reference_001.hpp)
    namespace pt = qkv_test::reference_001;
    expect_within(matrix<double, 6, 24>(pt::queries), truth.queries, dq, "float64 queries (PyTorch)");
    expect_within(matrix<double, 6, 24>(pt::keys), truth.keys, dk, "float64 keys (PyTorch)");
    expect_within(matrix<double, 6, 28>(pt::values), truth.values, dv, "float64 values (PyTorch)");
    expect_within(matrix<double, 6, 6>(pt::omega), truth.scores, ds, "float64 omega (PyTorch)");
    expect_within(matrix<double, 6, 6>(pt::attention_weights), truth.weights, dw,
                  "float64 attention weights (PyTorch)");
    expect_within(matrix<double, 6, 28>(pt::context), truth.context, dout, "float64 context (PyTorch)");
  }
}

}  // namespace

TEST_CASE("tutorial 001 in float32 is within its derived bounds of the 50-digit truth") {
  check_tutorial_001<float>("float32");
}

TEST_CASE("tutorial 001 in float64 (core and PyTorch) is within its derived bounds of the 50-digit truth") {
  check_tutorial_001<double>("float64");
}
