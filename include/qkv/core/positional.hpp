// positional.hpp: the sinusoidal positional encoding of "Attention Is All You Need" (Vaswani et al. 2017, §3.5).
//
//   PE(pos, 2i)     = sin(pos / 10000^(2i / d))
//   PE(pos, 2i + 1) = cos(pos / 10000^(2i / d))
// Self-attention is blind to order: permuting the tokens permutes its output rows the same way.
// Adding PE to the embeddings gives each position its own pattern: dimension pair i is a sine
// and a cosine of wavelength 2 pi 10000^(2i/d), from 2 pi (i = 0) up to 10000 * 2 pi, and
// PE(pos + k) is a fixed rotation of PE(pos) in each pair, whatever pos.
// The angle and its sine/cosine are computed in double and rounded once to T. A double encoding
// uses qkv::sin and qkv::cos, correctly rounded; a float one rounds from fdlibm's sin and cos
// (within 1 ulp of double, so the float is within 0.5 + 2^-29 ulp), which cost a fifth of the
// compile-time steps (docs/numerics.md): example 07 evaluates 2000 of them in one constant.
#pragma once

#include <cstddef>
#include <type_traits>

#include "math.hpp"
#include "matrix.hpp"

namespace qkv {

/// @brief the angular frequency of dimension pair i in a d-wide encoding: 10000^(-2i/d), in double
/// (exp(-(2i/d) ln 10000), the PyTorch tutorial's div_term)
[[nodiscard]] constexpr double positional_frequency(std::size_t i, std::size_t d) {
  constexpr double ln_10000 = 9.210340371976184;  // log(10000), correctly rounded
  return qkv::exp(-(double(2 * i) * ln_10000) / double(d));
}

/// @brief one element of the encoding: PE(pos, j), j even: sin, j odd: cos, in double
[[nodiscard]] constexpr double positional_encoding_value(std::size_t pos, std::size_t j, std::size_t d) {
  const double angle = double(pos) * positional_frequency(j / 2, d);
  return j % 2 == 0 ? qkv::sin(angle) : qkv::cos(angle);
}

namespace detail {
// PE(pos, j) with fdlibm's sin and cos (within 1 ulp of double): what a float encoding rounds
[[nodiscard]] constexpr double positional_encoding_value_faithful(std::size_t pos, std::size_t j,
                                                                  std::size_t d) {
  const double angle = double(pos) * positional_frequency(j / 2, d);
  return j % 2 == 0 ? detail::sin_check(angle) : detail::cos_check(angle);
}
}  // namespace detail

/// @brief the (N, D) encoding of positions first .. first + N - 1: row p is PE(first + p).
/// D may be odd (the last column is then a sine without its cosine).
template <class T, std::size_t N, std::size_t D>
[[nodiscard]] constexpr matrix<T, N, D> sinusoidal_positional_encoding(std::size_t first = 0) {
  matrix<T, N, D> pe;
  for (std::size_t p = 0; p < N; ++p)
    for (std::size_t j = 0; j < D; ++j)
      pe.v[p * D + j] = static_cast<T>(std::is_same_v<T, float>
                                           ? detail::positional_encoding_value_faithful(first + p, j, D)
                                           : positional_encoding_value(first + p, j, D));
  return pe;
}

/// @brief x + PE: the encoder's input, each token's embedding plus its position's encoding. (T, d) -> (T, d)
template <class T, std::size_t N, std::size_t D>
[[nodiscard]] constexpr matrix<T, N, D> add_positional_encoding(const matrix<T, N, D>& x,
                                                                std::size_t first = 0) {
  return x + sinusoidal_positional_encoding<T, N, D>(first);
}

}  // namespace qkv
