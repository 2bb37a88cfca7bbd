// masks.hpp: which keys each query may attend to, as (T, S) booleans: true = allowed.
//
//   causal_mask<T>()          key j allowed for query i when j <= i (a decoder must not see the future)
//   key_padding_allowed<T>(p) key j allowed unless p(j) (p true = padding, PyTorch's key_padding_mask)
//   both(a, b)                allowed by a and by b (PyTorch merges its two masks this way)
//   causal_mask<T, S>(align)  the causal mask when T queries meet S keys, T != S allowed: the diagonal
//                             at the top left (upper_left: j <= i) or at the bottom right
//                             (lower_right: j <= i + S - T, query i is the token at position i + S - T,
//                             as when T new tokens attend to a KV cache of S keys)
//   sliding_window_mask<T, S>(w, align)  causal, and only the w most recent keys: p - w < j <= p,
//                             p = the query's aligned position (Mistral's sliding window, ORT's local_window_size)
// Attention turns a disallowed score into -inf before the softmax (attention.hpp's masked), so
// its weight is exactly 0. A row with NO allowed key has no distribution to normalise: qkv
// gives weights 0 and context 0 (docs/design.md, "Semantics"), PyTorch gives NaN (0/0). fully_masked_rows finds them.
#pragma once

#include <cstddef>

#include "matrix.hpp"

namespace qkv {

/// the (N, N) causal mask: allowed(i, j) = j <= i, a lower triangle
template <std::size_t N>
[[nodiscard]] constexpr matrix<bool, N, N> causal_mask() {
  matrix<bool, N, N> m;
  for (std::size_t i = 0; i < N; ++i)
    for (std::size_t j = 0; j <= i; ++j) m.v[i * N + j] = true;
  return m;
}

/// @brief where the causal diagonal sits when Tq queries meet S keys (Tq != S). The names are
/// PyTorch's (torch.nn.attention.bias.CausalVariant: causal_upper_left, causal_lower_right). The
/// ONNX Attention op (the ONNX operator specification, Attention, attribute is_causal): opset
/// 23's text calls it "the upper left causal bias" (query i sees keys j <= i; as released, its
/// reference implementation counts the past_key rows in j too); Attention-24, corrected in place by an errata, offsets the
/// diagonal by the keys before the query block: given past_key of P rows, query i sees j <= i + P,
/// which is lower_right when the new K has as many rows as Q (S = P + Tq, a decoding step);
/// without past_key (or nonpad_kv_seqlen) the offset is 0: upper_left.
///   upper_left   query i sees keys j <= i: query 0 is position 0 (PyTorch's is_causal=True)
///   lower_right  query i sees keys j <= i + (S - Tq): the last query sees every key, as the
///                newest token decoding against a cache of S keys does
enum class causal_alignment { upper_left, lower_right };

/// @brief the position of query i among S keys when Tq queries are aligned as `a`:
/// i (upper_left) or i + S - Tq (lower_right). Negative when Tq > S and the query sits before
/// the first key (lower_right): it sees no key.
[[nodiscard]] constexpr long long aligned_position(std::size_t i, std::size_t Tq, std::size_t S,
                                                   causal_alignment a) {
  return a == causal_alignment::upper_left ? static_cast<long long>(i)
                                           : static_cast<long long>(i + S) - static_cast<long long>(Tq);
}

/// @brief whether query i may see key j under a causal mask aligned as `a`, and, when
/// window > 0, only the `window` most recent keys: p - window < j <= p, p = aligned_position
[[nodiscard]] constexpr bool causally_allowed(std::size_t i, std::size_t j, std::size_t Tq, std::size_t S,
                                              causal_alignment a, std::size_t window = 0) {
  const long long p = aligned_position(i, Tq, S, a), jj = static_cast<long long>(j);
  return jj <= p && (window == 0 || p - static_cast<long long>(window) < jj);
}

/// @brief the (Tq, S) causal mask aligned as `a`: allowed(i, j) = j <= aligned_position(i).
/// causal_mask<N, N>(either) is causal_mask<N>(); causal_mask<1, S>(lower_right) is one new token
/// that sees the whole cache; causal_mask<1, S>(upper_left) would see key 0 only
template <std::size_t Tq, std::size_t S>
[[nodiscard]] constexpr matrix<bool, Tq, S> causal_mask(causal_alignment a) {
  matrix<bool, Tq, S> m;
  for (std::size_t i = 0; i < Tq; ++i)
    for (std::size_t j = 0; j < S; ++j) m.v[i * S + j] = causally_allowed(i, j, Tq, S, a);
  return m;
}

/// @brief the (Tq, S) sliding-window mask: causal (aligned as `a`) and at most `window` keys per
/// query, the most recent: allowed(i, j) = p - window < j <= p, p = aligned_position(i).
/// window 0 means no window (the causal mask); window >= S is the causal mask too.
template <std::size_t Tq, std::size_t S>
[[nodiscard]] constexpr matrix<bool, Tq, S> sliding_window_mask(
    std::size_t window, causal_alignment a = causal_alignment::lower_right) {
  matrix<bool, Tq, S> m;
  for (std::size_t i = 0; i < Tq; ++i)
    for (std::size_t j = 0; j < S; ++j) m.v[i * S + j] = causally_allowed(i, j, Tq, S, a, window);
  return m;
}

/// the (Tq, S) mask of a key-padding vector: allowed(i, j) = !padding(j), the same for every query
template <std::size_t Tq, std::size_t S>
[[nodiscard]] constexpr matrix<bool, Tq, S> key_padding_allowed(const matrix<bool, 1, S>& padding) {
  matrix<bool, Tq, S> m;
  for (std::size_t i = 0; i < Tq; ++i)
    for (std::size_t j = 0; j < S; ++j) m.v[i * S + j] = !padding.v[j];
  return m;
}

/// every key allowed
template <std::size_t Tq, std::size_t S>
[[nodiscard]] constexpr matrix<bool, Tq, S> all_allowed() {
  return filled<bool, Tq, S>(true);
}

/// allowed by both masks
template <std::size_t R, std::size_t C>
[[nodiscard]] constexpr matrix<bool, R, C> both(const matrix<bool, R, C>& a, const matrix<bool, R, C>& b) {
  matrix<bool, R, C> m;
  for (std::size_t k = 0; k < R * C; ++k) m.v[k] = a.v[k] && b.v[k];
  return m;
}

/// (R, 1): true for each query that may attend to no key at all
template <std::size_t R, std::size_t C>
[[nodiscard]] constexpr matrix<bool, R, 1> fully_masked_rows(const matrix<bool, R, C>& allowed) {
  matrix<bool, R, 1> out;
  for (std::size_t i = 0; i < R; ++i) {
    bool any = false;
    for (std::size_t j = 0; j < C; ++j) any = any || allowed.v[i * C + j];
    out.v[i] = !any;
  }
  return out;
}

}  // namespace qkv
