// layers.hpp: the position-wise layers of a transformer: linear, ReLU, GELU, LayerNorm, residual, feed-forward.
//
//   linear        y = x Wᵀ + b                                     nn.Linear, W stored (out, in)
//   relu          max(0, x)                                         nn.ReLU
//   gelu          x/2 (1 + erf(x / sqrt 2))                         nn.GELU() (the exact form, PyTorch's default)
//   layer_norm    (x - mean) / sqrt(var + eps) * weight + bias       nn.LayerNorm, over each row;
//                 var is the BIASED variance (divided by d, not d - 1), as PyTorch computes it
//   residual      x + sublayer(x)
//   feed_forward  linear2(activation(linear1(x)))                   the encoder layer's _ff_block
// Tokens are rows. Every function is constexpr; the feed-forward keeps its intermediates.
#pragma once

#include <cstddef>

#include "math.hpp"
#include "matrix.hpp"

namespace qkv {

// ---------------------------------------------------------------------------------------------
// linear

/// @brief nn.Linear: x Wᵀ + b, (T, in) with W (out, in) and b (1, out) -> (T, out).
/// Each element is the dot product summed left to right, then the bias added (one more rounding).
template <class T, std::size_t N, std::size_t In, std::size_t Out, std::size_t WIn>
  requires product_shapes<N, In, WIn, Out>
[[nodiscard]] constexpr matrix<T, N, Out> linear(const matrix<T, N, In>& x, const matrix<T, Out, WIn>& w,
                                                 const matrix<T, 1, Out>& b) {
  return add_row_vector(matrix_product_transposed(x, w), b);
}

/// nn.Linear(bias=False): x Wᵀ
template <class T, std::size_t N, std::size_t In, std::size_t Out, std::size_t WIn>
  requires product_shapes<N, In, WIn, Out>
[[nodiscard]] constexpr matrix<T, N, Out> linear(const matrix<T, N, In>& x, const matrix<T, Out, WIn>& w) {
  return matrix_product_transposed(x, w);
}

// ---------------------------------------------------------------------------------------------
// activations

/// which activation a feed-forward block uses: nn.TransformerEncoderLayer's activation="relu"/"gelu"
enum class activation { relu, gelu };

/// the name PyTorch gives it: "relu", "gelu"
[[nodiscard]] constexpr const char* activation_name(activation a) {
  return a == activation::relu ? "relu" : "gelu";
}

/// ReLU of one number: max(0, x); NaN stays NaN (as torch.relu), -0 gives 0
template <class T>
[[nodiscard]] constexpr T relu(const T& x) {
  return x > T(0) ? x : (x != x ? x : T(0));
}

/// ReLU of every element
template <class T, std::size_t R, std::size_t C>
[[nodiscard]] constexpr matrix<T, R, C> relu(const matrix<T, R, C>& x) {
  return map(x, [](const T& e) { return relu(e); });
}

/// @brief GELU of one number, the exact form: x/2 (1 + erf(x / sqrt 2)), as PyTorch's
/// nn.GELU(approximate='none') computes it: x * 0.5 * (1 + erf(x * M_SQRT1_2)), in T
template <class T>
[[nodiscard]] constexpr T gelu(const T& x) {
  constexpr T sqrt1_2 = T(0.707106781186547524400844362104849039);  // 1/sqrt(2) rounded to T
  return T(T(x * T(0.5)) * T(T(1) + qkv::erf(T(x * sqrt1_2))));
}

/// GELU of every element
template <class T, std::size_t R, std::size_t C>
[[nodiscard]] constexpr matrix<T, R, C> gelu(const matrix<T, R, C>& x) {
  return map(x, [](const T& e) { return gelu(e); });
}

// ---------------------------------------------------------------------------------------------
// LayerNorm

/// @brief nn.LayerNorm(d)'s parameters: weight (gamma) and bias (beta), (1, d); PyTorch starts
/// them at 1 and 0, as default_layer_norm<T, D>() does; eps defaults to 1e-5
template <class T, std::size_t D>
struct layer_norm_parameters {
  matrix<T, 1, D> weight = filled<T, 1, D>(T(1));
  matrix<T, 1, D> bias{};
};

/// @brief what layer_norm computes for each row, kept for teaching and for error bounds
template <class T, std::size_t N, std::size_t D>
struct layer_norm_result {
  matrix<T, N, 1> mean;        // sum / d
  matrix<T, N, 1> variance;    // sum (x - mean)^2 / d: biased
  matrix<T, N, 1> inv_std;     // 1 / sqrt(variance + eps)
  matrix<T, N, D> normalized;  // (x - mean) * inv_std
  matrix<T, N, D> output;      // normalized * weight + bias
};

/// @brief LayerNorm over each row (the last dimension), with every step kept.
/// pass 1: mean = sum / d; pass 2: variance = sum (x - mean)^2 / d (two passes: the one-pass
/// E[x^2] - mean^2 cancels catastrophically when |mean| >> std); pass 3: normalise, scale, shift.
template <class T, std::size_t N, std::size_t D>
[[nodiscard]] constexpr layer_norm_result<T, N, D> layer_norm_steps(const matrix<T, N, D>& x,
                                                                    const layer_norm_parameters<T, D>& p,
                                                                    const T& eps = T(1e-5)) {
  layer_norm_result<T, N, D> r;
  for (std::size_t i = 0; i < N; ++i) {
    const T* xi = x.v + i * D;
    // pass 1: the mean, summed left to right
    T s = xi[0];
    for (std::size_t j = 1; j < D; ++j) s += xi[j];
    const T mean = s / T(D);
    // pass 2: the biased variance
    T q = T(0);
    for (std::size_t j = 0; j < D; ++j) {
      const T c = xi[j] - mean;
      q += c * c;
    }
    const T variance = q / T(D);
    const T inv_std = T(1) / qkv::sqrt(T(variance + eps));
    r.mean.v[i] = mean;
    r.variance.v[i] = variance;
    r.inv_std.v[i] = inv_std;
    // pass 3: normalise, then the affine part
    for (std::size_t j = 0; j < D; ++j) {
      const T n = (xi[j] - mean) * inv_std;
      r.normalized.v[i * D + j] = n;
      r.output.v[i * D + j] = n * p.weight.v[j] + p.bias.v[j];
    }
  }
  return r;
}

/// @brief nn.LayerNorm(d, eps) applied to each row: (T, d) -> (T, d)
template <class T, std::size_t N, std::size_t D>
[[nodiscard]] constexpr matrix<T, N, D> layer_norm(const matrix<T, N, D>& x,
                                                   const layer_norm_parameters<T, D>& p,
                                                   const T& eps = T(1e-5)) {
  return layer_norm_steps(x, p, eps).output;
}

/// LayerNorm without the affine part (weight 1, bias 0)
template <class T, std::size_t N, std::size_t D>
[[nodiscard]] constexpr matrix<T, N, D> layer_norm(const matrix<T, N, D>& x, const T& eps = T(1e-5)) {
  return layer_norm_steps(x, layer_norm_parameters<T, D>{}, eps).output;
}

// ---------------------------------------------------------------------------------------------
// residual connection and feed-forward

/// @brief a residual connection: x + sublayer(x), the sublayer's output given. Same shape.
template <class T, std::size_t N, std::size_t D, std::size_t SN, std::size_t SD>
  requires same_shapes<N, D, SN, SD>
[[nodiscard]] constexpr matrix<T, N, D> residual(const matrix<T, N, D>& x,
                                                 const matrix<T, SN, SD>& sublayer_output) {
  return x + sublayer_output;
}

/// @brief the feed-forward block's parameters: nn.Linear(d, f) then nn.Linear(f, d)
template <class T, std::size_t D, std::size_t F>
struct feed_forward_parameters {
  matrix<T, F, D> linear1_weight;  // (f, d)
  matrix<T, 1, F> linear1_bias;
  matrix<T, D, F> linear2_weight;  // (d, f)
  matrix<T, 1, D> linear2_bias;
};

/// @brief every step of the feed-forward block
template <class T, std::size_t N, std::size_t D, std::size_t F>
struct feed_forward_result {
  matrix<T, N, F> hidden;     // linear1(x)                 (T, f)
  matrix<T, N, F> activated;  // activation(hidden)          (T, f)
  matrix<T, N, D> output;     // linear2(activated)          (T, d)
};

/// the activation of every element
template <class T, std::size_t R, std::size_t C>
[[nodiscard]] constexpr matrix<T, R, C> activate(const matrix<T, R, C>& x, activation a) {
  return a == activation::relu ? relu(x) : gelu(x);
}

/// @brief the feed-forward block, every step kept, written into r:
/// linear2(activation(linear1(x))), (T, d) -> (T, f) -> (T, f) -> (T, d); dropout is 0
/// (inference), so it is left out. The weights are taken by reference (no copies: at d = 512,
/// f = 2048 they are 8 MB).
template <class T, std::size_t N, std::size_t D, std::size_t F>
constexpr void feed_forward_into(const matrix<T, N, D>& x, const matrix<T, F, D>& linear1_weight,
                                 const matrix<T, 1, F>& linear1_bias, const matrix<T, D, F>& linear2_weight,
                                 const matrix<T, 1, D>& linear2_bias, activation a,
                                 feed_forward_result<T, N, D, F>& r) {
  r.hidden = linear(x, linear1_weight, linear1_bias);            // (T, f)
  r.activated = activate(r.hidden, a);                           // (T, f)
  r.output = linear(r.activated, linear2_weight, linear2_bias);  // (T, d)
}

/// @brief the feed-forward block, every step kept
template <class T, std::size_t N, std::size_t D, std::size_t F>
[[nodiscard]] constexpr feed_forward_result<T, N, D, F> feed_forward_steps(
    const matrix<T, N, D>& x, const feed_forward_parameters<T, D, F>& p, activation a = activation::relu) {
  feed_forward_result<T, N, D, F> r;
  feed_forward_into(x, p.linear1_weight, p.linear1_bias, p.linear2_weight, p.linear2_bias, a, r);
  return r;
}

/// the feed-forward block's output
template <class T, std::size_t N, std::size_t D, std::size_t F>
[[nodiscard]] constexpr matrix<T, N, D> feed_forward(const matrix<T, N, D>& x,
                                                     const feed_forward_parameters<T, D, F>& p,
                                                     activation a = activation::relu) {
  return feed_forward_steps(x, p, a).output;
}

}  // namespace qkv
