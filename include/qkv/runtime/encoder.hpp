// encoder.hpp (runtime): nn.TransformerEncoderLayer and nn.TransformerEncoder at sizes chosen at run time.
//
// The same computation as core/encoder.hpp (read that header for the formulas), on dynamic
// matrices: the projections and the feed-forward on the packed simd GEMM (gemm.hpp), attention on
// runtime/multihead.hpp (heads, causal and key-padding masks, threads), LayerNorm and the
// activations row by row with the core's scalar code. batch_first=True, dropout 0, one sequence.
//   norm_first = false:  h = norm1(x + sa(x));   out = norm2(h + ff(h))
//   norm_first = true:   h = x + sa(norm1(x));   out = h + ff(norm2(h))
// Differences from the constexpr path, all within the same rounding bounds
// (core/encoder_bounds.hpp, tests/runtime/encoder_test.cpp): the GEMM sums with fused
// multiply-adds in its own order, and attention multiplies the raw scores by 1/sqrt(head dim)
// where the core (and PyTorch) divide the queries by fl(sqrt(head dim)). Both are two roundings
// per scaled score on top of the dot product's, as the bound counts them, because the factor
// given to attention is 1/sqrt(head dim) rounded once (computed in a wider type; the default
// fl(1 / fl(sqrt)) would be a third rounding). LayerNorm, ReLU and GELU are the core's code, so
// they give the core's bits on the same input.
// Every shape is checked before any arithmetic; a mismatch is a shape_error naming the field and
// both shapes ("layers[0] linear1.weight is 16x8 but dim_feedforward x d_model is 32x8").
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "../core/encoder.hpp"
#include "../core/layers.hpp"
#include "dynamic_matrix.hpp"
#include "gemm.hpp"
#include "multihead.hpp"
#include "thread_pool.hpp"

namespace qkv::runtime {

// The names are the core's (core/encoder.hpp): encoder_layer_parameters (PyTorch's word, its
// state_dict), encoder_options (nn.TransformerEncoderLayer's keyword arguments; here also the
// sizes, which the core's parameter type carries as template arguments) and encoder_layer_result
// (every step kept). encoder_run_options holds what one call needs beyond them: the key-padding
// flags (the core's `padding` argument) and the streaming and memory settings, which the core
// does not have.

/// @brief nn.TransformerEncoderLayer's sizes and settings (the same for every layer of a stack):
/// qkv::encoder_options' fields (act, norm_first, layer_norm_eps, causal) and the sizes
struct encoder_options {
  std::size_t d_model = 0;
  std::size_t nhead = 1;
  std::size_t dim_feedforward = 0;
  qkv::activation act = qkv::activation::relu;
  bool norm_first = false;
  double layer_norm_eps = 1e-5;
  bool causal = false;
};

/// @brief one layer's parameters, named as PyTorch's state_dict names them
template <class T>
struct encoder_layer_parameters {
  dynamic_matrix<T> in_proj_weight;   // self_attn.in_proj_weight (3d, d): W_q, W_k, W_v stacked
  std::vector<T> in_proj_bias;        // self_attn.in_proj_bias (3d)
  dynamic_matrix<T> out_proj_weight;  // self_attn.out_proj.weight (d, d)
  std::vector<T> out_proj_bias;       // self_attn.out_proj.bias (d)
  dynamic_matrix<T> linear1_weight;   // (f, d)
  std::vector<T> linear1_bias;        // (f)
  dynamic_matrix<T> linear2_weight;   // (d, f)
  std::vector<T> linear2_bias;        // (d)
  std::vector<T> norm1_weight, norm1_bias, norm2_weight, norm2_bias;  // (d) each
};

namespace detail {

inline std::string vector_shape(std::size_t n) { return "[" + std::to_string(n) + "]"; }

template <class T>
void check_matrix(const dynamic_matrix<T>& m, std::size_t rows, std::size_t cols, const std::string& where,
                  const std::string& field, const std::string& what) {
  if (m.rows() != rows || m.cols() != cols)
    throw shape_error(where + field + " is " + m.shape() + " but " + what + " is " +
                      shape_string(rows, cols));
}

template <class T>
void check_vector(const std::vector<T>& v, std::size_t n, const std::string& where, const std::string& field,
                  const std::string& what) {
  if (v.size() != n)
    throw shape_error(where + field + " is " + vector_shape(v.size()) + " but " + what + " is " +
                      vector_shape(n));
}

}  // namespace detail

/// @brief every shape of one layer against the config; throws shape_error naming the field and
/// both shapes. `where` prefixes the message (e.g. "layers[1] ").
template <class T>
void check_shapes(const encoder_layer_parameters<T>& w, const encoder_options& c,
                  const std::string& where = "") {
  if (c.d_model == 0 || c.dim_feedforward == 0)
    throw shape_error(where + "d_model and dim_feedforward must be positive");
  if (c.nhead == 0 || c.d_model % c.nhead != 0)
    throw shape_error(where + "nhead " + std::to_string(c.nhead) + " does not divide d_model " +
                      std::to_string(c.d_model));
  const std::size_t d = c.d_model, f = c.dim_feedforward;
  detail::check_matrix(w.in_proj_weight, 3 * d, d, where, "self_attn.in_proj_weight", "3 d_model x d_model");
  detail::check_vector(w.in_proj_bias, 3 * d, where, "self_attn.in_proj_bias", "3 d_model");
  detail::check_matrix(w.out_proj_weight, d, d, where, "self_attn.out_proj.weight", "d_model x d_model");
  detail::check_vector(w.out_proj_bias, d, where, "self_attn.out_proj.bias", "d_model");
  detail::check_matrix(w.linear1_weight, f, d, where, "linear1.weight", "dim_feedforward x d_model");
  detail::check_vector(w.linear1_bias, f, where, "linear1.bias", "dim_feedforward");
  detail::check_matrix(w.linear2_weight, d, f, where, "linear2.weight", "d_model x dim_feedforward");
  detail::check_vector(w.linear2_bias, d, where, "linear2.bias", "d_model");
  detail::check_vector(w.norm1_weight, d, where, "norm1.weight", "d_model");
  detail::check_vector(w.norm1_bias, d, where, "norm1.bias", "d_model");
  detail::check_vector(w.norm2_weight, d, where, "norm2.weight", "d_model");
  detail::check_vector(w.norm2_bias, d, where, "norm2.bias", "d_model");
}

/// @brief the constexpr path's parameters as run-time ones in U (PyTorch's layer.to(dtype)),
/// converted element by element
template <class U, class T, std::size_t D, std::size_t H, std::size_t F>
[[nodiscard]] encoder_layer_parameters<U> to_runtime_as(const qkv::encoder_layer_parameters<T, D, H, F>& p) {
  const auto m = [](const auto& a) {
    dynamic_matrix<U> out(a.rows(), a.cols());
    for (std::size_t k = 0; k < a.size(); ++k) out.data()[k] = static_cast<U>(a.v[k]);
    return out;
  };
  const auto v = [](const auto& a) {
    std::vector<U> out(a.size());
    for (std::size_t k = 0; k < a.size(); ++k) out[k] = static_cast<U>(a.v[k]);
    return out;
  };
  encoder_layer_parameters<U> w;
  w.in_proj_weight = m(p.in_proj_weight);
  w.in_proj_bias = v(p.in_proj_bias);
  w.out_proj_weight = m(p.out_proj_weight);
  w.out_proj_bias = v(p.out_proj_bias);
  w.linear1_weight = m(p.linear1_weight);
  w.linear1_bias = v(p.linear1_bias);
  w.linear2_weight = m(p.linear2_weight);
  w.linear2_bias = v(p.linear2_bias);
  w.norm1_weight = v(p.norm1.weight);
  w.norm1_bias = v(p.norm1.bias);
  w.norm2_weight = v(p.norm2.weight);
  w.norm2_bias = v(p.norm2.bias);
  return w;
}

/// @brief the constexpr path's parameters as run-time ones (same type, same values)
template <class T, std::size_t D, std::size_t H, std::size_t F>
[[nodiscard]] encoder_layer_parameters<T> to_runtime(const qkv::encoder_layer_parameters<T, D, H, F>& p) {
  return to_runtime_as<T>(p);
}

/// the config of a constexpr layer type and its options
template <class T, std::size_t D, std::size_t H, std::size_t F>
[[nodiscard]] encoder_options to_runtime_options(const qkv::encoder_layer_parameters<T, D, H, F>&,
                                                 const qkv::encoder_options<T>& o) {
  return {D, H, F, o.act, o.norm_first, double(o.layer_norm_eps), o.causal};
}

/// @brief every step of one layer (PyTorch's names where it has them)
template <class T>
struct encoder_layer_result {
  dynamic_matrix<T> attention_input;     // x, or norm1(x) when norm_first
  multihead_result<T> attention;         // q, k, v, per head scores (raw q·k) and weights (if kept), concat;
                                         // attention.output = sa(...) = concat W_outᵀ + b_out
  dynamic_matrix<T> first_sum;           // x + sa(...)
  dynamic_matrix<T> hidden;              // h: first_sum, or norm1(first_sum) (post-norm)
  dynamic_matrix<T> feed_forward_input;  // h, or norm2(h) when norm_first
  dynamic_matrix<T> feed_forward_hidden;     // linear1(...)            (T, f)
  dynamic_matrix<T> feed_forward_activated;  // activation(...)     (T, f)
  dynamic_matrix<T> feed_forward_output;     // linear2(...)            (T, d)
  dynamic_matrix<T> second_sum;              // h + ff(...)
  dynamic_matrix<T> output;                  // second_sum, or norm2(second_sum) (post-norm)
};

/// @brief LayerNorm of each row with the core's two-pass arithmetic (core/layers.hpp), so the
/// bits equal qkv::layer_norm's: mean, biased variance, (x - mean) / sqrt(var + eps) w + b
template <class T>
void layer_norm(matrix_view<const T> x, const std::vector<T>& weight, const std::vector<T>& bias, T eps,
                dynamic_matrix<T>& out) {
  const std::size_t n = x.rows, d = x.cols;
  if (weight.size() != d || bias.size() != d)
    throw shape_error("layer_norm: x is " + x.shape() + " but the weight is " +
                      detail::vector_shape(weight.size()) + " and the bias " +
                      detail::vector_shape(bias.size()));
  out.resize(n, d);
  for (std::size_t i = 0; i < n; ++i) {
    T s = x(i, 0);
    for (std::size_t j = 1; j < d; ++j) s += x(i, j);
    const T mean = s / T(d);
    T q = T(0);
    for (std::size_t j = 0; j < d; ++j) {
      const T c = x(i, j) - mean;
      q += c * c;
    }
    const T variance = q / T(d);
    const T inv_std = T(1) / std::sqrt(T(variance + eps));  // correctly rounded, as qkv::sqrt
    for (std::size_t j = 0; j < d; ++j) out(i, j) = ((x(i, j) - mean) * inv_std) * weight[j] + bias[j];
  }
}

/// a + b element by element into out
template <class T>
void add(const dynamic_matrix<T>& a, const dynamic_matrix<T>& b, dynamic_matrix<T>& out) {
  if (a.rows() != b.rows() || a.cols() != b.cols())
    throw shape_error("add: a is " + a.shape() + " but b is " + b.shape());
  out.resize(a.rows(), a.cols());
  for (std::size_t k = 0; k < a.size(); ++k) out.data()[k] = a.data()[k] + b.data()[k];
}

/// the activation of every element, with the core's scalar functions (same bits)
template <class T>
void activate(const dynamic_matrix<T>& x, qkv::activation a, dynamic_matrix<T>& out) {
  out.resize(x.rows(), x.cols());
  for (std::size_t k = 0; k < x.size(); ++k)
    out.data()[k] = a == qkv::activation::relu ? qkv::relu(x.data()[k]) : qkv::gelu(x.data()[k]);
}

/// @brief how to run a layer: the key-padding mask (one flag per token, nonzero = padding; passed
/// to attention as attention_options::key_padding, T flags, never a (T, T) matrix) and whether to
/// keep every head's scores and weights (false, the default, as attention_options': attention
/// streams, memory O(T); the learner's call, every step kept, says `.keep_weights = true`)
struct encoder_run_options {
  std::optional<std::vector<unsigned char>> key_padding;
  bool keep_weights = false;
  std::size_t max_weights_bytes = default_max_weights_bytes;  // attention_options' limit on kept weights
};

namespace detail {

/// @brief 1/sqrt(n) rounded once to T: computed in a type with at least 11 more bits (double for
/// float, x87's 64-bit long double for double), whose own error then adds at most 2^-10 u
template <class T>
[[nodiscard]] T reciprocal_sqrt_rounded_once(std::size_t n) {
  using wide = std::conditional_t<(sizeof(T) < sizeof(double)), double, long double>;
  static_assert(std::numeric_limits<wide>::digits >= std::numeric_limits<T>::digits + 11,
                "1/sqrt(head dim) needs a wider type to be rounded once");
  return static_cast<T>(wide(1) / std::sqrt(static_cast<wide>(n)));
}

/// the self-attention weights of a layer: in_proj split into W_q, W_k, W_v (rows 0..d-1, d..2d-1,
/// 2d..3d-1, as PyTorch's chunk(3)), out_proj as the output projection
template <class T>
attention_weights<T> split_in_proj(const encoder_layer_parameters<T>& w, std::size_t d) {
  attention_weights<T> a;
  linear_weights<T>* parts[3] = {&a.q, &a.k, &a.v};
  for (std::size_t p = 0; p < 3; ++p) {
    parts[p]->weight = dynamic_matrix<T>(d, d);
    for (std::size_t i = 0; i < d; ++i)
      for (std::size_t j = 0; j < d; ++j) parts[p]->weight(i, j) = w.in_proj_weight(p * d + i, j);
    parts[p]->bias.assign(w.in_proj_bias.begin() + std::ptrdiff_t(p * d),
                          w.in_proj_bias.begin() + std::ptrdiff_t((p + 1) * d));
  }
  a.o = linear_weights<T>{w.out_proj_weight, w.out_proj_bias, weight_layout::out_in};
  return a;
}

}  // namespace detail

/// @brief one nn.TransformerEncoderLayer forward pass on x (T, d_model), every step into tr.
/// @throws shape_error naming the field and both shapes when x, a weight or the mask does not fit
template <class T>
void encoder_layer(const dynamic_matrix<T>& x, const encoder_layer_parameters<T>& w, const encoder_options& c,
                   const encoder_run_options& run, encoder_layer_result<T>& tr,
                   thread_pool* pool = &default_pool()) {
  check_shapes(w, c);
  if (x.cols() != c.d_model)
    throw shape_error("x is " + x.shape() + " but d_model is " + std::to_string(c.d_model) +
                      " (x must be T x d_model)");
  const T eps = static_cast<T>(c.layer_norm_eps);
  attention_options<T> opt;
  opt.heads = c.nhead;
  opt.scale = detail::reciprocal_sqrt_rounded_once<T>(c.d_model / c.nhead);
  opt.causal = c.causal;
  if (run.key_padding && run.key_padding->size() != x.rows())
    throw shape_error("key_padding has " + std::to_string(run.key_padding->size()) + " flags but x has " +
                      std::to_string(x.rows()) + " tokens");
  opt.key_padding = run.key_padding;  // T flags: masks the keys, never a (T, T) matrix
  opt.keep_weights = run.keep_weights;
  opt.max_weights_bytes = run.max_weights_bytes;
  const auto attn = detail::split_in_proj(w, c.d_model);
  const linear_weights<T> l1{w.linear1_weight, w.linear1_bias, weight_layout::out_in};
  const linear_weights<T> l2{w.linear2_weight, w.linear2_bias, weight_layout::out_in};
  const auto ff = [&](const dynamic_matrix<T>& in) {
    linear<T>(in.view(), l1, tr.feed_forward_hidden, pool, "linear1.weight");
    activate(tr.feed_forward_hidden, c.act, tr.feed_forward_activated);
    linear<T>(tr.feed_forward_activated.view(), l2, tr.feed_forward_output, pool, "linear2.weight");
  };
  if (c.norm_first) {
    layer_norm<T>(x.view(), w.norm1_weight, w.norm1_bias, eps, tr.attention_input);
    attention<T>(tr.attention_input.view(), tr.attention_input.view(), attn, opt, tr.attention, pool);
    add(x, tr.attention.output, tr.first_sum);
    tr.hidden = tr.first_sum;
    layer_norm<T>(tr.hidden.view(), w.norm2_weight, w.norm2_bias, eps, tr.feed_forward_input);
    ff(tr.feed_forward_input);
    add(tr.hidden, tr.feed_forward_output, tr.second_sum);
    tr.output = tr.second_sum;
  } else {
    tr.attention_input = x;
    attention<T>(x.view(), x.view(), attn, opt, tr.attention, pool);
    add(x, tr.attention.output, tr.first_sum);
    layer_norm<T>(tr.first_sum.view(), w.norm1_weight, w.norm1_bias, eps, tr.hidden);
    tr.feed_forward_input = tr.hidden;
    ff(tr.feed_forward_input);
    add(tr.hidden, tr.feed_forward_output, tr.second_sum);
    layer_norm<T>(tr.second_sum.view(), w.norm2_weight, w.norm2_bias, eps, tr.output);
  }
}

/// @brief nn.TransformerEncoder(layer, N, norm=None): the layers in turn with the same masks;
/// traces[l] holds layer l's steps, the output is traces.back().output
template <class T>
const dynamic_matrix<T>& encoder(const dynamic_matrix<T>& x,
                                 const std::vector<encoder_layer_parameters<T>>& layers,
                                 const encoder_options& c, const encoder_run_options& run,
                                 std::vector<encoder_layer_result<T>>& traces,
                                 thread_pool* pool = &default_pool()) {
  if (layers.empty()) throw shape_error("encoder: no layers");
  for (std::size_t l = 0; l < layers.size(); ++l)
    check_shapes(layers[l], c, "layers[" + std::to_string(l) + "] ");
  traces.resize(layers.size());
  for (std::size_t l = 0; l < layers.size(); ++l)
    encoder_layer(l == 0 ? x : traces[l - 1].output, layers[l], c, run, traces[l], pool);
  return traces.back().output;
}

// --- the old names, for one release -----------------------------------------------------------
// (g++ warns where they are used; clang 16 ignores [[deprecated]] on an alias template, so the
// two template aliases are silent there)
using encoder_config [[deprecated("use qkv::runtime::encoder_options")]] = encoder_options;
template <class T>
using encoder_layer_weights [[deprecated("use qkv::runtime::encoder_layer_parameters")]] =
    encoder_layer_parameters<T>;
template <class T>
using encoder_layer_trace [[deprecated("use qkv::runtime::encoder_layer_result")]] = encoder_layer_result<T>;
template <class T, std::size_t D, std::size_t H, std::size_t F>
[[deprecated("use qkv::runtime::to_runtime_options")]] [[nodiscard]] encoder_options to_runtime_config(
    const qkv::encoder_layer_parameters<T, D, H, F>& p, const qkv::encoder_options<T>& o) {
  return to_runtime_options(p, o);
}

}  // namespace qkv::runtime
