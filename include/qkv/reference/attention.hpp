// attention.hpp: the attention steps at run time in Boost.Multiprecision, the truth for the float paths.
//
//   Q = X Wq, K = X Wk, V = X Wv   exact   (cpp_rational: the float inputs' exact values, no rounding)
//   scores = Q Kᵀ                  exact
//   scaled = scores / sqrt(d_k)    real    (cpp_bin_float_50: sqrt to 50 digits)
//   weights = softmax of each row  real    (exp of cpp_bin_float_50, 50 digits)
//   context = weights V            real
//
// The projections and scores reuse core's generic steps (qkv::project, qkv::scores,
// qkv::context work over any number type); only the softmax and the scaling are Boost's.
// The three weight layouts of core/attention.hpp (qkv::in_out, out_in, columns) apply.
// What remains between these and the truth is below 1e-45 relative: a softmax in 50 digits
// whose inputs are exact.
#pragma once

#include <cstddef>

#include <boost/multiprecision/cpp_bin_float.hpp>

#include <qkv/core/attention.hpp>
#include <qkv/core/matrix.hpp>
#include <qkv/reference/multiprecision.hpp>

namespace qkv::reference {

/// e^x to 50 digits (Boost's exp for cpp_bin_float_50)
[[nodiscard]] inline real exp(const real& x) { return mp::exp(x); }

/// sqrt(x) to 50 digits
[[nodiscard]] inline real sqrt(const real& x) { return mp::sqrt(x); }

/// @brief softmax of each row, (R, C) -> (R, C): e^(s_j - max) / sum_k e^(s_k - max).
/// The maximum is subtracted as in core; in 50 digits it changes nothing but the range of exp.
template <std::size_t R, std::size_t C>
[[nodiscard]] matrix<real, R, C> softmax_rows(const matrix<real, R, C>& s) {
  matrix<real, R, C> out;
  for (std::size_t i = 0; i < R; ++i) {
    real hi = s(i, 0);
    for (std::size_t j = 1; j < C; ++j)
      if (s(i, j) > hi) hi = s(i, j);
    real sum = 0;
    for (std::size_t j = 0; j < C; ++j) {
      out(i, j) = exp(s(i, j) - hi);
      sum += out(i, j);
    }
    for (std::size_t j = 0; j < C; ++j) out(i, j) /= sum;
  }
  return out;
}

/// softmax of exact scores: each converted to 50 digits first
template <std::size_t R, std::size_t C>
[[nodiscard]] matrix<real, R, C> softmax_rows(const matrix<exact, R, C>& s) {
  return softmax_rows(to_real(s));
}

/// @brief how the reference scales the scores, exactly: by the true sqrt(d_k) (to 50 digits),
/// not by a float's rounding of it. A float path that divides by float(sqrt(d_k)) carries that
/// rounding as part of its error.
struct scaling {
  enum class kind { none, divide_by_sqrt_dk, divide_by };
  kind how = kind::divide_by_sqrt_dk;
  real divisor = 1;

  [[nodiscard]] static scaling none() { return {kind::none, real(1)}; }
  [[nodiscard]] static scaling divide_by_sqrt_dk() { return {kind::divide_by_sqrt_dk, real(1)}; }
  [[nodiscard]] static scaling divide_by(const real& d) { return {kind::divide_by, d}; }
};

/// @brief every intermediate: the linear steps exact, the rest in 50 digits. T queries, S keys.
template <std::size_t Tq, std::size_t S, std::size_t Dk, std::size_t Dv>
struct attention_result {
  matrix<exact, Tq, Dk> queries;
  matrix<exact, S, Dk> keys;
  matrix<exact, S, Dv> values;
  matrix<exact, Tq, S> scores;        // q·k, exact
  matrix<real, Tq, S> scaled_scores;  // scores / divisor
  matrix<real, Tq, S> weights;        // softmax of each row
  matrix<real, Tq, Dv> context;       // weights V
};

/// scaled scores: (T, S) exact -> real
template <std::size_t Tq, std::size_t S>
[[nodiscard]] matrix<real, Tq, S> scale(const matrix<exact, Tq, S>& s, const scaling& how, std::size_t d_k) {
  matrix<real, Tq, S> out = to_real(s);
  if (how.how == scaling::kind::none) return out;
  const real d = how.how == scaling::kind::divide_by_sqrt_dk ? sqrt(real(d_k)) : how.divisor;
  for (std::size_t k = 0; k < Tq * S; ++k) out.v[k] /= d;
  return out;
}

/// @brief attention from exact projections: scores, scaling, softmax, context
template <std::size_t Tq, std::size_t S, std::size_t Dk, std::size_t Dv>
[[nodiscard]] attention_result<Tq, S, Dk, Dv> attend_projected(const matrix<exact, Tq, Dk>& q,
                                                               const matrix<exact, S, Dk>& k,
                                                               const matrix<exact, S, Dv>& v,
                                                               const scaling& how) {
  attention_result<Tq, S, Dk, Dv> r;
  r.queries = q;
  r.keys = k;
  r.values = v;
  r.scores = qkv::scores(q, k);                     // (T, S), exact
  r.scaled_scores = scale(r.scores, how, Dk);       // (T, S)
  r.weights = softmax_rows(r.scaled_scores);        // (T, S), rows sum to 1
  r.context = qkv::context(r.weights, to_real(v));  // (T, d_v)
  return r;
}

/// @brief the reference self-attention of x with the weights wq, wk, wv in the layout L
/// (qkv::in_out, qkv::out_in or qkv::columns), from inputs of any type (float, double,
/// integers, qkv::exact::rational), all taken at their exact values.
template <qkv::weight_layout_tag L, class T, std::size_t XR, std::size_t XC, std::size_t QR, std::size_t QC,
          std::size_t KR, std::size_t KC, std::size_t VR, std::size_t VC>
[[nodiscard]] auto self_attention(const matrix<T, XR, XC>& x, const matrix<T, QR, QC>& wq,
                                  const matrix<T, KR, KC>& wk, const matrix<T, VR, VC>& wv, L layout,
                                  const scaling& how = scaling::divide_by_sqrt_dk()) {
  const auto ex = exact_matrix(x);
  const auto q = qkv::project(ex, exact_matrix(wq), layout);  // (T, d_k)
  const auto k = qkv::project(ex, exact_matrix(wk), layout);  // (T, d_k)
  const auto v = qkv::project(ex, exact_matrix(wv), layout);  // (T, d_v)
  return attend_projected(q, k, v, how);
}

}  // namespace qkv::reference
