// The same examples through both paths: tutorials 000, 001, 002 and 004 computed at compile time
// (the examples' constexpr results) and by the runtime SIMD engine agree within the tolerance
// that follows from the FMA policy.
//
// The tolerance. The constexpr path rounds every multiply and every add (-ffp-contract=off);
// the runtime path asks for fused multiply-adds and sums in its own order, and its exp is a
// different polynomial. So the two are not bit-identical, and no fixed order makes them so.
// Both are computations of the same formula in float, each within the standard-model bound B
// of the exact result (tests/support/runtime.hpp: gamma(K) sum |a||b| per product, the softmax
// bound of core/bounds.hpp with exp within 2 ulp), so |constexpr - runtime| <= 2 B. Exact
// steps (tutorial 000's integer products) must agree bit for bit.
// Tutorial 001's PyTorch numbers (three heads, cross-attention) are checked in
// runtime_attention_test.cpp too.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#define QKV_EXAMPLE_NO_MAIN
#include "../../examples/01_illustrated_self_attention.cpp"
#include "../../examples/02_self_attention_from_scratch.cpp"
#include "../../examples/03_walking_through_the_math.cpp"
#include "../../examples/05_statquest_self_attention.cpp"

#include <qkv/runtime/runtime.hpp>

#include "../support/runtime.hpp"

namespace rt = qkv::runtime;
using qkv::testing::expect_within;
using qkv::testing::reference_attention;
using qkv::testing::to_double;
using qkv::testing::twice;
using rt::dynamic_matrix;

namespace {

/// the runtime result against the constexpr one (within 2 B) and against double (within B)
template <class Core>
void agree(const rt::multihead_result<float>& r, const Core& core, const dynamic_matrix<double>& x,
           const dynamic_matrix<double>& wq, const dynamic_matrix<double>& wk,
           const dynamic_matrix<double>& wv, double scale) {
  dynamic_matrix<double> q, dq, k, dk, v, dv;
  const double u = qkv::testing::unit<float>, g = qkv::testing::gamma_n<float>(x.cols());
  qkv::testing::reference_linear(x, wq, {}, g, u, q, dq);
  qkv::testing::reference_linear(x, wk, {}, g, u, k, dk);
  qkv::testing::reference_linear(x, wv, {}, g, u, v, dv);
  const auto a = reference_attention::compute<float>(q, dq, k, dk, v, dv, scale, false, nullptr, 1);
  expect_within(r.queries, to_double(core.queries), twice(dq), "queries: runtime vs constexpr");
  expect_within(r.keys, to_double(core.keys), twice(dk), "keys: runtime vs constexpr");
  expect_within(r.values, to_double(core.values), twice(dv), "values: runtime vs constexpr");
  expect_within(r.scores[0], to_double(core.scores), twice(a.scores_bound), "scores: runtime vs constexpr");
  expect_within(r.weights[0], to_double(core.weights), twice(a.weights_bound),
                "weights: runtime vs constexpr");
  expect_within(r.output, to_double(core.context), twice(a.out_bound), "context: runtime vs constexpr");
  expect_within(r.weights[0], a.weights, a.weights_bound, "weights: runtime vs double");
  expect_within(r.output, a.out, a.out_bound, "context: runtime vs double");
}

}  // namespace

TEST_CASE("tutorial 000 (illustrated) through the runtime path agrees with its constexpr result") {
  namespace ex = qkv::examples::illustrated;
  rt::attention_weights<float> w;
  w.q = {rt::to_dynamic(ex::w_query), {}, rt::weight_layout::in_out};
  w.k = {rt::to_dynamic(ex::w_key), {}, rt::weight_layout::in_out};
  w.v = {rt::to_dynamic(ex::w_value), {}, rt::weight_layout::in_out};
  rt::attention_options<float> opt;
  opt.keep_weights = true;
  opt.scale = 1.0f;  // the tutorial does not scale
  const auto r = rt::self_attention(rt::to_dynamic(ex::x), w, opt);
  // small integers: projections and scores are exact on both paths, so equal bit for bit
  CHECK((r.queries.to_fixed<3, 3>() == ex::result.queries));
  CHECK((r.keys.to_fixed<3, 3>() == ex::result.keys));
  CHECK((r.values.to_fixed<3, 3>() == ex::result.values));
  CHECK((r.scores[0].to_fixed<3, 3>() == ex::result.scores));
  // in_out weights (in, out): the reference wants (out, in)
  agree(r, ex::result, to_double(ex::x), to_double(qkv::transposed(ex::w_query)),
        to_double(qkv::transposed(ex::w_key)), to_double(qkv::transposed(ex::w_value)), 1.0);
  // and the tutorial's printed outputs (float64 values, example 01): [1.9366, 6.6831, 1.5951] ...
  CHECK(r.output(0, 1) == doctest::Approx(6.683105308334811).epsilon(1e-6));
}

TEST_CASE(
    "tutorial 002 (the math, tokens as columns) through the runtime path agrees with its constexpr result") {
  namespace ex = qkv::examples::the_math;
  // the runtime path takes tokens as rows: x = Xᵀ; W (d x d) is applied as q_t = W x_t, nn.Linear's layout
  rt::attention_weights<float> w;
  w.q.weight = rt::to_dynamic(ex::W_q);
  w.k.weight = rt::to_dynamic(ex::W_k);
  w.v.weight = rt::to_dynamic(ex::W_v);
  rt::attention_options<float> opt;
  opt.keep_weights = true;
  opt.scale = 1.0f;
  const auto x = rt::to_dynamic(qkv::transposed(ex::X));
  const auto r = rt::self_attention(x, w, opt);
  agree(r, ex::result, to_double(x), to_double(ex::W_q), to_double(ex::W_k), to_double(ex::W_v), 1.0);
}

TEST_CASE("tutorial 004 (StatQuest) through the runtime path agrees with its constexpr result") {
  namespace ex = qkv::examples::statquest;
  rt::attention_weights<float> w;
  w.q.weight = rt::to_dynamic(ex::selfAttention.W_q);
  w.k.weight = rt::to_dynamic(ex::selfAttention.W_k);
  w.v.weight = rt::to_dynamic(ex::selfAttention.W_v);
  const auto r = rt::self_attention(rt::to_dynamic(ex::encodings_matrix), w,
                                    {.keep_weights = true});  // default scale 1/sqrt(2)
  CHECK(r.scale == 1.0f / std::sqrt(2.0f));
  agree(r, ex::same, to_double(ex::encodings_matrix), to_double(ex::selfAttention.W_q),
        to_double(ex::selfAttention.W_k), to_double(ex::selfAttention.W_v), 1 / std::sqrt(2.0));
  // the tutorial prints [[1.0100, 1.0641], [0.2040, 0.7057], [3.4989, 2.2427]]
  CHECK(r.output(2, 0) == doctest::Approx(3.4989).epsilon(2e-5));
}

TEST_CASE(
    "tutorial 001 (from scratch, 6 tokens of 16, d_q = 24, d_v = 28) through the runtime path agrees with "
    "its constexpr result") {
  namespace ex = qkv::examples::from_scratch;
  // the notebook's weights are (out, in) and its tokens columns: x = the embedded sentence as rows
  rt::attention_weights<float> w;
  w.q.weight = rt::to_dynamic(ex::weights.W_query);
  w.k.weight = rt::to_dynamic(ex::weights.W_key);
  w.v.weight = rt::to_dynamic(ex::weights.W_value);
  const auto x = rt::to_dynamic(ex::embedded_sentence);
  const auto r = rt::self_attention(
      x, w, {.keep_weights = true});  // default scale 1/sqrt(24); the core divides by sqrt(24)
  agree(r, ex::attn, to_double(x), to_double(ex::weights.W_query), to_double(ex::weights.W_key),
        to_double(ex::weights.W_value), 1 / std::sqrt(24.0));
}
