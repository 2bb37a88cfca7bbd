// torch.hpp: PyTorch's CPU random generator and module initialisers, bit for bit, in constexpr.
//
// Note [PyTorch's CPU generator]
// qkv::torch::generator reproduces what PyTorch 1.13 (x86-64, AVX2 dispatch, GCC build) does
// after torch.manual_seed(S): the numbers of torch.rand, torch.randn, Tensor.uniform_,
// Tensor.normal_, nn.Linear, nn.Embedding, nn.init.xavier_uniform_ and nn.MultiheadAttention
// come out with the same bits, at compile time and at run time. The PyTorch files it matches:
//   aten/src/ATen/core/MT19937RNGEngine.h        the engine (section "the engine" below)
//   aten/src/ATen/CPUGeneratorImpl.{h,cpp}       seeding, random(), random64(), the normal cache
//   aten/src/ATen/core/TransformationHelper.h    uniform_real: the low 24 / 53 bits
//   aten/src/ATen/core/DistributionsHelper.h     normal_distribution<double> (element-wise path)
//   aten/src/ATen/native/cpu/DistributionTemplates.h   uniform_kernel, normal_kernel, the blocks
//   aten/src/ATen/native/cpu/avx_mathfun.h       log256_ps, sincos256_ps (Cephes)
//   torch/nn/init.py, torch/nn/modules/{linear,sparse,activation}.py   the initialisers
// docs/design.md ("PyTorch's generator") and docs/reference.md's section have the details.
//
// The pitfalls, all handled here:
//  - only the low 32 bits of the seed reach the engine; negative seeds are two's complement;
//  - float32 takes the LOW 24 bits of one draw; float64 takes two draws (first = high word),
//    low 53 bits;
//  - uniform_(a, b) is x * (b - a) + a in the tensor's type with ONE rounding (GCC contracts it
//    into an fma in PyTorch's AVX2 kernels);
//  - normal_ on >= 16 contiguous float32 elements runs 16-element Box-Muller blocks with the
//    AVX2 Cephes log/sincos polynomials, including the multiply-adds GCC fuses in them; when the
//    size is not a multiple of 16 the last 16 slots are redrawn and redone (the tail rule);
//  - fewer than 16 elements (or a non-contiguous tensor) go element by element through a double
//    Box-Muller whose second sample is cached in the generator, across calls and dtypes.
//
// Every fused multiply-add is exact: qkv::fma (core/math.hpp) in constant evaluation, std::fma at
// run time; every square root is qkv::sqrt / std::sqrt the same way. Both pairs are correctly
// rounded IEEE operations, so they give the same bits (qkv::fma and qkv::sqrt work in integers
// and are ~20x slower). On x86-64 the float32 blocks are also compiled for the FMA instruction
// set and chosen at run time when the CPU has it (detail::normal_blocks_with_fma). The project builds
// with -ffp-contract=off, so nothing else is fused behind our back (and the only products a
// contracting compiler could fuse into an addition here are exact ones).
#pragma once

#include <array>
#include <bit>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <type_traits>

#include "fail.hpp"
#include "math.hpp"
#include "matrix.hpp"

namespace qkv::torch {

/// the number types the generator fills: torch.float32 and torch.float64
template <class T>
concept dtype = std::same_as<T, float> || std::same_as<T, double>;

namespace detail {

// ---------------------------------------------------------------------------------------------
// the engine: 32-bit MT19937 (Matsumoto and Nishimura), MT19937RNGEngine.h. Its output equals
// std::mt19937(seed & 0xffffffff); it is written out here because std::mt19937 is not constexpr.

inline constexpr std::size_t mt_n = 624;
inline constexpr std::size_t mt_m = 397;
inline constexpr std::uint32_t mt_matrix_a = 0x9908b0dfu;
inline constexpr std::uint32_t mt_upper_mask = 0x80000000u;
inline constexpr std::uint32_t mt_lower_mask = 0x7fffffffu;

struct mt19937 {
  std::uint32_t state[mt_n]{};
  std::size_t next = mt_n;  // the next word to temper; mt_n: regenerate first

  constexpr void seed(std::uint32_t s) {
    // init_genrand: state[j] = 1812433253 (state[j-1] ^ (state[j-1] >> 30)) + j  (mod 2^32)
    state[0] = s;
    for (std::uint32_t j = 1; j < mt_n; ++j)
      state[j] = 1812433253u * (state[j - 1] ^ (state[j - 1] >> 30)) + j;
    next = mt_n;
  }

  // the twist: regenerate all 624 words (next_state in PyTorch)
  constexpr void regenerate() {
    std::size_t k = 0;
    for (; k < mt_n - mt_m; ++k) {
      const std::uint32_t y = (state[k] & mt_upper_mask) | (state[k + 1] & mt_lower_mask);
      state[k] = state[k + mt_m] ^ (y >> 1) ^ ((y & 1u) ? mt_matrix_a : 0u);
    }
    for (; k < mt_n - 1; ++k) {
      const std::uint32_t y = (state[k] & mt_upper_mask) | (state[k + 1] & mt_lower_mask);
      state[k] = state[k + mt_m - mt_n] ^ (y >> 1) ^ ((y & 1u) ? mt_matrix_a : 0u);
    }
    const std::uint32_t y = (state[mt_n - 1] & mt_upper_mask) | (state[0] & mt_lower_mask);
    state[mt_n - 1] = state[mt_m - 1] ^ (y >> 1) ^ ((y & 1u) ? mt_matrix_a : 0u);
    next = 0;
  }

  [[nodiscard]] constexpr std::uint32_t operator()() {
    if (next == mt_n) regenerate();
    std::uint32_t y = state[next++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
  }
};

// ---------------------------------------------------------------------------------------------
// exact fma and sqrt: qkv's integer versions while the compiler evaluates, the CPU's at run time.
// Both are correctly rounded, so the bits are the same.

template <class T>
[[nodiscard]] constexpr T exact_fma(T a, T b, T c) {
  if (std::is_constant_evaluated()) return qkv::fma(a, b, c);
  return std::fma(a, b, c);
}

template <class T>
[[nodiscard]] constexpr T exact_sqrt(T x) {
  if (std::is_constant_evaluated()) return qkv::sqrt(x);
  return std::sqrt(x);
}

// ---------------------------------------------------------------------------------------------
// uniform numbers in [0, 1) from raw draws (TransformationHelper.h uniform_real): the mask keeps
// the type's mantissa width from the LOW bits; the conversion and the scaling are exact.

[[nodiscard]] constexpr float unit_float(std::uint32_t draw) {
  return static_cast<float>(draw & 0xffffffu) * 0x1p-24f;
}
[[nodiscard]] constexpr double unit_double(std::uint64_t draw) {
  return static_cast<double>(draw & 0x1fffffffffffffull) * 0x1p-53;
}

// x * (to - from) + from with one rounding: the fma GCC makes of PyTorch's two operations.
// For rand (from 0, to 1) the product is exact, so the fma is x + 0 (which only turns -0 into
// +0, and x is never -0): the shortcut gives the same bits and keeps rand fast.
template <dtype T>
[[nodiscard]] constexpr T scale_uniform(T x, T from, T to) {
  if (from == T(0) && to == T(1)) return x + T(0);
  return exact_fma(x, T(to - from), from);
}

// n * std + mean with one rounding (_mm256_fmadd_ps in the AVX2 block; GCC's contraction of
// transformation::normal elsewhere). With std 1 and mean 0 the product is exact: n + 0.
template <dtype T>
[[nodiscard]] constexpr T scale_normal(T n, T mean, T std) {
  if (std == T(1) && mean == T(0)) return n + T(0);
  return exact_fma(n, std, mean);
}

// ---------------------------------------------------------------------------------------------
// the AVX2 Cephes polynomials (avx_mathfun.h), one lane at a time. The header writes every step
// as a separate multiply and add; the GCC build of PyTorch's AVX2 kernels fuses a multiply into
// the add that consumes it. The fusions below are the ones that binary performs
// (measured when the generator was written: 0 differences over 1 000 003 randn values).

inline constexpr float cephes_sqrthf = 0.707106781186547524f;
inline constexpr float cephes_log_p[9] = {7.0376836292E-2f,  -1.1514610310E-1f, 1.1676998740E-1f,
                                          -1.2420140846E-1f, +1.4249322787E-1f, -1.6668057665E-1f,
                                          +2.0000714765E-1f, -2.4999993993E-1f, +3.3333331174E-1f};
inline constexpr float cephes_log_q1 = -2.12194440e-4f;
inline constexpr float cephes_log_q2 = 0.693359375f;

/// log256_ps for one lane: Cephes logf. NaN for x <= 0 (the tutorials never get there: the
/// argument is 1 - u with u in [0, 1)).
[[nodiscard]] constexpr float cephes_log(float x) {
  const bool invalid = x <= 0.0f;  // _CMP_LE_OS: false for NaN
  // cut off denormals: _mm256_max_ps(x, min_norm) returns its second operand unless x > it
  const float min_norm = std::bit_cast<float>(0x00800000u);
  x = x > min_norm ? x : min_norm;
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
  // split off the exponent: x = m 2^e with m in [0.5, 1)
  float e = static_cast<float>(static_cast<std::int32_t>(bits >> 23) - 0x7f);
  const float m = std::bit_cast<float>((bits & ~0x7f800000u) | 0x3f000000u);  // | 0.5f
  e = e + 1.0f;
  // if m < sqrt(1/2): e -= 1, x = m + m - 1 (as (m - 1) + m); otherwise x = m - 1
  const bool small = m < cephes_sqrthf;
  const float tmp = small ? m : 0.0f;
  float xr = m - 1.0f;
  e = e - (small ? 1.0f : 0.0f);
  xr = xr + tmp;
  const float z = xr * xr;
  // Horner, each step fused: y = fma(y, x, p_k)
  float y = cephes_log_p[0];
  for (int k = 1; k < 9; ++k) y = exact_fma(y, xr, cephes_log_p[k]);
  y = y * xr;  // rounded: its consumer is another multiply
  y = exact_fma(y, z, e * cephes_log_q1);
  y = y - z * 0.5f;  // z * 0.5 is exact: fused or not, the same bits
  xr = xr + y;
  xr = xr + e * cephes_log_q2;  // e * 0.693359375 is exact (e is a small integer)
  return invalid ? std::bit_cast<float>(0xffffffffu) : xr;
}

inline constexpr float cephes_fopi = 1.27323954473516f;  // 4 / pi
inline constexpr float cephes_minus_dp1 = -0.78515625f;
inline constexpr float cephes_minus_dp2 = -2.4187564849853515625e-4f;
inline constexpr float cephes_minus_dp3 = -3.77489497744594108e-8f;
inline constexpr float sincof_p0 = -1.9515295891E-4f;
inline constexpr float sincof_p1 = 8.3321608736E-3f;
inline constexpr float sincof_p2 = -1.6666654611E-1f;
inline constexpr float coscof_p0 = 2.443315711809948E-005f;
inline constexpr float coscof_p1 = -1.388731625493765E-003f;
inline constexpr float coscof_p2 = 4.166664568298827E-002f;

struct sin_cos {
  float sin;
  float cos;
};

// _mm256_cvttps_epi32: truncation toward zero; out of range (or NaN) gives INT_MIN. A plain
// static_cast would be undefined there (and not a constant expression).
[[nodiscard]] constexpr std::int32_t truncate_to_int32(float y) {
  if (!(y > -2147483648.0f && y < 2147483648.0f)) return static_cast<std::int32_t>(0x80000000u);
  return static_cast<std::int32_t>(y);
}

/// sincos256_ps for one lane: Cephes sinf and cosf together.
[[nodiscard]] constexpr sin_cos cephes_sincos(float x) {
  const std::uint32_t xbits = std::bit_cast<std::uint32_t>(x);
  std::uint32_t sign_sin = xbits & 0x80000000u;
  x = std::bit_cast<float>(xbits & 0x7fffffffu);  // |x|
  // j = trunc(|x| 4/pi), rounded up to even; y = float(j)
  std::uint32_t j = static_cast<std::uint32_t>(truncate_to_int32(x * cephes_fopi));
  j = (j + 1u) & ~1u;
  const float y = static_cast<float>(static_cast<std::int32_t>(j));
  const std::uint32_t swap_sign_sin = (j & 4u) << 29;
  const bool poly_mask = (j & 2u) == 0;  // true: the sine polynomial gives sin
  // extended precision reduction x - y pi/4, each step fused
  x = exact_fma(y, cephes_minus_dp1, x);
  x = exact_fma(y, cephes_minus_dp2, x);
  x = exact_fma(y, cephes_minus_dp3, x);
  const std::uint32_t sign_cos = (~(j - 2u) & 4u) << 29;
  sign_sin ^= swap_sign_sin;
  const float z = x * x;
  // cosine polynomial: ((c0 z + c1) z + c2) z z - z/2 + 1
  float yc = exact_fma(coscof_p0, z, coscof_p1);
  yc = exact_fma(yc, z, coscof_p2);
  yc = yc * z;
  yc = exact_fma(yc, z, -(z * 0.5f));
  yc = yc + 1.0f;
  // sine polynomial: ((s0 z + s1) z + s2) z x + x
  float ys = exact_fma(sincof_p0, z, sincof_p1);
  ys = exact_fma(ys, z, sincof_p2);
  ys = ys * z;
  ys = exact_fma(ys, x, x);
  // select, exactly as the masks do it (the subtractions and additions of +0 included)
  const float ysin2 = poly_mask ? ys : 0.0f;
  const float ysin1 = poly_mask ? 0.0f : yc;
  ys = ys - ysin2;
  yc = yc - ysin1;
  const float s = ysin1 + ysin2;
  const float c = yc + ys;
  return {std::bit_cast<float>(std::bit_cast<std::uint32_t>(s) ^ sign_sin),
          std::bit_cast<float>(std::bit_cast<std::uint32_t>(c) ^ sign_cos)};
}

inline constexpr double pi = 3.141592653589793238462643383279502884;

/// one 16-element Box-Muller block in place, float32, AVX2 variant (normal_fill_16_AVX2).
/// d[j] (j < 8) feeds the radius, d[j + 8] the angle; cosines land in the first half.
constexpr void normal_block(float* d, float mean, float std) {
  constexpr float two_pi = static_cast<float>(2.0 * pi);  // 6.2831855f
  for (std::size_t j = 0; j < 8; ++j) {
    const float u1 = 1.0f - d[j];  // (0, 1]: log never sees 0
    const float u2 = d[j + 8];
    const float radius = exact_sqrt(-2.0f * cephes_log(u1));  // -2 log is exact; sqrt rounds once
    const float theta = two_pi * u2;
    const sin_cos sc = cephes_sincos(theta);
    const float n1 = radius * sc.cos;
    const float n2 = radius * sc.sin;
    d[j] = scale_normal(n1, mean, std);
    d[j + 8] = scale_normal(n2, mean, std);
  }
}

/// one 16-element block in place, float64 (normal_fill_16<double>): the C library's log, cos and
/// sin there; qkv::log, qkv::cos, qkv::sin here, correctly rounded, so the bits are PyTorch's
/// except where glibc misrounds (0.16 % of values; docs/numerics.md, tests/core/torch_f64_test.cpp).
constexpr void normal_block(double* d, double mean, double std) {
  for (std::size_t j = 0; j < 8; ++j) {
    const double u1 = 1.0 - d[j];
    const double u2 = d[j + 8];
    const double radius = exact_sqrt(-2.0 * qkv::log(u1));
    const double theta = 2.0 * pi * u2;  // 2.0f * c10::pi<double>: the double 2 pi
    d[j] = scale_normal(radius * qkv::cos(theta), mean, std);
    d[j + 8] = scale_normal(radius * qkv::sin(theta), mean, std);
  }
}

// ---------------------------------------------------------------------------------------------
// run time on x86-64: the same float32 blocks, compiled for the FMA instruction set when the CPU
// has it (the build does not assume it: no -march). Inlined there, every exact_fma becomes one
// vfmadd instruction instead of a call to the C library's fmaf: the same correctly rounded
// operation, so the same bits, about 5x faster. Compile-time evaluation never comes here.
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__) && !defined(__FMA__)
#define QKV_TORCH_FMA_DISPATCH 1
[[gnu::target("fma"), gnu::flatten]] inline void normal_blocks_with_fma(float* d, std::size_t n, float mean,
                                                                        float std) {
  for (std::size_t i = 0; i + 16 <= n; i += 16) normal_block(d + i, mean, std);
}
[[nodiscard]] inline bool cpu_has_fma() {
  static const bool has = __builtin_cpu_supports("fma");
  return has;
}
#endif

/// nn.init.kaiming_uniform_'s bound, evaluated in double exactly as torch/nn/init.py does:
/// gain = sqrt(2 / (1 + a^2)), std = gain / sqrt(fan), bound = sqrt(3) * std.
/// With a = sqrt(5), a^2 is 5.000000000000001, so this is not 1/sqrt(fan) in every bit.
[[nodiscard]] constexpr double kaiming_uniform_bound(std::size_t fan, double a) {
  const double gain = exact_sqrt(2.0 / (1.0 + a * a));
  const double std = gain / exact_sqrt(static_cast<double>(fan));
  return exact_sqrt(3.0) * std;
}

/// nn.init.xavier_uniform_'s bound: sqrt(3) * gain * sqrt(2 / (fan_in + fan_out))
[[nodiscard]] constexpr double xavier_uniform_bound(std::size_t fan_in, std::size_t fan_out, double gain) {
  const double std = gain * exact_sqrt(2.0 / static_cast<double>(fan_in + fan_out));
  return exact_sqrt(3.0) * std;
}

}  // namespace detail

// -------------------------------------------------------------------------------------------------
// module parameters

/// nn.Linear(In, Out)'s parameters: weight (Out, In), bias (1, Out); has_bias false for bias=False
/// (then bias holds zeros and stands for "no bias": adding it changes nothing)
template <class T, std::size_t In, std::size_t Out>
struct linear_parameters {
  matrix<T, Out, In> weight;  // (out, in)
  matrix<T, 1, Out> bias;     // (out)
  bool has_bias = true;
};

/// nn.MultiheadAttention(E, H)'s parameters after its initialisation
template <class T, std::size_t E>
struct multihead_attention_parameters {
  matrix<T, 3 * E, E> in_proj_weight;  // (3E, E): W_q, W_k, W_v stacked
  matrix<T, 1, 3 * E> in_proj_bias;    // (3E), zeros
  matrix<T, E, E> out_proj_weight;     // (E, E)
  matrix<T, 1, E> out_proj_bias;       // (E), zeros
};

/// whether nn.Linear has a bias
enum class bias : bool { none = false, with = true };

/// @brief PyTorch's CPU generator after torch.manual_seed(seed): a literal type, usable in
/// constant expressions. Calls draw in the order PyTorch's calls would.
///
///   qkv::torch::generator gen{123};
///   auto w = gen.rand<float, 24, 16>();      // torch.rand(24, 16)
///   auto e = gen.randn<float, 6, 16>();      // torch.randn(6, 16)
class generator {
 public:
  /// the seed of a fresh torch.Generator() (c10/core/GeneratorImpl.h)
  static constexpr std::uint64_t default_seed = 67280421310721ull;

  constexpr generator() { reseed(default_seed); }

  /// torch.manual_seed(seed): any integer, negative ones as 64-bit two's complement
  template <std::integral I>
  constexpr explicit generator(I seed) {
    reseed(static_cast<std::uint64_t>(seed));
  }

  /// torch.manual_seed(seed): the engine gets the low 32 bits; both normal caches are cleared
  template <std::integral I>
  constexpr void manual_seed(I seed) {
    reseed(static_cast<std::uint64_t>(seed));  // two's complement for negative seeds
  }

  /// torch.initial_seed(): the 64-bit seed as given (as unsigned)
  [[nodiscard]] constexpr std::uint64_t initial_seed() const { return seed_; }

  /// how many 32-bit draws the engine made since the last manual_seed
  [[nodiscard]] constexpr std::uint64_t draws() const { return draws_; }

  /// the Box-Muller sample cached by the element-wise normal path, if any
  [[nodiscard]] constexpr std::optional<double> next_double_normal_sample() const {
    return has_cached_normal_ ? std::optional<double>(cached_normal_) : std::nullopt;
  }

  /// one 32-bit draw (CPUGeneratorImpl::random)
  [[nodiscard]] constexpr std::uint32_t random() {
    ++draws_;
    return engine_();
  }

  /// two draws, the first as the high word (CPUGeneratorImpl::random64)
  [[nodiscard]] constexpr std::uint64_t random64() {
    const std::uint64_t hi = random();
    const std::uint64_t lo = random();
    return (hi << 32) | lo;
  }

  /// skip n 32-bit draws
  constexpr void discard(std::uint64_t n) {
    for (; n > 0; --n) (void)random();
  }

  // -----------------------------------------------------------------------------------------
  // filling memory in order (what PyTorch's kernels do for a contiguous tensor)

  /// Tensor.uniform_(from, to) on a contiguous tensor: one draw per float, two per double.
  /// from and to are rounded to T first, as the kernel does. Throws when from > to.
  template <dtype T>
  constexpr void uniform_(std::span<T> out, double from = 0.0, double to = 1.0) {
    if (!(from <= to)) ::qkv::detail::fail<std::invalid_argument>("uniform_ expects from <= to");
    const T lo = static_cast<T>(from), hi = static_cast<T>(to);
    for (T& x : out) x = detail::scale_uniform(next_unit<T>(), lo, hi);
  }

  /// Tensor.normal_(mean, std) on a contiguous tensor: 16-element blocks when there are at least
  /// 16 elements, otherwise the element-wise path (which reads and refills the cached sample).
  template <dtype T>
  constexpr void normal_(std::span<T> out, double mean = 0.0, double std = 1.0) {
    if (!(std >= 0.0)) ::qkv::detail::fail<std::invalid_argument>("normal_ expects std >= 0");
    if (out.size() < 16) return normal_elementwise_(out, mean, std);
    const T m = static_cast<T>(mean), s = static_cast<T>(std);
    const std::size_t n = out.size();
    // pass 1: n uniforms, all drawn before any transform
    for (T& x : out) x = next_unit<T>();
    // pass 2: the full blocks
    if (!blocks_with_fma(out.data(), n, m, s))
      for (std::size_t i = 0; i + 16 <= n; i += 16) detail::normal_block(out.data() + i, m, s);
    // pass 3, the tail rule: 16 fresh uniforms into the last 16 slots, done again as one block
    if (n % 16 != 0) {
      T* tail = out.data() + (n - 16);
      for (std::size_t j = 0; j < 16; ++j) tail[j] = next_unit<T>();
      detail::normal_block(tail, m, s);
    }
  }

  /// the element-wise normal path (normal_distribution<double>): what PyTorch uses for fewer
  /// than 16 elements and for non-contiguous tensors (in their memory order). Double precision
  /// throughout, the result rounded to T; every other sample comes from the cache.
  template <dtype T>
  constexpr void normal_elementwise_(std::span<T> out, double mean = 0.0, double std = 1.0) {
    if (!(std >= 0.0)) ::qkv::detail::fail<std::invalid_argument>("normal_ expects std >= 0");
    for (T& x : out) x = static_cast<T>(next_normal_double(mean, std));
  }

  // -----------------------------------------------------------------------------------------
  // tensors with shapes as template arguments: a 1-d tensor is a (1, N) row vector, a 2-d one a
  // matrix, a 3-d one a qkv::stack; elements are drawn in row-major order

  /// torch.rand(N)
  template <dtype T, std::size_t N>
  [[nodiscard]] constexpr matrix<T, 1, N> rand() {
    return uniform<T, N>(0.0, 1.0);
  }
  /// torch.rand(R, C)
  template <dtype T, std::size_t R, std::size_t C>
  [[nodiscard]] constexpr matrix<T, R, C> rand() {
    return uniform<T, R, C>(0.0, 1.0);
  }
  /// torch.rand(N, R, C)
  template <dtype T, std::size_t N, std::size_t R, std::size_t C>
  [[nodiscard]] constexpr stack<T, N, R, C> rand() {
    return uniform<T, N, R, C>(0.0, 1.0);
  }

  /// torch.empty(N).uniform_(from, to)
  template <dtype T, std::size_t N>
  [[nodiscard]] constexpr matrix<T, 1, N> uniform(double from, double to) {
    matrix<T, 1, N> out;
    uniform_(std::span<T>(out.v), from, to);
    return out;
  }
  /// torch.empty(R, C).uniform_(from, to)
  template <dtype T, std::size_t R, std::size_t C>
  [[nodiscard]] constexpr matrix<T, R, C> uniform(double from, double to) {
    matrix<T, R, C> out;
    uniform_(std::span<T>(out.v), from, to);
    return out;
  }
  /// torch.empty(N, R, C).uniform_(from, to)
  template <dtype T, std::size_t N, std::size_t R, std::size_t C>
  [[nodiscard]] constexpr stack<T, N, R, C> uniform(double from, double to) {
    return split<N>(uniform<T, N * R, C>(from, to));
  }

  /// torch.randn(N)
  template <dtype T, std::size_t N>
  [[nodiscard]] constexpr matrix<T, 1, N> randn() {
    return normal<T, N>(0.0, 1.0);
  }
  /// torch.randn(R, C)
  template <dtype T, std::size_t R, std::size_t C>
  [[nodiscard]] constexpr matrix<T, R, C> randn() {
    return normal<T, R, C>(0.0, 1.0);
  }
  /// torch.randn(N, R, C): one tensor of N R C elements (the blocks run over all of it)
  template <dtype T, std::size_t N, std::size_t R, std::size_t C>
  [[nodiscard]] constexpr stack<T, N, R, C> randn() {
    return normal<T, N, R, C>(0.0, 1.0);
  }

  /// torch.empty(N).normal_(mean, std)
  template <dtype T, std::size_t N>
  [[nodiscard]] constexpr matrix<T, 1, N> normal(double mean, double std) {
    matrix<T, 1, N> out;
    normal_(std::span<T>(out.v), mean, std);
    return out;
  }
  /// torch.empty(R, C).normal_(mean, std)
  template <dtype T, std::size_t R, std::size_t C>
  [[nodiscard]] constexpr matrix<T, R, C> normal(double mean, double std) {
    matrix<T, R, C> out;
    normal_(std::span<T>(out.v), mean, std);
    return out;
  }
  /// torch.empty(N, R, C).normal_(mean, std)
  template <dtype T, std::size_t N, std::size_t R, std::size_t C>
  [[nodiscard]] constexpr stack<T, N, R, C> normal(double mean, double std) {
    return split<N>(normal<T, N * R, C>(mean, std));
  }

  // -----------------------------------------------------------------------------------------
  // initialisers (torch/nn/init.py), on memory and on shaped tensors

  /// nn.init.kaiming_uniform_(w, a) for a weight whose fan_in (size(1) times the receptive field)
  /// is fan_in: uniform_(-bound, bound) with kaiming_uniform_bound (mode fan_in, leaky_relu)
  template <dtype T>
  constexpr void kaiming_uniform_(std::span<T> w, std::size_t fan_in, double a) {
    const double bound = detail::kaiming_uniform_bound(fan_in, a);
    uniform_(w, -bound, bound);
  }

  /// nn.init.xavier_uniform_(w, gain) for a (fan_out, fan_in) weight
  template <dtype T>
  constexpr void xavier_uniform_(std::span<T> w, std::size_t fan_in, std::size_t fan_out, double gain = 1.0) {
    const double bound = detail::xavier_uniform_bound(fan_in, fan_out, gain);
    uniform_(w, -bound, bound);
  }

  /// nn.Linear(in, out)'s reset_parameters on memory: weight (out, in) = kaiming_uniform_ with
  /// a = sqrt(5), then (if bias is not empty) bias = uniform_(-1/sqrt(in), 1/sqrt(in))
  template <dtype T>
  constexpr void linear_(std::span<T> weight, std::span<T> bias, std::size_t in) {
    kaiming_uniform_(weight, in, detail::exact_sqrt(5.0));
    if (!bias.empty()) {
      const double bound = in > 0 ? 1.0 / detail::exact_sqrt(static_cast<double>(in)) : 0.0;
      uniform_(bias, -bound, bound);
    }
  }

  /// nn.Linear(In, Out) (or bias=False with bias::none): Out In weight draws, then Out bias draws
  template <dtype T, std::size_t In, std::size_t Out>
  [[nodiscard]] constexpr linear_parameters<T, In, Out> linear(bias b = bias::with) {
    linear_parameters<T, In, Out> p;
    p.has_bias = b == bias::with;
    linear_(std::span<T>(p.weight.v), p.has_bias ? std::span<T>(p.bias.v) : std::span<T>(), In);
    return p;
  }

  /// nn.Embedding(Num, Dim): weight (Num, Dim) = normal_(0, 1)
  template <dtype T, std::size_t Num, std::size_t Dim>
  [[nodiscard]] constexpr matrix<T, Num, Dim> embedding() {
    return normal<T, Num, Dim>(0.0, 1.0);
  }

  /// nn.Embedding(Num, Dim, padding_idx): the same draws, then row padding_idx set to zero.
  /// A negative padding_idx counts from the end, as in PyTorch; out of range throws.
  template <dtype T, std::size_t Num, std::size_t Dim>
  [[nodiscard]] constexpr matrix<T, Num, Dim> embedding(std::ptrdiff_t padding_idx) {
    const std::size_t row = padding_row(padding_idx, Num);
    matrix<T, Num, Dim> w = normal<T, Num, Dim>(0.0, 1.0);
    for (std::size_t j = 0; j < Dim; ++j) w.v[row * Dim + j] = T(0);
    return w;
  }

  /// nn.init.xavier_uniform_(torch.empty(R, C), gain): fan_in C, fan_out R
  template <dtype T, std::size_t R, std::size_t C>
  [[nodiscard]] constexpr matrix<T, R, C> xavier_uniform(double gain = 1.0) {
    matrix<T, R, C> w;
    xavier_uniform_(std::span<T>(w.v), C, R, gain);
    return w;
  }

  /// nn.MultiheadAttention(E, H)'s initialisation, in its draw order: __init__ builds out_proj =
  /// Linear(E, E) (E^2 weight draws, then E bias draws), then _reset_parameters runs
  /// xavier_uniform_(in_proj_weight) (3E^2 draws) and sets in_proj_bias and out_proj.bias to 0
  /// (the E bias draws happened anyway). 4E^2 + E draws in all. H only has to divide E.
  template <dtype T, std::size_t E, std::size_t H>
    requires(H > 0 && E % H == 0)
  [[nodiscard]] constexpr multihead_attention_parameters<T, E> multihead_attention() {
    multihead_attention_parameters<T, E> p;
    linear_(std::span<T>(p.out_proj_weight.v), std::span<T>(p.out_proj_bias.v), E);
    xavier_uniform_(std::span<T>(p.in_proj_weight.v), E, 3 * E);
    p.in_proj_bias = matrix<T, 1, 3 * E>{};
    p.out_proj_bias = matrix<T, 1, E>{};
    return p;
  }

  /// the row an nn.Embedding padding_idx names (negative counts from the end); throws if invalid
  [[nodiscard]] static constexpr std::size_t padding_row(std::ptrdiff_t padding_idx, std::size_t num) {
    const auto n = static_cast<std::ptrdiff_t>(num);
    if (padding_idx >= n || padding_idx < -n)
      ::qkv::detail::fail<std::out_of_range>("padding_idx must be within num_embeddings");
    return static_cast<std::size_t>(padding_idx < 0 ? padding_idx + n : padding_idx);
  }

 private:
  constexpr void reseed(std::uint64_t seed) {
    seed_ = seed;
    engine_.seed(static_cast<std::uint32_t>(seed & 0xffffffffu));
    has_cached_normal_ = false;
    cached_normal_ = 0.0;
    draws_ = 0;
  }

  // the full float32 blocks through detail::normal_blocks_with_fma, when that exists and the CPU
  // can; false: do them the portable way
  template <dtype T>
  [[nodiscard]] static constexpr bool blocks_with_fma([[maybe_unused]] T* d, [[maybe_unused]] std::size_t n,
                                                      [[maybe_unused]] T mean, [[maybe_unused]] T std) {
#ifdef QKV_TORCH_FMA_DISPATCH
    if constexpr (std::same_as<T, float>) {
      if (!std::is_constant_evaluated() && detail::cpu_has_fma()) {
        detail::normal_blocks_with_fma(d, n, mean, std);
        return true;
      }
    }
#endif
    return false;
  }

  template <dtype T>
  [[nodiscard]] constexpr T next_unit() {
    if constexpr (std::same_as<T, float>)
      return detail::unit_float(random());
    else
      return detail::unit_double(random64());
  }

  // normal_distribution<double>::operator() (DistributionsHelper.h): the cached sample first;
  // otherwise u1 (the angle) and u2 (the radius), two 64-bit draws each, the opposite roles of
  // the blocks; r sin(theta) is cached, r cos(theta) returned. val * std + mean is fused.
  [[nodiscard]] constexpr double next_normal_double(double mean, double std) {
    if (has_cached_normal_) {
      has_cached_normal_ = false;
      return detail::scale_normal(cached_normal_, mean, std);
    }
    const double u1 = detail::unit_double(random64());
    const double u2 = detail::unit_double(random64());
    const double r = detail::exact_sqrt(-2.0 * qkv::log(1.0 - u2));
    const double theta = 2.0 * detail::pi * u1;
    cached_normal_ = r * qkv::sin(theta);
    has_cached_normal_ = true;
    return detail::scale_normal(r * qkv::cos(theta), mean, std);
  }

  // (N R, C) drawn as one tensor -> N matrices of (R, C)
  template <std::size_t N, class T, std::size_t NR, std::size_t C>
  [[nodiscard]] static constexpr stack<T, N, NR / N, C> split(const matrix<T, NR, C>& flat) {
    constexpr std::size_t R = NR / N;
    stack<T, N, R, C> out;
    for (std::size_t n = 0; n < N; ++n)
      for (std::size_t k = 0; k < R * C; ++k) out.m[n].v[k] = flat.v[n * R * C + k];
    return out;
  }

  detail::mt19937 engine_{};
  std::uint64_t seed_ = 0;
  std::uint64_t draws_ = 0;
  bool has_cached_normal_ = false;  // CPUGeneratorImpl's next_double_normal_sample
  double cached_normal_ = 0.0;
};

/// nn.Embedding's forward: the rows of weight named by ids, in order: (Num, Dim) -> (T, Dim)
template <class T, std::size_t Num, std::size_t Dim, class Id, std::size_t Tokens>
[[nodiscard]] constexpr matrix<T, Tokens, Dim> embedding_lookup(const matrix<T, Num, Dim>& weight,
                                                                const std::array<Id, Tokens>& ids) {
  matrix<T, Tokens, Dim> out;
  for (std::size_t t = 0; t < Tokens; ++t) {
    const auto id = static_cast<std::size_t>(ids[t]);
    if (id >= Num) ::qkv::detail::fail<std::out_of_range>("embedding index out of range");
    for (std::size_t j = 0; j < Dim; ++j) out.v[t * Dim + j] = weight.v[id * Dim + j];
  }
  return out;
}

}  // namespace qkv::torch
