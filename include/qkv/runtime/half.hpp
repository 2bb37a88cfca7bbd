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
// are what the F16C / AVX512-BF16 instructions compute, written in portable C++20, in
// core/half.hpp (qkv::bfloat16 and qkv::runtime::bfloat16 are one type, likewise float16).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "../core/half.hpp"

namespace qkv::runtime {

// the conversions and the two types are core/half.hpp's (constexpr, standard library only): one
// definition for the core, the runtime and io/safetensors.hpp, the same bits everywhere
using qkv::bfloat16;
using qkv::bfloat16_bits_to_float;
using qkv::float16;
using qkv::float_to_bfloat16_bits;
using qkv::float_to_half_bits;
using qkv::half_bits_to_float;

/// float, bfloat16 or float16: the element types a KV cache or a 16-bit input may hold
template <class S>
concept storage_type = std::is_same_v<S, float> || std::is_same_v<S, bfloat16> || std::is_same_v<S, float16>;

/// out[i] = float(in[i]), exactly
template <storage_type S>
void to_float(const S* in, float* out, std::size_t n) noexcept {
  if constexpr (std::is_same_v<S, bfloat16>) {
    for (std::size_t i = 0; i < n; ++i)
      out[i] = std::bit_cast<float>(static_cast<std::uint32_t>(in[i].bits) << 16);
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

/// the unit roundoff of storing a float as S: the core's unit_roundoff_16 for bfloat16 (2^-8)
/// and float16 (2^-11), 0 for float (stored as it is)
template <storage_type S>
inline constexpr double storage_unit_roundoff = [] {
  if constexpr (qkv::sixteen_bit<S>)
    return qkv::unit_roundoff_16<S>;
  else
    return 0.0;
}();

}  // namespace qkv::runtime
