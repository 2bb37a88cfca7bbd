// chapter2_bounds.hpp: the rounding bound of one attention head computed in F (float or double),
// for examples 10 and 11's comparisons with PyTorch's float64 results (scripts/torch_chapter2.py).
//
// Both sides compute softmax(q kᵀ / sqrt(d_k), masked) v from the same float32 inputs
// (converted exactly), u = 2^-24 (float) or 2^-53 (double). The standard model (core/bounds.hpp, Higham §3.1) bounds each computed
// value's distance to the EXACT value of those inputs, whatever the order of the sums:
//   - projections q = x Wᵀ (K = d products): gamma_K |x| |W|ᵀ
//   - scores q·k (K = d_k): bounds::product_error with the projections' errors
//   - scaled = scores / sqrt(d_k): the divisor is sqrt(d_k) correctly rounded (within u of
//     itself) and the division rounds once: dscores / divisor + 2u |scaled|
//   - weights: over the keys a row attends to (a masked key has weight exactly 0 on both sides,
//     e^-inf = 0), bounds::softmax_rows_error's formula: 1.01 w_j (2 max ds + (2 (2 + range) + n) u)
//   - context = weights v (K = S): bounds::product_error with the weights' and values' errors
// So qkv's result and PyTorch's are each within that bound of the exact value, and within twice
// the bound of each other.
#pragma once

#include <cstddef>

#include <qkv/core/attention.hpp>
#include <qkv/core/bounds.hpp>
#include <qkv/core/math.hpp>
#include <qkv/core/matrix.hpp>
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
                                                    const qkv::matrix<double, S, Dv>& dv) {
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
    const double rounding = (2 * (2 + (hi - lo)) + double(n)) * u;
    for (std::size_t j = 0; j < S; ++j)
      if (!qkv::detail::is_minus_infinity(a.scaled_scores(i, j))) dw(i, j) = 1.01 * a.weights(i, j) * (2 * worst + rounding);
  }
  return qkv::bounds::product_error<F>(a.weights, dw, a.values, dv);
}

}  // namespace qkv::examples::chapter2
