// exp.hpp: vexp, a vector exp on std::experimental::simd: about 10x std::exp, within 2 ulp.
//
// libstdc++ 12's stdx::exp calls expf once per lane (docs/design.md, "Toolchain facts"). This one is the
// Cephes expf method written on simd operations, every step vectorised:
//   x = n ln2 + r, n = round(x log2 e), |r| <= ln2/2  (r by a two-part ln2, Cody & Waite)
//   e^r ~ 1 + r + r^2 P(r), P of degree 5 (float; Cephes expf.c) or Taylor to r^13 (double)
//   e^x = e^r 2^n. n and 2^n come from one fma with a "shifter" constant (its bits are n + bias);
//   when every |x| <= 87 (float) 2^n is one normal number: about 16 instructions per vector
//   (on AVX-512 y 2^n is one vscalefps from n, not a shift and a multiplication: same bits).
//   Other vectors (|x| > 87, infinities, NaN: rare in attention) take a slower path that builds
//   2^n in two halves, 2^(n>>1) 2^(n-(n>>1)), so that n = 128 (x close to 88.72) and the
//   subnormal results below x = -87.34 are right; lanes both paths can do get the same bits.
// Every multiply-add is an explicit fmadd (FMA policy, simd.hpp). Measured error, float:
// at most 1 ulp over every float in [-87.3, 88.7] against a double exp, tests/runtime/exp_test.cpp.
// exp(-inf) = 0, exp(+inf) = +inf, exp(NaN) = NaN; results overflow to +inf above 88.7228
// and flush to 0 below about -103.97, as expf does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

#include "simd.hpp"

namespace qkv::runtime {

namespace detail {

template <class T>
struct exp_constants;

template <>
struct exp_constants<float> {
  using int_type = std::int32_t;
  static constexpr float lo = -104.0f, hi = 89.0f;  // beyond: 0 and +inf anyway
  static constexpr float log2e = 1.44269504088896341f;
  static constexpr float ln2_hi = 0.693359375f;     // 9 significant bits: n ln2_hi is exact
  static constexpr float ln2_lo = -2.12194440e-4f;  // ln 2 - ln2_hi
  static constexpr int mantissa_bits = 23, bias = 127;
  static constexpr float fast_limit = 87.0f;  // n = round(x log2e) in [-126, 126]: 2^n normal
  // Cephes expf.c, P(r) such that e^r ~ 1 + r + r^2 P(r) on [-ln2/2, ln2/2]
  static constexpr float p[] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
};

template <>
struct exp_constants<double> {
  using int_type = std::int64_t;
  static constexpr double lo = -746.0, hi = 710.0;
  static constexpr double log2e = 1.4426950408889634074;
  static constexpr double ln2_hi = 6.93145751953125e-1;  // Cephes exp.c's C1: n ln2_hi is exact
  static constexpr double ln2_lo = 1.42860682030941723212e-6;
  static constexpr int mantissa_bits = 52, bias = 1023;
  static constexpr double fast_limit = 708.0;  // n in [-1022, 1022]
  // 1/k! for k = 13 .. 2: P(r) = sum r^(k-2)/k!, remainder r^14/14! < 4e-18 for |r| <= ln2/2
  static constexpr double p[] = {1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0,
                                 1.0 / 362880.0,     1.0 / 40320.0,     1.0 / 5040.0,     1.0 / 720.0,
                                 1.0 / 120.0,        1.0 / 24.0,        1.0 / 6.0,        1.0 / 2.0};
};

}  // namespace detail

namespace detail {

/// the "shifter": 1.5 2^p + bias (p = mantissa bits), so that a sum near it has an ulp of 1 and
/// its low mantissa bits are an integer n + bias
template <class T>
inline constexpr T exp_shift =
    T(3) * T(typename exp_constants<T>::int_type(1) << (exp_constants<T>::mantissa_bits - 1)) +
    T(exp_constants<T>::bias);

/// x log2 e + shift, rounded once: its low mantissa bits are n + bias with n = round(x log2 e)
/// (exp_shift), which gives n without a round and its 2^n without an int conversion
template <class T>
[[nodiscard, gnu::always_inline]] inline simd<T> exp_shifted_n(const simd<T>& x) {
  using c = exp_constants<T>;
  return fmadd(x, simd<T>(c::log2e), simd<T>(exp_shift<T>));
}

/// e^r 2^-n for r = x - n ln2: the reduction and the polynomial, shared by both paths so that
/// a lane gets the same bits whichever path runs it
template <class T>
[[nodiscard, gnu::always_inline]] inline simd<T> exp_mantissa(const simd<T>& x, const simd<T>& z) {
  using c = exp_constants<T>;
  using V = simd<T>;
  const V n = z - V(exp_shift<T>);  // exact: z and the shift are integers of the same binade
  V r = fmadd(n, V(-c::ln2_hi), x);
  r = fmadd(n, V(-c::ln2_lo), r);
  // e^r = 1 + r + r^2 P(r)
  V p(c::p[0]);
  for (std::size_t k = 1; k < std::size(c::p); ++k) p = fmadd(p, r, V(c::p[k]));
  return fmadd(p, r * r, r) + V(1);
}

/// the rare lanes: |x| beyond fast_limit, infinities, NaN. Clamped, then 2^n in two halves,
/// 2^h 2^(n-h) with h = n >> 1, each a normal number, so that n = 128 (x close to 88.72) and
/// the subnormal results below x = -87.34 are right
template <class T>
[[gnu::noinline]] simd<T> vexp_wide(simd<T> x) {
  using c = exp_constants<T>;
  using V = simd<T>;
  using I = stdx::rebind_simd_t<typename c::int_type, V>;
  const V input = x;
  const auto is_nan = x != x;
  x = stdx::min(stdx::max(x, V(c::lo)), V(c::hi));
  const V z = exp_shifted_n(x);
  const V y = exp_mantissa(x, z);
  const I ni = stdx::static_simd_cast<I>(z - V(exp_shift<T>));
  const I h = ni >> 1;
  const V two_h = stdx::__proposed::simd_bit_cast<V>((h + I(c::bias)) << c::mantissa_bits);
  const V two_rest = stdx::__proposed::simd_bit_cast<V>((ni - h + I(c::bias)) << c::mantissa_bits);
  // the clamp turned NaN into a number: give it back
  return select(is_nan, input, (y * two_h) * two_rest);
}

/// y 2^n on the fast path (2^n a normal number, n in z's low bits as exp_shifted_n leaves them):
/// one vscalefps / vscalefpd on AVX-512 (y 2^n rounded once, as the multiplication by 2^n
/// rounds it: the same bits), else 2^n built from z's bits by one shift and a multiplication
template <class T>
[[nodiscard, gnu::always_inline]] inline simd<T> exp_scale(const simd<T>& y, const simd<T>& z) {
  using c = exp_constants<T>;
  using V = simd<T>;
  using I = stdx::rebind_simd_t<typename c::int_type, V>;
#if defined(__AVX512F__)
  if constexpr (sizeof(V) == 64) {
    const V n = z - V(exp_shift<T>);  // exact (exp_mantissa's n; the compiler computes it once)
    if constexpr (std::is_same_v<T, float>)
      return V(_mm512_maskz_scalef_ps(__mmask16(0xFFFF), static_cast<__m512>(y), static_cast<__m512>(n)));
    else
      return V(_mm512_maskz_scalef_pd(__mmask8(0xFF), static_cast<__m512d>(y), static_cast<__m512d>(n)));
  }
#endif
  // z's low bits are n + bias: shifted into the exponent field they are 2^n (the bits above
  // drop out of the integer)
  const V two_n =
      stdx::__proposed::simd_bit_cast<V>(stdx::__proposed::simd_bit_cast<I>(z) << c::mantissa_bits);
  return y * two_n;
}

}  // namespace detail

/// @brief e^x in every lane (see the header comment for the method and the accuracy).
/// Fast path when every |x| <= fast_limit (2^n is then one normal number: y 2^n by
/// detail::exp_scale); else detail::vexp_wide, with the same bits for the lanes both can do.
template <class T>
[[nodiscard, gnu::always_inline]] inline simd<T> vexp(simd<T> x) {
  using c = detail::exp_constants<T>;
  using V = simd<T>;
  // NaN compares false, so it takes the wide path too
  if (!stdx::all_of(stdx::abs(x) <= V(c::fast_limit))) [[unlikely]]
    return detail::vexp_wide(x);
  const V z = detail::exp_shifted_n(x);
  const V y = detail::exp_mantissa(x, z);
  return detail::exp_scale(y, z);
}

/// @brief out[i] = e^in[i] for i < n; in and out may be the same array. The tail (n % lanes)
/// goes through the same vector code, so every element gets the same bits as in a full vector.
template <class T>
inline void vexp(const T* in, T* out, std::size_t n) {
  constexpr std::size_t w = lanes<T>;
  std::size_t i = 0;
  for (; i + w <= n; i += w)
    vexp(simd<T>(in + i, stdx::element_aligned)).copy_to(out + i, stdx::element_aligned);
  if (i < n) store_partial(vexp(load_partial(in + i, n - i)), out + i, n - i);
}

/// @brief e^x for one number, with exactly the bits of the vector exp's lanes
template <class T>
[[nodiscard]] inline T vexp(T x)
  requires std::is_floating_point_v<T>
{
  return vexp(simd<T>(x))[0];
}

}  // namespace qkv::runtime
