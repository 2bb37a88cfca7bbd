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
//   scaled       scaling<T>::multiply_by: scale * score (the factor the page states)
//   masked       masked(): -inf where `masked` says so (causal, window, allowed, padding)
//   weights      detail::stable_softmax, the core's function itself (qkv::exp inside)
//   context      attended_context: masked keys skipped, the NaN / inf policy of docs/numerics.md
//   output       concat Woᵀ (+ bo) or concat Wo, as the projections
// wasm/qkv_wasm_check.cpp checks these loops against the core's fixed-size templates
// (multihead_attend_projected, output_projection), bit for bit (tests/wasm/module_test.py).
// Their backward, on this function's output, is flat_attention_backward.hpp's attend_backward.
//
// Every step is written to one output buffer, in this order (H heads, dq = H dk columns of the
// queries and keys, dv = H dvh of the values, t tokens; steps_layout gives the offsets):
//   queries (t, dq), keys (t, dq), values (t, dv),
//   per head h: scores (t, t), scaled (t, t), weights (t, t), context (t, dvh),
//   concat (t, dv) [the heads side by side], output (t, dout) [when wo is given]
#pragma once

#include <cstddef>

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

/// @brief where each step of attend() is in its output buffer (offsets in numbers), for t tokens,
/// dq query (and key) columns, dv value columns, `heads` heads and dout output columns (0: no
/// output projection)
struct steps_layout {
  std::size_t t, dq, dv, heads, dout;

  [[nodiscard]] constexpr std::size_t dk() const { return dq / heads; }
  [[nodiscard]] constexpr std::size_t dvh() const { return dv / heads; }
  [[nodiscard]] constexpr std::size_t queries() const { return 0; }
  [[nodiscard]] constexpr std::size_t keys() const { return t * dq; }
  [[nodiscard]] constexpr std::size_t values() const { return 2 * t * dq; }
  /// head h's four steps: scores, scaled, weights (t, t each), context (t, dvh)
  [[nodiscard]] constexpr std::size_t head(std::size_t h) const {
    return values() + t * dv + h * (3 * t * t + t * dvh());
  }
  [[nodiscard]] constexpr std::size_t scores(std::size_t h) const { return head(h); }
  [[nodiscard]] constexpr std::size_t scaled(std::size_t h) const { return head(h) + t * t; }
  [[nodiscard]] constexpr std::size_t weights(std::size_t h) const { return head(h) + 2 * t * t; }
  [[nodiscard]] constexpr std::size_t context(std::size_t h) const { return head(h) + 3 * t * t; }
  [[nodiscard]] constexpr std::size_t concat() const { return head(heads); }
  [[nodiscard]] constexpr std::size_t output() const { return concat() + t * dv; }
  /// every number attend() writes
  [[nodiscard]] constexpr std::size_t size() const { return output() + t * dout; }
};

/// how many numbers attend() writes for these sizes (dout 0: no output projection)
constexpr std::size_t output_size(std::size_t t, std::size_t dq, std::size_t dv, std::size_t heads,
                                  std::size_t dout) {
  return steps_layout{t, dq, dv, heads, dout}.size();
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
  if (heads == 0 || dq % heads != 0 || dv % heads != 0 || t == 0 || d == 0) return 1;
  const steps_layout at{t, dq, dv, heads, wo ? dout : 0};
  const std::size_t dk = at.dk(), dvh = at.dvh();
  T* q = out + at.queries();
  T* k = out + at.keys();
  T* v = out + at.values();
  project(x, t, d, d, wq, bq, dq, out_in, q);
  project(x, t, d, d, wk, bk, dq, out_in, k);
  project(x, t, d, d, wv, bv, dv, out_in, v);
  T* concat = out + at.concat();
  for (std::size_t h = 0; h < heads; ++h) {
    T* sc = out + at.scores(h);
    T* ss = out + at.scaled(h);
    T* w = out + at.weights(h);
    T* ctx = out + at.context(h);
    dot(q, dq, k, dq, t, t, dk, h * dk, h * dk, static_cast<const T*>(nullptr),
        sc);  // matrix_product_transposed(q_h, k_h)
    flat::scale(sc, t, t, scale, false, masked, static_cast<const T*>(nullptr), ss);  // scaled(), masked()
    softmax(ss, t, t, w);                                                             // softmax_rows
    attended(w, t, ss, t, v, dv, h * dvh, t, t, dvh, ctx, dvh);  // attended_context, at run-time sizes
    for (std::size_t i = 0; i < t; ++i)
      for (std::size_t c = 0; c < dvh; ++c) concat[i * dv + h * dvh + c] = ctx[i * dvh + c];
  }
  if (wo) project(concat, t, dv, dv, wo, bo, dout, out_in, out + at.output());
  return 0;
}

}  // namespace qkv::flat
