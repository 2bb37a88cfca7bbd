// flat_steps.hpp: the steps a learner's page describes (io/page.hpp's page_how), at run-time
// sizes on flat row-major buffers, in the core's arithmetic: what recomputes a `qkv explain` page
// when a learner edits an input, in the page's WebAssembly module (wasm/qkv_wasm.cpp) and natively
// (io/page_recompute.hpp, which checks at page-writing time that each step gives the example's
// own numbers bit for bit before the page lets it recompute anything).
//
// Each function follows the core function it stands for, operation for operation (one rounding
// per product and per sum, summed left to right from the first term; -ffp-contract=off):
//   dot          C(i, j) = sum_m A(i, ac + m) B(j, bc + m) [+ bias(j)]  matrix_product_transposed,
//                                                                        add_row_vector
//   matmul       C(i, j) = sum_m A(i, ac + m) B(br + m, bc + j) [+ bias(j)]  matrix_product
//   attended     matmul of the weights and the values with attended_context's policy: a key whose
//                scaled score is -inf is skipped, a NaN row stays NaN, an infinite value gives
//                its infinity (NaN when +inf and -inf meet) (docs/numerics.md)
//   scale        C = f A (scaled) or A / f (divided), then + added; -inf where `masked` says so
//   softmax      detail::stable_softmax of each row (softmax_rows); naive_softmax: e^a / sum e^a
//                (naive_softmax_rows, the tutorials' formula without the maximum)
//   add, relu    x + y (residual), relu()
//   layer_norm   layer_norm_steps: the mean, the biased variance (two passes), 1 / sqrt(var + eps),
//                (x - mean) inv_std, then times the weight plus the bias
//   transpose    C(i, j) = A(j, i)
//   hconcat      A and B side by side (the heads' contexts: hconcat); block: a block of A (block)
//   rope         rope()'s rotation with the page's cos and sin tables (b, c; n the head's width,
//                ac the rotary width, br 1 for interleaved pairs)
//   row_dot      C(i, 0) = sum_m A(i, ac + m) B(i, bc + m) (row_dots: D = rowsum(dO ∘ O))
//   softmax_backward  C = P (dP - D), exactly 0 where P is 0 (softmax_backward(P, dP, D))
//   softmax_all  detail::stable_softmax of all rows * cols numbers at once (softmax_all: the
//                tutorial's numpy cell, np.exp(s) / np.sum(np.exp(s)), with the maximum subtracted)
//   online_state, online_p, online_output, online_attention
//                flash attention's online softmax (core/online_softmax.hpp), one block of keys
//                at a time: the running state [block max, m, rescale, l, o] after a block
//                (online_softmax_step), a block's p = e^(s - m), o / l (online_softmax_output),
//                and every query's output in blocks of B (online_attention)
//   round16      a float rounded to bfloat16 or float16 and back, exactly (core/half.hpp: as
//                rounded_to then as_float; the 16-bit storage of a batch's q, k and v)
//   interleave, deinterleave  the columns' two halves as pairs (2q, 2q + 1), and back: RoPE's
//                half_split and interleaved layouts of the same numbers (a permutation, copies)
// step() runs one of them by its number (steps::kind), for the module's one C entry point;
// exact_step() the ones that are sums and products only, over exact numbers (a type without
// infinity, NaN, exp or sqrt: qkv::exact::rational, the exact pages 01b and 15).
#pragma once

#include <cstddef>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include "adamw.hpp"
#include "fail.hpp"
#include "half.hpp"
#include "math.hpp"
#include "softmax.hpp"

namespace qkv::flat {

/// C(i, j) = sum_m A(i, ac + m) B(j, bc + m) [+ bias(j)]: A has `as` columns, B `bs`; C (rows, cols)
template <class T>
constexpr void dot(const T* a, std::size_t as, const T* b, std::size_t bs, std::size_t rows, std::size_t cols,
                   std::size_t n, std::size_t ac, std::size_t bc, const T* bias, T* out) {
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) {
      T s = a[i * as + ac] * b[j * bs + bc];
      for (std::size_t m = 1; m < n; ++m) s += a[i * as + ac + m] * b[j * bs + bc + m];
      out[i * cols + j] = bias ? T(s + bias[j]) : s;
    }
}

/// C(i, j) = sum_m A(i, ac + m) B(br + m, bc + j) [+ bias(j)]
template <class T>
constexpr void matmul(const T* a, std::size_t as, const T* b, std::size_t bs, std::size_t rows,
                      std::size_t cols, std::size_t n, std::size_t ac, std::size_t br, std::size_t bc,
                      const T* bias, T* out) {
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) {
      T s = a[i * as + ac] * b[br * bs + bc + j];
      for (std::size_t m = 1; m < n; ++m) s += a[i * as + ac + m] * b[(br + m) * bs + bc + j];
      out[i * cols + j] = bias ? T(s + bias[j]) : s;
    }
}

/// @brief the context of weights w (rows, n; row stride ws) over values v (row stride vs, from
/// column vc), attended_context's policy (the top of this file): key m is skipped where
/// scaled(i, m) (row stride ss) is -inf. C (rows, cols), row stride os.
template <class T>
constexpr void attended(const T* w, std::size_t ws, const T* scaled, std::size_t ss, const T* v,
                        std::size_t vs, std::size_t vc, std::size_t rows, std::size_t n, std::size_t cols,
                        T* out, std::size_t os) {
  const T inf = std::numeric_limits<T>::infinity();
  for (std::size_t i = 0; i < rows; ++i) {
    const bool nan_row = w[i * ws] != w[i * ws];
    for (std::size_t c = 0; c < cols; ++c) {
      T s = T(0);
      if (nan_row) {
        s = std::numeric_limits<T>::quiet_NaN();
      } else {
        bool first = true;
        unsigned seen = 0;  // 1 NaN, 2 +inf, 4 -inf
        for (std::size_t j = 0; j < n; ++j) {
          if (scaled[i * ss + j] == -inf) continue;  // masked: skipped
          const T xv = v[j * vs + vc + c];
          if (xv != xv) {
            seen |= 1;
          } else if (xv == inf) {
            seen |= 2;
          } else if (xv == -inf) {
            seen |= 4;
          } else if (first) {
            s = w[i * ws + j] * xv;
            first = false;
          } else {
            s += w[i * ws + j] * xv;
          }
        }
        if ((seen & 1) || seen == 6) s = std::numeric_limits<T>::quiet_NaN();
        if (seen == 2) s = inf;
        if (seen == 4) s = -inf;
      }
      out[i * os + c] = s;
    }
  }
}

/// C = f A (divide false) or A / f (divide true), then + added(i, j) when added is given; -inf
/// where masked (rows x cols bytes, or null) is nonzero. A, added and C are (rows, cols).
template <class T>
constexpr void scale(const T* a, std::size_t rows, std::size_t cols, T f, bool divide,
                     const unsigned char* masked, const T* added, T* out) {
  for (std::size_t k = 0; k < rows * cols; ++k) {
    if (masked && masked[k]) {
      out[k] = -std::numeric_limits<T>::infinity();
      continue;
    }
    const T s = divide ? T(a[k] / f) : T(f * a[k]);
    out[k] = added ? T(s + added[k]) : s;
  }
}

/// the softmax of each row of A (rows, cols)
template <class T>
constexpr void softmax(const T* a, std::size_t rows, std::size_t cols, T* out) {
  for (std::size_t i = 0; i < rows; ++i) qkv::detail::stable_softmax(a + i * cols, out + i * cols, cols, 1);
}

/// the textbook softmax of each row of A (rows, cols): e^a / sum e^a, no maximum subtracted
/// (naive_softmax_rows: a row with a score above log(max) overflows to NaN)
template <class T>
constexpr void naive_softmax(const T* a, std::size_t rows, std::size_t cols, T* out) {
  for (std::size_t i = 0; i < rows; ++i) {
    T s = T(0);
    for (std::size_t j = 0; j < cols; ++j) {
      out[i * cols + j] = qkv::exp(a[i * cols + j]);
      s += out[i * cols + j];
    }
    for (std::size_t j = 0; j < cols; ++j) out[i * cols + j] = out[i * cols + j] / s;
  }
}

/// C = A + B, n numbers
template <class T>
constexpr void add(const T* a, const T* b, std::size_t n, T* out) {
  for (std::size_t k = 0; k < n; ++k) out[k] = a[k] + b[k];
}

/// C = max(0, A): NaN stays NaN, -0 gives 0 (core/layers.hpp's relu)
template <class T>
constexpr void relu(const T* a, std::size_t n, T* out) {
  for (std::size_t k = 0; k < n; ++k) out[k] = a[k] > T(0) ? a[k] : (a[k] != a[k] ? a[k] : T(0));
}

/// LayerNorm of each row of A (rows, cols) with weight and bias (cols each), layer_norm_steps' order
template <class T>
constexpr void layer_norm(const T* a, std::size_t rows, std::size_t cols, T eps, const T* weight,
                          const T* bias, T* out) {
  for (std::size_t i = 0; i < rows; ++i) {
    const T* xi = a + i * cols;
    T s = xi[0];
    for (std::size_t j = 1; j < cols; ++j) s += xi[j];
    const T mean = s / T(cols);
    T q = T(0);
    for (std::size_t j = 0; j < cols; ++j) {
      const T c = xi[j] - mean;
      q += c * c;
    }
    const T variance = q / T(cols);
    const T inv_std = T(1) / qkv::sqrt(T(variance + eps));
    for (std::size_t j = 0; j < cols; ++j) {
      const T n = (xi[j] - mean) * inv_std;
      out[i * cols + j] = n * weight[j] + bias[j];
    }
  }
}

/// C (cols, rows) = Aᵀ, A (rows, cols)
template <class T>
constexpr void transpose(const T* a, std::size_t rows, std::size_t cols, T* out) {
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) out[j * rows + i] = a[i * cols + j];
}

/// C (rows, ac + bc) = A (rows, ac) and B (rows, bc) side by side (hconcat)
template <class T>
constexpr void hconcat(const T* a, std::size_t ac, const T* b, std::size_t bc, std::size_t rows, T* out) {
  for (std::size_t i = 0; i < rows; ++i) {
    for (std::size_t j = 0; j < ac; ++j) out[i * (ac + bc) + j] = a[i * ac + j];
    for (std::size_t j = 0; j < bc; ++j) out[i * (ac + bc) + ac + j] = b[i * bc + j];
  }
}

/// C (rows, cols) = A(br + i, bc + j), A with `as` columns: a block of A
template <class T>
constexpr void block(const T* a, std::size_t as, std::size_t rows, std::size_t cols, std::size_t br,
                     std::size_t bc, T* out) {
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) out[i * cols + j] = a[(br + i) * as + bc + j];
}

/// @brief RoPE of each row i of A (rows, cols), rope()'s arithmetic: in each head of head_dim
/// columns, pair q of its first rotary_dim ones (interleaved: 2q and 2q + 1; else q and
/// q + rotary_dim / 2) becomes (a cos - b sin, b cos + a sin), cos and sin the tables' (i, q)
/// (row stride ts); the columns past rotary_dim are copied
template <class T>
constexpr void rope(const T* a, std::size_t rows, std::size_t cols, const T* cos, const T* sin,
                    std::size_t ts, std::size_t head_dim, std::size_t rotary_dim, bool interleaved, T* out) {
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t h0 = 0; h0 + head_dim <= cols; h0 += head_dim) {
      for (std::size_t c = rotary_dim; c < head_dim; ++c) out[i * cols + h0 + c] = a[i * cols + h0 + c];
      for (std::size_t q = 0; q < rotary_dim / 2; ++q) {
        const std::size_t f = h0 + (interleaved ? 2 * q : q),
                          g = h0 + (interleaved ? 2 * q + 1 : q + rotary_dim / 2);
        const T c = cos[i * ts + q], s = sin[i * ts + q], x = a[i * cols + f], y = a[i * cols + g];
        out[i * cols + f] = x * c - y * s;
        out[i * cols + g] = y * c + x * s;
      }
    }
}

/// C(i, 0) = sum_m A(i, ac + m) B(i, bc + m), rows numbers
template <class T>
constexpr void row_dot(const T* a, std::size_t as, const T* b, std::size_t bs, std::size_t rows,
                       std::size_t n, std::size_t ac, std::size_t bc, T* out) {
  for (std::size_t i = 0; i < rows; ++i) {
    T s = a[i * as + ac] * b[i * bs + bc];
    for (std::size_t m = 1; m < n; ++m) s += a[i * as + ac + m] * b[i * bs + bc + m];
    out[i] = s;
  }
}

/// C = P (dP - D(i)), exactly 0 where P is 0; P, dP, C (rows, cols), D (rows)
template <class T>
constexpr void softmax_backward(const T* p, const T* dp, const T* d, std::size_t rows, std::size_t cols,
                                T* out) {
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) {
      const T w = p[i * cols + j];
      out[i * cols + j] = w == T(0) ? T(0) : T(w * T(dp[i * cols + j] - d[i]));
    }
}

/// @brief the softmax over all rows * cols numbers of A at once, row-major (softmax_all: the whole
/// matrix sums to 1, a row does not). A (rows, cols) -> C (rows, cols)
template <class T>
constexpr void softmax_all(const T* a, std::size_t rows, std::size_t cols, T* out) {
  qkv::detail::stable_softmax(a, out, rows * cols, 1);
}

/// @brief flash attention's online softmax, one block of n keys (online_softmax_step's arithmetic,
/// operation for operation), in place: st = [block max, m, rescale, l] and o (dv numbers) the
/// running state, before the first block [-inf, -inf, 0, 0] and o = 0; s the block's n scores, v
/// the values (row stride vs) from the block's first key. A NaN state stays NaN; a NaN score
/// makes every number of the state NaN; a masked key (-inf) adds nothing
template <class T>
constexpr void online_step(T* st, T* o, const T* s, std::size_t n, const T* v, std::size_t vs,
                           std::size_t dv) {
  const T inf = std::numeric_limits<T>::infinity();
  const T m_old = st[1];
  if (m_old != m_old) return;
  T block_max = -inf;
  for (std::size_t j = 0; j < n; ++j) {
    if (s[j] != s[j]) {  // online_nan_state
      for (std::size_t k = 0; k < 4; ++k) st[k] = s[j];
      for (std::size_t c = 0; c < dv; ++c) o[c] = s[j];
      return;
    }
    if (block_max < s[j]) block_max = s[j];
  }
  st[0] = block_max;
  const T m_new = m_old < block_max ? block_max : m_old;
  if (m_new == -inf) {  // every key so far masked: nothing to add
    st[2] = T(1);
    return;
  }
  T row_sum = T(0);
  for (std::size_t j = 0; j < n; ++j) row_sum += s[j] == -inf ? T(0) : qkv::exp(T(s[j] - m_new));
  // e^(m_old - m_new): 0 when nothing was kept yet (m_old = -inf), 1 when the maximum stayed
  const T alpha = m_old == -inf ? T(0) : qkv::exp(T(m_old - m_new));
  st[3] = alpha == T(1) ? T(st[3] + row_sum) : T(st[3] * alpha + row_sum);
  for (std::size_t c = 0; c < dv; ++c) {
    T acc = alpha == T(1) ? o[c] : T(o[c] * alpha);
    for (std::size_t j = 0; j < n; ++j)
      acc = acc + (s[j] == -inf ? T(0) : qkv::exp(T(s[j] - m_new))) * v[j * vs + c];
    o[c] = acc;
  }
  st[1] = m_new;
  st[2] = alpha;
}

/// the state before the first block: [block max, m, rescale, l] = [-inf, -inf, 0, 0], o = 0
template <class T>
constexpr void online_start(T* st, T* o, std::size_t dv) {
  st[0] = st[1] = -std::numeric_limits<T>::infinity();
  st[2] = st[3] = T(0);
  for (std::size_t c = 0; c < dv; ++c) o[c] = T(0);
}

/// @brief the state after a block as one row (1, 4 + dv) = [block max, m, rescale, l, o]: prev
/// the row before it (null: the first block), s its n scores, v the values (row stride vs) from
/// its first key
template <class T>
constexpr void online_state(const T* prev, const T* s, std::size_t n, const T* v, std::size_t vs,
                            std::size_t dv, T* out) {
  if (prev == nullptr)
    online_start(out, out + 4, dv);
  else
    for (std::size_t k = 0; k < 4 + dv; ++k) out[k] = prev[k];
  online_step(out, out + 4, s, n, v, vs, dv);
}

/// p_j = e^(s_j - m) of n scores against the running maximum m (0 for a masked key, -inf)
template <class T>
constexpr void online_p(const T* s, std::size_t n, T m, T* out) {
  for (std::size_t j = 0; j < n; ++j)
    out[j] = s[j] == -std::numeric_limits<T>::infinity() ? T(0) : qkv::exp(T(s[j] - m));
}

/// o / l, dv numbers (online_softmax_output): o itself when l is NaN, 0 when l is 0 (no key yet)
template <class T>
constexpr void online_output(const T* o, T l, std::size_t dv, T* out) {
  for (std::size_t c = 0; c < dv; ++c) out[c] = l != l ? o[c] : l == T(0) ? T(0) : T(o[c] / l);
}

/// @brief every query's flash output (online_attention): the scores (rows, n) over the values
/// (n, dv) in blocks of b >= 1 keys, the last block the rest; C (rows, dv)
template <class T>
constexpr void online_attention(const T* scores, std::size_t rows, std::size_t n, const T* v, std::size_t dv,
                                std::size_t b, T* out) {
  for (std::size_t i = 0; i < rows; ++i) {
    T st[4]{};
    T* o = out + i * dv;  // the running o, then o / l in place
    online_start(st, o, dv);
    for (std::size_t j0 = 0; j0 < n; j0 += b)
      online_step(st, o, scores + i * n + j0, n - j0 < b ? n - j0 : b, v + j0 * dv, dv, dv);
    online_output(o, st[3], dv, o);
  }
}

/// @brief each of n floats rounded to the 16-bit type S (bfloat16 or float16: to nearest, ties
/// to even, a NaN quiet, an infinity kept) and converted back to float, exactly: the float value
/// of rounded_to<S>, as as_float reads it
template <class S>
constexpr void round16(const float* a, std::size_t n, float* out) {
  for (std::size_t k = 0; k < n; ++k) out[k] = static_cast<float>(S(a[k]));
}

/// C(i, 2q) = A(i, q), C(i, 2q + 1) = A(i, q + cols / 2): the two halves of each row as pairs
/// (half_split's pair q becomes interleaved pair q); A, C (rows, cols), cols even
template <class T>
constexpr void interleave(const T* a, std::size_t rows, std::size_t cols, T* out) {
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t q = 0; q < cols / 2; ++q) {
      out[i * cols + 2 * q] = a[i * cols + q];
      out[i * cols + 2 * q + 1] = a[i * cols + q + cols / 2];
    }
}

/// C(i, q) = A(i, 2q), C(i, q + cols / 2) = A(i, 2q + 1): interleave's inverse
template <class T>
constexpr void deinterleave(const T* a, std::size_t rows, std::size_t cols, T* out) {
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t q = 0; q < cols / 2; ++q) {
      out[i * cols + q] = a[i * cols + 2 * q];
      out[i * cols + q + cols / 2] = a[i * cols + 2 * q + 1];
    }
}

/// the steps by number, for one entry point (wasm/qkv_wasm.cpp's qkv_step_f32 / _f64)
enum class kind : int {
  dot = 1,
  matmul = 2,
  attended = 3,
  scale = 4,
  divide = 5,
  softmax = 6,
  add = 7,
  relu = 8,
  layer_norm = 9,
  transpose = 10,
  row_dot = 11,
  softmax_backward = 12,
  hconcat = 13,
  naive_softmax = 14,
  block = 15,
  rope = 16,
  // 17-39: steps that recompute what an example computes outside attention's own steps
  softmax_all = 17,
  online_state = 18,
  online_p = 19,
  online_output = 20,
  online_attention = 21,
  round_bfloat16 = 22,
  round_float16 = 23,
  interleave = 24,
  deinterleave = 25,
};

/// @brief the sizes and offsets of one step (the page_how's): C is (rows, cols); A has `as`
/// columns and B `bs`; n terms per sum from A's column ac and B's row br / column bc
struct step_sizes {
  std::size_t rows = 0, cols = 0, as = 0, bs = 0, n = 0, ac = 0, br = 0, bc = 0;
};

/// @brief one step of kind k into out: a, b and c are its operands (c: the bias of dot and
/// matmul, the scaled scores of attended, the added terms of scale and divide, LayerNorm's bias,
/// D of softmax_backward, the state before the block of online_state; b: LayerNorm's weight),
/// `scalar` the factor, divisor or eps, masked the scale's mask (or null). The online softmax's
/// kinds: online_state C (rows, 4 + dv) from the n scores of A from column ac, the values B (dv
/// = bs columns) from row br and the state before (c, or null: the first block); online_p C
/// (rows, cols) = e^(A(i, ac + j) - m) with m = B(i, 1) (a state: [block max, m, rescale, l]);
/// online_output C (rows, cols) = A / l with l = B(i, 3); online_attention C (rows, cols) every
/// row of A (as scores) over B in blocks of n keys. Returns 0, or 1 for an unknown kind or an
/// online_attention block of 0 keys, or a 16-bit rounding of a type other than float (nothing
/// written: round_bfloat16 and round_float16 C = A rounded to bfloat16 or float16, back in float).
template <class T>
constexpr int step(kind k, const T* a, const T* b, const T* c, const unsigned char* masked,
                   const step_sizes& z, T scalar, T* out) {
  switch (k) {
    case kind::dot: dot(a, z.as, b, z.bs, z.rows, z.cols, z.n, z.ac, z.bc, c, out); return 0;
    case kind::matmul: matmul(a, z.as, b, z.bs, z.rows, z.cols, z.n, z.ac, z.br, z.bc, c, out); return 0;
    case kind::attended:
      attended(a, z.as, c, z.as, b + z.br * z.bs, z.bs, z.bc, z.rows, z.n, z.cols, out, z.cols);
      return 0;
    case kind::scale: scale(a, z.rows, z.cols, scalar, false, masked, c, out); return 0;
    case kind::divide: scale(a, z.rows, z.cols, scalar, true, masked, c, out); return 0;
    case kind::softmax: softmax(a, z.rows, z.cols, out); return 0;
    case kind::add: add(a, b, z.rows * z.cols, out); return 0;
    case kind::relu: relu(a, z.rows * z.cols, out); return 0;
    case kind::layer_norm: layer_norm(a, z.rows, z.cols, scalar, b, c, out); return 0;
    case kind::transpose: transpose(a, z.cols, z.rows, out); return 0;
    case kind::row_dot: row_dot(a, z.as, b, z.bs, z.rows, z.n, z.ac, z.bc, out); return 0;
    case kind::softmax_backward: softmax_backward(a, b, c, z.rows, z.cols, out); return 0;
    case kind::hconcat: hconcat(a, z.as, b, z.bs, z.rows, out); return 0;
    case kind::naive_softmax: naive_softmax(a, z.rows, z.cols, out); return 0;
    case kind::block: block(a, z.as, z.rows, z.cols, z.br, z.bc, out); return 0;
    case kind::rope: rope(a, z.rows, z.cols, b, c, z.bs, z.n, z.ac, z.br != 0, out); return 0;
    case kind::softmax_all: softmax_all(a, z.rows, z.cols, out); return 0;
    case kind::online_state:
      for (std::size_t i = 0; i < z.rows; ++i)
        online_state(c ? c + i * z.cols : nullptr, a + i * z.as + z.ac, z.n, b + z.br * z.bs, z.bs, z.bs,
                     out + i * z.cols);
      return 0;
    case kind::online_p:
      for (std::size_t i = 0; i < z.rows; ++i)
        online_p(a + i * z.as + z.ac, z.cols, b[i * z.bs + 1], out + i * z.cols);
      return 0;
    case kind::online_output:
      for (std::size_t i = 0; i < z.rows; ++i)
        online_output(a + i * z.as, b[i * z.bs + 3], z.cols, out + i * z.cols);
      return 0;
    case kind::online_attention:
      if (z.n == 0) return 1;
      online_attention(a, z.rows, z.as, b, z.cols, z.n, out);
      return 0;
    case kind::interleave: interleave(a, z.rows, z.cols, out); return 0;
    case kind::deinterleave: deinterleave(a, z.rows, z.cols, out); return 0;
    case kind::round_bfloat16:
    case kind::round_float16:
      if constexpr (std::is_same_v<T, float>) {
        if (k == kind::round_bfloat16)
          round16<qkv::bfloat16>(a, z.rows * z.cols, out);
        else
          round16<qkv::float16>(a, z.rows * z.cols, out);
        return 0;
      } else {
        return 1;
      }
  }
  return 1;
}

/// @brief one step of kind k over exact numbers T (qkv::exact::rational: every sum and product
/// exact, an overflow an error of T's own): the kinds that are sums, products and copies only,
/// dot, matmul (their bias in c), add, transpose, hconcat, block, interleave, deinterleave, row_dot
/// and softmax_backward (D in c), computed by the same functions as step(). A product or sum in any order is the same
/// rational, so nothing here depends on the order of the terms. Returns 0, or 1 for a kind that
/// has no exact form (attended, scale, divide, softmax, naive_softmax, relu, layer_norm, rope,
/// softmax_all, the online softmax's, the 16-bit roundings: infinities, exp, sqrt, a float factor or
/// a float's rounding), nothing written.
template <class T>
constexpr int exact_step(kind k, const T* a, const T* b, const T* c, const step_sizes& z, T* out) {
  switch (k) {
    case kind::dot: dot(a, z.as, b, z.bs, z.rows, z.cols, z.n, z.ac, z.bc, c, out); return 0;
    case kind::matmul: matmul(a, z.as, b, z.bs, z.rows, z.cols, z.n, z.ac, z.br, z.bc, c, out); return 0;
    case kind::add: add(a, b, z.rows * z.cols, out); return 0;
    case kind::transpose: transpose(a, z.cols, z.rows, out); return 0;
    case kind::row_dot: row_dot(a, z.as, b, z.bs, z.rows, z.n, z.ac, z.bc, out); return 0;
    case kind::softmax_backward: softmax_backward(a, b, c, z.rows, z.cols, out); return 0;
    case kind::hconcat: hconcat(a, z.as, b, z.bs, z.rows, out); return 0;
    case kind::block: block(a, z.as, z.rows, z.cols, z.br, z.bc, out); return 0;
    case kind::interleave: interleave(a, z.rows, z.cols, out); return 0;
    case kind::deinterleave: deinterleave(a, z.rows, z.cols, out); return 0;
    default: return 1;
  }
}

// ---- steps from one type to another (kinds 40-59): a page whose steps mix float32, float64
// and exact rationals (io/page_recompute.hpp; the module's qkv_cast, wasm/qkv_wasm.cpp) ----

/// kind 40, cast: C (rows, cols) = A (rows, cols) in C's type, each value by static_cast, as
/// matrix_cast converts: float32 -> float64 (exact), a float -> an exact rational of its exact
/// value (rational's explicit constructor: rational::exactly). Not a kind of step() or
/// exact_step(): its operand has another type than its result (the module's qkv_cast)
inline constexpr kind cast_kind = static_cast<kind>(40);

/// C = A converted to To, n numbers: `To(a[k])` (matrix_cast's conversion, value for value)
template <class From, class To>
constexpr void cast(const From* a, std::size_t n, To* out) {
  for (std::size_t k = 0; k < n; ++k) out[k] = static_cast<To>(a[k]);
}

/// kind 41, column_sums: C (1, cols) = the sum of each column of A (rows, cols): row 0, then
/// + row 1, ... (matrix.hpp's column_sums: a bias's gradient, d_b = column sums of dY)
inline constexpr kind column_sums_kind = static_cast<kind>(41);

/// C(0, j) = A(0, j) + A(1, j) + ... + A(rows - 1, j), left to right
template <class T>
constexpr void column_sums(const T* a, std::size_t rows, std::size_t cols, T* out) {
  for (std::size_t j = 0; j < cols; ++j) out[j] = a[j];
  for (std::size_t i = 1; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) out[j] += a[i * cols + j];
}

/// kind 42, sgd: C = W - lr G, one rounding per element (sgd.hpp's sgd_step, torch.optim.SGD's
/// step: qkv::fma(-lr, g, w)); W, G, C (rows, cols), lr in their type
inline constexpr kind sgd_kind = static_cast<kind>(42);

/// C(k) = fma(-lr, G(k), W(k)), n numbers
template <class T>
constexpr void sgd(const T* w, const T* g, std::size_t n, T lr, T* out) {
  for (std::size_t k = 0; k < n; ++k) out[k] = qkv::fma(T(-lr), g[k], w[k]);
}

/// kind 43, cross_entropy_losses: C (rows, 1) = each position's loss -log softmax(A)(i, t_i),
/// computed as cross_entropy computes it (core/cross_entropy.hpp): m_i the row's maximum, then
/// log(sum_j e^(A(i, j) - m_i)) - (A(i, t_i) - m_i). A: the logits (rows, cols); targets: t_i as
/// numbers of A's type (1, rows); a target that is not an id in [0, cols) fails as
/// cross_entropy's does
inline constexpr kind cross_entropy_kind = static_cast<kind>(43);

/// C(i) = log(sum_j e^(A(i, j) - m_i)) - (A(i, t_i) - m_i), m_i = max_j A(i, j)
template <class T>
constexpr void cross_entropy_losses(const T* logits, const T* targets, std::size_t rows, std::size_t cols,
                                    T* out) {
  for (std::size_t i = 0; i < rows; ++i) {
    const T tv = targets[i];
    if (!(tv >= T(0) && tv < T(cols)) || tv != T(static_cast<std::size_t>(tv)))
      qkv::detail::fail<std::out_of_range>(
          "cross_entropy: a target id is outside the vocabulary (the logits' columns)");
    const std::size_t t = static_cast<std::size_t>(tv);
    const T* l = logits + i * cols;
    T m = l[0];
    for (std::size_t j = 1; j < cols; ++j) m = l[j] > m ? l[j] : m;
    T s = T(0);
    for (std::size_t j = 0; j < cols; ++j) s += qkv::exp(T(l[j] - m));
    out[i] = T(qkv::log(s) - T(l[t] - m));
  }
}

/// kind 44, embedding_backward: C (rows, cols) = the gradient of an embedding table from d_out
/// (len, cols) and the ids (1, len, as numbers of C's type), as embed_backward computes it
/// (core/embedding_backward.hpp, nn.Embedding's EmbeddingBackward0): C = 0, then for k = 0, 1, ...
/// row ids(k) of C += row k of d_out. An id that is not in [0, rows) fails as embed_backward's does
inline constexpr kind embedding_backward_kind = static_cast<kind>(44);

/// C = 0, then C(ids(k), j) += d_out(k, j) for k = 0 .. len - 1
template <class T>
constexpr void embedding_backward(const T* d_out, const T* ids, std::size_t len, std::size_t rows,
                                  std::size_t cols, T* out) {
  for (std::size_t k = 0; k < rows * cols; ++k) out[k] = T(0);
  for (std::size_t k = 0; k < len; ++k) {
    const T id = ids[k];
    if (!(id >= T(0) && id < T(rows)) || id != T(static_cast<std::size_t>(id)))
      qkv::detail::fail<std::out_of_range>(
          "embed_backward: a token id is outside the embedding table's rows");
    const std::size_t r = static_cast<std::size_t>(id);
    for (std::size_t j = 0; j < cols; ++j) out[r * cols + j] += d_out[k * cols + j];
  }
}

/// kind 45, embedding: C (len, cols) = the rows ids(k) of the table A (rows, cols), as embed
/// computes it (core/sequence.hpp, nn.Embedding's forward); the ids (1, len) as numbers of C's
/// type. An id that is not in [0, rows) fails as embed's does
inline constexpr kind embedding_kind = static_cast<kind>(45);

/// C(k, j) = A(ids(k), j)
template <class T>
constexpr void embedding(const T* table, const T* ids, std::size_t len, std::size_t rows, std::size_t cols,
                         T* out) {
  for (std::size_t k = 0; k < len; ++k) {
    const T id = ids[k];
    if (!(id >= T(0) && id < T(rows)) || id != T(static_cast<std::size_t>(id)))
      qkv::detail::fail<std::out_of_range>("embed: a token id is outside the embedding table's rows");
    const std::size_t r = static_cast<std::size_t>(id);
    for (std::size_t j = 0; j < cols; ++j) out[k * cols + j] = table[r * cols + j];
  }
}

/// kind 53, key_padding_mask: C (rows, cols) = 1 where key j of sequence b is padding (j >=
/// lengths(b)), else 0, as numbers of C's type (batch.hpp's key_padding_mask<B, N>, true = 1);
/// the lengths (1, rows) as numbers of C's type. A length that is not a whole number from 0 to
/// cols fails as the batch functions' check of the lengths does
inline constexpr kind key_padding_mask_kind = static_cast<kind>(53);

/// C(b, j) = 1 when j >= lengths(b), else 0
template <class T>
constexpr void key_padding_mask(const T* lengths, std::size_t rows, std::size_t cols, T* out) {
  for (std::size_t b = 0; b < rows; ++b) {
    const T len = lengths[b];
    if (!(len >= T(0) && len <= T(cols)) || len != T(static_cast<std::size_t>(len)))
      qkv::detail::fail<std::length_error>(
          "key_padding_mask: a length is not a whole number from 0 to the sequences' padded length");
    const std::size_t n = static_cast<std::size_t>(len);
    for (std::size_t j = 0; j < cols; ++j) out[b * cols + j] = j >= n ? T(1) : T(0);
  }
}

/// kind 54, padded_divide: C (rows, cols) = A / f (+ added), as divide (kind 5, with its own
/// `masked` cells), then -inf in every column j where row br of a key padding mask (stride bs,
/// kind 53's numbers) is not 0: a padded sequence's scaled scores as attend_padded masks them
/// (scaled, then j >= length set to -inf), the mask read from the page so that a length moves it
inline constexpr kind padded_divide_kind = static_cast<kind>(54);

/// divide's C, then C(i, j) = -inf for every i where padding(br, j) != 0
template <class T>
constexpr void padded_divide(const T* a, const T* padding, std::size_t bs, std::size_t br, std::size_t rows,
                             std::size_t cols, T f, const unsigned char* masked, const T* added, T* out) {
  scale(a, rows, cols, f, true, masked, added, out);
  for (std::size_t j = 0; j < cols; ++j)
    if (padding[br * bs + j] != T(0))
      for (std::size_t i = 0; i < rows; ++i) out[i * cols + j] = -std::numeric_limits<T>::infinity();
}

// ---- flash attention's statistics and backward, block by block (kinds 46-52: example 16's
// steps 3, 4 and 8; core/flash_backward.hpp). The backward's loop recomputes, for each block of
// keys and each live query, P = e^(s - m) / l (or e^(s - L)), dP = dO · v, dS = P (dP - D), the
// scores' gradient dS / scale, then adds d_score k to dQ, d_score q to dK and P dO to dV, keys
// and queries ascending, a masked key (-inf) skipped. A page writes that loop as steps: P
// (flash_weights or logsumexp_weights), dP (a dot), dS (softmax_backward), its scale (divide),
// then the three sums in the loop's order (flash_over_keys, flash_over_queries): every operation
// the loop does, in its order, so the bits are the loop's (tests/core/flat_steps_test.cpp) ----

/// kind 46, flash_row_max: C (rows, 1) = m_i, the running maximum of flash attention's online
/// softmax after its last block (flash_attention_forward's row_max), from the scores A (rows, as)
/// in blocks of n >= 1 keys: -inf for a fully masked row, NaN for a row with a NaN
inline constexpr kind flash_row_max_kind = static_cast<kind>(46);

/// kind 47, flash_row_sum: C (rows, 1) = l_i, the running sum e^(s - m) after the last block,
/// rescaled at each new maximum (flash_attention_forward's row_sum): 0 for a fully masked row
inline constexpr kind flash_row_sum_kind = static_cast<kind>(47);

/// @brief column `which` (1: m, 3: l) of the online softmax's state after every block of b keys of
/// each row of the scores (rows, n): online_step without values, as flash_attention_forward runs
/// online_softmax_step; b >= 1
template <class T>
constexpr void flash_statistic(const T* scores, std::size_t rows, std::size_t n, std::size_t b,
                               std::size_t which, T* out) {
  for (std::size_t i = 0; i < rows; ++i) {
    T st[4]{};
    online_start(st, static_cast<T*>(nullptr), 0);
    for (std::size_t j0 = 0; j0 < n; j0 += b)
      online_step(st, static_cast<T*>(nullptr), scores + i * n + j0, n - j0 < b ? n - j0 : b,
                  static_cast<const T*>(nullptr), 0, 0);
    out[i] = st[which];
  }
}

/// kind 48, flash_weights: C (rows, cols) = P_ij = e^(A(i, j) - m_i) / l_i, the weight flash's
/// backward recomputes from m = B (rows, 1) and l = C (rows, 1); 0 for a masked key (-inf) and
/// in a fully masked row (l = 0), which the backward skips
inline constexpr kind flash_weights_kind = static_cast<kind>(48);

/// kind 49, logsumexp: C (rows, 1) = L_i = m_i + log l_i from m = A and l = B (row_logsumexp,
/// FlashAttention-2's one number per query); -inf for a fully masked row (l = 0)
inline constexpr kind logsumexp_kind = static_cast<kind>(49);

/// kind 50, logsumexp_weights: C (rows, cols) = P_ij = e^(A(i, j) - L_i) from L = B (rows, 1), the
/// weight the logsumexp backward recomputes; 0 for a masked key and in a row with L = -inf
inline constexpr kind logsumexp_weights_kind = static_cast<kind>(50);

/// @brief P from the scores s (rows, cols) and per row m, l (l null: L = m, P = e^(s - L), 0 where
/// L = -inf) or m and l (P = e^(s - m) / l, 0 where l = 0); 0 where s = -inf
template <class T>
constexpr void flash_weights(const T* s, const T* m, const T* l, std::size_t rows, std::size_t cols, T* out) {
  const T inf = std::numeric_limits<T>::infinity();
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) {
      const T x = s[i * cols + j];
      const bool dead = l ? l[i] == T(0) : m[i] == -inf;
      out[i * cols + j] = dead || x == -inf ? T(0)
                          : l               ? T(qkv::exp(T(x - m[i])) / l[i])
                                            : T(qkv::exp(T(x - m[i])));
    }
}

/// C(i) = m_i + log l_i, -inf where l_i = 0 (row_logsumexp)
template <class T>
constexpr void logsumexp(const T* m, const T* l, std::size_t rows, T* out) {
  for (std::size_t i = 0; i < rows; ++i)
    out[i] = l[i] == T(0) ? -std::numeric_limits<T>::infinity() : T(m[i] + qkv::log(l[i]));
}

/// kind 51, flash_over_keys: C (rows, cols) = sum over the keys j = 0 .. n - 1 of A(i, j) B(j, c),
/// skipping a key whose score S(i, j) is -inf (S = the c operand, A's shape; A has `as` columns, B
/// `bs`): flash's dQ = sum_j d_score_ij k_j, summed as its loop sums, from the first key it keeps
/// (0 when it keeps none)
inline constexpr kind flash_over_keys_kind = static_cast<kind>(51);

/// kind 52, flash_over_queries: C (rows, cols) = sum over the queries i = 0 .. n - 1 of A(i, j)
/// B(i, c), skipping a query whose score S(i, j) is -inf: flash's dK = sum_i d_score_ij q_i and
/// dV = sum_i P_ij dO_i, summed as its loop sums
inline constexpr kind flash_over_queries_kind = static_cast<kind>(52);

/// @brief the loop's sums: over_keys C(r, c) = sum_t A(r, t) B(t, c), else C(r, c) = sum_t A(t, r)
/// B(t, c), t ascending, t skipped where S (A's layout, `as` columns) is -inf; the first term kept
/// is the sum's start (flash_backward_loop's first_q / first_kv), 0 when none is kept
template <class T>
constexpr void flash_sum(const T* a, std::size_t as, const T* b, std::size_t bs, const T* s, std::size_t rows,
                         std::size_t cols, std::size_t n, bool over_keys, T* out) {
  const T inf = std::numeric_limits<T>::infinity();
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) {
      T acc = T(0);
      bool started = false;
      for (std::size_t t = 0; t < n; ++t) {
        const std::size_t at = over_keys ? r * as + t : t * as + r;
        if (s[at] == -inf) continue;
        const T term = a[at] * b[t * bs + c];
        acc = started ? T(acc + term) : term;
        started = true;
      }
      out[r * cols + c] = acc;
    }
}

/// kind 57, adamw: C = W after the first step of torch.optim.AdamW from zero moments (m = v =
/// 0, step 1), as adamw_step computes it (core/adamw.hpp's adamw_element, the same function):
/// W and G (rows, cols), S (1, 8) the step's scalars in W's type, as adamw_step_scalars converts
/// them from the options: [1 - lr wd, beta1, 1 - beta1, beta2, 1 - beta2, -(lr / bc1),
/// sqrt(bc2), eps] (the options are Python doubles: a step in float32 cannot hold them, the
/// scalars the kernels see it can)
inline constexpr kind adamw_kind = static_cast<kind>(57);

/// C(k) = W(k) decay + step_size m / (sqrt(v) / bc2_sqrt + eps), m = (1 - beta1) G(k), v = (1 -
/// beta2) G(k) G(k), each operation rounded as adamw_element rounds it; n numbers
template <class T>
constexpr void adamw(const T* w, const T* g, const T* s, std::size_t n, T* out) {
  const qkv::adamw_scalars<T> sc{s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]};
  for (std::size_t k = 0; k < n; ++k) {
    T m = T(0), v = T(0);
    qkv::adamw_element(w[k], g[k], T(0), T(0), sc, out[k], m, v);
  }
}

/// @brief step(), and the kinds numbered 40-59 that are steps in one type (column_sums: a, the
/// sizes' rows and cols of C and n rows of A; sgd: W in a, G in b, lr in scalar;
/// cross_entropy_losses: the logits in a, the targets in b, n the logits' columns;
/// embedding_backward: d_out in a, the ids in b, n their number; embedding: the table in a, the
/// ids in b, n the table's rows; key_padding_mask: the lengths in a; padded_divide: the scores in
/// a, the mask in b (bs columns, row br), the added terms in c, the divisor in scalar;
/// flash_row_max, flash_row_sum: the scores in a (as columns), blocks
/// of n; flash_weights: the scores in a, m in b, l in c; logsumexp: m in a, l in b;
/// logsumexp_weights: the scores in a, L in b; flash_over_keys, flash_over_queries: a, b, the
/// scores in c (a's layout), n terms; adamw: W in a, G in b, the scalars (1, 8) in c): the module's
/// qkv_step_f32 / _f64 and page_recompute call this. Returns 0, or 1 for an unknown kind
template <class T>
constexpr int extended_step(kind k, const T* a, const T* b, const T* c, const unsigned char* masked,
                            const step_sizes& z, T scalar, T* out) {
  if (k == column_sums_kind) {
    column_sums(a, z.n, z.cols, out);
    return 0;
  }
  if (k == sgd_kind) {
    sgd(a, b, z.rows * z.cols, scalar, out);
    return 0;
  }
  if (k == cross_entropy_kind) {
    cross_entropy_losses(a, b, z.rows, z.n, out);
    return 0;
  }
  if (k == embedding_backward_kind) {
    embedding_backward(a, b, z.n, z.rows, z.cols, out);
    return 0;
  }
  if (k == embedding_kind) {
    embedding(a, b, z.rows, z.n, z.cols, out);
    return 0;
  }
  if (k == key_padding_mask_kind) {
    key_padding_mask(a, z.rows, z.cols, out);
    return 0;
  }
  if (k == padded_divide_kind) {
    padded_divide(a, b, z.bs, z.br, z.rows, z.cols, scalar, masked, c, out);
    return 0;
  }
  if (k == flash_row_max_kind || k == flash_row_sum_kind) {
    if (z.n == 0) return 1;
    flash_statistic(a, z.rows, z.as, z.n, k == flash_row_max_kind ? 1 : 3, out);
    return 0;
  }
  if (k == flash_weights_kind || k == logsumexp_weights_kind) {
    flash_weights(a, b, k == flash_weights_kind ? c : nullptr, z.rows, z.cols, out);
    return 0;
  }
  if (k == logsumexp_kind) {
    logsumexp(a, b, z.rows, out);
    return 0;
  }
  if (k == flash_over_keys_kind || k == flash_over_queries_kind) {
    flash_sum(a, z.as, b, z.bs, c, z.rows, z.cols, z.n, k == flash_over_keys_kind, out);
    return 0;
  }
  if (k == adamw_kind) {
    adamw(a, b, c, z.rows * z.cols, out);
    return 0;
  }
  return step(k, a, b, c, masked, z, scalar, out);
}

}  // namespace qkv::flat
