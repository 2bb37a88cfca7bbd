// multihead_backward.hpp: the gradients of a multi-head self-attention layer (multihead.hpp's
// attention() with context = x): projections with bias, heads (GQA), the output projection.
//
//   forward:  Q = x Wqᵀ + bq   K = x Wkᵀ + bk   V = x Wvᵀ + bv   (out_in; in_out: x W + b)
//             concat = [heads of softmax(scale Q_h K_gᵀ + mask_h) V_g]   output = concat Woᵀ + bo
//   backward, for d_output (T, d_out):
//     d_w_output = d_outputᵀ concat (out_in; in_out: concatᵀ d_output)   d_b_output = colsum(d_output)
//     d_concat   = d_output Wo (out_in; in_out: d_output Woᵀ)            (or d_output: no Wo)
//     d_queries, d_keys, d_values: every head's attention_backward (backward.hpp); a shared K/V
//       head sums its query heads' gradients
//     d_w_query  = d_queriesᵀ x (out_in)      d_b_query = colsum(d_queries)      (and k, v)
//     d_x        = d_queries Wq + d_keys Wk + d_values Wv   (out_in; in_out: Wᵀ)
// attention_forward_for_backward (the layer's) runs attention()'s streaming path (the same
// bits as attention() with keep_weights = false) and saves every head's row statistics.
// Every product is gemm.hpp's, so every element is one fma chain in a fixed order; d_x's chain
// runs over d_queries Wq's terms, then d_keys Wk's, then d_values Wv's. Threads: the same bits.
// 16-bit inputs (bfloat16, float16): x and the weights widened to float exactly (as
// multihead.hpp's 16-bit attention()), then the float layer: float arithmetic and float
// gradients, the float overloads' bits on the widened inputs.
// Not here: rotary embeddings (refused), cross-attention (x is also the context).
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "backward.hpp"
#include "gemm.hpp"
#include "multihead.hpp"

namespace qkv::runtime {

namespace detail {

/// the checks attention() makes of one layer call (heads, kv_heads, the projections' shapes,
/// the masks'), and the refusal of what the backward does not do (rotary embeddings)
template <class T>
void check_layer(const attention_weights<T>& w, const attention_options<T>& opt, std::size_t t_len,
                 std::size_t dq, std::size_t dk, std::size_t dkv) {
  const std::size_t H = opt.heads;
  if (H == 0) throw shape_error("attention: heads must be at least 1");
  const std::size_t HK = opt.kv_heads == 0 ? H : opt.kv_heads;
  if (H % HK != 0)
    throw shape_error("attention: " + std::to_string(H) + " query heads cannot share " + std::to_string(HK) +
                      " key/value heads (kv_heads must divide heads)");
  if (opt.rope)
    throw shape_error("attention_backward: rotary embeddings (attention_options::rope) have no backward yet");
  if (dq % H != 0 || dkv % HK != 0)
    throw shape_error("attention: " + std::to_string(H) + " heads do not divide d_q = " + std::to_string(dq) +
                      " or " + std::to_string(HK) +
                      " key/value heads do not divide d_v = " + std::to_string(dkv) + " evenly");
  if (dk != HK * (dq / H))
    throw shape_error("attention: wq is " + w.q.weight.shape() + " and wk is " + w.k.weight.shape() +
                      " but keys need " + std::to_string(HK) +
                      " heads of d_q / heads = " + std::to_string(dq / H) + " columns (" +
                      std::to_string(HK * (dq / H)) + " vs " + std::to_string(dk) + ")");
  if (opt.allowed && (opt.allowed->rows() != t_len || opt.allowed->cols() != t_len))
    throw shape_error("attention: allowed is " + opt.allowed->shape() + " but must be " +
                      shape_string(t_len, t_len) + " (x's rows by context's rows)");
  if (opt.key_padding && opt.key_padding->size() != t_len)
    throw shape_error("attention: key_padding has " + std::to_string(opt.key_padding->size()) +
                      " flags but there are " + std::to_string(t_len) + " keys");
  if (!bias_fits(opt, H, t_len, t_len))
    throw shape_error("attention: the bias is " + opt.bias->shape() + " but must be " +
                      shape_string(t_len, t_len) + " or " + shape_string(H * t_len, t_len) +
                      " (heads x queries by keys)");
  const std::size_t dv = H * (dkv / HK);
  if (w.o && w.o->in_features() != dv)
    throw shape_error("attention: wo is " + w.o->weight.shape() + " but the concatenated heads are " +
                      shape_string(t_len, dv));
}

/// colsum(a) in row order (one chain per column, rows ascending)
template <class T>
void column_sums(const matrix_view<const T>& a, std::vector<T>& out) {
  out.assign(a.cols, T(0));
  for (std::size_t i = 0; i < a.rows; ++i)
    for (std::size_t c = 0; c < a.cols; ++c) out[c] = out[c] + a(i, c);
}

/// a linear layer's weight gradient in its own layout: out_in dW = dYᵀ x, in_out dW = xᵀ dY
template <class T>
product_job<T> weight_gradient_job(const linear_weights<T>& w, const matrix_view<const T>& x,
                                   const matrix_view<const T>& dy, dynamic_matrix<T>& dw) {
  dw.resize(w.weight.rows(), w.weight.cols());
  product_job<T> j;
  if (w.layout == weight_layout::out_in) {
    j.a = transposed(dy);
    j.b = x;
  } else {
    j.a = transposed(x);
    j.b = dy;
  }
  j.c = dw.view();
  return j;
}

}  // namespace detail

/// @brief the layer's streaming forward that also saves what its backward needs: r.queries,
/// r.keys, r.values, r.concat, r.output (the same bits as attention() with keep_weights =
/// false; r.scores, r.weights and r.context are left empty) and each head's row statistics
/// (stats: heads x T). Self-attention: x gives queries, keys and values.
/// @throws shape_error naming the shapes that do not fit
template <class T>
void attention_forward_for_backward(matrix_view<const T> x, const attention_weights<T>& w,
                                    const attention_options<T>& opt, multihead_result<T>& r,
                                    attention_statistics<T>& stats, thread_pool* pool = &default_pool()) {
  detail::product_job<T> projections[3] = {detail::linear_job<T>(x, w.q, r.queries, "wq"),
                                           detail::linear_job<T>(x, w.k, r.keys, "wk"),
                                           detail::linear_job<T>(x, w.v, r.values, "wv")};
  detail::threaded_products(projections, pool);
  const std::size_t t_len = x.rows, H = opt.heads;
  detail::check_layer(w, opt, t_len, r.queries.cols(), r.keys.cols(), r.values.cols());
  const std::size_t HK = opt.kv_heads == 0 ? H : opt.kv_heads;
  const std::size_t dh = r.queries.cols() / H, dvh = r.values.cols() / HK, group = H / HK;
  r.scale = opt.scale ? *opt.scale : default_scale<T>(dh);
  r.concat.resize(t_len, H * dvh);
  r.scores.clear();
  r.weights.clear();
  r.context.clear();
  stats.resize(H, t_len);
  const auto nonfinite = detail::nonfinite_values<T>::of(r.values.view());
  const matrix_view<const T> values = nonfinite ? nonfinite->clean.view() : r.values.view();
  const stream_split split(t_len, H, pool ? pool->size() : 1);
  auto run = [&](std::size_t task) {
    const std::size_t h = task / split.blocks, b = task % split.blocks, g = h / group;
    const std::size_t i0 = split.begin(b), i1 = split.end(b);
    const attention_mask hm = detail::head_mask(opt, h, H, t_len, t_len);
    const auto q = column_block(matrix_view<const T>(r.queries.view()), h * dh, dh);
    const auto k = column_block(matrix_view<const T>(r.keys.view()), g * dh, dh);
    const auto out = column_block(r.concat.view(), h * dvh, dvh);
    const detail::row_statistics_out<T> so{stats.max.data() + h * t_len, stats.sum.data() + h * t_len};
    detail::attend_rows_streaming<T>(q, k, column_block(values, g * dvh, dvh), out, r.scale, hm, i0, i1,
                                     nullptr, &so);
    if (nonfinite)
      detail::repair_rows<T>(q, k, column_block(matrix_view<const T>(r.values.view()), g * dvh, dvh), out,
                             r.scale, hm, nonfinite->keys, i0, i1);
  };
  const double work = double(H) * double(t_len) * double(t_len) * double(dh + dvh);
  if (t_len > 0) {
    if (pool && work >= (1 << 17))
      pool->parallel_for(H * split.blocks, run);
    else
      for (std::size_t t = 0; t < H * split.blocks; ++t) run(t);
  }
  if (w.o)
    linear<T>(r.concat.view(), *w.o, r.output, pool, "wo");
  else
    r.output = r.concat;
}

/// @brief every gradient of the layer for d_output: g.d_x, the weights' and biases' (each in
/// its weight's layout; a bias's gradient empty when the layer has none), and the
/// intermediate d_concat, d_queries, d_keys, d_values. r and stats: the forward's
/// (attention_forward_for_backward), with the same x, w and opt.
/// @throws shape_error naming the shapes that do not fit
template <class T>
void attention_backward(matrix_view<const T> x, const attention_weights<T>& w,
                        const attention_options<T>& opt, const multihead_result<T>& r,
                        const attention_statistics<T>& stats, matrix_view<const T> d_output,
                        attention_gradients<T>& g, thread_pool* pool = &default_pool()) {
  const std::size_t t_len = x.rows, H = opt.heads;
  detail::check_layer(w, opt, t_len, r.queries.cols(), r.keys.cols(), r.values.cols());
  if (r.queries.rows() != t_len || r.concat.rows() != t_len)
    throw shape_error("attention_backward: x is " + x.shape() + " but the forward's queries are " +
                      r.queries.shape() + " (attention_forward_for_backward of the same x)");
  if (d_output.rows != r.output.rows() || d_output.cols != r.output.cols())
    throw shape_error("attention_backward: d_output is " + d_output.shape() + " but the output is " +
                      r.output.shape() + " (one gradient per output element)");
  if (stats.max.rows() != H || stats.max.cols() != t_len)
    throw shape_error("attention_backward: the statistics are " + stats.max.shape() + " but must be " +
                      shape_string(H, t_len) + " (heads by queries: attention_forward_for_backward's)");
  const std::size_t HK = opt.kv_heads == 0 ? H : opt.kv_heads;
  const matrix_view<const T> concat = r.concat.view();
  // the output projection
  if (w.o) {
    g.d_concat.resize(t_len, concat.cols);
    matrix_product<T>(d_output, transposed(w.o->as_in_out()), g.d_concat.view(), {}, pool);
    detail::product_job<T> jobs[1] = {detail::weight_gradient_job(*w.o, concat, d_output, g.d_w_output)};
    detail::threaded_products(jobs, pool);
    if (w.o->bias.empty())
      g.d_b_output.clear();
    else
      detail::column_sums(d_output, g.d_b_output);
  } else {
    g.d_concat.resize(t_len, concat.cols);
    for (std::size_t i = 0; i < t_len; ++i)
      for (std::size_t c = 0; c < concat.cols; ++c) g.d_concat(i, c) = d_output(i, c);
    g.d_w_output = {};
    g.d_b_output.clear();
  }
  // the heads
  g.d_queries.resize(r.queries.rows(), r.queries.cols());
  g.d_keys.resize(r.keys.rows(), r.keys.cols());
  g.d_values.resize(r.values.rows(), r.values.cols());
  detail::backward_views<T> bv;
  bv.q = r.queries.view();
  bv.k = r.keys.view();
  bv.v = r.values.view();
  bv.out = concat;
  bv.d_out = g.d_concat.view();
  bv.d_q = g.d_queries.view();
  bv.d_k = g.d_keys.view();
  bv.d_v = g.d_values.view();
  bv.heads = H;
  bv.kv_heads = HK;
  bv.scale = r.scale;
  bv.stat_max = stats.max.data();
  bv.stat_sum = stats.sum.data();
  detail::heads_backward(
      bv, [&](std::size_t h) { return detail::head_mask(opt, h, H, t_len, t_len); }, pool);
  // the projections' weights and biases
  const matrix_view<const T> dq = g.d_queries.view(), dk = g.d_keys.view(), dv = g.d_values.view();
  detail::product_job<T> jobs[3] = {detail::weight_gradient_job(w.q, x, dq, g.d_w_query),
                                    detail::weight_gradient_job(w.k, x, dk, g.d_w_key),
                                    detail::weight_gradient_job(w.v, x, dv, g.d_w_value)};
  detail::threaded_products(jobs, pool);
  const auto bias_of = [](const linear_weights<T>& l, const matrix_view<const T>& d, std::vector<T>& out) {
    if (l.bias.empty())
      out.clear();
    else
      detail::column_sums(d, out);
  };
  bias_of(w.q, dq, g.d_b_query);
  bias_of(w.k, dk, g.d_b_key);
  bias_of(w.v, dv, g.d_b_value);
  // d_x = dQ Wq + dK Wk + dV Wv, one chain per element over the three, threaded over columns
  const std::size_t d_model = x.cols;
  g.d_x.resize(t_len, d_model);
  constexpr std::size_t NR = detail::gemm_blocking<T>::nr;
  const std::size_t threads = pool ? pool->size() : 1;
  const std::size_t panels = (d_model + NR - 1) / NR;
  const std::size_t per = std::max<std::size_t>(1, (panels + 4 * threads - 1) / (4 * threads)) * NR;
  const std::size_t tasks = d_model == 0 ? 0 : (d_model + per - 1) / per;
  const matrix_view<const T> bq = transposed(w.q.as_in_out()), bk = transposed(w.k.as_in_out()),
                             bvw = transposed(w.v.as_in_out());
  const matrix_view<T> dx = g.d_x.view();
  auto run = [&](std::size_t t) {
    const std::size_t c0 = t * per, c1 = std::min(d_model, c0 + per);
    detail::product_block<T>(dq, bq, dx, epilogue<T>{}, 0, t_len, c0, c1, false);
    detail::product_block<T>(dk, bk, dx, epilogue<T>{}, 0, t_len, c0, c1, true);
    detail::product_block<T>(dv, bvw, dx, epilogue<T>{}, 0, t_len, c0, c1, true);
  };
  const double work = 3.0 * double(t_len) * double(d_model) * double(dq.cols);
  if (pool && threads > 1 && tasks > 1 && work >= (1 << 17))
    pool->parallel_for(tasks, run);
  else
    for (std::size_t t = 0; t < tasks; ++t) run(t);
}

// --- 16-bit inputs -------------------------------------------------------------------------

namespace detail {

/// x and the weights of a 16-bit layer widened to float once (exact), for its forward and backward
template <storage_type S>
struct widened_layer {
  dynamic_matrix<float> x;
  attention_weights<float> w;
  widened_layer(const dynamic_matrix<S>& x16, const attention_weights<S>& w16)
      : x(widened(x16)), w{widened(w16.q), widened(w16.k), widened(w16.v), std::nullopt} {
    if (w16.o) w.o = widened(*w16.o);
  }
};

}  // namespace detail

/// @brief the layer's forward for backward with bfloat16 / float16 x and weights: float
/// arithmetic, the float overload's bits on the widened inputs (each 16-bit value is a float)
template <storage_type S>
  requires(!std::is_same_v<S, float>)
void attention_forward_for_backward(const dynamic_matrix<S>& x, const attention_weights<S>& w,
                                    const attention_options<float>& opt, multihead_result<float>& r,
                                    attention_statistics<float>& stats, thread_pool* pool = &default_pool()) {
  const detail::widened_layer<S> f(x, w);
  attention_forward_for_backward<float>(f.x.view(), f.w, opt, r, stats, pool);
}

/// @brief the layer's gradients with bfloat16 / float16 x and weights, in float (the gradients
/// of the widened parameters; round them to S with from_float if the optimiser keeps S)
template <storage_type S>
  requires(!std::is_same_v<S, float>)
void attention_backward(const dynamic_matrix<S>& x, const attention_weights<S>& w,
                        const attention_options<float>& opt, const multihead_result<float>& r,
                        const attention_statistics<float>& stats, matrix_view<const float> d_output,
                        attention_gradients<float>& g, thread_pool* pool = &default_pool()) {
  const detail::widened_layer<S> f(x, w);
  attention_backward<float>(f.x.view(), f.w, opt, r, stats, d_output, g, pool);
}

}  // namespace qkv::runtime
