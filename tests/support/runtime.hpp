// runtime.hpp (tests/support/): what the runtime tests share: random matrices, a plain reference
// attention in double with its error bounds, and element-wise checks that report the worst.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <qkv/core/matrix.hpp>
#include <qkv/runtime/runtime.hpp>

namespace qkv::testing {

using runtime::dynamic_matrix;

/// a rows x cols matrix of normal(0, sigma) numbers, from a fixed seed
template <class T>
dynamic_matrix<T> random_matrix(std::size_t rows, std::size_t cols, unsigned seed, double sigma = 1) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> dist(0, sigma);
  dynamic_matrix<T> m(rows, cols);
  for (std::size_t k = 0; k < m.size(); ++k) m.data()[k] = static_cast<T>(dist(gen));
  return m;
}

/// the same shape and the same bits, element by element: what "bit for bit" means in these tests
/// (a NaN equals only a NaN with its payload; +0 and -0 differ)
template <class T>
bool same_bits(const dynamic_matrix<T>& a, const dynamic_matrix<T>& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         (a.size() == 0 || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

/// the same for two vectors (a model's parameters, a trace)
template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

/// the same for two constexpr matrices of one shape
template <class T, std::size_t R, std::size_t C>
bool same_bits(const qkv::matrix<T, R, C>& a, const qkv::matrix<T, R, C>& b) {
  return std::memcmp(a.v, b.v, sizeof(a.v)) == 0;
}

/// u, the unit roundoff of F: 2^-24 for float, 2^-53 for double
template <class F>
constexpr double unit = std::numeric_limits<F>::epsilon() / 2;

/// gamma(n) = n u / (1 - n u) (Higham, Accuracy and Stability, 3.1)
template <class F>
double gamma_n(std::size_t n) {
  return double(n) * unit<F> / (1 - double(n) * unit<F>);
}

/// every |actual - expected| <= bound elementwise; reports the worst element (llm.c style)
template <class A>
void expect_within(const dynamic_matrix<A>& actual, const dynamic_matrix<double>& expected,
                   const dynamic_matrix<double>& bound, const std::string& what) {
  REQUIRE(actual.rows() == expected.rows());
  REQUIRE(actual.cols() == expected.cols());
  double worst = 0, worst_bound = 0, worst_ratio = 0;
  std::size_t bad = 0;
  for (std::size_t k = 0; k < actual.size(); ++k) {
    const double d = std::abs(double(actual.data()[k]) - expected.data()[k]);
    if (!(d <= bound.data()[k])) ++bad;
    const double ratio = bound.data()[k] > 0 ? d / bound.data()[k] : (d > 0 ? 1e300 : 0);
    if (ratio > worst_ratio || d > worst) {
      worst_ratio = std::max(worst_ratio, ratio);
      if (d > worst) {
        worst = d;
        worst_bound = bound.data()[k];
      }
    }
  }
  INFO(what << ": max difference " << worst << " (its bound " << worst_bound << "), worst difference/bound "
            << worst_ratio << ", first values " << double(actual.data()[0]) << " vs " << expected.data()[0]);
  CHECK(bad == 0);
}

/// @brief single-head attention in double with plain loops, and for every output a bound on
/// the error of the same computation done in F by any summation order, with fma or without
/// (standard model, Higham 3.1; the softmax bound as in core/bounds.hpp with exp within 2 ulp).
/// q (T, d), k (S, d), v (S, dv) are taken as exact; dq, dk, dv bound their own errors.
struct reference_attention {
  dynamic_matrix<double> scores, weights, out;                    // exact-ish (double)
  dynamic_matrix<double> scores_bound, weights_bound, out_bound;  // bounds for a run in F

  template <class F>
  static reference_attention compute(const dynamic_matrix<double>& q, const dynamic_matrix<double>& dq,
                                     const dynamic_matrix<double>& k, const dynamic_matrix<double>& dk,
                                     const dynamic_matrix<double>& v, const dynamic_matrix<double>& dv,
                                     double scale, bool causal, const runtime::mask_matrix* allowed,
                                     std::size_t extra_rounding_steps = 0) {
    const std::size_t T = q.rows(), S = k.rows(), d = q.cols(), D = v.cols();
    const double u = unit<F>;
    reference_attention r;
    r.scores = dynamic_matrix<double>(T, S);
    r.weights = dynamic_matrix<double>(T, S);
    r.out = dynamic_matrix<double>(T, D);
    r.scores_bound = dynamic_matrix<double>(T, S);
    r.weights_bound = dynamic_matrix<double>(T, S);
    r.out_bound = dynamic_matrix<double>(T, D);
    for (std::size_t i = 0; i < T; ++i) {
      // raw scores and their error: gamma(d) sum |q||k| + propagated dq |k| + |q| dk + dq dk
      std::vector<double> s(S), ds(S);
      std::vector<bool> ok(S);
      double m = -std::numeric_limits<double>::infinity(), lo = std::numeric_limits<double>::infinity();
      bool any = false;
      for (std::size_t j = 0; j < S; ++j) {
        double acc = 0, mag = 0, prop = 0;
        for (std::size_t c = 0; c < d; ++c) {
          acc += q(i, c) * k(j, c);
          mag += (std::abs(q(i, c)) + dq(i, c)) * (std::abs(k(j, c)) + dk(j, c));
          prop += dq(i, c) * std::abs(k(j, c)) + std::abs(q(i, c)) * dk(j, c) + dq(i, c) * dk(j, c);
        }
        r.scores(i, j) = acc;
        r.scores_bound(i, j) = gamma_n<F>(d) * mag + prop;
        ok[j] = (!causal || j <= i) && (!allowed || (*allowed)(i, j));
        s[j] = acc * scale;
        // the scaling: the scale itself may be 1/sqrt(d) rounded twice (sqrt, 1/x), then the
        // multiply rounds once: 3u relative
        ds[j] = std::abs(scale) * r.scores_bound(i, j) + 3 * u * std::abs(s[j]);
        if (ok[j]) {
          any = true;
          m = std::max(m, s[j]);
          lo = std::min(lo, s[j]);
        }
      }
      if (!any) continue;  // every key masked: weights 0 and output 0, exactly, bounds 0
      double sum = 0, worst_ds = 0;
      std::size_t n = 0;
      for (std::size_t j = 0; j < S; ++j)
        if (ok[j]) {
          sum += std::exp(s[j] - m);
          worst_ds = std::max(worst_ds, ds[j]);
          ++n;
        }
      // core/bounds.hpp's softmax bound with exp within 2 ulp (4u) instead of 1 ulp (2u), plus
      // the extra rescaling steps of the streaming path (each an exp and a multiply, 5u)
      const double rel =
          1.01 * (2 * worst_ds + (2 * (4 + (m - lo)) + double(n) + 5.0 * double(extra_rounding_steps)) * u);
      for (std::size_t j = 0; j < S; ++j) {
        r.weights(i, j) = ok[j] ? std::exp(s[j] - m) / sum : 0.0;
        r.weights_bound(i, j) = r.weights(i, j) * rel;
      }
      for (std::size_t c = 0; c < D; ++c) {
        double acc = 0, mag = 0, prop = 0;
        for (std::size_t j = 0; j < S; ++j) {
          acc += r.weights(i, j) * v(j, c);
          mag += (r.weights(i, j) + r.weights_bound(i, j)) * (std::abs(v(j, c)) + dv(j, c));
          prop += r.weights_bound(i, j) * std::abs(v(j, c)) + r.weights(i, j) * dv(j, c) +
                  r.weights_bound(i, j) * dv(j, c);
        }
        r.out(i, c) = acc;
        // streaming divides by l at the end instead of per weight: one more rounding, 2u |out|
        r.out_bound(i, c) = gamma_n<F>(S + 2) * mag + prop;
      }
    }
    return r;
  }
};

/// y = x Wᵀ + b in double, and its error bound for a run in F (x, W, b exact)
inline void reference_linear(const dynamic_matrix<double>& x, const dynamic_matrix<double>& w,
                             const std::vector<double>& b, double u_gamma_per_term, double u,
                             dynamic_matrix<double>& y, dynamic_matrix<double>& dy) {
  y = dynamic_matrix<double>(x.rows(), w.rows());
  dy = dynamic_matrix<double>(x.rows(), w.rows());
  const std::size_t K = x.cols();
  for (std::size_t i = 0; i < x.rows(); ++i)
    for (std::size_t j = 0; j < w.rows(); ++j) {
      double acc = 0, mag = 0;
      for (std::size_t k = 0; k < K; ++k) {
        acc += x(i, k) * w(j, k);
        mag += std::abs(x(i, k) * w(j, k));
      }
      const double bias = b.empty() ? 0.0 : b[j];
      y(i, j) = acc + bias;
      // the sum of K products (gamma(K)), then the bias addition (one more rounding)
      dy(i, j) = u_gamma_per_term * mag + u * (std::abs(acc) + std::abs(bias)) * 2;
    }
}

template <class T>
dynamic_matrix<double> to_double(const dynamic_matrix<T>& m) {
  dynamic_matrix<double> out(m.rows(), m.cols());
  for (std::size_t k = 0; k < m.size(); ++k) out.data()[k] = double(m.data()[k]);
  return out;
}

/// a constexpr matrix (computed by the compiler) as a run-time double matrix: exact, every float
/// is a double
template <class T, std::size_t R, std::size_t C>
dynamic_matrix<double> to_double(const qkv::matrix<T, R, C>& m) {
  return to_double(runtime::to_dynamic(m));
}

/// 2 b: two results each within b of the exact value are within 2 b of each other
inline dynamic_matrix<double> twice(dynamic_matrix<double> b) {
  for (std::size_t k = 0; k < b.size(); ++k) b.data()[k] *= 2;
  return b;
}

}  // namespace qkv::testing
