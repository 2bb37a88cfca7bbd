// backward.hpp: the gradients of scaled dot-product attention at run time, streaming
// (FlashAttention-2's backward, Dao 2023, arXiv 2307.08691, algorithm 2).
//
//   forward (attention.hpp):  S = scale q kᵀ + mask (T, S)   P = softmax(S)   O = P v (T, dv)
//   given d_context = dO (T, dv), the gradient of some loss with respect to O:
//     d_values        dV = Pᵀ dO                      (S, dv)
//     d_weights       dP = dO vᵀ                      (T, S)
//     D = rowsum(dO ∘ O) = rowsum(dP ∘ P)             (T)
//     d_scaled_scores dS = P ∘ (dP − D)               (T, S)   (softmax's Jacobian-vector product)
//     d_scores           = scale dS                   (T, S)   (the raw scores q kᵀ)
//     d_queries       dQ = scale dS k                 (T, d)
//     d_keys          dK = scale dSᵀ q                (S, d)
// Streaming: the forward saves each query row's softmax statistics (attention_statistics: the
// row maximum m and the sum l, FlashAttention-2's logsumexp L = m + log l kept as its two parts)
// beside O; the backward recomputes P tile by tile, P(i, j) = e^(S(i, j) − m_i) / l_i, with
// the forward's own score products (the same fma chains, so the same scores bit for bit) and
// vexp. No T x S matrix exists: extra memory is D (heads x T), qᵀ and dOᵀ (transposed once, so
// that dKᵀ += qᵀ dS' and dVᵀ += dOᵀ P read them in place), three tiles of
// backward_query_block x backward_key_block and one key block's dKᵀ, dVᵀ and packed k, v per
// thread, and, for one to three key/value heads, partial sums of dQ (dq_parts x T x d; below).
// O(T d) in all.
// Order (docs/design.md, "The backward"): the outer loop is over key blocks, so that each
// block's dK and dV rows are written by one task alone, accumulated over the query heads of its
// key/value head (GQA: a shared head sums its query heads' gradients) and their query blocks in
// ascending order; dQ rows receive a contribution from every key block. Every element of every
// gradient is one fma chain in a fixed order (gemm.hpp's product_block with `accumulate`
// continues the chain): dK(j, c) and dV(j, c) over the query heads then the query rows
// ascending; dQ(i, c) over the key blocks of its part ascending, the parts then added in
// order. The parts (dq_parts) depend only on the shapes, never on the threads, so any thread
// count gives the same bits.
// Masks: everything the forward takes (attention_mask: allowed, key_padding, causal in both
// alignments, window, ALiBi, bias); a masked key gets P = 0 and dS = 0 exactly (written, not
// computed: a NaN elsewhere cannot reach it); a query row with every key masked has dQ = 0
// and gives nothing to dK and dV. Query blocks no key of a block can see (causal, window) are
// skipped. The bias's gradient is dS (d_scaled_scores), which the streaming path does not keep.
// NaN and infinity (docs/numerics.md, "NaN and infinity in the backward"): a non-finite d_context
// element dO(i, c) reaches exactly what it flows into: dV(j, c) for the keys j row i sees, and
// through dP and D all of row i's dS: dQ(i, ·) and dK(j, ·) for those keys; never a key masked
// for row i (dV's product runs on a copy of dO with those elements 0, and each affected dV(j, c)
// then gets P(i, j) × dO(i, c) added by IEEE arithmetic). A poisoned forward row (a NaN or +inf
// score: O's row is NaN) has P = NaN on its visible keys, so its gradients are NaN as PyTorch's.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "attention.hpp"
#include "dynamic_matrix.hpp"
#include "exp.hpp"
#include "gemm.hpp"
#include "multihead.hpp"
#include "simd.hpp"
#include "thread_pool.hpp"

namespace qkv::runtime {

/// what the forward saves for the backward: each query row's softmax statistics, (heads, T):
/// max(h, i) = m, the largest masked scaled score of row i of head h (-inf: every key masked;
/// NaN: a poisoned row), sum(h, i) = l = sum over visible keys of e^(s − m) (0: every key masked)
template <class T>
struct attention_statistics {
  dynamic_matrix<T> max, sum;
  void resize(std::size_t heads, std::size_t t) {
    max.resize(heads, t);
    sum.resize(heads, t);
  }
};

/// @brief every gradient of one attention call for an upstream gradient d_context (dO) or,
/// for the layer, d_output. Scaled dot-product attention fills d_queries, d_keys, d_values;
/// the layer (attention_backward of attention_weights) fills all.
template <class T>
struct attention_gradients {
  dynamic_matrix<T> d_queries, d_keys, d_values;  // (T, d_q) (S, d_k) (S, d_v): heads side by side
  dynamic_matrix<T> d_concat;                     // (T, heads d_v/heads): d_context of every head
  dynamic_matrix<T> d_x;                          // (T, d_model): through all three projections
  dynamic_matrix<T> d_w_query, d_w_key, d_w_value, d_w_output;  // in each weight's own layout
  std::vector<T> d_b_query, d_b_key, d_b_value, d_b_output;     // empty when the layer has no bias
};

/// the backward's tile: query rows and keys of one step (three tiles of these per thread:
/// scores, weights, d_weights then d_scaled_scores; 64 x 128 floats, 32 KiB each)
inline constexpr std::size_t backward_query_block = 64;
inline constexpr std::size_t backward_key_block = 128;

namespace detail {

/// per-thread tiles of the backward
template <class T>
struct backward_space {
  aligned_vector<T> s, p, ds;
  aligned_vector<T> dkt, dvt;    // one key block's dKᵀ (d, bc) and dVᵀ (dv, bc)
  aligned_vector<T> kt, vt, kb;  // one key block's kᵀ, vᵀ and k in the products' panels
  static backward_space& get() {
    thread_local backward_space b;
    return b;
  }
};

/// the calling thread's buffers of one backward call (qᵀ, dOᵀ, D, dQ's parts), kept between
/// calls as the per-thread tiles are: allocated afresh, their pages faulted in on every call
/// (W5: 6 MiB, about 9% of the backward in perf)
template <class T>
struct backward_call_space {
  aligned_vector<T> q_t, d_out_t, d_row, parts;
  static backward_call_space& get() {
    thread_local backward_call_space b;
    return b;
  }
};

/// dQ's partial sums: one for each key/value head when there are 4 or more (tasks = heads),
/// else enough parts of the key blocks (interleaved: part p takes blocks p, p + parts, ...) for
/// 4 tasks, at most one per key block; 1 for small problems (work < 2^17, as the forward's
/// threshold). Only the shapes decide it, so the bits never depend on the threads.
[[nodiscard]] inline std::size_t dq_parts(std::size_t kv_heads, std::size_t key_blocks, double work) {
  if (work < double(1 << 17) || kv_heads >= 4 || key_blocks <= 1) return 1;
  return std::min(key_blocks, (4 + kv_heads - 1) / kv_heads);
}

/// rows i of t that may see some key of j0 .. j1 (causal: j0 <= p; window: p - window < j1 - 1,
/// p = i + offset): [lo, hi)
inline void visible_rows(const attention_mask& mask, std::size_t j0, std::size_t j1, std::size_t t,
                         std::size_t& lo, std::size_t& hi) {
  using d = std::ptrdiff_t;
  d a = 0, b = d(t);
  if (mask.causal) a = std::max<d>(a, d(j0) - mask.offset);
  if (mask.window > 0) b = std::min<d>(b, d(j1) - 1 + d(mask.window) - mask.offset);
  lo = std::size_t(std::clamp<d>(a, 0, d(t)));
  hi = std::size_t(std::clamp<d>(b, d(lo), d(t)));
}

/// D(i) = rowsum(dO ∘ O) of row i, lanes then the fixed lane order (horizontal_sum)
template <class T>
[[nodiscard]] T row_dot(const T* a, const T* b, std::size_t n) {
  using V = simd<T>;
  constexpr std::size_t W = lanes<T>;
  V acc(T(0));
  std::size_t c = 0;
  for (; c + W <= n; c += W)
    acc = fmadd(V(a + c, stdx::element_aligned), V(b + c, stdx::element_aligned), acc);
  if (c < n) acc = fmadd(load_partial(a + c, n - c), load_partial(b + c, n - c), acc);
  return horizontal_sum(acc);
}

/// the views of one call of the heads' backward (heads side by side in columns)
template <class T>
struct backward_views {
  matrix_view<const T> q, k, v, out, d_out, d_out_clean;  // d_out_clean: dO with non-finite elements 0
  matrix_view<const T> q_t, d_out_t;  // qᵀ (d, T) and d_out_cleanᵀ (dv, T): contiguous rows
  matrix_view<T> d_q, d_k, d_v;
  std::size_t heads = 1, kv_heads = 1;
  T scale = T(1);
  const T* stat_max = nullptr;  // (heads, T)
  const T* stat_sum = nullptr;
  const T* d_row = nullptr;  // D, (heads, T)
  bool dout_nonfinite = false;
};

/// key block j0 .. j0 + bc of key/value head g packed once for all its tiles (gemm.hpp's
/// panels, what product_block would pack itself for each tile: the same bits): kᵀ (d, bc) for
/// the scores, vᵀ (dv, bc) for dP, k (bc, d) for dQ
template <class T>
void pack_key_block(const backward_views<T>& bv, std::size_t g, std::size_t j0, std::size_t bc) {
  constexpr std::size_t NR = gemm_blocking<T>::nr;
  const std::size_t dh = bv.q.cols / bv.heads, dvh = bv.v.cols / bv.kv_heads;
  const auto kh = row_block(column_block(bv.k, g * dh, dh), j0, bc);
  const auto vh = row_block(column_block(bv.v, g * dvh, dvh), j0, bc);
  auto& space = backward_space<T>::get();
  const std::size_t bcp = (bc + NR - 1) / NR * NR, dhp = (dh + NR - 1) / NR * NR;
  space.kt.resize(std::max(space.kt.size(), dh * bcp));
  space.vt.resize(std::max(space.vt.size(), dvh * bcp));
  space.kb.resize(std::max(space.kb.size(), bc * dhp));
  // depth blocks of kc, as packed_operand lays them out
  constexpr std::size_t KC = gemm_blocking<T>::kc;
  for (std::size_t pc = 0; pc < dh; pc += KC)
    pack_b(transposed(kh), pc, std::min(KC, dh - pc), 0, bc, space.kt.data() + pc * bcp);
  for (std::size_t pc = 0; pc < dvh; pc += KC)
    pack_b(transposed(vh), pc, std::min(KC, dvh - pc), 0, bc, space.vt.data() + pc * bcp);
  for (std::size_t pc = 0; pc < bc; pc += KC)
    pack_b(kh, pc, std::min(KC, bc - pc), 0, dh, space.kb.data() + pc * dhp);
}

/// one tile of the backward: query rows i0 .. i0 + rows of head h, keys j0 .. j0 + bc of its
/// key/value head g (packed by pack_key_block). dKᵀ and dVᵀ of the keys (dkt, dvt: bc columns)
/// and dQ of the rows (dq) are accumulated (their chains continued)
template <class T>
void backward_tile(const backward_views<T>& bv, std::size_t h, std::size_t g, const attention_mask& mask,
                   std::size_t i0, std::size_t rows, std::size_t j0, std::size_t bc, const matrix_view<T>& dq,
                   const matrix_view<T>& dkt, const matrix_view<T>& dvt) {
  using V = simd<T>;
  constexpr std::size_t W = lanes<T>;
  const T ninf = -std::numeric_limits<T>::infinity();
  const std::size_t t_len = bv.q.rows, s_len = bv.k.rows;
  const std::size_t dh = bv.q.cols / bv.heads, dvh = bv.v.cols / bv.kv_heads;
  const auto qh = row_block(column_block(bv.q, h * dh, dh), i0, rows);
  const auto kh = row_block(column_block(bv.k, g * dh, dh), j0, bc);
  const auto vh = row_block(column_block(bv.v, g * dvh, dvh), j0, bc);
  const auto doh = row_block(column_block(bv.d_out, h * dvh, dvh), i0, rows);
  auto& space = backward_space<T>::get();
  const std::size_t n = backward_query_block * backward_key_block;
  if (space.s.size() < n) {
    space.s.resize(n);
    space.p.resize(n);
    space.ds.resize(n);
  }
  const matrix_view<T> st{space.s.data(), rows, bc, bc, 1}, pt{space.p.data(), rows, bc, bc, 1},
      dst{space.ds.data(), rows, bc, bc, 1};
  // the scaled scores, as the forward computes them (scale applied after the chain), masked
  epilogue<T> e;
  e.scale = bv.scale;
  e.scaled = true;
  product_block<T>(qh, transposed(kh), st, e, 0, rows, 0, bc, false, space.kt.data(), true);
  // P = e^(S - m) / l; 0 where masked (S = -inf) or the row has no visible key (l = 0); NaN on
  // the visible keys of a poisoned row
  const V vninf(ninf), zero(T(0));
  for (std::size_t r = 0; r < rows; ++r) {
    const std::size_t i = i0 + r;
    T* srow = st.data + r * bc;
    T* prow = pt.data + r * bc;
    mask_scores(srow, j0, bc, mask, i, s_len);
    const T m = bv.stat_max[h * t_len + i], l = bv.stat_sum[h * t_len + i];
    if (l == T(0)) [[unlikely]] {
      std::fill_n(prow, bc, T(0));
      continue;
    }
    if (!(m - m == T(0)) || l != l) [[unlikely]] {
      for (std::size_t c = 0; c < bc; ++c)
        prow[c] = srow[c] == ninf ? T(0) : std::numeric_limits<T>::quiet_NaN();
      continue;
    }
    const V vm(m), vl(l);
    std::size_t c = 0;
    for (; c + W <= bc; c += W) {
      const V sv(srow + c, stdx::element_aligned);
      const auto masked = sv == vninf;
      const V ev = vexp(select(masked, zero, V(sv - vm)));
      select(masked, zero, V(ev / vl)).copy_to(prow + c, stdx::element_aligned);
    }
    if (c < bc) {
      const V sv = load_partial(srow + c, bc - c, ninf);
      const auto masked = sv == vninf;
      const V ev = vexp(select(masked, zero, V(sv - vm)));
      store_partial(select(masked, zero, V(ev / vl)), prow + c, bc - c);
    }
  }
  // dP = dO vᵀ (d_weights)
  product_block<T>(doh, transposed(vh), dst, epilogue<T>{}, 0, rows, 0, bc, false, space.vt.data(), true);
  // dS' = scale P ∘ (dP − D): d_scores (the scale folded in: dQ = dS' k, dK = dS'ᵀ q); 0 where masked
  const V vs(bv.scale);
  for (std::size_t r = 0; r < rows; ++r) {
    const T* srow = st.data + r * bc;
    const T* prow = pt.data + r * bc;
    T* drow = dst.data + r * bc;
    const V vd(bv.d_row[h * t_len + i0 + r]);
    std::size_t c = 0;
    for (; c + W <= bc; c += W) {
      const auto masked = V(srow + c, stdx::element_aligned) == vninf;
      const V ds = vs * (V(prow + c, stdx::element_aligned) * (V(drow + c, stdx::element_aligned) - vd));
      select(masked, zero, ds).copy_to(drow + c, stdx::element_aligned);
    }
    if (c < bc) {
      const auto masked = load_partial(srow + c, bc - c, ninf) == vninf;
      const V ds = vs * (load_partial(prow + c, bc - c) * (load_partial(drow + c, bc - c) - vd));
      store_partial(select(masked, zero, ds), drow + c, bc - c);
    }
  }
  // dVᵀ += dOᵀ P, dKᵀ += qᵀ dS', dQ += dS' k: each chain continued. The transposed forms read
  // qᵀ and dOᵀ (transposed once per call) in place and P, dS' as they are (transposing P and
  // dS' per tile, or packing them transposed, cost 6-24% of W4's time); fma(dO, P, acc) is
  // fma(P, dO, acc), so dV's chains are the same
  const auto dot = column_block(row_block(bv.d_out_t, h * dvh, dvh), i0, rows);
  const auto qt = column_block(row_block(bv.q_t, h * dh, dh), i0, rows);
  product_block<T>(dot, matrix_view<const T>(pt), dvt, epilogue<T>{}, 0, dvh, 0, bc, true, nullptr, true);
  product_block<T>(qt, matrix_view<const T>(dst), dkt, epilogue<T>{}, 0, dh, 0, bc, true, nullptr, true);
  product_block<T>(matrix_view<const T>(dst), kh, dq, epilogue<T>{}, 0, rows, 0, dh, true, space.kb.data(),
                   true);
  // a non-finite dO(i, c): P(i, j) dO(i, c) added to dV(j, c) of the keys row i sees
  if (bv.dout_nonfinite) [[unlikely]] {
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < dvh; ++c) {
        const T x = doh(r, c);
        if (x - x == T(0)) continue;
        for (std::size_t j = 0; j < bc; ++j)
          if (st(r, j) != ninf) dvt(c, j) = dvt(c, j) + pt(r, j) * x;
      }
  }
}

/// @brief the backward of `heads` query heads side by side (GQA: kv_heads key/value heads,
/// query head h uses h / (heads / kv_heads)); mask_of(h) gives head h's resolved mask. The
/// header comment gives the order; d_q, d_k, d_v are overwritten.
template <class T, class MaskOf>
void heads_backward(backward_views<T> bv, MaskOf&& mask_of, thread_pool* pool) {
  const std::size_t t_len = bv.q.rows, s_len = bv.k.rows, H = bv.heads, HK = bv.kv_heads;
  const std::size_t dh = bv.q.cols / H, dvh = bv.v.cols / HK, group = H / HK;
  const std::size_t threads = pool ? pool->size() : 1;
  const double work = double(H) * double(t_len) * double(s_len) * double(dh + dvh);
  const bool threaded = pool && threads > 1 && work >= double(1 << 17);
  const auto run_all = [&](std::size_t tasks, auto&& f) {
    if (threaded && tasks > 1)
      pool->parallel_for(tasks, f);
    else
      for (std::size_t t = 0; t < tasks; ++t) f(t);
  };
  auto& call = backward_call_space<T>::get();
  // D = rowsum(dO ∘ O), heads x T
  if (call.d_row.size() < H * t_len) call.d_row.resize(H * t_len);
  T* d_row = call.d_row.data();
  for (std::size_t h = 0; h < H; ++h)
    for (std::size_t i = 0; i < t_len; ++i)
      d_row[h * t_len + i] = dvh == 0 ? T(0) : row_dot(&bv.d_out(i, h * dvh), &bv.out(i, h * dvh), dvh);
  bv.d_row = d_row;
  // a non-finite dO: dV's product reads a copy with those elements 0 (backward_tile adds them)
  dynamic_matrix<T> clean;
  bv.dout_nonfinite = !all_finite(bv.d_out);
  bv.d_out_clean = bv.d_out;
  if (bv.dout_nonfinite) {
    clean = dynamic_matrix<T>(bv.d_out.rows, bv.d_out.cols);
    for (std::size_t i = 0; i < clean.rows(); ++i)
      for (std::size_t c = 0; c < clean.cols(); ++c) {
        const T x = bv.d_out(i, c);
        clean(i, c) = x - x == T(0) ? x : T(0);
      }
    bv.d_out_clean = clean.view();
  }
  // qᵀ and dOᵀ (clean), once per call, in blocks of 16 x 16 (both sides stay in cache)
  if (call.q_t.size() < bv.q.cols * t_len) call.q_t.resize(bv.q.cols * t_len);
  if (call.d_out_t.size() < bv.d_out.cols * t_len) call.d_out_t.resize(bv.d_out.cols * t_len);
  const matrix_view<T> q_t{call.q_t.data(), bv.q.cols, t_len, t_len, 1},
      d_out_t{call.d_out_t.data(), bv.d_out.cols, t_len, t_len, 1};
  const auto transpose_into = [](const matrix_view<const T>& a, const matrix_view<T>& at, std::size_t c0,
                                 std::size_t c1) {
    constexpr std::size_t B = 16;
    for (std::size_t i0 = 0; i0 < a.rows; i0 += B)
      for (std::size_t j0 = c0; j0 < c1; j0 += B)
        for (std::size_t i = i0; i < std::min(a.rows, i0 + B); ++i)
          for (std::size_t j = j0; j < std::min(c1, j0 + B); ++j) at(j, i) = a(i, j);
  };
  run_all(H, [&](std::size_t h) {
    transpose_into(bv.q, q_t, h * dh, (h + 1) * dh);
    transpose_into(bv.d_out_clean, d_out_t, h * dvh, (h + 1) * dvh);
  });
  bv.q_t = q_t;
  bv.d_out_t = d_out_t;
  const std::size_t key_blocks = (s_len + backward_key_block - 1) / backward_key_block;
  const std::size_t parts = dq_parts(HK, key_blocks, work);
  // dQ's targets: d_q itself, or parts partial sums, each zeroed (the chains start from 0)
  const std::size_t part_size = t_len * bv.q.cols;
  if (parts > 1) {
    if (call.parts.size() < parts * part_size) call.parts.resize(parts * part_size);
    std::fill_n(call.parts.data(), parts * part_size, T(0));
  }
  const auto partial = [&](std::size_t p) {
    return matrix_view<T>{call.parts.data() + p * part_size, t_len, bv.q.cols, bv.q.cols, 1};
  };
  for (std::size_t i = 0; i < t_len; ++i)
    for (std::size_t c = 0; c < bv.d_q.cols; ++c) bv.d_q(i, c) = T(0);
  run_all(HK * parts, [&](std::size_t task) {
    const std::size_t g = task / parts, part = task % parts;
    const matrix_view<T> dq_all = parts > 1 ? partial(part) : bv.d_q;
    for (std::size_t b = part; b < key_blocks; b += parts) {
      const std::size_t j0 = b * backward_key_block, bc = std::min(backward_key_block, s_len - j0);
      auto& space = backward_space<T>::get();
      space.dkt.resize(std::max(space.dkt.size(), dh * backward_key_block));
      space.dvt.resize(std::max(space.dvt.size(), dvh * backward_key_block));
      const matrix_view<T> dkt{space.dkt.data(), dh, bc, bc, 1}, dvt{space.dvt.data(), dvh, bc, bc, 1};
      std::fill_n(dkt.data, dh * bc, T(0));
      std::fill_n(dvt.data, dvh * bc, T(0));
      pack_key_block(bv, g, j0, bc);
      for (std::size_t h = g * group; h < (g + 1) * group; ++h) {
        const attention_mask mask = mask_of(h);
        std::size_t lo = 0, hi = 0;
        visible_rows(mask, j0, j0 + bc, t_len, lo, hi);
        for (std::size_t i0 = lo; i0 < hi; i0 += backward_query_block) {
          const std::size_t rows = std::min(backward_query_block, hi - i0);
          const auto dq = row_block(column_block(dq_all, h * dh, dh), i0, rows);
          backward_tile(bv, h, g, mask, i0, rows, j0, bc, dq, dkt, dvt);
        }
      }
      // the key block's dK and dV rows, from their transposes
      const auto dk = row_block(column_block(bv.d_k, g * dh, dh), j0, bc);
      const auto dv = row_block(column_block(bv.d_v, g * dvh, dvh), j0, bc);
      for (std::size_t r = 0; r < bc; ++r) {
        for (std::size_t c = 0; c < dh; ++c) dk(r, c) = dkt(c, r);
        for (std::size_t c = 0; c < dvh; ++c) dv(r, c) = dvt(c, r);
      }
    }
  });
  if (parts > 1) {  // dQ = part 0 + part 1 + ..., in order
    const std::size_t blocks = (t_len + backward_query_block - 1) / backward_query_block;
    run_all(blocks, [&](std::size_t b) {
      const std::size_t i0 = b * backward_query_block, i1 = std::min(t_len, i0 + backward_query_block);
      for (std::size_t i = i0; i < i1; ++i)
        for (std::size_t c = 0; c < bv.d_q.cols; ++c) {
          T acc = call.parts[i * bv.q.cols + c];
          for (std::size_t p = 1; p < parts; ++p) acc = acc + call.parts[p * part_size + i * bv.q.cols + c];
          bv.d_q(i, c) = acc;
        }
    });
  }
}

/// heads must be at least 1 and divide q's and v's columns
template <class T>
void check_heads(const matrix_view<const T>& q, const matrix_view<const T>& v, std::size_t heads) {
  if (heads == 0 || q.cols % heads != 0 || v.cols % heads != 0)
    throw shape_error("attention: " + std::to_string(heads) + " heads do not divide q " + q.shape() +
                      " and v " + v.shape() + " into equal column blocks");
}

/// the backward's own shape checks: dO's and the statistics'
template <class T>
void check_backward_shapes(const matrix_view<const T>& q, const matrix_view<const T>& out,
                           const matrix_view<const T>& d_out, const attention_statistics<T>& stats,
                           std::size_t heads) {
  if (d_out.rows != out.rows || d_out.cols != out.cols)
    throw shape_error("attention_backward: d_context is " + d_out.shape() + " but the output is " +
                      out.shape() + " (one gradient per output element)");
  if (stats.max.rows() != heads || stats.max.cols() != q.rows || stats.sum.rows() != heads ||
      stats.sum.cols() != q.rows)
    throw shape_error("attention_backward: the statistics are " + stats.max.shape() + " and " +
                      stats.sum.shape() + " but must be " + shape_string(heads, q.rows) +
                      " (heads by queries: attention_forward_for_backward's)");
}

}  // namespace detail

/// @brief the streaming forward (out only, as scaled_dot_product_attention without scores)
/// that also saves each row's softmax statistics for attention_backward: the same output bits.
/// `heads` heads side by side in columns (head h: columns h d/heads .. of q and k, h dv/heads ..
/// of v and out), one mask for all, as attend_heads_streaming; stats is resized to (heads, T).
/// @throws shape_error naming the shapes that do not fit
template <class T>
void attention_forward_for_backward(matrix_view<const T> q, matrix_view<const T> k, matrix_view<const T> v,
                                    matrix_view<T> out, std::size_t heads, T scale,
                                    const attention_mask& mask_in, attention_statistics<T>& stats,
                                    thread_pool* pool = &default_pool()) {
  detail::check_attention_shapes(q.rows, q.cols, k.rows, k.cols, v.rows, v.cols, out.rows, out.cols, mask_in);
  detail::check_heads(q, v, heads);
  if (mask_in.bias && mask_in.bias_element != sizeof(T))
    throw shape_error("attention: the bias's elements have " + std::to_string(mask_in.bias_element) +
                      " bytes but q's have " + std::to_string(sizeof(T)));
  const attention_mask mask = mask_in.resolved(q.rows, k.rows);
  stats.resize(heads, q.rows);
  const detail::row_statistics_out<T> so{stats.max.data(), stats.sum.data()};
  const auto nonfinite = detail::nonfinite_values<T>::of(v);
  const matrix_view<const T> vk = nonfinite ? matrix_view<const T>(nonfinite->clean.view()) : v;
  const double work = double(q.rows) * double(k.rows) * double(q.cols + v.cols);
  thread_pool* use = pool && work >= (1 << 17) ? pool : nullptr;
  const std::size_t dh = q.cols / heads, dvh = v.cols / heads;
  detail::attend_heads_streaming(
      q, k, vk, out, heads, scale, mask, use,
      [&](std::size_t h, std::size_t i0, std::size_t i1) {
        if (nonfinite)
          detail::repair_rows(column_block(q, h * dh, dh), column_block(k, h * dh, dh),
                              column_block(v, h * dvh, dvh), column_block(out, h * dvh, dvh), scale, mask,
                              nonfinite->keys, i0, i1);
      },
      detail::kv_panel_limit, &so);
}

/// @brief one head: the same with heads = 1
template <class T>
void attention_forward_for_backward(matrix_view<const T> q, matrix_view<const T> k, matrix_view<const T> v,
                                    matrix_view<T> out, T scale, const attention_mask& mask,
                                    attention_statistics<T>& stats, thread_pool* pool = &default_pool()) {
  attention_forward_for_backward<T>(q, k, v, out, 1, scale, mask, stats, pool);
}

/// @brief the gradients of out = softmax(scale q kᵀ + mask) v for d_context = dO: d_queries,
/// d_keys and d_values of g (resized), streaming (the header comment), `heads` heads side by
/// side as the forward's. q, k, v, out and stats are the forward's
/// (attention_forward_for_backward), mask the same mask.
/// @throws shape_error naming the shapes that do not fit
template <class T>
void attention_backward(matrix_view<const T> q, matrix_view<const T> k, matrix_view<const T> v,
                        matrix_view<const T> out, matrix_view<const T> d_context, std::size_t heads, T scale,
                        const attention_mask& mask_in, const attention_statistics<T>& stats,
                        attention_gradients<T>& g, thread_pool* pool = &default_pool()) {
  detail::check_attention_shapes(q.rows, q.cols, k.rows, k.cols, v.rows, v.cols, out.rows, out.cols, mask_in);
  detail::check_heads(q, v, heads);
  detail::check_backward_shapes(q, out, d_context, stats, heads);
  const attention_mask mask = mask_in.resolved(q.rows, k.rows);
  g.d_queries.resize(q.rows, q.cols);
  g.d_keys.resize(k.rows, k.cols);
  g.d_values.resize(v.rows, v.cols);
  detail::backward_views<T> bv;
  bv.q = q;
  bv.k = k;
  bv.v = v;
  bv.out = out;
  bv.d_out = d_context;
  bv.d_q = g.d_queries.view();
  bv.d_k = g.d_keys.view();
  bv.d_v = g.d_values.view();
  bv.heads = bv.kv_heads = heads;
  bv.scale = scale;
  bv.stat_max = stats.max.data();
  bv.stat_sum = stats.sum.data();
  detail::heads_backward(
      bv, [&](std::size_t) { return mask; }, pool);
}

/// @brief one head: the same with heads = 1
template <class T>
void attention_backward(matrix_view<const T> q, matrix_view<const T> k, matrix_view<const T> v,
                        matrix_view<const T> out, matrix_view<const T> d_context, T scale,
                        const attention_mask& mask, const attention_statistics<T>& stats,
                        attention_gradients<T>& g, thread_pool* pool = &default_pool()) {
  attention_backward<T>(q, k, v, out, d_context, 1, scale, mask, stats, g, pool);
}

}  // namespace qkv::runtime
