// attention_backward.hpp: the truth for attention's backward: every gradient in 50 digits, at run time.
//
// The analytic backward (core/attention_backward.hpp's formulas) evaluated in
// cpp_bin_float_50 from the reference forward (reference/attention.hpp):
//   dP = dO Vᵀ, D = rowsum(dP ∘ P), dS = P ∘ (dP - D), d_scores = dS / divisor,
//   dQ = d_scores K, dK = d_scoresᵀ Q, dV = Pᵀ dO, and through the projections
//   d_w = Xᵀ dY (in_out), dYᵀ X (out_in), dYᵀ Xᵀ (columns); d_x the three added.
// The core's generic steps do the arithmetic (softmax_backward, scores_backward,
// project_backward are generic over the number type); only the scaling is the reference's
// (the true sqrt(d_k) in 50 digits). tests/reference/backward_test.cpp checks these
// against central differences of the 50-digit forward, so that they are the truth the float
// paths are judged by. Run time only (Boost's real is not a literal type).
#pragma once

#include <cstddef>

#include <qkv/core/attention.hpp>
#include <qkv/core/attention_backward.hpp>
#include <qkv/core/linear_backward.hpp>
#include <qkv/core/matrix.hpp>
#include <qkv/core/softmax_backward.hpp>
#include <qkv/reference/attention.hpp>
#include <qkv/reference/multiprecision.hpp>

namespace qkv::reference {

/// @brief the reference forward with every step in 50 digits from real inputs (for perturbed
/// inputs, e.g. central differences: reference/attention.hpp's self_attention takes exact ones)
template <qkv::weight_layout_tag L, std::size_t XR, std::size_t XC, std::size_t QR, std::size_t QC,
          std::size_t KR, std::size_t KC, std::size_t VR, std::size_t VC>
[[nodiscard]] auto self_attention_real(const matrix<real, XR, XC>& x, const matrix<real, QR, QC>& wq,
                                       const matrix<real, KR, KC>& wk, const matrix<real, VR, VC>& wv,
                                       L layout, const scaling& how = scaling::divide_by_sqrt_dk()) {
  const auto q = qkv::project(x, wq, layout);
  const auto k = qkv::project(x, wk, layout);
  const auto v = qkv::project(x, wv, layout);
  constexpr std::size_t Tq = decltype(q)::rows(), S = decltype(k)::rows(), Dk = decltype(q)::cols(),
                        Dv = decltype(v)::cols();
  qkv::attention_result<real, Tq, S, Dk, Dv> r;
  r.queries = q;
  r.keys = k;
  r.values = v;
  r.scores = qkv::scores(q, k);
  r.scaled_scores = r.scores;
  if (how.how != scaling::kind::none) {
    const real d = how.how == scaling::kind::divide_by_sqrt_dk ? sqrt(real(Dk)) : how.divisor;
    for (std::size_t n = 0; n < Tq * S; ++n) r.scaled_scores.v[n] /= d;
  }
  r.weights = softmax_rows(r.scaled_scores);
  r.context = qkv::context(r.weights, r.values);
  return r;
}

/// @brief every gradient of a 50-digit forward r for the upstream d_context, in 50 digits
template <std::size_t Tq, std::size_t S, std::size_t Dk, std::size_t Dv>
[[nodiscard]] qkv::attention_gradients<real, Tq, S, Dk, Dv> attention_backward(
    const qkv::attention_result<real, Tq, S, Dk, Dv>& r, const matrix<real, Tq, Dv>& d_context,
    const scaling& how = scaling::divide_by_sqrt_dk()) {
  qkv::attention_gradients<real, Tq, S, Dk, Dv> g;
  g.d_context = d_context;
  g.d_weights = qkv::matrix_product_transposed(d_context, r.values);
  g.d_values = qkv::matrix_product(qkv::transposed(r.weights), d_context);
  g.d_scaled_scores = qkv::softmax_backward(r.weights, g.d_weights);
  g.d_scores = g.d_scaled_scores;
  if (how.how != scaling::kind::none) {
    const real d = how.how == scaling::kind::divide_by_sqrt_dk ? sqrt(real(Dk)) : how.divisor;
    for (std::size_t n = 0; n < Tq * S; ++n) g.d_scores.v[n] /= d;
  }
  const auto s = qkv::scores_backward(r.queries, r.keys, g.d_scores);
  g.d_queries = s.d_queries;
  g.d_keys = s.d_keys;
  return g;
}

/// @brief every gradient of self_attention_real(x, wq, wk, wv, layout, how) for d_context
template <qkv::weight_layout_tag L, std::size_t XR, std::size_t XC, std::size_t QR, std::size_t QC,
          std::size_t KR, std::size_t KC, std::size_t VR, std::size_t VC, std::size_t Tq, std::size_t Dv>
[[nodiscard]] auto self_attention_backward(const matrix<real, XR, XC>& x, const matrix<real, QR, QC>& wq,
                                           const matrix<real, KR, KC>& wk, const matrix<real, VR, VC>& wv,
                                           L layout, const matrix<real, Tq, Dv>& d_context,
                                           const scaling& how = scaling::divide_by_sqrt_dk()) {
  const auto r = self_attention_real(x, wq, wk, wv, layout, how);
  constexpr std::size_t S = decltype(r.keys)::rows(), Dk = decltype(r.queries)::cols();
  qkv::self_attention_gradients<real, XR, XC, QR, QC, KR, KC, VR, VC, Tq, S, Dk, Dv> g;
  g.attention = attention_backward(r, d_context, how);
  const auto pq = qkv::project_backward(x, wq, g.attention.d_queries, layout);
  const auto pk = qkv::project_backward(x, wk, g.attention.d_keys, layout);
  const auto pv = qkv::project_backward(x, wv, g.attention.d_values, layout);
  g.d_w_query = pq.d_w;
  g.d_w_key = pk.d_w;
  g.d_w_value = pv.d_w;
  g.d_x = pq.d_x + pk.d_x + pv.d_x;
  return g;
}

}  // namespace qkv::reference
