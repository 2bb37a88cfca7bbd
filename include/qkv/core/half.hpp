// half.hpp: the 16-bit floating-point storage types, bfloat16 and float16 (IEEE 754 binary16),
// their conversions to and from float, and whole matrices converted either way, all constexpr.
//
//   bfloat16: 1 sign, 8 exponent, 7 fraction bits (float's top 16 bits): float's range, 8
//             significant bits, unit roundoff u = 2^-8
//   float16:  1 sign, 5 exponent, 10 fraction bits: largest finite 65504, subnormals below
//             2^-14 (spacing 2^-24), 11 significant bits, u = 2^-11
//
//   as_float(m)            matrix<S, R, C> -> matrix<float, R, C>, every element exactly
//   rounded_to<S>(m)       matrix<float, R, C> -> matrix<S, R, C>, each element rounded once
//
// They are storage only: arithmetic happens in float (attention on 16-bit inputs converts them
// with as_float and accumulates in float; core/batch.hpp, docs/numerics.md "16-bit storage").
// To float: exact (every bfloat16 and float16 value is a float). From float: round to nearest,
// ties to even; a NaN stays a NaN, quiet (bfloat16: its top bits kept and the quiet bit set;
// float16: 0x7E00 with the sign); an infinity stays an infinity; float16: a magnitude >= 65520
// (half-way from 65504 to 2^16) becomes inf, one below 2^-25 becomes zero (sign kept), and
// between them a subnormal is rounded the same way; bfloat16: a finite float past the largest
// finite bfloat16 (0x1.fep127) by half a step or more becomes inf. So a relative error of at
// most u for every normal result; float16's subnormals are within 2^-25 absolute.
// No hardware instruction is assumed: the bit operations below are what the F16C and AVX512-BF16
// instructions compute, in portable C++20 (std::bit_cast is constexpr in g++ 12 and clang 16).
// The runtime (runtime/half.hpp) uses these same functions and types: one definition.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "matrix.hpp"

namespace qkv {

/// IEEE half (binary16) bits -> float, exactly
[[nodiscard]] constexpr float half_bits_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  if (e == 0) {  // zero or subnormal: m * 2^-24, exact in float
    const float f = static_cast<float>(m) * 5.9604644775390625e-8f;
    return sign ? -f : f;
  }
  if (e == 31) return std::bit_cast<float>(sign | 0x7F800000u | (m << 13));  // inf, NaN
  return std::bit_cast<float>(sign | ((e + 112u) << 23) | (m << 13));        // rebias 15 -> 127
}

/// float -> IEEE half bits, round to nearest, ties to even (overflow -> inf, NaN stays NaN)
[[nodiscard]] constexpr std::uint16_t float_to_half_bits(float f) noexcept {
  std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7FFFFFFFu;
  if (x >= 0x7F800000u) return static_cast<std::uint16_t>(sign | (x > 0x7F800000u ? 0x7E00u : 0x7C00u));
  if (x >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // >= 65520 rounds to inf
  auto round_shift = [](std::uint32_t m, std::uint32_t s) {
    const std::uint32_t r = m >> s, rem = m & ((1u << s) - 1), half = 1u << (s - 1);
    return (rem > half || (rem == half && (r & 1u))) ? r + 1 : r;
  };
  if (x < 0x38800000u) {  // below 2^-14: a subnormal half, round(value * 2^24)
    const std::uint32_t e = x >> 23;
    if (e < 102) return sign;  // below 2^-25: rounds to zero
    const std::uint32_t m = (x & 0x7FFFFFu) | 0x800000u;
    return static_cast<std::uint16_t>(sign | round_shift(m, 126 - e));
  }
  // normal: rebias the exponent (127 -> 15), round the fraction from 23 to 10 bits; a carry into
  // the exponent is the right result (up to inf, excluded above)
  return static_cast<std::uint16_t>(sign | round_shift(x - 0x38000000u, 13));
}

/// bfloat16 bits -> float, exactly (the bits are float's top half)
[[nodiscard]] constexpr float bfloat16_bits_to_float(std::uint16_t b) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

/// float -> bfloat16 bits, round to nearest, ties to even: add 0x7FFF plus the lowest kept bit,
/// drop the low 16 bits (a carry into the exponent is the right result; past the largest finite
/// it gives inf). A NaN keeps its top bits with the quiet bit set (adding could make it inf).
[[nodiscard]] constexpr std::uint16_t float_to_bfloat16_bits(float f) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  return static_cast<std::uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

/// a bfloat16 number (storage; arithmetic happens in float)
struct bfloat16 {
  std::uint16_t bits = 0;
  bfloat16() = default;
  constexpr explicit bfloat16(float f) noexcept : bits(float_to_bfloat16_bits(f)) {}
  [[nodiscard]] static constexpr bfloat16 from_bits(std::uint16_t b) noexcept {
    bfloat16 r;
    r.bits = b;
    return r;
  }
  constexpr explicit operator float() const noexcept { return bfloat16_bits_to_float(bits); }
};

/// an IEEE binary16 number (storage; arithmetic happens in float)
struct float16 {
  std::uint16_t bits = 0;
  float16() = default;
  constexpr explicit float16(float f) noexcept : bits(float_to_half_bits(f)) {}
  [[nodiscard]] static constexpr float16 from_bits(std::uint16_t b) noexcept {
    float16 r;
    r.bits = b;
    return r;
  }
  constexpr explicit operator float() const noexcept { return half_bits_to_float(bits); }
};

/// bfloat16 or float16
template <class S>
concept sixteen_bit = std::is_same_v<S, bfloat16> || std::is_same_v<S, float16>;

/// the unit roundoff of rounding a float to S: 2^-8 (bfloat16), 2^-11 (float16). A normal
/// result is within u of the float, relatively; float16's subnormals within 2^-25 absolutely
template <sixteen_bit S>
inline constexpr double unit_roundoff_16 = std::is_same_v<S, bfloat16> ? 0x1p-8 : 0x1p-11;

/// every element as a float, exactly: (R, C) -> (R, C)
template <sixteen_bit S, std::size_t R, std::size_t C>
[[nodiscard]] constexpr matrix<float, R, C> as_float(const matrix<S, R, C>& m) {
  matrix<float, R, C> out;
  for (std::size_t k = 0; k < R * C; ++k) out.v[k] = static_cast<float>(m.v[k]);
  return out;
}

/// every element rounded to S (to nearest, ties to even): (R, C) -> (R, C)
template <sixteen_bit S, std::size_t R, std::size_t C>
[[nodiscard]] constexpr matrix<S, R, C> rounded_to(const matrix<float, R, C>& m) {
  matrix<S, R, C> out;
  for (std::size_t k = 0; k < R * C; ++k) out.v[k] = S(m.v[k]);
  return out;
}

/// whether two matrices of 16-bit numbers hold the same bits everywhere
template <sixteen_bit S, std::size_t R, std::size_t C>
[[nodiscard]] constexpr bool same_bits(const matrix<S, R, C>& a, const matrix<S, R, C>& b) {
  for (std::size_t k = 0; k < R * C; ++k)
    if (a.v[k].bits != b.v[k].bits) return false;
  return true;
}

}  // namespace qkv
