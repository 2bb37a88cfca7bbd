// page_truth.hpp: the 50-digit truth of a learner's page's computed matrices, and each float32 or
// float64 value's error against it in ulps.
//
//   qkv::io::page p("...");
//   example::page(p);           // it calls p.with_truth(): its op-less matrices are exact inputs
//   qkv::io::add_truth(p);      // every computed float32/float64 cell: truth and error in ulps
//
// The truth of a matrix follows the page's own account of how it was computed (page_how): from
// the exact values of the inputs (a float is an exact dyadic rational), each step is redone in
// Boost.Multiprecision's cpp_bin_float_50 (50 significant digits): sums of products, the scale
// as the page states it, softmax with a 50-digit exp, a residual sum, relu, LayerNorm with a
// 50-digit square root, a transpose. What separates that from the exact value is below 1e-45
// relative, far below an ulp of double (1.1e-16). A matrix without a page_how that is marked
// derived() (a rounding, a sine, a concatenation) is not an input: nothing computed from it gets
// a truth. Summarised pages (their operands are not all embedded) get none. The cost: a page of
// the tutorials holds at most a few thousand numbers; the longest sum has 64 terms.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <boost/multiprecision/cpp_bin_float.hpp>

#include "page.hpp"

namespace qkv::io {

namespace page_truth_detail {

using real = boost::multiprecision::cpp_bin_float_50;
using values = std::vector<real>;

struct solver {
  std::vector<page::matrix_entry>& ms;
  std::map<std::string, std::size_t> index;
  std::map<std::string, std::optional<values>> memo;

  explicit solver(std::vector<page::matrix_entry>& m) : ms(m) {
    for (std::size_t k = 0; k < ms.size(); ++k) index[ms[k].id] = k;
  }

  const page::matrix_entry* entry(const std::string& id) const {
    const auto it = index.find(id);
    return it == index.end() ? nullptr : &ms[it->second];
  }

  /// the truth of matrix `id`, row-major, or nothing when its chain reaches a derived matrix
  const std::optional<values>& truth(const std::string& id) {
    if (const auto it = memo.find(id); it != memo.end()) return it->second;
    memo[id] = std::nullopt;  // a cycle in the page's how (a mistake) gives no truth
    const auto* m = entry(id);
    std::optional<values> out;
    if (m != nullptr) out = compute(*m);
    return memo[id] = std::move(out);
  }

  std::optional<values> compute(const page::matrix_entry& m) {
    const auto& h = m.how;
    const std::size_t R = m.rows, C = m.cols;
    if (h.op.empty()) {
      if (m.derived || m.dtype == "exact") return std::nullopt;  // exact: the doubles are rounded
      values v(R * C);
      for (std::size_t k = 0; k < R * C; ++k) v[k] = real(m.values[k]);  // a float or double, exactly
      return v;
    }
    const auto* A = entry(h.a);
    if (A == nullptr) return std::nullopt;
    const auto ta = truth(h.a);
    if (!ta) return std::nullopt;
    auto at = [&](const page::matrix_entry& e, const values& t, std::size_t i,
                  std::size_t j) -> std::optional<real> {
      if (i >= e.rows || j >= e.cols) return std::nullopt;
      return t[i * e.cols + j];
    };
    std::optional<values> tb, tbias;
    const page::matrix_entry *B = nullptr, *Bias = nullptr;
    if (!h.b.empty()) {
      B = entry(h.b);
      if (B == nullptr || !(tb = truth(h.b))) return std::nullopt;
    }
    if (!h.bias.empty()) {
      Bias = entry(h.bias);
      if (Bias == nullptr || !(tbias = truth(h.bias))) return std::nullopt;
    }
    values v(R * C);
    if (h.op == "dot" || h.op == "matmul" || h.op == "rowdot") {
      if (B == nullptr) return std::nullopt;
      for (std::size_t i = 0; i < R; ++i)
        for (std::size_t j = 0; j < C; ++j) {
          real s = 0;
          for (std::size_t k = 0; k < h.n; ++k) {
            const auto a = at(*A, *ta, i, h.ac + k);
            const auto b = h.op == "dot"      ? at(*B, *tb, j, h.bc + k)
                           : h.op == "rowdot" ? at(*B, *tb, i, h.bc + k)
                                              : at(*B, *tb, h.br + k, h.bc + j);
            if (!a || !b) return std::nullopt;
            s += *a * *b;
          }
          if (Bias != nullptr) {
            const auto b = at(*Bias, *tbias, 0, j);
            if (!b) return std::nullopt;
            s += *b;
          }
          v[i * C + j] = s;
        }
      return v;
    }
    if (h.op == "scale") {  // the scale as the page states it; -inf (masked) stays -inf
      for (std::size_t k = 0; k < R * C; ++k) {
        const auto a = at(*A, *ta, k / C, k % C);
        if (!a) return std::nullopt;
        v[k] = std::isinf(m.values[k]) && m.values[k] < 0 ? -std::numeric_limits<real>::infinity()
               : h.divisor != 0                           ? real(*a / real(h.divisor))
                                                          : real(h.scale) * *a;
        if (B != nullptr && !boost::multiprecision::isinf(v[k])) {  // the added terms (a bias, ALiBi)
          const auto b = at(*B, *tb, k / C, k % C);
          if (!b) return std::nullopt;
          v[k] += *b;
        }
      }
      return v;
    }
    if (h.op == "softmax" || h.op == "softmax_naive") {  // the same value exactly
      for (std::size_t i = 0; i < R; ++i) {
        real top = -std::numeric_limits<real>::infinity(), sum = 0;
        for (std::size_t j = 0; j < C; ++j) {
          const auto a = at(*A, *ta, i, j);
          if (!a) return std::nullopt;
          if (*a > top) top = *a;
        }
        for (std::size_t j = 0; j < C; ++j) {
          const real a = (*ta)[i * A->cols + j];
          v[i * C + j] =
              boost::multiprecision::isinf(a) ? real(0) : real(boost::multiprecision::exp(a - top));
          sum += v[i * C + j];
        }
        for (std::size_t j = 0; j < C; ++j)
          v[i * C + j] = sum > 0 ? real(v[i * C + j] / sum) : real(0);  // every key masked: 0
      }
      return v;
    }
    if (h.op == "softmax_all") {  // one softmax over every cell: the same value exactly
      if (A->rows != R || A->cols != C) return std::nullopt;
      real top = -std::numeric_limits<real>::infinity(), sum = 0;
      for (std::size_t k = 0; k < R * C; ++k)
        if ((*ta)[k] > top) top = (*ta)[k];
      for (std::size_t k = 0; k < R * C; ++k) {
        v[k] = boost::multiprecision::isinf((*ta)[k]) ? real(0)
                                                      : real(boost::multiprecision::exp((*ta)[k] - top));
        sum += v[k];
      }
      for (std::size_t k = 0; k < R * C; ++k) v[k] = sum > 0 ? real(v[k] / sum) : real(0);
      return v;
    }
    if (h.op == "softmax_backward") {  // P (dP - D), D the column `bias`; 0 where P is 0 (masked)
      if (B == nullptr || Bias == nullptr) return std::nullopt;
      for (std::size_t i = 0; i < R; ++i)
        for (std::size_t j = 0; j < C; ++j) {
          const auto p = at(*A, *ta, i, j), dp = at(*B, *tb, i, j), d = at(*Bias, *tbias, i, 0);
          if (!p || !dp || !d) return std::nullopt;
          v[i * C + j] = *p == 0 ? real(0) : real(*p * (*dp - *d));
        }
      return v;
    }
    if (h.op == "block") {  // A(row + i, col + j)
      for (std::size_t i = 0; i < R; ++i)
        for (std::size_t j = 0; j < C; ++j) {
          const auto a = at(*A, *ta, h.br + i, h.bc + j);
          if (!a) return std::nullopt;
          v[i * C + j] = *a;
        }
      return v;
    }
    if (h.op == "interleave" || h.op == "deinterleave") {  // a permutation of each row's columns
      if (A->rows != R || A->cols != C || C % 2 != 0) return std::nullopt;
      for (std::size_t i = 0; i < R; ++i)
        for (std::size_t j = 0; j < C; ++j) {
          const std::size_t from = h.op == "interleave" ? (j % 2 == 0 ? j / 2 : j / 2 + C / 2)
                                   : j < C / 2          ? 2 * j
                                                        : 2 * (j - C / 2) + 1;
          v[i * C + j] = (*ta)[i * C + from];
        }
      return v;
    }
    if (h.op == "hconcat") {  // A's columns, then B's
      if (B == nullptr) return std::nullopt;
      for (std::size_t i = 0; i < R; ++i)
        for (std::size_t j = 0; j < C; ++j) {
          const auto a = j < A->cols ? at(*A, *ta, i, j) : at(*B, *tb, i, j - A->cols);
          if (!a) return std::nullopt;
          v[i * C + j] = *a;
        }
      return v;
    }
    if (h.op == "add" || h.op == "relu" || h.op == "transpose") {
      for (std::size_t i = 0; i < R; ++i)
        for (std::size_t j = 0; j < C; ++j) {
          const auto a = h.op == "transpose" ? at(*A, *ta, j, i) : at(*A, *ta, i, j);
          if (!a) return std::nullopt;
          if (h.op == "add") {
            const auto b = B ? at(*B, *tb, i, j) : std::nullopt;
            if (!b) return std::nullopt;
            v[i * C + j] = *a + *b;
          } else {
            v[i * C + j] = h.op == "relu" && *a < 0 ? real(0) : *a;
          }
        }
      return v;
    }
    if (h.op == "layernorm") {  // (a - mean) / sqrt(var + eps) w + b, the biased variance
      for (std::size_t i = 0; i < R; ++i) {
        real mean = 0, var = 0;
        for (std::size_t j = 0; j < A->cols; ++j) mean += (*ta)[i * A->cols + j];
        mean /= A->cols;
        for (std::size_t j = 0; j < A->cols; ++j)
          var += ((*ta)[i * A->cols + j] - mean) * ((*ta)[i * A->cols + j] - mean);
        var /= A->cols;
        const real inv = 1 / boost::multiprecision::sqrt(var + real(h.scale));
        for (std::size_t j = 0; j < C; ++j) {
          const auto a = at(*A, *ta, i, j);
          const auto w = B ? at(*B, *tb, 0, j) : std::optional<real>(1);
          const auto b = Bias ? at(*Bias, *tbias, 0, j) : std::optional<real>(0);
          if (!a || !w || !b) return std::nullopt;
          v[i * C + j] = (*a - mean) * inv * *w + *b;
        }
      }
      return v;
    }
    return std::nullopt;
  }
};

/// (value - truth) / ulp(truth) in the type of `digits` significand bits (24 or 53)
inline double ulps(double value, const real& t, int digits, int min_exponent) {
  if (boost::multiprecision::isinf(t) || std::isinf(value))
    return value == t.convert_to<double>() ? 0.0 : NAN;
  const real err = real(value) - t;
  if (t == 0) return value == 0 ? 0.0 : NAN;
  int e = 0;
  boost::multiprecision::frexp(t, &e);             // |t| = f 2^e, f in [0.5, 1): ulp = 2^(e - digits)
  if (e - 1 < min_exponent) e = min_exponent + 1;  // subnormal: the ulp stops shrinking
  return real(boost::multiprecision::ldexp(err, digits - e)).convert_to<double>();
}

}  // namespace page_truth_detail

/// the 50-digit truth of every computed float32/float64 matrix of `p` and each value's error
/// against it in ulps (page::matrix_ref::truth), when the page asked for it (with_truth) and is
/// not summarised; matrices that already have a truth (an example's exact rationals) keep it
inline void add_truth(page& p) {
  using namespace page_truth_detail;
  if (!p.wants_truth() || p.summarised()) return;
  auto& ms = p.entries();
  solver s(ms);
  const bool texts = p.numbers() <= 4096;  // the truth's 20 digits per cell on small pages only
  for (auto& m : ms) {
    if (m.how.op.empty() || !m.truth_ulps.empty() || (m.dtype != "float32" && m.dtype != "float64")) continue;
    const auto t = s.truth(m.id);
    if (!t) continue;
    const bool f32 = m.dtype == "float32";
    std::vector<double> u;
    std::vector<std::string> txt;
    for (std::size_t k = 0; k < m.values.size(); ++k) {
      u.push_back(ulps(m.values[k], (*t)[k], f32 ? 24 : 53, f32 ? -126 : -1022));
      if (texts) txt.push_back((*t)[k].str(20));
    }
    m.truth_ulps = std::move(u);
    m.truth_text = std::move(txt);
    m.truth_name = "50 digits";
  }
}

}  // namespace qkv::io
