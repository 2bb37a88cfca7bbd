// gemm.hpp: a packed, register-blocked matrix product on simd, with a fused epilogue
// (scale, bias), threaded over tiles of the output.
//
//   c = scale * (a b) + bias      a: (M, K)  b: (K, N)  c: (M, N)  bias: (N), broadcast on rows
//
// Method (Goto & van de Geijn, "Anatomy of high-performance matrix multiplication", 2008):
// b is packed into panels of kc x NR and a into panels of MR x kc, so that a 6 x (2 lanes)
// micro-kernel streams both from contiguous, aligned memory and keeps 12 accumulators in
// registers (AVX2: 6 x 16 floats or 6 x 8 doubles). Any strides work: a transposed operand is
// only a view (dynamic_matrix.hpp), and packing reads it in its own order. With AVX-512 the tile
// is 12 x (2 registers), and a whole 12 x 32 float tile runs as one block of assembly
// (tile_12x32_asm; the same fma chains, the same bits; QKV_NO_ASM_KERNEL turns it off).
//
// Summation order, fixed: element (i, j) is the chain acc = fma(a(i,k), b(k,j), acc) for
// k = 0, 1, ..., K-1, starting from acc = 0. Blocking over k stores acc in c and loads it back
// (same type, no rounding), so the chain is the same for every block size, tile and thread
// count: results are identical bit for bit whatever the threads. It differs from the
// constexpr matrix_product (one product, then mul-and-add, no fma) by at most
// K u sum_k |a(i,k) b(k,j)| (u = half an ulp of 1), the bound tests/runtime/ use.
#pragma once

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "dynamic_matrix.hpp"
#include "kernels.hpp"
#include "simd.hpp"
#include "thread_pool.hpp"

namespace qkv::runtime {

/// what the product does to each result before storing it: c = scale * acc + bias[j]
template <class T>
struct epilogue {
  T scale = T(1);
  bool scaled = false;      // multiply by scale (false: leave acc as it is)
  const T* bias = nullptr;  // N values, one per column, or none
};

namespace detail {

template <class T>
struct gemm_blocking {
  // rows of the micro-kernel: 6 x 2 accumulators of the 16 registers of AVX2; AVX-512 has 32,
  // and 12 x 2 accumulators (24) there measured 5% faster than 6 and 14 rows on a 128 x 768 x 768
  // product (MR = 14 spills a broadcast: 1.15x slower)
  static constexpr std::size_t mr = lanes<T> >= 16 ? 12 : 6;
  static constexpr std::size_t nr = 2 * lanes<T>;  // columns: two registers
  static constexpr std::size_t kc = 256;           // depth of one packed block (L1: kc*nr*4 = 16 KiB)
  static constexpr std::size_t mc = 12 * mr;       // rows of a packed a block (L2)
};

/// thread-local packing space, grown once and reused
template <class T>
struct packing_space {
  aligned_vector<T> a, b;
  static packing_space& get() {
    thread_local packing_space s;
    return s;
  }
};

/// a(i0 .. i0+mc, k0 .. k0+kc) into panels of MR rows: dst[p][k][r], zero rows past the end
template <class T>
void pack_a(const matrix_view<const T>& a, std::size_t i0, std::size_t mc, std::size_t k0, std::size_t kc,
            T* dst) {
  constexpr std::size_t MR = gemm_blocking<T>::mr;
  for (std::size_t p = 0; p < mc; p += MR, dst += MR * kc)
    for (std::size_t r = 0; r < MR; ++r) {
      if (p + r >= mc) {
        for (std::size_t k = 0; k < kc; ++k) dst[k * MR + r] = T(0);
      } else {
        const T* src = &a(i0 + p + r, k0);
        const std::size_t cs = a.col_stride;
        for (std::size_t k = 0; k < kc; ++k) dst[k * MR + r] = src[k * cs];
      }
    }
}

/// b(k0 .. k0+kc, j0 .. j0+nc) into panels of NR columns: dst[q][k][n], zero columns past the end
template <class T>
void pack_b(const matrix_view<const T>& b, std::size_t k0, std::size_t kc, std::size_t j0, std::size_t nc,
            T* dst) {
  constexpr std::size_t NR = gemm_blocking<T>::nr;
  for (std::size_t q = 0; q < nc; q += NR, dst += NR * kc) {
    const std::size_t n_valid = std::min(NR, nc - q);
    if (b.col_stride == 1) {  // rows of b are contiguous: copy NR at a time
      for (std::size_t k = 0; k < kc; ++k) {
        const T* src = &b(k0 + k, j0 + q);
        T* d = dst + k * NR;
        std::size_t n = 0;
        for (; n < n_valid; ++n) d[n] = src[n];
        for (; n < NR; ++n) d[n] = T(0);
      }
    } else {  // b = wᵀ and the like: NR columns of b are NR rows of w, read side by side
      const T* src[NR];
      for (std::size_t n = 0; n < NR; ++n) src[n] = n < n_valid ? &b(k0, j0 + q + n) : nullptr;
      const std::size_t rs = b.row_stride;
#if defined(__AVX__)
      // the rows of w contiguous (attention's k, nn.Linear's weights): 4 x 4 blocks transposed
      // in registers, one vector store per 4 elements instead of a scalar load and store per
      // element (the scalar transpose was 10-17% of W4's and W5's time; docs/performance.md).
      // Only data moves: the same panels, bit for bit
      if constexpr (std::is_same_v<T, float> && NR % 4 == 0) {
        if (rs == 1 && n_valid == NR) {
          std::size_t k = 0;
          for (; k + 4 <= kc; k += 4)
            for (std::size_t n = 0; n < NR; n += 4) {
              __m128 r0 = _mm_loadu_ps(src[n] + k), r1 = _mm_loadu_ps(src[n + 1] + k);
              __m128 r2 = _mm_loadu_ps(src[n + 2] + k), r3 = _mm_loadu_ps(src[n + 3] + k);
              _MM_TRANSPOSE4_PS(r0, r1, r2, r3);  // r_i = (w(n, k + i), .., w(n + 3, k + i))
              _mm_storeu_ps(dst + k * NR + n, r0);
              _mm_storeu_ps(dst + (k + 1) * NR + n, r1);
              _mm_storeu_ps(dst + (k + 2) * NR + n, r2);
              _mm_storeu_ps(dst + (k + 3) * NR + n, r3);
            }
          for (; k < kc; ++k)
            for (std::size_t n = 0; n < NR; ++n) dst[k * NR + n] = src[n][k];
          continue;
        }
      }
#endif
      if (n_valid == NR) {
        for (std::size_t k = 0; k < kc; ++k)
          for (std::size_t n = 0; n < NR; ++n) dst[k * NR + n] = src[n][k * rs];
      } else {
        for (std::size_t k = 0; k < kc; ++k)
          for (std::size_t n = 0; n < NR; ++n) dst[k * NR + n] = n < n_valid ? src[n][k * rs] : T(0);
      }
    }
  }
}

/// one step of depth k of the micro-kernel: acc(r) += a(r, k) b(k) for its Rows rows. `arow(r)`
/// gives row r's a(r, k) (packed panel or a's row in place)
template <class T, std::size_t Rows, class A>
[[gnu::always_inline]] inline void kernel_step(simd<T> (&acc0)[Rows], simd<T> (&acc1)[Rows], const T* bp,
                                               const A& arow) {
  using V = simd<T>;
  constexpr std::size_t W = lanes<T>;
  const V b0(bp, stdx::vector_aligned), b1(bp + W, stdx::vector_aligned);
#pragma GCC unroll 16
  for (std::size_t r = 0; r < Rows; ++r) {
    const V a(arow(r));
    acc0[r] = fmadd(a, b0, acc0[r]);
    acc1[r] = fmadd(a, b1, acc1[r]);
  }
}

#if defined(__AVX512F__) && defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(QKV_NO_ASM_KERNEL)
#define QKV_GEMM_ASM_KERNEL 1
// The full 12 x 32 float tile (AVX-512) in assembly, g++ and clang++ alike: c loaded or zeroed,
// the depth loop, the epilogue, the stores. g++ 12 compiles the C++ kernel's loop over an a
// read in place with 12 row pointers, register-to-register copies and a zmm spill per 4 steps
// of depth; and an asm statement cannot take the 24 accumulators as operands (an in-out operand
// counts twice against the limit of 30), so the whole tile is one statement with the
// accumulators in fixed registers: row r's two registers are zmm r and zmm (12 + r). Each step
// is what BLIS's and OpenBLAS's SKX kernels do: two aligned loads of b's row, then per row of
// a one broadcast and two FMAs. The arithmetic is the C++ kernel's: each element's chain
// acc = fma(a(r, k), b(k, j), acc) for k in order from c or 0 (vfmadd231ps rounds
// zmm_b * zmm_a + acc once, and an exact product does not depend on the order of its factors),
// then acc * scale and + bias[j] (vmulps, vaddps: one rounding each, as in C++): the same bits.
// (the kernel in assembly is laid out by hand, one instruction per line: not formatted)
// clang-format off
#define QKV_GEMM_S(x) #x
#define QKV_GEMM_STR(x) QKV_GEMM_S(x)
#define QKV_GEMM_ROW(disp, addr, r, s)               \
  "vbroadcastss " disp addr ", %%zmm29\n\t"          \
  "vfmadd231ps %%zmm30, %%zmm29, %%zmm" #r "\n\t"    \
  "vfmadd231ps %%zmm31, %%zmm29, %%zmm" #s "\n\t"
// b's row of depth u, and a prefetch of the row 8 depths ahead (1 KiB: the b panel is partly
// re-read from L2 as a's rows pass through L1; W3 3-4% faster; a prefetch never faults, so
// reading past the panel's end is harmless)
#define QKV_GEMM_B(u)                                             \
  "vmovaps " QKV_GEMM_STR(u * 128) "(%[b]), %%zmm30\n\t"          \
  "vmovaps " QKV_GEMM_STR(u * 128 + 64) "(%[b]), %%zmm31\n\t"     \
  "prefetcht0 " QKV_GEMM_STR(u * 128 + 1024) "(%[b])\n\t"         \
  "prefetcht0 " QKV_GEMM_STR(u * 128 + 64 + 1024) "(%[b])\n\t"
// packed a: 12 values per depth, row r of depth u at a + 4 (12 u + r)
#define QKV_GEMM_PACKED_STEP(u)                                 \
  QKV_GEMM_B(u)                                                 \
  QKV_GEMM_ROW(QKV_GEMM_STR(u * 48 + 0), "(%[a])", 0, 12)       \
  QKV_GEMM_ROW(QKV_GEMM_STR(u * 48 + 4), "(%[a])", 1, 13)       \
  QKV_GEMM_ROW(QKV_GEMM_STR(u * 48 + 8), "(%[a])", 2, 14)       \
  QKV_GEMM_ROW(QKV_GEMM_STR(u * 48 + 12), "(%[a])", 3, 15)      \
  QKV_GEMM_ROW(QKV_GEMM_STR(u * 48 + 16), "(%[a])", 4, 16)      \
  QKV_GEMM_ROW(QKV_GEMM_STR(u * 48 + 20), "(%[a])", 5, 17)      \
  QKV_GEMM_ROW(QKV_GEMM_STR(u * 48 + 24), "(%[a])", 6, 18)      \
  QKV_GEMM_ROW(QKV_GEMM_STR(u * 48 + 28), "(%[a])", 7, 19)      \
  QKV_GEMM_ROW(QKV_GEMM_STR(u * 48 + 32), "(%[a])", 8, 20)      \
  QKV_GEMM_ROW(QKV_GEMM_STR(u * 48 + 36), "(%[a])", 9, 21)      \
  QKV_GEMM_ROW(QKV_GEMM_STR(u * 48 + 40), "(%[a])", 10, 22)     \
  QKV_GEMM_ROW(QKV_GEMM_STR(u * 48 + 44), "(%[a])", 11, 23)
// a in place: row 3 q + m at base q + m lda (bases a, r8, r9, r10), depth u at + 4 u
#define QKV_GEMM_DIRECT_STEP(u)                                         \
  QKV_GEMM_B(u)                                                         \
  QKV_GEMM_ROW(QKV_GEMM_STR(u * 4), "(%[a])", 0, 12)                    \
  QKV_GEMM_ROW(QKV_GEMM_STR(u * 4), "(%[a],%[lda],1)", 1, 13)           \
  QKV_GEMM_ROW(QKV_GEMM_STR(u * 4), "(%[a],%[lda],2)", 2, 14)           \
  QKV_GEMM_ROW(QKV_GEMM_STR(u * 4), "(%%r8)", 3, 15)                    \
  QKV_GEMM_ROW(QKV_GEMM_STR(u * 4), "(%%r8,%[lda],1)", 4, 16)           \
  QKV_GEMM_ROW(QKV_GEMM_STR(u * 4), "(%%r8,%[lda],2)", 5, 17)           \
  QKV_GEMM_ROW(QKV_GEMM_STR(u * 4), "(%%r9)", 6, 18)                    \
  QKV_GEMM_ROW(QKV_GEMM_STR(u * 4), "(%%r9,%[lda],1)", 7, 19)           \
  QKV_GEMM_ROW(QKV_GEMM_STR(u * 4), "(%%r9,%[lda],2)", 8, 20)           \
  QKV_GEMM_ROW(QKV_GEMM_STR(u * 4), "(%%r10)", 9, 21)                   \
  QKV_GEMM_ROW(QKV_GEMM_STR(u * 4), "(%%r10,%[lda],1)", 10, 22)         \
  QKV_GEMM_ROW(QKV_GEMM_STR(u * 4), "(%%r10,%[lda],2)", 11, 23)
// r8, r9, r10 = p + 3, 6, 9 rows of stride ld (r11 = 3 ld)
#define QKV_GEMM_BASES(p, ld)              \
  "lea (" ld "," ld ",2), %%r11\n\t"       \
  "lea (" p ",%%r11,1), %%r8\n\t"          \
  "lea (%%r8,%%r11,1), %%r9\n\t"           \
  "lea (%%r9,%%r11,1), %%r10\n\t"
// op on c's rows: row 3 q + m at base q + m ldc
#define QKV_GEMM_C_ROW(op, addr, r, s)        \
  op " " addr ", %%zmm" #r "\n\t"             \
  op " 64" addr ", %%zmm" #s "\n\t"
#define QKV_GEMM_C_ROW_STORE(addr, r, s)      \
  "vmovups %%zmm" #r ", " addr "\n\t"         \
  "vmovups %%zmm" #s ", 64" addr "\n\t"
#define QKV_GEMM_C_ALL(M)                          \
  M("(%[c])", 0, 12) M("(%[c],%[ldc],1)", 1, 13) M("(%[c],%[ldc],2)", 2, 14) \
  M("(%%r8)", 3, 15) M("(%%r8,%[ldc],1)", 4, 16) M("(%%r8,%[ldc],2)", 5, 17) \
  M("(%%r9)", 6, 18) M("(%%r9,%[ldc],1)", 7, 19) M("(%%r9,%[ldc],2)", 8, 20) \
  M("(%%r10)", 9, 21) M("(%%r10,%[ldc],1)", 10, 22) M("(%%r10,%[ldc],2)", 11, 23)
#define QKV_GEMM_C_LOAD(addr, r, s) QKV_GEMM_C_ROW("vmovups", addr, r, s)
#define QKV_GEMM_ZERO24 \
  "vpxord %%zmm0, %%zmm0, %%zmm0\n\t" \
  "vpxord %%zmm1, %%zmm1, %%zmm1\n\t" \
  "vpxord %%zmm2, %%zmm2, %%zmm2\n\t" \
  "vpxord %%zmm3, %%zmm3, %%zmm3\n\t" \
  "vpxord %%zmm4, %%zmm4, %%zmm4\n\t" \
  "vpxord %%zmm5, %%zmm5, %%zmm5\n\t" \
  "vpxord %%zmm6, %%zmm6, %%zmm6\n\t" \
  "vpxord %%zmm7, %%zmm7, %%zmm7\n\t" \
  "vpxord %%zmm8, %%zmm8, %%zmm8\n\t" \
  "vpxord %%zmm9, %%zmm9, %%zmm9\n\t" \
  "vpxord %%zmm10, %%zmm10, %%zmm10\n\t" \
  "vpxord %%zmm11, %%zmm11, %%zmm11\n\t" \
  "vpxord %%zmm12, %%zmm12, %%zmm12\n\t" \
  "vpxord %%zmm13, %%zmm13, %%zmm13\n\t" \
  "vpxord %%zmm14, %%zmm14, %%zmm14\n\t" \
  "vpxord %%zmm15, %%zmm15, %%zmm15\n\t" \
  "vpxord %%zmm16, %%zmm16, %%zmm16\n\t" \
  "vpxord %%zmm17, %%zmm17, %%zmm17\n\t" \
  "vpxord %%zmm18, %%zmm18, %%zmm18\n\t" \
  "vpxord %%zmm19, %%zmm19, %%zmm19\n\t" \
  "vpxord %%zmm20, %%zmm20, %%zmm20\n\t" \
  "vpxord %%zmm21, %%zmm21, %%zmm21\n\t" \
  "vpxord %%zmm22, %%zmm22, %%zmm22\n\t" \
  "vpxord %%zmm23, %%zmm23, %%zmm23\n\t"
#define QKV_GEMM_BIAS_ALL(op)                                                              \
  op " %%zmm30, %%zmm0, %%zmm0\n\t" op " %%zmm30, %%zmm1, %%zmm1\n\t"                     \
  op " %%zmm30, %%zmm2, %%zmm2\n\t" op " %%zmm30, %%zmm3, %%zmm3\n\t"                     \
  op " %%zmm30, %%zmm4, %%zmm4\n\t" op " %%zmm30, %%zmm5, %%zmm5\n\t"                     \
  op " %%zmm30, %%zmm6, %%zmm6\n\t" op " %%zmm30, %%zmm7, %%zmm7\n\t"                     \
  op " %%zmm30, %%zmm8, %%zmm8\n\t" op " %%zmm30, %%zmm9, %%zmm9\n\t"                     \
  op " %%zmm30, %%zmm10, %%zmm10\n\t" op " %%zmm30, %%zmm11, %%zmm11\n\t"                 \
  op " %%zmm31, %%zmm12, %%zmm12\n\t" op " %%zmm31, %%zmm13, %%zmm13\n\t"                 \
  op " %%zmm31, %%zmm14, %%zmm14\n\t" op " %%zmm31, %%zmm15, %%zmm15\n\t"                 \
  op " %%zmm31, %%zmm16, %%zmm16\n\t" op " %%zmm31, %%zmm17, %%zmm17\n\t"                 \
  op " %%zmm31, %%zmm18, %%zmm18\n\t" op " %%zmm31, %%zmm19, %%zmm19\n\t"                 \
  op " %%zmm31, %%zmm20, %%zmm20\n\t" op " %%zmm31, %%zmm21, %%zmm21\n\t"                 \
  op " %%zmm31, %%zmm22, %%zmm22\n\t" op " %%zmm31, %%zmm23, %%zmm23\n\t"
// what the tile needs besides its pointers (read by the asm from memory: fewer operands)
struct tile_params {
  const float* bias;   // bias + j (32 values) or nullptr
  const float* scale;  // the scale or nullptr (not scaled)
  std::size_t load_c;  // 1: chains start from c, 0: from 0
  std::size_t tail;    // kc % 4 single steps after the kc / 4 steps of 4
};
// the part before the depth loop: c's rows loaded (bases r8-r10 from c) or zeroed
#define QKV_GEMM_PROLOGUE                                    \
  "cmpq $0, 16(%[p])\n\t"                                    \
  "je 10f\n\t" QKV_GEMM_BASES("%[c]", "%[ldc]")              \
  QKV_GEMM_C_ALL(QKV_GEMM_C_LOAD)                            \
  "jmp 11f\n\t"                                              \
  "10:\n\t" QKV_GEMM_ZERO24                                   \
  "11:\n\t"
// the part after it: * scale, + bias, c's rows stored
#define QKV_GEMM_EPILOGUE                                    \
  "mov 8(%[p]), %%r11\n\t"                                   \
  "test %%r11, %%r11\n\t"                                    \
  "je 20f\n\t"                                               \
  "vbroadcastss (%%r11), %%zmm30\n\t"                        \
  "vmovaps %%zmm30, %%zmm31\n\t" QKV_GEMM_BIAS_ALL("vmulps") \
  "20:\n\t"                                                  \
  "mov (%[p]), %%r11\n\t"                                    \
  "test %%r11, %%r11\n\t"                                    \
  "je 21f\n\t"                                               \
  "vmovups (%%r11), %%zmm30\n\t"                             \
  "vmovups 64(%%r11), %%zmm31\n\t" QKV_GEMM_BIAS_ALL("vaddps") \
  "21:\n\t" QKV_GEMM_BASES("%[c]", "%[ldc]")                 \
  QKV_GEMM_C_ALL(QKV_GEMM_C_ROW_STORE)
#define QKV_GEMM_CLOBBERS                                                                        \
  "r8", "r9", "r10", "r11", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", \
      "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18",      \
      "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm29", "xmm30", "xmm31", "memory", "cc"

/// @brief the full 12 x 32 float tile (mr = 12, nr = 32): c(12 rows ldc apart) = epilogue of
/// ((load_c ? c : 0) + a_panel b_panel) over kc depths. a packed (12 values per depth) or,
/// Direct, 12 rows in place lda apart; b: 32 floats per depth, 64-byte aligned
template <bool Direct>
inline void tile_12x32_asm(std::size_t kc, const float* a, std::size_t lda, const float* b, float* c,
                           std::size_t ldc, bool load_c, const epilogue<float>* last, std::size_t j) {
  const tile_params p{last && last->bias ? last->bias + j : nullptr, last && last->scaled ? &last->scale : nullptr,
                      load_c ? std::size_t(1) : std::size_t(0), kc % 4};
  std::size_t n4 = kc / 4;
  const std::size_t lda_bytes = lda * sizeof(float), ldc_bytes = ldc * sizeof(float);
  if constexpr (Direct) {
    asm volatile(QKV_GEMM_PROLOGUE QKV_GEMM_BASES("%[a]", "%[lda]")
                 "test %[n4], %[n4]\n\t"
                 "je 2f\n\t"
                 "1:\n\t" QKV_GEMM_DIRECT_STEP(0) QKV_GEMM_DIRECT_STEP(1) QKV_GEMM_DIRECT_STEP(2)
                     QKV_GEMM_DIRECT_STEP(3)
                 "add $16, %[a]\n\t"
                 "add $16, %%r8\n\t"
                 "add $16, %%r9\n\t"
                 "add $16, %%r10\n\t"
                 "add $512, %[b]\n\t"
                 "dec %[n4]\n\t"
                 "jnz 1b\n\t"
                 "2:\n\t"
                 "mov 24(%[p]), %[n4]\n\t"
                 "test %[n4], %[n4]\n\t"
                 "je 4f\n\t"
                 "3:\n\t" QKV_GEMM_DIRECT_STEP(0)
                 "add $4, %[a]\n\t"
                 "add $4, %%r8\n\t"
                 "add $4, %%r9\n\t"
                 "add $4, %%r10\n\t"
                 "add $128, %[b]\n\t"
                 "dec %[n4]\n\t"
                 "jnz 3b\n\t"
                 "4:\n\t" QKV_GEMM_EPILOGUE
                 : [a] "+r"(a), [b] "+r"(b), [n4] "+r"(n4)
                 : [lda] "r"(lda_bytes), [c] "r"(c), [ldc] "r"(ldc_bytes), [p] "r"(&p)
                 : QKV_GEMM_CLOBBERS);
  } else {
    (void)lda_bytes;
    asm volatile(QKV_GEMM_PROLOGUE
                 "test %[n4], %[n4]\n\t"
                 "je 2f\n\t"
                 "1:\n\t" QKV_GEMM_PACKED_STEP(0) QKV_GEMM_PACKED_STEP(1) QKV_GEMM_PACKED_STEP(2)
                     QKV_GEMM_PACKED_STEP(3)
                 "add $192, %[a]\n\t"
                 "add $512, %[b]\n\t"
                 "dec %[n4]\n\t"
                 "jnz 1b\n\t"
                 "2:\n\t"
                 "mov 24(%[p]), %[n4]\n\t"
                 "test %[n4], %[n4]\n\t"
                 "je 4f\n\t"
                 "3:\n\t" QKV_GEMM_PACKED_STEP(0)
                 "add $48, %[a]\n\t"
                 "add $128, %[b]\n\t"
                 "dec %[n4]\n\t"
                 "jnz 3b\n\t"
                 "4:\n\t" QKV_GEMM_EPILOGUE
                 : [a] "+r"(a), [b] "+r"(b), [n4] "+r"(n4)
                 : [c] "r"(c), [ldc] "r"(ldc_bytes), [p] "r"(&p)
                 : QKV_GEMM_CLOBBERS);
  }
}
#undef QKV_GEMM_CLOBBERS
#undef QKV_GEMM_EPILOGUE
#undef QKV_GEMM_PROLOGUE
#undef QKV_GEMM_BIAS_ALL
#undef QKV_GEMM_ZERO24
#undef QKV_GEMM_C_LOAD
#undef QKV_GEMM_C_ALL
#undef QKV_GEMM_C_ROW_STORE
#undef QKV_GEMM_C_ROW
#undef QKV_GEMM_BASES
#undef QKV_GEMM_DIRECT_STEP
#undef QKV_GEMM_PACKED_STEP
#undef QKV_GEMM_B
#undef QKV_GEMM_ROW
#undef QKV_GEMM_STR
#undef QKV_GEMM_S
// clang-format on
#endif

/// @brief the Rows x NR micro-kernel (Rows = MR, or fewer for the last rows of a block):
/// acc (= c when load_c, else 0) += a_panel b_panel, then the epilogue when `last`, then
/// c = acc. mr (<= Rows), nr: how much of the tile is real.
/// Direct: a is read in place, row r at ap + r * lda (rows past mr read row 0 again, their
/// results are dropped), instead of from a packed panel (MR values per depth): the same
/// numbers in the same order. The depth loop is unrolled by 4 (the loop's counter and branch
/// would otherwise take issue slots from the FMAs): the order of the chain is unchanged.
template <class T, bool Direct, std::size_t Rows>
inline void micro_kernel_rows(std::size_t kc, const T* __restrict ap, const T* __restrict bp, T* c,
                              std::size_t ldc, std::size_t mr, std::size_t nr, bool load_c,
                              const epilogue<T>* last, std::size_t j, std::size_t lda) {
  using V = simd<T>;
  constexpr std::size_t W = lanes<T>, MR = gemm_blocking<T>::mr, NR = gemm_blocking<T>::nr;
  const bool full_width = nr == NR;      // rows past mr are simply not stored
  alignas(alignment) T tile[Rows * NR];  // for partial widths: c copied in and out through here
  T* cp = c;
  std::size_t ld = ldc;
  if (!full_width) {
    cp = tile;
    ld = NR;
    if (load_c)
      for (std::size_t r = 0; r < Rows; ++r)
        for (std::size_t n = 0; n < NR; ++n) tile[r * NR + n] = (r < mr && n < nr) ? c[r * ldc + n] : T(0);
  }
  V acc0[Rows], acc1[Rows];
#pragma GCC unroll 16
  for (std::size_t r = 0; r < Rows; ++r) {
    if (load_c && r < mr) {
      acc0[r] = V(cp + r * ld, stdx::element_aligned);
      acc1[r] = V(cp + r * ld + W, stdx::element_aligned);
    } else {
      acc0[r] = V(T(0));
      acc1[r] = V(T(0));
    }
  }
  std::size_t k = 0;
  if constexpr (Direct) {
    if (mr == Rows) {
      // row r = G q + m at base[q] + m lda: a few base pointers and offsets instead of Rows
      // pointers, which would not fit in the 16 general registers beside the loop's own
      constexpr std::size_t G = Rows % 3 == 0 ? 3 : Rows % 4 == 0 ? 4 : 1;
      const T* __restrict base[Rows / G];
#pragma GCC unroll 16
      for (std::size_t q = 0; q < Rows / G; ++q) base[q] = ap + q * G * lda;
      for (; k + 4 <= kc; k += 4, bp += 4 * NR) {
#pragma GCC unroll 4
        for (std::size_t u = 0; u < 4; ++u)
          kernel_step<T, Rows>(acc0, acc1, bp + u * NR,
                               [&](std::size_t r) { return base[r / G][(r % G) * lda + k + u]; });
      }
      for (; k < kc; ++k, bp += NR)
        kernel_step<T, Rows>(acc0, acc1, bp, [&](std::size_t r) { return base[r / G][(r % G) * lda + k]; });
    }
    const T* __restrict rows[Rows];
#pragma GCC unroll 16
    for (std::size_t r = 0; r < Rows; ++r) rows[r] = ap + (r < mr ? r : 0) * lda;
    for (; k + 4 <= kc; k += 4, bp += 4 * NR) {
#pragma GCC unroll 4
      for (std::size_t u = 0; u < 4; ++u)
        kernel_step<T, Rows>(acc0, acc1, bp + u * NR, [&](std::size_t r) { return rows[r][k + u]; });
    }
    for (; k < kc; ++k, bp += NR)
      kernel_step<T, Rows>(acc0, acc1, bp, [&](std::size_t r) { return rows[r][k]; });
  } else {
    for (; k + 4 <= kc; k += 4, ap += 4 * MR, bp += 4 * NR) {
#pragma GCC unroll 4
      for (std::size_t u = 0; u < 4; ++u)
        kernel_step<T, Rows>(acc0, acc1, bp + u * NR, [&](std::size_t r) { return ap[u * MR + r]; });
    }
    for (; k < kc; ++k, ap += MR, bp += NR)
      kernel_step<T, Rows>(acc0, acc1, bp, [&](std::size_t r) { return ap[r]; });
  }
  if (last) {
    if (last->scaled) {
      const V s(last->scale);
#pragma GCC unroll 16
      for (std::size_t r = 0; r < Rows; ++r) {
        acc0[r] *= s;
        acc1[r] *= s;
      }
    }
    if (last->bias) {
      const T* bias = last->bias + j;
      const V bias0 = nr >= W ? V(bias, stdx::element_aligned) : load_partial(bias, nr);
      const V bias1 =
          nr >= NR ? V(bias + W, stdx::element_aligned) : (nr > W ? load_partial(bias + W, nr - W) : V(T(0)));
#pragma GCC unroll 16
      for (std::size_t r = 0; r < Rows; ++r) {
        acc0[r] += bias0;
        acc1[r] += bias1;
      }
    }
  }
  if (full_width) {
#pragma GCC unroll 16
    for (std::size_t r = 0; r < Rows; ++r)
      if (r < mr) {
        acc0[r].copy_to(cp + r * ld, stdx::element_aligned);
        acc1[r].copy_to(cp + r * ld + W, stdx::element_aligned);
      }
    return;
  }
#pragma GCC unroll 16
  for (std::size_t r = 0; r < Rows; ++r) {
    acc0[r].copy_to(cp + r * ld, stdx::element_aligned);
    acc1[r].copy_to(cp + r * ld + W, stdx::element_aligned);
  }
  for (std::size_t r = 0; r < mr; ++r)
    for (std::size_t n = 0; n < nr; ++n) c[r * ldc + n] = tile[r * NR + n];
}

/// @brief the MR x NR micro-kernel (micro_kernel_rows): a tile of mr < MR rows runs a
/// kernel of MR * 2/3 or MR / 3 rows when that is enough (the last rows of 128 or 512 are 8 of
/// MR = 12, of 64 or 1024 are 4), instead of computing MR rows and dropping some
template <class T, bool Direct = false>
inline void micro_kernel(std::size_t kc, const T* __restrict ap, const T* __restrict bp, T* c,
                         std::size_t ldc, std::size_t mr, std::size_t nr, bool load_c,
                         const epilogue<T>* last, std::size_t j, std::size_t lda = 0) {
  constexpr std::size_t MR = gemm_blocking<T>::mr;
#if defined(QKV_GEMM_ASM_KERNEL)
  if constexpr (std::is_same_v<T, float> && MR == 12 && gemm_blocking<T>::nr == 32) {
    if (mr == MR && nr == 32) return tile_12x32_asm<Direct>(kc, ap, lda, bp, c, ldc, load_c, last, j);
  }
#endif
  if constexpr (MR % 3 == 0) {
    if (mr <= MR / 3)
      return micro_kernel_rows<T, Direct, MR / 3>(kc, ap, bp, c, ldc, mr, nr, load_c, last, j, lda);
    if (mr <= 2 * MR / 3)
      return micro_kernel_rows<T, Direct, 2 * MR / 3>(kc, ap, bp, c, ldc, mr, nr, load_c, last, j, lda);
  }
  micro_kernel_rows<T, Direct, MR>(kc, ap, bp, c, ldc, mr, nr, load_c, last, j, lda);
}

/// @brief few rows (<= MR) times b of depth K <= kc in packed panels (`panels`: the panel of
/// column j0): one row at a time, read straight from a (packing a would cost more than the
/// arithmetic), no partial-tile copies. Each element is the micro-kernel's chain and epilogue:
/// the same bits.
template <class T>
void small_rows(const matrix_view<const T>& a, const matrix_view<T>& c, const epilogue<T>& e, std::size_t i0,
                std::size_t i1, std::size_t j0, std::size_t j1, const T* panels) {
  using V = simd<T>;
  constexpr std::size_t W = lanes<T>, NR = gemm_blocking<T>::nr;
  const std::size_t K = a.cols, nc = j1 - j0;
  for (std::size_t jr = 0; jr < nc; jr += NR) {
    const T* bp = panels + jr * K;  // depth block 0 (K <= kc), the panel of column j0 + jr
    const std::size_t n = std::min(NR, nc - jr);
    V bias0(T(0)), bias1(T(0));
    if (e.bias) {
      const T* bias = e.bias + j0 + jr;
      bias0 = n >= W ? V(bias, stdx::element_aligned) : load_partial(bias, n);
      bias1 =
          n >= NR ? V(bias + W, stdx::element_aligned) : (n > W ? load_partial(bias + W, n - W) : V(T(0)));
    }
    for (std::size_t i = i0; i < i1; ++i) {
      V acc0(T(0)), acc1(T(0));
      const T* ar = &a(i, 0);
      const std::size_t cs = a.col_stride;
      if (n <= W) {  // one register of real columns: the second would be padding
        for (std::size_t k = 0; k < K; ++k)
          acc0 = fmadd(V(ar[k * cs]), V(bp + k * NR, stdx::vector_aligned), acc0);
      } else {
        for (std::size_t k = 0; k < K; ++k) {
          const V x(ar[k * cs]);
          acc0 = fmadd(x, V(bp + k * NR, stdx::vector_aligned), acc0);
          acc1 = fmadd(x, V(bp + k * NR + W, stdx::vector_aligned), acc1);
        }
      }
      if (e.scaled) {
        acc0 *= V(e.scale);
        acc1 *= V(e.scale);
      }
      if (e.bias) {
        acc0 += bias0;
        acc1 += bias1;
      }
      T* cr = &c(i, j0 + jr);
      if (n == NR) {
        acc0.copy_to(cr, stdx::element_aligned);
        acc1.copy_to(cr + W, stdx::element_aligned);
      } else if (n > W) {
        acc0.copy_to(cr, stdx::element_aligned);
        store_partial(acc1, cr + W, n - W);
      } else if (n == W) {
        acc0.copy_to(cr, stdx::element_aligned);
      } else {
        store_partial(acc0, cr, n);
      }
    }
  }
}

/// c(i0..i1, j0..j1) = the product restricted to that block, on this thread. With
/// `accumulate` the chains start from c's values instead of 0 (c += a b, continuing the chain).
/// `packed`: b already in panels (packed_operand, below; j0 a multiple of NR), or nullptr.
template <class T>
void product_block(const matrix_view<const T>& a, const matrix_view<const T>& b, const matrix_view<T>& c,
                   const epilogue<T>& e, std::size_t i0, std::size_t i1, std::size_t j0, std::size_t j1,
                   bool accumulate = false, const T* packed = nullptr, bool direct_a = false) {
  using blk = gemm_blocking<T>;
  const std::size_t K = a.cols;
  if (i0 >= i1 || j0 >= j1) return;
  if (K == 0) {  // an empty sum is 0 (or c): c = scale * 0 + bias
    for (std::size_t i = i0; i < i1; ++i)
      for (std::size_t j = j0; j < j1; ++j) {
        T v = accumulate ? c(i, j) : T(0);
        if (e.scaled) v = v * e.scale;
        if (e.bias) v = v + e.bias[j];
        c(i, j) = v;
      }
    return;
  }
  if (!packed && (i1 - i0) * (j1 - j0) * K <= 512) {
    // tiny (tutorial-sized) blocks: the same chains and the same epilogue without packing,
    // whose fixed costs would dominate; the same bits as the packed path
    for (std::size_t i = i0; i < i1; ++i)
      for (std::size_t j = j0; j < j1; ++j) {
        T acc = accumulate ? c(i, j) : T(0);
        for (std::size_t k = 0; k < K; ++k) acc = fmadd(a(i, k), b(k, j), acc);
        if (e.scaled) acc = acc * e.scale;
        if (e.bias) acc = acc + e.bias[j];
        c(i, j) = acc;
      }
    return;
  }
  auto& space = packing_space<T>::get();
  const std::size_t nc = j1 - j0;
  const std::size_t nc_padded = (nc + blk::nr - 1) / blk::nr * blk::nr;
  if (!accumulate && K <= blk::kc && i1 - i0 <= blk::mr) {  // few rows: a is not packed
    if (packed) {
      small_rows(a, c, e, i0, i1, j0, j1, packed + j0 * K);
    } else {
      if (space.b.size() < nc_padded * K) space.b.resize(nc_padded * K);
      pack_b(b, 0, K, j0, nc, space.b.data());
      small_rows(a, c, e, i0, i1, j0, j1, space.b.data());
    }
    return;
  }
  const std::size_t kc_max = std::min(blk::kc, K);
  const std::size_t n_padded = (b.cols + blk::nr - 1) / blk::nr * blk::nr;  // of the whole b
  // direct_a: a's rows are read in place (contiguous rows, already in cache: attention's tiles)
  const bool direct = direct_a && a.col_stride == 1;
  if (!packed && space.b.size() < nc_padded * kc_max) space.b.resize(nc_padded * kc_max);
  if (!direct && space.a.size() < blk::mc * kc_max) space.a.resize(blk::mc * kc_max);
  for (std::size_t pc = 0; pc < K; pc += blk::kc) {
    const std::size_t kc = std::min(blk::kc, K - pc);
    const bool last = pc + kc >= K;
    // the panels of b(pc..pc+kc, j0..j1): packed here, or taken from the prepacked operand,
    // whose depth block pc starts at pc * n_padded and whose panel of column j0 at j0 * kc
    const T* bpanels = packed ? packed + pc * n_padded + j0 * kc : space.b.data();
    if (!packed) pack_b(b, pc, kc, j0, nc, space.b.data());
    for (std::size_t ic = i0; ic < i1; ic += blk::mc) {
      const std::size_t mc = std::min(blk::mc, i1 - ic);
      if (direct) {
        for (std::size_t jr = 0; jr < nc; jr += blk::nr)
          for (std::size_t ir = 0; ir < mc; ir += blk::mr)
            micro_kernel<T, true>(kc, &a(ic + ir, pc), bpanels + jr * kc, &c(ic + ir, j0 + jr), c.row_stride,
                                  std::min(blk::mr, mc - ir), std::min(blk::nr, nc - jr),
                                  accumulate || pc > 0, last ? &e : nullptr, j0 + jr, a.row_stride);
        continue;
      }
      pack_a(a, ic, mc, pc, kc, space.a.data());
      for (std::size_t jr = 0; jr < nc; jr += blk::nr)
        for (std::size_t ir = 0; ir < mc; ir += blk::mr)
          micro_kernel(kc, space.a.data() + ir * kc, bpanels + jr * kc, &c(ic + ir, j0 + jr), c.row_stride,
                       std::min(blk::mr, mc - ir), std::min(blk::nr, nc - jr), accumulate || pc > 0,
                       last ? &e : nullptr, j0 + jr);
    }
  }
}

/// one product and its split over the pool into tasks. The split changes only who computes
/// what, never how: any split gives the same bits. Column blocks start at multiples of NR
/// (prepacked panels).
template <class T>
struct product_job {
  matrix_view<const T> a, b;
  matrix_view<T> c;
  epilogue<T> e;
  const T* packed = nullptr;
  std::size_t tasks = 1, per = 0;
  bool by_columns = true;
  // a with contiguous rows that fits in L2 is read in place: split over columns, every task
  // would otherwise pack all of a again
  bool direct = false;

  void plan(std::size_t threads) {
    using blk = gemm_blocking<T>;
    const std::size_t M = a.rows, N = b.cols;
    direct = a.col_stride == 1 && M * a.cols * sizeof(T) <= (std::size_t(1) << 19);
    const double work = double(M) * double(N) * double(a.cols);
    if (threads == 1 || work < 1 << 17) {
      tasks = 1;
      per = N;
      by_columns = true;
      return;
    }
    const std::size_t want = 4 * threads;
    const std::size_t n_panels = (N + blk::nr - 1) / blk::nr;
    by_columns = n_panels >= 2 * threads;
    if (by_columns) {  // each task packs its own b columns
      per = (n_panels + want - 1) / want * blk::nr;
      tasks = (N + per - 1) / per;
    } else {  // few columns: split the rows
      const std::size_t m_panels = (M + blk::mr - 1) / blk::mr;
      per = std::max<std::size_t>(1, (m_panels + want - 1) / want) * blk::mr;
      tasks = (M + per - 1) / per;
    }
  }
  void run(std::size_t t) const {
    const std::size_t M = a.rows, N = b.cols;
    if (by_columns)
      product_block(a, b, c, e, 0, M, std::min(N, t * per), std::min(N, (t + 1) * per), false, packed,
                    direct);
    else
      product_block(a, b, c, e, t * per, std::min(M, (t + 1) * per), 0, N, false, packed);
  }
};

/// @brief several independent products (Q, K and V's projections) in one parallel_for: one
/// wake-up of the pool instead of one per product, and the tasks of all balanced together
template <class T, std::size_t P>
void threaded_products(product_job<T> (&jobs)[P], thread_pool* pool) {
  const std::size_t threads = pool ? pool->size() : 1;
  std::size_t total = 0;
  for (auto& j : jobs) {
    j.plan(threads);
    total += j.tasks;
  }
  auto run = [&](std::size_t t) {
    for (const auto& j : jobs) {
      if (t < j.tasks) return j.run(t);
      t -= j.tasks;
    }
  };
  if (threads == 1 || total == P)
    for (std::size_t t = 0; t < total; ++t) run(t);
  else
    pool->parallel_for(total, run);
}

template <class T>
void threaded_product(const matrix_view<const T>& a, const matrix_view<const T>& b, const matrix_view<T>& c,
                      const epilogue<T>& e, thread_pool* pool, const T* packed) {
  product_job<T> jobs[1] = {{a, b, c, e, packed}};
  threaded_products(jobs, pool);
}

}  // namespace detail

/// @brief b (K, N) packed once into the micro-kernel's panels, for a product operand used many
/// times: a layer's weights. matrix_product with it skips packing b, which for x Wᵀ reads W
/// transposed, on every call. The values are copied: changing the source afterwards does not
/// change the packed operand (pack again). Results are the same bits as with the plain view.
/// Layout: depth blocks of kc rows; block pc holds ceil(N / NR) panels of kc x NR, zero-padded.
/// NR is two registers (16 floats with AVX2, 32 with AVX-512): with libqkv_kernels (kernels.hpp)
/// a float operand is packed by the kernels in use, which read it; panel_width() says which, and
/// a product refuses an operand packed for other kernels (std::logic_error) instead of misreading it.
template <class T>
class packed_operand {
 public:
  packed_operand() = default;
  explicit packed_operand(matrix_view<const T> b) : rows_(b.rows), cols_(b.cols) {
    if constexpr (detail::forwards<T>) {
      detail::kernels().pack(b, *this);
      return;
    }
    using blk = detail::gemm_blocking<T>;
    panel_ = blk::nr;
    const std::size_t n_padded = (cols_ + blk::nr - 1) / blk::nr * blk::nr;
    data_.resize(rows_ * n_padded);
    for (std::size_t pc = 0; pc < rows_; pc += blk::kc)
      detail::pack_b(b, pc, std::min(blk::kc, rows_ - pc), 0, cols_, data_.data() + pc * n_padded);
  }
  [[nodiscard]] std::size_t rows() const { return rows_; }
  [[nodiscard]] std::size_t cols() const { return cols_; }
  [[nodiscard]] std::string shape() const { return shape_string(rows_, cols_); }
  [[nodiscard]] bool empty() const { return rows_ * cols_ == 0; }
  [[nodiscard]] const T* data() const { return data_.data(); }
  /// the panels' width NR, that of the kernels that packed it (0: default-constructed)
  [[nodiscard]] std::size_t panel_width() const { return panel_; }

 private:
  std::size_t rows_ = 0, cols_ = 0, panel_ = 0;
  aligned_vector<T> data_;
};

namespace detail {

/// b's panels as this translation unit's kernels read them: its panel width must be theirs
template <class T>
[[nodiscard]] const T* packed_panels(const packed_operand<T>& b) {
  if (b.panel_width() != gemm_blocking<T>::nr && !b.empty())
    throw std::logic_error("packed_operand: packed in panels of " + std::to_string(b.panel_width()) +
                           " columns but these kernels read panels of " +
                           std::to_string(gemm_blocking<T>::nr) +
                           " (packed by other kernels: pack it with the kernels in use, kernels.hpp)");
  return b.data();
}

}  // namespace detail

/// @brief c = scale * (a b) + bias with b prepacked (same bits as the view overload)
/// @throws shape_error naming all three shapes when they do not fit
template <class T>
void matrix_product(matrix_view<const T> a, const packed_operand<T>& b, matrix_view<T> c,
                    const epilogue<T>& e = {}, thread_pool* pool = &default_pool()) {
  if constexpr (detail::forwards<T>) {
    detail::kernels().product_packed(a, b, c, e, pool);
    return;
  }
  if (a.cols != b.rows() || c.rows != a.rows || c.cols != b.cols())
    throw shape_error("matrix_product: a is " + a.shape() + " and b is " + b.shape() +
                      " (a's columns must equal b's rows), c is " + c.shape() + " (must be " +
                      shape_string(a.rows, b.cols()) + ")");
  if (c.col_stride != 1 && c.rows * c.cols > 0)
    throw shape_error("matrix_product: c must have contiguous rows (col_stride 1), c is " + c.shape());
  // the view is never read when the panels are given; it carries b's shape
  const matrix_view<const T> shape_only{nullptr, b.rows(), b.cols(), b.cols(), 1};
  detail::threaded_product<T>(a, shape_only, c, e, pool, detail::packed_panels(b));
}

/// @brief c = scale * (a b) + bias, threaded over tiles of c (see the header comment).
/// @param a     (M, K), any strides
/// @param b     (K, N), any strides; transposed(w.view()) gives x wᵀ, nn.Linear's product
/// @param c     (M, N), rows contiguous (col_stride 1); must not overlap a or b
/// @param e     scale and bias (N values), applied after the sum
/// @param pool  the threads to use; nullptr = this thread only
/// @throws shape_error naming all three shapes when they do not fit
template <class T>
void matrix_product(matrix_view<const T> a, matrix_view<const T> b, matrix_view<T> c,
                    const epilogue<T>& e = {}, thread_pool* pool = &default_pool()) {
  if (a.cols != b.rows || c.rows != a.rows || c.cols != b.cols)
    throw shape_error("matrix_product: a is " + a.shape() + " and b is " + b.shape() +
                      " (a's columns must equal b's rows), c is " + c.shape() + " (must be " +
                      shape_string(a.rows, b.cols) + ")");
  if (c.col_stride != 1 && c.rows * c.cols > 0)
    throw shape_error("matrix_product: c must have contiguous rows (col_stride 1), c is " + c.shape());
  detail::threaded_product<T>(a, b, c, e, pool, nullptr);
}

/// @brief a b as a new matrix
template <class T>
[[nodiscard]] dynamic_matrix<T> matrix_product(const dynamic_matrix<T>& a, const dynamic_matrix<T>& b,
                                               thread_pool* pool = &default_pool()) {
  if (a.cols() != b.rows())
    throw shape_error("matrix_product: a is " + a.shape() + " and b is " + b.shape() +
                      " (a's columns must equal b's rows)");
  dynamic_matrix<T> c(a.rows(), b.cols());
  matrix_product<T>(a.view(), b.view(), c.view(), {}, pool);
  return c;
}

/// @brief a bᵀ as a new matrix: x Wᵀ for W stored (out, in), and Q Kᵀ
template <class T>
[[nodiscard]] dynamic_matrix<T> matrix_product_transposed(const dynamic_matrix<T>& a,
                                                          const dynamic_matrix<T>& b,
                                                          thread_pool* pool = &default_pool()) {
  if (a.cols() != b.cols())
    throw shape_error("matrix_product_transposed: a is " + a.shape() + " and b is " + b.shape() +
                      " (a's columns must equal b's columns)");
  dynamic_matrix<T> c(a.rows(), b.rows());
  matrix_product<T>(a.view(), transposed(b.view()), c.view(), {}, pool);
  return c;
}

}  // namespace qkv::runtime
