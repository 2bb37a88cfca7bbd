// bounds.hpp: rounding-error bounds, so that a tolerance is derived instead of guessed.
//
// The standard model of floating point (Higham, "Accuracy and Stability of Numerical
// Algorithms", 2nd ed., §2.2 and §3.1): every operation rounds once, fl(a op b) = (a op b)(1 + d)
// with |d| <= u, the unit roundoff (2^-24 for float, 2^-53 for double). A sum of n products
// computed in any order then satisfies
//   |fl(sum a_k b_k) - sum a_k b_k| <= gamma(n) * sum |a_k| |b_k|,   gamma(n) = n u / (1 - n u).
// When the inputs themselves carry errors (|da|, |db| elementwise), the product of the perturbed
// inputs adds |da| |b| + |a| |db| + |da| |db|. These functions compute those bounds as matrices,
// in the caller's number type; evaluate them in double for float computations.
#pragma once

#include <cstddef>
#include <limits>

#include "matrix.hpp"

namespace qkv::bounds {

/// u: half the distance from 1 to the next number of F (2^-24 for float, 2^-53 for double)
template <class F>
[[nodiscard]] constexpr double unit_roundoff() {
  return std::numeric_limits<F>::epsilon() / 2.0;
}

/// gamma(n) = n u / (1 - n u) for the number type F, as a double
template <class F>
[[nodiscard]] constexpr double gamma(std::size_t n) {
  const double nu = double(n) * unit_roundoff<F>();
  return nu / (1.0 - nu);
}

/// |a| element by element
template <class T, std::size_t R, std::size_t C>
[[nodiscard]] constexpr matrix<T, R, C> abs(const matrix<T, R, C>& a) {
  return map(a, [](const T& x) { return x < T(0) ? T(-x) : x; });
}

/// @brief a bound on |fl(a b) - exact(a b)| for a product computed in F from exact a and b:
/// gamma(K) |a| |b|, (R, K) x (K, C) -> (R, C)
template <class F, std::size_t R, std::size_t K, std::size_t C>
[[nodiscard]] constexpr matrix<double, R, C> product_error(const matrix<double, R, K>& a,
                                                           const matrix<double, K, C>& b) {
  return scaled(gamma<F>(K), matrix_product(abs(a), abs(b)));
}

/// @brief the same when a and b are themselves off by at most da and db (elementwise):
/// gamma(K) (|a| + da)(|b| + db) + da |b| + |a| db + da db
template <class F, std::size_t R, std::size_t K, std::size_t C>
[[nodiscard]] constexpr matrix<double, R, C> product_error(const matrix<double, R, K>& a,
                                                           const matrix<double, R, K>& da,
                                                           const matrix<double, K, C>& b,
                                                           const matrix<double, K, C>& db) {
  const auto A = abs(a) + da;
  const auto B = abs(b) + db;
  return scaled(gamma<F>(K), matrix_product(A, B)) + matrix_product(da, abs(b)) + matrix_product(abs(a), db) +
         matrix_product(da, db);
}

/// @brief a bound on the error of softmax_rows(s) computed in F when the scores s are off by at
/// most ds (elementwise), given the scores s and the computed weights w.
/// Perturbing the scores by ds moves weight j by at most w_j (|ds_j| + sum_k w_k |ds_k|)
/// <= 2 w_j max_k ds_k, to first order. The rounding: s_j - max rounds by at most u |s_j - max|,
/// which exp turns into the same relative error, and exp itself is within 1 ulp (2u): each e_j
/// is within (2 + range) u relative, range = max_k s_k - min_k s_k. The row sum (n - 1
/// additions) and the division add n u: relative error 2 (2 + range) u + n u, counted twice
/// for e_j and the sum. 1% on top covers the second-order terms for ds < 1e-3.
template <class F, std::size_t R, std::size_t C>
[[nodiscard]] constexpr matrix<double, R, C> softmax_rows_error(const matrix<double, R, C>& s,
                                                                const matrix<double, R, C>& w,
                                                                const matrix<double, R, C>& ds) {
  matrix<double, R, C> out;
  for (std::size_t i = 0; i < R; ++i) {
    double worst = 0, hi = s(i, 0), lo = s(i, 0);
    for (std::size_t j = 0; j < C; ++j) {
      worst = ds(i, j) > worst ? ds(i, j) : worst;
      hi = s(i, j) > hi ? s(i, j) : hi;
      lo = s(i, j) < lo ? s(i, j) : lo;
    }
    const double rounding = (2 * (2 + (hi - lo)) + double(C)) * unit_roundoff<F>();
    for (std::size_t j = 0; j < C; ++j) out(i, j) = 1.01 * w(i, j) * (2 * worst + rounding);
  }
  return out;
}

}  // namespace qkv::bounds
