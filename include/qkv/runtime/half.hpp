// half.hpp: the 16-bit floating-point storage types of the runtime path, bfloat16 and float16
// (IEEE 754 binary16), and their conversions to and from float.
//
//   bfloat16: 1 sign, 8 exponent, 7 fraction bits (float's top 16 bits): float's range, 8
//             significant bits, unit roundoff u = 2^-8
//   float16:  1 sign, 5 exponent, 10 fraction bits: largest finite 65504, subnormals below
//             2^-14, 11 significant bits, u = 2^-11
// They are storage only: the kernels convert to float and accumulate in float
// (docs/numerics.md, "16-bit storage"). to float: exact (every bfloat16 and float16 value is a
// float). from float: round to nearest, ties to even; a NaN stays a NaN (quiet, sign kept);
// float16: a magnitude >= 65520 (half-way past 65504) becomes inf, below 2^-25 zero, and between
// a subnormal rounded the same way. No hardware instruction is assumed: the bit operations below
// are what the F16C / AVX512-BF16 instructions compute, written in portable C++20.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace qkv::runtime {

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

/// float, bfloat16 or float16: the element types a KV cache or a 16-bit input may hold
template <class S>
concept storage_type = std::is_same_v<S, float> || std::is_same_v<S, bfloat16> || std::is_same_v<S, float16>;

/// out[i] = float(in[i]), exactly
template <storage_type S>
void to_float(const S* in, float* out, std::size_t n) noexcept {
  if constexpr (std::is_same_v<S, bfloat16>) {
    for (std::size_t i = 0; i < n; ++i) out[i] = std::bit_cast<float>(static_cast<std::uint32_t>(in[i].bits) << 16);
  } else {
    for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(in[i]);
  }
}

/// out[i] = S(in[i]): rounded to nearest, ties to even (float: a copy)
template <storage_type S>
void from_float(const float* in, S* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<S, float>)
      out[i] = in[i];
    else
      out[i] = S(in[i]);
  }
}

/// the unit roundoff of storing a float as S: 2^-8 (bfloat16), 2^-11 (float16), 0 (float)
template <storage_type S>
inline constexpr double storage_unit_roundoff = std::is_same_v<S, bfloat16> ? 0x1p-8 : std::is_same_v<S, float16> ? 0x1p-11 : 0.0;

}  // namespace qkv::runtime
