// flat_attention.hpp: multi-head self-attention at run-time sizes in the core's arithmetic, on
// flat row-major buffers: the one source of the learner pages' WebAssembly module
// (wasm/qkv_wasm.cpp) and of `qkv attend --arithmetic core` (tools/cmd_attend.hpp).
//
// The rest of the core is fixed-size: matrix<T, R, C> with R and C template arguments. A page's
// learner edits values, not sizes, and the module is built once for every page, so these loops
// take the sizes as arguments and follow the core's own order of operations, step for step:
//   projections  matrix_product_transposed (out_in, nn.Linear's x Wᵀ) or matrix_product
//                (in_out, x W): each element summed left to right from the first product, one
//                rounding per product and per sum (no fma: -ffp-contract=off), then
//                add_row_vector's + b
//   scores       matrix_product_transposed(q_h, k_h)
//   scaled       scaling<T>::multiply_by: scale * score (the factor the page states), then, when
//                the case has them, + bias (a -inf of the bias masks) and + ALiBi's m_h (j - p)
//                (slope times the distance, one rounding each, p = i + offset), as the runtime's
//                mask step adds them (runtime/attention.hpp's mask_scores)
//   masked       masked(): -inf where `masked` says so (causal, window, allowed, padding)
//   weights      detail::stable_softmax, the core's function itself (qkv::exp inside)
//   context      attended_context: masked keys skipped, the NaN / inf policy of docs/numerics.md
//   output       concat Woᵀ (+ bo) or concat Wo, as the projections
// attend_args (attend's second form) adds what chapter two's cases have: keys and values from a
// context (s rows, cross-attention), grouped-query heads (kv_heads: query head h reads key/value
// head h / (heads / kv_heads), grouped.hpp), the bias and ALiBi terms above, and RoPE: the
// projected queries and keys rotated by flat_steps.hpp's rope (rope()'s arithmetic) with the
// case's cos and sin tables (one row per position) before the scores.
// wasm/qkv_wasm_check.cpp checks these loops against the core's fixed-size templates
// (multihead_attend_projected, grouped_query_attend_projected, rope, output_projection), bit for
// bit (tests/wasm/module_test.py).
// Their backward, on this function's output, is flat_attention_backward.hpp's attend_backward.
//
// Every step is written to one output buffer, in this order (H heads, dq = H dk columns of the
// queries, dv = H dvh of the concatenation, t queries, s keys (t without a context), Hkv
// key/value heads (H without kv_heads), dkv = Hkv dk, dvkv = Hkv dvh; steps_layout gives the
// offsets):
//   queries (t, dq), keys (s, dkv), values (s, dvkv),
//   per head h: scores (t, s), scaled (t, s), weights (t, s), context (t, dvh),
//   concat (t, dv) [the heads side by side], output (t, dout) [when wo is given],
//   with RoPE: queries before RoPE (t, dq), keys before RoPE (s, dkv)
// Without a context, kv_heads or RoPE, the layout is the first form's (s = t, dkv = dq, dvkv = dv).
// Given already-projected queries, keys and values (attend_args' q, k, v: what `qkv attend`'s
// q/k/v case gives, and a summarised page's inputs), the projections are copies of them and there
// is no output projection; the rest is the same loops, so the steps after the projections have
// the bits they have when attend() projects the same numbers itself.
#pragma once

#include <cstddef>
#include <limits>

#include "flat_steps.hpp"

namespace qkv::flat {

/// @brief one projection y = x Wᵀ + b (out_in: w is (dout, din)) or x W + b (in_out: w is
/// (din, dout)); x is (n, din) with row stride xs, y (n, dout); b (dout) or null: no bias.
/// The core's summation order (flat_steps.hpp's dot and matmul).
template <class T>
constexpr void project(const T* x, std::size_t n, std::size_t din, std::size_t xs, const T* w, const T* b,
                       std::size_t dout, bool out_in, T* y) {
  if (out_in)
    dot(x, xs, w, din, n, dout, din, 0, 0, b, y);
  else
    matmul(x, xs, w, dout, n, dout, din, 0, 0, 0, b, y);
}

/// @brief where each step of attend() is in its output buffer (offsets in numbers), for t queries,
/// dq query columns, dv concatenated value columns, `heads` heads and dout output columns (0: no
/// output projection); s keys (0: t, self-attention), kv_heads key/value heads (0: heads), rope:
/// the projections before the rotation are kept after the output
struct steps_layout {
  std::size_t t, dq, dv, heads, dout;
  std::size_t s = 0, kv_heads = 0;
  bool rope = false;

  constexpr steps_layout(std::size_t t_, std::size_t dq_, std::size_t dv_, std::size_t heads_,
                         std::size_t dout_, std::size_t s_ = 0, std::size_t kv_heads_ = 0, bool rope_ = false)
      : t(t_), dq(dq_), dv(dv_), heads(heads_), dout(dout_), s(s_), kv_heads(kv_heads_), rope(rope_) {}

  [[nodiscard]] constexpr std::size_t keys_rows() const { return s ? s : t; }
  [[nodiscard]] constexpr std::size_t kv() const { return kv_heads ? kv_heads : heads; }
  [[nodiscard]] constexpr std::size_t dk() const { return dq / heads; }
  [[nodiscard]] constexpr std::size_t dvh() const { return dv / heads; }
  /// the keys' columns (kv_heads dk) and the values' (kv_heads dvh)
  [[nodiscard]] constexpr std::size_t dkv() const { return kv() * dk(); }
  [[nodiscard]] constexpr std::size_t dvkv() const { return kv() * dvh(); }
  [[nodiscard]] constexpr std::size_t queries() const { return 0; }
  [[nodiscard]] constexpr std::size_t keys() const { return t * dq; }
  [[nodiscard]] constexpr std::size_t values() const { return keys() + keys_rows() * dkv(); }
  /// head h's four steps: scores, scaled, weights (t, s each), context (t, dvh)
  [[nodiscard]] constexpr std::size_t head(std::size_t h) const {
    return values() + keys_rows() * dvkv() + h * (3 * t * keys_rows() + t * dvh());
  }
  [[nodiscard]] constexpr std::size_t scores(std::size_t h) const { return head(h); }
  [[nodiscard]] constexpr std::size_t scaled(std::size_t h) const { return head(h) + t * keys_rows(); }
  [[nodiscard]] constexpr std::size_t weights(std::size_t h) const { return head(h) + 2 * t * keys_rows(); }
  [[nodiscard]] constexpr std::size_t context(std::size_t h) const { return head(h) + 3 * t * keys_rows(); }
  [[nodiscard]] constexpr std::size_t concat() const { return head(heads); }
  [[nodiscard]] constexpr std::size_t output() const { return concat() + t * dv; }
  /// with rope: the queries (t, dq) and keys (s, dkv) before the rotation
  [[nodiscard]] constexpr std::size_t queries_linear() const { return output() + t * dout; }
  [[nodiscard]] constexpr std::size_t keys_linear() const { return queries_linear() + t * dq; }
  /// every number attend() writes
  [[nodiscard]] constexpr std::size_t size() const {
    return output() + t * dout + (rope ? t * dq + keys_rows() * dkv() : 0);
  }
};

/// how many numbers attend() writes for these sizes (dout 0: no output projection)
constexpr std::size_t output_size(std::size_t t, std::size_t dq, std::size_t dv, std::size_t heads,
                                  std::size_t dout) {
  return steps_layout{t, dq, dv, heads, dout}.size();
}

/// @brief the second form's case (docs/reference.md): everything attend() takes, plus a context,
/// grouped-query heads, terms added to the scaled scores and RoPE. A null pointer is "none".
template <class T>
struct attend_args {
  const T* x = nullptr;  // the queries' input (t, d)
  std::size_t t = 0, d = 0;
  const T* context = nullptr;  // the keys' and values' input (s, dc); null: x (s = t, dc = d)
  std::size_t s = 0, dc = 0;
  // wq (dq, d), wk (dkv, dc), wv (dvkv, dc), wo (dout, dv) out_in, or their transposes in_out
  const T *wq = nullptr, *bq = nullptr, *wk = nullptr, *bk = nullptr, *wv = nullptr, *bv = nullptr;
  const T *wo = nullptr, *bo = nullptr;
  std::size_t dq = 0, dv = 0, heads = 1, kv_heads = 0, dout = 0;  // dv: the concatenation's columns
  bool out_in = true;
  T scale = T(1);
  const unsigned char* masked = nullptr;  // (t, s) bytes, nonzero: query i may not see key j
  const T* bias = nullptr;                // (bias_heads, t, s): 1 (every head) or heads
  std::size_t bias_heads = 0;
  const T* slopes = nullptr;  // ALiBi: heads slopes; query i sits at position i + offset
  long long offset = 0;
  // RoPE: cos and sin of the queries' positions (t, rotary_dim / 2) and the keys' (s, rotary_dim /
  // 2); rotary_dim 0: no RoPE; interleaved pairs (2q, 2q + 1), else half_split (q, q + r / 2)
  const T *cos_q = nullptr, *sin_q = nullptr, *cos_k = nullptr, *sin_k = nullptr;
  std::size_t rotary_dim = 0;
  bool interleaved = false;
  // already projected (all three or none): the queries (t, dq), keys (s, dkv) and values (s,
  // dvkv) as given, before RoPE when it is set; x, context, wq, wk, wv and their biases are then
  // not read (d and dc neither: s is the keys' rows), and no output projection is applied
  const T *q = nullptr, *k = nullptr, *v = nullptr;

  [[nodiscard]] constexpr bool projected() const { return q != nullptr; }
  [[nodiscard]] constexpr std::size_t keys_rows() const { return context || projected() ? s : t; }
  [[nodiscard]] constexpr std::size_t keys_width() const { return context ? dc : d; }
  [[nodiscard]] constexpr steps_layout layout() const {
    return {t,
            dq,
            dv,
            heads,
            wo && !projected() ? dout : 0,
            context || projected() ? s : 0,
            kv_heads,
            rotary_dim != 0};
  }
  /// whether the sizes fit together (attend refuses them otherwise)
  [[nodiscard]] constexpr bool valid() const {
    const std::size_t hk = kv_heads ? kv_heads : heads;
    const bool inputs = projected() ? (k && v && s != 0) : (d != 0 && (!context || (s != 0 && dc != 0)));
    return heads != 0 && dq % heads == 0 && dv % heads == 0 && hk != 0 && heads % hk == 0 && t != 0 &&
           inputs && (bias_heads == 0 || bias_heads == 1 || bias_heads == heads) &&
           (!bias || bias_heads != 0) && rotary_dim % 2 == 0 && rotary_dim <= dq / heads &&
           (rotary_dim == 0 || (cos_q && sin_q && cos_k && sin_k));
  }
};

/// @brief head h's scaled, masked scores ss (t, s) from its scores sc: scale * score, then + the
/// bias (its -inf masks), then + ALiBi's slope (j - p) where the score is not -inf, then -inf
/// where masked: runtime/attention.hpp's mask_scores, one rounding per product and per sum
template <class T>
constexpr void scale_and_mask(const attend_args<T>& a, std::size_t h, const T* sc, T* ss) {
  const std::size_t t = a.t, s = a.keys_rows();
  const T ninf = -std::numeric_limits<T>::infinity();
  const T* b = a.bias ? a.bias + (a.bias_heads == 1 ? 0 : h) * t * s : nullptr;
  for (std::size_t i = 0; i < t; ++i)
    for (std::size_t j = 0; j < s; ++j) {
      const std::size_t k = i * s + j;
      if (a.masked && a.masked[k]) {
        ss[k] = ninf;
        continue;
      }
      T v = a.scale * sc[k];
      if (b) v = b[k] == ninf ? ninf : T(v + b[k]);
      if (a.slopes && v != ninf)
        v = T(v + a.slopes[h] *
                      static_cast<T>(static_cast<long long>(j) - (static_cast<long long>(i) + a.offset)));
      ss[k] = v;
    }
}

/// @brief attention in attend_args' generality, every step written to out (the layout at the top
/// of this file, a.layout(); a.layout().size() numbers). Returns 0, or 1 when the sizes do not
/// fit (attend_args::valid; nothing written). The first form (below) is this one without a
/// context, kv_heads, bias, ALiBi or RoPE.
template <class T>
constexpr int attend(const attend_args<T>& a, T* out) {
  if (!a.valid()) return 1;
  const steps_layout at = a.layout();
  const std::size_t t = a.t, s = at.keys_rows(), dq = a.dq, dv = a.dv, dk = at.dk(), dvh = at.dvh(),
                    dkv = at.dkv(), dvkv = at.dvkv(), group = a.heads / at.kv();
  const T* src = a.context ? a.context : a.x;
  const std::size_t din = a.keys_width();
  T* q = out + at.queries();
  T* k = out + at.keys();
  T* v = out + at.values();
  // the projections (already projected: the given q, k, v, copied), then, with RoPE, rope()'s
  // rotation of each head (flat_steps.hpp)
  auto copy = [](const T* from, std::size_t n, T* to) {
    for (std::size_t e = 0; e < n; ++e) to[e] = from[e];
  };
  T* ql = a.rotary_dim ? out + at.queries_linear() : q;
  T* kl = a.rotary_dim ? out + at.keys_linear() : k;
  if (a.projected()) {
    copy(a.q, t * dq, ql);
    copy(a.k, s * dkv, kl);
    copy(a.v, s * dvkv, v);
  } else {
    project(a.x, t, a.d, a.d, a.wq, a.bq, dq, a.out_in, ql);
    project(src, s, din, din, a.wk, a.bk, dkv, a.out_in, kl);
    project(src, s, din, din, a.wv, a.bv, dvkv, a.out_in, v);
  }
  if (a.rotary_dim) {
    const std::size_t half = a.rotary_dim / 2;
    rope(ql, t, dq, a.cos_q, a.sin_q, half, dk, a.rotary_dim, a.interleaved, q);
    rope(kl, s, dkv, a.cos_k, a.sin_k, half, dk, a.rotary_dim, a.interleaved, k);
  }
  T* concat = out + at.concat();
  for (std::size_t h = 0; h < a.heads; ++h) {
    const std::size_t g = h / group;  // the key/value head of query head h
    T* sc = out + at.scores(h);
    T* ss = out + at.scaled(h);
    T* w = out + at.weights(h);
    T* ctx = out + at.context(h);
    dot(q, dq, k, dkv, t, s, dk, h * dk, g * dk, static_cast<const T*>(nullptr), sc);
    scale_and_mask(a, h, sc, ss);
    softmax(ss, t, s, w);
    attended(w, s, ss, s, v, dvkv, g * dvh, t, s, dvh, ctx, dvh);
    for (std::size_t i = 0; i < t; ++i)
      for (std::size_t c = 0; c < dvh; ++c) concat[i * dv + h * dvh + c] = ctx[i * dvh + c];
  }
  if (a.wo && !a.projected()) project(concat, t, dv, dv, a.wo, a.bo, a.dout, a.out_in, out + at.output());
  return 0;
}

/// @brief self-attention of x (t, d) with `heads` heads, every step written to out (the layout at
/// the top of this file; output_size numbers). wq, wk (dq, d) and wv (dv, d) out_in, or their
/// transposes in_out; wo (dout, dv) or (dv, dout), or null: no output projection (dout ignored);
/// a null bias is none. masked (t x t bytes, row-major, or null): nonzero where query i may not
/// see key j. Returns 0, or 1 when the sizes do not split into heads (nothing written).
template <class T>
constexpr int attend(const T* x, std::size_t t, std::size_t d, const T* wq, const T* bq, const T* wk,
                     const T* bk, const T* wv, const T* bv, std::size_t dq, std::size_t dv, const T* wo,
                     const T* bo, std::size_t dout, std::size_t heads, bool out_in, T scale,
                     const unsigned char* masked, T* out) {
  attend_args<T> a;  // the second form without a context, kv_heads, bias, ALiBi or RoPE
  a.x = x, a.t = t, a.d = d;
  a.wq = wq, a.bq = bq, a.wk = wk, a.bk = bk, a.wv = wv, a.bv = bv, a.wo = wo, a.bo = bo;
  a.dq = dq, a.dv = dv, a.dout = dout, a.heads = heads, a.out_in = out_in, a.scale = scale, a.masked = masked;
  return attend(a, out);
}

}  // namespace qkv::flat
