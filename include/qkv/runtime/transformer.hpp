// transformer.hpp: a small causal transformer (a decoder-only language model) at run time, its
// forward pass and its backward, for training (trainer.hpp).
//
//   tokens (B, T) -> x = token_embedding[tokens] + position_embedding[0 .. T-1]     (B T, d)
//   layers 1 .. L, each PyTorch's nn.TransformerEncoderLayer(d, heads, d_ff, dropout=0,
//   batch_first=True, norm_first) with a causal mask (key j <= query i), ReLU:
//     norm_first:  h = x + sa(norm1(x));   out = h + ff(norm2(h))
//     post-norm:   h = norm1(x + sa(x));   out = norm2(h + ff(h))
//     sa = multi-head self-attention (self_attn.in_proj / out_proj), ff = linear2(relu(linear1))
//   norm_first: a final nn.LayerNorm (`norm`) on the last layer's output
//   logits = out head.weightᵀ + head.bias                                         (B T, V)
// The PyTorch module is scripts/fixtures/train_torch.py's TinyTransformer; the parameters are
// named as its state_dict names them (token_embedding.weight, position_embedding.weight,
// layers.0.self_attn.in_proj_weight, ..., norm.weight, head.weight) and stored in that order in
// one flat buffer (values(): the optimiser runs over it, the checkpoint writes its slices).
// initialize(generator) draws them as the module's constructor does after
// torch.manual_seed(seed): nn.Embedding normal_(0, 1) (tokens, then positions); per layer
// nn.MultiheadAttention (out_proj = nn.Linear(d, d) drawn first, then xavier_uniform_ of
// in_proj_weight, both biases set to 0), linear1, linear2 (kaiming_uniform_ with a = sqrt(5),
// bias uniform(±1/sqrt(in))), LayerNorm weights 1 and biases 0; the head nn.Linear(d, V) last.
// Same seed, same bits as PyTorch's (train_torch_test.cpp checks every tensor's hash).
//
// The attention's projections are one product over all rows of a call (qkv = x in_projᵀ + b,
// and its backward); the heads are runtime/backward.hpp's (the forward saving the softmax
// statistics, FlashAttention-2's backward), one call per sequence, causal, scale
// 1/sqrt(d / heads) rounded once (encoder.hpp's). Every product is gemm.hpp's; every element
// of every product is one fma chain in a fixed order. The backward adds into a gradient buffer
// (+=), never depending on threads: this header is single-threaded per call, and the trainer
// runs fixed chunks of the batch on the pool and adds their gradients in chunk order.
// Sizes are checked against transformer_limits before anything is allocated; a shape that does
// not fit is a shape_error naming both shapes, a size past a limit a size_limit_error.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "../core/torch.hpp"
#include "cross_entropy.hpp"
#include "dynamic_matrix.hpp"
#include "encoder.hpp"
#include "gemm.hpp"
#include "backward.hpp"
#include "layer_norm_backward.hpp"
#include "multihead.hpp"

namespace qkv::runtime {

/// @brief the model's sizes: vocab V, context (the most positions), d_model, heads, d_ff,
/// layers, pre- or post-norm, LayerNorm's eps
struct transformer_options {
  std::size_t vocab = 0;
  std::size_t context = 0;
  std::size_t d_model = 32;
  std::size_t heads = 2;
  std::size_t d_ff = 64;
  std::size_t layers = 1;
  bool norm_first = true;
  double layer_norm_eps = 1e-5;
};

/// the stated limits, checked before allocating: a teaching model on a laptop
struct transformer_limits {
  static constexpr std::size_t max_layers = 4;
  static constexpr std::size_t max_vocab = 1 << 16;
  static constexpr std::size_t max_context = 1 << 12;
  static constexpr std::size_t max_width = 1 << 12;                    // d_model and d_ff
  static constexpr std::size_t max_parameters = std::size_t(1) << 26;  // 256 MiB of float
};

/// one named tensor of the flat buffer: PyTorch's state_dict name and shape
struct parameter_tensor {
  std::string name;
  std::vector<std::size_t> shape;
  std::size_t offset = 0, size = 0;
};

/// @brief the model: options, the table of named tensors and the flat buffer of their values
template <class T>
class transformer {
 public:
  /// the offsets of one layer's tensors in the flat buffer
  struct layer_offsets {
    std::size_t in_w, in_b, out_w, out_b, l1_w, l1_b, l2_w, l2_b, n1_w, n1_b, n2_w, n2_b;
  };

  /// @throws shape_error (heads do not divide d_model, a size 0) or size_limit_error (past
  /// transformer_limits), before allocating
  explicit transformer(const transformer_options& o) : o_(o) {
    using L = transformer_limits;
    if (o.vocab == 0 || o.context == 0 || o.d_model == 0 || o.d_ff == 0 || o.heads == 0 || o.layers == 0)
      throw shape_error(
          "transformer: vocab, context, d_model, d_ff, heads and layers must be positive (vocab " +
          std::to_string(o.vocab) + ", context " + std::to_string(o.context) + ", d_model " +
          std::to_string(o.d_model) + ", d_ff " + std::to_string(o.d_ff) + ", heads " +
          std::to_string(o.heads) + ", layers " + std::to_string(o.layers) + ")");
    if (o.d_model % o.heads != 0)
      throw shape_error("transformer: " + std::to_string(o.heads) + " heads do not divide d_model " +
                        std::to_string(o.d_model));
    auto limit = [](const char* what, std::size_t v, std::size_t max) {
      if (v > max)
        throw size_limit_error(std::string("transformer: ") + what + " " + std::to_string(v) +
                               " is past the limit " + std::to_string(max));
    };
    limit("layers", o.layers, L::max_layers);
    limit("vocab", o.vocab, L::max_vocab);
    limit("context", o.context, L::max_context);
    limit("d_model", o.d_model, L::max_width);
    limit("d_ff", o.d_ff, L::max_width);
    const std::size_t d = o.d_model, f = o.d_ff;
    auto add = [&](std::string name, std::vector<std::size_t> shape) {
      std::size_t n = 1;
      for (auto s : shape) n *= s;  // each factor <= 2^16 here, at most two: no overflow
      table_.push_back({std::move(name), std::move(shape), size_, n});
      size_ += n;
      return size_ - n;
    };
    tok_ = add("token_embedding.weight", {o.vocab, d});
    pos_ = add("position_embedding.weight", {o.context, d});
    for (std::size_t l = 0; l < o.layers; ++l) {
      const std::string p = "layers." + std::to_string(l) + ".";
      layer_offsets lo{};
      lo.in_w = add(p + "self_attn.in_proj_weight", {3 * d, d});
      lo.in_b = add(p + "self_attn.in_proj_bias", {3 * d});
      lo.out_w = add(p + "self_attn.out_proj.weight", {d, d});
      lo.out_b = add(p + "self_attn.out_proj.bias", {d});
      lo.l1_w = add(p + "linear1.weight", {f, d});
      lo.l1_b = add(p + "linear1.bias", {f});
      lo.l2_w = add(p + "linear2.weight", {d, f});
      lo.l2_b = add(p + "linear2.bias", {d});
      lo.n1_w = add(p + "norm1.weight", {d});
      lo.n1_b = add(p + "norm1.bias", {d});
      lo.n2_w = add(p + "norm2.weight", {d});
      lo.n2_b = add(p + "norm2.bias", {d});
      layers_.push_back(lo);
    }
    if (o.norm_first) {
      norm_w_ = add("norm.weight", {d});
      norm_b_ = add("norm.bias", {d});
    }
    head_w_ = add("head.weight", {o.vocab, d});
    head_b_ = add("head.bias", {o.vocab});
    limit("the parameter count", size_, L::max_parameters);
    values_.assign(size_, T(0));
  }

  [[nodiscard]] const transformer_options& options() const { return o_; }
  [[nodiscard]] std::size_t size() const { return size_; }
  [[nodiscard]] const std::vector<parameter_tensor>& tensors() const { return table_; }
  [[nodiscard]] std::vector<T>& values() { return values_; }
  [[nodiscard]] const std::vector<T>& values() const { return values_; }
  [[nodiscard]] const layer_offsets& layer(std::size_t l) const { return layers_[l]; }
  [[nodiscard]] std::size_t token_embedding() const { return tok_; }
  [[nodiscard]] std::size_t position_embedding() const { return pos_; }
  [[nodiscard]] std::size_t norm_weight() const { return norm_w_; }
  [[nodiscard]] std::size_t norm_bias() const { return norm_b_; }
  [[nodiscard]] std::size_t head_weight() const { return head_w_; }
  [[nodiscard]] std::size_t head_bias() const { return head_b_; }

  /// the tensor named `name` (PyTorch's state_dict name); throws std::out_of_range
  [[nodiscard]] const parameter_tensor& tensor(const std::string& name) const {
    for (const auto& t : table_)
      if (t.name == name) return t;
    throw std::out_of_range("transformer: no tensor named '" + name + "'");
  }

  /// @brief the parameters as TinyTransformer's constructor draws them after
  /// torch.manual_seed(seed) (the header comment gives the order)
  void initialize(qkv::torch::generator& gen) {
    const std::size_t d = o_.d_model, f = o_.d_ff;
    auto span = [&](std::size_t off, std::size_t n) { return std::span<T>(values_.data() + off, n); };
    gen.normal_(span(tok_, o_.vocab * d), 0.0, 1.0);
    gen.normal_(span(pos_, o_.context * d), 0.0, 1.0);
    for (const auto& lo : layers_) {
      gen.linear_(span(lo.out_w, d * d), span(lo.out_b, d), d);  // out_proj, built first
      gen.xavier_uniform_(span(lo.in_w, 3 * d * d), d, 3 * d);   // _reset_parameters
      std::fill_n(values_.data() + lo.in_b, 3 * d, T(0));
      std::fill_n(values_.data() + lo.out_b, d, T(0));
      gen.linear_(span(lo.l1_w, f * d), span(lo.l1_b, f), d);
      gen.linear_(span(lo.l2_w, d * f), span(lo.l2_b, d), f);
      std::fill_n(values_.data() + lo.n1_w, d, T(1));
      std::fill_n(values_.data() + lo.n1_b, d, T(0));
      std::fill_n(values_.data() + lo.n2_w, d, T(1));
      std::fill_n(values_.data() + lo.n2_b, d, T(0));
    }
    if (o_.norm_first) {
      std::fill_n(values_.data() + norm_w_, d, T(1));
      std::fill_n(values_.data() + norm_b_, d, T(0));
    }
    gen.linear_(span(head_w_, o_.vocab * d), span(head_b_, o_.vocab), d);
  }

  /// a (rows, cols) view of the flat buffer at offset
  [[nodiscard]] matrix_view<const T> view(std::size_t offset, std::size_t rows, std::size_t cols) const {
    return {values_.data() + offset, rows, cols, cols, 1};
  }

 private:
  transformer_options o_;
  std::vector<parameter_tensor> table_;
  std::vector<layer_offsets> layers_;
  std::size_t size_ = 0, tok_ = 0, pos_ = 0, norm_w_ = 0, norm_b_ = 0, head_w_ = 0, head_b_ = 0;
  std::vector<T> values_;
};

/// every step of one layer's forward over all rows of a call, kept for the backward
template <class T>
struct transformer_layer_cache {
  dynamic_matrix<T> in, a_in, qkv, concat, attn_out, s1, h, f_in, f1, f1r, f2, s2, out;
  std::vector<attention_statistics<T>> stats;  // one per sequence
  // the LayerNorms' row moments (mean, 1 / sqrt(var + eps)), one per row, for the backward
  std::vector<detail::layer_norm_moments<T>> norm1, norm2;
};

/// @brief the forward's kept steps and the backward's scratch, reused from call to call
template <class T>
struct transformer_cache {
  std::size_t sequences = 0, length = 0;
  std::vector<transformer_layer_cache<T>> layers;
  dynamic_matrix<T> fin, logits;  // the head's input (norm(out) or out) and the logits (B T, V)
  std::vector<detail::layer_norm_moments<T>> norm;  // the final norm's row moments (pre-norm)
  dynamic_matrix<T> d_logits, d_x, d_y, d_f, d_tmp, d_concat, d_qkv;
  attention_gradients<T> g;
};

namespace detail {

/// out[k] = a[k] + b[k], k < n, on simd (one add per element: the scalar loop's bits; out may be a)
template <class T>
void add_elements(const T* a, const T* b, T* out, std::size_t n) {
  using V = simd<T>;
  constexpr std::size_t W = lanes<T>;
  std::size_t k = 0;
  for (; k + W <= n; k += W)
    (V(a + k, stdx::element_aligned) + V(b + k, stdx::element_aligned))
        .copy_to(out + k, stdx::element_aligned);
  for (; k < n; ++k) out[k] = a[k] + b[k];
}

/// y = x Wᵀ + b, W (out, in) at w, b at bias: nn.Linear
template <class T>
void linear_forward(matrix_view<const T> x, matrix_view<const T> w, const T* bias, dynamic_matrix<T>& y) {
  y.resize(x.rows, w.rows);
  epilogue<T> e;
  e.bias = bias;
  matrix_product<T>(x, transposed(w), y.view(), e, nullptr);
}

/// nn.Linear's backward: dW += dyᵀ x (continuing each element's chain), db += colsum(dy),
/// dx = dy W (when dx is given)
template <class T>
void linear_backward(matrix_view<const T> x, matrix_view<const T> w, matrix_view<const T> dy, T* dw, T* db,
                     dynamic_matrix<T>* dx) {
  const matrix_view<T> dwv{dw, w.rows, w.cols, w.cols, 1};
  if (x.rows > 0) product_block<T>(transposed(dy), x, dwv, epilogue<T>{}, 0, w.rows, 0, w.cols, true);
  for (std::size_t i = 0; i < dy.rows; ++i)
    if (dy.col_stride == 1)
      add_elements<T>(db, dy.data + i * dy.row_stride, db, dy.cols);  // rows ascending, as below
    else
      for (std::size_t c = 0; c < dy.cols; ++c) db[c] += dy(i, c);
  if (dx) {
    dx->resize(dy.rows, w.cols);
    matrix_product<T>(dy, w, dx->view(), {}, nullptr);
  }
}

template <class T>
void add_into(dynamic_matrix<T>& a, const dynamic_matrix<T>& b) {
  add_elements<T>(a.data(), b.data(), a.data(), a.size());
}

/// a + b into out (encoder.hpp's add, on simd: the same bits)
template <class T>
void add_matrices(const dynamic_matrix<T>& a, const dynamic_matrix<T>& b, dynamic_matrix<T>& out) {
  out.resize(a.rows(), a.cols());
  add_elements<T>(a.data(), b.data(), out.data(), a.size());
}

/// the ReLU's backward in place: d[k] = 0 where x[k] > 0 does not hold (NaN included)
template <class T>
void relu_backward(const dynamic_matrix<T>& x, dynamic_matrix<T>& d) {
  using V = simd<T>;
  constexpr std::size_t W = lanes<T>;
  const std::size_t n = d.size();
  const T* xp = x.data();
  T* dp = d.data();
  std::size_t k = 0;
  for (; k + W <= n; k += W) {
    const V dv(dp + k, stdx::element_aligned);
    select(V(xp + k, stdx::element_aligned) > V(T(0)), dv, V(T(0))).copy_to(dp + k, stdx::element_aligned);
  }
  for (; k < n; ++k)
    if (!(xp[k] > T(0))) dp[k] = T(0);
}

template <class T>
void add_into(T* a, const T* b, std::size_t n) {
  add_elements<T>(a, b, a, n);
}

/// @brief encoder.hpp's layer_norm (the same bits: its moments, then ((x - mean) r) w + b
/// element by element, on simd), weight and bias d values at w and b, each row's moments kept
/// in moments for layer_norm_backward_rows
template <class T>
void layer_norm_keeping(matrix_view<const T> x, const T* w, const T* b, T eps, dynamic_matrix<T>& out,
                        std::vector<layer_norm_moments<T>>& moments) {
  const std::size_t n = x.rows, d = x.cols;
  out.resize(n, d);
  moments.resize(n);
  layer_norm_moments_of<T>(x, eps, moments.data());
  using V = simd<T>;
  constexpr std::size_t W = lanes<T>;
  for (std::size_t i = 0; i < n; ++i) {
    const T* xr = x.data + i * x.row_stride;  // x.col_stride is 1: a whole matrix's view
    T* yr = out.row(i);
    const V mean(moments[i].mean), r(moments[i].r);
    std::size_t j = 0;
    for (; j + W <= d; j += W)
      (((V(xr + j, stdx::element_aligned) - mean) * r) * V(w + j, stdx::element_aligned) +
       V(b + j, stdx::element_aligned))
          .copy_to(yr + j, stdx::element_aligned);
    for (; j < d; ++j) yr[j] = ((xr[j] - moments[i].mean) * moments[i].r) * w[j] + b[j];
  }
}

/// the layer's attention weights copied out of the flat buffer (q, k, v: rows of in_proj)
template <class T>
void attention_weights_of(const transformer<T>& m, std::size_t l, attention_weights<T>& w) {
  const std::size_t d = m.options().d_model;
  const auto& lo = m.layer(l);
  const T* v = m.values().data();
  linear_weights<T>* parts[3] = {&w.q, &w.k, &w.v};
  for (std::size_t p = 0; p < 3; ++p) {
    parts[p]->weight.resize(d, d);
    std::copy_n(v + lo.in_w + p * d * d, d * d, parts[p]->weight.data());
    parts[p]->bias.assign(v + lo.in_b + p * d, v + lo.in_b + (p + 1) * d);
    parts[p]->layout = weight_layout::out_in;
  }
  if (!w.o) w.o.emplace();
  w.o->weight.resize(d, d);
  std::copy_n(v + lo.out_w, d * d, w.o->weight.data());
  w.o->bias.assign(v + lo.out_b, v + lo.out_b + d);
  w.o->layout = weight_layout::out_in;
}

template <class T>
attention_options<T> causal_options(const transformer_options& o) {
  attention_options<T> opt;
  opt.heads = o.heads;
  opt.causal = true;
  opt.keep_weights = false;
  opt.scale = reciprocal_sqrt_rounded_once<T>(o.d_model / o.heads);
  return opt;
}

template <class T>
void relu_into(const dynamic_matrix<T>& x, dynamic_matrix<T>& y) {
  y.resize(x.rows(), x.cols());
  using V = simd<T>;
  constexpr std::size_t W = lanes<T>;
  const std::size_t n = x.size();
  const T* xp = x.data();
  T* yp = y.data();
  std::size_t k = 0;
  for (; k + W <= n; k += W) {  // x where x > 0, else 0 (NaN too): the scalar loop's values
    const V xv(xp + k, stdx::element_aligned);
    select(xv > V(T(0)), xv, V(T(0))).copy_to(yp + k, stdx::element_aligned);
  }
  for (; k < n; ++k) yp[k] = xp[k] > T(0) ? xp[k] : T(0);
}

}  // namespace detail

/// @brief the forward pass of `sequences` sequences of `length` tokens (row-major in tokens),
/// every step kept in c (c.logits: (sequences length, V)).
/// @throws shape_error when length is 0 or past the context, or a token is not in the vocabulary
template <class T>
void transformer_forward(const transformer<T>& m, const std::int32_t* tokens, std::size_t sequences,
                         std::size_t length, transformer_cache<T>& c) {
  const auto& o = m.options();
  if (length == 0 || length > o.context)
    throw shape_error("transformer: sequences of " + std::to_string(length) + " tokens but the context is " +
                      std::to_string(o.context) + " positions");
  const std::size_t n = sequences * length, d = o.d_model;
  for (std::size_t k = 0; k < n; ++k)
    if (tokens[k] < 0 || std::size_t(tokens[k]) >= o.vocab)
      throw shape_error("transformer: token " + std::to_string(tokens[k]) + " at " + std::to_string(k) +
                        " is not in the vocabulary of " + std::to_string(o.vocab));
  c.sequences = sequences;
  c.length = length;
  c.layers.resize(o.layers);
  const T* v = m.values().data();
  const T eps = T(o.layer_norm_eps);
  // embeddings
  auto& x0 = c.layers[0].in;
  x0.resize(n, d);
  for (std::size_t k = 0; k < n; ++k) {
    const T* te = v + m.token_embedding() + std::size_t(tokens[k]) * d;
    const T* pe = v + m.position_embedding() + (k % length) * d;
    detail::add_elements<T>(te, pe, x0.row(k), d);
  }
  const T scale = detail::reciprocal_sqrt_rounded_once<T>(o.d_model / o.heads);
  attention_mask mask;
  mask.causal = true;
  for (std::size_t l = 0; l < o.layers; ++l) {
    auto& lc = c.layers[l];
    const auto& lo = m.layer(l);
    if (l > 0) lc.in = c.layers[l - 1].out;
    const T *n1w = v + lo.n1_w, *n1b = v + lo.n1_b, *n2w = v + lo.n2_w, *n2b = v + lo.n2_b;
    if (o.norm_first)
      detail::layer_norm_keeping<T>(lc.in.view(), n1w, n1b, eps, lc.a_in, lc.norm1);
    else
      lc.a_in = lc.in;
    // the projections of every row at once: qkv = a_in in_projᵀ + in_proj_bias (n, 3d)
    detail::linear_forward<T>(lc.a_in.view(), m.view(lo.in_w, 3 * d, d), v + lo.in_b, lc.qkv);
    lc.stats.resize(sequences);
    lc.concat.resize(n, d);
    for (std::size_t s = 0; s < sequences; ++s) {
      const auto part = [&](std::size_t p) {
        return row_block(column_block(matrix_view<const T>(lc.qkv.view()), p * d, d), s * length, length);
      };
      attention_forward_for_backward<T>(part(0), part(1), part(2),
                                        row_block(lc.concat.view(), s * length, length), o.heads, scale, mask,
                                        lc.stats[s], nullptr);
    }
    detail::linear_forward<T>(lc.concat.view(), m.view(lo.out_w, d, d), v + lo.out_b, lc.attn_out);
    detail::add_matrices(lc.in, lc.attn_out, lc.s1);
    if (o.norm_first) {
      lc.h = lc.s1;
      detail::layer_norm_keeping<T>(lc.h.view(), n2w, n2b, eps, lc.f_in, lc.norm2);
    } else {
      detail::layer_norm_keeping<T>(lc.s1.view(), n1w, n1b, eps, lc.h, lc.norm1);
      lc.f_in = lc.h;
    }
    detail::linear_forward<T>(lc.f_in.view(), m.view(lo.l1_w, o.d_ff, d), v + lo.l1_b, lc.f1);
    detail::relu_into(lc.f1, lc.f1r);
    detail::linear_forward<T>(lc.f1r.view(), m.view(lo.l2_w, d, o.d_ff), v + lo.l2_b, lc.f2);
    detail::add_matrices(lc.h, lc.f2, lc.s2);
    if (o.norm_first)
      lc.out = lc.s2;
    else
      detail::layer_norm_keeping<T>(lc.s2.view(), n2w, n2b, eps, lc.out, lc.norm2);
  }
  const auto& last = c.layers.back().out;
  if (o.norm_first) {
    detail::layer_norm_keeping<T>(last.view(), v + m.norm_weight(), v + m.norm_bias(), eps, c.fin, c.norm);
  } else {
    c.fin = last;
  }
  detail::linear_forward<T>(c.fin.view(), m.view(m.head_weight(), o.vocab, d), v + m.head_bias(), c.logits);
}

/// @brief the backward of the forward kept in c for d_logits (c.sequences c.length, V): every
/// parameter's gradient added (+=) to grad (m.size() values, the flat buffer's order)
template <class T>
void transformer_backward(const transformer<T>& m, const std::int32_t* tokens, transformer_cache<T>& c,
                          std::type_identity_t<matrix_view<const T>> d_logits, T* grad) {
  const auto& o = m.options();
  const std::size_t n = c.sequences * c.length, d = o.d_model, L = c.length;
  if (d_logits.rows != n || d_logits.cols != o.vocab)
    throw shape_error("transformer_backward: d_logits is " + d_logits.shape() + " but the logits are " +
                      c.logits.shape());
  const T* v = m.values().data();
  // the head
  detail::linear_backward<T>(c.fin.view(), m.view(m.head_weight(), o.vocab, d), d_logits,
                             grad + m.head_weight(), grad + m.head_bias(), &c.d_y);
  // d_y: the gradient of the current activation (the last layer's output first)
  if (o.norm_first) {
    c.d_x.resize(n, d);
    detail::layer_norm_backward_rows<T>(c.layers.back().out.view(), c.norm.data(), v + m.norm_weight(),
                                        c.d_y.view(), c.d_x.view(), grad + m.norm_weight(),
                                        grad + m.norm_bias());
    std::swap(c.d_x, c.d_y);
  }
  const T scale = detail::reciprocal_sqrt_rounded_once<T>(o.d_model / o.heads);
  attention_mask mask;
  mask.causal = true;
  for (std::size_t l = o.layers; l-- > 0;) {
    auto& lc = c.layers[l];
    const auto& lo = m.layer(l);
    // c.d_y = d out; after the post-norm's norm2: d s2 = d h (residual) = d f2
    if (!o.norm_first) {
      c.d_x.resize(n, d);
      detail::layer_norm_backward_rows<T>(lc.s2.view(), lc.norm2.data(), v + lo.n2_w, c.d_y.view(),
                                          c.d_x.view(), grad + lo.n2_w, grad + lo.n2_b);
      std::swap(c.d_x, c.d_y);
    }
    // the feed-forward: d f2 = d_y
    detail::linear_backward<T>(lc.f1r.view(), m.view(lo.l2_w, d, o.d_ff), c.d_y.view(), grad + lo.l2_w,
                               grad + lo.l2_b, &c.d_f);
    detail::relu_backward(lc.f1, c.d_f);  // ReLU: the gradient where the input > 0
    detail::linear_backward<T>(lc.f_in.view(), m.view(lo.l1_w, o.d_ff, d), c.d_f.view(), grad + lo.l1_w,
                               grad + lo.l1_b, &c.d_tmp);
    // d h = d_y (the residual) + d f_in (through norm2 when pre-norm)
    if (o.norm_first) {
      c.d_x.resize(n, d);
      detail::layer_norm_backward_rows<T>(lc.h.view(), lc.norm2.data(), v + lo.n2_w, c.d_tmp.view(),
                                          c.d_x.view(), grad + lo.n2_w, grad + lo.n2_b);
      detail::add_into(c.d_y, c.d_x);
    } else {
      detail::add_into(c.d_y, c.d_tmp);
      // post-norm: h = norm1(s1)
      c.d_x.resize(n, d);
      detail::layer_norm_backward_rows<T>(lc.s1.view(), lc.norm1.data(), v + lo.n1_w, c.d_y.view(),
                                          c.d_x.view(), grad + lo.n1_w, grad + lo.n1_b);
      std::swap(c.d_x, c.d_y);
    }
    // c.d_y = d s1 = d in (residual) = d attn_out; the attention, sequence by sequence
    // the output projection, then each sequence's heads, then the input projection of all rows
    detail::linear_backward<T>(lc.concat.view(), m.view(lo.out_w, d, d), c.d_y.view(), grad + lo.out_w,
                               grad + lo.out_b, &c.d_concat);
    c.d_qkv.resize(n, 3 * d);
    for (std::size_t s = 0; s < c.sequences; ++s) {
      const auto part = [&](std::size_t p) {
        return row_block(column_block(matrix_view<const T>(lc.qkv.view()), p * d, d), s * L, L);
      };
      attention_backward<T>(part(0), part(1), part(2),
                            row_block(matrix_view<const T>(lc.concat.view()), s * L, L),
                            row_block(matrix_view<const T>(c.d_concat.view()), s * L, L), o.heads, scale,
                            mask, lc.stats[s], c.g, nullptr);
      const dynamic_matrix<T>* parts[3] = {&c.g.d_queries, &c.g.d_keys, &c.g.d_values};
      for (std::size_t p = 0; p < 3; ++p)
        for (std::size_t i = 0; i < L; ++i) std::copy_n(parts[p]->row(i), d, c.d_qkv.row(s * L + i) + p * d);
    }
    detail::linear_backward<T>(lc.a_in.view(), m.view(lo.in_w, 3 * d, d), c.d_qkv.view(), grad + lo.in_w,
                               grad + lo.in_b, &c.d_tmp);
    if (o.norm_first) {
      c.d_x.resize(n, d);
      detail::layer_norm_backward_rows<T>(lc.in.view(), lc.norm1.data(), v + lo.n1_w, c.d_tmp.view(),
                                          c.d_x.view(), grad + lo.n1_w, grad + lo.n1_b);
      detail::add_into(c.d_y, c.d_x);
    } else {
      detail::add_into(c.d_y, c.d_tmp);
    }
    // c.d_y = d in: the previous layer's d out
  }
  // the embeddings, rows in order
  for (std::size_t k = 0; k < n; ++k) {
    T* gt = grad + m.token_embedding() + std::size_t(tokens[k]) * d;
    T* gp = grad + m.position_embedding() + (k % L) * d;
    detail::add_into(gt, c.d_y.row(k), d);
    detail::add_into(gp, c.d_y.row(k), d);
  }
}

/// @brief the attention weights of every layer and head on one sequence (for pictures):
/// out[l][h] is (length, length), row i the softmax over keys 0 .. i
template <class T>
std::vector<std::vector<dynamic_matrix<T>>> transformer_attention_maps(const transformer<T>& m,
                                                                       const std::int32_t* tokens,
                                                                       std::size_t length) {
  transformer_cache<T> c;
  transformer_forward(m, tokens, 1, length, c);
  auto opt = detail::causal_options<T>(m.options());
  opt.keep_weights = true;
  std::vector<std::vector<dynamic_matrix<T>>> out;
  attention_weights<T> w;
  for (std::size_t l = 0; l < c.layers.size(); ++l) {
    const auto& lc = c.layers[l];
    detail::attention_weights_of(m, l, w);
    multihead_result<T> r;
    attention<T>(lc.a_in.view(), lc.a_in.view(), w, opt, r, nullptr);
    out.push_back(r.weights);
  }
  return out;
}

}  // namespace qkv::runtime
