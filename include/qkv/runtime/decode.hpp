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
//   with AVX-512 the 16 keys' lane vectors are summed together by a transpose-and-add tree (45
//   instructions for 16 keys, where a horizontal sum per key costs about 8 each); other targets
//   sum each key's lanes (horizontal_sum);
// - the values come in blocks of 32 keys; the output accumulators of up to 4 query heads x 64
//   columns stay in registers over a block (the block is re-read from L1 for the next columns);
// - each pass reads two key ranges side by side (the first and the second half of the blocks:
//   two sequential streams, which this machine's cores read faster than one); the value pass
//   sums each range into its own accumulators and adds the two at the end;
// - the rows 1 KiB ahead of each stream are prefetched (the hardware's stream prefetcher stops
//   at each 4 KiB page).
// Bits: the summation order is fixed by the number of keys n, d_key, d_value and the simd width
// only (not by the number of threads): a key's dot product is the same wherever its block
// starts; the output sums the keys of each range in order, one fma a key, then the two ranges.
// So the result is identical for any thread count; it is not identical to attend's (another
// order), and it is within the bound of docs/numerics.md ("KV cache").
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

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
      return V(_mm512_castsi512_ps(
          _mm512_maskz_slli_epi32(all, _mm512_maskz_cvtepu16_epi32(all, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16)));
    }
#endif
#if defined(__AVX2__)
    if constexpr (lanes<float> == 8)
      return V(_mm256_castsi256_ps(
          _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16)));
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
/// how far ahead of the rows in use the prefetches run, in bytes
inline constexpr std::size_t decode_prefetch_distance = 1024;
/// keys per block of the score pass (one zmm of scores) and of the value pass
inline constexpr std::size_t score_block_keys = 16, value_block_keys = 32;

/// per-thread space of decode_attend: scores (group x keys) and output accumulators
struct decode_space {
  aligned_vector<float> scores, acc, sums;
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
    a[i] = _mm512_add_ps(_mm512_maskz_unpacklo_ps(all, x[2 * i], x[2 * i + 1]), _mm512_maskz_unpackhi_ps(all, x[2 * i], x[2 * i + 1]));
  for (int i = 0; i < 4; ++i) {  // per 128-bit lane: the 4 vectors' 128-bit partial sums
    const __m512d lo = _mm512_maskz_unpacklo_pd(all8, _mm512_castps_pd(a[2 * i]), _mm512_castps_pd(a[2 * i + 1]));
    const __m512d hi = _mm512_maskz_unpackhi_pd(all8, _mm512_castps_pd(a[2 * i]), _mm512_castps_pd(a[2 * i + 1]));
    b[i] = _mm512_add_ps(_mm512_castpd_ps(lo), _mm512_castpd_ps(hi));
  }
  for (int i = 0; i < 2; ++i)  // 128-bit lanes 0+1 and 2+3 of two vectors
    c[i] = _mm512_add_ps(_mm512_maskz_shuffle_f32x4(all, b[2 * i], b[2 * i + 1], 0x88),
                         _mm512_maskz_shuffle_f32x4(all, b[2 * i], b[2 * i + 1], 0xDD));
  return _mm512_add_ps(_mm512_maskz_shuffle_f32x4(all, c[0], c[1], 0x88), _mm512_maskz_shuffle_f32x4(all, c[0], c[1], 0xDD));
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
      for (std::size_t t = 0; t < N; ++t) acc[t] = fmadd(V(q + t * dk + c, stdx::element_aligned), kv, acc[t]);
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
void decode_value_block(const float* w, std::size_t stride, const S* v, std::size_t row_stride, std::size_t nk,
                        float* acc, std::size_t dv, std::size_t c0) {
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
void decode_attend(const kv_cache<S>& cache, std::size_t layer, matrix_view<const float> q, matrix_view<float> out,
                   const cache_attention_options& opt, const std::vector<double>& slopes = {},
                   thread_pool* pool = &default_pool()) {
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
    // scores: K read once, 16 keys a block, the R key ranges' blocks in turn (R streams)
    const std::size_t kb = (n + detail::score_block_keys - 1) / detail::score_block_keys, kper = (kb + R - 1) / R;
    for (std::size_t b = 0; b < kper; ++b)
      for (std::size_t r = 0; r < R; ++r) {
        const std::size_t blk = r * kper + b;
        if (blk >= kb) break;
        const std::size_t j = blk * detail::score_block_keys, nk = std::min(detail::score_block_keys, n - j);
        const std::size_t from = j * krow + detail::decode_prefetch_distance, to = from + nk * krow;
        detail::prefetch_bytes(k0, kbytes, from, to);
        for (std::size_t h0 = 0; h0 < group; h0 += 4)
          detail::with_count<4>(std::min<std::size_t>(4, group - h0), [&](auto count) {
            detail::decode_score_block<decltype(count)::value>(qg + h0 * dk, k0 + j * k.row_stride, k.row_stride, dk,
                                                               nk, scale, sc + h0 * stride + j, stride);
          });
      }
    bool finite = true;
    std::fill_n(acc, R * group * dv, 0.0f);
    for (std::size_t t = 0; t < group; ++t) {
      float* st = sc + t * stride;
      if (opt.alibi) {
        const float slope = static_cast<float>(slopes[g * group + t]);
        for (std::size_t j = 0; j < n; ++j)
          st[j] = st[j] + slope * static_cast<float>(static_cast<std::ptrdiff_t>(first + j) - static_cast<std::ptrdiff_t>(p));
      }
      const float m = detail::row_max(st, n);
      finite = finite && m - m == 0.0f;
      l[t] = finite ? detail::exp_shifted_sum(st, n, m) : 0.0f;
    }
    if (finite) {
      // out_t += w_t[j] v_j: V read once, 32 keys a block, up to 4 heads x 4 vectors of columns
      // at a time; key range r into its own accumulators acc_r (R streams), added at the end
      const std::size_t vb = (n + detail::value_block_keys - 1) / detail::value_block_keys, vper = (vb + R - 1) / R;
      for (std::size_t b = 0; b < vper; ++b)
        for (std::size_t r = 0; r < R; ++r) {
          const std::size_t blk = r * vper + b;
          if (blk >= vb) break;
          const std::size_t j = blk * detail::value_block_keys, nk = std::min(detail::value_block_keys, n - j);
          const std::size_t from = j * vrow + detail::decode_prefetch_distance;
          detail::prefetch_bytes(v0, vbytes, from, from + nk * vrow);
          const S* vr = v0 + j * v.row_stride;
          float* ar = acc + r * group * dv;
          for (std::size_t h0 = 0; h0 < group; h0 += 4)
            detail::with_count<4>(std::min<std::size_t>(4, group - h0), [&](auto heads) {
              for (std::size_t c0 = 0; c0 < dv; c0 += 4 * W)
                detail::with_count<4>(std::min<std::size_t>(4, (dv - c0) / W), [&](auto cols) {
                  detail::decode_value_block<decltype(heads)::value, decltype(cols)::value>(
                      sc + h0 * stride + j, stride, vr, v.row_stride, nk, ar + h0 * dv, dv, c0);
                });
            });
        }
      for (std::size_t t = 0; t < group; ++t) {
        float* o = out.data + (g * group + t) * dv;
        const V vl(l[t]);
        for (std::size_t c = 0; c < dv; c += W) {
          V x(acc + t * dv + c, stdx::element_aligned);
          for (std::size_t r = 1; r < R; ++r) x += V(acc + (r * group + t) * dv + c, stdx::element_aligned);
          (x / vl).copy_to(o + c, stdx::element_aligned);
        }
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
