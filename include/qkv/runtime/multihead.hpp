// multihead.hpp: projections with bias, multi-head (cross-)attention and the output projection,
// at run time, keeping every intermediate a teacher or a test wants to see.
//
//   Q = x Wqᵀ + bq (T, d_q)   K = c Wkᵀ + bk (S, d_q)   V = c Wvᵀ + bv (S, d_v)   c = context or x
//   head h: columns h*d_q/H .. of Q, g*d_q/H .. of K and g*d_kv/H_kv .. of V, g = h / (H / H_kv)
//   (H_kv = kv_heads: grouped-query attention; H_kv = H, the default: g = h)
//   context_h = softmax(scale Q_h K_hᵀ + mask) V_h   (T, d_v/H)
//   concat = [context_0 ... context_{H-1}] (T, H * d_kv / H_kv),  output = concat Woᵀ + bo (or concat)
// Weights are nn.Linear's (out, in) by default; weight_layout::in_out takes (in, out) as
// tutorial 000 writes them (Q = x Wq). By default the streaming path runs (attention.hpp) and
// only concat and output are filled: the engineer's call, the fast one. A learner's call asks
// for every step with .keep_weights = true: each head's scores and weights are then kept (never
// averaged). Threads: heads x query blocks (streaming: each
// key/value head's K and V packed once per task, one pool dispatch), bit-identical.
// multihead_attention(q, k, v, ...) is the same attention on queries, keys and values already
// projected (the engineer's call: PyTorch's SDPA, ONNX Runtime's MultiHeadAttention); heads side
// by side (T, H d), or heads first, (H T, d), with multihead_attention(heads_first, ...).
#pragma once

#include <cmath>
#include <cstddef>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "../core/attention.hpp"
#include "attention.hpp"
#include "dynamic_matrix.hpp"
#include "gemm.hpp"
#include "half.hpp"
#include "kernels.hpp"
#include "rope.hpp"
#include "thread_pool.hpp"

namespace qkv::runtime {

/// how a weight matrix is stored: core/attention.hpp's enum, the same type (out_in: (out, in),
/// nn.Linear, y = x Wᵀ + b, the default; in_out: (in, out), y = x W + b, tutorial 000)
using qkv::weight_layout;

/// @brief a linear layer's parameters: y = x Wᵀ + b (out_in) or x W + b (in_out)
template <class T>
struct linear_weights {
  dynamic_matrix<T> weight;
  std::vector<T> bias;  // empty, or one value per output feature
  weight_layout layout = weight_layout::out_in;

  [[nodiscard]] std::size_t in_features() const {
    return layout == weight_layout::out_in ? weight.cols() : weight.rows();
  }
  [[nodiscard]] std::size_t out_features() const {
    return layout == weight_layout::out_in ? weight.rows() : weight.cols();
  }
  /// W as the (in, out) operand of x W: a view, no copy
  [[nodiscard]] matrix_view<const T> as_in_out() const {
    return layout == weight_layout::out_in ? transposed(weight.view()) : weight.view();
  }
};

/// @brief a linear layer packed once for many calls (inference): the weight as a
/// packed_operand (gemm.hpp) in x W order, and the bias. linear() with it gives the same bits as
/// with the linear_weights it came from, without repacking W on every call (for x Wᵀ, W is read
/// transposed). It holds a copy: pack again after changing the weights.
template <class T>
struct packed_linear {
  packed_operand<T> weight;  // (in, out)
  std::vector<T> bias;
  std::string weight_shape;  // the source's shape and layout, for error messages
  weight_layout layout = weight_layout::out_in;

  packed_linear() = default;
  explicit packed_linear(const linear_weights<T>& w)
      : weight(w.as_in_out()), bias(w.bias), weight_shape(w.weight.shape()), layout(w.layout) {}
  [[nodiscard]] std::size_t in_features() const { return weight.rows(); }
  [[nodiscard]] std::size_t out_features() const { return weight.cols(); }
};

namespace detail {

/// the shape checks of linear(), for both kinds of weights
template <class W>
void check_linear(std::size_t x_rows, std::size_t x_cols, const W& w, const char* name) {
  if (w.in_features() == x_cols && (w.bias.empty() || w.bias.size() == w.out_features())) return;
  const std::string n = name;  // the messages are built only on an error
  const std::string shape = [&] {
    if constexpr (requires { w.weight_shape; })
      return w.weight_shape;
    else
      return w.weight.shape();
  }();
  if (w.in_features() != x_cols)
    throw shape_error(
        "linear " + n + ": x is " + shape_string(x_rows, x_cols) + " but " + n + " is " + shape +
        (w.layout == weight_layout::out_in ? " (out_in: " + n + "'s columns must equal x's columns)"
                                           : " (in_out: " + n + "'s rows must equal x's columns)"));
  if (!w.bias.empty() && w.bias.size() != w.out_features())
    throw shape_error("linear " + n + ": the bias has " + std::to_string(w.bias.size()) + " values but " + n +
                      " is " + shape + " with " + std::to_string(w.out_features()) + " outputs");
}

}  // namespace detail

/// @brief y = x Wᵀ + b (or x W + b), written to y (resized to (x.rows, out)); T is deduced
/// from w and y, so x may be a dynamic_matrix or any view of one. `name` is used
/// in the error message: "linear wq: x is 3x4 but wq is 3x5 (out_in: wq's columns must equal x's columns)"
template <class T>
void linear(std::type_identity_t<matrix_view<const T>> x, const linear_weights<T>& w, dynamic_matrix<T>& y,
            thread_pool* pool = &default_pool(), const char* name = "w") {
  detail::check_linear(x.rows, x.cols, w, name);
  y.resize(x.rows, w.out_features());
  epilogue<T> e;
  e.bias = w.bias.empty() ? nullptr : w.bias.data();
  matrix_product<T>(x, w.as_in_out(), y.view(), e, pool);
}

/// @brief the same with the weights packed once (same bits, no packing of W per call)
template <class T>
void linear(std::type_identity_t<matrix_view<const T>> x, const packed_linear<T>& w, dynamic_matrix<T>& y,
            thread_pool* pool = &default_pool(), const char* name = "w") {
  detail::check_linear(x.rows, x.cols, w, name);
  y.resize(x.rows, w.out_features());
  epilogue<T> e;
  e.bias = w.bias.empty() ? nullptr : w.bias.data();
  matrix_product<T>(x, w.weight, y.view(), e, pool);
}

namespace detail {

/// linear()'s product as a job (shapes checked, y resized), for running several in one
/// parallel_for (attention's Q, K and V): the same tasks, so the same bits
template <class T, class W>
product_job<T> linear_job(matrix_view<const T> x, const W& w, dynamic_matrix<T>& y, const char* name) {
  check_linear(x.rows, x.cols, w, name);
  y.resize(x.rows, w.out_features());
  product_job<T> j;
  j.a = x;
  j.c = y.view();
  j.e.bias = w.bias.empty() ? nullptr : w.bias.data();
  if constexpr (requires { w.weight_shape; }) {
    j.b = {nullptr, w.weight.rows(), w.weight.cols(), w.weight.cols(), 1};  // shape only
    j.packed = packed_panels(w.weight);
  } else {
    j.b = w.as_in_out();
  }
  return j;
}

}  // namespace detail

template <class T>
[[nodiscard]] dynamic_matrix<T> linear(const dynamic_matrix<T>& x, const linear_weights<T>& w,
                                       thread_pool* pool = &default_pool()) {
  dynamic_matrix<T> y;
  linear<T>(x.view(), w, y, pool);
  return y;
}

/// the parameters of one attention layer
template <class T>
struct attention_weights {
  linear_weights<T> q, k, v;
  std::optional<linear_weights<T>> o;  // the output projection, if any
};

/// the parameters of one attention layer, each packed once (packed_linear): for calling
/// attention() many times with the same weights. Same results, bit for bit.
template <class T>
struct packed_attention_weights {
  packed_linear<T> q, k, v;
  std::optional<packed_linear<T>> o;

  packed_attention_weights() = default;
  explicit packed_attention_weights(const attention_weights<T>& w) : q(w.q), k(w.k), v(w.v) {
    if (w.o) o.emplace(*w.o);
  }
};

/// attention_options::max_weights_bytes's default: 4 GiB of kept scores and weights (float:
/// 8 heads of 8192 x 8192 tokens); the streaming path (keep_weights = false) needs O(T + S)
inline constexpr std::size_t default_max_weights_bytes = std::size_t(1) << 32;

/// the ALiBi slopes of Press et al. 2022 ("Train Short, Test Long", section 3) for `heads`
/// heads: for n a power of two, m_h = 2^(-8 (h + 1) / n), h = 0 .. n - 1; otherwise, as the
/// authors' reference implementation (get_slopes in ofirpress/attention_with_linear_biases)
/// does: the slopes of the power of two n' just below n, then every other slope of 2 n'
/// (indices 0, 2, 4, ...) until there are n. Each is computed in double: 2^x by std::exp2.
[[nodiscard]] inline std::vector<double> alibi_slopes(std::size_t heads) {
  std::vector<double> m;
  if (heads == 0) return m;
  std::size_t n2 = 1;
  while (n2 * 2 <= heads) n2 *= 2;
  const auto of_power = [](std::size_t n, std::size_t h) {  // 2^(-8 (h + 1) / n)
    return std::exp2(-8.0 * static_cast<double>(h + 1) / static_cast<double>(n));
  };
  for (std::size_t h = 0; h < n2; ++h) m.push_back(of_power(n2, h));
  for (std::size_t h = 0; m.size() < heads; h += 2) m.push_back(of_power(2 * n2, h));
  return m;
}

/// how to attend (the chapter-two fields: alignment, kv_heads, window, alibi, bias)
template <class T>
struct attention_options {
  std::size_t heads = 1;
  std::optional<T> scale = std::nullopt;  // default 1/sqrt(d_q / heads); 1 = unscaled
  bool causal = false;
  std::optional<mask_matrix> allowed = std::nullopt;  // (T, S), nonzero = may attend
  // (S) flags, nonzero = padding: key j masked for every query (nn.MultiheadAttention's
  // key_padding_mask). The same bits as allowed(i, j) = !key_padding[j], in O(S) memory
  std::optional<std::vector<unsigned char>> key_padding = std::nullopt;
  // true: the learner's call, every head's scores, weights and context kept (r.scores, r.weights,
  // r.context; 2 x heads x T x S values); false, the default: the streaming path, only concat
  // and output filled, O(T + S) memory per thread, the fastest (docs/performance.md, "The
  // obvious call"). The output is the same bits either way (tests/runtime/paths_test.cpp)
  bool keep_weights = false;
  // the most memory kept scores and weights may take (2 x heads x T x S x sizeof(T)), checked
  // before allocating: past it, size_limit_error names the size and this limit
  std::size_t max_weights_bytes = default_max_weights_bytes;
  // where query i sits when T != S: upper_left (i) or lower_right (i + S - T: KV-cache decoding)
  causal_alignment alignment = causal_alignment::upper_left;
  // 0 = heads; else heads % kv_heads == 0 and K, V have kv_heads heads: query head h uses K/V
  // head h / (heads / kv_heads) (grouped-query attention; 1 = multi-query)
  std::size_t kv_heads = 0;
  // 0 = none; else the query at position p sees only keys j with p - window < j (and j <= p when
  // causal): sliding-window (local) attention, as Mistral and ORT GroupQueryAttention's
  // local_window_size
  std::size_t window = 0;
  // add m_h * (j - p) to head h's scaled scores, m_h = alibi_slopes(heads)[h]
  bool alibi = false;
  // additive float bias on the scaled scores: (T, S) for every head or (heads * T, S), head h's
  // rows h*T .. h*T + T - 1; -inf = masked (the key is skipped)
  std::optional<dynamic_matrix<T>> bias = std::nullopt;
  std::optional<rope_options> rope =
      std::nullopt;  // rotary embeddings of q and k after the projections (rope.hpp)
};

namespace detail {

/// the mask every head of attention() shares (causal with its alignment, allowed, key_padding,
/// window), resolved for t_len queries and s_len keys; it points into opt. Each head adds its
/// ALiBi slope and bias rows
template <class T>
[[nodiscard]] attention_mask options_mask(const attention_options<T>& opt, std::size_t t_len,
                                          std::size_t s_len) {
  attention_mask m{opt.causal, opt.allowed ? &*opt.allowed : nullptr};
  if (opt.key_padding) m.set_key_padding(*opt.key_padding);
  m.alignment = opt.alignment;
  m.window = opt.window;
  return m.resolved(t_len, s_len);
}

/// whether opt.bias, if there is one, fits t_len queries by s_len keys for `heads` heads: (T, S),
/// one bias for every head, or (heads T, S), head h's in rows h T .. h T + T - 1
template <class T>
[[nodiscard]] bool bias_fits(const attention_options<T>& opt, std::size_t heads, std::size_t t_len,
                             std::size_t s_len) {
  return !opt.bias ||
         ((opt.bias->rows() == t_len || opt.bias->rows() == heads * t_len) && opt.bias->cols() == s_len);
}

/// head h's t_len rows of opt.bias (which must be set and fit, bias_fits)
template <class T>
[[nodiscard]] matrix_view<const T> head_bias(const attention_options<T>& opt, std::size_t h,
                                             std::size_t t_len) {
  return row_block(matrix_view<const T>(opt.bias->view()), opt.bias->rows() == t_len ? 0 : h * t_len, t_len);
}

/// head h's mask as attention() builds it: causal, allowed, key_padding, alignment and window for
/// every head (options_mask), head h's ALiBi slope and its rows of the bias (attention() itself
/// builds the shared part once and adds the last two per head)
template <class T>
[[nodiscard]] attention_mask head_mask(const attention_options<T>& o, std::size_t h, std::size_t heads,
                                       std::size_t t_len, std::size_t s_len) {
  attention_mask m = options_mask(o, t_len, s_len);
  if (o.alibi) m.alibi_slope = alibi_slopes(heads)[h];
  if (o.bias) m.set_bias(head_bias(o, h, t_len));
  return m;
}

}  // namespace detail

/// everything one multi-head call computes (core/multihead.hpp's multihead_result at run time,
/// plus the output projection and the scale used; qkv::attention_result is one head's steps)
template <class T>
struct multihead_result {
  dynamic_matrix<T> queries, keys, values;         // (T, d_q) (S, d_q) (S, d_v)
  std::vector<dynamic_matrix<T>> scores, weights;  // heads x (T, S): raw q·k, softmax
  std::vector<dynamic_matrix<T>> context;          // heads x (T, d_v / heads)
  dynamic_matrix<T> concat, output;                // (T, d_v) (T, d_out)
  T scale = T(1);                                  // the scale used
};

/// the old name of multihead_result, for one release. (g++ warns where it is used; clang 16
/// ignores [[deprecated]] on an alias template, so there it is silent.)
template <class T>
using attention_result
    [[deprecated("use qkv::runtime::multihead_result (qkv::attention_result is one head's steps)")]] =
        multihead_result<T>;

namespace detail {

/// @brief attention()'s pass 2 on r.queries (T, H dh), r.keys (S, HK dh) and r.values
/// (S, HK dvh), already projected and checked against each other: the options' shapes checked
/// (`keys_are`: what the messages call the keys' source, "context is 6x4"), RoPE applied to the
/// queries and keys in place, the scale, each head's scores and weights kept (keep_weights) or
/// streamed, heads x query blocks in one parallel_for, into r.concat (and r.context per head)
template <class T>
void attend_heads(const attention_options<T>& opt, multihead_result<T>& r, const std::string& keys_are,
                  thread_pool* pool) {
  const std::size_t H = opt.heads, HK = opt.kv_heads == 0 ? H : opt.kv_heads;
  const std::size_t t_len = r.queries.rows(), s_len = r.keys.rows();
  const std::size_t dq = r.queries.cols(), dkv = r.values.cols();
  const std::size_t dh = dq / H, dvh = dkv / HK, dv = H * dvh;  // dv: the concatenated heads
  if (opt.allowed && (opt.allowed->rows() != t_len || opt.allowed->cols() != s_len))
    throw shape_error("attention: allowed is " + opt.allowed->shape() + " but must be " +
                      shape_string(t_len, s_len) + " (queries by keys)");
  if (opt.key_padding && opt.key_padding->size() != s_len)
    throw shape_error("attention: key_padding has " + std::to_string(opt.key_padding->size()) +
                      " flags but there are " + std::to_string(s_len) + " keys (" + keys_are + ")");
  if (!detail::bias_fits(opt, H, t_len, s_len))
    throw shape_error("attention: the bias is " + opt.bias->shape() + " but must be " +
                      shape_string(t_len, s_len) + " or " + shape_string(H * t_len, s_len) +
                      " (heads x queries by keys)");
  if (opt.rope) {  // rotary embeddings of every head's queries and keys, in place (rope.hpp)
    apply_rope<T>(r.queries.view(), dh, *opt.rope, opt.rope->position_offset, pool);
    apply_rope<T>(r.keys.view(), dh, *opt.rope,
                  opt.rope->key_position_offset.value_or(opt.rope->position_offset), pool);
  }
  r.scale = opt.scale ? *opt.scale : default_scale<T>(dh);
  r.concat.resize(t_len, dv);
  const std::size_t keep = opt.keep_weights ? H : 0;
  if (keep) {  // scores and weights, heads x T x S each: checked before anything is allocated
    const long double bytes =
        2.0L * H * static_cast<long double>(t_len) * static_cast<long double>(s_len) * sizeof(T);
    if (bytes > static_cast<long double>(opt.max_weights_bytes))
      throw size_limit_error(
          "attention: keeping the weights of " + std::to_string(H) + " heads x " +
          shape_string(t_len, s_len) + " (scores and weights, " + std::to_string(sizeof(T)) +
          " bytes each) needs " + bytes_string(bytes) + " bytes, over the limit of " +
          std::to_string(opt.max_weights_bytes) +
          " (attention_options::max_weights_bytes; keep_weights = false streams in O(T + S))");
  }
  r.scores.resize(keep);
  r.weights.resize(keep);
  r.context.resize(keep);
  for (std::size_t h = 0; h < keep; ++h) {
    r.scores[h].resize(t_len, s_len);
    r.weights[h].resize(t_len, s_len);
  }
  const attention_mask mask = detail::options_mask(opt, t_len, s_len);
  const std::vector<double> slopes = opt.alibi ? alibi_slopes(H) : std::vector<double>{};
  // head h's mask: its ALiBi slope and its rows of the bias
  const auto head_mask = [&](std::size_t h) {
    attention_mask m = mask;
    if (opt.alibi) m.alibi_slope = slopes[h];
    if (opt.bias) m.set_bias(detail::head_bias(opt, h, t_len));
    return m;
  };
  const std::size_t group = H / HK;  // query heads per key/value head
  // a NaN or inf in the values: the kernels read a copy with them set to 0, and repair_rows
  // puts them back where a query attends to them (attention.hpp's header comment)
  const auto nonfinite = detail::nonfinite_values<T>::of(r.values.view());
  const matrix_view<const T> values = nonfinite ? nonfinite->clean.view() : r.values.view();
  if (!opt.keep_weights) {  // streaming: each key/value head packed once, one pool dispatch
    if (t_len > 0)
      detail::attend_grouped_streaming<T>(
          matrix_view<const T>(r.queries.view()), matrix_view<const T>(r.keys.view()), values,
          r.concat.view(), H, HK, r.scale, head_mask,
          pool && double(H) * double(t_len) * double(s_len) * double(dh + dvh) >= (1 << 17) ? pool : nullptr,
          [&](std::size_t h, std::size_t i0, std::size_t i1) {
            if (!nonfinite) return;
            const std::size_t g = h / group;
            detail::repair_rows<T>(column_block(matrix_view<const T>(r.queries.view()), h * dh, dh),
                                   column_block(matrix_view<const T>(r.keys.view()), g * dh, dh),
                                   column_block(matrix_view<const T>(r.values.view()), g * dvh, dvh),
                                   column_block(r.concat.view(), h * dvh, dvh), r.scale, head_mask(h),
                                   nonfinite->keys, i0, i1);
          });
    return;
  }
  // keeping the weights: heads x fixed blocks of query_block rows, each task alone on its rows
  // of its head
  const std::size_t qb = query_block;
  const stream_split split(t_len, H, pool ? pool->size() : 1);
  const std::size_t blocks = opt.keep_weights ? (t_len + qb - 1) / qb : split.blocks;
  auto run = [&](std::size_t task) {
    const std::size_t h = task / blocks, b = task % blocks;
    const std::size_t i0 = opt.keep_weights ? b * qb : split.begin(b);
    const std::size_t i1 = opt.keep_weights ? std::min(t_len, i0 + qb) : split.end(b);
    const std::size_t g = h / group;  // its key/value head
    const attention_mask hm = head_mask(h);
    const auto q = column_block(matrix_view<const T>(r.queries.view()), h * dh, dh);
    const auto k = column_block(matrix_view<const T>(r.keys.view()), g * dh, dh);
    const auto v = column_block(values, g * dvh, dvh);
    const auto out = column_block(r.concat.view(), h * dvh, dvh);
    if (opt.keep_weights)
      detail::attend_rows_materialised<T>(q, k, v, out, r.scale, hm, r.scores[h].view(), r.weights[h].view(),
                                          i0, i1);
    else
      detail::attend_rows_streaming<T>(q, k, v, out, r.scale, hm, i0, i1);
    if (nonfinite)
      detail::repair_rows<T>(q, k, column_block(matrix_view<const T>(r.values.view()), g * dvh, dvh), out,
                             r.scale, hm, nonfinite->keys, i0, i1);
  };
  const double work = double(H) * double(t_len) * double(s_len) * double(dh + dvh);
  if (t_len > 0) {
    if (pool && work >= (1 << 17))
      pool->parallel_for(H * blocks, run);
    else
      for (std::size_t t = 0; t < H * blocks; ++t) run(t);
  }
  for (std::size_t h = 0; h < keep; ++h) {
    r.context[h].resize(t_len, dvh);
    for (std::size_t i = 0; i < t_len; ++i)
      for (std::size_t j = 0; j < dvh; ++j) r.context[h](i, j) = r.concat(i, h * dvh + j);
  }
}

/// the heads of opt for queries of dq columns and values of dkv columns: H and HK checked, and
/// dq and dkv divided evenly (a shape_error naming them otherwise)
template <class T>
void check_heads(const attention_options<T>& opt, std::size_t dq, std::size_t dkv) {
  const std::size_t H = opt.heads;
  if (H == 0) throw shape_error("attention: heads must be at least 1");
  const std::size_t HK = opt.kv_heads == 0 ? H : opt.kv_heads;
  if (H % HK != 0)
    throw shape_error("attention: " + std::to_string(H) + " query heads cannot share " + std::to_string(HK) +
                      " key/value heads (kv_heads must divide heads)");
  if (dq % H != 0 || dkv % HK != 0)
    throw shape_error("attention: " + std::to_string(H) + " heads do not divide d_q = " + std::to_string(dq) +
                      " or " + std::to_string(HK) +
                      " key/value heads do not divide d_v = " + std::to_string(dkv) + " evenly");
}

}  // namespace detail

/// @brief multi-head attention of x (queries) over context (keys, values), into `r` (its
/// buffers are reused when the shapes repeat, so a loop does not allocate).
/// @throws shape_error naming both shapes of the first mismatch
/// w: attention_weights<T>, or packed_attention_weights<T> (the same bits, no repacking).
template <class T, template <class> class Weights>
  requires std::is_same_v<Weights<T>, attention_weights<T>> ||
           std::is_same_v<Weights<T>, packed_attention_weights<T>>
void attention(std::type_identity_t<matrix_view<const T>> x,
               std::type_identity_t<matrix_view<const T>> context, const Weights<T>& w,
               const attention_options<T>& opt, multihead_result<T>& r, thread_pool* pool = &default_pool()) {
  if constexpr (detail::forwards<T>) {  // libqkv_kernels (kernels.hpp)
    if constexpr (std::is_same_v<Weights<T>, attention_weights<T>>)
      detail::kernels().attention(x, context, w, opt, r, pool);
    else
      detail::kernels().attention_packed(x, context, w, opt, r, pool);
    return;
  }
  auto wshape = [](const auto& l) {
    if constexpr (requires { l.weight_shape; })
      return l.weight_shape;
    else
      return l.weight.shape();
  };
  const std::size_t H = opt.heads;
  if (H == 0) throw shape_error("attention: heads must be at least 1");
  const std::size_t HK = opt.kv_heads == 0 ? H : opt.kv_heads;
  if (H % HK != 0)
    throw shape_error("attention: " + std::to_string(H) + " query heads cannot share " + std::to_string(HK) +
                      " key/value heads (kv_heads must divide heads)");
  // pass 1: the three projections, their tiles in one parallel_for
  detail::product_job<T> projections[3] = {detail::linear_job<T>(x, w.q, r.queries, "wq"),
                                           detail::linear_job<T>(context, w.k, r.keys, "wk"),
                                           detail::linear_job<T>(context, w.v, r.values, "wv")};
  detail::threaded_products(projections, pool);
  const std::size_t t_len = x.rows, s_len = context.rows;
  const std::size_t dq = r.queries.cols(), dkv = r.values.cols();
  detail::check_heads(opt, dq, dkv);
  const std::size_t dh = dq / H, dvh = dkv / HK, dv = H * dvh;  // dv: the concatenated heads
  if (r.keys.cols() != HK * dh)
    throw shape_error("attention: wq is " + wshape(w.q) + " and wk is " + wshape(w.k) + " but keys need " +
                      std::to_string(HK) + " heads of d_q / heads = " + std::to_string(dh) + " columns (" +
                      std::to_string(HK * dh) + " vs " + std::to_string(r.keys.cols()) + ")");
  if (w.o && w.o->in_features() != dv)
    throw shape_error("attention: wo is " + wshape(*w.o) + " but the concatenated heads are " +
                      shape_string(t_len, dv));
  // pass 2: RoPE, the heads (detail::attend_heads)
  detail::attend_heads(opt, r, "context is " + shape_string(s_len, context.cols), pool);
  // pass 3: the output projection
  if (w.o)
    linear<T>(r.concat.view(), *w.o, r.output, pool, "wo");
  else
    r.output = r.concat;
}

/// @brief multi-head attention of queries, keys and values already projected (what PyTorch's
/// scaled_dot_product_attention, ONNX Runtime's MultiHeadAttention and a decoder's layer take):
/// q (T, H dh), k (S, HK dh), v (S, HK dvh), heads side by side (head h: columns h dh .. of q,
/// g dh .. of k and g dvh .. of v, g = h / (H / HK); HK = opt.kv_heads or H), every option of
/// attention() (mask, alignment, window, ALiBi, bias, RoPE on q and k, keep_weights). q, k and v
/// are copied into r.queries, r.keys and r.values (RoPE rotates the copies); r.output is
/// r.concat (no output projection). The same bits as attention() whose projections gave these
/// q, k, v.
/// @throws shape_error naming q, k, v's shapes when they do not fit together or the heads
template <class T>
void multihead_attention(std::type_identity_t<matrix_view<const T>> q,
                         std::type_identity_t<matrix_view<const T>> k,
                         std::type_identity_t<matrix_view<const T>> v, const attention_options<T>& opt,
                         multihead_result<T>& r, thread_pool* pool = &default_pool()) {
  if constexpr (detail::forwards<T>) {  // libqkv_kernels (kernels.hpp)
    detail::kernels().multihead_into(q, k, v, opt, r, pool);
    return;
  }
  detail::check_heads(opt, q.cols, v.cols);
  const std::size_t H = opt.heads, HK = opt.kv_heads == 0 ? H : opt.kv_heads, dh = q.cols / H;
  if (k.cols != HK * dh)
    throw shape_error("attention: q is " + q.shape() + " and k is " + k.shape() + " but k needs " +
                      std::to_string(HK) + " key/value heads of q's " + std::to_string(dh) +
                      " columns per head (" + std::to_string(HK * dh) + " columns)");
  if (k.rows != v.rows)
    throw shape_error("attention: k is " + k.shape() + " but v is " + v.shape() + " (one value row per key)");
  auto copy = [](matrix_view<const T> from, dynamic_matrix<T>& to) {
    to.resize(from.rows, from.cols);
    for (std::size_t i = 0; i < from.rows; ++i)
      for (std::size_t j = 0; j < from.cols; ++j) to(i, j) = from(i, j);
  };
  copy(q, r.queries);
  copy(k, r.keys);
  copy(v, r.values);
  detail::attend_heads(opt, r, "k is " + k.shape(), pool);
  r.output = r.concat;
}

/// @brief the fast path of multihead_attention: out (T, H dvh) = the heads' attention of the
/// already-projected q (T, H dh), k (S, HK dh), v (S, HK dvh), side by side (the layout of
/// PyTorch's (T, H d) before .view(T, H, d), and of ONNX Runtime's MultiHeadAttention), streamed
/// (memory O(T + S) per thread; keep_weights is not read), with one pool dispatch for all heads
/// and each key/value head's k and v packed once per task (detail::attend_grouped_streaming).
/// Every option applies: heads, kv_heads (GQA; 1 = MQA), scale (default 1/sqrt(dh)), causal
/// with its alignment, window, allowed, key_padding, ALiBi, bias (T, S) or (H T, S), and rope
/// (q and k rotated in copies: 2 (T + S) H dh more elements). Causal skips the key blocks a
/// query block cannot see and spends no exp on masked keys. NaN and infinity: as attention()
/// (a non-finite value reaches exactly the rows that attend to it).
/// The same bits as multihead_attention(q, k, v, opt) with keep_weights = false, as attention()
/// with projections that give these q, k, v, and as scaled_dot_product_attention on each
/// head's columns: for any thread count and split (tested).
/// T is deduced from out; q, k and v may be views of const or non-const matrices.
/// @throws shape_error naming the shapes that do not fit (q, k, v, out, the heads, the mask's)
template <class T>
void multihead_attention(std::type_identity_t<matrix_view<const T>> q,
                         std::type_identity_t<matrix_view<const T>> k,
                         std::type_identity_t<matrix_view<const T>> v, matrix_view<T> out,
                         const attention_options<T>& opt, thread_pool* pool = &default_pool()) {
  if constexpr (detail::forwards<T>) {  // libqkv_kernels (kernels.hpp)
    detail::kernels().multihead_out(q, k, v, out, opt, pool);
    return;
  }
  detail::check_heads(opt, q.cols, v.cols);
  const std::size_t H = opt.heads, HK = opt.kv_heads == 0 ? H : opt.kv_heads, dh = q.cols / H,
                    dvh = v.cols / HK;
  const std::size_t t_len = q.rows, s_len = k.rows, group = H / HK;
  if (k.cols != HK * dh)
    throw shape_error("attention: q is " + q.shape() + " and k is " + k.shape() + " but k needs " +
                      std::to_string(HK) + " key/value heads of q's " + std::to_string(dh) +
                      " columns per head (" + std::to_string(HK * dh) + " columns)");
  if (k.rows != v.rows)
    throw shape_error("attention: k is " + k.shape() + " but v is " + v.shape() + " (one value row per key)");
  if (out.rows != t_len || out.cols != H * dvh)
    throw shape_error("attention: out is " + out.shape() + " but must be " + shape_string(t_len, H * dvh) +
                      " (q's " + std::to_string(t_len) + " rows by " + std::to_string(H) + " heads of v's " +
                      std::to_string(dvh) + " columns per key/value head)");
  if (opt.allowed && (opt.allowed->rows() != t_len || opt.allowed->cols() != s_len))
    throw shape_error("attention: allowed is " + opt.allowed->shape() + " but must be " +
                      shape_string(t_len, s_len) + " (queries by keys)");
  if (opt.key_padding && opt.key_padding->size() != s_len)
    throw shape_error("attention: key_padding has " + std::to_string(opt.key_padding->size()) +
                      " flags but there are " + std::to_string(s_len) + " keys (k is " + k.shape() + ")");
  if (!detail::bias_fits(opt, H, t_len, s_len))
    throw shape_error("attention: the bias is " + opt.bias->shape() + " but must be " +
                      shape_string(t_len, s_len) + " or " + shape_string(H * t_len, s_len) +
                      " (heads x queries by keys)");
  if (t_len == 0) return;
  // RoPE: rotated copies of q and k (the caller's stay as given)
  std::optional<dynamic_matrix<T>> q_rot, k_rot;
  if (opt.rope) {
    q_rot.emplace(t_len, q.cols);
    k_rot.emplace(s_len, k.cols);
    for (std::size_t i = 0; i < t_len; ++i)
      for (std::size_t j = 0; j < q.cols; ++j) (*q_rot)(i, j) = q(i, j);
    for (std::size_t i = 0; i < s_len; ++i)
      for (std::size_t j = 0; j < k.cols; ++j) (*k_rot)(i, j) = k(i, j);
    apply_rope<T>(q_rot->view(), dh, *opt.rope, opt.rope->position_offset, pool);
    apply_rope<T>(k_rot->view(), dh, *opt.rope,
                  opt.rope->key_position_offset.value_or(opt.rope->position_offset), pool);
  }
  const matrix_view<const T> qv = q_rot ? matrix_view<const T>(q_rot->view()) : q;
  const matrix_view<const T> kv = k_rot ? matrix_view<const T>(k_rot->view()) : k;
  const T scale = opt.scale ? *opt.scale : default_scale<T>(dh);
  const attention_mask mask = detail::options_mask(opt, t_len, s_len);
  const std::vector<double> slopes = opt.alibi ? alibi_slopes(H) : std::vector<double>{};
  const auto head_mask = [&](std::size_t h) {
    attention_mask m = mask;
    if (opt.alibi) m.alibi_slope = slopes[h];
    if (opt.bias) m.set_bias(detail::head_bias(opt, h, t_len));
    return m;
  };
  const auto nonfinite = detail::nonfinite_values<T>::of(v);
  const matrix_view<const T> values = nonfinite ? matrix_view<const T>(nonfinite->clean.view()) : v;
  const double work = double(H) * double(t_len) * double(s_len) * double(dh + dvh);
  detail::attend_grouped_streaming<T>(
      qv, kv, values, out, H, HK, scale, head_mask, pool && work >= (1 << 17) ? pool : nullptr,
      [&](std::size_t h, std::size_t i0, std::size_t i1) {
        if (!nonfinite) return;
        const std::size_t g = h / group;
        detail::repair_rows<T>(column_block(qv, h * dh, dh), column_block(kv, g * dh, dh),
                               column_block(v, g * dvh, dvh), column_block(out, h * dvh, dvh), scale,
                               head_mask(h), nonfinite->keys, i0, i1);
      });
}

/// the (H, T, d) layout of multihead_attention: heads first, each head's rows one block
struct heads_first_t {
  explicit heads_first_t() = default;
};
inline constexpr heads_first_t heads_first{};

/// @brief multihead_attention on heads stored one after another, the (H, T, d) layout (PyTorch's
/// q.view(T, H, d).transpose(0, 1).contiguous(), ONNX Runtime's BNSH): q (H T, dh), head h its
/// rows h T .. h T + T - 1; k (HK S, dh) and v (HK S, dvh), key/value head g rows g S ..; out
/// (H T, dvh). Views of any row and column strides. Every option as in the heads-side-by-side
/// overload (allowed, key_padding and the bias are T x S per head as there; rope rotates copies
/// of q and k), one pool dispatch, each key/value head packed once per task; the same bits as
/// that overload on the same numbers laid side by side (tests/runtime/paths_test.cpp).
/// @throws shape_error naming q, k, v, out or the mask when they do not fit the heads
template <class T>
void multihead_attention(heads_first_t, std::type_identity_t<matrix_view<const T>> q,
                         std::type_identity_t<matrix_view<const T>> k,
                         std::type_identity_t<matrix_view<const T>> v, matrix_view<T> out,
                         const attention_options<T>& opt, thread_pool* pool = &default_pool()) {
  if constexpr (detail::forwards<T>) {  // libqkv_kernels (kernels.hpp)
    detail::kernels().multihead_heads_first(q, k, v, out, opt, pool);
    return;
  }
  const std::size_t H = opt.heads;
  if (H == 0) throw shape_error("attention: heads must be at least 1");
  const std::size_t HK = opt.kv_heads == 0 ? H : opt.kv_heads;
  if (H % HK != 0)
    throw shape_error("attention: " + std::to_string(H) + " query heads cannot share " + std::to_string(HK) +
                      " key/value heads (kv_heads must divide heads)");
  if (q.rows % H != 0 || k.rows % HK != 0)
    throw shape_error("attention (heads first): q is " + q.shape() + " and k is " + k.shape() +
                      " but q's rows must be " + std::to_string(H) + " heads x T and k's " +
                      std::to_string(HK) + " key/value heads x S");
  const std::size_t t_len = q.rows / H, s_len = k.rows / HK, dh = q.cols, dvh = v.cols, group = H / HK;
  if (k.cols != dh)
    throw shape_error("attention (heads first): q is " + q.shape() + " and k is " + k.shape() +
                      " but they need the same columns (the head's depth)");
  if (k.rows != v.rows)
    throw shape_error("attention (heads first): k is " + k.shape() + " but v is " + v.shape() +
                      " (one value row per key)");
  if (out.rows != q.rows || out.cols != dvh)
    throw shape_error("attention (heads first): out is " + out.shape() + " but must be " +
                      shape_string(q.rows, dvh) + " (q's rows by v's columns)");
  if (opt.allowed && (opt.allowed->rows() != t_len || opt.allowed->cols() != s_len))
    throw shape_error("attention: allowed is " + opt.allowed->shape() + " but must be " +
                      shape_string(t_len, s_len) + " (queries by keys)");
  if (opt.key_padding && opt.key_padding->size() != s_len)
    throw shape_error("attention: key_padding has " + std::to_string(opt.key_padding->size()) +
                      " flags but there are " + std::to_string(s_len) + " keys (k is " + k.shape() + ")");
  if (!detail::bias_fits(opt, H, t_len, s_len))
    throw shape_error("attention: the bias is " + opt.bias->shape() + " but must be " +
                      shape_string(t_len, s_len) + " or " + shape_string(H * t_len, s_len) +
                      " (heads x queries by keys)");
  if (t_len == 0) return;
  std::optional<dynamic_matrix<T>> q_rot, k_rot;  // RoPE: rotated copies, head by head
  if (opt.rope) {
    q_rot.emplace(copy_of(q));
    k_rot.emplace(copy_of(k));
    for (std::size_t h = 0; h < H; ++h)
      apply_rope<T>(row_block(q_rot->view(), h * t_len, t_len), dh, *opt.rope, opt.rope->position_offset,
                    pool);
    for (std::size_t g = 0; g < HK; ++g)
      apply_rope<T>(row_block(k_rot->view(), g * s_len, s_len), dh, *opt.rope,
                    opt.rope->key_position_offset.value_or(opt.rope->position_offset), pool);
  }
  const matrix_view<const T> qv = q_rot ? matrix_view<const T>(q_rot->view()) : q;
  const matrix_view<const T> kv = k_rot ? matrix_view<const T>(k_rot->view()) : k;
  const T scale = opt.scale ? *opt.scale : default_scale<T>(dh);
  const attention_mask mask = detail::options_mask(opt, t_len, s_len);
  const std::vector<double> slopes = opt.alibi ? alibi_slopes(H) : std::vector<double>{};
  const auto head_mask = [&](std::size_t h) {
    attention_mask m = mask;
    if (opt.alibi) m.alibi_slope = slopes[h];
    if (opt.bias) m.set_bias(detail::head_bias(opt, h, t_len));
    return m;
  };
  // a NaN or inf in a key/value head's values: the kernels read a clean copy, repair_rows puts
  // them back (as in the other overload), per key/value head
  std::vector<std::optional<detail::nonfinite_values<T>>> nonfinite(HK);
  for (std::size_t g = 0; g < HK; ++g)
    nonfinite[g] = detail::nonfinite_values<T>::of(row_block(v, g * s_len, s_len));
  const auto head = [&](std::size_t h) {
    const std::size_t g = h / group;
    const matrix_view<const T> vg =
        nonfinite[g] ? matrix_view<const T>(nonfinite[g]->clean.view()) : row_block(v, g * s_len, s_len);
    return std::tuple{row_block(qv, h * t_len, t_len), row_block(kv, g * s_len, s_len), vg,
                      row_block(out, h * t_len, t_len)};
  };
  const double work = double(H) * double(t_len) * double(s_len) * double(dh + dvh);
  detail::attend_grouped_streaming_heads<T>(
      H, HK, head, scale, head_mask, pool && work >= (1 << 17) ? pool : nullptr,
      [&](std::size_t h, std::size_t i0, std::size_t i1) {
        const std::size_t g = h / group;
        if (!nonfinite[g]) return;
        detail::repair_rows<T>(row_block(qv, h * t_len, t_len), row_block(kv, g * s_len, s_len),
                               row_block(v, g * s_len, s_len), row_block(out, h * t_len, t_len), scale,
                               head_mask(h), nonfinite[g]->keys, i0, i1);
      });
}

/// @brief the same as a new result
template <class T>
[[nodiscard]] multihead_result<T> multihead_attention(const dynamic_matrix<T>& q, const dynamic_matrix<T>& k,
                                                      const dynamic_matrix<T>& v,
                                                      const attention_options<T>& opt = {},
                                                      thread_pool* pool = &default_pool()) {
  multihead_result<T> r;
  multihead_attention<T>(q.view(), k.view(), v.view(), opt, r, pool);
  return r;
}

/// @brief attention as a new result; self-attention when context is x
template <class T>
[[nodiscard]] multihead_result<T> attention(const dynamic_matrix<T>& x, const dynamic_matrix<T>& context,
                                            const attention_weights<T>& w,
                                            const attention_options<T>& opt = {},
                                            thread_pool* pool = &default_pool()) {
  multihead_result<T> r;
  attention<T>(x.view(), context.view(), w, opt, r, pool);
  return r;
}

/// @brief the same with weights packed once (packed_attention_weights): the same bits
template <class T>
[[nodiscard]] multihead_result<T> attention(const dynamic_matrix<T>& x, const dynamic_matrix<T>& context,
                                            const packed_attention_weights<T>& w,
                                            const attention_options<T>& opt = {},
                                            thread_pool* pool = &default_pool()) {
  multihead_result<T> r;
  attention<T>(x.view(), context.view(), w, opt, r, pool);
  return r;
}

/// @brief self-attention: queries, keys and values all from x. The engineer's call:
/// `self_attention(x, w, {.heads = 12})` streams (output and concat only); `.keep_weights = true`
/// keeps every head's steps
template <class T>
[[nodiscard]] multihead_result<T> self_attention(const dynamic_matrix<T>& x, const attention_weights<T>& w,
                                                 const attention_options<T>& opt = {},
                                                 thread_pool* pool = &default_pool()) {
  return attention(x, x, w, opt, pool);
}

/// @brief the same with the weights packed once (packed_attention_weights w(weights), made
/// once and kept by the caller, as ONNX Runtime packs at session creation): the same bits, no
/// repacking of the four weight matrices on every call
template <class T>
[[nodiscard]] multihead_result<T> self_attention(const dynamic_matrix<T>& x,
                                                 const packed_attention_weights<T>& w,
                                                 const attention_options<T>& opt = {},
                                                 thread_pool* pool = &default_pool()) {
  return attention(x, x, w, opt, pool);
}

/// @brief self-attention into `r`, reusing its buffers (a loop allocates nothing after the first
/// call); w: attention_weights<T> or packed_attention_weights<T>
template <class T, template <class> class Weights>
  requires std::is_same_v<Weights<T>, attention_weights<T>> ||
           std::is_same_v<Weights<T>, packed_attention_weights<T>>
void self_attention(std::type_identity_t<matrix_view<const T>> x, const Weights<T>& w,
                    const attention_options<T>& opt, multihead_result<T>& r,
                    thread_pool* pool = &default_pool()) {
  attention<T>(x, x, w, opt, r, pool);
}

// --- 16-bit inputs --------------------------------------------------------------------------
// x, context and the weights in bfloat16 or float16 (as a model's checkpoint stores them, e.g.
// io/safetensors.hpp's BF16/F16), float32 accumulation: each is widened to float, exactly (every
// bfloat16 and float16 value is a float: 8 and 11 significant bits within float's 24, their
// exponent ranges inside float's), then the float attention() above runs. So the result is
// the float overload's on the widened inputs, bit for bit, and float (multihead_result<float>;
// the options are float's: scale, bias). The widened copies take 2x (bfloat16, float16) the
// memory of the inputs. Non-template overloads, so a call without options never picks the
// float template with T = bfloat16.

namespace detail {

template <storage_type S>
[[nodiscard]] dynamic_matrix<float> widened(const dynamic_matrix<S>& m) {
  dynamic_matrix<float> out(m.rows(), m.cols());
  to_float(m.data(), out.data(), m.size());
  return out;
}

template <storage_type S>
[[nodiscard]] linear_weights<float> widened(const linear_weights<S>& w) {
  linear_weights<float> f{widened(w.weight), std::vector<float>(w.bias.size()), w.layout};
  to_float(w.bias.data(), f.bias.data(), w.bias.size());
  return f;
}

template <storage_type S>
[[nodiscard]] multihead_result<float> attention_16(const dynamic_matrix<S>& x,
                                                   const dynamic_matrix<S>& context,
                                                   const attention_weights<S>& w,
                                                   const attention_options<float>& opt, thread_pool* pool) {
  attention_weights<float> wf{widened(w.q), widened(w.k), widened(w.v), std::nullopt};
  if (w.o) wf.o = widened(*w.o);
  const dynamic_matrix<float> xf = widened(x);
  if (&x == &context) return attention(xf, xf, wf, opt, pool);  // self-attention: widened once
  return attention(xf, widened(context), wf, opt, pool);
}

}  // namespace detail

/// @brief multi-head attention of bfloat16 inputs, float32 accumulation: the float attention()
/// of the (exactly) widened x, context and weights, bit for bit
[[nodiscard]] inline multihead_result<float> attention(const dynamic_matrix<bfloat16>& x,
                                                       const dynamic_matrix<bfloat16>& context,
                                                       const attention_weights<bfloat16>& w,
                                                       const attention_options<float>& opt = {},
                                                       thread_pool* pool = &default_pool()) {
  return detail::attention_16(x, context, w, opt, pool);
}
/// @brief the same for float16 inputs
[[nodiscard]] inline multihead_result<float> attention(const dynamic_matrix<float16>& x,
                                                       const dynamic_matrix<float16>& context,
                                                       const attention_weights<float16>& w,
                                                       const attention_options<float>& opt = {},
                                                       thread_pool* pool = &default_pool()) {
  return detail::attention_16(x, context, w, opt, pool);
}
/// @brief self-attention of bfloat16 / float16 inputs (queries, keys and values all from x)
[[nodiscard]] inline multihead_result<float> self_attention(const dynamic_matrix<bfloat16>& x,
                                                            const attention_weights<bfloat16>& w,
                                                            const attention_options<float>& opt = {},
                                                            thread_pool* pool = &default_pool()) {
  return detail::attention_16(x, x, w, opt, pool);
}
[[nodiscard]] inline multihead_result<float> self_attention(const dynamic_matrix<float16>& x,
                                                            const attention_weights<float16>& w,
                                                            const attention_options<float>& opt = {},
                                                            thread_pool* pool = &default_pool()) {
  return detail::attention_16(x, x, w, opt, pool);
}

}  // namespace qkv::runtime
