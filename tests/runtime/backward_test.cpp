// The run-time backward (runtime/backward.hpp) against a plain materialised backward in long
// double written here, with every mask of the forward, float and double; threads give the
// same bits; masked keys and rows get exact zeros; a non-finite d_context reaches exactly the
// entries it flows into. PyTorch 1.13 autograd parity: backward_torch_test.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <qkv/runtime/backward.hpp>

#include "runtime_test_support.hpp"

namespace rt = qkv::runtime;
using qkv::testing::random_matrix;
using rt::dynamic_matrix;

namespace {

using ld = long double;

/// the materialised backward in long double (u = 2^-64, 2^-11 of double's: its own rounding is
/// negligible against the bounds below), with the first-order error bound of a run in F.
/// mask: allowed(i, j) and bias(i, j) (added to the scaled score; -inf = masked).
struct reference_backward {
  dynamic_matrix<double> out, dq, dk, dv;              // the truth (rounded to double)
  dynamic_matrix<double> out_bound, dq_bound, dk_bound, dv_bound;  // bounds for a run in F

  template <class F, class Allowed, class Bias>
  static reference_backward compute(const dynamic_matrix<F>& qf, const dynamic_matrix<F>& kf,
                                    const dynamic_matrix<F>& vf, const dynamic_matrix<F>& dof, double scale,
                                    Allowed&& allowed, Bias&& bias) {
    const std::size_t T = qf.rows(), S = kf.rows(), d = qf.cols(), dvn = vf.cols();
    const double u = std::numeric_limits<F>::epsilon() / 2;
    const auto gamma = [&](double n) { return n * u / (1 - n * u); };
    reference_backward r;
    r.out = dynamic_matrix<double>(T, dvn);
    r.out_bound = dynamic_matrix<double>(T, dvn);
    r.dq = dynamic_matrix<double>(T, d);
    r.dq_bound = dynamic_matrix<double>(T, d);
    r.dk = dynamic_matrix<double>(S, d);
    r.dk_bound = dynamic_matrix<double>(S, d);
    r.dv = dynamic_matrix<double>(S, dvn);
    r.dv_bound = dynamic_matrix<double>(S, dvn);
    std::vector<ld> dk(S * d, 0), dkb(S * d, 0), dv(S * dvn, 0), dvb(S * dvn, 0);
    const std::size_t blocks = (S + 127) / 128;
    for (std::size_t i = 0; i < T; ++i) {
      std::vector<ld> s(S), es(S), p(S, 0);
      std::vector<bool> ok(S);
      ld m = -INFINITY;
      for (std::size_t j = 0; j < S; ++j) {
        ld acc = 0, mag = 0;
        for (std::size_t c = 0; c < d; ++c) {
          acc += ld(qf(i, c)) * ld(kf(j, c));
          mag += std::abs(ld(qf(i, c)) * ld(kf(j, c)));
        }
        const ld b = bias(i, j);
        ok[j] = allowed(i, j) && !std::isinf(b);
        s[j] = acc * ld(scale) + (ok[j] ? b : 0);
        // the score's error in F: the chain over d, the scale (rounded: 3u), the bias's add
        es[j] = ld(scale) * ld(gamma(double(d))) * mag + ld(4 * u) * std::abs(s[j]) + ld(2 * u) * std::abs(b);
        if (ok[j]) m = std::max(m, s[j]);
      }
      if (m == -INFINITY) continue;  // every key masked: all zero, exactly
      ld l = 0, e_max = 0;
      for (std::size_t j = 0; j < S; ++j)
        if (ok[j]) {
          l += std::exp(s[j] - m);
          e_max = std::max(e_max, es[j] + ld(u) * std::abs(s[j] - m));
        }
      // P's relative error: its own exponent's error, l's (every exponent's, the online
      // rescales: 3 roundings per key block, the sum's chain), vexp (2 ulp each), the division
      const ld rho = 2 * e_max + ld(gamma(double(S + 3 * blocks + 12)));
      for (std::size_t j = 0; j < S; ++j)
        if (ok[j]) p[j] = std::exp(s[j] - m) / l;
      std::vector<ld> o(dvn, 0), ob(dvn, 0), dp(S, 0), dpb(S, 0);
      for (std::size_t c = 0; c < dvn; ++c) {
        ld acc = 0, mag = 0;
        for (std::size_t j = 0; j < S; ++j)
          if (ok[j]) {
            acc += p[j] * ld(vf(j, c));
            mag += p[j] * std::abs(ld(vf(j, c)));
          }
        o[c] = acc;
        ob[c] = (rho + ld(gamma(double(S + 2)))) * mag;
        r.out(i, c) = double(acc);
        r.out_bound(i, c) = double(ob[c]);
      }
      // D = rowsum(dO ∘ O), its error: the chain over dv and O's errors
      ld D = 0, Db = 0;
      for (std::size_t c = 0; c < dvn; ++c) {
        D += ld(dof(i, c)) * o[c];
        Db += ld(gamma(double(dvn))) * std::abs(ld(dof(i, c)) * o[c]) + std::abs(ld(dof(i, c))) * ob[c];
      }
      for (std::size_t j = 0; j < S; ++j) {
        if (!ok[j]) continue;
        ld acc = 0, mag = 0;
        for (std::size_t c = 0; c < dvn; ++c) {
          acc += ld(dof(i, c)) * ld(vf(j, c));
          mag += std::abs(ld(dof(i, c)) * ld(vf(j, c)));
        }
        dp[j] = acc;
        dpb[j] = ld(gamma(double(dvn))) * mag;
      }
      // dS' = scale P (dP - D): the bound uses |dP| + |D|, not |dP - D| (the subtraction
      // cancels: P's relative error multiplies both terms), plus dP's and D's own errors, and
      // the three roundings of the step
      std::vector<ld> ds(S, 0), dsb(S, 0);
      for (std::size_t j = 0; j < S; ++j) {
        if (!ok[j]) continue;
        ds[j] = ld(scale) * p[j] * (dp[j] - D);
        dsb[j] = ld(scale) * p[j] * ((rho + ld(4 * u)) * (std::abs(dp[j]) + std::abs(D)) + dpb[j] + Db);
      }
      for (std::size_t c = 0; c < d; ++c) {
        ld acc = 0, b = 0;
        for (std::size_t j = 0; j < S; ++j) {
          acc += ds[j] * ld(kf(j, c));
          // the chain over S keys, plus up to 4 partial sums added (dq_parts)
          b += dsb[j] * std::abs(ld(kf(j, c))) + ld(gamma(double(S + 4))) * std::abs(ds[j] * ld(kf(j, c)));
        }
        r.dq(i, c) = double(acc);
        r.dq_bound(i, c) = double(b);
      }
      for (std::size_t j = 0; j < S; ++j) {
        if (!ok[j]) continue;
        for (std::size_t c = 0; c < d; ++c) {
          dk[j * d + c] += ds[j] * ld(qf(i, c));
          dkb[j * d + c] += dsb[j] * std::abs(ld(qf(i, c))) + ld(gamma(double(T))) * std::abs(ds[j] * ld(qf(i, c)));
        }
        for (std::size_t c = 0; c < dvn; ++c) {
          dv[j * dvn + c] += p[j] * ld(dof(i, c));
          dvb[j * dvn + c] += (rho + ld(gamma(double(T)))) * p[j] * std::abs(ld(dof(i, c)));
        }
      }
    }
    for (std::size_t j = 0; j < S; ++j) {
      for (std::size_t c = 0; c < d; ++c) {
        r.dk(j, c) = double(dk[j * d + c]);
        r.dk_bound(j, c) = double(dkb[j * d + c]);
      }
      for (std::size_t c = 0; c < dvn; ++c) {
        r.dv(j, c) = double(dv[j * dvn + c]);
        r.dv_bound(j, c) = double(dvb[j * dvn + c]);
      }
    }
    return r;
  }
};

/// the same bits
template <class T>
bool same_bits(const dynamic_matrix<T>& a, const dynamic_matrix<T>& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

/// one case: shapes, mask; forward + backward in F against the reference
template <class F>
void check_case(std::size_t T, std::size_t S, std::size_t d, std::size_t dv, rt::attention_mask mask,
                const dynamic_matrix<F>* bias, const std::string& what, unsigned seed = 1) {
  const auto q = random_matrix<F>(T, d, seed), k = random_matrix<F>(S, d, seed + 1),
             v = random_matrix<F>(S, dv, seed + 2), d_out = random_matrix<F>(T, dv, seed + 3);
  if (bias) mask.set_bias(rt::matrix_view<const F>(bias->view()));
  const F scale = rt::default_scale<F>(d);
  dynamic_matrix<F> out(T, dv);
  rt::attention_statistics<F> stats;
  rt::attention_forward_for_backward<F>(q.view(), k.view(), v.view(), out.view(), scale, mask, stats);
  rt::attention_gradients<F> g;
  rt::attention_backward<F>(q.view(), k.view(), v.view(), out.view(), d_out.view(), scale, mask, stats, g);
  const rt::attention_mask rm = mask.resolved(T, S);
  const auto allowed = [&](std::size_t i, std::size_t j) {
    return rt::detail::masked_score(rm, i, j, S, F(0)) != -std::numeric_limits<F>::infinity();
  };
  const auto bias_of = [&](std::size_t i, std::size_t j) -> ld {
    ld b = bias ? ld((*bias)(i, j)) : 0;
    if (rm.alibi_slope != 0)
      b += ld(F(rm.alibi_slope)) * ld(std::ptrdiff_t(j) - std::ptrdiff_t(i) - rm.offset);
    return b;
  };
  const auto ref = reference_backward::compute<F>(q, k, v, d_out, double(scale), allowed, bias_of);
  INFO(what);
  qkv::testing::expect_within(out, ref.out, ref.out_bound, what + ": out");
  qkv::testing::expect_within(g.d_values, ref.dv, ref.dv_bound, what + ": d_values");
  qkv::testing::expect_within(g.d_keys, ref.dk, ref.dk_bound, what + ": d_keys");
  qkv::testing::expect_within(g.d_queries, ref.dq, ref.dq_bound, what + ": d_queries");
}

}  // namespace

TEST_CASE_TEMPLATE("the streaming backward matches a materialised long double backward within derived bounds",
                   F, float, double) {
  check_case<F>(37, 53, 16, 24, {}, nullptr, "no mask, few keys");
  check_case<F>(300, 300, 64, 64, {}, nullptr, "no mask, 300 x 300 (3 key blocks, dQ in parts)");
  rt::attention_mask causal;
  causal.causal = true;
  check_case<F>(300, 300, 32, 48, causal, nullptr, "causal");
  check_case<F>(150, 260, 32, 32, causal, nullptr, "causal upper_left, T < S");
  causal.alignment = rt::causal_alignment::lower_right;
  check_case<F>(150, 260, 32, 32, causal, nullptr, "causal lower_right, T < S");
  check_case<F>(260, 150, 32, 32, causal, nullptr, "causal lower_right, T > S (first rows see nothing)");
  std::vector<unsigned char> padding(200, 0);
  for (std::size_t j = 150; j < 200; ++j) padding[j] = 1;
  padding[7] = 1;
  rt::attention_mask padded;
  padded.set_key_padding(padding);
  check_case<F>(90, 200, 32, 16, padded, nullptr, "key padding");
  rt::attention_mask window;
  window.causal = true;
  window.window = 40;
  check_case<F>(333, 333, 32, 32, window, nullptr, "causal sliding window of 40");
  rt::attention_mask alibi;
  alibi.causal = true;
  alibi.alibi_slope = 0.0625;
  check_case<F>(200, 200, 32, 32, alibi, nullptr, "ALiBi, causal");
  auto bias = random_matrix<F>(100, 180, 9);
  for (std::size_t i = 0; i < 100; ++i) bias(i, (i * 7) % 180) = -std::numeric_limits<F>::infinity();
  check_case<F>(100, 180, 32, 32, {}, &bias, "a float bias with -inf entries");
}

TEST_CASE("the backward gives the same bits on 1 and 2 threads (dQ in 4 parts, causal and not)") {
  for (const bool causal : {false, true}) {
    const std::size_t T = 700, S = 700, d = 64;
    const auto q = random_matrix<float>(T, d, 1), k = random_matrix<float>(S, d, 2), v = random_matrix<float>(S, d, 3),
               d_out = random_matrix<float>(T, d, 4);
    rt::attention_mask mask;
    mask.causal = causal;
    CHECK(rt::detail::dq_parts(1, 6, 1e9) == 4);
    const float scale = rt::default_scale<float>(d);
    rt::attention_gradients<float> g[2];
    for (const std::size_t threads : {1u, 2u}) {
      rt::thread_pool pool(threads);
      dynamic_matrix<float> out(T, d);
      rt::attention_statistics<float> stats;
      rt::attention_forward_for_backward<float>(q.view(), k.view(), v.view(), out.view(), scale, mask, stats, &pool);
      rt::attention_backward<float>(q.view(), k.view(), v.view(), out.view(), d_out.view(), scale, mask, stats,
                                    g[threads - 1], &pool);
    }
    CHECK(same_bits(g[0].d_queries, g[1].d_queries));
    CHECK(same_bits(g[0].d_keys, g[1].d_keys));
    CHECK(same_bits(g[0].d_values, g[1].d_values));
  }
}

TEST_CASE("masked keys and fully masked rows get gradient exactly 0") {
  const std::size_t T = 40, S = 50, d = 8;
  const auto q = random_matrix<double>(T, d, 1), k = random_matrix<double>(S, d, 2), v = random_matrix<double>(S, d, 3),
             d_out = random_matrix<double>(T, d, 4);
  std::vector<unsigned char> padding(S, 0);
  padding[3] = padding[49] = 1;
  rt::mask_matrix allowed(T, S);
  for (std::size_t i = 0; i < T; ++i)
    for (std::size_t j = 0; j < S; ++j) allowed(i, j) = i == 5 ? 0 : 1;  // row 5 sees nothing
  rt::attention_mask mask;
  mask.allowed = &allowed;
  mask.set_key_padding(padding);
  dynamic_matrix<double> out(T, d);
  rt::attention_statistics<double> stats;
  rt::attention_forward_for_backward<double>(q.view(), k.view(), v.view(), out.view(), 0.3, mask, stats);
  rt::attention_gradients<double> g;
  rt::attention_backward<double>(q.view(), k.view(), v.view(), out.view(), d_out.view(), 0.3, mask, stats, g);
  for (std::size_t c = 0; c < d; ++c) {
    CHECK(g.d_queries(5, c) == 0.0);
    for (const std::size_t j : {3u, 49u}) {
      CHECK(g.d_keys(j, c) == 0.0);
      CHECK(g.d_values(j, c) == 0.0);
    }
    CHECK(g.d_keys(4, c) != 0.0);
  }
}

TEST_CASE("a NaN or inf in d_context reaches exactly the gradients it flows into") {
  // causal, 20 x 20: row 6 sees keys 0..6. dO(6, 2) = NaN: dV(j, 2) NaN for j <= 6 only; dQ's
  // row 6 NaN; dK(j, .) NaN for j <= 6 (through dP(6, j) and D(6)); everything else as the run
  // without it (dV(j, 2) for j > 6 included), bit for bit. dO(9, 1) = +inf: dV(j, 1) = +inf
  // for j <= 9 (P(9, j) > 0 here, and finite dO elsewhere in column 1)
  const std::size_t T = 20, d = 4;
  const auto q = random_matrix<float>(T, d, 1), k = random_matrix<float>(T, d, 2), v = random_matrix<float>(T, d, 3);
  auto d_out = random_matrix<float>(T, d, 4);
  rt::attention_mask mask;
  mask.causal = true;
  dynamic_matrix<float> out(T, d);
  rt::attention_statistics<float> stats;
  rt::attention_forward_for_backward<float>(q.view(), k.view(), v.view(), out.view(), 0.5f, mask, stats);
  rt::attention_gradients<float> clean, g;
  rt::attention_backward<float>(q.view(), k.view(), v.view(), out.view(), d_out.view(), 0.5f, mask, stats, clean);
  d_out(6, 2) = std::numeric_limits<float>::quiet_NaN();
  d_out(9, 1) = std::numeric_limits<float>::infinity();
  rt::attention_backward<float>(q.view(), k.view(), v.view(), out.view(), d_out.view(), 0.5f, mask, stats, g);
  for (std::size_t j = 0; j < T; ++j)
    for (std::size_t c = 0; c < d; ++c) {
      CAPTURE(j);
      CAPTURE(c);
      if (c == 2 && j <= 6) CHECK(std::isnan(g.d_values(j, c)));
      else if (c == 1 && j <= 9) CHECK(g.d_values(j, c) == std::numeric_limits<float>::infinity());
      else CHECK(g.d_values(j, c) == clean.d_values(j, c));
      // dK(j, .) for j <= 6: row 6's NaN; for 7 <= j <= 9 row 9's infinities (dP(9, j) and
      // D(9) infinite: dS(9, j) = P (dP - D) is an infinity or NaN, as IEEE decides)
      if (j <= 6) CHECK(std::isnan(g.d_keys(j, c)));
      else if (j <= 9) CHECK(!std::isfinite(g.d_keys(j, c)));
      else CHECK(g.d_keys(j, c) == clean.d_keys(j, c));
      if (j == 6) CHECK(std::isnan(g.d_queries(j, c)));
      else if (j == 9) CHECK(!std::isfinite(g.d_queries(j, c)));
      else CHECK(g.d_queries(j, c) == clean.d_queries(j, c));
    }
}

TEST_CASE("the backward refuses shapes that do not fit, naming them") {
  const auto q = random_matrix<float>(4, 8, 1), k = random_matrix<float>(5, 8, 2), v = random_matrix<float>(5, 8, 3),
             d_out = random_matrix<float>(3, 8, 4);
  dynamic_matrix<float> out(4, 8);
  rt::attention_statistics<float> stats;
  rt::attention_forward_for_backward<float>(q.view(), k.view(), v.view(), out.view(), 0.5f, {}, stats);
  rt::attention_gradients<float> g;
  CHECK_THROWS_WITH_AS(rt::attention_backward<float>(q.view(), k.view(), v.view(), out.view(), d_out.view(), 0.5f, {},
                                                     stats, g),
                       "attention_backward: d_context is 3x8 but the output is 4x8 (one gradient per output element)",
                       rt::shape_error);
}
