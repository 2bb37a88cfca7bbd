// softmax.hpp: softmax over each row, each column, or the whole matrix; stable and naive.
//
//   softmax(x)_j = exp(x_j) / sum_k exp(x_k)
//
// The stable versions subtract the maximum first: softmax(x) = softmax(x - max(x)) exactly in
// real arithmetic, and with the maximum at 0 every exp is <= 1, so nothing overflows for
// scores of any finite size. The naive version is kept for teaching: exp(89) already
// overflows float (exp(710) double), the sum becomes inf and the weights inf/inf = NaN.
//
// -inf is a masked score: its weight is exactly 0. A row whose every score is -inf (every key
// masked) gets weights 0, not NaN (the convention of docs/design.md, "Semantics"; PyTorch's math path gives NaN).
// NaN in, NaN out: a NaN score makes its whole row NaN, and so does a +inf score (inf - inf has
// no value; PyTorch gives NaN too). Both without arithmetic on the NaN or the infinity, which
// clang refuses in a constant expression (docs/numerics.md, "NaN and infinity in attention").
#pragma once

#include <cstddef>
#include <limits>

#include "math.hpp"
#include "matrix.hpp"

namespace qkv {

namespace detail {

template <class T>
constexpr bool is_minus_infinity(const T& x) {
  if constexpr (std::numeric_limits<T>::has_infinity)
    return x == -std::numeric_limits<T>::infinity();
  else
    return false;
}

/// pass 1: the maximum of n values spaced `stride` apart (NaN if any is NaN)
template <class T>
constexpr T maximum(const T* x, std::size_t n, std::size_t stride) {
  T m = x[0];
  for (std::size_t k = 1; k < n; ++k) {
    const T e = x[k * stride];
    if (e != e) return e;  // NaN wins, so it reaches every output
    if (m < e) m = e;
  }
  return m;
}

/// the stable softmax of n values spaced `stride` apart, written to out with the same spacing
template <class T>
constexpr void stable_softmax(const T* x, T* out, std::size_t n, std::size_t stride) {
  using std::size_t;
  // pass 1: the maximum; subtracting it keeps every exp argument <= 0 (no overflow)
  const T m = maximum(x, n, stride);
  if (m != m) {  // a NaN score: the whole row is NaN (without arithmetic on the NaN, which
                 // clang refuses in a constant expression)
    for (size_t k = 0; k < n; ++k) out[k * stride] = m;
    return;
  }
  if constexpr (std::numeric_limits<T>::has_infinity && std::numeric_limits<T>::has_quiet_NaN)
    if (m == std::numeric_limits<T>::infinity()) {  // a +inf score: the whole row is NaN
      for (size_t k = 0; k < n; ++k) out[k * stride] = std::numeric_limits<T>::quiet_NaN();
      return;
    }
  if (is_minus_infinity(m)) {  // every score masked: weights 0 (not 0/0 = NaN)
    for (size_t k = 0; k < n; ++k) out[k * stride] = T(0);
    return;
  }
  // pass 2: e_k = exp(x_k - max), summed left to right
  T s = T(0);
  for (size_t k = 0; k < n; ++k) {
    const T e = qkv::exp(T(x[k * stride] - m));
    out[k * stride] = e;
    s += e;
  }
  // pass 3: normalise; s >= 1 because the maximum contributes exp(0) = 1
  for (size_t k = 0; k < n; ++k) out[k * stride] = out[k * stride] / s;
}

}  // namespace detail

/// @brief softmax of each row: every row of the result sums to 1. PyTorch's softmax(x, dim=-1),
/// the attention weights. (R, C) -> (R, C)
template <class T, std::size_t R, std::size_t C>
[[nodiscard]] constexpr matrix<T, R, C> softmax_rows(const matrix<T, R, C>& x) {
  matrix<T, R, C> out;
  for (std::size_t i = 0; i < R; ++i) detail::stable_softmax(x.v + i * C, out.v + i * C, C, 1);
  return out;
}

/// @brief softmax of each column: every column sums to 1. PyTorch's softmax(x, dim=0).
template <class T, std::size_t R, std::size_t C>
[[nodiscard]] constexpr matrix<T, R, C> softmax_columns(const matrix<T, R, C>& x) {
  matrix<T, R, C> out;
  for (std::size_t j = 0; j < C; ++j) detail::stable_softmax(x.v + j, out.v + j, R, C);
  return out;
}

/// @brief softmax over all R*C elements at once: the whole matrix sums to 1.
/// This is tutorial 000's numpy cell, `np.exp(s) / np.sum(np.exp(s))`: a pitfall, since a
/// query's weights then depend on every other query's scores and its row no longer sums to 1.
template <class T, std::size_t R, std::size_t C>
[[nodiscard]] constexpr matrix<T, R, C> softmax_all(const matrix<T, R, C>& x) {
  matrix<T, R, C> out;
  detail::stable_softmax(x.v, out.v, R * C, 1);
  return out;
}

/// @brief the textbook formula exp(x_j) / sum_k exp(x_k) of each row, with no maximum
/// subtracted. For teaching only: a score above log(max) (88.72 float, 709.78 double)
/// overflows exp to inf and its row becomes NaN, where softmax_rows gives the right answer.
template <class T, std::size_t R, std::size_t C>
[[nodiscard]] constexpr matrix<T, R, C> naive_softmax_rows(const matrix<T, R, C>& x) {
  matrix<T, R, C> out;
  for (std::size_t i = 0; i < R; ++i) {
    T s = T(0);
    for (std::size_t j = 0; j < C; ++j) {
      out.v[i * C + j] = qkv::exp(x.v[i * C + j]);
      s += out.v[i * C + j];
    }
    for (std::size_t j = 0; j < C; ++j) out.v[i * C + j] = out.v[i * C + j] / s;
  }
  return out;
}

/// the sum exp(x_0) + ... of each row without the maximum subtracted: where the naive
/// softmax breaks (it is inf once one exp overflows)
template <class T, std::size_t R, std::size_t C>
[[nodiscard]] constexpr matrix<T, R, 1> naive_exp_row_sums(const matrix<T, R, C>& x) {
  return row_sums(map(x, [](const T& e) { return qkv::exp(e); }));
}

}  // namespace qkv
