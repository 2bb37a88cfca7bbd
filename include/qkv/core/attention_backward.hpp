// attention_backward.hpp: every gradient of one attention call, step by step, for an upstream d_context.
//
// Forward (attention.hpp), its steps named as attention_result's fields, and each step's
// backward (d_X is dL/dX; dO = d_context is given, e.g. all ones for output.sum()):
//   context       = weights values     d_weights = dO valuesᵀ  (T, S)   d_values = weightsᵀ dO  (S, d_v)
//   weights       = softmax_rows(ss)   d_scaled_scores = P ∘ (dP - D),  D = rowsum(dP ∘ P)   (T, S)
//   scaled_scores = scores * s, masked d_scores = s d_scaled_scores, 0 where masked           (T, S)
//   scores        = queries keysᵀ      d_queries = d_scores keys (T, d_k)   d_keys = d_scoresᵀ queries (S, d_k)
// (FlashAttention-2, arXiv 2307.08691, eq. in §2.2: dV = Pᵀ dO, dP = dO Vᵀ, dS = P ∘ (dP - D),
// dQ = s dS K, dK = s dSᵀ Q.) PyTorch's grad_fn's for these steps: MmBackward0 (the two
// products), SoftmaxBackward0, DivBackward0 (a division by sqrt(d_k): d_scores = dS / sqrt(d_k),
// a division, as the forward), TransposeBackward0 (kᵀ: the gradient transposed back).
//
// The scaling is undone as the forward did it: divide_by_sqrt_dk and divide_by divide the
// gradient by the same rounded divisor, multiply_by multiplies, none copies (docs/gradients.md).
// Masks are read from the forward result: a scaled score of -inf (causal, a boolean mask, key
// padding) gets d_scaled_scores and d_scores exactly 0, and its key's value is not read for
// the query's d_values (as the forward's attended_context skips it); a fully masked row has
// every gradient 0. Generic over the number type: float, double, qkv::exact::rational.
#pragma once

#include <cstddef>
#include <limits>
#include <stdexcept>

#include "fail.hpp"
#include "attention.hpp"
#include "linear_backward.hpp"
#include "math.hpp"
#include "matrix.hpp"
#include "softmax.hpp"
#include "softmax_backward.hpp"

namespace qkv {

/// the upstream gradient d_context (DR, DC) must have the context's shape (T, d_v): a mismatch
/// names both, e.g. "[with Tq = 3; Dv = 2; DR = 2; DC = 3]"
template <std::size_t Tq, std::size_t Dv, std::size_t DR, std::size_t DC>
concept d_context_has_the_shape_of_the_context = (Tq == DR && Dv == DC);

/// @brief every gradient of one head's attention_result for an upstream d_context; T queries, S keys
template <class T, std::size_t Tq, std::size_t S, std::size_t Dk, std::size_t Dv>
struct attention_gradients {
  matrix<T, Tq, Dv> d_context;       // dO, the upstream gradient (given)
  matrix<T, Tq, S> d_weights;        // dP = dO Vᵀ
  matrix<T, Tq, S> d_scaled_scores;  // dS = P ∘ (dP - D), 0 where masked
  matrix<T, Tq, S> d_scores;         // before the scale: s dS (dS / divisor)
  matrix<T, Tq, Dk> d_queries;       // d_scores K
  matrix<T, S, Dk> d_keys;           // d_scoresᵀ Q
  matrix<T, S, Dv> d_values;         // Pᵀ dO
};

/// @brief the gradients of context = weights values: d_weights = dO Vᵀ and d_values = Pᵀ dO,
/// where a key with a -inf scaled score (masked) is skipped for that query in d_values.
/// (T, S) scaled scores and weights, (S, d_v) values, (T, d_v) dO
template <class T, std::size_t Tq, std::size_t S, std::size_t Dv>
struct context_gradients {
  matrix<T, Tq, S> d_weights;
  matrix<T, S, Dv> d_values;
};

template <class T, std::size_t Tq, std::size_t S, std::size_t Dv>
[[nodiscard]] constexpr context_gradients<T, Tq, S, Dv> context_backward(
    const matrix<T, Tq, S>& scaled_scores, const matrix<T, Tq, S>& weights, const matrix<T, S, Dv>& values,
    const matrix<T, Tq, Dv>& d_context) {
  context_gradients<T, Tq, S, Dv> g;
  g.d_weights = matrix_product_transposed(d_context, values);  // (T, d_v) x (S, d_v)ᵀ -> (T, S)
  // d_values(j, c) = sum_i P(i, j) dO(i, c) over the queries that attend to key j, i ascending
  for (std::size_t j = 0; j < S; ++j)
    for (std::size_t c = 0; c < Dv; ++c) {
      T s = T(0);
      bool first = true;
      for (std::size_t i = 0; i < Tq; ++i) {
        if (detail::is_minus_infinity(scaled_scores.v[i * S + j])) continue;
        const T term = weights.v[i * S + j] * d_context.v[i * Dv + c];
        s = first ? term : T(s + term);
        first = false;
      }
      g.d_values.v[j * Dv + c] = s;
    }
  return g;
}

/// @brief the backward of a mask: 0 where the forward's scaled score is -inf, d unchanged elsewhere
template <class T, std::size_t Tq, std::size_t S>
[[nodiscard]] constexpr matrix<T, Tq, S> mask_backward(const matrix<T, Tq, S>& scaled_scores,
                                                       const matrix<T, Tq, S>& d) {
  matrix<T, Tq, S> out = d;
  for (std::size_t k = 0; k < Tq * S; ++k)
    if (detail::is_minus_infinity(scaled_scores.v[k])) out.v[k] = T(0);
  return out;
}

/// @brief the backward of scale(s, how, d_k): the gradient scaled as the scores were
/// (divided by the same rounded sqrt(d_k) or divisor, multiplied by the factor, or copied)
/// (over exact rationals sqrt(d_k) has no value: divide_by_sqrt_dk then stops the compilation at
/// detail::sqrt_dk_is_not_a_number_of_this_type; pass divide_by or multiply_by)
namespace detail {
[[noreturn]] inline void sqrt_dk_is_not_a_number_of_this_type() {
  ::qkv::detail::fail<std::domain_error>("qkv::scale_backward: sqrt(d_k) of an exact type");
}
}  // namespace detail

template <class T, std::size_t Tq, std::size_t S>
[[nodiscard]] constexpr matrix<T, Tq, S> scale_backward(const matrix<T, Tq, S>& d_scaled,
                                                        const scaling<T>& how, std::size_t d_k) {
  using kind = typename scaling<T>::kind;
  switch (how.how) {
    case kind::none: return d_scaled;
    case kind::divide_by_sqrt_dk:
      if constexpr (requires { qkv::sqrt(T(1)); }) {
        return divided(d_scaled, qkv::sqrt(T(d_k)));  // the forward's rounded divisor
      } else {
        detail::sqrt_dk_is_not_a_number_of_this_type();
      }
    case kind::divide_by: return divided(d_scaled, how.value);
    case kind::multiply_by: return scaled(how.value, d_scaled);
  }
  return d_scaled;
}

/// @brief the gradients of scores = Q Kᵀ: d_queries = d_scores K (T, d_k), d_keys = d_scoresᵀ Q (S, d_k)
template <class T, std::size_t Tq, std::size_t S, std::size_t Dk>
struct scores_gradients {
  matrix<T, Tq, Dk> d_queries;
  matrix<T, S, Dk> d_keys;
};

template <class T, std::size_t Tq, std::size_t S, std::size_t Dk>
[[nodiscard]] constexpr scores_gradients<T, Tq, S, Dk> scores_backward(const matrix<T, Tq, Dk>& queries,
                                                                       const matrix<T, S, Dk>& keys,
                                                                       const matrix<T, Tq, S>& d_scores) {
  return {matrix_product(d_scores, keys), matrix_product(transposed(d_scores), queries)};
}

/// @brief every gradient of a forward result r for the upstream gradient d_context (T, d_v).
/// options must be the forward's (its scaling is undone; its masks are read from r).
template <class T, std::size_t Tq, std::size_t S, std::size_t Dk, std::size_t Dv, std::size_t DR,
          std::size_t DC>
  requires d_context_has_the_shape_of_the_context<Tq, Dv, DR, DC>
[[nodiscard]] constexpr attention_gradients<T, Tq, S, Dk, Dv> attention_backward(
    const attention_result<T, Tq, S, Dk, Dv>& r, const matrix<T, DR, DC>& d_context,
    const attention_options<T>& options = {}) {
  attention_gradients<T, Tq, S, Dk, Dv> g;
  g.d_context = d_context;
  const auto c = context_backward(r.scaled_scores, r.weights, r.values, g.d_context);
  g.d_weights = c.d_weights;                                              // (T, S)
  g.d_values = c.d_values;                                                // (S, d_v)
  g.d_scaled_scores = softmax_backward(r.weights, g.d_weights);           // (T, S), 0 where P = 0
  g.d_scaled_scores = mask_backward(r.scaled_scores, g.d_scaled_scores);  // 0 where masked
  g.d_scores = scale_backward(g.d_scaled_scores, options.scale, Dk);      // (T, S)
  const auto s = scores_backward(r.queries, r.keys, g.d_scores);
  g.d_queries = s.d_queries;  // (T, d_k)
  g.d_keys = s.d_keys;        // (S, d_k)
  return g;
}

/// @brief the gradients of self_attention(x, wq, wk, wv, layout) through its projections:
/// d_x sums the three projections' d_x (query + key + value, in that order), each weight its own
template <class T, std::size_t XR, std::size_t XC, std::size_t QR, std::size_t QC, std::size_t KR,
          std::size_t KC, std::size_t VR, std::size_t VC, std::size_t Tq, std::size_t S, std::size_t Dk,
          std::size_t Dv>
struct self_attention_gradients {
  attention_gradients<T, Tq, S, Dk, Dv> attention;
  matrix<T, XR, XC> d_x;
  matrix<T, QR, QC> d_w_query;
  matrix<T, KR, KC> d_w_key;
  matrix<T, VR, VC> d_w_value;
};

/// @brief every gradient of self_attention(x, wq, wk, wv, layout, options) = r for d_context
template <weight_layout_tag L, class T, std::size_t XR, std::size_t XC, std::size_t QR, std::size_t QC,
          std::size_t KR, std::size_t KC, std::size_t VR, std::size_t VC, std::size_t Tq, std::size_t S,
          std::size_t Dk, std::size_t Dv, std::size_t DR, std::size_t DC>
  requires d_context_has_the_shape_of_the_context<Tq, Dv, DR, DC>
[[nodiscard]] constexpr self_attention_gradients<T, XR, XC, QR, QC, KR, KC, VR, VC, Tq, S, Dk, Dv>
self_attention_backward(const matrix<T, XR, XC>& x, const matrix<T, QR, QC>& wq, const matrix<T, KR, KC>& wk,
                        const matrix<T, VR, VC>& wv, L layout, const attention_result<T, Tq, S, Dk, Dv>& r,
                        const matrix<T, DR, DC>& d_context, const attention_options<T>& options = {}) {
  self_attention_gradients<T, XR, XC, QR, QC, KR, KC, VR, VC, Tq, S, Dk, Dv> g;
  g.attention = attention_backward(r, d_context, options);
  const auto pq = project_backward(x, wq, g.attention.d_queries, layout);
  const auto pk = project_backward(x, wk, g.attention.d_keys, layout);
  const auto pv = project_backward(x, wv, g.attention.d_values, layout);
  g.d_w_query = pq.d_w;
  g.d_w_key = pk.d_w;
  g.d_w_value = pv.d_w;
  g.d_x = pq.d_x + pk.d_x + pv.d_x;
  return g;
}

}  // namespace qkv
