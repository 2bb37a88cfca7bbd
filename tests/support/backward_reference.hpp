// backward_reference.hpp: the attention backward materialised in long double, with a
// first-order bound on the error of any run in F (qkv's streaming one, or PyTorch's
// materialised autograd), for backward_test.cpp and backward_torch_test.cpp.
//
// The bound (standard model, Higham 3.1, u = unit roundoff of F, gamma(n) = n u / (1 - n u)),
// for one query row i, with input errors eq, ek, ev, eo (0 for exact inputs; the layer's test
// gives the projections' errors) propagated to first order:
//   score s_j = scale q.k_j + b_j:   es_j = scale (gamma(d + 1) sum_c |q k| + sum_c (eq |k| + |q| ek))
//                                           (d + 1: PyTorch's MultiheadAttention rounds q * scale first)
//                                           + 4u |s_j| (the scale 1/sqrt(d) rounded twice, the
//                                           multiply) + 2u |b_j| (the bias's and ALiBi's adds)
//   P_j = e^(s_j - m) / l:  relative error rho = 2 max_j (es_j + u |s_j - m|) + gamma(S + 3 blocks
//                                           + 12) (l's exponents, the online rescales: three roundings
//                                           per key block of 128, the sum's chain, vexp's 2 ulp, the
//                                           division; libm's exp in PyTorch is within 1 ulp)
//   O_c = sum_j P_j v_jc:            eO = (rho + gamma(S + 2)) sum_j P |v| + sum_j P ev
//   dP_j = sum_c dO v:               edP = gamma(dv) sum_c |dO v| + sum_c (eo |v| + |dO| ev)
//   D = rowsum(dO ∘ O) (qkv) or rowsum(dP ∘ P) (PyTorch's softmax backward): the larger of
//       gamma(dv) sum |dO O| + sum (|dO| eO + eo |O|) and gamma(S) sum |dP P| + sum (|dP| P rho + P edP)
//   dS'_j = scale P_j (dP_j - D):    edS = scale P ((rho + 4u)(|dP_j| + |D|) + edP + eD)
//       (|dP| + |D|, not |dP - D|: the subtraction cancels, and P's relative error multiplies
//       both terms; issue 29's measured 500 ulp of PyTorch's float32 dQ come from here)
//   dQ_c = sum_j dS' k:   gamma(S + 4) sum |dS' k| + sum (edS |k| + |dS'| ek)   (+4: dQ's parts)
//   dK_jc = sum_i dS' q:  gamma(T G) sum |dS' q| + sum (edS |q| + |dS'| eq)     (G query heads)
//   dV_jc = sum_i P dO:   (rho + gamma(T G)) sum P |dO| + sum P eo
// Second-order terms (products of two errors, each ~u) are below u^2 and left out: with the
// inputs of these tests (|x| of a few units, S <= 700) they are 1e-6 of the bound or less.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include <qkv/runtime/backward.hpp>
#include <qkv/runtime/dynamic_matrix.hpp>

namespace qkv::testing {

/// a long double matrix, row-major
struct lmat {
  std::size_t rows = 0, cols = 0;
  std::vector<long double> a;
  lmat() = default;
  lmat(std::size_t r, std::size_t c) : rows(r), cols(c), a(r * c, 0) {}
  long double& operator()(std::size_t i, std::size_t j) { return a[i * cols + j]; }
  long double operator()(std::size_t i, std::size_t j) const { return a[i * cols + j]; }
  template <class F>
  static lmat of(const runtime::dynamic_matrix<F>& m) {
    lmat r(m.rows(), m.cols());
    for (std::size_t i = 0; i < m.rows(); ++i)
      for (std::size_t j = 0; j < m.cols(); ++j) r(i, j) = m(i, j);
    return r;
  }
  [[nodiscard]] runtime::dynamic_matrix<double> to_double() const {
    runtime::dynamic_matrix<double> m(rows, cols);
    for (std::size_t k = 0; k < a.size(); ++k) m.data()[k] = double(a[k]);
    return m;
  }
};

struct reference_backward {
  using ld = long double;
  lmat out, dq, dk, dv;                          // the truth (long double)
  lmat out_bound, dq_bound, dk_bound, dv_bound;  // bounds for a run in F

  /// u of F
  template <class F>
  static constexpr double unit = std::numeric_limits<F>::epsilon() / 2;

  /// q (T, d), k (S, d), v (S, dv), d_out (T, dv) and their error bounds (empty lmat = exact);
  /// allowed(i, j), bias(i, j) (added to the scaled score; -inf = masked); group: the query
  /// heads sharing these keys (dK's and dV's chains run over group T rows)
  template <class F, class Allowed, class Bias>
  static reference_backward compute_l(const lmat& q, const lmat& k, const lmat& v, const lmat& d_out,
                                      const lmat& eq_in, const lmat& ek_in, const lmat& ev_in,
                                      const lmat& eo_in, double scale, Allowed&& allowed, Bias&& bias,
                                      std::size_t group = 1) {
    const std::size_t T = q.rows, S = k.rows, d = q.cols, dvn = v.cols;
    const double u = unit<F>;
    const auto gamma = [&](double n) { return ld(n * u / (1 - n * u)); };
    const auto err = [](const lmat& e, std::size_t i, std::size_t j) -> ld {
      return e.a.empty() ? 0 : e(i, j);
    };
    reference_backward r;
    r.out = lmat(T, dvn);
    r.out_bound = lmat(T, dvn);
    r.dq = lmat(T, d);
    r.dq_bound = lmat(T, d);
    r.dk = lmat(S, d);
    r.dk_bound = lmat(S, d);
    r.dv = lmat(S, dvn);
    r.dv_bound = lmat(S, dvn);
    const std::size_t blocks = (S + 127) / 128;
    for (std::size_t i = 0; i < T; ++i) {
      std::vector<ld> s(S), es(S), p(S, 0);
      std::vector<bool> ok(S);
      ld m = -INFINITY;
      for (std::size_t j = 0; j < S; ++j) {
        ld acc = 0, mag = 0, prop = 0;
        for (std::size_t c = 0; c < d; ++c) {
          acc += q(i, c) * k(j, c);
          mag += std::abs(q(i, c) * k(j, c));
          prop += err(eq_in, i, c) * std::abs(k(j, c)) + std::abs(q(i, c)) * err(ek_in, j, c);
        }
        const ld b = bias(i, j);
        ok[j] = allowed(i, j) && !std::isinf(b);
        s[j] = acc * ld(scale) + (ok[j] ? b : 0);
        es[j] = ld(scale) * (gamma(double(d + 1)) * mag + prop) + ld(4 * u) * std::abs(s[j]) +
                ld(2 * u) * std::abs(b);
        if (ok[j]) m = std::max(m, s[j]);
      }
      if (m == -INFINITY) continue;  // every key masked: all zero, exactly
      ld l = 0, e_max = 0;
      for (std::size_t j = 0; j < S; ++j)
        if (ok[j]) {
          l += std::exp(s[j] - m);
          e_max = std::max(e_max, es[j] + ld(u) * std::abs(s[j] - m));
        }
      const ld rho = 2 * e_max + gamma(double(S + 3 * blocks + 12));
      for (std::size_t j = 0; j < S; ++j)
        if (ok[j]) p[j] = std::exp(s[j] - m) / l;
      std::vector<ld> o(dvn, 0), ob(dvn, 0), dp(S, 0), dpb(S, 0);
      for (std::size_t c = 0; c < dvn; ++c) {
        ld acc = 0, mag = 0, prop = 0;
        for (std::size_t j = 0; j < S; ++j)
          if (ok[j]) {
            acc += p[j] * v(j, c);
            mag += p[j] * std::abs(v(j, c));
            prop += p[j] * err(ev_in, j, c);
          }
        o[c] = acc;
        ob[c] = (rho + gamma(double(S + 2))) * mag + prop;
        r.out(i, c) = acc;
        r.out_bound(i, c) = ob[c];
      }
      ld D = 0, Db_o = 0;
      for (std::size_t c = 0; c < dvn; ++c) {
        D += d_out(i, c) * o[c];
        Db_o += gamma(double(dvn)) * std::abs(d_out(i, c) * o[c]) + std::abs(d_out(i, c)) * ob[c] +
                err(eo_in, i, c) * std::abs(o[c]);
      }
      ld Db_p = 0;
      for (std::size_t j = 0; j < S; ++j) {
        if (!ok[j]) continue;
        ld acc = 0, mag = 0, prop = 0;
        for (std::size_t c = 0; c < dvn; ++c) {
          acc += d_out(i, c) * v(j, c);
          mag += std::abs(d_out(i, c) * v(j, c));
          prop += err(eo_in, i, c) * std::abs(v(j, c)) + std::abs(d_out(i, c)) * err(ev_in, j, c);
        }
        dp[j] = acc;
        dpb[j] = gamma(double(dvn)) * mag + prop;
        Db_p += gamma(double(S)) * std::abs(dp[j] * p[j]) + std::abs(dp[j]) * p[j] * rho + p[j] * dpb[j];
      }
      const ld Db = std::max(Db_o, Db_p);
      std::vector<ld> ds(S, 0), dsb(S, 0);
      for (std::size_t j = 0; j < S; ++j) {
        if (!ok[j]) continue;
        ds[j] = ld(scale) * p[j] * (dp[j] - D);
        dsb[j] = ld(scale) * p[j] * ((rho + ld(4 * u)) * (std::abs(dp[j]) + std::abs(D)) + dpb[j] + Db);
      }
      for (std::size_t c = 0; c < d; ++c) {
        ld acc = 0, b = 0;
        for (std::size_t j = 0; j < S; ++j) {
          acc += ds[j] * k(j, c);
          b += dsb[j] * std::abs(k(j, c)) + std::abs(ds[j]) * err(ek_in, j, c) +
               gamma(double(S + 4)) * std::abs(ds[j] * k(j, c));
        }
        r.dq(i, c) = acc;
        r.dq_bound(i, c) = b;
      }
      for (std::size_t j = 0; j < S; ++j) {
        if (!ok[j]) continue;
        for (std::size_t c = 0; c < d; ++c) {
          r.dk(j, c) += ds[j] * q(i, c);
          r.dk_bound(j, c) += dsb[j] * std::abs(q(i, c)) + std::abs(ds[j]) * err(eq_in, i, c) +
                              gamma(double(T * group)) * std::abs(ds[j] * q(i, c));
        }
        for (std::size_t c = 0; c < dvn; ++c) {
          r.dv(j, c) += p[j] * d_out(i, c);
          r.dv_bound(j, c) +=
              (rho + gamma(double(T * group))) * p[j] * std::abs(d_out(i, c)) + p[j] * err(eo_in, i, c);
        }
      }
    }
    return r;
  }

  /// exact inputs in F
  template <class F, class Allowed, class Bias>
  static reference_backward compute(const runtime::dynamic_matrix<F>& q, const runtime::dynamic_matrix<F>& k,
                                    const runtime::dynamic_matrix<F>& v,
                                    const runtime::dynamic_matrix<F>& d_out, double scale, Allowed&& allowed,
                                    Bias&& bias) {
    return compute_l<F>(lmat::of(q), lmat::of(k), lmat::of(v), lmat::of(d_out), {}, {}, {}, {}, scale,
                        allowed, bias);
  }
};

/// one head's forward (keeping each row's max and sum) and backward on the run-time path, as the
/// tests run them: out (T, dv), the gradients, and the mask resolved for T x S
template <class F>
struct forward_backward {
  runtime::dynamic_matrix<F> out;
  runtime::attention_statistics<F> stats;
  runtime::attention_gradients<F> g;
  runtime::attention_mask resolved;
  std::size_t keys = 0;

  forward_backward(const runtime::dynamic_matrix<F>& q, const runtime::dynamic_matrix<F>& k,
                   const runtime::dynamic_matrix<F>& v, const runtime::dynamic_matrix<F>& d_out, F scale,
                   const runtime::attention_mask& mask)
      : out(q.rows(), v.cols()), resolved(mask.resolved(q.rows(), k.rows())), keys(k.rows()) {
    runtime::attention_forward_for_backward<F>(q.view(), k.view(), v.view(), out.view(), scale, mask, stats);
    runtime::attention_backward<F>(q.view(), k.view(), v.view(), out.view(), d_out.view(), scale, mask, stats,
                                   g);
  }

  /// whether query i sees key j under the resolved mask (what reference_backward::compute takes)
  bool allowed(std::size_t i, std::size_t j) const {
    return runtime::detail::masked_score(resolved, i, j, keys, F(0)) != -std::numeric_limits<F>::infinity();
  }
};

}  // namespace qkv::testing
