// 16_flash_attention_backward.cpp: flash attention's backward, taught on tutorial 001's sentence.
//
// Example 09 teaches flash attention's forward: the keys in blocks, a running maximum m and sum
// l per query, no T x S matrix. Its backward (FlashAttention-2, arXiv 2307.08691, Algorithm 2)
// keeps that promise: the forward saves only its output O and each query's m and l, and the
// backward recomputes every weight when it needs it, P_ij = e^(s_ij - m_i) / l_i, block by block.
// The one number it cannot recompute locally is D_i = rowsum(dP ∘ P)_i, which needs the whole
// row; the identity D_i = rowsum(dO ∘ O)_i (example 15 proves it exactly) gives it from the
// output before the loop starts. core/flash_backward.hpp writes the loop; this file proves, on
// "Life is short, eat dessert first" with a drawn upstream gradient, that it gives the
// materialised backward's gradients (example 15) within a bound derived here, and both give
// PyTorch's float64 autograd within theirs (tests/data/backward/torch_backward.hpp).
#include <cstddef>
#include <iostream>
#include <string>
#include <vector>

#include <qkv/core/attention.hpp>
#include <qkv/core/attention_backward.hpp>
#include <qkv/core/backward_bounds.hpp>
#include <qkv/core/bounds.hpp>
#include <qkv/core/check.hpp>
#include <qkv/core/flash_backward.hpp>
#include <qkv/core/linear_backward.hpp>
#include <qkv/core/matrix.hpp>
#include <qkv/core/online_softmax.hpp>
#include <qkv/core/torch.hpp>
#include <qkv/io/print.hpp>

#include "../tests/data/backward/torch_backward.hpp"

namespace qkv::examples::flash_backward {

namespace check = qkv::check;
namespace torch64 = qkv_test::torch_backward::t001;
using qkv::matrix;
using qkv::torch::generator;

// ---------------------------------------------------------------------------------------------
// Step 1: tutorial 001's sentence: the 6x16 embedding (torch.manual_seed(123), nn.Embedding(6, 16))
// in sentence order, and W_query (24, 16), W_key (24, 16), W_value (28, 16) = torch.rand after
// torch.manual_seed(123) again (example 02 proves every bit against PyTorch's).
constexpr auto embedded_sentence = [] {
  generator gen{123};
  const auto weight = gen.embedding<float, 6, 16>();
  return qkv::torch::embedding_lookup(weight, std::array<std::size_t, 6>{0, 4, 5, 2, 1, 3});
}();
struct weights {
  matrix<float, 24, 16> W_query, W_key;
  matrix<float, 28, 16> W_value;
};
constexpr weights w = [] {
  generator gen{123};
  weights out{};
  out.W_query = gen.rand<float, 24, 16>();
  out.W_key = gen.rand<float, 24, 16>();
  out.W_value = gen.rand<float, 28, 16>();
  return out;
}();
constexpr auto x = qkv::transposed(embedded_sentence);  // (16, 6): tokens as columns, as the tutorial
// the upstream gradient: torch.manual_seed(5); torch.randn(6, 28), PyTorch's bits
constexpr auto d_context = [] {
  generator gen{5};
  return gen.randn<float, 6, 28>();
}();
static_assert(proven<check::equal(qkv::matrix_cast<double>(d_context), matrix<double, 6, 28>(torch64::d_context_drawn))>);

// Step 2: the materialised forward and backward (examples 02 and 15): the 6x6 weights kept.
constexpr auto attn = qkv::self_attention(x, w.W_query, w.W_key, w.W_value, qkv::columns);
constexpr auto materialised = qkv::self_attention_backward(x, w.W_query, w.W_key, w.W_value, qkv::columns, attn, d_context);

// Step 3: flash attention's forward, keys in blocks of B = 2: it keeps O (6, 28) and, per query,
// m and l, 12 numbers instead of the 36 weights. Query 1 ("Life"): its six scaled scores are
// those of the materialised forward, bit for bit (the same dot products, the same division by
// float(sqrt(24))), so m is the same maximum; l is summed block by block with rescales.
constexpr std::size_t B = 2;
constexpr auto flash = qkv::flash_attention_forward<B>(attn.queries, attn.keys, attn.values);
constexpr float max_of_row_1 = [] {
  float m = attn.scaled_scores(0, 0);
  for (std::size_t j = 1; j < 6; ++j) m = m < attn.scaled_scores(0, j) ? attn.scaled_scores(0, j) : m;
  return m;
}();
static_assert(flash.row_max(0, 0) == max_of_row_1);

// Step 4: the backward, block by block: D = rowsum(dO ∘ O) first, then for each block of 2 keys
// and each query, P recomputed from m and l, dV += P dO, dP = dO · v, dS = P (dP - D), dQ and dK.
constexpr auto flash_grads = qkv::flash_attention_backward<B>(attn.queries, attn.keys, attn.values, flash, d_context);
// its D: rowsum(dO ∘ O) of the flash output, against the materialised rowsum(dP ∘ P) (step 6
// proves them within the sum of their derived bounds)
constexpr auto D_materialised = qkv::row_dots(materialised.attention.d_weights, attn.weights);
// what the loop recomputes and drops, for the learner's page (flash keeps none of it): each
// weight from m and l as the loop's weight(i, s) computes it, P = e^(s - m) / l (one rounding
// for the subtraction, the exp, the division), dS = P (dP - D) with the D above and the
// materialised dP (the loop's dp is the same dot product, dO · v, summed in the same order),
// and the scores' gradient dS / float(sqrt(24)) (scale_backward). The page recomputes the flash
// gradients from these in the loop's order; that they give flash_grads' bits is checked each
// time the page is written (io/page_recompute.hpp).
template <class Weight>
constexpr matrix<float, 6, 6> recomputed_weights(Weight weight) {
  matrix<float, 6, 6> P{};
  for (std::size_t i = 0; i < 6; ++i)
    for (std::size_t j = 0; j < 6; ++j) P(i, j) = weight(i, attn.scaled_scores(i, j));
  return P;
}
constexpr auto flash_P = recomputed_weights(
    [](std::size_t i, float s) { return float(qkv::exp(float(s - flash.row_max(i, 0))) / flash.row_sum(i, 0)); });
constexpr auto flash_dS = qkv::softmax_backward(flash_P, materialised.attention.d_weights, flash_grads.d_row);
constexpr auto flash_d_scores = qkv::scale_backward(flash_dS, qkv::attention_options<float>{}.scale, 24);

// ---------------------------------------------------------------------------------------------
// Step 5: the bounds. Everything is float32 from exact float inputs.
//   forward:  q, k, v: gamma_16 |x| |W|ᵀ;  scores: with q and k off;  scaled: / sqrt(24) plus
//             2u (the float sqrt and the division);  materialised P: bounds::softmax_rows_error.
//   flash P:  e^(fl(s - m)) / l: the subtraction's rounding (range u, relative, through exp), the
//             exp (2u), the online l (eta: online_softmax.hpp's derivation, (1 + gamma_K)(1 + rho)
//             - 1, K = online_softmax_error_units(6, 2, 2)), the division (u); plus the scores'
//             own error, 2 max e_scaled relative, as for the materialised P; 1% for second order.
//   flash O:  online_softmax_error per column plus the weights' and values' input errors.
//   backward: attention_backward_error (materialised, D = rowsum(dP ∘ P)) and
//             flash_backward_error (D = rowsum(dO ∘ O) with O off by e_O).
// Each computed gradient is within its bound of the truth; the flash and the materialised
// gradients are within the sum of their bounds of each other, and of PyTorch's float64
// (whose own bound, the same with u = 2^-53, is added).
namespace bound {
using qkv::bounds::product_error;
using qkv::matrix_cast;
using qkv::transposed;
// the centres: the same forward and backward in double (within 1e-15 of the truth)
constexpr auto x64 = matrix_cast<double>(x);
constexpr auto e64 = matrix_cast<double>(embedded_sentence);
constexpr auto Wq = matrix_cast<double>(w.W_query), Wk = matrix_cast<double>(w.W_key);
constexpr auto Wv = matrix_cast<double>(w.W_value);
constexpr auto r = qkv::self_attention(x64, Wq, Wk, Wv, qkv::columns);
constexpr auto dO = matrix_cast<double>(d_context);

/// the forward's error bounds in F, computed once (they do not depend on dO)
template <class F>
struct forward_errors {
  matrix<double, 6, 24> e_q, e_k;
  matrix<double, 6, 28> e_v, e_o;          // e_o: the flash output's
  matrix<double, 6, 6> e_scaled, e_p, e_pf;  // e_p: materialised weights, e_pf: flash's
};
template <class F>
constexpr forward_errors<F> forward_bounds() {
  const double u = qkv::bounds::unit_roundoff<F>();
  forward_errors<F> f;
  f.e_q = product_error<F>(e64, transposed(Wq));
  f.e_k = product_error<F>(e64, transposed(Wk));
  f.e_v = product_error<F>(e64, transposed(Wv));
  const auto e_scores = product_error<F>(r.queries, f.e_q, transposed(r.keys), transposed(f.e_k));
  f.e_scaled = qkv::divided(e_scores, 4.898979) + qkv::scaled(2 * u, qkv::bounds::abs(r.scaled_scores));
  f.e_p = qkv::bounds::softmax_rows_error<F>(r.scaled_scores, r.weights, f.e_scaled);
  // the flash weights and output
  const double K = qkv::online_softmax_error_units(6, B, 2);
  const double gamma = K * u / (1 - K * u);
  for (std::size_t i = 0; i < 6; ++i) {
    double hi = r.scaled_scores(i, 0), lo = hi, worst = 0;
    for (std::size_t j = 0; j < 6; ++j) {
      hi = r.scaled_scores(i, j) > hi ? r.scaled_scores(i, j) : hi;
      lo = r.scaled_scores(i, j) < lo ? r.scaled_scores(i, j) : lo;
      worst = f.e_scaled(i, j) > worst ? f.e_scaled(i, j) : worst;
    }
    const double rho = (hi - lo) * u / (1 - (hi - lo) * u);
    const double eta = (1 + gamma) * (1 + rho) - 1;
    for (std::size_t j = 0; j < 6; ++j) f.e_pf(i, j) = 1.01 * r.weights(i, j) * (2 * worst + rho + 3 * u + eta);
    for (std::size_t c = 0; c < 28; ++c) {
      double max_v = 0, inputs = 0;
      for (std::size_t j = 0; j < 6; ++j) {
        const double a = r.values(j, c) < 0 ? -r.values(j, c) : r.values(j, c);
        max_v = a > max_v ? a : max_v;
        inputs += r.weights(i, j) * (2 * worst * (a + f.e_v(j, c)) + f.e_v(j, c));
      }
      f.e_o(i, c) = qkv::online_softmax_error<F>(6, B, hi - lo, max_v) + 1.01 * inputs;
    }
  }
  return f;
}
template <class F>
constexpr auto fwd = forward_bounds<F>();

template <class F>
struct all {
  qkv::bounds::attention_backward_errors<6, 6, 24, 28> materialised, flash;
};
template <class F>
constexpr all<F> derive(const matrix<double, 6, 28>& dO) {
  const auto& f = fwd<F>;
  const double s = 1 / 4.898979;  // 1 / sqrt(24), rounded up
  all<F> a;
  a.materialised = qkv::bounds::attention_backward_error<F>(r.weights, f.e_p, r.values, f.e_v, r.keys, f.e_k, r.queries,
                                                            f.e_q, dO, matrix<double, 6, 28>{}, s, 2.0);
  a.flash = qkv::bounds::flash_backward_error<F>(r.weights, f.e_pf, r.values, f.e_v, r.keys, f.e_k, r.queries, f.e_q, dO,
                                                 matrix<double, 6, 28>{}, r.context, f.e_o, s, 2.0);
  return a;
}
constexpr auto f32 = derive<float>(dO);
constexpr auto f64 = derive<double>(dO);  // PyTorch's float64 autograd (materialised)
template <std::size_t R, std::size_t C>
constexpr matrix<double, R, C> plus(const matrix<double, R, C>& a, const matrix<double, R, C>& b) {
  return qkv::map(a + b, [](double e) { return e * (1 + 1e-6); });
}
}  // namespace bound

// Step 6: flash against materialised, the gradients of the attention: within the sum of the
// two bounds (each is within its own of the truth)
static_assert(proven<check::within(flash_grads.d_row, D_materialised,
                                   bound::plus(bound::f32.flash.d_row, bound::f32.materialised.d_row))>);
static_assert(proven<check::within(flash_grads.d_values, materialised.attention.d_values,
                                   bound::plus(bound::f32.flash.d_values, bound::f32.materialised.d_values))>);
static_assert(proven<check::within(flash_grads.d_queries, materialised.attention.d_queries,
                                   bound::plus(bound::f32.flash.d_queries, bound::f32.materialised.d_queries))>);
static_assert(proven<check::within(flash_grads.d_keys, materialised.attention.d_keys,
                                   bound::plus(bound::f32.flash.d_keys, bound::f32.materialised.d_keys))>);
// the weights the loop recomputes from m and l against the materialised softmax's: within the sum
// of their bounds (step 5's e_pf and e_p), as the gradients built on them
static_assert(proven<check::within(flash_P, attn.weights, bound::plus(bound::fwd<float>.e_pf, bound::fwd<float>.e_p))>);
// and each against PyTorch's float64 autograd
static_assert(proven<check::within(flash_grads.d_queries, matrix<double, 6, 24>(torch64::drawn_f64_d_queries),
                                   bound::plus(bound::f32.flash.d_queries, bound::f64.materialised.d_queries))>);
static_assert(proven<check::within(flash_grads.d_keys, matrix<double, 6, 24>(torch64::drawn_f64_d_keys),
                                   bound::plus(bound::f32.flash.d_keys, bound::f64.materialised.d_keys))>);
static_assert(proven<check::within(flash_grads.d_values, matrix<double, 6, 28>(torch64::drawn_f64_d_values),
                                   bound::plus(bound::f32.flash.d_values, bound::f64.materialised.d_values))>);
static_assert(proven<check::within(materialised.attention.d_queries, matrix<double, 6, 24>(torch64::drawn_f64_d_queries),
                                   bound::plus(bound::f32.materialised.d_queries, bound::f64.materialised.d_queries))>);
static_assert(proven<check::within(materialised.attention.d_scores, matrix<double, 6, 6>(torch64::drawn_f64_d_scores),
                                   bound::plus(bound::f32.materialised.d_scores, bound::f64.materialised.d_scores))>);

// and for loss = output.sum() (dO all ones), the materialised and the flash backward alike
namespace sum {
constexpr auto ones = qkv::filled<float, 6, 28>(1.0f);
constexpr auto materialised = qkv::self_attention_backward(x, w.W_query, w.W_key, w.W_value, qkv::columns, attn, ones);
constexpr auto flash_grads = qkv::flash_attention_backward<B>(attn.queries, attn.keys, attn.values, flash, ones);
constexpr auto f32 = bound::derive<float>(qkv::filled<double, 6, 28>(1.0));
constexpr auto f64 = bound::derive<double>(qkv::filled<double, 6, 28>(1.0));
}  // namespace sum
static_assert(proven<check::within(sum::flash_grads.d_queries, matrix<double, 6, 24>(torch64::sum_f64_d_queries),
                                   bound::plus(sum::f32.flash.d_queries, sum::f64.materialised.d_queries))>);
static_assert(proven<check::within(sum::flash_grads.d_keys, matrix<double, 6, 24>(torch64::sum_f64_d_keys),
                                   bound::plus(sum::f32.flash.d_keys, sum::f64.materialised.d_keys))>);
static_assert(proven<check::within(sum::materialised.attention.d_values, matrix<double, 6, 28>(torch64::sum_f64_d_values),
                                   bound::plus(sum::f32.materialised.d_values, sum::f64.materialised.d_values))>);
static_assert(proven<check::within(sum::materialised.attention.d_queries, matrix<double, 6, 24>(torch64::sum_f64_d_queries),
                                   bound::plus(sum::f32.materialised.d_queries, sum::f64.materialised.d_queries))>);

// Step 7: the weights learn from flash's gradients exactly as from the materialised ones: the
// projections' backward (core/linear_backward.hpp, tokens as columns) takes dQ, dK, dV from
// either. d_w_query = dQᵀ xᵀ (24, 16), a sum over the 6 tokens of products with dQ off by its
// bound: product_error(dQᵀ, e_dQᵀ, xᵀ, 0), x exact; plus PyTorch float64's own.
constexpr auto flash_w_query = qkv::project_backward(x, w.W_query, flash_grads.d_queries, qkv::columns).d_w;
namespace bound {
constexpr auto g64 = qkv::self_attention_backward(x64, Wq, Wk, Wv, qkv::columns, r, dO);
template <class F>
constexpr auto e_w_query(const matrix<double, 6, 24>& e_dq) {
  return product_error<F>(transposed(g64.attention.d_queries), transposed(e_dq), e64, matrix<double, 6, 16>{});
}
}  // namespace bound
static_assert(proven<check::within(flash_w_query, matrix<double, 24, 16>(torch64::drawn_f64_d_w_query),
                                   bound::plus(bound::e_w_query<float>(bound::f32.flash.d_queries),
                                               bound::e_w_query<double>(bound::f64.materialised.d_queries)))>);
// the double path agrees with PyTorch's float64 to its own bound, some 1e-13
static_assert(proven<check::within(bound::g64.d_w_query, matrix<double, 24, 16>(torch64::drawn_f64_d_w_query),
                                   bound::plus(bound::e_w_query<double>(bound::f64.materialised.d_queries),
                                               bound::e_w_query<double>(bound::f64.materialised.d_queries)))>);

// Step 8: FlashAttention-2 keeps one number per query instead of two, the logsumexp
// L_i = m_i + log l_i = log(sum_j e^(s_ij)), and recomputes P_ij = e^(s_ij - L_i): one exp, no
// division. For query 1 ("Life") L = m + log l by hand from the kept m and l.
constexpr auto L = qkv::row_logsumexp(flash);
static_assert(L(0, 0) == flash.row_max(0, 0) + qkv::log(flash.row_sum(0, 0)));
constexpr auto lse_grads = qkv::flash_attention_backward<B>(attn.queries, attn.keys, attn.values, flash.context, L, d_context);
// its loop's weights and gradients of the scores, for the page, as for m and l: P = e^(s - L)
constexpr auto lse_P = recomputed_weights([](std::size_t i, float s) { return float(qkv::exp(float(s - L(i, 0)))); });
constexpr auto lse_dS = qkv::softmax_backward(lse_P, materialised.attention.d_weights, lse_grads.d_row);
constexpr auto lse_d_scores = qkv::scale_backward(lse_dS, qkv::attention_options<float>{}.scale, 24);
// The bound of its weights: the exponent s - L carries the scores' error (2 max e_scaled, as
// before), l's (eta, through the log: eta / (1 - eta)), the log's rounding (1 ulp: 2u |log l|),
// the addition m + log l (u |L|), the subtraction (u |s - L|), then the exp (2u); 1% on top
// for e^x - 1 against x and second order. D, and so the rest of the bound, as for m and l.
namespace bound {
template <class F>
constexpr auto e_p_lse = [] {
  const double u = qkv::bounds::unit_roundoff<F>();
  const double K = qkv::online_softmax_error_units(6, B, 2);
  const double gamma = K * u / (1 - K * u);
  const auto& e_ss = fwd<F>.e_scaled;
  matrix<double, 6, 6> e{};
  for (std::size_t i = 0; i < 6; ++i) {
    double m = r.scaled_scores(i, 0), lo = m, worst = 0;
    for (std::size_t j = 0; j < 6; ++j) {
      m = r.scaled_scores(i, j) > m ? r.scaled_scores(i, j) : m;
      lo = r.scaled_scores(i, j) < lo ? r.scaled_scores(i, j) : lo;
      worst = e_ss(i, j) > worst ? e_ss(i, j) : worst;
    }
    double l = 0;
    for (std::size_t j = 0; j < 6; ++j) l += qkv::exp(r.scaled_scores(i, j) - m);
    const double log_l = qkv::log(l), Li = m + log_l;
    const double rho = (m - lo) * u / (1 - (m - lo) * u);
    const double eta = (1 + gamma) * (1 + rho) - 1;
    for (std::size_t j = 0; j < 6; ++j) {
      const double d = r.scaled_scores(i, j) - Li;
      const double eps = 2 * worst + eta / (1 - eta) + 2 * u * log_l + u * (Li < 0 ? -Li : Li) + u * (d < 0 ? -d : d) + 2 * u;
      e(i, j) = 1.01 * r.weights(i, j) * eps;
    }
  }
  return e;
}();
constexpr auto lse32 = qkv::bounds::flash_backward_error<float>(
    r.weights, e_p_lse<float>, r.values, fwd<float>.e_v, r.keys, fwd<float>.e_k, r.queries, fwd<float>.e_q, dO,
    matrix<double, 6, 28>{}, r.context, fwd<float>.e_o, 1 / 4.898979, 2.0);
}  // namespace bound
// the logsumexp backward against the m-and-l backward: within the sum of their bounds
static_assert(proven<check::within(lse_grads.d_queries, flash_grads.d_queries,
                                   bound::plus(bound::lse32.d_queries, bound::f32.flash.d_queries))>);
static_assert(proven<check::within(lse_grads.d_keys, flash_grads.d_keys,
                                   bound::plus(bound::lse32.d_keys, bound::f32.flash.d_keys))>);
static_assert(proven<check::within(lse_grads.d_values, flash_grads.d_values,
                                   bound::plus(bound::lse32.d_values, bound::f32.flash.d_values))>);
// and against PyTorch's float64
static_assert(proven<check::within(lse_grads.d_queries, matrix<double, 6, 24>(torch64::drawn_f64_d_queries),
                                   bound::plus(bound::lse32.d_queries, bound::f64.materialised.d_queries))>);
// the same D: both take rowsum(dO ∘ O) of the same output
static_assert(lse_grads.d_row == flash_grads.d_row);

// ---------------------------------------------------------------------------------------------
inline void walkthrough() {
  using qkv::io::torch_str;
  std::cout << "Flash attention's backward on \"Life is short, eat dessert first\" (tutorial 001), blocks of "
            << B << " keys\n\n"
            << "what the forward kept: the output O (6, 28) and per query\n"
            << "m = " << torch_str(flash.row_max) << "\nl = " << torch_str(flash.row_sum) << "\n\n"
            << "D = rowsum(dO * O), before the loop over the keys:\n" << torch_str(flash_grads.d_row) << "\n"
            << "the materialised rowsum(dP * P):\n" << torch_str(D_materialised) << "\n\n"
            << "d_queries (flash):\n" << torch_str(flash_grads.d_queries) << "\n"
            << "largest |flash - materialised| in d_queries: "
            << qkv::max_abs_difference(flash_grads.d_queries, materialised.attention.d_queries) << "\n\n"
            << "FlashAttention-2 keeps one number per query, L = m + log l:\n" << torch_str(L) << "\n"
            << "largest |logsumexp backward - m, l backward| in d_queries: "
            << qkv::max_abs_difference(lse_grads.d_queries, flash_grads.d_queries) << "\n";
}

// ---------------------------------------------------------------------------------------------
// The learner's page (qkv explain flash_backward --html FILE; docs/pages.md), as example 09's:
// each step's matrices, every computed cell explaining itself (dP's dot products, D's row dots,
// dS = P (dP - D)), and the flash gradients with the bounds their static_asserts prove.
template <class Page>
void page(Page& p) {
  using how = typename Page::how;
  const std::vector<std::string> words{"Life", "is", "short,", "eat", "dessert", "first"};
  constexpr std::size_t S = 6, d_k = 24, d_v = 28;
  // a proof's tolerance on the page: the largest element of its bound matrix
  auto largest = []<std::size_t R, std::size_t C>(const matrix<double, R, C>& bound_matrix) {
    return qkv::max_abs_difference(bound_matrix, matrix<double, R, C>{});
  };
  p.with_truth();  // its matrices without a how are exact inputs, or marked derived()
  p.step(1);
  p.matrix("embedded_sentence", embedded_sentence).rows(words);
  p.matrix("attn.queries", attn.queries).rows(words).caption("attn.queries = x W_queryᵀ");
  p.matrix("attn.keys", attn.keys).rows(words).caption("attn.keys = x W_keyᵀ");
  p.matrix("attn.values", attn.values).rows(words).caption("attn.values = x W_valueᵀ");
  p.matrix("d_context", d_context).rows(words).caption("d_context = dO: torch.manual_seed(5); torch.randn(6, 28)");
  p.step(2);
  p.matrix("attn.scores", attn.scores).rows(words).cols(words).how(how::dot("attn.queries", "attn.keys", d_k)).hidden();
  p.matrix("attn.scaled_scores", attn.scaled_scores).rows(words).cols(words)
      .how(how::divided("attn.scores", double(qkv::sqrt(24.0f)), "1 / sqrt(24), as a division by float(sqrt(24)) = 4.8989797"));
  p.matrix("attn.weights", attn.weights).rows(words).cols(words).how(how::softmax("attn.scaled_scores"));
  p.heatmap("the materialised weights (flash's backward never writes them)", {"attn.weights"});
  p.matrix("attn.context", attn.context).rows(words).how(how::matmul("attn.weights", "attn.values", S));
  p.matrix("d_weights", materialised.attention.d_weights).rows(words).cols(words)
      .caption("dP = dO Vᵀ (materialised)").how(how::dot("d_context", "attn.values", d_v));
  p.matrix("D_materialised", D_materialised).rows(words).caption("D = rowsum(dP ∘ P) (materialised)")
      .how(how::row_dot("d_weights", "attn.weights", S));
  p.matrix("d_scaled_scores", materialised.attention.d_scaled_scores).rows(words).cols(words)
      .caption("dS = P ∘ (dP − D) (materialised)").how(how::softmax_backward("attn.weights", "d_weights", "D_materialised"));
  p.matrix("d_scores", materialised.attention.d_scores).rows(words).cols(words)
      .caption("dS / sqrt(24): the scores' gradient").how(how::divided("d_scaled_scores", double(qkv::sqrt(24.0f)),
                                                                         "1 / sqrt(24), as a division by float(sqrt(24)) = 4.8989797"));
  p.matrix("materialised.d_queries", materialised.attention.d_queries).rows(words)
      .how(how::matmul("d_scores", "attn.keys", S));
  p.step(3);
  p.matrix("flash.row_max", flash.row_max).rows(words).caption("m: each query's largest scaled score")
      .how(how::flash_row_max("attn.scaled_scores", B));
  p.matrix("flash.row_sum", flash.row_sum).rows(words).caption("l: each query's sum of e^(s - m), block by block")
      .how(how::flash_row_sum("attn.scaled_scores", B));
  p.matrix("flash.context", flash.context).rows(words).caption("O: flash's output, kept for the backward")
      .how(how::online_attention("attn.scaled_scores", "attn.values", B));
  p.step(4);
  p.matrix("flash_grads.d_row", flash_grads.d_row).rows(words).caption("D = rowsum(dO ∘ O), before the loop over the keys")
      .how(how::row_dot("d_context", "flash.context", d_v))
      .proven(D_materialised, "D_materialised (rowsum(dP ∘ P))",
              largest(bound::plus(bound::f32.flash.d_row, bound::f32.materialised.d_row)), "flash + materialised bound (step 6)");
  // the loop's P, dS and scores' gradient, recomputed per block and dropped: hidden steps
  const std::string by_sqrt = "1 / sqrt(24), as a division by float(sqrt(24)) = 4.8989797";
  p.matrix("flash P", flash_P).rows(words).cols(words).caption("flash P = e^(s − m) / l, recomputed by the loop from m and l")
      .how(how::flash_weights("attn.scaled_scores", "flash.row_max", "flash.row_sum")).hidden();
  p.matrix("flash dS", flash_dS).rows(words).cols(words).caption("flash dS = P ∘ (dP − D), D = rowsum(dO ∘ O)")
      .how(how::softmax_backward("flash P", "d_weights", "flash_grads.d_row")).hidden();
  p.matrix("flash d_scores", flash_d_scores).rows(words).cols(words).caption("flash d_scores = flash dS / sqrt(24)")
      .how(how::divided("flash dS", double(qkv::sqrt(24.0f)), by_sqrt)).hidden();
  p.matrix("flash_grads.d_values", flash_grads.d_values).rows(words)
      .how(how::flash_over_queries("flash P", "d_context", "attn.scaled_scores"))
      .proven(materialised.attention.d_values, "materialised.attention.d_values",
              largest(bound::plus(bound::f32.flash.d_values, bound::f32.materialised.d_values)), "flash + materialised bound (step 6)");
  p.matrix("flash_grads.d_queries", flash_grads.d_queries).rows(words)
      .how(how::flash_over_keys("flash d_scores", "attn.keys", "attn.scaled_scores"))
      .proven(materialised.attention.d_queries, "materialised.attention.d_queries",
              largest(bound::plus(bound::f32.flash.d_queries, bound::f32.materialised.d_queries)), "flash + materialised bound (step 6)");
  p.matrix("flash_grads.d_keys", flash_grads.d_keys).rows(words)
      .how(how::flash_over_queries("flash d_scores", "attn.queries", "attn.scaled_scores"))
      .proven(materialised.attention.d_keys, "materialised.attention.d_keys",
              largest(bound::plus(bound::f32.flash.d_keys, bound::f32.materialised.d_keys)), "flash + materialised bound (step 6)");
  p.step(5);
  p.step(6);
  p.matrix("PyTorch float64 d_queries", matrix<double, 6, d_k>(torch64::drawn_f64_d_queries)).rows(words)
      .caption("PyTorch 1.13's float64 autograd: q.grad")
      .derived_because("PyTorch's own numbers (its float64 autograd, run once by "
                       "scripts/fixtures/torch_backward.py): the page has no PyTorch to run again");
  p.step(7);
  p.matrix("flash_grads.d_queriesᵀ", qkv::transposed(flash_grads.d_queries)).caption("dQᵀ = flash_grads.d_queriesᵀ (24, 6)")
      .how(how::transposed("flash_grads.d_queries")).hidden();
  p.matrix("flash_w_query", flash_w_query).caption("d_W_query from flash's dQ (24, 16)")
      .how(how::matmul("flash_grads.d_queriesᵀ", "embedded_sentence", S))
      .proven(matrix<double, 24, 16>(torch64::drawn_f64_d_w_query), "PyTorch float64's W_query.grad",
              largest(bound::plus(bound::e_w_query<float>(bound::f32.flash.d_queries),
                                  bound::e_w_query<double>(bound::f64.materialised.d_queries))),
              "flash's bound through the projection, plus PyTorch float64's");
  p.step(8);
  p.matrix("L", L).rows(words).caption("L = m + log l: FlashAttention-2's one number per query")
      .how(how::logsumexp("flash.row_max", "flash.row_sum"));
  p.matrix("lse P", lse_P).rows(words).cols(words).caption("lse P = e^(s − L), recomputed by the loop from L alone")
      .how(how::logsumexp_weights("attn.scaled_scores", "L")).hidden();
  p.matrix("lse dS", lse_dS).rows(words).cols(words).caption("lse dS = P ∘ (dP − D): the logsumexp backward's")
      .how(how::softmax_backward("lse P", "d_weights", "flash_grads.d_row")).hidden();
  p.matrix("lse d_scores", lse_d_scores).rows(words).cols(words).caption("lse d_scores = lse dS / sqrt(24)")
      .how(how::divided("lse dS", double(qkv::sqrt(24.0f)), by_sqrt)).hidden();
  p.matrix("lse_grads.d_queries", lse_grads.d_queries).rows(words)
      .how(how::flash_over_keys("lse d_scores", "attn.keys", "attn.scaled_scores"))
      .proven(flash_grads.d_queries, "flash_grads.d_queries (the m-and-l backward)",
              largest(bound::plus(bound::lse32.d_queries, bound::f32.flash.d_queries)), "logsumexp + m-and-l bound");
}

}  // namespace qkv::examples::flash_backward

#ifndef QKV_EXAMPLE_NO_MAIN
int main() { qkv::examples::flash_backward::walkthrough(); }
#endif
