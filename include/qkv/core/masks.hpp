// masks.hpp: which keys each query may attend to, as (T, S) booleans: true = allowed.
//
//   causal_mask<T>()          key j allowed for query i when j <= i (a decoder must not see the future)
//   key_padding_allowed<T>(p) key j allowed unless p(j) (p true = padding, PyTorch's key_padding_mask)
//   both(a, b)                allowed by a and by b (PyTorch merges its two masks this way)
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
