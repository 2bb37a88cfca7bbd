// The constexpr core's backward (core/softmax_backward.hpp, linear_backward.hpp,
// attention_backward.hpp, multihead_backward.hpp, flash_backward.hpp): its edges and its
// identities. Examples 15 and 16 prove the tutorials' numbers; this file states what happens at
// masks, fully masked rows, NaN upstream gradients, shared key/value heads, and checks the
// linear steps against exact central differences over rationals.
#include <doctest/doctest.h>

#include <cstddef>
#include <limits>

#include <qkv/core/attention.hpp>
#include <qkv/core/attention_backward.hpp>
#include <qkv/core/backward_bounds.hpp>
#include <qkv/core/check.hpp>
#include <qkv/core/flash_backward.hpp>
#include <qkv/core/grouped.hpp>
#include <qkv/core/linear_backward.hpp>
#include <qkv/core/masks.hpp>
#include <qkv/core/matrix.hpp>
#include <qkv/core/multihead.hpp>
#include <qkv/core/multihead_backward.hpp>
#include <qkv/core/softmax_backward.hpp>
#include <qkv/exact/rational.hpp>

#include "../data/backward/torch_backward.hpp"

namespace {

using qkv::matrix;
using q = qkv::exact::rational<long long>;
constexpr double nan = std::numeric_limits<double>::quiet_NaN();

bool is_nan(double x) { return x != x; }

// small inputs with exact binary values: eighths
constexpr matrix<double, 4, 3> q4{{{1, 0.5, -1}, {0.25, 2, 0}, {-0.5, 1, 1}, {1.5, -1, 0.125}}};
constexpr matrix<double, 4, 3> k4{{{0.5, 1, 0}, {1, -0.5, 0.25}, {0, 0.75, -1}, {2, 0, 0.5}}};
constexpr matrix<double, 4, 2> v4{{{1, 2}, {-1, 0.5}, {3, -2}, {0.25, 1}}};
constexpr matrix<double, 4, 2> dO4{{{1, -1}, {0.5, 2}, {-0.25, 1}, {2, 0.5}}};

// ---------------------------------------------------------------------------------------------
// the linear steps over rationals: L = sum(dY ∘ f(w)) is linear in w, so the central difference
// (L(w + e) - L(w - e)) / 2 is exactly the gradient, with no truncation and no rounding

template <class F, class W, class D>
q central(F f, W w, const D& dY, std::size_t n) {
  auto L = [&](const W& w1) {
    const auto y = f(w1);
    q s = 0;
    for (std::size_t k = 0; k < y.size(); ++k) s = s + dY.v[k] * y.v[k];
    return s;
  };
  W up = w, down = w;
  up.v[n] = up.v[n] + q(1);
  down.v[n] = down.v[n] - q(1);
  return (L(up) - L(down)) / q(2);
}

TEST_CASE("project_backward is the exact central difference of the projection, in every layout") {
  constexpr matrix<q, 3, 4> x{{{1, 0, 1, 0}, {0, 2, 0, 2}, {1, 1, 1, 1}}};
  constexpr matrix<q, 4, 3> w_in_out{{{0, 2, 0}, {0, 3, 0}, {1, 0, 3}, {1, 1, 0}}};
  constexpr matrix<q, 3, 4> w_out_in = qkv::transposed(w_in_out);
  constexpr matrix<q, 1, 3> b{{{q(1, 2), -1, 3}}};
  constexpr matrix<q, 3, 3> dY{{{q(1, 3), -2, 1}, {0, q(5, 7), -1}, {2, 1, q(-1, 9)}}};
  const auto g_in_out = qkv::project_backward(x, w_in_out, dY, qkv::in_out);
  const auto g_out_in = qkv::project_backward(x, w_out_in, dY, qkv::out_in);
  const auto g_columns = qkv::project_backward(qkv::transposed(x), w_out_in, dY, qkv::columns);
  const auto g_bias = qkv::project_backward(x, w_out_in, b, dY, qkv::out_in);
  for (std::size_t n = 0; n < 12; ++n) {
    CHECK(g_in_out.d_w.v[n] ==
          central([&](const auto& w) { return qkv::project(x, w, qkv::in_out); }, w_in_out, dY, n));
    CHECK(g_out_in.d_w.v[n] ==
          central([&](const auto& w) { return qkv::project(x, w, qkv::out_in); }, w_out_in, dY, n));
    CHECK(g_columns.d_w.v[n] ==
          central([&](const auto& w) { return qkv::project(qkv::transposed(x), w, qkv::columns); }, w_out_in,
                  dY, n));
    CHECK(g_bias.d_w.v[n] == g_out_in.d_w.v[n]);
    CHECK(g_in_out.d_x.v[n] ==
          central([&](const auto& x1) { return qkv::project(x1, w_in_out, qkv::in_out); }, x, dY, n));
    CHECK(g_out_in.d_x.v[n] ==
          central([&](const auto& x1) { return qkv::project(x1, w_out_in, qkv::out_in); }, x, dY, n));
  }
  // the bias's gradient is the column sums of dY: [1/3 + 0 + 2, -2 + 5/7 + 1, 1 - 1 - 1/9]
  CHECK(g_bias.d_b == matrix<q, 1, 3>{{{q(7, 3), q(-2, 7), q(-1, 9)}}});
  // the columns layout's d_x is the out_in layout's, transposed (the same sums)
  CHECK(g_columns.d_x == qkv::transposed(g_out_in.d_x));
}

TEST_CASE(
    "the rows of the softmax backward sum to 0, and a multiplied scale multiplies the gradient, exactly") {
  constexpr matrix<q, 2, 3> P{{{q(1, 2), q(1, 3), q(1, 6)}, {0, q(3, 4), q(1, 4)}}};
  constexpr matrix<q, 2, 3> dP{{{1, -2, 5}, {7, q(1, 2), -1}}};
  constexpr auto dS = qkv::softmax_backward(P, dP);
  static_assert(qkv::row_sums(dS) == matrix<q, 2, 1>{});
  // row 1: D = 1/2 - 2/3 + 5/6 = 2/3: dS = [1/2 (1 - 2/3), 1/3 (-2 - 2/3), 1/6 (5 - 2/3)] = [1/6, -8/9, 13/18]
  static_assert(dS == matrix<q, 2, 3>{{{q(1, 6), q(-8, 9), q(13, 18)},
                                       {0, q(3, 4) * (q(1, 2) - q(1, 8)), q(1, 4) * (-1 - q(1, 8))}}});
  constexpr auto scaled = qkv::scale_backward(dS, qkv::scaling<q>::multiply_by(q(1, 4)), 3);
  static_assert(scaled == qkv::scaled(q(1, 4), dS));
  CHECK(qkv::row_sums(dS) == matrix<q, 2, 1>{});
}

TEST_CASE("d_scores is dS divided by the forward's rounded sqrt(d_k), as PyTorch's DivBackward0 divides") {
  const auto r = qkv::attend_projected(qkv::matrix_cast<float>(q4), qkv::matrix_cast<float>(k4),
                                       qkv::matrix_cast<float>(v4), qkv::attention_options<float>{});
  const auto g = qkv::attention_backward(r, qkv::matrix_cast<float>(dO4));
  CHECK(g.d_scores == qkv::divided(g.d_scaled_scores, qkv::sqrt(3.0f)));
}

// ---------------------------------------------------------------------------------------------
// masks

TEST_CASE("a masked key gets exactly 0 and a NaN in its value never reaches a gradient") {
  // key 2 is padding: masked for every query, and its value is NaN
  matrix<double, 4, 2> v = v4;
  v(2, 0) = nan;
  matrix<bool, 4, 4> allowed = qkv::filled<bool, 4, 4>(true);
  for (std::size_t i = 0; i < 4; ++i) allowed(i, 2) = false;
  auto r = qkv::attend_projected(q4, k4, v, qkv::attention_options<double>{});
  r.scaled_scores = qkv::masked(r.scaled_scores, allowed);
  r.weights = qkv::softmax_rows(r.scaled_scores);
  r.context = qkv::attended_context(r.scaled_scores, r.weights, r.values);
  const auto g = qkv::attention_backward(r, dO4);
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(g.d_scaled_scores(i, 2) == 0.0);
    CHECK(g.d_scores(i, 2) == 0.0);
    for (std::size_t c = 0; c < 3; ++c) CHECK(!is_nan(g.d_queries(i, c)));
  }
  for (std::size_t c = 0; c < 3; ++c) CHECK(g.d_keys(2, c) == 0.0);  // no query attends to it
  for (std::size_t c = 0; c < 2; ++c) CHECK(g.d_values(2, c) == 0.0);
  for (std::size_t n = 0; n < 12; ++n) CHECK(!is_nan(g.d_keys.v[n]));
  // the masked dP itself is NaN (dO v_2ᵀ, the NaN value): it is not a gradient of anything the
  // forward used, and it stays there
  CHECK(is_nan(g.d_weights(0, 2)));
}

TEST_CASE("a fully masked row has every gradient 0") {
  auto r = qkv::attend_projected(q4, k4, v4, qkv::attention_options<double>{});
  matrix<bool, 4, 4> allowed = qkv::filled<bool, 4, 4>(true);
  for (std::size_t j = 0; j < 4; ++j) allowed(1, j) = false;  // query 1 sees no key
  r.scaled_scores = qkv::masked(r.scaled_scores, allowed);
  r.weights = qkv::softmax_rows(r.scaled_scores);
  r.context = qkv::attended_context(r.scaled_scores, r.weights, r.values);
  const auto g = qkv::attention_backward(r, dO4);
  for (std::size_t j = 0; j < 4; ++j) CHECK(g.d_scores(1, j) == 0.0);
  for (std::size_t c = 0; c < 3; ++c) CHECK(g.d_queries(1, c) == 0.0);
  // and the values get nothing from query 1: dV = sum over queries 0, 2, 3 only
  for (std::size_t j = 0; j < 4; ++j)
    for (std::size_t c = 0; c < 2; ++c)
      CHECK(g.d_values(j, c) ==
            r.weights(0, j) * dO4(0, c) + r.weights(2, j) * dO4(2, c) + r.weights(3, j) * dO4(3, c));
}

TEST_CASE("a causal mask: key j gets gradients from queries j and later only") {
  const auto r = qkv::attend_projected(q4, k4, v4, qkv::attention_options<double>{.causal = true});
  const auto g = qkv::attention_backward(r, dO4, {.causal = true});
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = i + 1; j < 4; ++j) CHECK(g.d_scores(i, j) == 0.0);
  // the last key is seen by the last query alone: dV_3 = P(3, 3) dO_3, dK_3 = d_scores(3, 3) q_3
  for (std::size_t c = 0; c < 2; ++c) CHECK(g.d_values(3, c) == r.weights(3, 3) * dO4(3, c));
  for (std::size_t c = 0; c < 3; ++c) CHECK(g.d_keys(3, c) == g.d_scores(3, 3) * q4(3, c));
  // query 0 sees key 0 alone: its weight is 1, so its scores get no gradient (softmax is flat)
  CHECK(g.d_scores(0, 0) == 0.0);
}

TEST_CASE("a NaN in the upstream gradient reaches exactly the entries it flows into") {
  const auto r = qkv::attend_projected(q4, k4, v4, qkv::attention_options<double>{});
  matrix<double, 4, 2> dO = dO4;
  dO(1, 0) = nan;  // query 1, value column 0
  const auto g = qkv::attention_backward(r, dO);
  // d_values column 0 (every key is attended by query 1), never column 1
  for (std::size_t j = 0; j < 4; ++j) {
    CHECK(is_nan(g.d_values(j, 0)));
    CHECK(!is_nan(g.d_values(j, 1)));
  }
  // query 1's dP, dS and dQ; the other queries' dQ stay finite; every key's dK is NaN (query 1
  // attends to all of them)
  for (std::size_t c = 0; c < 3; ++c) {
    CHECK(is_nan(g.d_queries(1, c)));
    CHECK(!is_nan(g.d_queries(0, c)));
    CHECK(!is_nan(g.d_queries(3, c)));
    CHECK(is_nan(g.d_keys(0, c)));
  }
}

// ---------------------------------------------------------------------------------------------
// heads

TEST_CASE("grouped-query backward: a shared key/value head gets the sum of its query heads' gradients") {
  // 4 query heads of width 2, 2 key/value heads: heads 0, 1 share kv head 0, heads 2, 3 kv head 1
  constexpr matrix<double, 3, 8> q{{{1, 0.5, -1, 0.25, 2, 0, -0.5, 1},
                                    {0.5, 1, 0, -0.5, 0.25, 1, 0, 0.75},
                                    {-1, 2, 0.5, 0, 1, 0.125, 1.5, -1}}};
  constexpr matrix<double, 5, 4> k{
      {{0.5, 1, 0, 2}, {1, -0.5, 0.25, 0}, {0, 0.75, -1, 1}, {2, 0, 0.5, -0.25}, {0.125, 1, 1, 0.5}}};
  constexpr matrix<double, 5, 6> v{{{1, 2, 0, -1, 0.5, 1},
                                    {-1, 0.5, 2, 0, 1, 0.25},
                                    {3, -2, 1, 1, 0, 0.5},
                                    {0.25, 1, -0.5, 2, 1, 0},
                                    {1, 1, 1, -1, 0.5, 2}}};
  constexpr matrix<double, 3, 12> dO = qkv::filled<double, 3, 12>(0.5);
  constexpr auto r = qkv::grouped_query_attend_projected<4, 2>(q, k, v);
  constexpr auto g = qkv::grouped_query_attention_backward<4, 2>(r, dO);
  // the same as multi-head attention over the repeated keys and values (grouped.hpp's
  // equivalence), with each group's two heads' d_keys added in head order
  constexpr auto rm = qkv::multihead_attend_projected<4>(q, qkv::repeat_kv<2, 2>(k), qkv::repeat_kv<2, 2>(v));
  constexpr auto gm = qkv::multihead_backward<4>(rm, dO);
  static_assert(g.d_queries == gm.d_queries);
  for (std::size_t s = 0; s < 5; ++s)
    for (std::size_t h = 0; h < 2; ++h)
      for (std::size_t c = 0; c < 2; ++c)
        CHECK(g.d_keys(s, h * 2 + c) == gm.d_keys(s, 2 * h * 2 + c) + gm.d_keys(s, (2 * h + 1) * 2 + c));
  for (std::size_t s = 0; s < 5; ++s)
    for (std::size_t h = 0; h < 2; ++h)
      for (std::size_t c = 0; c < 3; ++c)
        CHECK(g.d_values(s, h * 3 + c) ==
              gm.d_values(s, 2 * h * 3 + c) + gm.d_values(s, (2 * h + 1) * 3 + c));
}

TEST_CASE("multi-head backward: each head's gradients are one head's attention_backward, side by side") {
  constexpr matrix<double, 4, 4> q{{{1, 0.5, -1, 0.25}, {0.5, 1, 0, -0.5}, {-1, 2, 0.5, 0}, {0, 1, 1, 1}}};
  constexpr matrix<double, 4, 4> dO{{{1, -1, 0.5, 2}, {0.25, 0, 1, -1}, {2, 1, 0, 0.5}, {-0.5, 1, 1, 0}}};
  constexpr auto r = qkv::multihead_attend_projected<2>(q, q, q);
  constexpr auto g = qkv::multihead_backward<2>(r, dO);
  const auto h1 =
      qkv::attention_backward(qkv::attend_projected(qkv::block<4, 2>(q, 0, 2), qkv::block<4, 2>(q, 0, 2),
                                                    qkv::block<4, 2>(q, 0, 2), {}),
                              qkv::block<4, 2>(dO, 0, 2));
  CHECK(qkv::block<4, 2>(g.d_queries, 0, 2) == h1.d_queries);
  CHECK(qkv::block<4, 2>(g.d_keys, 0, 2) == h1.d_keys);
  CHECK(qkv::block<4, 2>(g.d_values, 0, 2) == h1.d_values);
  // the output projection's backward: d_concat = d_out Wo, d_w_output = d_outᵀ concat, d_b = column sums
  constexpr matrix<double, 3, 4> wo{{{1, 0, 0.5, -1}, {0, 1, 1, 0}, {0.25, -0.5, 0, 2}}};
  constexpr matrix<double, 4, 3> d_out{{{1, 0, -1}, {0.5, 0.5, 0}, {0, 2, 1}, {1, 1, 1}}};
  const auto go = qkv::output_projection_backward(r.concat, wo, d_out);
  CHECK(go.d_x == qkv::matrix_product(d_out, wo));
  CHECK(go.d_w == qkv::matrix_product(qkv::transposed(d_out), r.concat));
  CHECK(go.d_b == matrix<double, 1, 3>{{{2.5, 3.5, 1}}});
}

TEST_CASE("nn.MultiheadAttention's every gradient in one call, within derived bounds of PyTorch's float64") {
  namespace mha = qkv_test::torch_backward::mha;
  using qkv::transposed;
  using qkv::bounds::product_error;
  const matrix<double, 3, 4> x(mha::x), d_output(mha::d_output);
  const matrix<double, 4, 4> wo(mha::out_proj_weight);
  const matrix<double, 12, 4> w_in(mha::in_proj_weight);
  const matrix<double, 1, 12> b_in(mha::in_proj_bias);
  const matrix<double, 1, 4> bo(mha::out_proj_bias);
  const auto wq = qkv::block<4, 4>(w_in, 0, 0), wk = qkv::block<4, 4>(w_in, 4, 0),
             wv = qkv::block<4, 4>(w_in, 8, 0);
  const auto bq = qkv::block<1, 4>(b_in, 0, 0), bk = qkv::block<1, 4>(b_in, 0, 4),
             bv = qkv::block<1, 4>(b_in, 0, 8);
  const auto q = qkv::project(x, wq, bq, qkv::out_in), k = qkv::project(x, wk, bk, qkv::out_in),
             v = qkv::project(x, wv, bv, qkv::out_in);
  const auto r = qkv::multihead_attend_projected<2>(q, k, v);
  const auto output = qkv::output_projection(r, wo, bo);
  const auto g = qkv::multihead_self_attention_backward<2>(x, wq, bq, wk, bk, wv, bv, wo, r, d_output);

  // The bounds, double (u = 2^-53), in the standard model; each computed value is within B of
  // the truth, PyTorch's too (any order, fused or not), so |ours - PyTorch's| <= 2 B.
  //   q, k, v = x Wᵀ + b: 4 products and 4 additions, gamma_5 (|x| |W|ᵀ + |b|);
  //   per head (width 2, scale c = sqrt 2): scores with q and k off; the scaled scores
  //   (e_s + 2u |q| |k|ᵀ) / c, which covers both orders (qkv scales the product, PyTorch q);
  //   weights: bounds::softmax_rows_error; context: product_error(P, e_P, V, e_V);
  //   d_concat = dO W_o: product_error over 4, dO and W_o exact;
  //   per head: attention_backward_error with e_dO = d_concat's, s = 1 / sqrt 2, r = 2, and on
  //   dQ and dK 2u s |dS| |K| more (PyTorch divides after the product, qkv before);
  //   d_w = dYᵀ x over 3 tokens; d_b = column sums: gamma_3 sum |dY| + sum e_dY;
  //   d_w_output = dOᵀ concat with concat off; d_b_output = gamma_3 sum |dO|;
  //   d_x = dQ W_q + dK W_k + dV W_v: bounds::sum3_error of the three products.
  const double u = qkv::bounds::unit_roundoff<double>(), c = 1.4142135, s = 1 / c;
  const auto absm = [](const auto& m) { return qkv::bounds::abs(m); };
  const auto e_proj = [&](const matrix<double, 4, 4>& w, const matrix<double, 1, 4>& b) {
    return qkv::scaled(qkv::bounds::gamma<double>(5),
                       qkv::add_row_vector(qkv::matrix_product(absm(x), transposed(absm(w))), absm(b)));
  };
  const auto e_q = e_proj(wq, bq), e_k = e_proj(wk, bk), e_v = e_proj(wv, bv);
  const auto e_dc = product_error<double>(d_output, wo);
  matrix<double, 3, 4> e_concat{}, e_dq{}, e_dk{}, e_dv{};
  for (std::size_t h = 0; h < 2; ++h) {
    const auto qh = qkv::block<3, 2>(q, 0, 2 * h), kh = qkv::block<3, 2>(k, 0, 2 * h),
               vh = qkv::block<3, 2>(v, 0, 2 * h);
    const auto eq = qkv::block<3, 2>(e_q, 0, 2 * h), ek = qkv::block<3, 2>(e_k, 0, 2 * h),
               ev = qkv::block<3, 2>(e_v, 0, 2 * h);
    const auto e_s = product_error<double>(qh, eq, transposed(kh), transposed(ek));
    const auto e_ss =
        qkv::scaled(1 / c, e_s + qkv::scaled(2 * u, qkv::matrix_product(absm(qh), transposed(absm(kh)))));
    const auto& P = r.weights[h];
    const auto e_p = qkv::bounds::softmax_rows_error<double>(r.scaled_scores[h], P, e_ss);
    const auto e_o = product_error<double>(P, e_p, vh, ev);
    const auto b = qkv::bounds::attention_backward_error<double>(P, e_p, vh, ev, kh, ek, qh, eq,
                                                                 qkv::block<3, 2>(g.d_concat, 0, 2 * h),
                                                                 qkv::block<3, 2>(e_dc, 0, 2 * h), s, 2.0);
    const auto extra =
        qkv::scaled(2 * u * s, qkv::matrix_product(absm(g.attention.d_scaled_scores[h]), absm(kh)));
    const auto extra_k = qkv::scaled(
        2 * u * s, qkv::matrix_product(transposed(absm(g.attention.d_scaled_scores[h])), absm(qh)));
    for (std::size_t i = 0; i < 3; ++i)
      for (std::size_t cc = 0; cc < 2; ++cc) {
        e_concat(i, 2 * h + cc) = e_o(i, cc);
        e_dq(i, 2 * h + cc) = b.d_queries(i, cc) + extra(i, cc);
        e_dk(i, 2 * h + cc) = b.d_keys(i, cc) + extra_k(i, cc);
        e_dv(i, 2 * h + cc) = b.d_values(i, cc);
      }
  }
  const matrix<double, 3, 4> z{};
  const auto e_w = [&](const matrix<double, 3, 4>& d, const matrix<double, 3, 4>& e) {
    return product_error<double>(transposed(d), transposed(e), x, z);
  };
  const auto e_b = [&](const matrix<double, 3, 4>& d, const matrix<double, 3, 4>& e) {
    return qkv::scaled(qkv::bounds::gamma<double>(3), qkv::column_sums(absm(d))) + qkv::column_sums(e);
  };
  const auto& a = g.attention;
  const auto e_dx = qkv::bounds::sum3_error<double>(
      qkv::matrix_product(a.d_queries, wq),
      product_error<double>(a.d_queries, e_dq, wq, matrix<double, 4, 4>{}), qkv::matrix_product(a.d_keys, wk),
      product_error<double>(a.d_keys, e_dk, wk, matrix<double, 4, 4>{}), qkv::matrix_product(a.d_values, wv),
      product_error<double>(a.d_values, e_dv, wv, matrix<double, 4, 4>{}));
  const auto e_wo = product_error<double>(transposed(d_output), matrix<double, 4, 3>{}, r.concat, e_concat);
  const auto e_bo = qkv::scaled(qkv::bounds::gamma<double>(3), qkv::column_sums(absm(d_output)));

  // |ours - PyTorch's| <= 2 B (1e-6 relative on top: the bounds are first-order, computed in double)
  const auto close = [](const auto& ours, const auto& theirs, const auto& bound) {
    for (std::size_t n = 0; n < ours.size(); ++n)
      if (!(std::abs(ours.v[n] - theirs.v[n]) <= 2 * bound.v[n] * (1 + 1e-6))) return false;
    return true;
  };
  const matrix<double, 12, 4> d_in(mha::d_in_proj_weight);
  const matrix<double, 1, 12> d_in_b(mha::d_in_proj_bias);
  CHECK(close(g.d_w_query, qkv::block<4, 4>(d_in, 0, 0), e_w(a.d_queries, e_dq)));
  CHECK(close(g.d_w_key, qkv::block<4, 4>(d_in, 4, 0), e_w(a.d_keys, e_dk)));
  CHECK(close(g.d_w_value, qkv::block<4, 4>(d_in, 8, 0), e_w(a.d_values, e_dv)));
  CHECK(close(g.d_b_query, qkv::block<1, 4>(d_in_b, 0, 0), e_b(a.d_queries, e_dq)));
  CHECK(close(g.d_b_key, qkv::block<1, 4>(d_in_b, 0, 4), e_b(a.d_keys, e_dk)));
  CHECK(close(g.d_b_value, qkv::block<1, 4>(d_in_b, 0, 8), e_b(a.d_values, e_dv)));
  CHECK(close(g.d_w_output, matrix<double, 4, 4>(mha::d_out_proj_weight), e_wo));
  CHECK(close(g.d_b_output, matrix<double, 1, 4>(mha::d_out_proj_bias), e_bo));
  CHECK(close(g.d_x, matrix<double, 3, 4>(mha::d_x), e_dx));
  // the key bias's gradient is 0 up to rounding: adding b_k to every key adds q·b_k to a whole
  // row of scores, which the softmax ignores (here within 2 B of PyTorch's, itself ~1e-17)
  for (std::size_t n = 0; n < 4; ++n) CHECK(std::abs(g.d_b_key.v[n]) < 1e-15);
  // and the forward agrees with PyTorch's output to 1e-15 (a sanity check of the setup)
  CHECK(qkv::max_abs_difference(output, matrix<double, 3, 4>(mha::output)) < 1e-15);
}

// ---------------------------------------------------------------------------------------------
// flash

TEST_CASE("flash backward with a causal mask is the materialised backward within their derived bounds") {
  constexpr qkv::attention_options<double> causal{.causal = true};
  const auto r = qkv::attend_projected(q4, k4, v4, causal);
  const auto g = qkv::attention_backward(r, dO4, causal);
  const auto f = qkv::flash_attention_forward<3>(q4, k4, v4, causal);
  const auto fg = qkv::flash_attention_backward<3>(q4, k4, v4, f, dO4, causal);
  // the masked half: nothing flows in flash either (key 3 only from query 3, as materialised)
  for (std::size_t c = 0; c < 2; ++c) CHECK(fg.d_values(3, c) == g.d_values(3, c));
  // bounds: inputs exact; P off by softmax_rows_error (materialised) or by the online
  // rounding (flash: exp 2u, subtraction range u, l's eta, division u: 40u covers 4 keys in 2
  // blocks, K = online_softmax_error_units(4, 3, 2) = 4 + 4 x 2 + 3 = 15, plus range 4);
  // O off by online_softmax_error; the backward bounds then as in example 16
  const double u = qkv::bounds::unit_roundoff<double>();
  matrix<double, 4, 4> e_pf{};
  for (std::size_t n = 0; n < 16; ++n) e_pf.v[n] = 40 * u * r.weights.v[n];
  // (the ranges from the unmasked scores, larger than the scaled ones: the bound only grows)
  const auto e_p = qkv::bounds::softmax_rows_error<double>(r.scores, r.weights, matrix<double, 4, 4>{});
  matrix<double, 4, 2> e_o{};
  for (std::size_t n = 0; n < 8; ++n) e_o.v[n] = qkv::online_softmax_error<double>(4, 3, 8, 3);
  const matrix<double, 4, 3> z3{};
  const matrix<double, 4, 2> z2{};
  const double s = 1 / 1.7320508;  // 1 / sqrt(3), rounded up
  const auto bm =
      qkv::bounds::attention_backward_error<double>(r.weights, e_p, v4, z2, k4, z3, q4, z3, dO4, z2, s, 2);
  const auto bf = qkv::bounds::flash_backward_error<double>(r.weights, e_pf, v4, z2, k4, z3, q4, z3, dO4, z2,
                                                            r.context, e_o, s, 2);
  for (std::size_t n = 0; n < 12; ++n) {
    CHECK(std::abs(fg.d_queries.v[n] - g.d_queries.v[n]) <= bm.d_queries.v[n] + bf.d_queries.v[n]);
    CHECK(std::abs(fg.d_keys.v[n] - g.d_keys.v[n]) <= bm.d_keys.v[n] + bf.d_keys.v[n]);
  }
  for (std::size_t n = 0; n < 8; ++n)
    CHECK(std::abs(fg.d_values.v[n] - g.d_values.v[n]) <= bm.d_values.v[n] + bf.d_values.v[n]);
}

TEST_CASE("flash backward of a fully masked row gives that query no gradient") {
  // what flash_attention_forward keeps for a query whose every key is masked: m = -inf, l = 0
  qkv::flash_result<double, 1, 2> f{};
  f.row_max(0, 0) = -std::numeric_limits<double>::infinity();
  f.row_sum(0, 0) = 0;
  const matrix<double, 1, 3> q1{{{1, 2, 3}}};
  const auto g = qkv::flash_attention_backward<2>(q1, k4, v4, f, matrix<double, 1, 2>{{{1, 1}}});
  CHECK(g.d_queries == matrix<double, 1, 3>{});
  CHECK(g.d_keys == matrix<double, 4, 3>{});
  CHECK(g.d_values == matrix<double, 4, 2>{});
}

}  // namespace
