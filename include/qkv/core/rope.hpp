// rope.hpp: rotary position embeddings (RoPE; Su et al., "RoFormer", 2021), both layouts.
//
// Instead of adding a position's encoding to the embedding (positional.hpp), RoPE rotates the
// query and the key of the token at position m, pair of dimensions by pair of dimensions, by the
// angle m theta_i, theta_i = base^(-2i/d) (base 10000, i = 0 .. d/2 - 1):
//   (a, b) -> (a cos(m theta_i) - b sin(m theta_i),  b cos(m theta_i) + a sin(m theta_i))
// A rotation keeps lengths, and two rotations compose: (R_m q) · (R_n k) = q · (R_(n-m) k), so
// a score depends on the positions only through m - n, the relative position (example 12 proves
// both within derived bounds). Which dimensions form a pair is the layout:
//   interleaved  pairs (2i, 2i + 1): RoFormer's equation (34), GPT-J's rotate_every_two
//   half_split   pairs (i, i + d/2): GPT-NeoX's and LLaMA's (Hugging Face) rotate_half
// Each element is computed as those libraries do: x cos + rotate(x) sin, rotate(x) taking -b
// for a and a for b: a cos + (-b) sin is a cos - b sin, the same bits.
// theta_i and the angle m theta_i are computed in double (theta_i = exp(-(2i/d) ln base)), their
// cosine and sine correctly rounded for double (qkv::cos, qkv::sin) and, for float, rounded from
// fdlibm's (within 1 ulp of double) as positional.hpp does. The whole head width is rotated
// (GPT-NeoX's partial rotary_pct is not modelled here). (T, d) -> (T, d), d even.
#pragma once

#include <cstddef>
#include <type_traits>

#include "math.hpp"
#include "matrix.hpp"

namespace qkv {

/// which dimensions RoPE rotates together
enum class rope_layout {
  interleaved,  // (2i, 2i + 1): RoFormer, GPT-J
  half_split    // (i, i + d/2): GPT-NeoX, LLaMA
};

/// RoPE rotates pairs of dimensions: the head width must be even
template <std::size_t D>
concept rope_width_is_even = (D > 0 && D % 2 == 0);

/// @brief theta_i = base^(-2i/d) = exp(-(2i/d) ln base), in double: the angle per position of pair i
[[nodiscard]] constexpr double rope_frequency(std::size_t i, std::size_t d, double base = 10000.0) {
  return qkv::exp(-(double(2 * i) * qkv::log(base)) / double(d));
}

/// @brief the cosine and sine of the angle `position * theta` rounded to T, as rope() uses them
template <class T>
struct rope_angle {
  T cos, sin;
};
template <class T>
[[nodiscard]] constexpr rope_angle<T> rope_cos_sin(std::size_t position, double theta) {
  const double angle = double(position) * theta;
  if constexpr (std::is_same_v<T, double>)
    return {qkv::cos(angle), qkv::sin(angle)};
  else
    return {static_cast<T>(detail::cos_check(angle)), static_cast<T>(detail::sin_check(angle))};
}

/// @brief the dimensions (first, second) of pair i in a d-wide head, in the layout
[[nodiscard]] constexpr std::size_t rope_pair_first(std::size_t i, rope_layout layout) {
  return layout == rope_layout::interleaved ? 2 * i : i;
}
[[nodiscard]] constexpr std::size_t rope_pair_second(std::size_t i, std::size_t d, rope_layout layout) {
  return layout == rope_layout::interleaved ? 2 * i + 1 : i + d / 2;
}

/// @brief RoPE of N rows (N, D): row p is the token at position first_position + p, each pair
/// i rotated by (first_position + p) theta_i. (N, D) -> (N, D)
template <class T, std::size_t N, std::size_t D>
  requires rope_width_is_even<D>
[[nodiscard]] constexpr matrix<T, N, D> rope(const matrix<T, N, D>& x, rope_layout layout,
                                            std::size_t first_position = 0, double base = 10000.0) {
  double theta[D / 2]{};
  for (std::size_t i = 0; i < D / 2; ++i) theta[i] = rope_frequency(i, D, base);
  matrix<T, N, D> out;
  for (std::size_t p = 0; p < N; ++p)
    for (std::size_t i = 0; i < D / 2; ++i) {
      const auto [c, s] = rope_cos_sin<T>(first_position + p, theta[i]);
      const std::size_t f = rope_pair_first(i, layout), g = rope_pair_second(i, D, layout);
      const T a = x.v[p * D + f], b = x.v[p * D + g];
      out.v[p * D + f] = a * c - b * s;
      out.v[p * D + g] = b * c + a * s;
    }
  return out;
}

}  // namespace qkv
