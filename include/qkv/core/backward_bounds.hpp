// backward_bounds.hpp: rounding-error bounds for attention's backward, derived, cancellation included.
//
// The standard model as in bounds.hpp: every operation rounds once, |d| <= u. Given the true
// forward values (weights P, values V, keys K, queries Q, upstream dO) and elementwise bounds
// on the errors of the computed ones (e_P, e_V, e_K, e_Q, e_dO), attention_backward's steps in
// F are within (all elementwise, |.| taken of the true values):
//   dP = dO Vᵀ            e_dP = bounds::product_error<F>(dO, e_dO, Vᵀ, e_Vᵀ)
//   D_i = sum_j dP_ij P_ij  e_D_i = gamma_S sum_j (|dP| + e_dP)(|P| + e_P)
//                                   + sum_j (e_dP |P| + |dP| e_P + e_dP e_P)
//   t = dP - D            e_t = e_dP + e_D + u (|t| + e_dP + e_D)
//   dS = P t              e_dS = e_P (|t| + e_t) + |P| e_t + u (|P| + e_P)(|t| + e_t)
//   d_scores = s dS       e = s e_dS + r u s (|dS| + e_dS)   (r = 2 when dS is divided by a
//                         rounded divisor, sqrt(d_k) in F: its rounding and the division's; 0 for none)
//   dQ = d_scores K       product_error<F>(d_scores, e, K, e_K)
//   dK = d_scoresᵀ Q      product_error<F>(d_scoresᵀ, eᵀ, Q, e_Q)
//   dV = Pᵀ dO            product_error<F>(Pᵀ, e_Pᵀ, dO, e_dO)
//
// Why e_t is written with |dP| and |D|, not with |dP - D|: dP and D are each computed with an
// absolute error proportional to their own size (a sum of |dP| |P| terms), and their difference
// keeps those errors while it can be much smaller. In tutorial 000 with output.sum(), dP is
// about 10 and D about 10 too, their difference 0.02: e_P of a few u relative, times |dP| = 10,
// becomes an error of hundreds of u relative to dS (example 15 measures ~500 ulp in PyTorch's
// float32 dQ and proves that a bound scaling with |dS| alone does not hold).
#pragma once

#include <cstddef>

#include "bounds.hpp"
#include "matrix.hpp"

namespace qkv::bounds {

/// @brief elementwise bounds on the error of each gradient of attention_backward computed in F
template <std::size_t Tq, std::size_t S, std::size_t Dk, std::size_t Dv>
struct attention_backward_errors {
  matrix<double, Tq, S> d_weights;
  matrix<double, Tq, 1> d_row;  // D = rowsum(dP ∘ P)
  matrix<double, Tq, S> d_scaled_scores;
  matrix<double, Tq, S> d_scores;
  matrix<double, Tq, Dk> d_queries;
  matrix<double, S, Dk> d_keys;
  matrix<double, S, Dv> d_values;
};

/// @brief the bounds above. p, v, k, q, d_context: the true values (in double); e_*: bounds on
/// the errors of the values the backward is given; scale: the factor s of d_scores = s dS
/// (1 / sqrt(d_k), or 1); scale_roundings: r above (0, 1 for a multiplication by an exact
/// factor, 2 for a division by a rounded divisor). A weight that is 0 with e_P = 0 (masked)
/// gets bound 0, as its gradient is exactly 0.
namespace detail {
template <class F, std::size_t Tq, std::size_t S, std::size_t Dk, std::size_t Dv>
constexpr attention_backward_errors<Tq, S, Dk, Dv> backward_error(
    const matrix<double, Tq, S>& p, const matrix<double, Tq, S>& e_p, const matrix<double, S, Dv>& v,
    const matrix<double, S, Dv>& e_v, const matrix<double, S, Dk>& k, const matrix<double, S, Dk>& e_k,
    const matrix<double, Tq, Dk>& q, const matrix<double, Tq, Dk>& e_q,
    const matrix<double, Tq, Dv>& d_context, const matrix<double, Tq, Dv>& e_d_context, double scale,
    double scale_roundings, const matrix<double, Tq, 1>* e_d_row_given) {
  const double u = unit_roundoff<F>();
  attention_backward_errors<Tq, S, Dk, Dv> e;
  const auto dp = matrix_product(d_context, transposed(v));
  e.d_weights = product_error<F>(d_context, e_d_context, transposed(v), transposed(e_v));
  matrix<double, Tq, S> ds{}, d_scores{};
  for (std::size_t i = 0; i < Tq; ++i) {
    double d = 0, big = 0, first = 0;
    for (std::size_t j = 0; j < S; ++j) {
      const double P = p(i, j), eP = e_p(i, j), dP = dp(i, j), edP = e.d_weights(i, j);
      const double adP = dP < 0 ? -dP : dP;
      d += dP * P;
      big += (adP + edP) * (P + eP);
      first += edP * P + adP * eP + edP * eP;
    }
    e.d_row(i, 0) = e_d_row_given ? (*e_d_row_given)(i, 0) : gamma<F>(S) * big + first;
    for (std::size_t j = 0; j < S; ++j) {
      const double P = p(i, j), eP = e_p(i, j), edP = e.d_weights(i, j), eD = e.d_row(i, 0);
      const double t = dp(i, j) - d, at = t < 0 ? -t : t;
      const double et = edP + eD + u * (at + edP + eD);
      ds(i, j) = P * t;
      e.d_scaled_scores(i, j) =
          (P == 0 && eP == 0) ? 0.0 : eP * (at + et) + P * et + u * (P + eP) * (at + et);
      d_scores(i, j) = scale * ds(i, j);
      const double ads = ds(i, j) < 0 ? -ds(i, j) : ds(i, j);
      e.d_scores(i, j) =
          scale * e.d_scaled_scores(i, j) + scale_roundings * u * scale * (ads + e.d_scaled_scores(i, j));
    }
  }
  e.d_queries = product_error<F>(d_scores, e.d_scores, k, e_k);
  e.d_keys = product_error<F>(transposed(d_scores), transposed(e.d_scores), q, e_q);
  e.d_values = product_error<F>(transposed(p), transposed(e_p), d_context, e_d_context);
  return e;
}
}  // namespace detail

template <class F, std::size_t Tq, std::size_t S, std::size_t Dk, std::size_t Dv>
[[nodiscard]] constexpr attention_backward_errors<Tq, S, Dk, Dv> attention_backward_error(
    const matrix<double, Tq, S>& p, const matrix<double, Tq, S>& e_p, const matrix<double, S, Dv>& v,
    const matrix<double, S, Dv>& e_v, const matrix<double, S, Dk>& k, const matrix<double, S, Dk>& e_k,
    const matrix<double, Tq, Dk>& q, const matrix<double, Tq, Dk>& e_q,
    const matrix<double, Tq, Dv>& d_context, const matrix<double, Tq, Dv>& e_d_context, double scale,
    double scale_roundings) {
  return detail::backward_error<F>(p, e_p, v, e_v, k, e_k, q, e_q, d_context, e_d_context, scale,
                                   scale_roundings, static_cast<const matrix<double, Tq, 1>*>(nullptr));
}

/// @brief the same for flash attention's backward (flash_backward.hpp), whose D is
/// rowsum(dO ∘ O) from its output O (true value o, error e_o) instead of rowsum(dP ∘ P):
///   e_D_i = gamma_dv sum_c (|dO| + e_dO)(|O| + e_O) + sum_c (e_dO |O| + |dO| e_O + e_dO e_O)
/// and e_p bounds its recomputed weights e^(s - m) / l. Its other steps are the same products.
template <class F, std::size_t Tq, std::size_t S, std::size_t Dk, std::size_t Dv>
[[nodiscard]] constexpr attention_backward_errors<Tq, S, Dk, Dv> flash_backward_error(
    const matrix<double, Tq, S>& p, const matrix<double, Tq, S>& e_p, const matrix<double, S, Dv>& v,
    const matrix<double, S, Dv>& e_v, const matrix<double, S, Dk>& k, const matrix<double, S, Dk>& e_k,
    const matrix<double, Tq, Dk>& q, const matrix<double, Tq, Dk>& e_q,
    const matrix<double, Tq, Dv>& d_context, const matrix<double, Tq, Dv>& e_d_context,
    const matrix<double, Tq, Dv>& o, const matrix<double, Tq, Dv>& e_o, double scale,
    double scale_roundings) {
  matrix<double, Tq, 1> e_d_row{};
  for (std::size_t i = 0; i < Tq; ++i) {
    double big = 0, first = 0;
    for (std::size_t c = 0; c < Dv; ++c) {
      const double a = d_context(i, c) < 0 ? -d_context(i, c) : d_context(i, c);
      const double b = o(i, c) < 0 ? -o(i, c) : o(i, c);
      big += (a + e_d_context(i, c)) * (b + e_o(i, c));
      first += e_d_context(i, c) * b + a * e_o(i, c) + e_d_context(i, c) * e_o(i, c);
    }
    e_d_row(i, 0) = gamma<F>(Dv) * big + first;
  }
  return detail::backward_error<F>(p, e_p, v, e_v, k, e_k, q, e_q, d_context, e_d_context, scale,
                                   scale_roundings, &e_d_row);
}

/// @brief a bound on a projection's d_w = aᵀ b, a (T, n) with error e_a and b (T, m) with e_b:
/// product_error over the T tokens
template <class F, std::size_t N, std::size_t A, std::size_t B>
[[nodiscard]] constexpr matrix<double, A, B> transposed_product_error(const matrix<double, N, A>& a,
                                                                      const matrix<double, N, A>& e_a,
                                                                      const matrix<double, N, B>& b,
                                                                      const matrix<double, N, B>& e_b) {
  return product_error<F>(transposed(a), transposed(e_a), b, e_b);
}

/// @brief a bound on fl(fl(a + b) + c) given the true a, b, c and their error bounds:
/// e_a + e_b + e_c + u (|a + b| + e_a + e_b) + u (|a + b + c| + e_a + e_b + e_c) <= with the
/// magnitudes bounded by |a| + |b| + |c| (d_x: the three projections' d_x added, q + k + v)
template <class F, std::size_t R, std::size_t C>
[[nodiscard]] constexpr matrix<double, R, C> sum3_error(
    const matrix<double, R, C>& a, const matrix<double, R, C>& e_a, const matrix<double, R, C>& b,
    const matrix<double, R, C>& e_b, const matrix<double, R, C>& c, const matrix<double, R, C>& e_c) {
  const double u = unit_roundoff<F>();
  const auto e = e_a + e_b + e_c;
  return e + scaled(2 * u, abs(a) + abs(b) + abs(c) + e);
}

}  // namespace qkv::bounds
