// chapter2_bounds.hpp: the rounding bound of one attention head computed in F (float or double),
// for examples 10 and 11's comparisons with PyTorch's float64 results (scripts/fixtures/torch_chapter2.py).
//
// Both sides compute softmax(q kᵀ / sqrt(d_k), masked) v from the same float32 inputs
// (converted exactly), u = 2^-24 (float) or 2^-53 (double). The standard model (core/bounds.hpp, Higham §3.1) bounds each computed
// value's distance to the EXACT value of those inputs, whatever the order of the sums:
//   - projections q = x Wᵀ (K = d products): gamma_K |x| |W|ᵀ
//   - scores q·k (K = d_k): bounds::product_error with the projections' errors
//   - scaled = scores / sqrt(d_k): the divisor is sqrt(d_k) correctly rounded (within u of
//     itself) and the division rounds once: dscores / divisor + 2u |scaled|
//   - weights: over the keys a row attends to (a masked key has weight exactly 0 on both sides,
//     e^-inf = 0), bounds::softmax_rows_error's formula: 1.01 w_j (2 max ds + (2 (2 + range) + n) u),
//     the 2 being exp's 1 ulp (2u); an exp within E ulp (the runtime's vexp: E = 2) gives 2E there
//   - H heads (multihead_output_error): each head as above, the heads side by side, then the
//     output projection concat Woᵀ (K = d_v products, Wo exact) and the bias (one rounding)
//   - context = weights v (K = S): bounds::product_error with the weights' and values' errors
// So qkv's result and PyTorch's are each within that bound of the exact value, and within twice
// the bound of each other.
#pragma once

#include <cstddef>

#include <qkv/core/attention.hpp>
#include <qkv/core/bounds.hpp>
#include <qkv/core/math.hpp>
#include <qkv/core/matrix.hpp>
#include <qkv/core/multihead.hpp>
#include <qkv/core/softmax.hpp>

namespace qkv::examples::chapter2 {

/// the error bound of a projection x Wᵀ computed in F from exact x (N, D) and W (Dout, D)
template <class F, std::size_t N, std::size_t D, std::size_t Dout>
constexpr qkv::matrix<double, N, Dout> projection_error(const qkv::matrix<F, N, D>& x, const qkv::matrix<F, Dout, D>& w) {
  return qkv::bounds::product_error<F>(qkv::matrix_cast<double>(x), qkv::transposed(qkv::matrix_cast<double>(w)));
}

/// the error bound of one head's context (Tq, Dv), from its computed intermediates `a` and its
/// inputs' bounds dq (Tq, Dk), dk (S, Dk), dv (S, Dv); the divisor sqrt(d_k) rounded to F
template <class F, std::size_t Tq, std::size_t S, std::size_t Dk, std::size_t Dv>
constexpr qkv::matrix<double, Tq, Dv> context_error(const qkv::attention_result<F, Tq, S, Dk, Dv>& r,
                                                    const qkv::matrix<double, Tq, Dk>& dq,
                                                    const qkv::matrix<double, S, Dk>& dk,
                                                    const qkv::matrix<double, S, Dv>& dv,
                                                    double exp_ulps = 1) {
  constexpr double u = qkv::bounds::unit_roundoff<F>();
  struct {
    qkv::matrix<double, Tq, Dk> queries;
    qkv::matrix<double, S, Dk> keys;
    qkv::matrix<double, S, Dv> values;
    qkv::matrix<double, Tq, S> scaled_scores, weights;
  } a{qkv::matrix_cast<double>(r.queries), qkv::matrix_cast<double>(r.keys), qkv::matrix_cast<double>(r.values),
      qkv::matrix_cast<double>(r.scaled_scores), qkv::matrix_cast<double>(r.weights)};
  const auto dscores = qkv::bounds::product_error<F>(a.queries, dq, qkv::transposed(a.keys), qkv::transposed(dk));
  const double divisor = double(qkv::sqrt(F(Dk)));
  qkv::matrix<double, Tq, S> dw{};
  for (std::size_t i = 0; i < Tq; ++i) {
    double worst = 0, hi = 0, lo = 0;
    std::size_t n = 0;
    for (std::size_t j = 0; j < S; ++j) {
      const double s = a.scaled_scores(i, j);
      if (qkv::detail::is_minus_infinity(s)) continue;  // masked: weight exactly 0 on both sides
      const double ds = dscores(i, j) / divisor + 2 * u * (s < 0 ? -s : s);
      worst = ds > worst ? ds : worst;
      hi = n == 0 || s > hi ? s : hi;
      lo = n == 0 || s < lo ? s : lo;
      ++n;
    }
    const double rounding = (2 * (2 * exp_ulps + (hi - lo)) + double(n)) * u;
    for (std::size_t j = 0; j < S; ++j)
      if (!qkv::detail::is_minus_infinity(a.scaled_scores(i, j))) dw(i, j) = 1.01 * a.weights(i, j) * (2 * worst + rounding);
  }
  return qkv::bounds::product_error<F>(a.weights, dw, a.values, dv);
}

/// head h of a multi-head result as one head's attention_result: its columns of q, k, v and its
/// scores, weights and context; (T, Dq), (S, Dq), (S, Dv) -> (T, Dq/H), (S, Dq/H), (S, Dv/H)
template <class F, std::size_t H, std::size_t Tq, std::size_t S, std::size_t Dq, std::size_t Dv>
constexpr qkv::attention_result<F, Tq, S, Dq / H, Dv / H> head_of(const qkv::multihead_result<F, H, Tq, S, Dq, Dv>& r,
                                                                  std::size_t h) {
  qkv::attention_result<F, Tq, S, Dq / H, Dv / H> a;
  a.queries = qkv::block<Tq, Dq / H>(r.queries, 0, h * (Dq / H));
  a.keys = qkv::block<S, Dq / H>(r.keys, 0, h * (Dq / H));
  a.values = qkv::block<S, Dv / H>(r.values, 0, h * (Dv / H));
  a.scores = r.scores[h];
  a.scaled_scores = r.scaled_scores[h];
  a.weights = r.weights[h];
  a.context = r.context[h];
  return a;
}

/// the error bound of multi-head attention's output concat Woᵀ + bo (T, Dout) computed in F, from
/// the computed result r and output `out`, the projections' bounds dq (T, Dq), dk (S, Dq), dv
/// (S, Dv) and an exact Wo (Dout, Dv): each head's context_error (its columns of dq, dk, dv), the
/// heads' bounds side by side (the concat is a copy), product_error through concat Woᵀ (K = d_v),
/// and the bias's addition, one rounding: |fl(y) - y| <= u |fl(y)| / (1 - u) <= 1.01 u |out|
/// (an over-estimate without a bias). exp_ulps: as context_error.
template <class F, std::size_t H, std::size_t Tq, std::size_t S, std::size_t Dq, std::size_t Dv, std::size_t Dout>
constexpr qkv::matrix<double, Tq, Dout> multihead_output_error(const qkv::multihead_result<F, H, Tq, S, Dq, Dv>& r,
                                                               const qkv::matrix<double, Tq, Dq>& dq,
                                                               const qkv::matrix<double, S, Dq>& dk,
                                                               const qkv::matrix<double, S, Dv>& dv,
                                                               const qkv::matrix<F, Dout, Dv>& wo,
                                                               const qkv::matrix<F, Tq, Dout>& out, double exp_ulps = 1) {
  constexpr std::size_t dh = Dq / H, vh = Dv / H;
  qkv::matrix<double, Tq, Dv> dconcat{};
  for (std::size_t h = 0; h < H; ++h) {
    const auto e = context_error(head_of(r, h), qkv::block<Tq, dh>(dq, 0, h * dh), qkv::block<S, dh>(dk, 0, h * dh),
                                 qkv::block<S, vh>(dv, 0, h * vh), exp_ulps);
    for (std::size_t i = 0; i < Tq; ++i)
      for (std::size_t c = 0; c < vh; ++c) dconcat(i, h * vh + c) = e(i, c);
  }
  const auto wot = qkv::transposed(qkv::matrix_cast<double>(wo));
  auto e = qkv::bounds::product_error<F>(qkv::matrix_cast<double>(r.concat), dconcat, wot,
                                         qkv::matrix<double, Dv, Dout>{});
  constexpr double u = qkv::bounds::unit_roundoff<F>();
  for (std::size_t k = 0; k < Tq * Dout; ++k) e.v[k] += 1.01 * u * (out.v[k] < 0 ? -double(out.v[k]) : double(out.v[k]));
  return e;
}

}  // namespace qkv::examples::chapter2
