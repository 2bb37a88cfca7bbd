// flash_backward.hpp: flash attention's backward: P recomputed block by block from the saved row statistics.
//
// The materialised backward (attention_backward.hpp) keeps the T x S weights P from the forward.
// Flash attention (Dao et al. 2022; FlashAttention-2, arXiv 2307.08691, Algorithm 2) keeps only
// O (T, d_v) and two numbers per query, the row maximum m_i and the row sum l_i = sum_j
// e^(s_ij - m_i) of its online softmax (online_softmax.hpp; FlashAttention-2 folds them into
// one, the logsumexp L_i = m_i + log l_i). The backward then visits the keys block by block and,
// for each query, recomputes what it needs:
//   s_ij  = scale(q_i · k_j)               the forward's scaled score, the same bits
//   P_ij  = e^(s_ij - m_i) / l_i           the weight, recomputed (0 for a masked key); or
//           e^(s_ij - L_i) from the logsumexp L_i = m_i + log l_i (row_logsumexp), FA-2's form
//   dV_j += P_ij dO_i                      dP_ij = dO_i · v_j
//   dS_ij = P_ij (dP_ij - D_i)             with D_i = rowsum(dO ∘ O)_i, computed once before
//                                          the loop: the identity rowsum(dP ∘ P) = rowsum(dO ∘ O)
//                                          is what lets the backward skip a pass over the row
//   dQ_i += d_scores_ij k_j   dK_j += d_scores_ij q_i   (d_scores = dS scaled as the forward)
// No T x S matrix is kept: memory is O(T d) (the gradients and the 2 T statistics). Every sum
// runs in the materialised backward's order (dQ over keys ascending, dK and dV over queries
// ascending), so the two differ only through P (e^(s - m) / l with the online l against the
// materialised softmax) and D (rowsum(dO ∘ O) against rowsum(dP ∘ P)); example 16 bounds that.
#pragma once

#include <cstddef>
#include <limits>

#include "attention.hpp"
#include "attention_backward.hpp"
#include "math.hpp"
#include "matrix.hpp"
#include "online_softmax.hpp"
#include "softmax.hpp"
#include "softmax_backward.hpp"

namespace qkv {

/// @brief what flash attention's forward keeps for its backward: the output and, per query, the
/// final online-softmax maximum m and sum l
template <class T, std::size_t Tq, std::size_t Dv>
struct flash_result {
  matrix<T, Tq, Dv> context;
  matrix<T, Tq, 1> row_max;  // m_i (-inf for a fully masked row)
  matrix<T, Tq, 1> row_sum;  // l_i (0 for a fully masked row)
};

namespace detail {
/// one scaled (and causally masked) score, the bits attend_projected gives: the dot product
/// summed left to right (matrix_product_transposed's order), then scale()
template <class T, std::size_t Tq, std::size_t S, std::size_t Dk>
constexpr T flash_score(const matrix<T, Tq, Dk>& q, const matrix<T, S, Dk>& k, std::size_t i, std::size_t j,
                        const attention_options<T>& options) {
  if constexpr (std::numeric_limits<T>::has_infinity)
    if (options.causal && j > i) return -std::numeric_limits<T>::infinity();
  matrix<T, 1, 1> s;
  s.v[0] = q.v[i * Dk] * k.v[j * Dk];
  for (std::size_t c = 1; c < Dk; ++c) s.v[0] += q.v[i * Dk + c] * k.v[j * Dk + c];
  return scale(s, options.scale, Dk).v[0];
}
}  // namespace detail

/// @brief flash attention's forward over key blocks of B (online_softmax.hpp's steps), keeping
/// the output and each query's m and l. (T, d_k), (S, d_k), (S, d_v) -> (T, d_v) and 2 x (T, 1)
template <std::size_t B, class T, std::size_t Tq, std::size_t S, std::size_t Dk, std::size_t Dv>
[[nodiscard]] constexpr flash_result<T, Tq, Dv> flash_attention_forward(
    const matrix<T, Tq, Dk>& q, const matrix<T, S, Dk>& k, const matrix<T, S, Dv>& v,
    const attention_options<T>& options = {}) {
  static_assert(B >= 1, "flash_attention_forward: the block size B must be at least 1");
  flash_result<T, Tq, Dv> r;
  for (std::size_t i = 0; i < Tq; ++i) {
    online_softmax_state<T, Dv> st{};
    T block[B]{};
    for (std::size_t j0 = 0; j0 < S; j0 += B) {
      const std::size_t n = S - j0 < B ? S - j0 : B;
      for (std::size_t j = 0; j < n; ++j) block[j] = detail::flash_score(q, k, i, j0 + j, options);
      st = online_softmax_step(st, block, n, v, j0);
    }
    const auto o = online_softmax_output(st);
    for (std::size_t c = 0; c < Dv; ++c) r.context.v[i * Dv + c] = o.v[c];
    r.row_max.v[i] = st.m;
    r.row_sum.v[i] = st.l;
  }
  return r;
}

/// @brief the gradients flash attention's backward gives, and the D it used
template <class T, std::size_t Tq, std::size_t S, std::size_t Dk, std::size_t Dv>
struct flash_gradients {
  matrix<T, Tq, 1> d_row;  // D = rowsum(dO ∘ O)
  matrix<T, Tq, Dk> d_queries;
  matrix<T, S, Dk> d_keys;
  matrix<T, S, Dv> d_values;
};

namespace detail {
/// the loop of flash attention's backward; weight(i, s) recomputes P_ij from the saved statistics
/// and live(i) says whether query i attends to anything
template <std::size_t B, class T, std::size_t Tq, std::size_t S, std::size_t Dk, std::size_t Dv, class Weight,
          class Live>
constexpr flash_gradients<T, Tq, S, Dk, Dv> flash_backward_loop(
    const matrix<T, Tq, Dk>& q, const matrix<T, S, Dk>& k, const matrix<T, S, Dv>& v,
    const matrix<T, Tq, Dv>& context, const matrix<T, Tq, Dv>& d_context, const attention_options<T>& options,
    Weight weight, Live live) {
  static_assert(B >= 1, "flash_attention_backward: the block size B must be at least 1");
  flash_gradients<T, Tq, S, Dk, Dv> g{};
  g.d_row = row_dots(d_context, context);  // D_i, before the loop over the keys
  bool q_started[Tq]{}, kv_started[S]{};
  for (std::size_t j0 = 0; j0 < S; j0 += B) {  // outer loop: one block of keys and values
    const std::size_t n = S - j0 < B ? S - j0 : B;
    for (std::size_t i = 0; i < Tq; ++i) {  // inner loop: every query against the block
      if (!live(i)) continue;               // fully masked row: no gradient
      for (std::size_t j = j0; j < j0 + n; ++j) {
        const T s = flash_score(q, k, i, j, options);
        if (is_minus_infinity(s)) continue;  // masked: P = 0, nothing flows
        const T p = weight(i, s);
        T dp = d_context.v[i * Dv] * v.v[j * Dv];
        for (std::size_t c = 1; c < Dv; ++c) dp += d_context.v[i * Dv + c] * v.v[j * Dv + c];
        const bool first_kv = !kv_started[j], first_q = !q_started[i];
        for (std::size_t c = 0; c < Dv; ++c) {
          const T term = p * d_context.v[i * Dv + c];
          g.d_values.v[j * Dv + c] = first_kv ? term : T(g.d_values.v[j * Dv + c] + term);
        }
        matrix<T, 1, 1> ds;
        ds.v[0] = p == T(0) ? T(0) : T(p * T(dp - g.d_row.v[i]));
        const T d_score = scale_backward(ds, options.scale, Dk).v[0];
        for (std::size_t c = 0; c < Dk; ++c) {
          const T tq = d_score * k.v[j * Dk + c], tk = d_score * q.v[i * Dk + c];
          g.d_queries.v[i * Dk + c] = first_q ? tq : T(g.d_queries.v[i * Dk + c] + tq);
          g.d_keys.v[j * Dk + c] = first_kv ? tk : T(g.d_keys.v[j * Dk + c] + tk);
        }
        kv_started[j] = q_started[i] = true;
      }
    }
  }
  return g;
}
}  // namespace detail

/// @brief flash attention's backward over key blocks of B: from q, k, v, the forward's output,
/// m and l, and the upstream d_context (T, d_v), without any T x S matrix: P = e^(s - m) / l.
/// options must be the forward's. A masked key gets no gradient from its query; a fully masked
/// row (l = 0) none.
template <std::size_t B, class T, std::size_t Tq, std::size_t S, std::size_t Dk, std::size_t Dv>
[[nodiscard]] constexpr flash_gradients<T, Tq, S, Dk, Dv> flash_attention_backward(
    const matrix<T, Tq, Dk>& q, const matrix<T, S, Dk>& k, const matrix<T, S, Dv>& v,
    const flash_result<T, Tq, Dv>& forward, const matrix<T, Tq, Dv>& d_context,
    const attention_options<T>& options = {}) {
  return detail::flash_backward_loop<B>(
      q, k, v, forward.context, d_context, options,
      [&](std::size_t i, const T& s) {
        return T(qkv::exp(T(s - forward.row_max.v[i])) / forward.row_sum.v[i]);
      },
      [&](std::size_t i) { return forward.row_sum.v[i] != T(0); });
}

/// @brief the one number per query FlashAttention-2 saves instead of m and l: the logsumexp
/// L_i = m_i + log(l_i) = log(sum_j e^(s_ij)), so that P_ij = e^(s_ij - L_i). -inf for a fully
/// masked row (l = 0). (T, 1)
template <class T, std::size_t Tq, std::size_t Dv>
[[nodiscard]] constexpr matrix<T, Tq, 1> row_logsumexp(const flash_result<T, Tq, Dv>& forward) {
  matrix<T, Tq, 1> out;
  for (std::size_t i = 0; i < Tq; ++i)
    out.v[i] = forward.row_sum.v[i] == T(0) ? -std::numeric_limits<T>::infinity()
                                            : T(forward.row_max.v[i] + qkv::log(forward.row_sum.v[i]));
  return out;
}

/// @brief flash attention's backward from the output and the logsumexp L (T, 1) alone, as
/// FlashAttention-2 keeps them: P = e^(s - L). A row with L = -inf (fully masked) gets none.
template <std::size_t B, class T, std::size_t Tq, std::size_t S, std::size_t Dk, std::size_t Dv>
[[nodiscard]] constexpr flash_gradients<T, Tq, S, Dk, Dv> flash_attention_backward(
    const matrix<T, Tq, Dk>& q, const matrix<T, S, Dk>& k, const matrix<T, S, Dv>& v,
    const matrix<T, Tq, Dv>& context, const matrix<T, Tq, 1>& logsumexp, const matrix<T, Tq, Dv>& d_context,
    const attention_options<T>& options = {}) {
  return detail::flash_backward_loop<B>(
      q, k, v, context, d_context, options,
      [&](std::size_t i, const T& s) { return T(qkv::exp(T(s - logsumexp.v[i]))); },
      [&](std::size_t i) { return !detail::is_minus_infinity(logsumexp.v[i]); });
}

}  // namespace qkv
