// flat_attention_backward.hpp: the backward of flat::attend (flat_attention.hpp) at run-time sizes
// in the core's arithmetic, on flat row-major buffers: the gradients the learner pages'
// WebAssembly module recomputes (wasm/qkv_wasm.cpp) and `qkv attend --arithmetic core` prints for
// a case with d_output (tools/cmd_attend.hpp).
//
// The loops follow the core's fixed-size backward step for step, in its order of operations
// (every sum left to right from its first product, one rounding per product and per sum, no fma:
// -ffp-contract=off):
//   output projection  multihead_backward.hpp's output_projection_backward (out_in: d_concat =
//                      d_output Wo, d_wo = d_outputᵀ concat; in_out: linear_backward.hpp's
//                      project_backward, d_concat = d_output Woᵀ, d_wo = concatᵀ d_output),
//                      d_bo = column_sums(d_output); no wo: d_concat = d_output
//   each head          attention_backward.hpp's attention_backward on head h's columns of d_concat:
//                        d_weights (dP) = dO Vᵀ; d_values = Pᵀ dO, a key whose scaled score is
//                        -inf (masked) skipped for that query; D = rowsum(dP ∘ P) over the keys
//                        whose weight is not 0 and dS = P ∘ (dP - D), 0 where P is 0
//                        (softmax_backward.hpp), then 0 where the scaled score is -inf
//                        (mask_backward); d_scores = scale dS (scale_backward, multiply_by: the
//                        factor flat::attend multiplied by); d_queries = d_scores K, d_keys =
//                        d_scoresᵀ Q (scores_backward)
//   projections        linear_backward.hpp's project_backward: out_in d_x = dY W, d_w = dYᵀ x;
//                      in_out d_x = dY Wᵀ, d_w = xᵀ dY; d_b = column_sums(dY) (written for every
//                      layout; a layer without that bias ignores it); d_x = (d_x of the queries
//                      + the keys') + the values', as self_attention_backward adds them
// attend_backward's second form takes attend()'s second form's case (attend_args) without a
// context or RoPE (the core has no backward of the rotation; the runtime none of cross-attention):
// grouped-query heads, as grouped_query_attention_backward sums them (key/value head g's d_keys and
// d_values are the sum of its query heads', added in head order), and the bias and ALiBi terms,
// whose derivative is 1 (d_scaled_scores passes through; where they make a score -inf, it is
// masked). Without kv_heads it is the first form, bit for bit.
// A NaN or inf follows the core's policy (docs/numerics.md): a masked key's dS is exactly 0 and its
// dP is not read, a fully masked row has every gradient 0, a NaN weight row gives NaN along it.
// wasm/qkv_wasm_check.cpp checks these loops against multihead_self_attention_backward, bit for bit
// (tests/wasm/module_test.py).
//
// Every gradient is written to one output buffer, in this order (gradients_layout gives the
// offsets; t tokens, d model columns, dq = H dk, dv = H dvh, dout output columns, 0: no wo):
//   d_concat (t, dv), d_wo (wo's shape: (dout, dv) out_in, (dv, dout) in_out), d_bo (dout),
//   per head h: d_weights (t, t), D (t), d_scaled_scores (t, t), d_scores (t, t),
//   d_queries (t, dq), d_keys (t, dkv), d_values (t, dvkv), d_wq (wq's shape), d_bq (dq),
//   d_wk (wk's shape), d_bk (dkv), d_wv (wv's shape), d_bv (dvkv), d_x (t, d)
// (dkv = kv_heads dk and dvkv = kv_heads dvh: dq and dv without kv_heads)
#pragma once

#include <cstddef>
#include <limits>

#include "flat_attention.hpp"

namespace qkv::flat {

/// @brief where each gradient of attend_backward() is in its output buffer (offsets in numbers),
/// for t tokens, d model columns, dq query (and key) columns, dv value columns, `heads` heads and
/// dout output columns (0: no output projection)
struct gradients_layout {
  std::size_t t, d, dq, dv, heads, dout;
  std::size_t kv_heads = 0;  // 0: heads; else the keys and values have kv_heads heads

  constexpr gradients_layout(std::size_t t_, std::size_t d_, std::size_t dq_, std::size_t dv_,
                             std::size_t heads_, std::size_t dout_, std::size_t kv_heads_ = 0)
      : t(t_), d(d_), dq(dq_), dv(dv_), heads(heads_), dout(dout_), kv_heads(kv_heads_) {}

  [[nodiscard]] constexpr std::size_t kv() const { return kv_heads ? kv_heads : heads; }
  [[nodiscard]] constexpr std::size_t dk() const { return dq / heads; }
  [[nodiscard]] constexpr std::size_t dvh() const { return dv / heads; }
  /// the keys' columns (kv_heads dk) and the values' (kv_heads dvh)
  [[nodiscard]] constexpr std::size_t dkv() const { return kv() * dk(); }
  [[nodiscard]] constexpr std::size_t dvkv() const { return kv() * dvh(); }
  [[nodiscard]] constexpr std::size_t d_concat() const { return 0; }
  [[nodiscard]] constexpr std::size_t d_wo() const { return t * dv; }
  [[nodiscard]] constexpr std::size_t d_bo() const { return d_wo() + dout * dv; }
  /// head h's four gradients: d_weights (t, t), D (t), d_scaled_scores and d_scores (t, t)
  [[nodiscard]] constexpr std::size_t head(std::size_t h) const {
    return d_bo() + dout + h * (3 * t * t + t);
  }
  [[nodiscard]] constexpr std::size_t d_weights(std::size_t h) const { return head(h); }
  [[nodiscard]] constexpr std::size_t row_dots(std::size_t h) const { return head(h) + t * t; }
  [[nodiscard]] constexpr std::size_t d_scaled_scores(std::size_t h) const { return head(h) + t * t + t; }
  [[nodiscard]] constexpr std::size_t d_scores(std::size_t h) const { return head(h) + 2 * t * t + t; }
  [[nodiscard]] constexpr std::size_t d_queries() const { return head(heads); }
  [[nodiscard]] constexpr std::size_t d_keys() const { return d_queries() + t * dq; }
  [[nodiscard]] constexpr std::size_t d_values() const { return d_keys() + t * dkv(); }
  [[nodiscard]] constexpr std::size_t d_wq() const { return d_values() + t * dvkv(); }
  [[nodiscard]] constexpr std::size_t d_bq() const { return d_wq() + dq * d; }
  [[nodiscard]] constexpr std::size_t d_wk() const { return d_bq() + dq; }
  [[nodiscard]] constexpr std::size_t d_bk() const { return d_wk() + dkv() * d; }
  [[nodiscard]] constexpr std::size_t d_wv() const { return d_bk() + dkv(); }
  [[nodiscard]] constexpr std::size_t d_bv() const { return d_wv() + dvkv() * d; }
  [[nodiscard]] constexpr std::size_t d_x() const { return d_bv() + dvkv(); }
  /// every number attend_backward() writes
  [[nodiscard]] constexpr std::size_t size() const { return d_x() + t * d; }
};

/// how many numbers attend_backward() writes for these sizes (dout 0: no output projection)
constexpr std::size_t gradients_size(std::size_t t, std::size_t d, std::size_t dq, std::size_t dv,
                                     std::size_t heads, std::size_t dout) {
  return gradients_layout{t, d, dq, dv, heads, dout}.size();
}

/// @brief the backward of one projection y = x Wᵀ + b (out_in: w (dout, din)) or x W + b
/// (in_out: w (din, dout)) for dy (n, dout): d_w in w's shape and d_b (dout), the column sums
/// of dy (project_backward, linear_backward.hpp)
template <class T>
constexpr void project_backward_weights(const T* x, std::size_t n, std::size_t din, std::size_t xs,
                                        const T* dy, std::size_t dout, bool out_in, T* d_w, T* d_b) {
  for (std::size_t j = 0; j < dout; ++j)
    for (std::size_t k = 0; k < din; ++k) {
      T s = out_in ? T(dy[j] * x[k]) : T(x[k] * dy[j]);  // out_in dYᵀ x, in_out xᵀ dY
      for (std::size_t i = 1; i < n; ++i)
        s += out_in ? T(dy[i * dout + j] * x[i * xs + k]) : T(x[i * xs + k] * dy[i * dout + j]);
      d_w[out_in ? j * din + k : k * dout + j] = s;
    }
  for (std::size_t j = 0; j < dout; ++j) d_b[j] = dy[j];  // column_sums: row 0, then + rows 1 ..
  for (std::size_t i = 1; i < n; ++i)
    for (std::size_t j = 0; j < dout; ++j) d_b[j] += dy[i * dout + j];
}

/// @brief dy W (out_in, w (dout, din)) or dy Wᵀ (in_out, w (din, dout)) at (i, k): the
/// projection's d_x, summed over j = 0 .. dout-1 from the first product
template <class T>
constexpr T project_backward_input(const T* dy, std::size_t i, std::size_t k, const T* w, std::size_t din,
                                   std::size_t dout, bool out_in) {
  auto wk = [&](std::size_t j) { return out_in ? w[j * din + k] : w[k * dout + j]; };
  T s = dy[i * dout] * wk(0);
  for (std::size_t j = 1; j < dout; ++j) s += dy[i * dout + j] * wk(j);
  return s;
}

/// @brief every gradient of attend(a, fwd) (the second form) for the upstream gradient d_output
/// (t, dout; without wo (t, dv)), written to out (gradients_layout{t, d, dq, dv, heads, dout,
/// kv_heads}; its size() numbers). fwd is attend(a)'s output. Returns 0, or 1 when the sizes do
/// not fit or the case has a context, RoPE or already-projected q, k, v (nothing written).
template <class T>
constexpr int attend_backward(const attend_args<T>& a, const T* fwd, const T* d_output, T* out) {
  if (!a.valid() || a.context || a.rotary_dim || a.projected()) return 1;
  const std::size_t t = a.t, d = a.d, dq = a.dq, dv = a.dv, heads = a.heads, dout = a.wo ? a.dout : 0;
  const steps_layout st = a.layout();
  const gradients_layout at{t, d, dq, dv, heads, dout, a.kv_heads};
  const std::size_t dk = at.dk(), dvh = at.dvh(), dkv = at.dkv(), dvkv = at.dvkv(), group = heads / at.kv();
  const bool out_in = a.out_in;
  const T ninf = -std::numeric_limits<T>::infinity();
  const T* q = fwd + st.queries();
  const T* k = fwd + st.keys();
  const T* v = fwd + st.values();
  const T* concat = fwd + st.concat();
  T* dc = out + at.d_concat();
  if (a.wo) {  // output_projection_backward
    for (std::size_t i = 0; i < t; ++i)
      for (std::size_t c = 0; c < dv; ++c)
        dc[i * dv + c] = project_backward_input(d_output, i, c, a.wo, dv, dout, out_in);
    project_backward_weights(concat, t, dv, dv, d_output, dout, out_in, out + at.d_wo(), out + at.d_bo());
  } else {
    for (std::size_t n = 0; n < t * dv; ++n) dc[n] = d_output[n];
  }
  T* dq_ = out + at.d_queries();
  T* dk_ = out + at.d_keys();
  T* dv_ = out + at.d_values();
  for (std::size_t h = 0; h < heads; ++h) {
    const std::size_t g = h / group;
    const bool first_of_group = h % group == 0;  // writes its key/value head's gradients; the others add
    auto put = [&](T& cell, T value) { cell = first_of_group ? value : T(cell + value); };
    const T* ss = fwd + st.scaled(h);
    const T* p = fwd + st.weights(h);
    T* dp = out + at.d_weights(h);
    T* dd = out + at.row_dots(h);
    T* ds = out + at.d_scaled_scores(h);
    T* dsc = out + at.d_scores(h);
    auto dO = [&](std::size_t i, std::size_t c) { return dc[i * dv + h * dvh + c]; };
    for (std::size_t i = 0; i < t; ++i)  // dP = dO Vᵀ
      for (std::size_t j = 0; j < t; ++j) {
        T s = dO(i, 0) * v[j * dvkv + g * dvh];
        for (std::size_t c = 1; c < dvh; ++c) s += dO(i, c) * v[j * dvkv + g * dvh + c];
        dp[i * t + j] = s;
      }
    for (std::size_t j = 0; j < t; ++j)  // d_values = Pᵀ dO, masked keys skipped
      for (std::size_t c = 0; c < dvh; ++c) {
        T s = T(0);
        bool first = true;
        for (std::size_t i = 0; i < t; ++i) {
          if (ss[i * t + j] == ninf) continue;
          const T term = p[i * t + j] * dO(i, c);
          s = first ? term : T(s + term);
          first = false;
        }
        put(dv_[j * dvkv + g * dvh + c], s);
      }
    for (std::size_t i = 0; i < t; ++i) {  // D, dS, mask_backward, scale_backward
      T s = T(0);
      bool first = true;
      for (std::size_t j = 0; j < t; ++j) {
        if (p[i * t + j] == T(0)) continue;
        const T term = dp[i * t + j] * p[i * t + j];
        s = first ? term : T(s + term);
        first = false;
      }
      dd[i] = s;
      for (std::size_t j = 0; j < t; ++j) {
        const T pij = p[i * t + j];
        T gr = pij == T(0) ? T(0) : T(pij * T(dp[i * t + j] - s));
        if (ss[i * t + j] == ninf) gr = T(0);
        ds[i * t + j] = gr;
        dsc[i * t + j] = T(a.scale * gr);
      }
    }
    for (std::size_t i = 0; i < t; ++i)  // d_queries = d_scores K
      for (std::size_t c = 0; c < dk; ++c) {
        T s = dsc[i * t] * k[g * dk + c];
        for (std::size_t j = 1; j < t; ++j) s += dsc[i * t + j] * k[j * dkv + g * dk + c];
        dq_[i * dq + h * dk + c] = s;
      }
    for (std::size_t j = 0; j < t; ++j)  // d_keys = d_scoresᵀ Q
      for (std::size_t c = 0; c < dk; ++c) {
        T s = dsc[j] * q[h * dk + c];
        for (std::size_t i = 1; i < t; ++i) s += dsc[i * t + j] * q[i * dq + h * dk + c];
        put(dk_[j * dkv + g * dk + c], s);
      }
  }
  project_backward_weights(a.x, t, d, d, dq_, dq, out_in, out + at.d_wq(), out + at.d_bq());
  project_backward_weights(a.x, t, d, d, dk_, dkv, out_in, out + at.d_wk(), out + at.d_bk());
  project_backward_weights(a.x, t, d, d, dv_, dvkv, out_in, out + at.d_wv(), out + at.d_bv());
  T* dx = out + at.d_x();
  for (std::size_t i = 0; i < t; ++i)
    for (std::size_t c = 0; c < d; ++c) {
      const T x1 = project_backward_input(dq_, i, c, a.wq, d, dq, out_in);
      const T x2 = project_backward_input(dk_, i, c, a.wk, d, dkv, out_in);
      const T x3 = project_backward_input(dv_, i, c, a.wv, d, dvkv, out_in);
      dx[i * d + c] = T(T(x1 + x2) + x3);
    }
  return 0;
}

/// @brief every gradient of attend(x, ..., scale, masked, fwd) for the upstream gradient
/// d_output (t, dout; without wo (t, dv), the gradient of the concatenation), written to out (the
/// layout at the top of this file; gradients_size numbers). The sizes, weights, layout and scale
/// are attend()'s; fwd is attend()'s output buffer for them (steps_layout), whose -inf scaled
/// scores are the masked keys. The biases' values do not enter the backward. Returns 0, or 1 when
/// the sizes do not split into heads (nothing written).
template <class T>
constexpr int attend_backward(const T* x, std::size_t t, std::size_t d, const T* wq, const T* wk, const T* wv,
                              std::size_t dq, std::size_t dv, const T* wo, std::size_t dout,
                              std::size_t heads, bool out_in, T scale, const T* fwd, const T* d_output,
                              T* out) {
  attend_args<T> a;  // the second form's backward without kv_heads (the same loops, group 1)
  a.x = x, a.t = t, a.d = d, a.wq = wq, a.wk = wk, a.wv = wv, a.wo = wo;
  a.dq = dq, a.dv = dv, a.dout = dout, a.heads = heads, a.out_in = out_in, a.scale = scale;
  return attend_backward(a, fwd, d_output, out);
}

}  // namespace qkv::flat
