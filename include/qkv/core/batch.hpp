// batch.hpp: a batch of sequences of different lengths, padded to one length N, through one
// attention head, each sequence with its own key padding; and the same from 16-bit inputs
// (bfloat16 or float16, core/half.hpp) with float accumulation.
//
//   x        stack (B, N, D): sequence b's token i at (b, i, :); rows lengths[b] .. N-1 are padding
//   lengths  std::array<std::size_t, B>, each <= N (else std::length_error naming both)
//   key_padding_mask<B, N>(lengths)   (B, N) booleans, true = padding: PyTorch's key_padding_mask
//   batch_self_attention(x, lengths, wq, wk, wv, layout, options)          -> batch_result
//   batch_attend_projected(q (B, N, Dk), k (B, N, Dk), v (B, N, Dv), lengths, options)
//   result.sequence[b]: attention_result (N queries, N keys): scores, weights (N, N), context (N, Dv)
//
// Sequence b is attention with keys j >= lengths[b] masked: their scaled scores are -inf, so
// their weights are exactly 0 and their values are never read (attended_context skips them). With
// options.causal, key j is also masked for query i when j > i (positions count from each
// sequence's row 0). Padded QUERY rows (i >= lengths[b]) are computed as any other row, over the
// sequence's real keys, as the runtime's batch_attention (runtime/batch.hpp) and PyTorch's
// key_padding_mask do (they mask keys, not queries): ignore them, or use them knowing what they
// are. A sequence of length 0 has every key masked: weights 0 and context 0 in every row, qkv's
// rule for a fully masked row (the runtime's output projection then gives b_o; PyTorch 1.13 NaN).
//
// Bits: rows 0 .. lengths[b] - 1 of sequence b are attention of that sequence alone (its
// lengths[b] tokens, no padding) bit for bit: the projections and the scores are the same sums
// in the same order; the masked keys add e^-inf = 0 to the softmax's sum (s + 0 = s exactly, s
// >= 1) and take no part in the maximum (the real keys are there) or in the context (example 14
// proves it).
//
// 16-bit inputs: batch_attend_projected and attend_projected on stacks or matrices of bfloat16 or
// float16 convert every element to float (exactly, as_float) and compute in float: float32
// accumulation, a float result. The inputs' own rounding (u = 2^-8 bfloat16, 2^-11 float16) is
// the only difference from the float computation on the unrounded values; example 14 derives the
// bound it gives on the weights and the context.
#pragma once

#include <array>
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <string>

#include "attention.hpp"
#include "half.hpp"
#include "matrix.hpp"

namespace qkv {

/// @brief PyTorch's key_padding_mask of a padded batch: (B, N), true where key j of sequence b
/// is padding (j >= lengths[b])
template <std::size_t B, std::size_t N>
[[nodiscard]] constexpr matrix<bool, B, N> key_padding_mask(const std::array<std::size_t, B>& lengths) {
  matrix<bool, B, N> m;
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t j = 0; j < N; ++j) m.v[b * N + j] = j >= lengths[b];
  return m;
}

/// @brief an (L, D) sequence padded to N rows: rows L .. N-1 are `fill` (an embedding's
/// padding_idx row is zeros): (L, D) -> (N, D)
template <std::size_t N, class T, std::size_t L, std::size_t D>
  requires(L <= N)
[[nodiscard]] constexpr matrix<T, N, D> padded(const matrix<T, L, D>& x, const T& fill = T(0)) {
  matrix<T, N, D> out = filled<T, N, D>(fill);
  for (std::size_t k = 0; k < L * D; ++k) out.v[k] = x.v[k];
  return out;
}

namespace detail {
/// every length at most N, else std::length_error naming both (at compile time: no constant)
template <std::size_t N, std::size_t B>
constexpr void check_lengths(const std::array<std::size_t, B>& lengths) {
  for (std::size_t b = 0; b < B; ++b)
    if (lengths[b] > N)
      throw std::length_error("qkv::batch: sequence " + std::to_string(b) + " has length " + std::to_string(lengths[b]) +
                              " but the batch is padded to " + std::to_string(N) + " tokens");
}
}  // namespace detail

/// @brief one padded sequence: attend_projected's steps with keys j >= length masked (and, with
/// options.causal, keys after their query): q (N, Dk), k (N, Dk), v (N, Dv) -> scores (N, N),
/// weights (N, N), context (N, Dv). length 0: every weight and the context 0.
template <class T, std::size_t N, std::size_t Dk, std::size_t Dv>
  requires std::numeric_limits<T>::has_infinity
[[nodiscard]] constexpr attention_result<T, N, N, Dk, Dv> attend_padded(const matrix<T, N, Dk>& q,
                                                                       const matrix<T, N, Dk>& k,
                                                                       const matrix<T, N, Dv>& v, std::size_t length,
                                                                       const attention_options<T>& options = {}) {
  attention_result<T, N, N, Dk, Dv> r;
  r.queries = q;
  r.keys = k;
  r.values = v;
  r.scores = scores(q, k);                             // (N, N)
  r.scaled_scores = scale(r.scores, options.scale, Dk);  // (N, N)
  for (std::size_t i = 0; i < N; ++i)
    for (std::size_t j = 0; j < N; ++j)
      if (j >= length || (options.causal && j > i)) r.scaled_scores.v[i * N + j] = -std::numeric_limits<T>::infinity();
  r.weights = softmax_rows(r.scaled_scores);                            // (N, N), padded keys 0
  r.context = attended_context(r.scaled_scores, r.weights, r.values);  // (N, Dv), padded keys skipped
  return r;
}

/// every sequence's attention_result: sequence[b] has N queries and N keys
template <class T, std::size_t B, std::size_t N, std::size_t Dk, std::size_t Dv>
struct batch_result {
  attention_result<T, N, N, Dk, Dv> sequence[B];
};

/// @brief attention of every sequence of a padded batch from its projections:
/// q (B, N, Dk), k (B, N, Dk), v (B, N, Dv), lengths (B) -> batch_result
template <class T, std::size_t B, std::size_t N, std::size_t Dk, std::size_t Dv>
  requires std::numeric_limits<T>::has_infinity
[[nodiscard]] constexpr batch_result<T, B, N, Dk, Dv> batch_attend_projected(const stack<T, B, N, Dk>& q,
                                                                             const stack<T, B, N, Dk>& k,
                                                                             const stack<T, B, N, Dv>& v,
                                                                             const std::array<std::size_t, B>& lengths,
                                                                             const attention_options<T>& options = {}) {
  detail::check_lengths<N>(lengths);
  batch_result<T, B, N, Dk, Dv> r;
  for (std::size_t b = 0; b < B; ++b) r.sequence[b] = attend_padded(q[b], k[b], v[b], lengths[b], options);
  return r;
}

/// @brief self-attention of a padded batch x (B, N, D): each sequence projected (its padded rows
/// too, as a model projects its padding tokens), then batch_attend_projected
template <weight_layout L, class T, std::size_t B, std::size_t N, std::size_t D, std::size_t QR, std::size_t QC,
          std::size_t KR, std::size_t KC, std::size_t VR, std::size_t VC>
[[nodiscard]] constexpr auto batch_self_attention(const stack<T, B, N, D>& x, const std::array<std::size_t, B>& lengths,
                                                  const matrix<T, QR, QC>& wq, const matrix<T, KR, KC>& wk,
                                                  const matrix<T, VR, VC>& wv, L layout,
                                                  const attention_options<T>& options = {}) {
  using Q = decltype(project(x[0], wq, layout));
  using V = decltype(project(x[0], wv, layout));
  stack<T, B, N, Q::cols()> q, k;
  stack<T, B, N, V::cols()> v;
  for (std::size_t b = 0; b < B; ++b) {
    q[b] = project(x[b], wq, layout);  // (N, d_k)
    k[b] = project(x[b], wk, layout);  // (N, d_k)
    v[b] = project(x[b], wv, layout);  // (N, d_v)
  }
  return batch_attend_projected(q, k, v, lengths, options);
}

// ---------------------------------------------------------------------------------------------
// 16-bit inputs, float accumulation

/// every element of every matrix as a float, exactly: (B, R, C) -> (B, R, C)
template <sixteen_bit S, std::size_t B, std::size_t R, std::size_t C>
[[nodiscard]] constexpr stack<float, B, R, C> as_float(const stack<S, B, R, C>& s) {
  stack<float, B, R, C> out;
  for (std::size_t b = 0; b < B; ++b) out[b] = as_float(s[b]);
  return out;
}

/// every element of every matrix rounded to S: (B, R, C) -> (B, R, C)
template <sixteen_bit S, std::size_t B, std::size_t R, std::size_t C>
[[nodiscard]] constexpr stack<S, B, R, C> rounded_to(const stack<float, B, R, C>& s) {
  stack<S, B, R, C> out;
  for (std::size_t b = 0; b < B; ++b) out[b] = rounded_to<S>(s[b]);
  return out;
}

/// @brief attention of 16-bit q (T, Dk), k (S, Dk), v (S, Dv): converted to float exactly, then
/// attend_projected in float (float accumulation, a float result)
template <sixteen_bit S16, std::size_t Tq, std::size_t S, std::size_t Dk, std::size_t Dv>
[[nodiscard]] constexpr attention_result<float, Tq, S, Dk, Dv> attend_projected(const matrix<S16, Tq, Dk>& q,
                                                                               const matrix<S16, S, Dk>& k,
                                                                               const matrix<S16, S, Dv>& v,
                                                                               const attention_options<float>& options = {}) {
  return attend_projected(as_float(q), as_float(k), as_float(v), options);
}

/// @brief a padded batch of 16-bit q (B, N, Dk), k (B, N, Dk), v (B, N, Dv): converted to float
/// exactly, then batch_attend_projected in float
template <sixteen_bit S16, std::size_t B, std::size_t N, std::size_t Dk, std::size_t Dv>
[[nodiscard]] constexpr batch_result<float, B, N, Dk, Dv> batch_attend_projected(
    const stack<S16, B, N, Dk>& q, const stack<S16, B, N, Dk>& k, const stack<S16, B, N, Dv>& v,
    const std::array<std::size_t, B>& lengths, const attention_options<float>& options = {}) {
  return batch_attend_projected(as_float(q), as_float(k), as_float(v), lengths, options);
}

}  // namespace qkv
