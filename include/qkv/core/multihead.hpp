// multihead.hpp: multi-head attention: split into heads, attend per head, concatenate, project.
//
//   Q, K, V = projections of x (and of the context)          (T, d_q), (S, d_q), (S, d_v)
//   head h takes columns h*d_q/H .. (h+1)*d_q/H - 1 of Q and K and the same share of V
//   each head: softmax(Q_h K_hᵀ * scale) V_h, scale from the head's own width d_q/H
//   concat = [context_0 context_1 ...]                        (T, d_v), heads in order
//   output = concat Woᵀ (+ bo)                                (T, d_out), when Wo is given
// Every head's scores and weights are kept (never averaged). This is nn.MultiheadAttention's
// arithmetic for one batch element, with its in-projection given as three matrices.
#pragma once

#include <cstddef>

#include "attention.hpp"
#include "matrix.hpp"

namespace qkv {

/// d must split evenly into heads
template <std::size_t D, std::size_t Heads>
concept divisible_into_heads = (Heads > 0 && D % Heads == 0);

/// (T, D) -> (Heads, T, D / Heads): head h is columns h*D/Heads .. (h+1)*D/Heads - 1
template <std::size_t Heads, class T, std::size_t N, std::size_t D>
  requires divisible_into_heads<D, Heads>
[[nodiscard]] constexpr stack<T, Heads, N, D / Heads> split_heads(const matrix<T, N, D>& m) {
  stack<T, Heads, N, D / Heads> out;
  for (std::size_t h = 0; h < Heads; ++h) out[h] = block<N, D / Heads>(m, 0, h * (D / Heads));
  return out;
}

/// @brief every intermediate of multi-head attention; T queries, S keys, H heads
template <class T, std::size_t H, std::size_t Tq, std::size_t S, std::size_t Dq, std::size_t Dv>
struct multihead_result {
  matrix<T, Tq, Dq> queries;  // all heads side by side
  matrix<T, S, Dq> keys;
  matrix<T, S, Dv> values;
  stack<T, H, Tq, S> scores;         // per head: q·k, raw
  stack<T, H, Tq, S> scaled_scores;  // per head: scaled and masked
  stack<T, H, Tq, S> weights;        // per head: softmax of each row
  stack<T, H, Tq, Dv / H> context;   // per head: weights V_h
  matrix<T, Tq, Dv> concat;          // the heads' contexts side by side
};

/// @brief multi-head attention over projected queries, keys and values
template <std::size_t H, class T, std::size_t Tq, std::size_t S, std::size_t Dq, std::size_t Dv>
  requires(divisible_into_heads<Dq, H> && divisible_into_heads<Dv, H>)
[[nodiscard]] constexpr multihead_result<T, H, Tq, S, Dq, Dv> multihead_attend_projected(
    const matrix<T, Tq, Dq>& q, const matrix<T, S, Dq>& k, const matrix<T, S, Dv>& v,
    const attention_options<T>& options = {}) {
  multihead_result<T, H, Tq, S, Dq, Dv> r;
  r.queries = q;
  r.keys = k;
  r.values = v;
  const auto qh = split_heads<H>(q);  // (H, T, d_q/H)
  const auto kh = split_heads<H>(k);  // (H, S, d_q/H): one declaration each, T and S may differ
  const auto vh = split_heads<H>(v);  // (H, S, d_v/H)
  for (std::size_t h = 0; h < H; ++h) {
    const auto a = attend_projected(qh[h], kh[h], vh[h], options);  // scale from d_q/H
    r.scores[h] = a.scores;
    r.scaled_scores[h] = a.scaled_scores;
    r.weights[h] = a.weights;
    r.context[h] = a.context;
  }
  r.concat = hconcat(r.context);
  return r;
}

/// @brief multi-head self-attention with projections in the layout L (see attention.hpp)
template <std::size_t H, weight_layout_tag L, class T, std::size_t XR, std::size_t XC, std::size_t QR,
          std::size_t QC, std::size_t KR, std::size_t KC, std::size_t VR, std::size_t VC>
[[nodiscard]] constexpr auto multihead_self_attention(const matrix<T, XR, XC>& x, const matrix<T, QR, QC>& wq,
                                                      const matrix<T, KR, KC>& wk,
                                                      const matrix<T, VR, VC>& wv, L layout,
                                                      const attention_options<T>& options = {}) {
  return multihead_attend_projected<H>(project(x, wq, layout), project(x, wk, layout), project(x, wv, layout),
                                       options);
}

/// the output projection of the concatenated heads: concat Woᵀ (nn.Linear layout), (T, d_v) -> (T, d_out)
template <class T, std::size_t H, std::size_t Tq, std::size_t S, std::size_t Dq, std::size_t Dv,
          std::size_t Dout, std::size_t WDin>
  requires product_shapes<Tq, Dv, WDin, Dout>
[[nodiscard]] constexpr matrix<T, Tq, Dout> output_projection(const multihead_result<T, H, Tq, S, Dq, Dv>& r,
                                                              const matrix<T, Dout, WDin>& wo) {
  return matrix_product_transposed(r.concat, wo);
}

/// the output projection with a bias: concat Woᵀ + bo
template <class T, std::size_t H, std::size_t Tq, std::size_t S, std::size_t Dq, std::size_t Dv,
          std::size_t Dout, std::size_t WDin>
  requires product_shapes<Tq, Dv, WDin, Dout>
[[nodiscard]] constexpr matrix<T, Tq, Dout> output_projection(const multihead_result<T, H, Tq, S, Dq, Dv>& r,
                                                              const matrix<T, Dout, WDin>& wo,
                                                              const matrix<T, 1, Dout>& bo) {
  return add_row_vector(matrix_product_transposed(r.concat, wo), bo);
}

}  // namespace qkv
