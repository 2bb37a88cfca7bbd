// simd.hpp: the runtime path's std::experimental::simd vocabulary: lane counts, an explicit fma,
// partial loads and stores, a lane select, horizontal max and sum.
//
// The project builds with -ffp-contract=off (the FMA policy, docs/numerics.md): no a*b+c is
// fused behind our back. Kernels that want one rounding instead of two call fmadd(), which
// emits vfmadd...ps/pd when the target has FMA (meson option simd_arch, default x86-64-v3) and
// falls back to a multiply and an add otherwise. libstdc++ 12's stdx::fma is a per-lane
// scalar call (docs/design.md, "Toolchain facts"), so it is not used.
#pragma once

#include <cmath>
#include <cstddef>
#include <experimental/simd>
#include <type_traits>

#include "target.hpp"  // the instruction set, and a warning without AVX2 + FMA

#if defined(__AVX__) || defined(__FMA__)
#include <immintrin.h>
#endif

namespace qkv::runtime {

namespace stdx = std::experimental;

/// the widest register the target has: 8 floats / 4 doubles with AVX2, 16 / 8 with AVX-512
/// (simd_arch=x86-64-v4 or native), 4 / 2 with SSE2
template <class T>
using simd = stdx::native_simd<T>;

template <class T>
inline constexpr std::size_t lanes = simd<T>::size();

/// true when fmadd() is one fused instruction on this target
inline constexpr bool has_fma =
#if defined(__FMA__)
    true;
#else
    false;
#endif

/// @brief a * b + c, rounded once when the target has FMA (see the header comment)
template <class T>
[[nodiscard]] inline simd<T> fmadd(const simd<T>& a, const simd<T>& b, const simd<T>& c) {
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float> && lanes<float> == 16)
    return simd<T>(_mm512_fmadd_ps(static_cast<__m512>(a), static_cast<__m512>(b), static_cast<__m512>(c)));
  else if constexpr (std::is_same_v<T, double> && lanes<double> == 8)
    return simd<T>(
        _mm512_fmadd_pd(static_cast<__m512d>(a), static_cast<__m512d>(b), static_cast<__m512d>(c)));
  else
#endif
#if defined(__FMA__) && defined(__AVX__)
      if constexpr (std::is_same_v<T, float> && lanes<float> == 8)
    return simd<T>(_mm256_fmadd_ps(static_cast<__m256>(a), static_cast<__m256>(b), static_cast<__m256>(c)));
  else if constexpr (std::is_same_v<T, double> && lanes<double> == 4)
    return simd<T>(
        _mm256_fmadd_pd(static_cast<__m256d>(a), static_cast<__m256d>(b), static_cast<__m256d>(c)));
  else
#endif
    return a * b + c;
}

/// the scalar twin of fmadd, with the same rounding as one of its lanes
template <class T>
  requires std::is_floating_point_v<T>
[[nodiscard]] inline T fmadd(T a, T b, T c) {
#if defined(__FMA__)
  return std::fma(a, b, c);
#else
  return a * b + c;
#endif
}

/// lanes k < n (a masked load: never touches p[n] and beyond, no lane-by-lane inserts,
/// which would stall on store forwarding)
template <class T>
[[nodiscard]] inline typename simd<T>::mask_type first_lanes(std::size_t n) {
  const simd<T> index([](auto k) { return T(k); });
  return index < simd<T>(T(n));
}

/// the first n (< lanes) elements of p, the rest filled with `fill`
template <class T>
[[nodiscard]] inline simd<T> load_partial(const T* p, std::size_t n, T fill = T(0)) {
  simd<T> v(fill);
  stdx::where(first_lanes<T>(n), v).copy_from(p, stdx::element_aligned);
  return v;
}

/// store the first n (< lanes) elements of v to p
template <class T>
inline void store_partial(const simd<T>& v, T* p, std::size_t n) {
  stdx::where(first_lanes<T>(n), v).copy_to(p, stdx::element_aligned);
}

/// @brief lane k is if_true[k] where m[k], else if_false[k]: the runtime path's only masked
/// assignment. It is written as a store and a masked load because libstdc++ 12's
/// `stdx::where(m, v) = x` does nothing when clang++-16 compiles it for AVX-512 (the bitmask
/// ABI; measured: v keeps every lane), while masked loads and stores work on both compilers.
/// clang++ turns this form into one masked move; g++ into a store and a masked load.
template <class T>
[[nodiscard]] inline simd<T> select(const typename simd<T>::mask_type& m, const simd<T>& if_true,
                                    const simd<T>& if_false) {
  alignas(stdx::memory_alignment_v<simd<T>>) T lanes_of_true[lanes<T>];
  if_true.copy_to(lanes_of_true, stdx::vector_aligned);
  simd<T> out = if_false;
  stdx::where(m, out).copy_from(lanes_of_true, stdx::vector_aligned);
  return out;
}

/// the largest lane. The order of a max does not change its value, so this is exact.
template <class T>
[[nodiscard]] inline T horizontal_max(const simd<T>& v) {
  return stdx::hmax(v);
}

/// the sum of the lanes in a fixed pairwise order (lane k with lane k + n/2, halving), so the
/// result never depends on anything but the values
template <class T>
[[nodiscard]] inline T horizontal_sum(const simd<T>& v) {
  T buf[lanes<T>];
  v.copy_to(buf, stdx::element_aligned);
  for (std::size_t half = lanes<T> / 2; half > 0; half /= 2)
    for (std::size_t k = 0; k < half; ++k) buf[k] = buf[k] + buf[k + half];
  return buf[0];
}

}  // namespace qkv::runtime
