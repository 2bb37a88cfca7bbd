// encoder.hpp: a transformer encoder layer and a stack of them, as PyTorch's nn.TransformerEncoderLayer and nn.TransformerEncoder.
//
// One layer (batch_first=True, dropout 0), x (T, d):
//   norm_first = false (post-norm, the 2017 paper):   h = norm1(x + sa(x));       out = norm2(h + ff(h))
//   norm_first = true  (pre-norm):                    h = x + sa(norm1(x));       out = h + ff(norm2(h))
//   sa(a)  self-attention with nhead heads (nn.MultiheadAttention's math path):
//          [q k v] = a W_inᵀ + b_in           (T, 3d), split into three (T, d)
//          head h: q_h / sqrt(d/nhead) k_hᵀ   (T, T), -inf where the mask disallows
//                  softmax of each row, times v_h
//          concat of the heads W_outᵀ + b_out  (T, d)
//   ff(a)  linear2(activation(linear1(a)))    (T, f) then (T, d)
// The query is divided by sqrt(head dim) before the product, as PyTorch 1.13's
// multi_head_attention_forward does (q_scaled = q / math.sqrt(E)).
// A stack applies N layers in turn with the same masks (nn.TransformerEncoder, norm=None).
// Parameter names follow PyTorch's state_dict: self_attn.in_proj_weight -> in_proj_weight, etc.
#pragma once

#include <cstddef>
#include <limits>

#include "attention.hpp"
#include "layers.hpp"
#include "masks.hpp"
#include "math.hpp"
#include "matrix.hpp"
#include "multihead.hpp"

namespace qkv {

/// @brief one encoder layer's parameters, named as PyTorch's state_dict names them
/// @tparam D  d_model   @tparam H  nhead (must divide D)   @tparam F  dim_feedforward
template <class T, std::size_t D, std::size_t H, std::size_t F>
  requires divisible_into_heads<D, H>
struct encoder_layer_parameters {
  static constexpr std::size_t d_model = D, nhead = H, dim_feedforward = F;
  matrix<T, 3 * D, D> in_proj_weight{};  // self_attn.in_proj_weight: W_q, W_k, W_v stacked, (3d, d)
  matrix<T, 1, 3 * D> in_proj_bias{};    // self_attn.in_proj_bias
  matrix<T, D, D> out_proj_weight{};     // self_attn.out_proj.weight
  matrix<T, 1, D> out_proj_bias{};       // self_attn.out_proj.bias
  matrix<T, F, D> linear1_weight{};      // linear1.weight (f, d)
  matrix<T, 1, F> linear1_bias{};        // linear1.bias
  matrix<T, D, F> linear2_weight{};      // linear2.weight (d, f)
  matrix<T, 1, D> linear2_bias{};        // linear2.bias
  layer_norm_parameters<T, D> norm1{};   // norm1.weight (1), norm1.bias (0)
  layer_norm_parameters<T, D> norm2{};   // norm2.weight, norm2.bias

  /// linear1 and linear2 as a feed-forward block
  [[nodiscard]] constexpr feed_forward_parameters<T, D, F> feed_forward() const {
    return {linear1_weight, linear1_bias, linear2_weight, linear2_bias};
  }
};

/// @brief the same parameters in another number type (PyTorch's layer.double()): element-wise casts
template <class U, class T, std::size_t D, std::size_t H, std::size_t F>
[[nodiscard]] constexpr encoder_layer_parameters<U, D, H, F> encoder_layer_parameters_cast(
    const encoder_layer_parameters<T, D, H, F>& p) {
  encoder_layer_parameters<U, D, H, F> q;
  q.in_proj_weight = matrix_cast<U>(p.in_proj_weight);
  q.in_proj_bias = matrix_cast<U>(p.in_proj_bias);
  q.out_proj_weight = matrix_cast<U>(p.out_proj_weight);
  q.out_proj_bias = matrix_cast<U>(p.out_proj_bias);
  q.linear1_weight = matrix_cast<U>(p.linear1_weight);
  q.linear1_bias = matrix_cast<U>(p.linear1_bias);
  q.linear2_weight = matrix_cast<U>(p.linear2_weight);
  q.linear2_bias = matrix_cast<U>(p.linear2_bias);
  q.norm1 = {matrix_cast<U>(p.norm1.weight), matrix_cast<U>(p.norm1.bias)};
  q.norm2 = {matrix_cast<U>(p.norm2.weight), matrix_cast<U>(p.norm2.bias)};
  return q;
}

/// @brief the layer's settings other than sizes: nn.TransformerEncoderLayer's keyword arguments
template <class T>
struct encoder_options {
  activation act = activation::relu;  // activation="relu" (default) or "gelu"
  bool norm_first = false;            // norm_first=False (default): post-norm
  T layer_norm_eps = T(1e-5);         // layer_norm_eps=1e-5
  bool causal = false;                // mask=nn.Transformer.generate_square_subsequent_mask(T)
};

/// @brief every intermediate of one encoder layer on T tokens
template <class T, std::size_t N, std::size_t D, std::size_t H, std::size_t F>
struct encoder_layer_result {
  matrix<T, N, D> input;                         // x
  matrix<bool, N, N> allowed;                    // the merged mask: true = may attend
  layer_norm_result<T, N, D> norm1;              // norm1 of x (norm_first) or of x + sa (post-norm)
  matrix<T, N, D> attention_input;               // x, or norm1(x) when norm_first
  multihead_result<T, H, N, N, D, D> attention;  // queries (unscaled), keys, values; per head:
                                                 // scores = (q_h / sqrt(d/H)) k_hᵀ, scaled_scores =
                                                 // the same masked (-inf), weights; concat
  matrix<T, N, D> attention_output;              // concat W_outᵀ + b_out: sa(...)
  matrix<T, N, D> first_sum;                     // x + sa(...)
  matrix<T, N, D> hidden;                        // h: first_sum, or norm1(first_sum) (post-norm)
  layer_norm_result<T, N, D> norm2;              // norm2 of h (norm_first) or of h + ff (post-norm)
  matrix<T, N, D> feed_forward_input;            // h, or norm2(h) when norm_first
  feed_forward_result<T, N, D, F> feed_forward;  // linear1, activation, linear2
  matrix<T, N, D> second_sum;                    // h + ff(...)
  matrix<T, N, D> output;                        // second_sum, or norm2(second_sum) (post-norm)
};

/// @brief nn.MultiheadAttention's self-attention math with packed in-projection and a boolean
/// mask, every step kept. x (T, d), allowed (T, T) -> result.attention_output (T, d)
template <class T, std::size_t N, std::size_t D, std::size_t H, std::size_t F>
constexpr void encoder_self_attention(const matrix<T, N, D>& x, const encoder_layer_parameters<T, D, H, F>& p,
                                      const matrix<bool, N, N>& allowed,
                                      encoder_layer_result<T, N, D, H, F>& r) {
  constexpr std::size_t dh = D / H;
  auto& a = r.attention;
  // pass 1: [q k v] = x W_inᵀ + b_in, (T, 3d), then chunk(3) along the features
  const auto qkv_all = linear(x, p.in_proj_weight, p.in_proj_bias);  // (T, 3d)
  a.queries = block<N, D>(qkv_all, 0, 0);
  a.keys = block<N, D>(qkv_all, 0, D);
  a.values = block<N, D>(qkv_all, 0, 2 * D);
  // pass 2: per head, q / sqrt(head dim), scores, mask, softmax, weights v
  const T root = qkv::sqrt(T(dh));
  const auto qh = split_heads<H>(a.queries), kh = split_heads<H>(a.keys), vh = split_heads<H>(a.values);
  for (std::size_t h = 0; h < H; ++h) {
    a.scores[h] = scores(divided(qh[h], root), kh[h]);  // (T, T)
    if constexpr (std::numeric_limits<T>::has_infinity)
      a.scaled_scores[h] = masked(a.scores[h], allowed);
    else
      a.scaled_scores[h] = a.scores[h];
    a.weights[h] = softmax_rows(a.scaled_scores[h]);  // rows sum to 1 (0 for a fully masked row)
    a.context[h] =
        attended_context(a.scaled_scores[h], a.weights[h], vh[h]);  // (T, d/H), masked keys skipped
  }
  // pass 3: heads side by side, then the output projection
  a.concat = hconcat(a.context);
  r.attention_output = linear(a.concat, p.out_proj_weight, p.out_proj_bias);
}

/// @brief one nn.TransformerEncoderLayer forward pass on x (T, d), every step written into r.
/// padding (1, T): true = padding (src_key_padding_mask); options.causal adds the causal mask.
/// In place, so that a realistic size can live on the heap (a result at T = 64, d = 512 is 4 MB).
template <class T, std::size_t N, std::size_t D, std::size_t H, std::size_t F>
constexpr void encoder_layer_into(const matrix<T, N, D>& x, const encoder_layer_parameters<T, D, H, F>& p,
                                  const encoder_options<T>& options, const matrix<bool, 1, N>& padding,
                                  encoder_layer_result<T, N, D, H, F>& r) {
  r.input = x;
  r.allowed = key_padding_allowed<N, N>(padding);
  if (options.causal)
    for (std::size_t i = 0; i < N; ++i)
      for (std::size_t j = i + 1; j < N; ++j) r.allowed.v[i * N + j] = false;  // causal_mask<N>()
  const T eps = options.layer_norm_eps;
  const auto ff = [&](const matrix<T, N, D>& in) {
    feed_forward_into(in, p.linear1_weight, p.linear1_bias, p.linear2_weight, p.linear2_bias, options.act,
                      r.feed_forward);
  };
  if (options.norm_first) {
    // h = x + sa(norm1(x)); out = h + ff(norm2(h))
    r.norm1 = layer_norm_steps(x, p.norm1, eps);
    r.attention_input = r.norm1.output;
    encoder_self_attention(r.attention_input, p, r.allowed, r);
    r.first_sum = residual(x, r.attention_output);
    r.hidden = r.first_sum;
    r.norm2 = layer_norm_steps(r.hidden, p.norm2, eps);
    r.feed_forward_input = r.norm2.output;
    ff(r.feed_forward_input);
    r.second_sum = residual(r.hidden, r.feed_forward.output);
    r.output = r.second_sum;
  } else {
    // h = norm1(x + sa(x)); out = norm2(h + ff(h))
    r.attention_input = x;
    encoder_self_attention(x, p, r.allowed, r);
    r.first_sum = residual(x, r.attention_output);
    r.norm1 = layer_norm_steps(r.first_sum, p.norm1, eps);
    r.hidden = r.norm1.output;
    r.feed_forward_input = r.hidden;
    ff(r.feed_forward_input);
    r.second_sum = residual(r.hidden, r.feed_forward.output);
    r.norm2 = layer_norm_steps(r.second_sum, p.norm2, eps);
    r.output = r.norm2.output;
  }
}

/// @brief one nn.TransformerEncoderLayer forward pass on x (T, d), every step kept
template <class T, std::size_t N, std::size_t D, std::size_t H, std::size_t F>
[[nodiscard]] constexpr encoder_layer_result<T, N, D, H, F> encoder_layer_steps(
    const matrix<T, N, D>& x, const encoder_layer_parameters<T, D, H, F>& p,
    const encoder_options<T>& options, const matrix<bool, 1, N>& padding) {
  encoder_layer_result<T, N, D, H, F> r;
  encoder_layer_into(x, p, options, padding, r);
  return r;
}

/// one layer without a padding mask
template <class T, std::size_t N, std::size_t D, std::size_t H, std::size_t F>
[[nodiscard]] constexpr encoder_layer_result<T, N, D, H, F> encoder_layer_steps(
    const matrix<T, N, D>& x, const encoder_layer_parameters<T, D, H, F>& p,
    const encoder_options<T>& options = {}) {
  return encoder_layer_steps(x, p, options, matrix<bool, 1, N>{});
}

/// @brief one layer's output: nn.TransformerEncoderLayer(d, nhead, f, dropout=0, batch_first=True)(x)
template <class T, std::size_t N, std::size_t D, std::size_t H, std::size_t F>
[[nodiscard]] constexpr matrix<T, N, D> encoder_layer(const matrix<T, N, D>& x,
                                                      const encoder_layer_parameters<T, D, H, F>& p,
                                                      const encoder_options<T>& options = {},
                                                      const matrix<bool, 1, N>& padding = {}) {
  return encoder_layer_steps(x, p, options, padding).output;
}

// ---------------------------------------------------------------------------------------------
// a stack of layers

/// @brief the parameters of L layers (nn.TransformerEncoder's layers.0, layers.1, ...)
template <class T, std::size_t D, std::size_t H, std::size_t F, std::size_t L>
struct encoder_parameters {
  static_assert(L > 0, "an encoder has at least one layer");
  encoder_layer_parameters<T, D, H, F> layers[L]{};
};

/// @brief L copies of one layer: what nn.TransformerEncoder(layer, L) does (copy.deepcopy), so
/// every layer of a fresh stack starts with the same weights
template <std::size_t L, class T, std::size_t D, std::size_t H, std::size_t F>
[[nodiscard]] constexpr encoder_parameters<T, D, H, F, L> clones(
    const encoder_layer_parameters<T, D, H, F>& layer) {
  encoder_parameters<T, D, H, F, L> p;
  for (std::size_t l = 0; l < L; ++l) p.layers[l] = layer;
  return p;
}

/// @brief every layer's steps and the final output
template <class T, std::size_t N, std::size_t D, std::size_t H, std::size_t F, std::size_t L>
struct encoder_result {
  encoder_layer_result<T, N, D, H, F> layers[L];
  matrix<T, N, D> output;  // the last layer's output (no final norm)
};

/// @brief nn.TransformerEncoder(layer, L, norm=None)(x, mask, src_key_padding_mask): the layers
/// in turn, each with the same masks, written into r
template <class T, std::size_t N, std::size_t D, std::size_t H, std::size_t F, std::size_t L>
constexpr void encoder_into(const matrix<T, N, D>& x, const encoder_parameters<T, D, H, F, L>& p,
                            const encoder_options<T>& options, const matrix<bool, 1, N>& padding,
                            encoder_result<T, N, D, H, F, L>& r) {
  for (std::size_t l = 0; l < L; ++l)
    encoder_layer_into(l == 0 ? x : r.layers[l - 1].output, p.layers[l], options, padding, r.layers[l]);
  r.output = r.layers[L - 1].output;
}

/// @brief the same, returned
template <class T, std::size_t N, std::size_t D, std::size_t H, std::size_t F, std::size_t L>
[[nodiscard]] constexpr encoder_result<T, N, D, H, F, L> encoder_steps(
    const matrix<T, N, D>& x, const encoder_parameters<T, D, H, F, L>& p,
    const encoder_options<T>& options = {}, const matrix<bool, 1, N>& padding = {}) {
  encoder_result<T, N, D, H, F, L> r;
  encoder_into(x, p, options, padding, r);
  return r;
}

/// the stack's output
template <class T, std::size_t N, std::size_t D, std::size_t H, std::size_t F, std::size_t L>
[[nodiscard]] constexpr matrix<T, N, D> encoder(const matrix<T, N, D>& x,
                                                const encoder_parameters<T, D, H, F, L>& p,
                                                const encoder_options<T>& options = {},
                                                const matrix<bool, 1, N>& padding = {}) {
  return encoder_steps(x, p, options, padding).output;
}

}  // namespace qkv
