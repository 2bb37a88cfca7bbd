// alibi.hpp: ALiBi, attention with linear biases (Press, Smith & Lewis, "Train Short, Test Long", 2022).
//
// No position is added to the embeddings and nothing is rotated: head h adds m_h (j - p) to the
// scaled score of query i (at aligned position p) for key j, a penalty growing linearly with the
// distance p - j to a past key. The slopes m_h form a geometric sequence, per the paper's
// get_slopes: for H a power of two, m_h = 2^(-8 (h + 1) / H), h = 0 .. H - 1 (H = 8: 1/2, 1/4,
// .., 1/256); otherwise the slopes of the power of two P just below H, then every other slope of
// 2P for the remaining H - P heads.
//   alibi_slopes<H>()               the H slopes, in double
//   alibi_bias<T, Tq, S>(m, align)  (Tq, S): m (j - p), p = i or i + S - Tq (masks.hpp's causal_alignment)
// The bias is added to the scaled scores before the causal mask (its future entries are masked
// anyway). A slope that is not a power of two is exp(-(8 (h + 1) / H) ln 2) rounded once
// (within 1 ulp of 2^x); the paper's Python multiplies start * ratio^h, which may differ in the
// last bit.
#pragma once

#include <array>
#include <cstddef>

#include "masks.hpp"
#include "math.hpp"
#include "matrix.hpp"

namespace qkv {

namespace detail {
/// 2^(-8 k / n), exactly when 8 k / n is an integer (a power of two), else exp(x ln 2) in double
[[nodiscard]] constexpr double alibi_power(std::size_t k, std::size_t n) {
  if ((8 * k) % n == 0) {
    double r = 1.0;
    for (std::size_t e = 0; e < 8 * k / n; ++e) r /= 2.0;
    return r;
  }
  constexpr double ln_2 = 0.6931471805599453;  // log(2), correctly rounded
  return qkv::exp(-(double(8 * k) / double(n)) * ln_2);
}
}  // namespace detail

/// @brief the ALiBi slopes of H heads (get_slopes of the paper's code), head 0 first
template <std::size_t H>
  requires(H > 0)
[[nodiscard]] constexpr std::array<double, H> alibi_slopes() {
  std::size_t p = 1;  // the largest power of two <= H
  while (2 * p <= H) p *= 2;
  std::array<double, H> m{};
  for (std::size_t h = 0; h < p; ++h) m[h] = detail::alibi_power(h + 1, p);
  // the remaining H - p heads: slopes 0, 2, 4, ... of 2p heads (2^(-8 (2k + 1) / 2p))
  for (std::size_t k = 0; p + k < H; ++k) m[p + k] = detail::alibi_power(2 * k + 1, 2 * p);
  return m;
}

/// @brief the (Tq, S) ALiBi bias of one head: slope (j - p), p the query's aligned position
/// (lower_right, the default: Tq new tokens at the end of S keys). 0 on the diagonal, negative
/// for past keys; future keys get a positive value that the causal mask removes.
template <class T, std::size_t Tq, std::size_t S>
[[nodiscard]] constexpr matrix<T, Tq, S> alibi_bias(double slope,
                                                    causal_alignment a = causal_alignment::lower_right) {
  matrix<T, Tq, S> out;
  for (std::size_t i = 0; i < Tq; ++i)
    for (std::size_t j = 0; j < S; ++j)
      out.v[i * S + j] =
          static_cast<T>(slope * double(static_cast<long long>(j) - aligned_position(i, Tq, S, a)));
  return out;
}

}  // namespace qkv
