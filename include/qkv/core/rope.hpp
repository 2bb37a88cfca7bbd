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
// fdlibm's (within 1 ulp of double) as positional.hpp does. (T, d) -> (T, d), d even.
// Partial rotary embeddings (GPT-NeoX's rotary_pct, runtime/rope.hpp's rotary_dim): with
// rotary_dim = r (even, 0 < r <= d; 0 = d, the whole head) only the first r columns of each
// row are rotated, as a head of width r (theta_i = base^(-2i/r), i < r/2; half_split pairs
// (i, i + r/2)); the columns r .. d - 1 are copied unchanged.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <type_traits>

#include "fail.hpp"
#include "math.hpp"
#include "matrix.hpp"

namespace qkv {

/// which dimensions RoPE rotates together; the one definition, runtime/rope.hpp's too
/// (qkv::runtime::rope_layout is this type). half_split comes first: rope_layout{} is the
/// default of rope_options, LLaMA's.
enum class rope_layout {
  half_split,  // (i, i + d/2): GPT-NeoX, LLaMA, Hugging Face's rotate_half
  interleaved  // (2i, 2i + 1): RoFormer, GPT-J's rotate_every_two
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

/// @brief how to rotate, in one value (kv_cache.hpp's `rope`): rope()'s layout, base and rotary_dim
/// (0 = the whole head). The default is LLaMA's: half_split, base 10000, the whole head.
struct rope_options {
  rope_layout layout = rope_layout::half_split;
  double base = 10000.0;
  std::size_t rotary_dim = 0;
};

/// @brief the dimensions (first, second) of pair i in a d-wide head, in the layout
[[nodiscard]] constexpr std::size_t rope_pair_first(std::size_t i, rope_layout layout) {
  return layout == rope_layout::interleaved ? 2 * i : i;
}
[[nodiscard]] constexpr std::size_t rope_pair_second(std::size_t i, std::size_t d, rope_layout layout) {
  return layout == rope_layout::interleaved ? 2 * i + 1 : i + d / 2;
}

/// @brief RoPE of N rows (N, D): row p is the token at position first_position + p, each pair
/// i rotated by (first_position + p) theta_i; with rotary_dim = r (0 = D) only the first r
/// columns, as a head of width r, the rest copied. (N, D) -> (N, D)
/// @throws std::invalid_argument for an odd rotary_dim or one wider than D (at compile time: no constant)
template <class T, std::size_t N, std::size_t D>
  requires rope_width_is_even<D>
[[nodiscard]] constexpr matrix<T, N, D> rope(const matrix<T, N, D>& x, rope_layout layout,
                                             std::size_t first_position = 0, double base = 10000.0,
                                             std::size_t rotary_dim = 0) {
  const std::size_t r = rotary_dim == 0 ? D : rotary_dim;
  if (r % 2 != 0 || r > D)
    ::qkv::detail::fail<std::invalid_argument>(
        "qkv::rope: rotary_dim must be even and at most the row's width D");
  double theta[D / 2]{};
  for (std::size_t i = 0; i < r / 2; ++i) theta[i] = rope_frequency(i, r, base);
  matrix<T, N, D> out = x;  // columns r .. D - 1 stay as they are
  for (std::size_t p = 0; p < N; ++p)
    for (std::size_t i = 0; i < r / 2; ++i) {
      const auto [c, s] = rope_cos_sin<T>(first_position + p, theta[i]);
      const std::size_t f = rope_pair_first(i, layout), g = rope_pair_second(i, r, layout);
      const T a = x.v[p * D + f], b = x.v[p * D + g];
      out.v[p * D + f] = a * c - b * s;
      out.v[p * D + g] = b * c + a * s;
    }
  return out;
}

/// @brief rope() with the layout, base and rotary_dim of `o`. (N, D) -> (N, D)
template <class T, std::size_t N, std::size_t D>
  requires rope_width_is_even<D>
[[nodiscard]] constexpr matrix<T, N, D> rope(const matrix<T, N, D>& x, const rope_options& o,
                                             std::size_t first_position = 0) {
  return rope(x, o.layout, first_position, o.base, o.rotary_dim);
}

}  // namespace qkv
