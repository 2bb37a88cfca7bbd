// encoder_bounds.hpp: derived bounds on the rounding error of an encoder layer, element by element.
//
// A tolerance for "equal to PyTorch" must be derived, not guessed (tests/, examples/). This
// follows one encoder layer step by step in the standard model of rounding (core/bounds.hpp:
// fl(a op b) = (a op b)(1 + d), |d| <= u), carrying for every element a bound e on
// |computed - exact|. Each step adds its own rounding and passes on the incoming errors
// through its first-order sensitivity; 1% on top covers the second-order terms. The bounds are
// evaluated from the computed trace (encoder_layer_result), in double.
//   linear    y = x Wᵀ + b (K inputs):  e_y(o) <= sum_k |W_ok| e_x(k) + gamma(K+1) (sum_k |x_k W_ok| + |b_o|)
//   relu      e_y <= e_x;   gelu  e_y <= 1.13 e_x + 4u |x| (max gelu' = 1.129; erf within 1 ulp, 3 roundings)
//   residual  e <= e_a + e_b + u |a + b|
//   LayerNorm c_j = x_j - mean carries e_x(j) + mean(e_x) + the mean's rounding gamma(d+1) mean|x| + u|c_j|;
//             the variance (2/d) sum |c_k| e_c(k) + gamma(d+2) var; 1/sigma relative 1/2 e_var/sigma^2 + 3u
//             (sqrt, + eps, 1/); n_j = c_j / sigma: e_c(j)/sigma + |n_j| (that + u); then |w_j| e_n + 2 roundings
//   attention scores s_ij = (q_i / sqrt(dh)) . k_j: sum_m |q_m| e_k(m) + e_q(m) |k_m| + gamma(dh) sum |q k|;
//             softmax: w_ij moves by <= w_ij (e_s(ij) + sum_k w_ik e_s(ik) + r_i) (first order), r_i its
//             rounding as in bounds::softmax_rows_error; context = sum_j w_ij v_j: the moved weights
//             times |v|, the weights times e_v, and gamma(S) sum_j w_ij |v_j|
// A masked key has weight exactly 0 in both computations and is left out of every sum.
// Worst cases all: the actual differences are typically 10 to 1000 times smaller.
#pragma once

#include <cstddef>

#include "bounds.hpp"
#include "encoder.hpp"
#include "layers.hpp"
#include "matrix.hpp"

namespace qkv::bounds {

namespace detail {

[[nodiscard]] constexpr double abs_of(double x) { return x < 0 ? -x : x; }
[[nodiscard]] constexpr double larger(double a, double b) { return a < b ? b : a; }

}  // namespace detail

/// @brief the errors of linear(x, w, b) computed in F, x carrying errors ex
template <class F, class T, std::size_t N, std::size_t K, std::size_t O>
[[nodiscard]] constexpr matrix<double, N, O> linear_error(const matrix<T, N, K>& x,
                                                          const matrix<double, N, K>& ex,
                                                          const matrix<T, O, K>& w,
                                                          const matrix<T, 1, O>& b) {
  using detail::abs_of;
  matrix<double, N, O> out;
  const double g = gamma<F>(K + 1);
  for (std::size_t i = 0; i < N; ++i)
    for (std::size_t o = 0; o < O; ++o) {
      double moved = 0, size = abs_of(double(b.v[o]));
      for (std::size_t k = 0; k < K; ++k) {
        const double wk = abs_of(double(w.v[o * K + k]));
        moved += wk * ex.v[i * K + k];
        size += (abs_of(double(x.v[i * K + k])) + ex.v[i * K + k]) * wk;
      }
      out.v[i * O + o] = 1.01 * (moved + g * size);
    }
  return out;
}

/// @brief the errors of an activation of x computed in F, x carrying errors ex
template <class F, class T, std::size_t N, std::size_t C>
[[nodiscard]] constexpr matrix<double, N, C> activation_error(const matrix<T, N, C>& x,
                                                              const matrix<double, N, C>& ex, activation a) {
  if (a == activation::relu) return ex;
  matrix<double, N, C> out;
  for (std::size_t k = 0; k < N * C; ++k)
    out.v[k] = 1.01 * (1.13 * ex.v[k] + 4 * unit_roundoff<F>() * detail::abs_of(double(x.v[k])));
  return out;
}

/// @brief the errors of a + b computed in F
template <class F, class T, std::size_t N, std::size_t C>
[[nodiscard]] constexpr matrix<double, N, C> sum_error(const matrix<T, N, C>& sum,
                                                       const matrix<double, N, C>& ea,
                                                       const matrix<double, N, C>& eb) {
  matrix<double, N, C> out;
  for (std::size_t k = 0; k < N * C; ++k)
    out.v[k] = ea.v[k] + eb.v[k] + unit_roundoff<F>() * detail::abs_of(double(sum.v[k]));
  return out;
}

/// @brief the errors of LayerNorm computed in F (the computed steps r), its input x carrying errors ex
template <class F, class T, std::size_t N, std::size_t D>
[[nodiscard]] constexpr matrix<double, N, D> layer_norm_error(const matrix<T, N, D>& x,
                                                              const matrix<double, N, D>& ex,
                                                              const layer_norm_result<T, N, D>& r,
                                                              const layer_norm_parameters<T, D>& p) {
  using detail::abs_of;
  const double u = unit_roundoff<F>();
  matrix<double, N, D> out;
  for (std::size_t i = 0; i < N; ++i) {
    const double s = double(r.inv_std.v[i]), var = double(r.variance.v[i]);
    // the mean: its rounding and the incoming errors' mean
    double size = 0, moved = 0;
    for (std::size_t j = 0; j < D; ++j) {
      size += abs_of(double(x.v[i * D + j]));
      moved += ex.v[i * D + j];
    }
    const double e_mean = gamma<F>(D + 1) * size / double(D) + moved / double(D);
    // the centred values c_j and the variance
    double e_var = gamma<F>(D + 2) * var;
    double ec[D]{};
    for (std::size_t j = 0; j < D; ++j) {
      const double c = abs_of(double(x.v[i * D + j]) - double(r.mean.v[i]));
      ec[j] = ex.v[i * D + j] + e_mean + u * c;
      e_var += 2.0 * c * ec[j] / double(D);
    }
    const double sigma2 = 1.0 / (s * s);                // var + eps, from the computed 1/sigma
    const double rel_s = 0.5 * e_var / sigma2 + 3 * u;  // sqrt, + eps, 1/
    for (std::size_t j = 0; j < D; ++j) {
      const double n = abs_of(double(r.normalized.v[i * D + j]));
      const double w = abs_of(double(p.weight.v[j]));
      const double e_n = ec[j] * s + n * (rel_s + u);
      const double y = abs_of(double(r.output.v[i * D + j]));
      out.v[i * D + j] = 1.01 * (w * e_n + u * n * w + u * y);
    }
  }
  return out;
}

/// @brief the errors of the layer's self-attention before the output projection (the
/// concatenated heads), computed in F, its input carrying errors ex
template <class F, class T, std::size_t N, std::size_t D, std::size_t H, std::size_t Fd>
[[nodiscard]] constexpr matrix<double, N, D> self_attention_error(
    const encoder_layer_result<T, N, D, H, Fd>& r, const encoder_layer_parameters<T, D, H, Fd>& p,
    const matrix<double, N, D>& ex) {
  using detail::abs_of;
  constexpr std::size_t dh = D / H;
  const double u = unit_roundoff<F>();
  // q, k, v: one linear of 3d outputs, (T, 3d)
  const auto e = linear_error<F>(r.attention_input, ex, p.in_proj_weight, p.in_proj_bias);
  const auto eq_of = [&](std::size_t i, std::size_t c) { return e.v[i * 3 * D + c]; };
  const auto ek_of = [&](std::size_t i, std::size_t c) { return e.v[i * 3 * D + D + c]; };
  const auto ev_of = [&](std::size_t i, std::size_t c) { return e.v[i * 3 * D + 2 * D + c]; };
  const auto& a = r.attention;
  const double root = qkv::sqrt(double(dh));
  matrix<double, N, D> out;
  for (std::size_t h = 0; h < H; ++h)
    for (std::size_t i = 0; i < N; ++i) {
      // the errors of this row's scores over its allowed keys, and the scores' range
      double es[N]{};
      double hi = 0, lo = 0;
      std::size_t allowed = 0;
      for (std::size_t j = 0; j < N; ++j) {
        if (!r.allowed.v[i * N + j]) continue;
        double moved = 0, size = 0;
        for (std::size_t m = 0; m < dh; ++m) {
          const std::size_t c = h * dh + m;
          const double q = abs_of(double(a.queries.v[i * D + c])) / root;  // the scaled query
          const double eq = eq_of(i, c) / root + 2 * u * q;                // its error: / sqrt(dh), rounded
          const double k = abs_of(double(a.keys.v[j * D + c]));
          moved += q * ek_of(j, c) + eq * k + eq * ek_of(j, c);
          size += q * k;
        }
        es[j] = moved + gamma<F>(dh) * size;
        const double s = double(a.scores(h, i, j));
        if (allowed == 0 || s > hi) hi = s;
        if (allowed == 0 || s < lo) lo = s;
        ++allowed;
      }
      if (allowed == 0) continue;  // weights exactly 0 in both: context 0, no error
      const double rounding = (2 * (2 + (hi - lo)) + double(allowed)) * u;
      double mean_es = 0;  // sum_k w_ik e_s(ik)
      for (std::size_t j = 0; j < N; ++j) mean_es += double(a.weights(h, i, j)) * es[j];
      for (std::size_t m = 0; m < dh; ++m) {
        const std::size_t c = h * dh + m;
        double err = 0, size = 0;
        for (std::size_t j = 0; j < N; ++j) {
          if (!r.allowed.v[i * N + j]) continue;
          const double w = double(a.weights(h, i, j));
          const double dw = 1.01 * w * (es[j] + mean_es + rounding);
          const double v = abs_of(double(a.values.v[j * D + c]));
          err += dw * (v + ev_of(j, c)) + w * ev_of(j, c);
          size += w * v;
        }
        out.v[i * D + c] = 1.01 * (err + gamma<F>(allowed) * size);
      }
    }
  return out;
}

/// @brief the errors of each step of one encoder layer
template <std::size_t N, std::size_t D>
struct encoder_layer_errors {
  matrix<double, N, D> attention_output, hidden, feed_forward_output, output;
};

/// @brief bounds on |computed - exact| of one layer's steps when computed in F (the trace r,
/// the parameters p exact as given), its input x carrying errors ex (0 for an exact input)
template <class F, class T, std::size_t N, std::size_t D, std::size_t H, std::size_t Fd>
[[nodiscard]] constexpr encoder_layer_errors<N, D> encoder_layer_error(
    const encoder_layer_result<T, N, D, H, Fd>& r, const encoder_layer_parameters<T, D, H, Fd>& p,
    const encoder_options<T>& o, const matrix<double, N, D>& ex = {}) {
  encoder_layer_errors<N, D> e;
  const auto ea_in = o.norm_first ? layer_norm_error<F>(r.input, ex, r.norm1, p.norm1) : ex;
  const auto econcat = self_attention_error<F>(r, p, ea_in);
  e.attention_output = linear_error<F>(r.attention.concat, econcat, p.out_proj_weight, p.out_proj_bias);
  const auto efirst = sum_error<F>(r.first_sum, ex, e.attention_output);
  e.hidden = o.norm_first ? efirst : layer_norm_error<F>(r.first_sum, efirst, r.norm1, p.norm1);
  const auto ef_in = o.norm_first ? layer_norm_error<F>(r.hidden, e.hidden, r.norm2, p.norm2) : e.hidden;
  const auto ehid = linear_error<F>(r.feed_forward_input, ef_in, p.linear1_weight, p.linear1_bias);
  const auto eact = activation_error<F>(r.feed_forward.hidden, ehid, o.act);
  e.feed_forward_output = linear_error<F>(r.feed_forward.activated, eact, p.linear2_weight, p.linear2_bias);
  const auto esecond = sum_error<F>(r.second_sum, e.hidden, e.feed_forward_output);
  e.output = o.norm_first ? esecond : layer_norm_error<F>(r.second_sum, esecond, r.norm2, p.norm2);
  return e;
}

/// @brief the same for every layer of a stack: each layer's input carries the previous one's errors
template <class F, class T, std::size_t N, std::size_t D, std::size_t H, std::size_t Fd, std::size_t L>
[[nodiscard]] constexpr matrix<double, N, D> encoder_error(const encoder_result<T, N, D, H, Fd, L>& r,
                                                           const encoder_parameters<T, D, H, Fd, L>& p,
                                                           const encoder_options<T>& o,
                                                           const matrix<double, N, D>& ex = {}) {
  matrix<double, N, D> e = ex;
  for (std::size_t l = 0; l < L; ++l) e = encoder_layer_error<F>(r.layers[l], p.layers[l], o, e).output;
  return e;
}

}  // namespace qkv::bounds
