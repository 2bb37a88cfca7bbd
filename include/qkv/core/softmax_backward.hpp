// softmax_backward.hpp: the backward of softmax over each row, the Jacobian-vector product.
//
// Forward (softmax.hpp):  P = softmax_rows(S),  P_ij = exp(S_ij) / sum_k exp(S_ik)
// Backward: given d_weights = dL/dP (T, S), the gradient dL/dS is
//   dS_ij = sum_k dP_ik dP_ik/dS_ij = P_ij (dP_ij - D_i),   D_i = sum_k P_ik dP_ik
// because dP_ik/dS_ij = P_ik (delta_kj - P_ij). The T x S x S Jacobian is never formed: one
// row dot product D_i per row, then one subtraction and one product per element. This is
// PyTorch's SoftmaxBackward0 (aten's _softmax_backward_data: grad_input = output * (grad -
// sum(grad * output, dim))), in the same order: D_i summed left to right, then P (dP - D).
//
// In attention, D_i also equals rowsum(dO ∘ O)_i, the upstream gradient of the context times
// the context (FlashAttention-2, arXiv 2307.08691, §3.2): sum_k P_ik dP_ik = sum_k P_ik
// sum_c dO_ic V_kc = sum_c dO_ic O_ic. row_dots computes both sides.
//
// Masked and edge cases: a weight that is exactly 0 (a masked key, or an exp that underflowed)
// gets gradient exactly 0, without arithmetic on its dP (so a NaN there stays out); a fully
// masked row (all weights 0, softmax.hpp's convention) gets a row of 0. A NaN weight (a NaN or
// +inf score in the forward) gives NaN gradients along its row, as the forward's NaN row.
#pragma once

#include <cstddef>
#include <limits>

#include "matrix.hpp"

namespace qkv {

/// @brief sum_j a_ij b_ij for each row: rowsum(a ∘ b), (R, C) and (R, C) -> (R, 1), summed left to
/// right. D = row_dots(d_weights, weights) = row_dots(d_context, context) in attention's backward.
template <class T, std::size_t R, std::size_t C, std::size_t BR, std::size_t BC>
  requires same_shapes<R, C, BR, BC>
[[nodiscard]] constexpr matrix<T, R, 1> row_dots(const matrix<T, R, C>& a, const matrix<T, BR, BC>& b) {
  matrix<T, R, 1> out;
  for (std::size_t i = 0; i < R; ++i) {
    T s = a.v[i * C] * b.v[i * C];
    for (std::size_t j = 1; j < C; ++j) s += a.v[i * C + j] * b.v[i * C + j];
    out.v[i] = s;
  }
  return out;
}

/// @brief the softmax backward of each row given D (one number per row): dS_ij = P_ij (dP_ij - D_i).
/// D is row_dots(d_weights, weights), or row_dots(d_context, context) (flash attention's form).
/// A weight of exactly 0 gives exactly 0. (T, S), (T, S), (T, 1) -> (T, S)
template <class T, std::size_t R, std::size_t C, std::size_t DR, std::size_t DC>
  requires same_shapes<R, C, DR, DC>
[[nodiscard]] constexpr matrix<T, R, C> softmax_backward(const matrix<T, R, C>& weights,
                                                         const matrix<T, DR, DC>& d_weights,
                                                         const matrix<T, R, 1>& d_row) {
  matrix<T, R, C> out;
  for (std::size_t i = 0; i < R; ++i)
    for (std::size_t j = 0; j < C; ++j) {
      const T& p = weights.v[i * C + j];
      out.v[i * C + j] = p == T(0) ? T(0) : T(p * T(d_weights.v[i * C + j] - d_row.v[i]));
    }
  return out;
}

/// @brief the softmax backward of each row: dS = P ∘ (dP - rowsum(dP ∘ P)), (T, S) x 2 -> (T, S).
/// PyTorch's SoftmaxBackward0 for softmax(x, dim=-1). D is summed over the keys whose weight is
/// not 0 (a masked key's term is skipped, not multiplied by 0, so a NaN in its dP cannot reach D).
template <class T, std::size_t R, std::size_t C, std::size_t DR, std::size_t DC>
  requires same_shapes<R, C, DR, DC>
[[nodiscard]] constexpr matrix<T, R, C> softmax_backward(const matrix<T, R, C>& weights,
                                                         const matrix<T, DR, DC>& d_weights) {
  matrix<T, R, 1> d_row;
  for (std::size_t i = 0; i < R; ++i) {
    T s = T(0);
    bool first = true;
    for (std::size_t j = 0; j < C; ++j) {
      const T& p = weights.v[i * C + j];
      if (p == T(0)) continue;
      const T term = d_weights.v[i * C + j] * p;
      s = first ? term : T(s + term);
      first = false;
    }
    d_row.v[i] = s;
  }
  return softmax_backward(weights, d_weights, d_row);
}

}  // namespace qkv
