// attention.hpp: scaled dot-product attention at run time, materialised or streaming.
//
//   out = softmax(scale * q kᵀ + mask) v      q: (T, d)  k: (S, d)  v: (S, d_v)  out: (T, d_v)
//
// Two paths over the same arithmetic ideas:
// - materialised: the raw scores q kᵀ (T, S) and the weights (T, S) are written out, because
//   the caller asked for them (qkv attend, the tests, the teaching trace);
// - streaming (flash-attention style; Dao et al. 2022, "online softmax", Milakov & Gimelshein
//   2018): keys are visited in blocks of key_block; each query row keeps its running maximum
//   m, its running sum l and its unnormalised output o, rescaled by e^(m_old - m_new) when the
//   maximum grows. The T x S matrix never exists: extra memory is a query_block x key_block
//   tile and the packing buffers per thread, and each head's k and v in the product's panels
//   (packed once, shared by the head's query blocks; at most kv_panel_limit elements, else
//   packed per block), O(T + S) in all, whatever T and S.
// Masks (attention_mask): `allowed` (T x S flags, nonzero = may attend), `key_padding` (S
// flags, nonzero = padding: the key is masked for every query; O(S), where the equivalent
// `allowed` would be T x S), causal (key j <= the query's position p; p = i, or i + S - T when
// aligned lower_right), a sliding window (keys j > p - window), and additive terms on the scaled
// scores: a float bias (T x S; -inf = masked) and ALiBi's m * (j - p). A masked key is skipped
// on every path (docs/numerics.md, "Masks, windows and biases").
// A query row with every key masked gets weights 0 and output 0 on both paths.
// NaN and infinity (docs/numerics.md, "NaN and infinity in attention"), the same on every path,
// tile size and thread count: a masked key is skipped (its score and value never reach the
// query); a NaN or +inf scaled score among a query's visible keys makes its weights and output
// row NaN; a -inf score is masked-like (weight 0, value skipped); a NaN or inf in the value of a
// key the query attends to (finite score) gives that output element NaN, +inf or -inf, as the
// weighted sum would with positive weights. The kernels never multiply a skipped value by 0:
// when v holds a non-finite number (checked once per call, one pass over v), they run on a copy
// with those numbers set to 0 and repair_rows writes the affected elements afterwards.
// Work is split into tasks of query_block rows; a task's result does not depend on which
// thread runs it, so any thread count gives the same bits (thread_pool.hpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <type_traits>
#include <vector>

#include "../core/masks.hpp"
#include "dynamic_matrix.hpp"
#include "exp.hpp"
#include "gemm.hpp"
#include "softmax.hpp"
#include "thread_pool.hpp"

namespace qkv::runtime {

/// where the causal diagonal sits when T != S: the core's enum (core/masks.hpp), one type on both
/// paths, named as PyTorch names it (torch.nn.attention.bias.causal_upper_left /
/// causal_lower_right). The ONNX Attention op's is_causal is upper_left in opset 23's text; in
/// Attention-24 (with its errata) it is offset by the past_key rows P (query i sees j <= i + P):
/// lower_right when the new K has T rows, as in decoding (core/masks.hpp says more).
///   upper_left   query i sits at position i: key j visible when j <= i
///   lower_right  query i sits at position i + (S - T): the last query sees every key (KV cache)
using qkv::causal_alignment;

/// which keys a query may attend to, and what is added to its scaled scores.
/// Query row i sits at position p = i + offset (offset: 0, or S - T for lower_right; resolved()
/// sets it from the alignment). The scaled score of query i and key j becomes
///   scale * q_i . k_j + bias(i, j) + alibi_slope * (j - p)      (left to right)
/// and key j is masked (skipped, as if absent) when allowed(i, j) == 0, or key_padding[j] != 0,
/// or causal and j > p, or window > 0 and j <= p - window, or bias(i, j) == -inf.
/// key_padding (PyTorch's key_padding_mask) gives exactly the bits of the `allowed` matrix
/// allowed(i, j) = !key_padding[j] on every path, without the (T, S) bytes.
struct attention_mask {
  bool causal = false;                   // key j allowed for query i only when j <= p
  const mask_matrix* allowed = nullptr;  // (T, S) flags, nonzero = allowed; nullptr = all
  // (S) flags, nonzero = padding: key j masked for every query; nullptr = none. Set with
  // set_key_padding (it records the size, which must be S)
  const unsigned char* key_padding = nullptr;
  std::size_t key_padding_size = 0;
  causal_alignment alignment = causal_alignment::upper_left;
  std::size_t window = 0;  // 0 = none; else only keys j with p - window < j (sliding window)
  double alibi_slope = 0;  // 0 = none; else m * (j - p) is added (ALiBi, Press et al. 2022)
  // additive bias on the scaled scores: (T, S) of the kernel's element type, row stride
  // bias_stride, contiguous rows; nullptr = none. Set with set_bias (it records the type).
  const void* bias = nullptr;
  std::size_t bias_stride = 0, bias_rows = 0, bias_cols = 0, bias_element = 0;
  std::ptrdiff_t offset = 0;  // the position of query row 0 (resolved() sets it)

  template <class T>
  void set_bias(const matrix_view<const T>& b) {
    if (b.col_stride != 1 && b.cols > 1)
      throw shape_error("attention: the bias " + b.shape() + " must have contiguous rows");
    bias = b.data;
    bias_stride = b.row_stride;
    bias_rows = b.rows;
    bias_cols = b.cols;
    bias_element = sizeof(T);
  }
  void set_key_padding(std::span<const unsigned char> padding) {
    key_padding = padding.data();
    key_padding_size = padding.size();
  }
  template <class T>
  [[nodiscard]] const T* bias_row(std::size_t i) const {
    return static_cast<const T*>(bias) + i * bias_stride;
  }
  /// this mask for t queries and s keys: offset from the alignment
  [[nodiscard]] attention_mask resolved(std::size_t t, std::size_t s) const {
    attention_mask m = *this;
    m.offset = alignment == causal_alignment::lower_right
                   ? static_cast<std::ptrdiff_t>(s) - static_cast<std::ptrdiff_t>(t)
                   : 0;
    return m;
  }
  /// true when only causal (upper_left), allowed and key_padding are used: the kernels' plain
  /// steps
  [[nodiscard]] bool plain() const {
    return window == 0 && alibi_slope == 0 && bias == nullptr && offset == 0;
  }
};

/// the rows of queries that one task handles (materialised path), the most rows of one
/// streaming task, and the key block of the streaming path. A streaming task packs k and v once
/// per pass over the keys, so its query block is larger: packing costs 1/rows of the
/// arithmetic. 512 rows: a tile of 512 x 128 floats (256 KiB) per thread, in L2 beside q, out,
/// k and v of a head; packing took 10-17% of W4's and W5's time with 384-row blocks, and 1024
/// rows made the products slower on W5 than they saved (docs/performance.md, "ONNX Runtime")
inline constexpr std::size_t query_block = 64;
inline constexpr std::size_t stream_query_block = 512;
inline constexpr std::size_t key_block = 128;
/// the streaming path's online-softmax step works on this many rows of the scores tile at a
/// time (16 x key_block floats, 8 KiB: in L1 from one sweep to the next)
inline constexpr std::size_t stream_row_group = 16;

/// @brief how the streaming path splits the `rows` queries of each of `heads` heads into tasks
/// (heads x blocks, block b = rows begin(b) .. end(b)): as few blocks per head as
/// stream_query_block allows, more when there are fewer tasks than threads or when a few more
/// let the tasks share out evenly over the threads; blocks differ by at most one row. Only who
/// computes which row changes with it, never how: a row's result does not depend on its block
/// (tested), so the bits are the same for every thread count.
struct stream_split {
  std::size_t rows = 0, blocks = 0;  // blocks per head
  [[nodiscard]] std::size_t begin(std::size_t b) const { return rows * b / blocks; }
  [[nodiscard]] std::size_t end(std::size_t b) const { return rows * (b + 1) / blocks; }

  stream_split() = default;
  stream_split(std::size_t rows_, std::size_t heads, std::size_t threads) : rows(rows_) {
    if (rows == 0 || heads == 0) return;
    threads = std::max<std::size_t>(1, threads);
    const std::size_t fewest = (rows + stream_query_block - 1) / stream_query_block;
    // blocks of at least min_rows rows (packing k and v must stay small against a block's work)
    constexpr std::size_t min_rows = 128;
    const std::size_t most = std::max(fewest, rows / min_rows);
    blocks = std::min(most, std::max(fewest, (threads + heads - 1) / heads));
    // e.g. 1500 rows, one head, 2 threads: 4 blocks of 375, not 3 (two on one thread, one on the other)
    for (std::size_t b = blocks; b <= std::min(most, 2 * blocks); ++b)
      if (heads * b % threads == 0) {
        blocks = b;
        break;
      }
  }
  [[nodiscard]] std::size_t tasks(std::size_t heads) const { return heads * blocks; }
};
/// the streaming path's small case (attend_rows_small): at most this many keys and this depth
inline constexpr std::size_t small_keys = 32;
inline constexpr std::size_t small_depth = 64;

namespace detail {

inline void check_attention_shapes(std::size_t q_rows, std::size_t q_cols, std::size_t k_rows,
                                   std::size_t k_cols, std::size_t v_rows, std::size_t v_cols,
                                   std::size_t out_rows, std::size_t out_cols, const attention_mask& mask) {
  if (q_cols != k_cols)
    throw shape_error("attention: q is " + shape_string(q_rows, q_cols) + " but k is " +
                      shape_string(k_rows, k_cols) + " (q and k need the same number of columns)");
  if (k_rows != v_rows)
    throw shape_error("attention: k is " + shape_string(k_rows, k_cols) + " but v is " +
                      shape_string(v_rows, v_cols) + " (one value row per key)");
  if (out_rows != q_rows || out_cols != v_cols)
    throw shape_error("attention: the output is " + shape_string(out_rows, out_cols) + " but must be " +
                      shape_string(q_rows, v_cols) + " (q's rows by v's columns)");
  if (mask.allowed && (mask.allowed->rows() != q_rows || mask.allowed->cols() != k_rows))
    throw shape_error("attention: allowed is " + mask.allowed->shape() + " but must be " +
                      shape_string(q_rows, k_rows) + " (queries by keys)");
  if (mask.key_padding_size != 0 && mask.key_padding == nullptr)
    throw shape_error("attention: key_padding is null but key_padding_size is " +
                      std::to_string(mask.key_padding_size) + " (set_key_padding sets both)");
  if (mask.key_padding && mask.key_padding_size != k_rows)
    throw shape_error("attention: key_padding has " + std::to_string(mask.key_padding_size) +
                      " flags but there are " + std::to_string(k_rows) + " keys (k is " +
                      shape_string(k_rows, k_cols) + ")");
  if (mask.bias && (mask.bias_rows != q_rows || mask.bias_cols != k_rows))
    throw shape_error("attention: the bias is " + shape_string(mask.bias_rows, mask.bias_cols) +
                      " but must be " + shape_string(q_rows, k_rows) + " (queries by keys)");
}

/// keys j < key_limit(i) may be allowed for query i (causal: p + 1, p = i + offset)
inline std::size_t key_limit(const attention_mask& mask, std::size_t i, std::size_t s) {
  if (!mask.causal) return s;
  const std::ptrdiff_t end = static_cast<std::ptrdiff_t>(i) + mask.offset + 1;
  return end <= 0 ? 0 : std::min(s, static_cast<std::size_t>(end));
}

/// keys j >= key_start(i) may be allowed for query i (window: p - window + 1)
inline std::size_t key_start(const attention_mask& mask, std::size_t i, std::size_t s) {
  if (mask.window == 0) return 0;
  const std::ptrdiff_t first =
      static_cast<std::ptrdiff_t>(i) + mask.offset - static_cast<std::ptrdiff_t>(mask.window) + 1;
  return first <= 0 ? 0 : std::min(s, static_cast<std::size_t>(first));
}

/// srow[c] = -inf where padding[c] != 0, c < n (key_padding's step: the key masked for the row)
template <class T>
void mask_padded(T* srow, const unsigned char* padding, std::size_t n) {
  const T ninf = -std::numeric_limits<T>::infinity();
  for (std::size_t c = 0; c < n; ++c)
    if (padding[c]) srow[c] = ninf;
}

/// the mask and bias step on scaled scores srow[0..n) of query i, keys j0..j0+n (s keys in
/// all): the bias and ALiBi terms added, masked keys set to -inf (attention_mask's comment).
/// The plain case (causal upper_left, allowed and key_padding only) is the loops it always was.
template <class T>
void mask_scores(T* srow, std::size_t j0, std::size_t n, const attention_mask& mask, std::size_t i,
                 std::size_t s) {
  const T ninf = -std::numeric_limits<T>::infinity();
  if (mask.bias) {
    const T* b = mask.bias_row<T>(i) + j0;
    for (std::size_t c = 0; c < n; ++c) srow[c] = b[c] == ninf ? ninf : T(srow[c] + b[c]);
  }
  if (mask.alibi_slope != 0) {
    const T slope = static_cast<T>(mask.alibi_slope);
    const std::ptrdiff_t p = static_cast<std::ptrdiff_t>(i) + mask.offset;
    for (std::size_t c = 0; c < n; ++c)
      if (srow[c] != ninf)
        srow[c] = T(srow[c] + slope * static_cast<T>(static_cast<std::ptrdiff_t>(j0 + c) - p));
  }
  if (mask.allowed) {
    const unsigned char* allowed = mask.allowed->row(i) + j0;
    for (std::size_t c = 0; c < n; ++c)
      if (!allowed[c]) srow[c] = ninf;
  }
  if (mask.key_padding) mask_padded(srow, mask.key_padding + j0, n);
  const std::size_t lim = key_limit(mask, i, s), first = key_start(mask, i, s);
  for (std::size_t c = 0; c < n && j0 + c < first; ++c) srow[c] = ninf;
  for (std::size_t c = lim > j0 ? lim - j0 : 0; c < n; ++c) srow[c] = ninf;
}

/// the scaled score of query i and key j after mask_scores (-inf when masked)
template <class T>
[[nodiscard]] T masked_score(const attention_mask& mask, std::size_t i, std::size_t j, std::size_t s,
                             T score) {
  mask_scores(&score, j, 1, mask, i, s);
  return score;
}

/// true when every element of a is finite: one pass, x - x summed (0 for a finite x, NaN for
/// NaN or +-inf, and a NaN stays), so the common case costs two vector operations per lanes
template <class T>
[[nodiscard]] bool all_finite(const matrix_view<const T>& a) {
  using V = simd<T>;
  constexpr std::size_t W = lanes<T>;
  V acc(T(0)), acc2(T(0));
  T acc1 = T(0);
  const auto sweep = [&](const T* p, std::size_t n) {
    std::size_t j = 0;
    for (; j + 2 * W <= n; j += 2 * W) {  // two registers per step: half the loop overhead
      const V x(p + j, stdx::element_aligned), y(p + j + W, stdx::element_aligned);
      acc += x - x;
      acc2 += y - y;
    }
    for (; j + W <= n; j += W) {
      const V x(p + j, stdx::element_aligned);
      acc += x - x;
    }
    for (; j < n; ++j) acc1 += p[j] - p[j];
  };
  if (a.col_stride == 1 && (a.row_stride == a.cols || a.rows <= 1)) {
    sweep(a.data, a.rows * a.cols);  // contiguous: one sweep, one tail
  } else {
    for (std::size_t i = 0; i < a.rows; ++i) {
      if (a.col_stride == 1)
        sweep(a.data + i * a.row_stride, a.cols);
      else
        for (std::size_t j = 0; j < a.cols; ++j) acc1 += a(i, j) - a(i, j);
    }
  }
  acc += acc2;
  return acc1 == acc1 && !stdx::any_of(acc != acc);
}

/// the values of a call whose v holds a NaN or an infinity: `clean` is v with each of them set
/// to 0 (what the kernels read), `keys` the rows of v that hold one, ascending
template <class T>
struct nonfinite_values {
  dynamic_matrix<T> clean;
  std::vector<std::size_t> keys;

  /// nullptr when v is all finite (the common case: the kernels read v itself)
  static std::optional<nonfinite_values> of(const matrix_view<const T>& v) {
    if (all_finite(v)) return std::nullopt;
    nonfinite_values r;
    r.clean = dynamic_matrix<T>(v.rows, v.cols);
    for (std::size_t j = 0; j < v.rows; ++j) {
      bool bad = false;
      for (std::size_t c = 0; c < v.cols; ++c) {
        const T x = v(j, c);
        const bool finite = x - x == T(0);
        r.clean(j, c) = finite ? x : T(0);
        bad = bad || !finite;
      }
      if (bad) r.keys.push_back(j);
    }
    return r;
  }
};

/// the scaled score of query i and key j with the kernels' bits: the fma chain over the depth
/// from 0 (gemm.hpp's order, also attend_rows_small's), then one multiplication by scale
template <class T>
[[nodiscard]] T scaled_score(const matrix_view<const T>& q, const matrix_view<const T>& k, std::size_t i,
                             std::size_t j, T scale) {
  T acc = T(0);
  for (std::size_t c = 0; c < q.cols; ++c) acc = fmadd(q(i, c), k(j, c), acc);
  return T(acc * scale);
}

/// @brief rows i0..i1 of out, computed on nonfinite_values::clean, get the non-finite values
/// back: out(i, c) becomes NaN, +inf or -inf where a key i attends to (allowed, not padding, a
/// finite scaled score) holds a NaN or an infinity in column c: NaN if any of them is NaN or both
/// infinities meet, else that infinity. A row already NaN (a NaN or +inf score) stays NaN.
/// v: the original values (the same columns as out).
template <class T>
void repair_rows(const matrix_view<const T>& q, const matrix_view<const T>& k, const matrix_view<const T>& v,
                 const matrix_view<T>& out, T scale, const attention_mask& mask,
                 const std::vector<std::size_t>& keys, std::size_t i0, std::size_t i1) {
  const T inf = std::numeric_limits<T>::infinity();
  const std::size_t dv = v.cols;
  std::vector<unsigned char> seen(dv);  // per column: 1 NaN, 2 +inf, 4 -inf
  for (std::size_t i = i0; i < i1; ++i) {
    std::fill(seen.begin(), seen.end(), 0);
    bool any = false;
    const std::size_t lim = key_limit(mask, i, k.rows);
    for (const std::size_t j : keys) {
      if (j >= lim) break;
      if (mask.allowed && !mask.allowed->row(i)[j]) continue;
      if (mask.key_padding && mask.key_padding[j]) continue;
      bool in_these_columns = false;  // a head sees only its own columns of v
      for (std::size_t c = 0; c < dv && !in_these_columns; ++c) in_these_columns = v(j, c) - v(j, c) != T(0);
      if (!in_these_columns) continue;
      const T s = masked_score(mask, i, j, k.rows, scaled_score(q, k, i, j, scale));
      if (!(s > -inf && s < inf)) continue;  // -inf: masked-like; NaN, +inf: the row is NaN already
      for (std::size_t c = 0; c < dv; ++c) {
        const T x = v(j, c);
        if (x != x)
          seen[c] |= 1;
        else if (x == inf)
          seen[c] |= 2;
        else if (x == -inf)
          seen[c] |= 4;
      }
      any = true;
    }
    if (!any) continue;
    for (std::size_t c = 0; c < dv; ++c) {
      if (!seen[c] || out(i, c) != out(i, c)) continue;
      out(i, c) = (seen[c] & 1) || seen[c] == 6 ? std::numeric_limits<T>::quiet_NaN()
                  : seen[c] == 2                ? inf
                                                : -inf;
    }
  }
}

/// where the streaming path writes each query row's softmax statistics when asked (the
/// backward's saved state, backward.hpp): the row maximum m of the masked scaled scores and the
/// sum l of e^(s - m) over its visible keys, so that weight (i, j) = e^(s_ij - m_i) / l_i
/// (FlashAttention-2's logsumexp L = m + log l, kept as its two parts). Indexed by the row i of
/// q. A row with every key masked: m = -inf, l = 0; a poisoned row (a NaN or +inf score): m = NaN.
template <class T>
struct row_statistics_out {
  T* max = nullptr;
  T* sum = nullptr;
  [[nodiscard]] row_statistics_out at(std::size_t offset) const { return {max + offset, sum + offset}; }
};

/// per-thread space of the streaming path: one scores tile and the row state
template <class T>
struct streaming_space {
  aligned_vector<T> tile;            // (query_block, key_block)
  aligned_vector<T> m, l;            // (stream_query_block): running maxima and sums
  aligned_vector<T> m_new, row_sum;  // (stream_query_block): this key block's
  static streaming_space& get() {
    thread_local streaming_space s;
    return s;
  }
};

/// one head's keys and values in the micro-kernel's panels, packed once per call and read by
/// every query block of the head (packed per query block, they cost 10-17% of W4's and W5's
/// time; docs/performance.md). Key block b (keys b key_block ..): kᵀ's panels at k + b k_stride,
/// v's at v + b v_stride, each in packed_operand's layout for that block alone (depth blocks of
/// kc), so product_block reads them as a prepacked operand: the same panels it would pack
/// itself, the same bits.
template <class T>
struct kv_panels {
  const T* k = nullptr;
  const T* v = nullptr;
  std::size_t k_stride = 0, v_stride = 0;
};

/// the size of one head's kv_panels: `blocks` key blocks (those below `keys`), k_stride and
/// v_stride elements each
template <class T>
struct kv_panel_layout {
  std::size_t blocks = 0, k_stride = 0, v_stride = 0;
  kv_panel_layout(std::size_t keys, std::size_t d, std::size_t dv) {
    constexpr std::size_t NR = gemm_blocking<T>::nr;
    constexpr std::size_t block_padded = (key_block + NR - 1) / NR * NR;
    blocks = (keys + key_block - 1) / key_block;
    k_stride = d * block_padded;
    v_stride = key_block * ((dv + NR - 1) / NR * NR);
  }
  [[nodiscard]] std::size_t size() const { return blocks * (k_stride + v_stride); }
  [[nodiscard]] kv_panels<T> at(const T* head) const {
    return {head, head + blocks * k_stride, k_stride, v_stride};
  }
};

/// key block b of one head (k: (S, d), v: (S, dv)) into its panels (kv_panels' layout): what
/// attend_rows_tiled's two products would pack, element for element
template <class T>
void pack_kv_block(const matrix_view<const T>& k, const matrix_view<const T>& v, std::size_t b,
                   const kv_panel_layout<T>& lay, T* head) {
  constexpr std::size_t NR = gemm_blocking<T>::nr, KC = gemm_blocking<T>::kc;
  const std::size_t j0 = b * key_block, bc = std::min(key_block, k.rows - j0);
  const std::size_t d = k.cols, dv = v.cols;
  // the next key block's rows of k and v towards L2 while this one is packed: rows of a wide
  // matrix (W5's heads are 64 of its 768 columns) are 3 KiB apart, and packing otherwise waits
  // on each first touch (perf: pack_b 4.8% of W5's time without, 1.9% + 1.4% here with)
  if (j0 + bc < k.rows) {
    const std::size_t next = std::min(key_block, k.rows - j0 - bc);
    constexpr std::size_t line = 64 / sizeof(T);
    for (std::size_t j = j0 + bc; j < j0 + bc + next; ++j) {
      if (k.col_stride == 1)
        for (std::size_t c = 0; c < d; c += line) __builtin_prefetch(&k(j, c), 0, 2);
      if (v.col_stride == 1)
        for (std::size_t c = 0; c < dv; c += line) __builtin_prefetch(&v(j, c), 0, 2);
    }
  }
  const auto kt = transposed(row_block(k, j0, bc));  // (d, bc)
  T* kd = head + b * lay.k_stride;
  const std::size_t bc_padded = (bc + NR - 1) / NR * NR;
  for (std::size_t pc = 0; pc < d; pc += KC) pack_b(kt, pc, std::min(KC, d - pc), 0, bc, kd + pc * bc_padded);
  const auto vb = row_block(v, j0, bc);  // (bc, dv)
  T* vd = head + lay.blocks * lay.k_stride + b * lay.v_stride;
  const std::size_t dv_padded = (dv + NR - 1) / NR * NR;
  for (std::size_t pc = 0; pc < bc; pc += KC)
    pack_b(vb, pc, std::min(KC, bc - pc), 0, dv, vd + pc * dv_padded);
}

/// the most elements of one head's kv_panels, what each thread keeps between calls: 2^22,
/// 16 MiB of floats, 32768 keys of a head with d = dv = 64. Beyond it, k and v are packed per
/// query block as before
inline constexpr std::size_t kv_panel_limit = std::size_t(1) << 22;

/// per-thread kv_panels space of attend_heads_streaming (at most kv_panel_limit elements)
template <class T>
struct panel_space {
  aligned_vector<T> data;
  static panel_space& get() {
    thread_local panel_space s;
    return s;
  }
};

/// f(std::integral_constant<std::size_t, n>) for n in 1 .. N (nothing for n = 0 or n > N)
template <std::size_t N, class F>
inline void with_count(std::size_t n, F&& f) {
  if constexpr (N > 0) {
    if (n == N)
      f(std::integral_constant<std::size_t, N>{});
    else
      with_count<N - 1>(n, f);
  }
}

/// @brief the streaming path for few keys (s_end <= small_keys, d <= small_depth; tutorial
/// sizes): one query row at a time, its scores in registers, k transposed once into a stack
/// buffer so that a row's scores are vectors over the keys. No tile, no packing, no thread-local
/// space. The same bits as attend_rows_tiled: the same chains (scores over d, out over the keys
/// in order), the same exp sums (lane sums in key order, then the fixed lane order), and one key
/// block, so the online rescale is the identity (alpha = 0 on a zero output and sum).
template <class T>
void attend_rows_small(const matrix_view<const T>& q, const matrix_view<const T>& k,
                       const matrix_view<const T>& v, const matrix_view<T>& out, T scale,
                       const attention_mask& mask, std::size_t i0, std::size_t i1,
                       const row_statistics_out<T>* stats = nullptr) {
  using V = simd<T>;
  constexpr std::size_t W = lanes<T>, max_vectors = (small_keys + W - 1) / W;
  // rows go in groups, each step swept over the group's rows: one row's steps form a long
  // dependent chain (max -> exp -> sum -> divide), and independent rows side by side let the
  // core overlap them
  constexpr std::size_t group = 8;
  const T ninf = -std::numeric_limits<T>::infinity();
  const std::size_t s = k.rows, d = q.cols, dv = v.cols;
  const std::size_t s_end = key_limit(mask, i1 - 1, s);  // as the tiled path: later keys skipped
  const std::size_t nv = (s_end + W - 1) / W, sp = nv * W;
  alignas(alignment) T kt[small_depth * small_keys];  // kt[c * sp + j] = k(j, c), 0 past s_end
  for (std::size_t c = 0; c < d; ++c) {
    T* row = kt + c * sp;
    for (std::size_t j = 0; j < s_end; ++j) row[j] = k(j, c);
    for (std::size_t j = s_end; j < sp; ++j) row[j] = T(0);
  }
  alignas(alignment) T p[group * max_vectors * W];  // the group's scores, then weights (rows of sp)
  T m[group], l[group];
  bool finite[group];  // m finite: the row has a key to attend to and is not poisoned
  for (std::size_t g0 = i0; g0 < i1; g0 += group) {
    const std::size_t gn = std::min(group, i1 - g0);
    // sweep 1: scaled, masked scores
    for (std::size_t r = 0; r < gn; ++r) {
      const std::size_t i = g0 + r;
      T* pr = p + r * sp;
      // nv as a compile-time count, so that the accumulators live in registers (a run-time
      // count made them a memset array on the stack, and every load of it stalled)
      with_count<max_vectors>(nv, [&](auto count) {
        constexpr std::size_t NV = decltype(count)::value;
        V acc[NV];
        for (std::size_t t = 0; t < NV; ++t) acc[t] = V(T(0));
        for (std::size_t c = 0; c < d; ++c) {
          const V a(q(i, c));
          for (std::size_t t = 0; t < NV; ++t)
            acc[t] = fmadd(a, V(kt + c * sp + t * W, stdx::vector_aligned), acc[t]);
        }
        for (std::size_t t = 0; t < NV; ++t) (acc[t] * V(scale)).copy_to(pr + t * W, stdx::vector_aligned);
      });
      if (mask.plain()) {
        const std::size_t lim = key_limit(mask, i, s);
        for (std::size_t j = lim; j < s_end; ++j) pr[j] = ninf;
        if (mask.allowed) {
          const unsigned char* allowed = mask.allowed->row(i);
          for (std::size_t j = 0; j < s_end; ++j)
            if (!allowed[j]) pr[j] = ninf;
        }
        if (mask.key_padding) mask_padded(pr, mask.key_padding, s_end);
      } else {
        mask_scores(pr, 0, s_end, mask, i, s);
      }
    }
    // sweep 2: row maxima (a -inf maximum with a NaN score poisons the row: NaN); sweep 3:
    // p = e^(s - m) and the sums (a NaN score with a finite m makes the sum NaN)
    for (std::size_t r = 0; r < gn; ++r) {
      m[r] = row_max(p + r * sp, s_end);
      finite[r] = m[r] - m[r] == T(0);
      if (m[r] == ninf && any_nan(p + r * sp, s_end)) [[unlikely]]
        m[r] = std::numeric_limits<T>::quiet_NaN();
    }
    for (std::size_t r = 0; r < gn; ++r) l[r] = finite[r] ? exp_shifted_sum(p + r * sp, s_end, m[r]) : T(0);
    if (stats)
      for (std::size_t r = 0; r < gn; ++r) {
        stats->max[g0 + r] = m[r];
        stats->sum[g0 + r] = l[r];
      }
    // sweep 4: out = p v / l; a row with every key masked gets 0, a NaN or +inf score NaN
    for (std::size_t r = 0; r < gn && dv > 0; ++r) {
      T* o = &out(g0 + r, 0);
      if (!finite[r]) [[unlikely]] {
        const T fill = m[r] == ninf ? T(0) : std::numeric_limits<T>::quiet_NaN();
        for (std::size_t c = 0; c < dv; ++c) o[c] = fill;
        continue;
      }
      const T* pr = p + r * sp;
      const V vl(l[r]);
      for (std::size_t c0 = 0; c0 < dv; c0 += W) {
        const std::size_t n = std::min(W, dv - c0);
        V acc_o(T(0));
        if (n == W) {
          for (std::size_t j = 0; j < s_end; ++j)
            acc_o = fmadd(V(pr[j]), V(&v(j, c0), stdx::element_aligned), acc_o);
          (acc_o / vl).copy_to(o + c0, stdx::element_aligned);
        } else {
          for (std::size_t j = 0; j < s_end; ++j) acc_o = fmadd(V(pr[j]), load_partial(&v(j, c0), n), acc_o);
          store_partial(V(acc_o / vl), o + c0, n);
        }
      }
    }
  }
}

template <class T>
void attend_rows_tiled(const matrix_view<const T>& q, const matrix_view<const T>& k,
                       const matrix_view<const T>& v, const matrix_view<T>& out, T scale,
                       const attention_mask& mask, std::size_t i0, std::size_t i1,
                       const kv_panels<T>* panels = nullptr, const row_statistics_out<T>* stats = nullptr);

/// true when rows i0..i1 go through attend_rows_small
template <class T>
[[nodiscard]] bool streams_small(const matrix_view<const T>& q, const matrix_view<const T>& k,
                                 const matrix_view<const T>& v, const matrix_view<T>& out,
                                 const attention_mask& mask, std::size_t i0, std::size_t i1) {
  return i0 < i1 && key_limit(mask, i1 - 1, k.rows) <= small_keys && q.cols <= small_depth &&
         v.col_stride == 1 && out.col_stride == 1;
}

/// @brief rows i0..i1 (at most stream_query_block) of the streaming path: out only. Few keys go
/// through attend_rows_small, the others through attend_rows_tiled: the same bits either way.
/// panels: k and v already packed (kv_panels; the key blocks below key_limit(mask, i1 - 1)),
/// or nullptr (packed here, per key block). stats: where the rows' softmax statistics go
/// (row_statistics_out), or nullptr
template <class T>
void attend_rows_streaming(const matrix_view<const T>& q, const matrix_view<const T>& k,
                           const matrix_view<const T>& v, const matrix_view<T>& out, T scale,
                           const attention_mask& mask, std::size_t i0, std::size_t i1,
                           const kv_panels<T>* panels = nullptr,
                           const row_statistics_out<T>* stats = nullptr) {
  if (streams_small(q, k, v, out, mask, i0, i1))
    attend_rows_small(q, k, v, out, scale, mask, i0, i1, stats);
  else
    attend_rows_tiled(q, k, v, out, scale, mask, i0, i1, panels, stats);
}

/// @brief rows i0..i1 of the materialised path: scores (raw q kᵀ), weights, out. out is the
/// streaming path's (attend_rows_streaming on the same rows), not weights v: so keeping the
/// weights never changes the output's bits (issue 32, item 5; tests/runtime/paths_test.cpp).
/// The weights are exactly the row softmax of the scaled scores, and weights v equals out
/// within the bound of docs/numerics.md ("The streaming path": the same sum in another order)
template <class T>
void attend_rows_materialised(const matrix_view<const T>& q, const matrix_view<const T>& k,
                              const matrix_view<const T>& v, const matrix_view<T>& out, T scale,
                              const attention_mask& mask, const matrix_view<T>& scores,
                              const matrix_view<T>& weights, std::size_t i0, std::size_t i1) {
  const std::size_t s = k.rows;
  // pass 1: scores = q kᵀ, raw (before scaling and masking: the caller keeps them)
  product_block<T>(q, transposed(k), scores, epilogue<T>{}, i0, i1, 0, s);
  // pass 2: weights = softmax(scale * scores + mask), row by row
  for (std::size_t i = i0; i < i1; ++i) {
    T* w = weights.data + i * weights.row_stride;
    if (mask.plain()) {
      masked_softmax_row(scores.data + i * scores.row_stride, w, s, scale,
                         mask.allowed ? mask.allowed->row(i) : nullptr, key_limit(mask, i, s),
                         mask.key_padding);
    } else {  // the same products, then the bias, ALiBi and window steps (mask_scores)
      const T* raw = scores.data + i * scores.row_stride;
      for (std::size_t j = 0; j < s; ++j) w[j] = T(raw[j] * scale);
      mask_scores(w, 0, s, mask, i, s);
      softmax_row(w, s);
    }
  }
  // pass 3: out as the streaming path computes it (its order of sums: the key blocks of
  // key_block in order, the online rescale), so that a row's output is the same bits whether
  // the weights are kept or not. Costs the scores' product once more (measured:
  // docs/performance.md, "The same bits on every path")
  attend_rows_streaming<T>(q, k, v, out, scale, mask, i0, i1);
}

/// @brief rows i0..i1 (at most stream_query_block) of the streaming path, in tiles of
/// key_block keys (any size): out only
template <class T>
void attend_rows_tiled(const matrix_view<const T>& q, const matrix_view<const T>& k,
                       const matrix_view<const T>& v, const matrix_view<T>& out, T scale,
                       const attention_mask& mask, std::size_t i0, std::size_t i1, const kv_panels<T>* panels,
                       const row_statistics_out<T>* stats) {
  const T ninf = -std::numeric_limits<T>::infinity();
  const std::size_t rows = i1 - i0, s = k.rows, dv = v.cols;
  auto& space = streaming_space<T>::get();
  if (space.tile.size() < stream_query_block * key_block) {
    space.tile.resize(stream_query_block * key_block);
    space.m.resize(stream_query_block);
    space.l.resize(stream_query_block);
    space.m_new.resize(stream_query_block);
    space.row_sum.resize(stream_query_block);
  }
  std::fill_n(space.m.begin(), rows, ninf);
  std::fill_n(space.l.begin(), rows, T(0));
  T* tile = space.tile.data();
  T* m = space.m.data();
  T* l = space.l.data();
  T* m_new = space.m_new.data();
  T* row_sum = space.row_sum.data();
  // keys past the last query's causal limit are masked for every row here: skip them
  // (their p would be 0 and 0 * v adds nothing, so skipping changes no bit for finite v)
  const std::size_t s_end = key_limit(mask, i1 - 1, s);
  // keys before the first row's window are masked for every row here too: whole key blocks
  // of them are skipped (blocks stay at multiples of key_block, so no bit changes)
  const std::size_t s_begin = key_start(mask, i0, s) / key_block * key_block;
  // out is not zeroed first: the first key block's product (pass 3) writes it, its chains
  // starting from 0 as an accumulation onto zeros would (the same bits), and that block's
  // rescale of out (alpha = 0 or 1 on rows whose output is still 0) is skipped. Rows when no
  // block is visited get 0 or NaN in pass 4
  for (std::size_t j0 = s_begin; j0 < s_end; j0 += key_block) {
    const bool first = j0 == s_begin;
    const std::size_t bc = std::min(key_block, s_end - j0);
    const matrix_view<T> st{tile, rows, bc, bc, 1};
    // causal: rows 0 .. r0 of the block see no key of this key block (key_limit <= j0), so
    // every score of theirs here would be -inf: they are skipped in all three passes (the
    // block's maximum -inf leaves m, the sum e^-inf = 0 leaves l, alpha = e^0 = 1 leaves out,
    // and p = 0 adds 0 * v: the same bits for finite v, as for the keys past s_end above).
    // key_limit grows with the row, so r0 does with j0: a row skipped in the first block sees
    // no key at all, and pass 4 gives it 0 (l = 0) as before
    std::size_t r0 = 0;
    if (mask.causal)
      while (r0 < rows && key_limit(mask, i0 + r0, s) <= j0) ++r0;
    if (r0 == rows) continue;
    // pass 1: the scaled scores of this tile, st = scale * q(i0..i1) k(j0..j0+bc)ᵀ
    epilogue<T> e;
    e.scale = scale;
    e.scaled = true;
    // (with panels: kᵀ's panels of this key block; the view then only carries the shape)
    // The panels hold the whole key block, bp keys (pack_kv_block), while this query block
    // may stop inside it (causal: bc < bp): kᵀ's panels are read as the (d, bp) operand they
    // are, of which the first bc columns are computed
    const std::size_t kb = j0 / key_block, bp = std::min(key_block, s - j0);
    // causal, the diagonal: rows whose key_limit ends inside this key block go in groups of
    // diagonal_rows, each computing (pass 1) and reading (pass 3) only the keys its last row
    // can see; the rows from rf on see the whole block. The columns left out are masked in
    // pass 2 whatever the tile holds there (-inf, then p = 0), so no visible score and no bit
    // of out changes: a shorter product drops only p = 0 terms at the end of each chain
    constexpr std::size_t diagonal_rows = 32;
    struct segment {
      std::size_t a, b, n;  // rows a..b, keys j0..j0 + n
    };
    segment segs[stream_query_block / diagonal_rows + 1];
    std::size_t nsegs = 0, rf = r0;
    if (mask.causal)
      while (rf < rows && key_limit(mask, i0 + rf, s) < j0 + bc) ++rf;
    for (std::size_t a = r0; a < rf; a += diagonal_rows) {
      const std::size_t b = std::min(rf, a + diagonal_rows);
      segs[nsegs++] = {a, b, key_limit(mask, i0 + b - 1, s) - j0};
    }
    if (rf < rows) segs[nsegs++] = {rf, rows, bc};
    for (std::size_t g = 0; g < nsegs; ++g) {
      const auto [a, b, n] = segs[g];
      if (panels)
        product_block<T>(row_block(q, i0, rows), matrix_view<const T>{nullptr, k.cols, bp, bp, 1}, st, e, a,
                         b, 0, n, false, panels->k + kb * panels->k_stride, true);
      else
        product_block<T>(row_block(q, i0, rows), transposed(row_block(k, j0, bc)), st, e, a, b, 0, n, false,
                         nullptr, true);
    }
    // pass 2: mask, online softmax: new maxima, p = e^(s - m), rescale l and out. In groups
    // of stream_row_group rows (8 KiB of scores: they stay in L1 between the sweeps), three
    // sweeps over a group's rows rather than one pass per row: each row's max -> exp -> sum is
    // a long dependent chain, and independent rows side by side let the core overlap them
    for (std::size_t g0 = r0; g0 < rows; g0 += stream_row_group) {
      const std::size_t g1 = std::min(rows, g0 + stream_row_group);
      for (std::size_t r = g0; r < g1; ++r) {
        T* srow = tile + r * bc;
        const std::size_t i = i0 + r;
        if (mask.plain()) {
          const std::size_t lim = key_limit(mask, i, s);
          if (mask.allowed) {
            const unsigned char* allowed = mask.allowed->row(i) + j0;
            for (std::size_t c = 0; c < bc; ++c)
              if (!allowed[c]) srow[c] = ninf;
          }
          if (mask.key_padding) mask_padded(srow, mask.key_padding + j0, bc);
          for (std::size_t c = lim > j0 ? lim - j0 : 0; c < bc; ++c) srow[c] = ninf;
        } else {
          mask_scores(srow, j0, bc, mask, i, s);
        }
        // a NaN or +inf score poisons the row for good: m = NaN from then on (std::max alone
        // would drop a NaN)
        // (a block maximum of -inf with a NaN score is a poisoned one; a finite one with a NaN
        // makes the row's sum NaN, which then stays). Finite maxima, the common case, cost two
        // subtractions and compares here; the first block of a row (m = -inf) takes the branch
        const T block_max = row_max(srow, bc);
        if (block_max - block_max == T(0) && m[r] - m[r] == T(0)) [[likely]]
          m_new[r] = std::max(m[r], block_max);
        else
          m_new[r] = poisons_row(m[r]) || poisons_row(block_max) || (block_max == ninf && any_nan(srow, bc))
                         ? std::numeric_limits<T>::quiet_NaN()
                         : std::max(m[r], block_max);
      }
      for (std::size_t r = g0; r < g1; ++r) {
        T* srow = tile + r * bc;
        if (m_new[r] - m_new[r] == T(0)) [[likely]] {
          // no exp on the causal tail (keys from key_limit on, -inf): e^-inf = 0 is written
          // instead, and the sum over the first n keys is the sum over all bc, bit for bit
          // (exp_shifted_sum's lanes take the same keys in the same order; the tail's vectors
          // would add zeros). vexp spends its slow path on -inf, a third of a causal run's time
          const std::size_t lim = key_limit(mask, i0 + r, s), n = lim > j0 ? std::min(bc, lim - j0) : 0;
          row_sum[r] = exp_shifted_sum(srow, n, m_new[r]);
          for (std::size_t c = n; c < bc; ++c) srow[c] = T(0);
        } else {  // every key so far masked (-inf), or poisoned (NaN)
          for (std::size_t c = 0; c < bc; ++c) srow[c] = T(0);
          row_sum[r] = T(0);
        }
      }
      // e^(m_old - m_new) for the group's rows in vectors (each lane the bits of a scalar
      // vexp); 0 where m_old = -inf (the row's first block with a finite score), as vexp
      // gives for -inf: spelled out, those lanes are given 0 instead
      T alpha_in[stream_row_group] = {}, alpha[stream_row_group] = {};
      for (std::size_t r = g0; r < g1; ++r)
        alpha_in[r - g0] = m[r] != ninf && m_new[r] - m_new[r] == T(0) ? T(m[r] - m_new[r]) : T(0);
      vexp(alpha_in, alpha, g1 - g0);
      for (std::size_t r = g0; r < g1; ++r) {
        if (!(m_new[r] - m_new[r] == T(0))) [[unlikely]] {
          if (m_new[r] != m_new[r]) m[r] = m_new[r];  // poisoned: stays NaN
          continue;
        }
        const std::size_t i = i0 + r;
        const T a = m[r] == ninf ? T(0) : alpha[r - g0];
        l[r] = a == T(1) ? T(l[r] + row_sum[r]) : T(l[r] * a + row_sum[r]);
        if (a != T(1) && !first) {
          if (out.col_stride == 1)
            multiply_row(out.data + i * out.row_stride, dv, a);
          else
            for (std::size_t j = 0; j < dv; ++j) out(i, j) = out(i, j) * a;
        }
        m[r] = m_new[r];
      }
    }
    // pass 3: out += p v(j0..j0+bc), continuing each output element's fma chain (the first
    // block: out = p v(j0..j0+bc), the chains from 0)
    // (with panels: v's panels of this key block, bp rows each; when bc < bp only their first
    // bc rows are read, one panel of NR columns at a time, as the product steps from one
    // panel to the next by its own depth, bc)
    // (the diagonal's row groups: a depth of their n keys, the first n rows of v's panels)
    for (std::size_t g = 0; g < nsegs; ++g) {
      const auto [a, b, n] = segs[g];
      const auto p = column_block(matrix_view<const T>(st), 0, n);
      if (panels) {
        constexpr std::size_t NR = gemm_blocking<T>::nr;
        const std::size_t step = n == bp ? dv : NR;
        for (std::size_t c0 = 0; c0 < dv; c0 += step) {
          const std::size_t w = std::min(step, dv - c0);
          product_block<T>(p, matrix_view<const T>{nullptr, n, w, w, 1},
                           column_block(row_block(out, i0, rows), c0, w), epilogue<T>{}, a, b, 0, w, !first,
                           panels->v + kb * panels->v_stride + c0 * bp, true);
        }
      } else {
        product_block<T>(p, row_block(v, j0, n), row_block(out, i0, rows), epilogue<T>{}, a, b, 0, dv, !first,
                         nullptr, true);
      }
    }
  }
  if (stats)
    for (std::size_t r = 0; r < rows; ++r) {
      stats->max[i0 + r] = m[r];
      stats->sum[i0 + r] = l[r];
    }
  // pass 4: out /= l; a row with every key masked has l = 0 and out = 0; a poisoned row NaN
  for (std::size_t r = 0; r < rows; ++r) {
    if (dv == 0) break;
    T* o = &out(i0 + r, 0);
    if (poisons_row(m[r])) {
      for (std::size_t j = 0; j < dv; ++j) out(i0 + r, j) = std::numeric_limits<T>::quiet_NaN();
    } else if (l[r] == T(0)) {
      for (std::size_t j = 0; j < dv; ++j) out(i0 + r, j) = T(0);
    } else if (out.col_stride == 1) {
      divide_row(o, dv, l[r]);
    } else {
      for (std::size_t j = 0; j < dv; ++j) out(i0 + r, j) = out(i0 + r, j) / l[r];
    }
  }
}

/// @brief the rows of each part when `t_len` queries are split into `parts` parts of about
/// equal work: part p is rows bound(p) .. bound(p + 1). The work of a row is the keys it may
/// see (key_limit - key_start, at least 1); without causal or a window every row sees them all
/// and the parts are even (t_len p / parts). Under causal the later rows see more keys, and even
/// parts would leave the thread with the first part idle for most of the run (W4c on two
/// threads: a quarter of the work against three quarters). Only who computes which row
/// changes: a row's bits do not depend on its block (tested).
inline std::vector<std::size_t> work_parts(const attention_mask& mask, std::size_t t_len, std::size_t s_len,
                                           std::size_t parts) {
  std::vector<std::size_t> bound(parts + 1, t_len);
  bound[0] = 0;
  if (!mask.causal && mask.window == 0) {
    for (std::size_t p = 1; p < parts; ++p) bound[p] = t_len * p / parts;
    return bound;
  }
  auto work = [&](std::size_t i) {
    const std::size_t lim = key_limit(mask, i, s_len), first = key_start(mask, i, s_len);
    return static_cast<double>(lim > first ? lim - first : 0) + 1.0;  // + 1: a row costs something alone
  };
  double total = 0;
  for (std::size_t i = 0; i < t_len; ++i) total += work(i);
  double sum = 0;
  std::size_t p = 1;
  for (std::size_t i = 0; i < t_len && p < parts; ++i) {
    sum += work(i);
    while (p < parts && sum >= total * static_cast<double>(p) / static_cast<double>(parts))
      bound[p++] = i + 1;
  }
  return bound;
}

/// @brief the streaming path for `heads` query heads side by side, head h = column block h of q
/// and out, and column block h / (heads / kv_heads) of k and v (grouped-query attention;
/// kv_heads = heads: one each): q (T, heads d), k (S, kv_heads d), v (S, kv_heads dv), out
/// (T, heads dv); head_mask(h) gives head h's mask (resolved: every head's causal and key
/// limits the same, its ALiBi slope and bias its own). after(h, i0, i1) runs after each task's
/// rows i0..i1 of head h (repair_rows), on its thread. Tasks: each key/value head's rows in
/// `parts` parts of about equal work (work_parts; 1 part when the key/value heads share out
/// evenly over the threads, else enough that kv_heads x parts is a multiple of the threads: W4,
/// one head on two threads, 2 parts; parts of at least 128 rows). A task packs its key/value
/// head's k and v once into its thread's panel_space (kv_panels) and runs the part of every
/// query head of its group in query blocks of at most stream_query_block rows, all reading
/// those panels. On two threads W4's head is packed twice, each copy in its own core's cache
/// (packing it once for both threads and reading the other core's copy measured 4-7% slower).
/// More than panel_limit (kv_panel_limit) elements for a head, or only attend_rows_small's few
/// keys: no panels, the heads x query blocks of stream_split, k and v packed per block as
/// attend_rows_tiled does alone. Only who packs and who computes changes, never how: the same
/// bits for every thread count and split. stats: where query head h's row statistics go, at
/// offset h T (row_statistics_out), or nullptr.
template <class T, class Heads, class HeadMask, class After>
void attend_grouped_streaming_heads(std::size_t heads, std::size_t kv_heads, Heads&& head, T scale,
                                    HeadMask&& head_mask, thread_pool* pool, After&& after,
                                    std::size_t panel_limit = kv_panel_limit,
                                    const row_statistics_out<T>* stats = nullptr);

template <class T, class HeadMask, class After>
void attend_grouped_streaming(const matrix_view<const T>& q, const matrix_view<const T>& k,
                              const matrix_view<const T>& v, const matrix_view<T>& out, std::size_t heads,
                              std::size_t kv_heads, T scale, HeadMask&& head_mask, thread_pool* pool,
                              After&& after, std::size_t panel_limit = kv_panel_limit,
                              const row_statistics_out<T>* stats = nullptr) {
  if (heads == 0 || kv_heads == 0 || q.rows == 0) return;
  const std::size_t group = heads / kv_heads;
  const std::size_t d = q.cols / heads, dv = v.cols / kv_heads;
  const auto head = [&](std::size_t h) {
    const std::size_t g = h / group;
    return std::tuple{column_block(q, h * d, d), column_block(k, g * d, d), column_block(v, g * dv, dv),
                      column_block(out, h * dv, dv)};
  };
  attend_grouped_streaming_heads<T>(heads, kv_heads, head, scale, head_mask, pool, after, panel_limit, stats);
}

/// @brief attend_grouped_streaming on heads given by head(h): the tuple of query head h's q
/// (T, d) and out (T, dv) and its key/value head's k (S, d) and v (S, dv), views of any strides
/// (heads side by side: column blocks; (H, T, d): row blocks). The same tasks and the same bits
template <class T, class Heads, class HeadMask, class After>
void attend_grouped_streaming_heads(std::size_t heads, std::size_t kv_heads, Heads&& head, T scale,
                                    HeadMask&& head_mask, thread_pool* pool, After&& after,
                                    std::size_t panel_limit, const row_statistics_out<T>* stats) {
  if (heads == 0 || kv_heads == 0) return;
  const auto [q0, k0, v0, o0] = head(std::size_t(0));
  const std::size_t t_len = q0.rows, s_len = k0.rows, d = q0.cols, dv = v0.cols;
  if (t_len == 0) return;
  const std::size_t group = heads / kv_heads;
  const std::size_t threads = pool ? pool->size() : 1;
  const auto run_all = [&](std::size_t tasks, auto&& f) {
    if (pool && threads > 1)
      pool->parallel_for(tasks, f);
    else
      for (std::size_t t = 0; t < tasks; ++t) f(t);
  };
  const attention_mask mask0 = head_mask(std::size_t(0));  // the limits every head shares
  // the key blocks any row visits (key_limit grows with the row); no panels when every block
  // goes through attend_rows_small (no packing there)
  const kv_panel_layout<T> lay(key_limit(mask0, t_len - 1, s_len), d, dv);
  const bool small = [&] {
    auto [qh, kh, vh, oh] = head(0);
    return streams_small(qh, kh, vh, oh, mask0, 0, t_len);
  }();
  if (!small && lay.blocks > 0 && lay.size() <= panel_limit) {
    std::size_t parts = 1;
    while (kv_heads * parts % threads != 0) ++parts;  // at most threads
    parts = std::max<std::size_t>(1, std::min(parts, t_len / 128));
    const std::vector<std::size_t> bound = work_parts(mask0, t_len, s_len, parts);
    run_all(kv_heads * parts, [&](std::size_t t) {
      const std::size_t g = t / parts, part = t % parts;
      const std::size_t r0 = bound[part], r1 = bound[part + 1];
      if (r0 == r1) return;
      auto& space = panel_space<T>::get();
      if (space.data.size() < lay.size()) space.data.resize(lay.size());
      {
        auto [qh, kh, vh, oh] = head(g * group);
        for (std::size_t b = 0; b < lay.blocks; ++b) pack_kv_block(kh, vh, b, lay, space.data.data());
      }
      const kv_panels<T> panels = lay.at(space.data.data());
      const stream_split split(r1 - r0, 1, 1);  // the fewest blocks of the part
      for (std::size_t h = g * group; h < (g + 1) * group; ++h) {
        auto [qh, kh, vh, oh] = head(h);
        const attention_mask hm = head_mask(h);
        for (std::size_t b = 0; b < split.blocks; ++b) {
          const std::size_t i0 = r0 + split.begin(b), i1 = r0 + split.end(b);
          const row_statistics_out<T> hs = stats ? stats->at(h * t_len) : row_statistics_out<T>{};
          attend_rows_streaming(qh, kh, vh, oh, scale, hm, i0, i1, &panels, stats ? &hs : nullptr);
          after(h, i0, i1);
        }
      }
    });
    return;
  }
  const stream_split split(t_len, heads, threads);
  run_all(heads * split.blocks, [&](std::size_t t) {
    const std::size_t h = t / split.blocks, b = t % split.blocks;
    auto [qh, kh, vh, oh] = head(h);
    const row_statistics_out<T> hs = stats ? stats->at(h * t_len) : row_statistics_out<T>{};
    attend_rows_streaming(qh, kh, vh, oh, scale, head_mask(h), split.begin(b), split.end(b),
                          static_cast<const kv_panels<T>*>(nullptr), stats ? &hs : nullptr);
    after(h, split.begin(b), split.end(b));
  });
}

/// @brief attend_grouped_streaming with one key/value head per query head and one mask for all
/// (scaled_dot_product_attention's streaming path is its one-head case)
template <class T, class After>
void attend_heads_streaming(const matrix_view<const T>& q, const matrix_view<const T>& k,
                            const matrix_view<const T>& v, const matrix_view<T>& out, std::size_t heads,
                            T scale, const attention_mask& mask, thread_pool* pool, After&& after,
                            std::size_t panel_limit = kv_panel_limit,
                            const row_statistics_out<T>* stats = nullptr) {
  attend_grouped_streaming(
      q, k, v, out, heads, heads, scale, [&](std::size_t) { return mask; }, pool, std::forward<After>(after),
      panel_limit, stats);
}

}  // namespace detail

/// @brief the default scale 1/sqrt(d), d = the dimension of one query (of one head)
template <class T>
[[nodiscard]] T default_scale(std::size_t d) {
  return T(1) / std::sqrt(T(d));
}

/// @brief out = softmax(scale q kᵀ + mask) v; writes scores (raw q kᵀ) and weights when they are
/// given (the materialised path), else streams (memory O(T + S)). Threads: query blocks.
/// NaN and infinity: the header comment (the same answer on both paths, any thread count).
/// @throws shape_error naming the shapes that do not fit
/// T is deduced from out alone (q, k, v and scale convert to it), so views of a
/// dynamic_matrix<float> (q.view(), a non-const view) and a double scale need no <float>.
template <class T>
void scaled_dot_product_attention(std::type_identity_t<matrix_view<const T>> q,
                                  std::type_identity_t<matrix_view<const T>> k,
                                  std::type_identity_t<matrix_view<const T>> v, matrix_view<T> out,
                                  std::type_identity_t<T> scale, const attention_mask& mask_in = {},
                                  const matrix_view<T>* scores = nullptr,
                                  const matrix_view<T>* weights = nullptr,
                                  thread_pool* pool = &default_pool()) {
  detail::check_attention_shapes(q.rows, q.cols, k.rows, k.cols, v.rows, v.cols, out.rows, out.cols, mask_in);
  if (mask_in.bias && mask_in.bias_element != sizeof(T))
    throw shape_error("attention: the bias's elements have " + std::to_string(mask_in.bias_element) +
                      " bytes but q's have " + std::to_string(sizeof(T)));
  const attention_mask mask = mask_in.resolved(q.rows, k.rows);
  if ((scores == nullptr) != (weights == nullptr))
    throw shape_error("attention: give both scores and weights, or neither");
  if (scores && (scores->rows != q.rows || scores->cols != k.rows || weights->rows != q.rows ||
                 weights->cols != k.rows))
    throw shape_error("attention: scores are " + scores->shape() + " and weights " + weights->shape() +
                      " but both must be " + shape_string(q.rows, k.rows));
  // a NaN or inf in v: the kernels read a copy with them set to 0, repair_rows puts them back
  // where a query attends to them (the header comment)
  const auto nonfinite = detail::nonfinite_values<T>::of(v);
  const matrix_view<const T> vk = nonfinite ? matrix_view<const T>(nonfinite->clean.view()) : v;
  const double work = double(q.rows) * double(k.rows) * double(q.cols + v.cols);
  thread_pool* use = pool && work >= (1 << 17) ? pool : nullptr;
  if (!scores) {  // streaming: k and v packed once, shared by the query blocks
    detail::attend_heads_streaming(
        q, k, vk, out, 1, scale, mask, use, [&](std::size_t, std::size_t i0, std::size_t i1) {
          if (nonfinite) detail::repair_rows(q, k, v, out, scale, mask, nonfinite->keys, i0, i1);
        });
    return;
  }
  const std::size_t tasks = (q.rows + query_block - 1) / query_block;
  auto run = [&](std::size_t t) {
    const std::size_t i0 = t * query_block, i1 = std::min(q.rows, i0 + query_block);
    detail::attend_rows_materialised(q, k, vk, out, scale, mask, *scores, *weights, i0, i1);
    if (nonfinite) detail::repair_rows(q, k, v, out, scale, mask, nonfinite->keys, i0, i1);
  };
  if (use)
    use->parallel_for(tasks, run);
  else
    for (std::size_t t = 0; t < tasks; ++t) run(t);
}

/// @brief the same, streaming, on whole matrices: out (resized to q's rows by v's columns) =
/// softmax(scale q kᵀ + mask) v, the call an engineer writes first (no views, no <float>)
template <class T>
void scaled_dot_product_attention(const dynamic_matrix<T>& q, const dynamic_matrix<T>& k,
                                  const dynamic_matrix<T>& v, dynamic_matrix<T>& out,
                                  std::type_identity_t<T> scale, const attention_mask& mask = {},
                                  thread_pool* pool = &default_pool()) {
  out.resize(q.rows(), v.cols());
  scaled_dot_product_attention<T>(q.view(), k.view(), v.view(), out.view(), scale, mask, nullptr, nullptr,
                                  pool);
}

}  // namespace qkv::runtime
