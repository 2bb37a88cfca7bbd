// decode.hpp: decode_attend, the one-token fast path of attention against a KV cache
// (kv_cache.hpp): a decoding step, bound by reading the cache once.
//
//   q: (1, H * d_key), the new token's queries; out: (1, H * d_value)
//   per key/value head g (H_kv of them; a task each), its G = H / H_kv query heads h:
//     s_h[j] = scale q_h . k_j (+ ALiBi m_h (j - p))   j = first .. p   (K_g read once for the G heads)
//     w_h[j] = e^(s_h[j] - max_j s_h)                  l_h = sum_j w_h[j]
//     out_h  = (sum_j w_h[j] v_j) / l_h                (V_g read once for the G heads)
// The cost is reading K_g and V_g (H_kv x S x (d_key + d_value) x sizeof(storage) bytes), so the
// loops are arranged to keep the memory stream busy (docs/performance.md, "W6_decode"):
// - the keys come in blocks of 16; a key's dot products are lane-wise fma chains over d_key, and
//   with AVX-512 the lane vectors of 16 dot products are summed together by a transpose-and-add
//   tree (45 instructions for 16, where a horizontal sum each costs about 8); other targets sum
//   each key's lanes (horizontal_sum);
// - AVX-512, float and bfloat16 storage, d_key and d_value multiples of 32 (decode_score_group,
//   decode_value_pairs): a row is read 32 values at a time as two float vectors (load_pair; a
//   bfloat16 row as its even and its odd values: one load, a shift and a mask), q is permuted
//   once into the same order, and the output columns are put back in order at the end; the
//   score pass takes 16 / G' keys at a time for G' <= 4 query heads, so each loaded query
//   vector serves 4 keys (G' = 4) and the G' x 16 / G' dot products go through one tree;
// - the values come in blocks of 32 keys; the output accumulators of up to 4 query heads x 64
//   columns stay in registers over a block (the block is re-read from L1 for the next columns);
// - each pass reads two key ranges side by side (the first and the second half of the blocks:
//   two sequential streams, which this machine's cores read faster than one); the value pass
//   sums each range into its own accumulators and adds the two at the end;
// - the rows ahead of each stream are prefetched (float 1 KiB ahead, 16-bit 2 KiB: measured;
//   the hardware's stream prefetcher stops at each 4 KiB page); the AVX-512 kernels issue the
//   prefetches between their loads, one line per line read, the others a block at a time.
// Bits: the summation order is fixed by the number of keys n, d_key, d_value and the simd width
// only (not by the number of threads): where a key's dot product sits in the tree depends on its
// place in its block of 16, which depends on n only; the output sums the keys of each range in
// order, one fma a key, then the two ranges. So the result is identical for any thread count; it
// is not identical to attend's (another order), and it is within the bound of docs/numerics.md
// ("KV cache"): a dot product's depth is d_key / 16 + 4 <= d_key, the output's at most n + 1.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels.hpp"
#include "kv_cache.hpp"

namespace qkv::runtime {

namespace detail {

/// W elements of a cache row as floats (bfloat16: the bits shifted into a float's top half;
/// float16: converted element by element, not vectorised)
template <storage_type S>
[[nodiscard]] inline simd<float> load_floats(const S* p) {
  using V = simd<float>;
  if constexpr (std::is_same_v<S, float>) {
    return V(p, stdx::element_aligned);
  } else if constexpr (std::is_same_v<S, bfloat16>) {
#if defined(__AVX512F__)
    // 16 halves zero-extended to 32 bits, shifted up (the maskz forms with every lane set: the
    // plain ones pass _mm512_undefined_*, which g++ 12 reports as uninitialised under -Werror)
    if constexpr (lanes<float> == 16) {
      constexpr __mmask16 all = 0xFFFF;
      return V(_mm512_castsi512_ps(_mm512_maskz_slli_epi32(
          all, _mm512_maskz_cvtepu16_epi32(all, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))),
          16)));
    }
#endif
#if defined(__AVX2__)
    if constexpr (lanes<float> == 8)
      return V(_mm256_castsi256_ps(_mm256_slli_epi32(
          _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16)));
#endif
    using U16 = stdx::rebind_simd_t<std::uint16_t, V>;
    using U32 = stdx::rebind_simd_t<std::uint32_t, V>;
    static_assert(sizeof(bfloat16) == sizeof(std::uint16_t));
    std::uint16_t bits[lanes<float>];
    std::memcpy(bits, p, sizeof bits);  // the compiler folds this into the load
    const U32 wide = stdx::static_simd_cast<U32>(U16(bits, stdx::element_aligned)) << 16;
    return stdx::__proposed::simd_bit_cast<V>(wide);
  } else {
    alignas(alignment) float f[lanes<float>];
    to_float(p, f, lanes<float>);
    return V(f, stdx::vector_aligned);
  }
}

/// asks for the cache line at p ahead of its use (a hint; nothing on compilers without it)
inline void prefetch_line([[maybe_unused]] const void* p) {
#if defined(__GNUC__)
  __builtin_prefetch(p, 0, 3);
#endif
}

/// the bytes [from, to) of a region of `size` bytes at base, prefetched line by line (the part
/// inside the region)
inline void prefetch_bytes(const void* base, std::size_t size, std::size_t from, std::size_t to) {
  to = std::min(to, size);
  for (std::size_t x = from; x < to; x += 64) prefetch_line(static_cast<const char*>(base) + x);
}

/// key ranges read side by side (each pass reads R streams: a core reads more from several
/// sequential streams than from one, docs/performance.md)
inline constexpr std::size_t decode_streams = 2;
/// how far ahead of the rows in use the prefetches run, in bytes (measured, docs/performance.md
/// "W6_decode": float rows 1 KiB ahead, 16-bit rows 2 KiB)
template <storage_type S>
inline constexpr std::size_t decode_prefetch_distance = sizeof(S) == 4 ? 1024 : 2048;
/// keys per block of the score pass (one zmm of scores) and of the value pass
inline constexpr std::size_t score_block_keys = 16, value_block_keys = 32;

/// per-thread space of decode_attend: scores (group x keys) and output accumulators
struct decode_space {
  aligned_vector<float> scores, acc, sums, qp, o;
  static decode_space& get() {
    thread_local decode_space s;
    return s;
  }
};

#if defined(__AVX512F__)
/// lane j of the result = the sum of the 16 lanes of x[j] (a transpose-and-add tree: pairs of
/// vectors interleaved and added, within 128-bit lanes, then the 128-bit lanes themselves).
/// Each result lane depends on its own vector only, in a fixed order.
inline __m512 sum_lanes16(const __m512* x) {
  constexpr __mmask16 all = 0xFFFF;  // maskz with every lane: see load_floats
  constexpr __mmask8 all8 = 0xFF;
  __m512 a[8], b[4], c[2];
  for (int i = 0; i < 8; ++i)  // per 128-bit lane: x0 x1 pairs (0+2, 1+3)
    a[i] = _mm512_add_ps(_mm512_maskz_unpacklo_ps(all, x[2 * i], x[2 * i + 1]),
                         _mm512_maskz_unpackhi_ps(all, x[2 * i], x[2 * i + 1]));
  for (int i = 0; i < 4; ++i) {  // per 128-bit lane: the 4 vectors' 128-bit partial sums
    const __m512d lo =
        _mm512_maskz_unpacklo_pd(all8, _mm512_castps_pd(a[2 * i]), _mm512_castps_pd(a[2 * i + 1]));
    const __m512d hi =
        _mm512_maskz_unpackhi_pd(all8, _mm512_castps_pd(a[2 * i]), _mm512_castps_pd(a[2 * i + 1]));
    b[i] = _mm512_add_ps(_mm512_castpd_ps(lo), _mm512_castpd_ps(hi));
  }
  for (int i = 0; i < 2; ++i)  // 128-bit lanes 0+1 and 2+3 of two vectors
    c[i] = _mm512_add_ps(_mm512_maskz_shuffle_f32x4(all, b[2 * i], b[2 * i + 1], 0x88),
                         _mm512_maskz_shuffle_f32x4(all, b[2 * i], b[2 * i + 1], 0xDD));
  return _mm512_add_ps(_mm512_maskz_shuffle_f32x4(all, c[0], c[1], 0x88),
                       _mm512_maskz_shuffle_f32x4(all, c[0], c[1], 0xDD));
}
#endif

/// N query heads (rows of q, d_key apart) against nk <= 16 keys (rows of k, row_stride apart):
/// scores[t * stride + jj] = scale * (q_t . k_jj), each key row read once for the N heads
template <std::size_t N, storage_type S>
void decode_score_block(const float* q, const S* k, std::size_t row_stride, std::size_t dk, std::size_t nk,
                        float scale, float* scores, std::size_t stride) {
  using V = simd<float>;
  constexpr std::size_t W = lanes<float>;
  alignas(alignment) float tile[N][score_block_keys][W];
  for (std::size_t jj = 0; jj < nk; ++jj) {
    const S* krow = k + jj * row_stride;
    V acc[N];
    for (std::size_t t = 0; t < N; ++t) acc[t] = V(0.0f);
    for (std::size_t c = 0; c < dk; c += W) {
      const V kv = load_floats(krow + c);
      for (std::size_t t = 0; t < N; ++t)
        acc[t] = fmadd(V(q + t * dk + c, stdx::element_aligned), kv, acc[t]);
    }
    for (std::size_t t = 0; t < N; ++t) acc[t].copy_to(tile[t][jj], stdx::vector_aligned);
  }
#if defined(__AVX512F__)
  if constexpr (W == 16) {
    for (std::size_t t = 0; t < N; ++t) {
      for (std::size_t jj = nk; jj < score_block_keys; ++jj) std::fill_n(tile[t][jj], W, 0.0f);
      __m512 x[16];
      for (std::size_t jj = 0; jj < 16; ++jj) x[jj] = _mm512_load_ps(tile[t][jj]);
      const V s = V(sum_lanes16(x)) * V(scale);
      alignas(alignment) float out[16];
      s.copy_to(out, stdx::vector_aligned);
      std::copy_n(out, nk, scores + t * stride);
    }
    return;
  }
#endif
  for (std::size_t t = 0; t < N; ++t)
    for (std::size_t jj = 0; jj < nk; ++jj)
      scores[t * stride + jj] = horizontal_sum(V(tile[t][jj], stdx::vector_aligned)) * scale;
}

/// out columns c0 .. c0 + NC W of N query heads: acc[t * dv + c] += sum_jj w[t * stride + jj] v_jj[c],
/// the keys in order, one fma each; the NC x N accumulators stay in registers over the nk keys
template <std::size_t N, std::size_t NC, storage_type S>
void decode_value_block(const float* w, std::size_t stride, const S* v, std::size_t row_stride,
                        std::size_t nk, float* acc, std::size_t dv, std::size_t c0) {
  using V = simd<float>;
  constexpr std::size_t W = lanes<float>;
  V a[N][NC];
  for (std::size_t t = 0; t < N; ++t)
    for (std::size_t x = 0; x < NC; ++x) a[t][x] = V(acc + t * dv + c0 + x * W, stdx::element_aligned);
  for (std::size_t jj = 0; jj < nk; ++jj) {
    V r[NC];
    for (std::size_t x = 0; x < NC; ++x) r[x] = load_floats(v + jj * row_stride + c0 + x * W);
    for (std::size_t t = 0; t < N; ++t) {
      const V p(w[t * stride + jj]);
      for (std::size_t x = 0; x < NC; ++x) a[t][x] = fmadd(p, r[x], a[t][x]);
    }
  }
  for (std::size_t t = 0; t < N; ++t)
    for (std::size_t x = 0; x < NC; ++x) a[t][x].copy_to(acc + t * dv + c0 + x * W, stdx::element_aligned);
}

#if defined(__AVX512F__)
/// the AVX-512 kernels of float and bfloat16 storage (d_key and d_value multiples of 32): a row
/// is read 32 values at a time as two float vectors (load_pair), q is read in the same order
template <storage_type S>
inline constexpr bool has_pair_kernels = std::is_same_v<S, float> || std::is_same_v<S, bfloat16>;

/// the 32 values at p as two float vectors: float, p[0..16) and p[16..32); bfloat16, the even
/// values p[0], p[2], .. p[30] and the odd ones, from one load, a shift and a mask (a bfloat16
/// is the top half of a float; maskz forms with every lane: see load_floats)
template <storage_type S>
inline void load_pair(const S* p, __m512& a, __m512& b) {
  if constexpr (std::is_same_v<S, float>) {
    a = _mm512_loadu_ps(p);
    b = _mm512_loadu_ps(p + 16);
  } else {
    constexpr __mmask16 all = 0xFFFF;
    const __m512i x = _mm512_loadu_si512(p);
    a = _mm512_castsi512_ps(_mm512_maskz_slli_epi32(all, x, 16));
    b = _mm512_castsi512_ps(_mm512_maskz_and_epi32(all, x, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
  }
}

/// the column that position i of load_pair's order holds (float: i; bfloat16: within each 32,
/// the 16 even columns, then the 16 odd ones)
template <storage_type S>
[[nodiscard]] inline std::size_t pair_column(std::size_t i) {
  if constexpr (std::is_same_v<S, float>) {
    return i;
  } else {
    const std::size_t r = i % 32;
    return i - r + (r < 16 ? 2 * r : 2 * (r - 16) + 1);
  }
}

/// N query heads (q: load_pair's order, rows d_key apart) against nk <= 16 / N keys (rows of k,
/// row_stride apart): scores[t * stride + kk] = scale * (q_t . k_kk). Each loaded query vector
/// serves the 16 / N keys, each loaded key vector the N heads; a dot product is a lane-wise fma
/// chain over d_key (d_key / 16 steps), then the N x (16 / N) chains' lanes are summed by one
/// tree (sum_lanes16). Keys past nk read the last key again; their sums are not stored.
template <std::size_t N, storage_type S>
void decode_score_group(const float* q, const S* k, std::size_t row_stride, std::size_t dk, std::size_t nk,
                        float scale, float* scores, std::size_t stride, const char* pf) {
  constexpr std::size_t KK = 16 / N;
  const S* row[KK];
  for (std::size_t kk = 0; kk < KK; ++kk) row[kk] = k + std::min(kk, nk - 1) * row_stride;
  __m512 acc[N][KK];
  for (std::size_t t = 0; t < N; ++t)
    for (std::size_t kk = 0; kk < KK; ++kk) acc[t][kk] = _mm512_setzero_ps();
  for (std::size_t c = 0; c < dk; c += 32) {
    __m512 qa[N], qb[N];
    for (std::size_t t = 0; t < N; ++t) {
      qa[t] = _mm512_loadu_ps(q + t * dk + c);
      qb[t] = _mm512_loadu_ps(q + t * dk + c + 16);
    }
    for (std::size_t kk = 0; kk < KK; ++kk) {
      __m512 ka, kb;
      if (pf)
        for (std::size_t b = 0; b < 32 * sizeof(S); b += 64)
          prefetch_line(pf + (kk * row_stride + c) * sizeof(S) + b);
      load_pair(row[kk] + c, ka, kb);
      for (std::size_t t = 0; t < N; ++t) {
        acc[t][kk] = _mm512_fmadd_ps(qa[t], ka, acc[t][kk]);
        acc[t][kk] = _mm512_fmadd_ps(qb[t], kb, acc[t][kk]);
      }
    }
  }
  __m512 x[16];
  for (std::size_t i = 0; i < 16; ++i) x[i] = _mm512_setzero_ps();
  for (std::size_t t = 0; t < N; ++t)
    for (std::size_t kk = 0; kk < KK; ++kk) x[t * KK + kk] = acc[t][kk];
  // lane t * KK + kk holds head t's key kk: lanes t * KK .. moved to 0 .., the nk stored
  constexpr __mmask16 all = 0xFFFF;
  const __m512 s = _mm512_mul_ps(sum_lanes16(x), _mm512_set1_ps(scale));
  const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const auto keys = static_cast<__mmask16>((1u << nk) - 1);
  for (std::size_t t = 0; t < N; ++t)
    _mm512_mask_storeu_ps(
        scores + t * stride, keys,
        _mm512_maskz_permutexvar_ps(all, _mm512_add_epi32(lane, _mm512_set1_epi32(int(t * KK))), s));
}

/// out positions c0 .. c0 + 32 NP (load_pair's order) of N query heads: acc[t * dv + c] +=
/// sum_jj w[t * stride + jj] v_jj[c], the keys in order, one fma each; the N x 2 NP
/// accumulators stay in registers over the nk keys
template <std::size_t N, std::size_t NP, storage_type S>
void decode_value_pairs(const float* w, std::size_t stride, const S* v, std::size_t row_stride,
                        std::size_t nk, float* acc, std::size_t dv, std::size_t c0, const char* pf) {
  __m512 a[N][2 * NP];
  for (std::size_t t = 0; t < N; ++t)
    for (std::size_t x = 0; x < 2 * NP; ++x) a[t][x] = _mm512_loadu_ps(acc + t * dv + c0 + x * 16);
  for (std::size_t jj = 0; jj < nk; ++jj) {
    __m512 r[2 * NP];
    if (pf)
      for (std::size_t b = 0; b < dv * sizeof(S); b += 64)
        prefetch_line(pf + jj * row_stride * sizeof(S) + b);
    for (std::size_t x = 0; x < NP; ++x) load_pair(v + jj * row_stride + c0 + x * 32, r[2 * x], r[2 * x + 1]);
    for (std::size_t t = 0; t < N; ++t) {
      const __m512 p = _mm512_set1_ps(w[t * stride + jj]);
      for (std::size_t x = 0; x < 2 * NP; ++x) a[t][x] = _mm512_fmadd_ps(p, r[x], a[t][x]);
    }
  }
  for (std::size_t t = 0; t < N; ++t)
    for (std::size_t x = 0; x < 2 * NP; ++x) _mm512_storeu_ps(acc + t * dv + c0 + x * 16, a[t][x]);
}
#else
template <storage_type S>
inline constexpr bool has_pair_kernels = false;
// declared only, for the name lookup of decode_attend: every use sits under
// `if constexpr (has_pair_kernels<S>)`, so none is instantiated without AVX-512
template <storage_type S>
std::size_t pair_column(std::size_t i);
template <std::size_t N, storage_type S>
void decode_score_group(const float* q, const S* k, std::size_t row_stride, std::size_t dk, std::size_t nk,
                        float scale, float* scores, std::size_t stride, const char* pf);
template <std::size_t N, std::size_t NP, storage_type S>
void decode_value_pairs(const float* w, std::size_t stride, const S* v, std::size_t row_stride,
                        std::size_t nk, float* acc, std::size_t dv, std::size_t c0, const char* pf);
#endif

}  // namespace detail

/// @brief the fast path of one new token (q: (1, H * d_key)) against the cache: each key and
/// value row is read once per key/value head (shared by its H / H_kv query heads), 16-bit rows
/// converted in registers. Same mask and options as attend (causal lower_right, window, ALiBi)
/// and the same NaN/inf policy (a head whose output is not all finite is recomputed by attend).
/// Not bit-identical to attend (another summation order: see the header); identical for any
/// number of threads; within the bound of any summation order (docs/numerics.md, "KV cache";
/// tests/runtime/decoder_torch_test.cpp). Needs d_key and d_value multiples of the simd width;
/// otherwise, and for T > 1, it calls attend.
template <storage_type S>
void decode_attend(const kv_cache<S>& cache, std::size_t layer, matrix_view<const float> q,
                   matrix_view<float> out, const cache_attention_options& opt,
                   const std::vector<double>& slopes = {}, thread_pool* pool = &default_pool());

namespace detail {

/// libqkv_kernels' decode_attend for each storage type (kernels.hpp's table points here)
struct decode_kernels {
  template <storage_type S>
  using fn = void (*)(const kv_cache<S>& cache, std::size_t layer, const matrix_view<const float>& q,
                      const matrix_view<float>& out, const cache_attention_options& opt,
                      const std::vector<double>& slopes, thread_pool* pool);
  fn<float> f32;
  fn<bfloat16> bf16;
  fn<float16> f16;
};

}  // namespace detail

template <storage_type S>
void decode_attend(const kv_cache<S>& cache, std::size_t layer, matrix_view<const float> q,
                   matrix_view<float> out, const cache_attention_options& opt,
                   const std::vector<double>& slopes, thread_pool* pool) {
  if constexpr (detail::forwards_storage<S>) {  // libqkv_kernels (kernels.hpp)
    const detail::decode_kernels& d = *detail::kernels().decode;
    if constexpr (std::is_same_v<S, float>)
      d.f32(cache, layer, q, out, opt, slopes, pool);
    else if constexpr (std::is_same_v<S, bfloat16>)
      d.bf16(cache, layer, q, out, opt, slopes, pool);
    else
      d.f16(cache, layer, q, out, opt, slopes, pool);
    return;
  }
  using V = simd<float>;
  constexpr std::size_t W = lanes<float>;
  const std::size_t H = opt.heads, HK = cache.kv_heads(), dk = cache.d_key(), dv = cache.d_value();
  const std::size_t S_len = cache.length(layer);
  if (q.rows != 1 || dk % W != 0 || dv % W != 0 || q.col_stride != 1 || out.col_stride != 1 || S_len == 0 ||
      H == 0 || H % HK != 0 || q.cols != H * dk || out.cols != H * dv || out.rows != 1 ||
      (opt.alibi && slopes.size() != H))
    return attend(cache, layer, q, out, opt, slopes, pool);  // its checks and messages
  const float scale = opt.scale ? *opt.scale : default_scale<float>(dk);
  const std::size_t group = H / HK;
  const std::size_t first = opt.window && opt.window < S_len ? S_len - opt.window : 0, n = S_len - first;
  const std::size_t p = S_len - 1;  // the new token's position
  auto run = [&](std::size_t g) {
    auto& space = detail::decode_space::get();
    const std::size_t stride = (n + W - 1) / W * W;
    space.scores.resize(group * stride);
    space.acc.resize(detail::decode_streams * group * dv);
    space.sums.resize(group);
    float* sc = space.scores.data();
    float* acc = space.acc.data();
    float* l = space.sums.data();
    const auto k = cache.keys(layer, g), v = cache.values(layer, g);
    const S* k0 = k.data + first * k.row_stride;
    const S* v0 = v.data + first * v.row_stride;
    const std::size_t kbytes = n * k.row_stride * sizeof(S), vbytes = n * v.row_stride * sizeof(S);
    const std::size_t krow = k.row_stride * sizeof(S), vrow = v.row_stride * sizeof(S);
    const float* qg = q.data + g * group * dk;
    constexpr std::size_t R = detail::decode_streams;
    // the AVX-512 kernels (float and bfloat16 storage): q in load_pair's order
    bool pairs = false;
    if constexpr (detail::has_pair_kernels<S>) {
      pairs = dk % 32 == 0 && dv % 32 == 0;
      if (pairs) {
        space.qp.resize(group * dk);
        for (std::size_t t = 0; t < group; ++t)
          for (std::size_t i = 0; i < dk; ++i) space.qp[t * dk + i] = qg[t * dk + detail::pair_column<S>(i)];
      }
    }
    // scores: K read once, 16 keys a block, the R key ranges' blocks in turn (R streams)
    const std::size_t kb = (n + detail::score_block_keys - 1) / detail::score_block_keys,
                      kper = (kb + R - 1) / R;
    for (std::size_t b = 0; b < kper; ++b)
      for (std::size_t r = 0; r < R; ++r) {
        const std::size_t blk = r * kper + b;
        if (blk >= kb) break;
        const std::size_t j = blk * detail::score_block_keys, nk = std::min(detail::score_block_keys, n - j);
        const std::size_t from = j * krow + detail::decode_prefetch_distance<S>, to = from + nk * krow;
        if (!pairs) detail::prefetch_bytes(k0, kbytes, from, to);
        for (std::size_t h0 = 0; h0 < group; h0 += 4)
          detail::with_count<4>(std::min<std::size_t>(4, group - h0), [&](auto count) {
            constexpr std::size_t N = decltype(count)::value;
            if constexpr (detail::has_pair_kernels<S>) {
              if (pairs) {
                constexpr std::size_t KK = 16 / N;
                for (std::size_t jj = 0; jj < nk; jj += KK) {
                  const std::size_t kn = std::min(KK, nk - jj),
                                    at = (j + jj) * krow + detail::decode_prefetch_distance<S>;
                  const char* pf =
                      h0 == 0 && at + kn * krow <= kbytes ? reinterpret_cast<const char*>(k0) + at : nullptr;
                  detail::decode_score_group<N>(space.qp.data() + h0 * dk, k0 + (j + jj) * k.row_stride,
                                                k.row_stride, dk, kn, scale, sc + h0 * stride + j + jj,
                                                stride, pf);
                }
                return;
              }
            }
            detail::decode_score_block<N>(qg + h0 * dk, k0 + j * k.row_stride, k.row_stride, dk, nk, scale,
                                          sc + h0 * stride + j, stride);
          });
      }
    bool finite = true;
    std::fill_n(acc, R * group * dv, 0.0f);
    for (std::size_t t = 0; t < group; ++t) {
      float* st = sc + t * stride;
      if (opt.alibi) {
        const float slope = static_cast<float>(slopes[g * group + t]);
        for (std::size_t j = 0; j < n; ++j)
          st[j] = st[j] + slope * static_cast<float>(static_cast<std::ptrdiff_t>(first + j) -
                                                     static_cast<std::ptrdiff_t>(p));
      }
      const float m = detail::row_max(st, n);
      finite = finite && m - m == 0.0f;
      l[t] = finite ? detail::exp_shifted_sum(st, n, m) : 0.0f;
    }
    if (finite) {
      // out_t += w_t[j] v_j: V read once, 32 keys a block, up to 4 heads x 4 vectors of columns
      // at a time; key range r into its own accumulators acc_r (R streams), added at the end
      const std::size_t vb = (n + detail::value_block_keys - 1) / detail::value_block_keys,
                        vper = (vb + R - 1) / R;
      for (std::size_t b = 0; b < vper; ++b)
        for (std::size_t r = 0; r < R; ++r) {
          const std::size_t blk = r * vper + b;
          if (blk >= vb) break;
          const std::size_t j = blk * detail::value_block_keys,
                            nk = std::min(detail::value_block_keys, n - j);
          const std::size_t from = j * vrow + detail::decode_prefetch_distance<S>;
          if (!pairs) detail::prefetch_bytes(v0, vbytes, from, from + nk * vrow);
          const char* pfv =
              pairs && from + nk * vrow <= vbytes ? reinterpret_cast<const char*>(v0) + from : nullptr;
          const S* vr = v0 + j * v.row_stride;
          float* ar = acc + r * group * dv;
          for (std::size_t h0 = 0; h0 < group; h0 += 4)
            detail::with_count<4>(std::min<std::size_t>(4, group - h0), [&](auto heads) {
              if constexpr (detail::has_pair_kernels<S>) {
                if (pairs) {
                  for (std::size_t c0 = 0; c0 < dv; c0 += 64)
                    detail::with_count<2>(std::min<std::size_t>(2, (dv - c0) / 32), [&](auto np) {
                      detail::decode_value_pairs<decltype(heads)::value, decltype(np)::value>(
                          sc + h0 * stride + j, stride, vr, v.row_stride, nk, ar + h0 * dv, dv, c0,
                          h0 == 0 && c0 == 0 ? pfv : nullptr);
                    });
                  return;
                }
              }
              for (std::size_t c0 = 0; c0 < dv; c0 += 4 * W)
                detail::with_count<4>(std::min<std::size_t>(4, (dv - c0) / W), [&](auto cols) {
                  detail::decode_value_block<decltype(heads)::value, decltype(cols)::value>(
                      sc + h0 * stride + j, stride, vr, v.row_stride, nk, ar + h0 * dv, dv, c0);
                });
            });
        }
      // a bfloat16 run's accumulators are in load_pair's order: through space.o to the columns
      const bool permuted = pairs && !std::is_same_v<S, float>;
      if (permuted) space.o.resize(dv);
      for (std::size_t t = 0; t < group; ++t) {
        float* o = out.data + (g * group + t) * dv;
        float* ot = permuted ? space.o.data() : o;
        const V vl(l[t]);
        for (std::size_t c = 0; c < dv; c += W) {
          V x(acc + t * dv + c, stdx::element_aligned);
          for (std::size_t r = 1; r < R; ++r) x += V(acc + (r * group + t) * dv + c, stdx::element_aligned);
          (x / vl).copy_to(ot + c, stdx::element_aligned);
        }
        if constexpr (detail::has_pair_kernels<S>)
          if (permuted)
            for (std::size_t c = 0; c < dv; ++c) o[detail::pair_column<S>(c)] = ot[c];
        for (std::size_t c = 0; c < dv; ++c) finite = finite && o[c] - o[c] == 0.0f;
      }
    }
    if (!finite) {  // a NaN or an infinity somewhere: the general path gives the policy's answer
      detail::attend_group(cache, layer, g, q, out, opt, slopes);
    }
  };
  if (pool && HK > 1 && double(S_len) * double(H) * double(dk + dv) >= (1 << 17))
    pool->parallel_for(HK, run);
  else
    for (std::size_t g = 0; g < HK; ++g) run(g);
}

}  // namespace qkv::runtime
