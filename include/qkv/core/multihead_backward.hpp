// multihead_backward.hpp: the backward of multi-head and grouped-query attention and their output projection.
//
// Forward (multihead.hpp, grouped.hpp): split Q, K, V into heads by columns, attend per head,
// concatenate the heads' contexts side by side, project (concat Woᵀ + bo). Backward:
//   d_concat = d_output Wo             d_w_output = d_outputᵀ concat    d_b_output = column sums
//   head h's d_context = the columns of d_concat that were head h's context (a split: the
//   backward of a concatenation is a slice, PyTorch's CatBackward0 / SplitBackward0)
//   each head: attention_backward (attention_backward.hpp)
//   d_queries = the heads' d_queries side by side (the backward of a split is a concatenation)
//   grouped-query attention: key/value head g serves query heads g G .. g G + G - 1, so its
//   d_keys and d_values are the SUM of those heads' (a value used G times gets G gradients,
//   added in head order; PyTorch's repeat_interleave backward sums the same way)
#pragma once

#include <cstddef>

#include "attention.hpp"
#include "attention_backward.hpp"
#include "grouped.hpp"
#include "linear_backward.hpp"
#include "matrix.hpp"
#include "multihead.hpp"

namespace qkv {

/// @brief the gradients of grouped-query (or multi-head, Hkv = H) attention for an upstream
/// d_concat (T, H d_v): per query head the gradients of its attention, and the projected
/// queries', keys' and values' gradients side by side (keys and values: Hkv heads, each the
/// sum over its G query heads)
template <class T, std::size_t H, std::size_t Tq, std::size_t S, std::size_t Dq, std::size_t DkvK,
          std::size_t DkvV, std::size_t Hkv>
struct grouped_gradients {
  stack<T, H, Tq, S> d_weights;
  stack<T, H, Tq, S> d_scaled_scores;
  stack<T, H, Tq, S> d_scores;
  matrix<T, Tq, Dq> d_queries;
  matrix<T, S, DkvK> d_keys;
  matrix<T, S, DkvV> d_values;
};

/// @brief the backward of grouped_query_attend_projected<H, Hkv>(q, k, v, options) = r for d_concat
template <std::size_t H, std::size_t Hkv, class T, std::size_t Tq, std::size_t S, std::size_t Dq,
          std::size_t DkvK, std::size_t DkvV, std::size_t DR, std::size_t DC>
  requires(query_heads_divide_into_kv_groups<H, Hkv> && same_shapes<Tq, H*(DkvV / Hkv), DR, DC>)
[[nodiscard]] constexpr grouped_gradients<T, H, Tq, S, Dq, DkvK, DkvV, Hkv> grouped_query_attention_backward(
    const grouped_result<T, H, Hkv, Tq, S, Dq, DkvK, DkvV>& r, const matrix<T, DR, DC>& d_concat,
    const attention_options<T>& options = {}) {
  constexpr std::size_t G = H / Hkv, dk = Dq / H, dv = DkvV / Hkv;
  grouped_gradients<T, H, Tq, S, Dq, DkvK, DkvV, Hkv> g;
  const auto qh = split_heads<H>(r.queries);
  const auto kh = split_heads<Hkv>(r.keys);
  const auto vh = split_heads<Hkv>(r.values);
  const auto dO = split_heads<H>(d_concat);  // (H, T, d_v): head h's share of the concatenation
  stack<T, Hkv, S, dk> d_keys;
  stack<T, Hkv, S, dv> d_values;
  stack<T, H, Tq, dk> d_queries;
  for (std::size_t h = 0; h < H; ++h) {
    attention_result<T, Tq, S, dk, dv> a;  // head h's forward, as it was kept
    a.queries = qh[h];
    a.keys = kh[h / G];
    a.values = vh[h / G];
    a.scores = r.scores[h];
    a.scaled_scores = r.scaled_scores[h];
    a.weights = r.weights[h];
    a.context = r.context[h];
    const auto gh = attention_backward(a, dO[h], options);
    g.d_weights[h] = gh.d_weights;
    g.d_scaled_scores[h] = gh.d_scaled_scores;
    g.d_scores[h] = gh.d_scores;
    d_queries[h] = gh.d_queries;
    if (h % G == 0) {  // the first query head of its group
      d_keys[h / G] = gh.d_keys;
      d_values[h / G] = gh.d_values;
    } else {  // the others add theirs, in head order
      d_keys[h / G] = d_keys[h / G] + gh.d_keys;
      d_values[h / G] = d_values[h / G] + gh.d_values;
    }
  }
  g.d_queries = hconcat(d_queries);
  g.d_keys = hconcat(d_keys);
  g.d_values = hconcat(d_values);
  return g;
}

/// @brief the backward of multihead_attend_projected<H>(q, k, v, options) = r for d_concat:
/// grouped-query attention with Hkv = H (every head its own keys and values)
template <std::size_t H, class T, std::size_t Tq, std::size_t S, std::size_t Dq, std::size_t Dv,
          std::size_t DR, std::size_t DC>
  requires same_shapes<Tq, Dv, DR, DC>
[[nodiscard]] constexpr grouped_gradients<T, H, Tq, S, Dq, Dq, Dv, H> multihead_backward(
    const multihead_result<T, H, Tq, S, Dq, Dv>& r, const matrix<T, DR, DC>& d_concat,
    const attention_options<T>& options = {}) {
  grouped_result<T, H, H, Tq, S, Dq, Dq, Dv> same;
  same.queries = r.queries;
  same.keys = r.keys;
  same.values = r.values;
  same.scores = r.scores;
  same.scaled_scores = r.scaled_scores;
  same.weights = r.weights;
  same.context = r.context;
  same.concat = r.concat;
  return grouped_query_attention_backward<H, H>(same, d_concat, options);
}

/// @brief the backward of output_projection(r, wo, bo) = concat Woᵀ + bo for d_output (T, d_out):
/// d_concat = d_output Wo, d_w_output = d_outputᵀ concat, d_b_output = column sums of d_output
template <class T, std::size_t Tq, std::size_t Dv, std::size_t Dout, std::size_t WDin, std::size_t DR,
          std::size_t DC>
  requires(product_shapes<Tq, Dv, WDin, Dout> && same_shapes<Tq, Dout, DR, DC>)
[[nodiscard]] constexpr linear_gradients<T, Tq, Dv, Dout, WDin> output_projection_backward(
    const matrix<T, Tq, Dv>& concat, const matrix<T, Dout, WDin>& wo, const matrix<T, DR, DC>& d_output) {
  const auto g = project_backward(concat, wo, d_output, out_in);
  return {g.d_x, g.d_w, column_sums(d_output)};
}

/// @brief every gradient of a multi-head self-attention layer with biases, nn.MultiheadAttention's
/// arithmetic: q = x W_qᵀ + b_q (and k, v), the heads, output = concat W_oᵀ + b_o
template <class T, std::size_t H, std::size_t N, std::size_t Din, std::size_t D, std::size_t Dout>
struct multihead_layer_gradients {
  grouped_gradients<T, H, N, N, D, D, D, H> attention;  // per head, and d_queries, d_keys, d_values
  matrix<T, N, D> d_concat;
  matrix<T, N, Din> d_x;
  matrix<T, D, Din> d_w_query, d_w_key, d_w_value;
  matrix<T, 1, D> d_b_query, d_b_key, d_b_value;
  matrix<T, Dout, D> d_w_output;
  matrix<T, 1, Dout> d_b_output;
};

/// @brief the backward of output_projection(r, wo, bo) over multihead_attend_projected<H>(
/// project(x, wq, bq, out_in), project(x, wk, bk, out_in), project(x, wv, bv, out_in), options) = r
/// for d_output (T, d_out): one call for every gradient of the layer. d_x adds the query's, the
/// key's and the value's d_x in that order (PyTorch accumulates the three in its own order).
template <std::size_t H, class T, std::size_t N, std::size_t Din, std::size_t D, std::size_t Dout,
          std::size_t DR, std::size_t DC>
  requires(same_shapes<N, Dout, DR, DC> && divisible_into_heads<D, H>)
[[nodiscard]] constexpr multihead_layer_gradients<T, H, N, Din, D, Dout> multihead_self_attention_backward(
    const matrix<T, N, Din>& x, const matrix<T, D, Din>& wq, const matrix<T, 1, D>& bq,
    const matrix<T, D, Din>& wk, const matrix<T, 1, D>& bk, const matrix<T, D, Din>& wv,
    const matrix<T, 1, D>& bv, const matrix<T, Dout, D>& wo, const multihead_result<T, H, N, N, D, D>& r,
    const matrix<T, DR, DC>& d_output, const attention_options<T>& options = {}) {
  multihead_layer_gradients<T, H, N, Din, D, Dout> g;
  const auto out = output_projection_backward(r.concat, wo, d_output);
  g.d_concat = out.d_x;
  g.d_w_output = out.d_w;
  g.d_b_output = out.d_b;
  g.attention = multihead_backward<H>(r, g.d_concat, options);
  const auto pq = project_backward(x, wq, bq, g.attention.d_queries, out_in);
  const auto pk = project_backward(x, wk, bk, g.attention.d_keys, out_in);
  const auto pv = project_backward(x, wv, bv, g.attention.d_values, out_in);
  g.d_w_query = pq.d_w;
  g.d_w_key = pk.d_w;
  g.d_w_value = pv.d_w;
  g.d_b_query = pq.d_b;
  g.d_b_key = pk.d_b;
  g.d_b_value = pv.d_b;
  g.d_x = pq.d_x + pk.d_x + pv.d_x;
  return g;
}

}  // namespace qkv
