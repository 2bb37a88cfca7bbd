// Tutorials 000, 002 and 004 computed at run time, float32 and float64, every intermediate
// against PyTorch's reference values (tests/data/reference/), with bounds derived from the
// standard model of rounding (core/bounds.hpp). And the same computations at compile time and
// at run time give the same bits (the FMA policy: -ffp-contract=off, docs/numerics.md).
#include <doctest/doctest.h>

#include <cstdio>
#include <string>

#include "../support/reference_data.hpp"

#define QKV_EXAMPLE_NO_MAIN
#include "../../examples/01_illustrated_self_attention.cpp"
#include "../../examples/03_walking_through_the_math.cpp"
#include "../../examples/05_statquest_self_attention.cpp"

#include <qkv/core/attention.hpp>
#include <qkv/core/bounds.hpp>
#include <qkv/core/softmax.hpp>

namespace {

using qkv::matrix;
using qkv::matrix_cast;
using qkv::testing::at_run_time;
using qkv::testing::reference_file;

/// every |actual - expected| within its bound; reports the worst element as llm.c does
template <class T, std::size_t R, std::size_t C>
void expect_within(const matrix<T, R, C>& actual, const matrix<double, R, C>& expected,
                   const matrix<double, R, C>& bound, const std::string& what) {
  double worst = 0, worst_bound = 0;
  std::size_t bad = 0;
  for (std::size_t k = 0; k < R * C; ++k) {
    const double d = std::abs(double(actual.v[k]) - expected.v[k]);
    if (!(d <= bound.v[k])) ++bad;
    if (d > worst) {
      worst = d;
      worst_bound = bound.v[k];
    }
  }
  INFO(what << ": max difference " << worst << " (its bound " << worst_bound << ")");
  CHECK(bad == 0);
}

/// the reference's own rounding in float64 (tiny next to float32's, but counted)
template <std::size_t R, std::size_t C>
matrix<double, R, C> plus(const matrix<double, R, C>& b, double e) {
  return qkv::map(b, [e](double x) { return x + e; });
}

// ---------------------------------------------------------------------------------------------
// tutorial 000: x @ W (in x out), unscaled, softmax of each row

template <class F>
void check_tutorial_000(const std::string& precision) {
  const reference_file ref("000_illustrated_self_attention.json");
  const auto x = at_run_time(ref.get<F, 3, 4>("float32", "x"));
  const auto w_key = ref.get<F, 4, 3>("float32", "w_key");
  const auto w_query = ref.get<F, 4, 3>("float32", "w_query");
  const auto w_value = ref.get<F, 4, 3>("float32", "w_value");

  const auto r = qkv::self_attention(x, w_query, w_key, w_value, qkv::in_out, {qkv::scaling<F>::none()});
  // integer inputs, products and sums below 2^24: exact in float32 and float64
  CHECK(matrix_cast<double>(r.keys) == ref.get<double, 3, 3>(precision, "keys"));
  CHECK(matrix_cast<double>(r.queries) == ref.get<double, 3, 3>(precision, "querys"));
  CHECK(matrix_cast<double>(r.values) == ref.get<double, 3, 3>(precision, "values"));
  CHECK(matrix_cast<double>(r.scores) == ref.get<double, 3, 3>(precision, "attn_scores"));

  // the softmax: exact scores (ds = 0), only its own rounding
  const auto s = matrix_cast<double>(r.scores);
  const auto dw =
      qkv::bounds::softmax_rows_error<F>(s, matrix_cast<double>(r.weights), matrix<double, 3, 3>{});
  expect_within(r.weights, ref.get<double, 3, 3>("float64", "attn_scores_softmax"), plus(dw, 1e-16),
                precision + " softmax");
  // outputs = weights @ values: weights off by dw, values exact
  const auto v = matrix_cast<double>(r.values);
  const auto dout =
      qkv::bounds::product_error<F>(matrix_cast<double>(r.weights), dw, v, matrix<double, 3, 3>{});
  expect_within(r.context, ref.get<double, 3, 3>("float64", "outputs_exact_softmax"), plus(dout, 1e-15),
                precision + " outputs");

  // the weighted values (3, 3, 3): each one product, off by |v| dw + u |w v|
  const auto wv = qkv::weighted_values(r.weights, r.values);
  const auto wv_ref = ref.json().at("float64").at("weighted_values_exact_softmax").at("data");
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 3; ++j)
      for (std::size_t c = 0; c < 3; ++c) {
        const double exact = wv_ref[i][j][c].get<double>();
        const double bound =
            std::abs(v(i, c)) * dw(j, i) + qkv::bounds::unit_roundoff<F>() * std::abs(exact) + 1e-16;
        CHECK(std::abs(double(wv(i, j, c)) - exact) <= bound);
      }

  // the tutorial's rounded softmax, read from the reference in this precision
  const auto rounded =
      ref.get<F, 3, 3>(precision == "float32" ? "float32" : "float64", "attn_scores_softmax_rounded");
  const auto outputs_rounded = qkv::sum(qkv::weighted_values(rounded, r.values));
  // the same products summed in the same order as PyTorch's sum over dim 0: the same bits
  CHECK(matrix_cast<double>(outputs_rounded) == ref.get<double, 3, 3>(precision, "outputs_rounded_softmax"));
}

TEST_CASE("tutorial 000 at run time matches PyTorch in float32 and float64") {
  SUBCASE("float32") { check_tutorial_000<float>("float32"); }
  SUBCASE("float64") { check_tutorial_000<double>("float64"); }
}

TEST_CASE("tutorial 000's whole-matrix softmax is the numpy cell's pitfall") {
  const reference_file ref("000_illustrated_self_attention.json");
  const auto scores = at_run_time(ref.get<double, 3, 3>("float64", "attn_scores"));
  const auto all = qkv::softmax_all(scores);
  // one softmax over 9 values: reshape the bound's inputs to one row of 9
  matrix<double, 1, 9> s9, w9;
  for (std::size_t k = 0; k < 9; ++k) {
    s9.v[k] = scores.v[k];
    w9.v[k] = all.v[k];
  }
  const auto dw = qkv::bounds::softmax_rows_error<double>(s9, w9, matrix<double, 1, 9>{});
  const auto expected = ref.get<double, 3, 3>("float64", "numpy_whole_matrix_softmax");
  for (std::size_t k = 0; k < 9; ++k) CHECK(std::abs(all.v[k] - expected.v[k]) <= dw.v[k] + 1e-18);
  // and its rows do not sum to 1: row 1 sums to 1.26e-5
  CHECK(qkv::row_sums(all)(0, 0) == doctest::Approx(1.2625835807136469e-05).epsilon(1e-12));
}

// ---------------------------------------------------------------------------------------------
// tutorial 002: column vectors, W x, unscaled, the softmax written out (no maximum subtracted)

template <class F>
void check_tutorial_002(const std::string& precision) {
  const reference_file ref("002_self_attention_math_tf_values.json");
  using vec = matrix<F, 4, 1>;
  vec x[4];
  for (int i = 0; i < 4; ++i) x[i] = at_run_time(ref.get<F, 4, 1>("float32", "x_" + std::to_string(i + 1)));
  const auto W_q = ref.get<F, 4, 4>("float32", "W_q"), W_k = ref.get<F, 4, 4>("float32", "W_k"),
             W_v = ref.get<F, 4, 4>("float32", "W_v");
  using qkv::bounds::product_error;
  const auto Wq = matrix_cast<double>(W_q), Wk = matrix_cast<double>(W_k), Wv = matrix_cast<double>(W_v);

  const vec q_2 = qkv::matrix_product(W_q, x[1]);
  const auto dq = product_error<F>(Wq, matrix_cast<double>(x[1]));
  expect_within(q_2, ref.get<double, 4, 1>("float64", "q_2"), plus(dq, 1e-14), precision + " q_2");

  double e[4], de[4];
  vec v[4];
  matrix<double, 4, 1> dv[4];
  for (int i = 0; i < 4; ++i) {
    const std::string n = std::to_string(i + 1);
    const vec k = qkv::matrix_product(W_k, x[i]);
    const auto dk = product_error<F>(Wk, matrix_cast<double>(x[i]));
    expect_within(k, ref.get<double, 4, 1>("float64", "k_" + n), plus(dk, 1e-14), precision + " k_" + n);
    v[i] = qkv::matrix_product(W_v, x[i]);
    dv[i] = product_error<F>(Wv, matrix_cast<double>(x[i]));
    expect_within(v[i], ref.get<double, 4, 1>("float64", "v_" + n), plus(dv[i], 1e-14),
                  precision + " v_" + n);
    const auto w_T = qkv::matrix_product(qkv::transposed(q_2), k);  // (1, 1)
    const auto ds = product_error<F>(qkv::transposed(matrix_cast<double>(q_2)), qkv::transposed(dq),
                                     matrix_cast<double>(k), dk);
    expect_within(w_T, ref.get<double, 1, 1>("float64", "w_T_2" + n), plus(ds, 1e-13),
                  precision + " w_T_2" + n);
    e[i] = double(qkv::exp(w_T(0, 0)));
    // exp(s + ds) within 1 ulp: e (ds (1 + ds) + 2u (1 + ds))
    de[i] = e[i] * (ds(0, 0) * (1 + ds(0, 0)) + 2 * qkv::bounds::unit_roundoff<F>() * (1 + ds(0, 0)));
    CHECK(std::abs(e[i] - ref.get<double, 1, 1>("float64", "exp_w_T_2" + n)(0, 0)) <= de[i] + 1e-15);
  }
  const F exp_sum = F(e[0]) + F(e[1]) + F(e[2]) + F(e[3]);
  const double dsum = de[0] + de[1] + de[2] + de[3] + qkv::bounds::gamma<F>(3) * (e[0] + e[1] + e[2] + e[3]);
  vec y_2{};
  matrix<double, 4, 1> dw;
  F w[4];
  for (int i = 0; i < 4; ++i) {
    w[i] = F(e[i]) / exp_sum;
    dw(i, 0) = 1.01 * (e[i] / exp_sum) * (de[i] / e[i] + dsum / exp_sum + qkv::bounds::unit_roundoff<F>());
    CHECK(std::abs(w[i] - ref.get<double, 1, 1>("float64", "w_2" + std::to_string(i + 1))(0, 0)) <=
          dw(i, 0) + 1e-15);
  }
  y_2 = w[0] * v[0] + w[1] * v[1] + w[2] * v[2] + w[3] * v[3];
  // y_2 = [v_1 .. v_4] w: a product with errors in both
  matrix<double, 4, 4> V, dV;
  for (int i = 0; i < 4; ++i)
    for (int r = 0; r < 4; ++r) {
      V(r, i) = double(v[i](r, 0));
      dV(r, i) = dv[i](r, 0);
    }
  matrix<double, 4, 1> wd;
  for (int i = 0; i < 4; ++i) wd(i, 0) = w[i];
  const auto dy = product_error<F>(V, dV, wd, dw);
  expect_within(y_2, ref.get<double, 4, 1>("float64", "y_2"), plus(dy, 1e-14), precision + " y_2");
  // and the tutorial's printed y_2, to 1e-6 (issue 2's requirement; TensorFlow's print has 8 digits)
  const matrix<double, 4, 1> printed{{{0.11782318}, {0.39491105}, {-2.4440105}, {0.5687822}}};
  CHECK(qkv::max_abs_difference(matrix_cast<double>(y_2), printed) < 1e-6);
}

TEST_CASE("tutorial 002 at run time matches PyTorch in float32 and float64") {
  SUBCASE("float32") { check_tutorial_002<float>("float32"); }
  SUBCASE("float64") { check_tutorial_002<double>("float64"); }
}

// ---------------------------------------------------------------------------------------------
// tutorial 004: nn.Linear without bias (x Wᵀ), scores / sqrt(2), softmax of each row

template <class F>
void check_tutorial_004(const std::string& precision) {
  const reference_file ref("004_statquest_self_attention.json");
  const auto x = at_run_time(ref.get<F, 3, 2>("float32", "encodings_matrix"));
  const auto W_q = ref.get<F, 2, 2>("float32", "W_q_weight"), W_k = ref.get<F, 2, 2>("float32", "W_k_weight"),
             W_v = ref.get<F, 2, 2>("float32", "W_v_weight");
  const auto r = qkv::self_attention(x, W_q, W_k, W_v, qkv::out_in);
  using qkv::bounds::product_error;
  const auto xd = matrix_cast<double>(x);
  const auto dq = product_error<F>(xd, qkv::transposed(matrix_cast<double>(W_q)));
  const auto dk = product_error<F>(xd, qkv::transposed(matrix_cast<double>(W_k)));
  const auto dv = product_error<F>(xd, qkv::transposed(matrix_cast<double>(W_v)));
  expect_within(r.queries, ref.get<double, 3, 2>("float64", "q"), plus(dq, 1e-14), precision + " q");
  expect_within(r.keys, ref.get<double, 3, 2>("float64", "k"), plus(dk, 1e-14), precision + " k");
  expect_within(r.values, ref.get<double, 3, 2>("float64", "v"), plus(dv, 1e-14), precision + " v");
  const auto ds = product_error<F>(matrix_cast<double>(r.queries), dq,
                                   qkv::transposed(matrix_cast<double>(r.keys)), qkv::transposed(dk));
  expect_within(r.scores, ref.get<double, 3, 3>("float64", "sims"), plus(ds, 1e-14), precision + " sims");
  // division by fl(sqrt 2): the division rounds (u) and fl(sqrt 2) is off by u relative
  const auto dscaled =
      qkv::divided(ds, 1.41421356) + qkv::scaled(2 * qkv::bounds::unit_roundoff<F>(),
                                                 qkv::bounds::abs(matrix_cast<double>(r.scaled_scores)));
  expect_within(r.scaled_scores, ref.get<double, 3, 3>("float64", "scaled_sims"), plus(dscaled, 1e-14),
                precision + " scaled_sims");
  const auto dw = qkv::bounds::softmax_rows_error<F>(matrix_cast<double>(r.scaled_scores),
                                                     matrix_cast<double>(r.weights), dscaled);
  expect_within(r.weights, ref.get<double, 3, 3>("float64", "attention_percents"), plus(dw, 1e-14),
                precision + " attention_percents");
  const auto dout = product_error<F>(matrix_cast<double>(r.weights), dw, matrix_cast<double>(r.values), dv);
  expect_within(r.context, ref.get<double, 3, 2>("float64", "output"), plus(dout, 1e-14),
                precision + " output");
}

TEST_CASE("tutorial 004 at run time matches PyTorch in float32 and float64") {
  SUBCASE("float32") { check_tutorial_004<float>("float32"); }
  SUBCASE("float64") { check_tutorial_004<double>("float64"); }
}

// ---------------------------------------------------------------------------------------------
// compile time == run time, to the bit

TEST_CASE("the examples computed at run time give the same bits as at compile time") {
  namespace ill = qkv::examples::illustrated;
  const auto r000 = qkv::self_attention(at_run_time(ill::x), ill::w_query, ill::w_key, ill::w_value,
                                        qkv::in_out, {qkv::scaling<float>::none()});
  CHECK(r000.weights == ill::attn_scores_softmax);
  CHECK(r000.context == ill::outputs_exact_softmax);
  CHECK(qkv::softmax_rows(at_run_time(qkv::matrix_cast<double>(ill::attn_scores))) ==
        ill::attn_scores_softmax_f64);
  CHECK(qkv::softmax_all(at_run_time(qkv::matrix_cast<double>(ill::attn_scores))) ==
        ill::whole_matrix_softmax);

  namespace tm = qkv::examples::the_math;
  const auto r002 = qkv::self_attention(at_run_time(tm::X), tm::W_q, tm::W_k, tm::W_v, qkv::columns,
                                        {qkv::scaling<float>::none()});
  CHECK(r002.weights == tm::result.weights);
  CHECK(r002.context == tm::result.context);
  CHECK(qkv::exp(at_run_time(tm::w_T_23)(0, 0)) == tm::exp_w_T_23);

  namespace sq = qkv::examples::statquest;
  const auto t = sq::selfAttention.forward(at_run_time(sq::encodings_matrix));
  CHECK(t.attention_percents == sq::t.attention_percents);
  CHECK(t.attention_scores == sq::t.attention_scores);
}

}  // namespace
