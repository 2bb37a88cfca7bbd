// sequence.hpp: from token ids to the encoder's input: truncation and padding to a fixed length, embedding lookup.
//
//   ids (n)  --fit_to_length<L>-->  ids (L) + padding flags (L)  --embed-->  (L, d) rows of the table
// A batch needs one length, so a sequence is cut to its first L tokens or filled up with a
// padding id. The padding flags (true = padding) become the key-padding mask (masks.hpp):
// no query may attend to a padding position, so the filler cannot change the real tokens'
// outputs. (PyTorch: src_key_padding_mask, True = padding.)
#pragma once

#include <cstddef>
#include <stdexcept>
#include <type_traits>

#include "fail.hpp"
#include "matrix.hpp"

namespace qkv {

/// @brief a sequence cut or padded to L tokens
template <class Id, std::size_t L>
struct fixed_length_sequence {
  matrix<Id, 1, L> ids;        // the first min(n, L) ids, then pad ids
  matrix<bool, 1, L> padding;  // true where a pad id was added
  std::size_t length = 0;      // how many real tokens: min(n, L)
  std::size_t truncated = 0;   // how many tokens were cut off the end: max(0, n - L)
};

/// @brief the first L ids of a sequence of N, padded with pad_id when N < L
template <std::size_t L, class Id, std::size_t N>
[[nodiscard]] constexpr fixed_length_sequence<Id, L> fit_to_length(const matrix<Id, 1, N>& ids,
                                                                   const Id& pad_id) {
  fixed_length_sequence<Id, L> s;
  s.length = N < L ? N : L;
  s.truncated = N > L ? N - L : 0;
  for (std::size_t k = 0; k < L; ++k) {
    s.ids.v[k] = k < N ? ids.v[k] : pad_id;
    s.padding.v[k] = k >= N;
  }
  return s;
}

/// @brief nn.Embedding's lookup: row ids[k] of the table for each k. (V, d) table, L ids -> (L, d).
/// An id outside 0 .. V-1 throws std::out_of_range (at compile time: the expression is not constant).
template <class T, std::size_t V, std::size_t D, class Id, std::size_t L>
[[nodiscard]] constexpr matrix<T, L, D> embed(const matrix<T, V, D>& table, const matrix<Id, 1, L>& ids) {
  matrix<T, L, D> out;
  for (std::size_t k = 0; k < L; ++k) {
    bool negative = false;
    if constexpr (std::is_signed_v<Id>) negative = ids.v[k] < Id(0);
    if (negative || static_cast<std::size_t>(ids.v[k]) >= V)
      ::qkv::detail::fail<std::out_of_range>("embed: a token id is outside the embedding table's rows");
    const std::size_t r = static_cast<std::size_t>(ids.v[k]);
    for (std::size_t j = 0; j < D; ++j) out.v[k * D + j] = table.v[r * D + j];
  }
  return out;
}

}  // namespace qkv
