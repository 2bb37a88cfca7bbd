// self_attention.hpp: the core's call shape at run time. The same learner code computes at
// compile time on qkv::matrix and at run time on dynamic_matrix, changing only the matrix type:
//
//   auto r = self_attention(x, wq, wk, wv, qkv::in_out, {.scale = 0.5f, .causal = true});
//   r.queries (T, d_k)  r.keys (S, d_k)  r.values (S, d_v)       c = x for self-attention
//   r.scores (T, S) = Q Kᵀ, raw      r.scaled_scores (T, S), -inf where masked
//   r.weights (T, S), rows sum to 1  r.context (T, d_v) = weights V
//
// Called unqualified, argument-dependent lookup picks the core's qkv::self_attention for
// qkv::matrix and this one for qkv::runtime::dynamic_matrix. The words are the core's:
// - layouts: the core's tags themselves (qkv::out_in, qkv::in_out, qkv::columns; also spelled
//   qkv::runtime::in_out ...): out_in is nn.Linear's (d_out, d_in), x Wᵀ; in_out is (d_in, d_out),
//   x W; columns takes x as (d_in, T), tokens as columns, with out_in weights. A layout is always
//   given, as in the core (square weights fit two of them);
// - options: runtime::attention_options (multihead.hpp), whose .scale (a multiplier) and
//   .causal read as the core's: {.scale = 0.5f, .causal = true} means the same in both.
//   .heads > 1 splits the columns into heads as multihead.hpp does: scores, scaled_scores and
//   weights are then (heads * T, S), head after head, and context the heads side by side
//   (T, d_v). This is the learner's call: it always keeps every step (attention_steps is the
//   steps; .keep_weights is not read). The engineer's call, output only and the fast one, is
//   self_attention(x, w, options) of multihead.hpp (attention_weights or, packed once,
//   packed_attention_weights), which streams unless .keep_weights = true.
// One difference, in rounding: with no .scale the core DIVIDES each score by sqrt(d_k) (rounded
// once, as PyTorch's `scores / d_k**0.5`), the runtime MULTIPLIES by 1/sqrt(d_k) (rounded twice,
// as torch.nn.functional.scaled_dot_product_attention's scale). A scaled score may differ in its
// last bit; the runtime also sums with fused multiply-adds in its own order and has its own exp.
// So the two agree within a derived bound, not bit for bit (tests/runtime/
// runtime_self_attention_test.cpp; exact inputs, e.g. small integers, agree bit for bit up to the
// scores). Neither default is changed: each is what its tutorials and PyTorch kernels do, and the
// core's proven numbers rest on the division.
// scaled_scores is rebuilt from the raw scores as the kernels compute them: scale * score
// rounded once, then attention.hpp's mask_scores step (bias, ALiBi, -inf where causal, allowed,
// key_padding, the window or a -inf bias masks the key), with each head's mask built as
// attention() builds it; so the weights are exactly the row softmax of the scaled scores (tested).
// g++ -Wextra warns (-Wmissing-field-initializers) on {.causal = true} for the runtime's
// options while their std::optional fields have no `= std::nullopt` (runtime/multihead.hpp).
// @throws shape_error naming both shapes, as attention() does
#pragma once

#include <cstddef>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "../core/attention.hpp"
#include "dynamic_matrix.hpp"
#include "multihead.hpp"
#include "thread_pool.hpp"

namespace qkv::runtime {

// the core's layout tags, under the runtime's namespace too (the same types and constants)
using qkv::columns;
using qkv::columns_t;
using qkv::in_out;
using qkv::in_out_t;
using qkv::out_in;
using qkv::out_in_t;

/// @brief every step of one self- or cross-attention call, under the core's names
/// (qkv::attention_result): T queries, S keys; with H heads the (T, S) steps are (H T, S)
template <class T>
struct attention_steps {
  dynamic_matrix<T> queries, keys, values;  // (T, d_k) (S, d_k) (S, d_v)
  dynamic_matrix<T> scores;                 // (T, S) q·k, raw: before scaling and masking
  dynamic_matrix<T> scaled_scores;          // (T, S) after scaling; a masked score is -inf
  dynamic_matrix<T> weights;                // (T, S) softmax of each row of scaled_scores
  dynamic_matrix<T> context;                // (T, d_v) weights V, one row per query
  T scale = T(1);                           // the multiplier used (default 1/sqrt(d_k / heads))
};

namespace detail {

/// a weight matrix as multihead.hpp's linear layer: in_out reads W as (d_in, d_out), out_in
/// and columns as nn.Linear's (d_out, d_in)
template <class T, qkv::weight_layout_tag L>
[[nodiscard]] linear_weights<T> as_linear(const dynamic_matrix<T>& w, L) {
  return {w, {}, L::layout};
}

/// tokens as rows: x itself, or (qkv::columns) x's transpose, (d_in, T) -> (T, d_in)
template <class T, class L>
[[nodiscard]] dynamic_matrix<T> tokens_as_rows(const dynamic_matrix<T>& x, L) {
  if constexpr (std::is_same_v<L, columns_t>)
    return copy_of(transposed(x.view()));
  else
    return x;
}

/// heads x (T, S) as one (heads T, S) matrix, head after head (one head: moved, no copy)
template <class T>
[[nodiscard]] dynamic_matrix<T> stacked(std::vector<dynamic_matrix<T>>& heads) {
  if (heads.empty()) return {};
  if (heads.size() == 1) return std::move(heads[0]);
  const std::size_t t = heads[0].rows(), s = heads[0].cols();
  dynamic_matrix<T> out(heads.size() * t, s);
  for (std::size_t h = 0; h < heads.size(); ++h)
    for (std::size_t i = 0; i < t; ++i)
      for (std::size_t j = 0; j < s; ++j) out(h * t + i, j) = heads[h](i, j);
  return out;
}

}  // namespace detail

/// @brief cross-attention in the core's call shape: queries from x, keys and values from c
/// (their lengths may differ); every step kept under the core's names (attention_steps)
template <qkv::weight_layout_tag L, class T>
[[nodiscard]] attention_steps<T> cross_attention(const dynamic_matrix<T>& x, const dynamic_matrix<T>& c,
                                                 const dynamic_matrix<T>& wq, const dynamic_matrix<T>& wk,
                                                 const dynamic_matrix<T>& wv, L layout,
                                                 const attention_options<T>& options = {},
                                                 thread_pool* pool = &default_pool()) {
  const attention_weights<T> w{detail::as_linear(wq, layout), detail::as_linear(wk, layout),
                               detail::as_linear(wv, layout), std::nullopt};
  multihead_result<T> r;
  attention_options<T> keep = options;  // the learner's call: every step, whatever keep_weights says
  keep.keep_weights = true;
  const auto xr = detail::tokens_as_rows(x, layout);
  if (&x == &c) {
    attention<T>(xr.view(), xr.view(), w, keep, r, pool);
  } else {
    const auto cr = detail::tokens_as_rows(c, layout);
    attention<T>(xr.view(), cr.view(), w, keep, r, pool);
  }
  attention_steps<T> a;
  a.scale = r.scale;
  // scaled scores as the kernels compute them: scale * score rounded once, then the mask step
  if (!r.scores.empty()) {
    std::vector<dynamic_matrix<T>> scaled(r.scores.size());
    for (std::size_t h = 0; h < r.scores.size(); ++h) {
      const auto& s = r.scores[h];
      const attention_mask m = detail::head_mask(options, h, r.scores.size(), s.rows(), s.cols());
      scaled[h].resize(s.rows(), s.cols());
      for (std::size_t i = 0; i < s.rows(); ++i) {
        T* row = scaled[h].data() + i * s.cols();  // (no element access: S may be 0)
        for (std::size_t j = 0; j < s.cols(); ++j) row[j] = T(s(i, j) * r.scale);
        detail::mask_scores(row, 0, s.cols(), m, i, s.cols());
      }
    }
    a.scaled_scores = detail::stacked(scaled);
  }
  a.queries = std::move(r.queries);
  a.keys = std::move(r.keys);
  a.values = std::move(r.values);
  a.scores = detail::stacked(r.scores);
  a.weights = detail::stacked(r.weights);
  a.context = std::move(r.concat);
  return a;
}

/// @brief self-attention in the core's call shape: queries, keys and values all from x
/// (T, d) (tokens as rows; (d, T) with qkv::columns), weights in the layout L
template <qkv::weight_layout_tag L, class T>
[[nodiscard]] attention_steps<T> self_attention(const dynamic_matrix<T>& x, const dynamic_matrix<T>& wq,
                                                const dynamic_matrix<T>& wk, const dynamic_matrix<T>& wv,
                                                L layout, const attention_options<T>& options = {},
                                                thread_pool* pool = &default_pool()) {
  return cross_attention(x, x, wq, wk, wv, layout, options, pool);
}

}  // namespace qkv::runtime
