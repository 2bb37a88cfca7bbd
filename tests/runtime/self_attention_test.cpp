// One call shape (runtime/self_attention.hpp): the same learner code, written once as a
// template, computes at compile time on qkv::matrix and at run time on dynamic_matrix.
//
// The tolerance. The core rounds every multiply and add in order (-ffp-contract=off) and, with
// no .scale, divides each score by sqrt(d_k); the runtime sums with fused multiply-adds in its
// own order, multiplies by 1/sqrt(d_k) (rounded twice) and has its own exp (within 2 ulp). Each
// is within the standard-model bound B of the exact result (tests/support/runtime.hpp's
// reference_attention: gamma(K) sum |a||b| per product, 3u for the scaling by either route,
// core/bounds.hpp's softmax bound with exp within 2 ulp), so |core - runtime| <= 2 B.
// With exact inputs (small integers) the projections and scores are exact on both paths, so
// those agree bit for bit, and so do scaled scores under an exact multiplier.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include <qkv/core/attention.hpp>
#include <qkv/runtime/runtime.hpp>

#include "../support/runtime.hpp"

namespace rt = qkv::runtime;
using qkv::testing::expect_within;
using qkv::testing::to_double;
using qkv::testing::twice;
using rt::dynamic_matrix;

namespace learner {

// the learner's code: nothing in it names the matrix type or a namespace of a path. The call
// is unqualified; argument-dependent lookup finds qkv::self_attention for qkv::matrix and
// qkv::runtime::self_attention for dynamic_matrix.
template <class M>
constexpr auto causal_attention(const M& x, const M& wq, const M& wk, const M& wv) {
  return self_attention(x, wq, wk, wv, qkv::in_out, {.causal = true});
}

}  // namespace learner

namespace {

// three tokens of width 3 (d_k = 3: sqrt(3) is not exact, so the core's division and the
// runtime's multiplication by 1/sqrt(3) round differently), weights (in, out)
constexpr qkv::matrix<float, 3, 3> x{{{0.5f, -1.25f, 0.3f}, {1.1f, 0.2f, -0.7f}, {-0.4f, 0.9f, 1.6f}}};
constexpr qkv::matrix<float, 3, 3> wq{{{0.2f, -0.5f, 0.8f}, {0.7f, 0.1f, -0.3f}, {-0.6f, 0.4f, 0.9f}}};
constexpr qkv::matrix<float, 3, 3> wk{{{-0.1f, 0.6f, 0.3f}, {0.5f, -0.2f, 0.7f}, {0.4f, 0.8f, -0.5f}}};
constexpr qkv::matrix<float, 3, 3> wv{{{1.0f, 0.0f, -0.5f}, {0.25f, 0.75f, 0.5f}, {-0.3f, 0.6f, 0.2f}}};

constexpr auto core = learner::causal_attention(x, wq, wk, wv);  // at compile time

}  // namespace

TEST_CASE("the same learner code through the core and the runtime agrees within twice the derived bound") {
  const auto r = learner::causal_attention(rt::to_dynamic(x), rt::to_dynamic(wq), rt::to_dynamic(wk),
                                           rt::to_dynamic(wv));  // at run time
  static_assert(std::is_same_v<decltype(r), const rt::attention_steps<float>>);
  // the shapes are the core's: (T, d_k) (S, d_k) (S, d_v) (T, S) x 3 (T, d_v)
  CHECK(r.queries.shape() == "3x3");
  CHECK(r.scores.shape() == "3x3");
  CHECK(r.scaled_scores.shape() == "3x3");
  CHECK(r.weights.shape() == "3x3");
  CHECK(r.context.shape() == "3x3");
  CHECK(r.scale == 1.0f / std::sqrt(3.0f));  // the runtime's default: a multiplier, rounded twice

  // the bounds, from exact (double) inputs; the reference wants W as (out, in)
  const double u = qkv::testing::unit<float>, g = qkv::testing::gamma_n<float>(3);
  dynamic_matrix<double> q, dq, k, dk, v, dv;
  qkv::testing::reference_linear(to_double(x), to_double(qkv::transposed(wq)), {}, g, u, q, dq);
  qkv::testing::reference_linear(to_double(x), to_double(qkv::transposed(wk)), {}, g, u, k, dk);
  qkv::testing::reference_linear(to_double(x), to_double(qkv::transposed(wv)), {}, g, u, v, dv);
  const double scale = 1 / std::sqrt(3.0);
  const auto a = qkv::testing::reference_attention::compute<float>(q, dq, k, dk, v, dv, scale, true, nullptr);
  expect_within(r.queries, to_double(core.queries), twice(dq), "queries: runtime vs core");
  expect_within(r.keys, to_double(core.keys), twice(dk), "keys: runtime vs core");
  expect_within(r.values, to_double(core.values), twice(dv), "values: runtime vs core");
  expect_within(r.scores, to_double(core.scores), twice(a.scores_bound), "scores: runtime vs core");
  expect_within(r.weights, to_double(core.weights), twice(a.weights_bound), "weights: runtime vs core");
  expect_within(r.context, to_double(core.context), twice(a.out_bound), "context: runtime vs core");
  // scaled scores: each within scale B_score + 3u |scaled| of the exact (the reference's own
  // bound of the scaling step), so within twice that of each other; masked: -inf in both
  dynamic_matrix<double> scaled_bound(3, 3);
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 3; ++j) {
      scaled_bound(i, j) = 2 * (scale * a.scores_bound(i, j) + 3 * u * std::abs(a.scores(i, j) * scale));
      if (j > i) {
        CHECK(r.scaled_scores(i, j) == -std::numeric_limits<float>::infinity());
        CHECK(core.scaled_scores(i, j) == -std::numeric_limits<float>::infinity());
        scaled_bound(i, j) = 0;
      }
    }
  dynamic_matrix<float> visible = r.scaled_scores;
  dynamic_matrix<double> core_visible = to_double(core.scaled_scores);
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = i + 1; j < 3; ++j) visible(i, j) = 0, core_visible(i, j) = 0;
  expect_within(visible, core_visible, scaled_bound, "scaled scores: runtime vs core");
  // the masked weights are exactly 0 on both paths
  CHECK(r.weights(0, 1) == 0.0f);
  CHECK(core.weights(0, 1) == 0.0f);
  // and both against the exact result, each within B
  expect_within(r.context, a.out, a.out_bound, "context: runtime vs double");
  expect_within(rt::to_dynamic(core.context), a.out, a.out_bound, "context: core vs double");
}

TEST_CASE("with exact inputs and an exact multiplier the steps up to the scaled scores agree bit for bit") {
  // small integers: every product and sum is exact in float, on both paths, in any order
  constexpr qkv::matrix<float, 3, 4> xi{{{1, 0, 1, 0}, {0, 2, 0, 2}, {1, 1, 1, 1}}};
  constexpr qkv::matrix<float, 4, 4> wi{{{1, 0, 1, 0}, {0, 0, 1, 1}, {0, 1, 0, 0}, {1, 1, 0, 1}}};
  constexpr auto c = qkv::self_attention(xi, wi, wi, wi, qkv::in_out, {.scale = 0.5f});
  const auto wd = rt::to_dynamic(wi);
  const auto r = rt::self_attention(rt::to_dynamic(xi), wd, wd, wd, rt::in_out, {.scale = 0.5f});
  CHECK(r.scale == 0.5f);  // .scale is a multiplier in both
  CHECK((r.queries.to_fixed<3, 4>() == c.queries));
  CHECK((r.scores.to_fixed<3, 3>() == c.scores));
  CHECK((r.scaled_scores.to_fixed<3, 3>() == c.scaled_scores));  // x 0.5 is exact
  // x0 = [1, 0, 1, 0]: x0 W = [1, 1, 1, 0] (rows 0 and 2 of W added): q0 . q0 = 3, halved 1.5
  CHECK(c.scaled_scores(0, 0) == 1.5f);
  CHECK(r.scaled_scores(0, 0) == 1.5f);
}

TEST_CASE("qkv::columns takes tokens as columns on the runtime path as in the core") {
  // X (d_in, T): the same tokens as x, one per column; W read as (d_out, d_in)
  const auto xt = rt::to_dynamic(qkv::transposed(x));
  const auto by_columns =
      rt::self_attention(xt, rt::to_dynamic(wq), rt::to_dynamic(wk), rt::to_dynamic(wv), rt::columns);
  const auto by_rows = rt::self_attention(rt::to_dynamic(x), rt::to_dynamic(wq), rt::to_dynamic(wk),
                                          rt::to_dynamic(wv), rt::out_in);
  CHECK(by_columns.context.shape() == "3x3");  // tokens as rows in the results
  CHECK(rt::max_abs_difference<float>(by_columns.context.view(), by_rows.context.view()) == 0.0f);
  CHECK(rt::max_abs_difference<float>(by_columns.weights.view(), by_rows.weights.view()) == 0.0f);
  // qkv::runtime::in_out is the core's tag itself
  static_assert(std::is_same_v<decltype(rt::in_out), decltype(qkv::in_out)>);
}

TEST_CASE("heads split the columns as attention() does, the (T, S) steps stacked head after head") {
  const auto x4 = qkv::testing::random_matrix<float>(5, 4, 11);
  const auto w4 = qkv::testing::random_matrix<float>(4, 4, 12);
  const auto r = rt::self_attention(x4, w4, w4, w4, rt::in_out, {.heads = 2, .causal = true});
  rt::attention_weights<float> w;
  w.q = w.k = w.v = {w4, {}, rt::weight_layout::in_out};
  const auto m = rt::self_attention(x4, w, {.heads = 2, .causal = true, .keep_weights = true});
  REQUIRE(r.weights.shape() == "10x5");
  REQUIRE(r.scaled_scores.shape() == "10x5");
  for (std::size_t h = 0; h < 2; ++h)
    for (std::size_t i = 0; i < 5; ++i)
      for (std::size_t j = 0; j < 5; ++j) {
        CHECK(r.weights(h * 5 + i, j) == m.weights[h](i, j));
        CHECK(r.scores(h * 5 + i, j) == m.scores[h](i, j));
      }
  CHECK(rt::max_abs_difference<float>(r.context.view(), m.output.view()) == 0.0f);
  // the learner's call keeps every step whatever keep_weights says (its result is the steps);
  // the engineer's call streams by default and keeps them only when asked
  const auto s = rt::self_attention(x4, w4, w4, w4, rt::in_out, {.keep_weights = false});
  CHECK(s.weights.shape() == "5x5");
  CHECK(s.scaled_scores.shape() == "5x5");
  CHECK(s.context.shape() == "5x4");
  rt::attention_weights<float> w1;
  w1.q = w1.k = w1.v = {w4, {}, rt::weight_layout::in_out};
  const auto fast = rt::self_attention(x4, w1);
  CHECK(fast.weights.empty());
  CHECK(fast.scores.empty());
  CHECK(fast.output.shape() == "5x4");
  CHECK(rt::self_attention(x4, w1, {.keep_weights = true}).weights.size() == 1);
}

TEST_CASE(
    "the weights are exactly the row softmax of the scaled scores, whatever masks and biases are given") {
  // scaled_scores is rebuilt outside the kernels (scale * score, then attention.hpp's mask step):
  // if it differed from what the kernels softmax, some row would differ here
  const auto x6 = qkv::testing::random_matrix<float>(6, 4, 21);
  const auto w6 = qkv::testing::random_matrix<float>(4, 4, 22);
  rt::dynamic_matrix<float> bias = qkv::testing::random_matrix<float>(12, 6, 23);  // (heads T, S)
  bias(3, 1) = -std::numeric_limits<float>::infinity();  // head 0, query 3: key 1 masked by the bias
  rt::mask_matrix allowed(6, 6);
  for (std::size_t i = 0; i < 6; ++i)
    for (std::size_t j = 0; j < 6; ++j) allowed(i, j) = (i + j) % 5 != 0;
  std::vector<rt::attention_options<float>> cases(5);
  cases[0].causal = true;
  cases[1].allowed = allowed;
  cases[2] = {.heads = 2, .causal = true, .window = 2};
  cases[3] = {.heads = 2, .causal = true, .alibi = true};
  cases[4] = {.heads = 2, .scale = 0.25f, .bias = bias};
  for (const auto& opt : cases) {
    const auto r = rt::self_attention(x6, w6, w6, w6, rt::in_out, opt);
    REQUIRE(r.scaled_scores.rows() == opt.heads * 6);
    const auto w = rt::softmax_rows(r.scaled_scores, nullptr);
    for (std::size_t i = 0; i < w.rows(); ++i)
      for (std::size_t j = 0; j < w.cols(); ++j) {
        INFO("heads " << opt.heads << ", row " << i << ", key " << j);
        CHECK(w(i, j) == r.weights(i, j));
        if (r.scaled_scores(i, j) == -std::numeric_limits<float>::infinity()) CHECK(r.weights(i, j) == 0.0f);
      }
  }
  // the window and the bias did mask: query 5 of a window of 2 sees keys 4 and 5 only
  const auto win = rt::self_attention(x6, w6, w6, w6, rt::in_out, cases[2]);
  CHECK(win.scaled_scores(5, 3) == -std::numeric_limits<float>::infinity());
  CHECK(win.scaled_scores(5, 4) != -std::numeric_limits<float>::infinity());
  const auto bi = rt::self_attention(x6, w6, w6, w6, rt::in_out, cases[4]);
  CHECK(bi.weights(3, 1) == 0.0f);
}

TEST_CASE("cross-attention over no keys gives (T, 0) steps and a zero context, as attention() does") {
  // a query with no key to attend to has weights 0 and output 0 (runtime/attention.hpp)
  const auto x3 = qkv::testing::random_matrix<float>(3, 4, 31);
  const rt::dynamic_matrix<float> none(0, 4);
  const auto w4 = qkv::testing::random_matrix<float>(4, 4, 32);
  const auto r = rt::cross_attention(x3, none, w4, w4, w4, rt::in_out, {.causal = true});
  CHECK(r.scores.shape() == "3x0");
  CHECK(r.scaled_scores.shape() == "3x0");
  CHECK(r.weights.shape() == "3x0");
  REQUIRE(r.context.shape() == "3x4");
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 4; ++j) CHECK(r.context(i, j) == 0.0f);
}

TEST_CASE("a shape mismatch in the core's call shape throws shape_error naming both shapes") {
  const auto x4 = qkv::testing::random_matrix<float>(3, 4, 1);
  const auto w3 = qkv::testing::random_matrix<float>(3, 3, 2);
  try {
    (void)rt::self_attention(x4, w3, w3, w3, rt::in_out);
    FAIL("no shape_error");
  } catch (const rt::shape_error& e) {
    const std::string m = e.what();
    CHECK(m.find("3x4") != std::string::npos);
    CHECK(m.find("3x3") != std::string::npos);
  }
}

TEST_CASE("the engineer's call streams on weights packed once and gives the learner's call's output") {
  // a layer of width 96, 12 heads of 8, with biases and an output projection (out_in)
  const auto x = qkv::testing::random_matrix<float>(7, 96, 31);
  rt::attention_weights<float> layer;
  layer.q = {qkv::testing::random_matrix<float>(96, 96, 32, 0.1), std::vector<float>(96, 0.01f)};
  layer.k = {qkv::testing::random_matrix<float>(96, 96, 33, 0.1), {}};
  layer.v = {qkv::testing::random_matrix<float>(96, 96, 34, 0.1), std::vector<float>(96, -0.02f)};
  layer.o = rt::linear_weights<float>{qkv::testing::random_matrix<float>(96, 96, 35, 0.1), {}};
  const rt::packed_attention_weights<float> w(layer);  // q, k, v, o: attention_weights, packed once
  auto r = rt::self_attention(x, w, {.heads = 12});    // streams: r.output, nothing (T, T) kept
  auto steps = rt::self_attention(x, w, {.heads = 12, .keep_weights = true});  // every head's weights too
  CHECK(r.weights.empty());
  CHECK(r.scores.empty());
  CHECK(r.context.empty());
  REQUIRE(steps.weights.size() == 12);
  CHECK(steps.weights[11].shape() == "7x7");
  // packed or not, the same bits (packed_attention_weights' promise)
  CHECK(qkv::testing::same_bits(r.output, rt::self_attention(x, layer, {.heads = 12}).output));
  CHECK(qkv::testing::same_bits(steps.output,
                                rt::self_attention(x, layer, {.heads = 12, .keep_weights = true}).output));
  // streaming and keeping the steps: the same output bits (tests/runtime/paths_test.cpp has more)
  CHECK(qkv::testing::same_bits(r.output, steps.output));
  // into a result, its buffers reused
  rt::multihead_result<float> into;
  rt::self_attention<float>(x.view(), w, {.heads = 12}, into);
  CHECK(qkv::testing::same_bits(into.output, r.output));
}
