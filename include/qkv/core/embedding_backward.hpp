// embedding_backward.hpp: the gradient of an embedding table, from the gradient of the rows looked up.
//
// embed(table, ids) (sequence.hpp) copies row ids_k of the (V, D) table to row k of its (L, D)
// result. Its backward (PyTorch's EmbeddingBackward0, embedding_dense_backward) sends each
// result row's gradient back to the table row it came from:
//   d_table(r, :) = sum over the positions k with ids_k = r of d_out(k, :)
// added in position order, starting from 0. A token the batch never uses gets a gradient of
// exactly 0 (it did not take part, so the loss does not depend on it); a token used twice gets
// the sum of both positions' gradients. A learned positional table looked up with the positions
// 0 .. L-1 gets d_out itself.
//
// Edges: an id outside [0, V) throws std::out_of_range (no compilation in a constant
// expression), as embed does; with padding_idx (PyTorch's nn.Embedding(padding_idx=...)) that
// row's gradient stays 0, as PyTorch never updates the padding row.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <type_traits>

#include "matrix.hpp"

namespace qkv {

/// @brief the backward of embed(table, ids): the (V, D) table's gradient from d_out (L, D)
template <std::size_t V, class T, std::size_t L, std::size_t D, class Id>
[[nodiscard]] constexpr matrix<T, V, D> embed_backward(const matrix<T, L, D>& d_out,
                                                       const matrix<Id, 1, L>& ids) {
  matrix<T, V, D> d{};
  for (std::size_t k = 0; k < L; ++k) {
    bool negative = false;
    if constexpr (std::is_signed_v<Id>) negative = ids.v[k] < Id(0);
    if (negative || static_cast<std::size_t>(ids.v[k]) >= V)
      throw std::out_of_range("embed_backward: a token id is outside the embedding table's rows");
    const std::size_t r = static_cast<std::size_t>(ids.v[k]);
    for (std::size_t j = 0; j < D; ++j) d.v[r * D + j] += d_out.v[k * D + j];
  }
  return d;
}

/// @brief the same with nn.Embedding's padding_idx: the padding row's gradient stays 0
template <std::size_t V, class T, std::size_t L, std::size_t D, class Id>
[[nodiscard]] constexpr matrix<T, V, D> embed_backward(const matrix<T, L, D>& d_out,
                                                       const matrix<Id, 1, L>& ids, std::size_t padding_idx) {
  auto d = embed_backward<V>(d_out, ids);
  if (padding_idx < V)
    for (std::size_t j = 0; j < D; ++j) d.v[padding_idx * D + j] = T(0);
  return d;
}

}  // namespace qkv
