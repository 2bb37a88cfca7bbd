// batch.hpp: a batch of sequences of different lengths, padded to one length, through attention
// with a key padding mask per sequence: one head, H heads (multi-head, core/multihead.hpp),
// grouped-query heads (core/grouped.hpp), self- and cross-attention; and one head from 16-bit
// inputs (bfloat16 or float16, core/half.hpp) with float accumulation.
//
//   x        stack (B, N, D): sequence b's token i at (b, i, :); rows lengths[b] .. N-1 are padding
//   lengths  std::array<std::size_t, B>: the real keys of each sequence, each <= the keys' rows
//            (else std::length_error naming the sequence and both sizes)
//   key_padding_mask<B, N>(lengths)   (B, N) booleans, true = padding: PyTorch's key_padding_mask
//   one head:
//   batch_self_attention(x, lengths, wq, wk, wv, layout, options)          -> batch_result
//   batch_attend_projected(q (B, T, Dk), k (B, S, Dk), v (B, S, Dv), lengths, options)
//   result.sequence[b]: attention_result (T queries, S keys): scores, weights (T, S), context (T, Dv)
//   H heads (every sequence as multihead_attend_projected computes one, its keys padded):
//   batch_multihead_self_attention<H>(x (B, N, D), lengths, wq, wk, wv, layout, options)
//   batch_multihead_cross_attention<H>(x (B, T, D), memory (B, S, Dc), memory_lengths, wq, wk, wv,
//                                      layout, options): queries from x, keys and values from memory
//   batch_multihead_attend_projected<H>(q (B, T, Dq), k (B, S, Dq), v (B, S, Dv), lengths, options)
//   result.sequence[b]: multihead_result (H heads, T queries, S keys, concat (T, Dv))
//   output_projection(result, wo (Dout, Dv) [, bo (1, Dout)])              -> (B, T, Dout)
//   batch_grouped_query_attend_projected<H, Hkv>(q (B, T, H dk), k (B, S, Hkv dk), v (B, S, Hkv dv),
//                                      lengths, options)  -> result.sequence[b]: grouped_result
//   single sequences: attend_padded, multihead_attend_padded<H>, grouped_query_attend_padded<H, Hkv>
//
// Sequence b is attention with keys j >= lengths[b] masked (in every head): their scaled scores
// are -inf, so their weights are exactly 0 and their values are never read (attended_context
// skips them). With options.causal, key j is also masked for query i when j > i (positions count
// from each sequence's row 0; upper-left when T != S, as attend_projected). Padded QUERY rows
// (x's padding rows, or a cross-attention's padded queries) are computed as any other row, over
// the sequence's real keys, as the runtime's batch_attention (runtime/batch.hpp) and PyTorch's
// key_padding_mask do (they mask keys, not queries): ignore them, or use them knowing what they
// are. A sequence with no real key has every key masked: weights 0 and context 0 in every row,
// qkv's rule for a fully masked row (an output projection then gives exactly bo; PyTorch 1.13 NaN).
// Shapes: queries and keys of different widths, keys and values of different rows, or a batch of
// queries and a batch of memories (or lengths) of different sizes do not compile, and the message
// names both (queries_and_keys_have_the_same_columns, keys_and_values_have_the_same_rows,
// one_memory_per_query_sequence).
//
// Bits: the real rows of sequence b (its queries 0 .. T_b - 1 against its keys 0 .. lengths[b] - 1)
// are attention of that sequence alone (no padding) bit for bit, in every head and after the
// output projection: the projections, the scores and the output projection are row-wise sums in
// the same order; the softmax sums e^(s_j - max) left to right (core/softmax.hpp), so the real
// keys (first) give the same partial sums and each masked key then adds e^-inf = +0 (s + 0 = s
// exactly, s >= 1), the maximum is over the same real scores (-inf never wins), and the context
// skips masked keys (example 14 proves it, one head and H heads, self- and cross-attention).
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

#include "fail.hpp"
#include "attention.hpp"
#include "grouped.hpp"
#include "half.hpp"
#include "matrix.hpp"
#include "multihead.hpp"

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
      ::qkv::detail::fail<std::length_error>("qkv::batch: sequence " + std::to_string(b) + " has length " +
                                             std::to_string(lengths[b]) + " but the batch is padded to " +
                                             std::to_string(N) + " tokens");
}
}  // namespace detail

/// a batch pairs query sequence b with key/value sequence b (and lengths[b]): as many of each
template <std::size_t QueryBatch, std::size_t MemoryBatch>
concept one_memory_per_query_sequence = (QueryBatch == MemoryBatch);

/// keys and values come from the same positions: as many rows of each
template <std::size_t KeyRows, std::size_t ValueRows>
concept keys_and_values_have_the_same_rows = (KeyRows == ValueRows);

/// @brief one padded sequence: attend_projected's steps with keys j >= length masked (and, with
/// options.causal, keys after their query): q (T, Dk), k (S, Dk), v (S, Dv) -> scores (T, S),
/// weights (T, S), context (T, Dv). length 0: every weight and the context 0.
template <class T, std::size_t Tq, std::size_t Dq, std::size_t S, std::size_t Dk, std::size_t SV,
          std::size_t Dv>
  requires(std::numeric_limits<T>::has_infinity && queries_and_keys_have_the_same_columns<Dq, Dk> &&
           keys_and_values_have_the_same_rows<S, SV>)
[[nodiscard]] constexpr attention_result<T, Tq, S, Dk, Dv> attend_padded(
    const matrix<T, Tq, Dq>& q, const matrix<T, S, Dk>& k, const matrix<T, SV, Dv>& v, std::size_t length,
    const attention_options<T>& options = {}) {
  attention_result<T, Tq, S, Dk, Dv> r;
  r.queries = q;
  r.keys = k;
  r.values = v;
  r.scores = scores(q, k);                               // (T, S)
  r.scaled_scores = scale(r.scores, options.scale, Dk);  // (T, S)
  for (std::size_t i = 0; i < Tq; ++i)
    for (std::size_t j = 0; j < S; ++j)
      if (j >= length || (options.causal && j > i))
        r.scaled_scores.v[i * S + j] = -std::numeric_limits<T>::infinity();
  r.weights = softmax_rows(r.scaled_scores);                           // (T, S), padded keys 0
  r.context = attended_context(r.scaled_scores, r.weights, r.values);  // (T, Dv), padded keys skipped
  return r;
}

/// every sequence's attention_result: sequence[b] has N queries and S keys (S = N: self-attention)
template <class T, std::size_t B, std::size_t N, std::size_t Dk, std::size_t Dv, std::size_t S = N>
struct batch_result {
  attention_result<T, N, S, Dk, Dv> sequence[B];
};

/// @brief attention of every sequence of a padded batch from its projections:
/// q (B, N, Dk), k (B, S, Dk), v (B, S, Dv), lengths (B) of the keys -> batch_result
template <class T, std::size_t B, std::size_t N, std::size_t Dq, std::size_t BK, std::size_t S,
          std::size_t Dk, std::size_t BV, std::size_t SV, std::size_t Dv, std::size_t BL>
  requires(std::numeric_limits<T>::has_infinity && one_memory_per_query_sequence<B, BK> &&
           one_memory_per_query_sequence<B, BV> && one_memory_per_query_sequence<B, BL> &&
           queries_and_keys_have_the_same_columns<Dq, Dk> && keys_and_values_have_the_same_rows<S, SV>)
[[nodiscard]] constexpr batch_result<T, B, N, Dk, Dv, S> batch_attend_projected(
    const stack<T, B, N, Dq>& q, const stack<T, BK, S, Dk>& k, const stack<T, BV, SV, Dv>& v,
    const std::array<std::size_t, BL>& lengths, const attention_options<T>& options = {}) {
  detail::check_lengths<S>(lengths);
  batch_result<T, B, N, Dk, Dv, S> r;
  for (std::size_t b = 0; b < B; ++b) r.sequence[b] = attend_padded(q[b], k[b], v[b], lengths[b], options);
  return r;
}

/// @brief self-attention of a padded batch x (B, N, D): each sequence projected (its padded rows
/// too, as a model projects its padding tokens), then batch_attend_projected
template <weight_layout_tag L, class T, std::size_t B, std::size_t N, std::size_t D, std::size_t QR,
          std::size_t QC, std::size_t KR, std::size_t KC, std::size_t VR, std::size_t VC>
[[nodiscard]] constexpr auto batch_self_attention(const stack<T, B, N, D>& x,
                                                  const std::array<std::size_t, B>& lengths,
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
// H heads: multi-head (core/multihead.hpp) and grouped-query (core/grouped.hpp) attention of
// padded sequences, self- and cross-attention

namespace detail {
/// every head of one padded sequence into r (a multihead_result or a grouped_result, whose
/// members have the same names): query head h attends with key/value head h / (H / Hkv) through
/// attend_padded, as multihead_attend_projected (Hkv = H) and grouped_query_attend_projected do
/// through attend_projected. q (T, Dq), k (S, DkvK), v (S, DkvV), their heads split as there.
template <std::size_t H, std::size_t Hkv, class R, class T, std::size_t Tq, std::size_t Dq, std::size_t S,
          std::size_t DkvK, std::size_t DkvV>
constexpr void padded_heads(R& r, const matrix<T, Tq, Dq>& q, const matrix<T, S, DkvK>& k,
                            const matrix<T, S, DkvV>& v, std::size_t length,
                            const attention_options<T>& options) {
  r.queries = q;
  r.keys = k;
  r.values = v;
  const auto qh = split_heads<H>(q);    // (H, T, Dq / H)
  const auto kh = split_heads<Hkv>(k);  // (Hkv, S, DkvK / Hkv)
  const auto vh = split_heads<Hkv>(v);  // (Hkv, S, DkvV / Hkv)
  constexpr std::size_t G = H / Hkv;
  for (std::size_t h = 0; h < H; ++h) {
    const auto a = attend_padded(qh[h], kh[h / G], vh[h / G], length, options);  // scale from Dq / H
    r.scores[h] = a.scores;
    r.scaled_scores[h] = a.scaled_scores;
    r.weights[h] = a.weights;
    r.context[h] = a.context;
  }
  r.concat = hconcat(r.context);  // (T, H * DkvV / Hkv)
}
}  // namespace detail

/// @brief one padded sequence through H heads: multihead_attend_projected's steps with keys
/// j >= length masked in every head. q (T, Dq), k (S, Dq), v (S, Dv) -> multihead_result
template <std::size_t H, class T, std::size_t Tq, std::size_t Dq, std::size_t S, std::size_t Dk,
          std::size_t SV, std::size_t Dv>
  requires(std::numeric_limits<T>::has_infinity && queries_and_keys_have_the_same_columns<Dq, Dk> &&
           keys_and_values_have_the_same_rows<S, SV> && divisible_into_heads<Dq, H> &&
           divisible_into_heads<Dv, H>)
[[nodiscard]] constexpr multihead_result<T, H, Tq, S, Dq, Dv> multihead_attend_padded(
    const matrix<T, Tq, Dq>& q, const matrix<T, S, Dk>& k, const matrix<T, SV, Dv>& v, std::size_t length,
    const attention_options<T>& options = {}) {
  multihead_result<T, H, Tq, S, Dq, Dv> r;
  detail::padded_heads<H, H>(r, q, k, v, length, options);
  return r;
}

/// @brief one padded sequence through H query heads sharing Hkv key/value heads:
/// grouped_query_attend_projected's steps with keys j >= length masked in every head.
/// q (T, H dk), k (S, Hkv dk), v (S, Hkv dv) -> grouped_result
template <std::size_t H, std::size_t Hkv, class T, std::size_t Tq, std::size_t Dq, std::size_t S,
          std::size_t DkvK, std::size_t SV, std::size_t DkvV>
  requires(std::numeric_limits<T>::has_infinity && query_heads_divide_into_kv_groups<H, Hkv> &&
           divisible_into_heads<Dq, H> && divisible_into_heads<DkvK, Hkv> &&
           divisible_into_heads<DkvV, Hkv> && queries_and_keys_have_the_same_columns<Dq / H, DkvK / Hkv> &&
           keys_and_values_have_the_same_rows<S, SV>)
[[nodiscard]] constexpr grouped_result<T, H, Hkv, Tq, S, Dq, DkvK, DkvV> grouped_query_attend_padded(
    const matrix<T, Tq, Dq>& q, const matrix<T, S, DkvK>& k, const matrix<T, SV, DkvV>& v, std::size_t length,
    const attention_options<T>& options = {}) {
  grouped_result<T, H, Hkv, Tq, S, Dq, DkvK, DkvV> r;
  detail::padded_heads<H, Hkv>(r, q, k, v, length, options);
  return r;
}

/// every sequence's multihead_result: sequence[b] has H heads, T queries and S keys
template <class T, std::size_t H, std::size_t B, std::size_t Tq, std::size_t S, std::size_t Dq,
          std::size_t Dv>
struct multihead_batch_result {
  multihead_result<T, H, Tq, S, Dq, Dv> sequence[B];
};

/// every sequence's grouped_result: sequence[b] has H query heads, Hkv key/value heads
template <class T, std::size_t H, std::size_t Hkv, std::size_t B, std::size_t Tq, std::size_t S,
          std::size_t Dq, std::size_t DkvK, std::size_t DkvV>
struct grouped_batch_result {
  grouped_result<T, H, Hkv, Tq, S, Dq, DkvK, DkvV> sequence[B];
};

/// @brief H heads over every sequence of a padded batch from its projections:
/// q (B, T, Dq), k (B, S, Dq), v (B, S, Dv), lengths (B) of the keys -> multihead_batch_result
template <std::size_t H, class T, std::size_t B, std::size_t Tq, std::size_t Dq, std::size_t BK,
          std::size_t S, std::size_t Dk, std::size_t BV, std::size_t SV, std::size_t Dv, std::size_t BL>
  requires(std::numeric_limits<T>::has_infinity && one_memory_per_query_sequence<B, BK> &&
           one_memory_per_query_sequence<B, BV> && one_memory_per_query_sequence<B, BL> &&
           queries_and_keys_have_the_same_columns<Dq, Dk> && keys_and_values_have_the_same_rows<S, SV> &&
           divisible_into_heads<Dq, H> && divisible_into_heads<Dv, H>)
[[nodiscard]] constexpr multihead_batch_result<T, H, B, Tq, S, Dq, Dv> batch_multihead_attend_projected(
    const stack<T, B, Tq, Dq>& q, const stack<T, BK, S, Dk>& k, const stack<T, BV, SV, Dv>& v,
    const std::array<std::size_t, BL>& lengths, const attention_options<T>& options = {}) {
  detail::check_lengths<S>(lengths);
  multihead_batch_result<T, H, B, Tq, S, Dq, Dv> r;
  for (std::size_t b = 0; b < B; ++b)
    r.sequence[b] = multihead_attend_padded<H>(q[b], k[b], v[b], lengths[b], options);
  return r;
}

/// @brief H query heads sharing Hkv key/value heads over every sequence of a padded batch:
/// q (B, T, H dk), k (B, S, Hkv dk), v (B, S, Hkv dv), lengths (B) -> grouped_batch_result
template <std::size_t H, std::size_t Hkv, class T, std::size_t B, std::size_t Tq, std::size_t Dq,
          std::size_t BK, std::size_t S, std::size_t DkvK, std::size_t BV, std::size_t SV, std::size_t DkvV,
          std::size_t BL>
  requires(std::numeric_limits<T>::has_infinity && one_memory_per_query_sequence<B, BK> &&
           one_memory_per_query_sequence<B, BV> && one_memory_per_query_sequence<B, BL> &&
           query_heads_divide_into_kv_groups<H, Hkv> && divisible_into_heads<Dq, H> &&
           divisible_into_heads<DkvK, Hkv> && divisible_into_heads<DkvV, Hkv> &&
           queries_and_keys_have_the_same_columns<Dq / H, DkvK / Hkv> &&
           keys_and_values_have_the_same_rows<S, SV>)
[[nodiscard]] constexpr grouped_batch_result<T, H, Hkv, B, Tq, S, Dq, DkvK, DkvV>
batch_grouped_query_attend_projected(const stack<T, B, Tq, Dq>& q, const stack<T, BK, S, DkvK>& k,
                                     const stack<T, BV, SV, DkvV>& v,
                                     const std::array<std::size_t, BL>& lengths,
                                     const attention_options<T>& options = {}) {
  detail::check_lengths<S>(lengths);
  grouped_batch_result<T, H, Hkv, B, Tq, S, Dq, DkvK, DkvV> r;
  for (std::size_t b = 0; b < B; ++b)
    r.sequence[b] = grouped_query_attend_padded<H, Hkv>(q[b], k[b], v[b], lengths[b], options);
  return r;
}

/// @brief multi-head cross-attention of a padded batch: the queries of x (B, T, D) over the keys and
/// values of memory (B, S, Dc), memory b's keys j >= memory_lengths[b] masked; each sequence
/// projected in the layout L (its padding rows too), then batch_multihead_attend_projected
template <std::size_t H, weight_layout_tag L, class T, std::size_t B, std::size_t Tq, std::size_t D,
          std::size_t BM, std::size_t S, std::size_t Dc, std::size_t BL, std::size_t QR, std::size_t QC,
          std::size_t KR, std::size_t KC, std::size_t VR, std::size_t VC>
  requires(one_memory_per_query_sequence<B, BM> && one_memory_per_query_sequence<B, BL>)
[[nodiscard]] constexpr auto batch_multihead_cross_attention(
    const stack<T, B, Tq, D>& x, const stack<T, BM, S, Dc>& memory,
    const std::array<std::size_t, BL>& memory_lengths, const matrix<T, QR, QC>& wq,
    const matrix<T, KR, KC>& wk, const matrix<T, VR, VC>& wv, L layout,
    const attention_options<T>& options = {}) {
  using Q = decltype(project(x[0], wq, layout));
  using K = decltype(project(memory[0], wk, layout));
  using V = decltype(project(memory[0], wv, layout));
  stack<T, B, Tq, Q::cols()> q;
  stack<T, B, S, K::cols()> k;
  stack<T, B, S, V::cols()> v;
  for (std::size_t b = 0; b < B; ++b) {
    q[b] = project(x[b], wq, layout);       // (T, d_q)
    k[b] = project(memory[b], wk, layout);  // (S, d_q)
    v[b] = project(memory[b], wv, layout);  // (S, d_v)
  }
  return batch_multihead_attend_projected<H>(q, k, v, memory_lengths, options);
}

/// @brief multi-head self-attention of a padded batch x (B, N, D): batch_multihead_cross_attention
/// of x with itself (x's lengths mask its keys)
template <std::size_t H, weight_layout_tag L, class T, std::size_t B, std::size_t N, std::size_t D,
          std::size_t BL, std::size_t QR, std::size_t QC, std::size_t KR, std::size_t KC, std::size_t VR,
          std::size_t VC>
  requires one_memory_per_query_sequence<B, BL>
[[nodiscard]] constexpr auto batch_multihead_self_attention(const stack<T, B, N, D>& x,
                                                            const std::array<std::size_t, BL>& lengths,
                                                            const matrix<T, QR, QC>& wq,
                                                            const matrix<T, KR, KC>& wk,
                                                            const matrix<T, VR, VC>& wv, L layout,
                                                            const attention_options<T>& options = {}) {
  return batch_multihead_cross_attention<H>(x, x, lengths, wq, wk, wv, layout, options);
}

/// @brief the output projection of every sequence (multihead.hpp's output_projection):
/// concat Woᵀ, (B, T, Dv) -> (B, T, Dout)
template <class T, std::size_t H, std::size_t B, std::size_t Tq, std::size_t S, std::size_t Dq,
          std::size_t Dv, std::size_t Dout, std::size_t WDin>
  requires product_shapes<Tq, Dv, WDin, Dout>
[[nodiscard]] constexpr stack<T, B, Tq, Dout> output_projection(
    const multihead_batch_result<T, H, B, Tq, S, Dq, Dv>& r, const matrix<T, Dout, WDin>& wo) {
  stack<T, B, Tq, Dout> out;
  for (std::size_t b = 0; b < B; ++b) out[b] = output_projection(r.sequence[b], wo);
  return out;
}

/// @brief the same with a bias: concat Woᵀ + bo, (B, T, Dv) -> (B, T, Dout). A sequence with no
/// real key has concat 0, so its every row is exactly bo
template <class T, std::size_t H, std::size_t B, std::size_t Tq, std::size_t S, std::size_t Dq,
          std::size_t Dv, std::size_t Dout, std::size_t WDin>
  requires product_shapes<Tq, Dv, WDin, Dout>
[[nodiscard]] constexpr stack<T, B, Tq, Dout> output_projection(
    const multihead_batch_result<T, H, B, Tq, S, Dq, Dv>& r, const matrix<T, Dout, WDin>& wo,
    const matrix<T, 1, Dout>& bo) {
  stack<T, B, Tq, Dout> out;
  for (std::size_t b = 0; b < B; ++b) out[b] = output_projection(r.sequence[b], wo, bo);
  return out;
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
[[nodiscard]] constexpr attention_result<float, Tq, S, Dk, Dv> attend_projected(
    const matrix<S16, Tq, Dk>& q, const matrix<S16, S, Dk>& k, const matrix<S16, S, Dv>& v,
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
