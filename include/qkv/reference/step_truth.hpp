// step_truth.hpp: the 50-digit truth of one step of a learner's page (core/flat_steps.hpp's
// step()), its error in ulps, and the truth as 20 digits of text.
//
//   real a[...], b[...], out[...];     // the operands' truths (an input's: its float, exactly)
//   qkv::reference::step_truth(qkv::flat::kind::dot, a, b, nullptr, sizes, 0.0, computed, out);
//   double u = qkv::reference::truth_ulps(computed[k], out[k], 24, -126);   // float32
//   std::string t = qkv::reference::truth_digits(out[k]);                   // "0.99004983374916805337"
//
// One step, as flat::step computes it but in Boost.Multiprecision's cpp_bin_float_50 (50
// significant digits): the sums of products with no rounding but the 50-digit one, the scale as the
// page states it (the scalar as a double, not rounded to float), softmax with a 50-digit exp,
// LayerNorm with a 50-digit square root. What separates that from the exact value is below 1e-45
// relative, far below an ulp of double (1.1e-16). The same function serves io/page_truth.hpp (the
// truth a page is written with) and the pages' truth module (wasm/qkv_truth.cpp, which recomputes
// it for a learner's inputs in the browser), so the two cannot disagree in their arithmetic.
//
// Nothing here allocates or throws but Boost's own arithmetic; sizes are the caller's (the page's
// steps were checked against their operands' shapes when the page was written:
// io/page_recompute.hpp's step_of).
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <string>

#include <boost/multiprecision/cpp_bin_float.hpp>

#include <qkv/core/flat_steps.hpp>

namespace qkv::reference {

/// 50 significant decimal digits (reference/multiprecision.hpp's real, without its rationals)
using truth_real = boost::multiprecision::cpp_bin_float_50;

/// the largest of the n numbers from `row` (-inf when every one is -inf: a fully masked row) and
/// whether one is NaN: a softmax's and flash's maximum, before their sums of e^(x - top)
inline truth_real row_top(const truth_real* row, std::size_t n, bool& nan) {
  truth_real top = -std::numeric_limits<truth_real>::infinity();
  nan = false;
  for (std::size_t j = 0; j < n; ++j) {
    nan = nan || boost::multiprecision::isnan(row[j]);
    if (row[j] > top) top = row[j];
  }
  return top;
}

/// @brief the truth of step `k` into out (rows x cols, row-major), from the truths of its operands
/// a, b, c (laid out as flat::step reads them: z's as, bs, n, ac, br, bc), `scalar` the factor,
/// divisor or eps as the page states it, `computed` the step's own numbers (a scaled score that
/// is -inf, masked, has the truth -inf). Returns 0, or 1 for a kind without a truth (RoPE: the
/// truth does not redo the rotation), nothing written.
inline int step_truth(flat::kind k, const truth_real* a, const truth_real* b, const truth_real* c,
                      const flat::step_sizes& z, double scalar, const double* computed, truth_real* out) {
  namespace mp = boost::multiprecision;
  using real = truth_real;
  const std::size_t R = z.rows, C = z.cols;
  switch (k) {
    case flat::kind::dot:       // out(i, j) = sum_k a(i, ac + k) b(j, bc + k) + c(j)
    case flat::kind::matmul:    // out(i, j) = sum_k a(i, ac + k) b(br + k, bc + j) + c(j)
    case flat::kind::attended:  // the weights times the values (c: the scores, for the mask only)
    case flat::kind::row_dot:   // out(i, 0) = sum_k a(i, ac + k) b(i, bc + k)
      for (std::size_t i = 0; i < R; ++i)
        for (std::size_t j = 0; j < C; ++j) {
          real s = 0;
          for (std::size_t t = 0; t < z.n; ++t) {
            const std::size_t ak = i * z.as + z.ac + t;
            const std::size_t bk = k == flat::kind::dot       ? j * z.bs + z.bc + t
                                   : k == flat::kind::row_dot ? i * z.bs + z.bc + t
                                                              : (z.br + t) * z.bs + z.bc + j;
            s += a[ak] * b[bk];
          }
          if (c != nullptr && (k == flat::kind::dot || k == flat::kind::matmul)) s += c[j];
          out[i * C + j] = s;
        }
      return 0;
    case flat::kind::scale:   // scalar a (+ c), -inf where the step masked
    case flat::kind::divide:  // a / scalar (+ c)
      for (std::size_t q = 0; q < R * C; ++q) {
        if (std::isinf(computed[q]) && computed[q] < 0) {
          out[q] = -std::numeric_limits<real>::infinity();
          continue;
        }
        out[q] = k == flat::kind::divide ? real(a[q] / real(scalar)) : real(real(scalar) * a[q]);
        if (c != nullptr && !mp::isinf(out[q])) out[q] += c[q];  // the added terms (a bias, ALiBi)
      }
      return 0;
    case flat::kind::softmax:
    case flat::kind::naive_softmax:  // the same value exactly: e^(a - max) / sum; masked (-inf): 0
      for (std::size_t i = 0; i < R; ++i) {
        real top = -std::numeric_limits<real>::infinity(), sum = 0;
        for (std::size_t j = 0; j < C; ++j)
          if (a[i * C + j] > top) top = a[i * C + j];
        for (std::size_t j = 0; j < C; ++j) {
          const real& x = a[i * C + j];
          out[i * C + j] = mp::isinf(x) ? real(0) : real(mp::exp(x - top));
          sum += out[i * C + j];
        }
        // every key masked: 0; a NaN in the row (the sum is NaN): NaN, as the float softmax gives
        for (std::size_t j = 0; j < C; ++j)
          out[i * C + j] = sum > 0 ? real(out[i * C + j] / sum) : mp::isnan(sum) ? sum : real(0);
      }
      return 0;
    case flat::kind::
        softmax_all: {  // one softmax over every cell (01's numpy pitfall): the same value exactly
      real top = -std::numeric_limits<real>::infinity(), sum = 0;
      for (std::size_t q = 0; q < R * C; ++q)
        if (a[q] > top) top = a[q];
      for (std::size_t q = 0; q < R * C; ++q) {
        out[q] = mp::isinf(a[q]) ? real(0) : real(mp::exp(a[q] - top));
        sum += out[q];
      }
      for (std::size_t q = 0; q < R * C; ++q)
        out[q] = sum > 0 ? real(out[q] / sum) : mp::isnan(sum) ? sum : real(0);
      return 0;
    }
    case flat::kind::softmax_backward:  // a = P, b = dP, c = D (a column): P (dP - D), 0 where P is 0
      for (std::size_t i = 0; i < R; ++i)
        for (std::size_t j = 0; j < C; ++j) {
          const real& p = a[i * C + j];
          out[i * C + j] = p == 0 ? real(0) : real(p * (b[i * C + j] - c[i]));
        }
      return 0;
    case flat::kind::block:  // a(br + i, bc + j)
      for (std::size_t i = 0; i < R; ++i)
        for (std::size_t j = 0; j < C; ++j) out[i * C + j] = a[(z.br + i) * z.as + z.bc + j];
      return 0;
    case flat::kind::interleave:    // each row's halves as pairs: C(2q) = A(q), C(2q + 1) = A(q + cols/2)
    case flat::kind::deinterleave:  // and back
      for (std::size_t i = 0; i < R; ++i)
        for (std::size_t j = 0; j < C; ++j) {
          const std::size_t from = k == flat::kind::interleave ? (j % 2 == 0 ? j / 2 : j / 2 + C / 2)
                                   : j < C / 2                 ? 2 * j
                                                               : 2 * (j - C / 2) + 1;
          out[i * C + j] = a[i * C + from];
        }
      return 0;
    case flat::kind::hconcat:  // a's columns, then b's
      for (std::size_t i = 0; i < R; ++i)
        for (std::size_t j = 0; j < C; ++j)
          out[i * C + j] = j < z.as ? a[i * z.as + j] : b[i * z.bs + j - z.as];
      return 0;
    case flat::kind::add:
      for (std::size_t q = 0; q < R * C; ++q) out[q] = a[q] + b[q];
      return 0;
    case flat::kind::relu:
      for (std::size_t q = 0; q < R * C; ++q) out[q] = a[q] < 0 ? real(0) : a[q];
      return 0;
    case flat::kind::transpose:  // a is (cols, rows)
      for (std::size_t i = 0; i < R; ++i)
        for (std::size_t j = 0; j < C; ++j) out[i * C + j] = a[j * R + i];
      return 0;
    case flat::kind::layer_norm:  // (a - mean) / sqrt(var + eps) b + c, the biased variance
      for (std::size_t i = 0; i < R; ++i) {
        real mean = 0, var = 0;
        for (std::size_t j = 0; j < C; ++j) mean += a[i * C + j];
        mean /= C;
        for (std::size_t j = 0; j < C; ++j) var += (a[i * C + j] - mean) * (a[i * C + j] - mean);
        var /= C;
        const real inv = 1 / mp::sqrt(var + real(scalar));
        for (std::size_t j = 0; j < C; ++j)
          out[i * C + j] = (a[i * C + j] - mean) * inv * (b ? b[j] : real(1)) + (c ? c[j] : real(0));
      }
      return 0;
    case flat::kind::online_attention:  // flash's output: the exact softmax of each row of a times b
      for (std::size_t i = 0; i < R; ++i) {
        bool nan = false;
        const real top = row_top(a + i * z.as, z.as, nan);
        real sum = 0;
        for (std::size_t c = 0; c < C; ++c) out[i * C + c] = 0;
        for (std::size_t j = 0; j < z.as; ++j) {
          const real& x = a[i * z.as + j];
          if (mp::isinf(x) && x < 0) continue;  // masked: the key adds nothing
          const real w = mp::exp(x - top);
          sum += w;
          for (std::size_t c = 0; c < C; ++c) out[i * C + c] += w * b[j * z.bs + c];
        }
        // every key masked: 0, as flash gives; a NaN score: NaN
        for (std::size_t c = 0; c < C; ++c)
          out[i * C + c] = nan       ? std::numeric_limits<real>::quiet_NaN()
                           : sum > 0 ? real(out[i * C + c] / sum)
                                     : real(0);
      }
      return 0;
    default: break;
  }
  // kinds 46-52, flash attention's statistics and backward (example 16): m and l of the whole row
  // (the blocks and rescales are exact here: the same numbers), P = e^(s - m) / l or e^(s - L),
  // L = m + log l, and the backward's sums, a masked score (-inf) skipped
  if (k == flat::flash_row_max_kind || k == flat::flash_row_sum_kind) {  // the scores a (R, as)
    for (std::size_t i = 0; i < R; ++i) {
      bool nan = false;
      const real top = row_top(a + i * z.as, z.as, nan);
      real sum = 0;
      for (std::size_t j = 0; j < z.as; ++j)
        if (!(mp::isinf(a[i * z.as + j]) && a[i * z.as + j] < 0)) sum += mp::exp(a[i * z.as + j] - top);
      out[i] = nan ? std::numeric_limits<real>::quiet_NaN() : k == flat::flash_row_max_kind ? top : sum;
    }
    return 0;
  }
  if (k == flat::flash_weights_kind || k == flat::logsumexp_weights_kind) {  // a the scores, b m or L, c l
    const bool ml = k == flat::flash_weights_kind;
    for (std::size_t i = 0; i < R; ++i)
      for (std::size_t j = 0; j < C; ++j) {
        const real& x = a[i * C + j];
        const bool dead = ml ? c[i] == 0 : (mp::isinf(b[i]) && b[i] < 0);
        out[i * C + j] = dead || (mp::isinf(x) && x < 0) ? real(0)
                         : ml                            ? real(mp::exp(x - b[i]) / c[i])
                                                         : real(mp::exp(x - b[i]));
      }
    return 0;
  }
  if (k == flat::logsumexp_kind) {  // m + log l, -inf where l = 0
    for (std::size_t i = 0; i < R; ++i)
      out[i] = b[i] == 0 ? -std::numeric_limits<real>::infinity() : real(a[i] + mp::log(b[i]));
    return 0;
  }
  if (k == flat::flash_over_keys_kind || k == flat::flash_over_queries_kind) {  // c: the scores, a's layout
    const bool keys = k == flat::flash_over_keys_kind;
    for (std::size_t r = 0; r < R; ++r)
      for (std::size_t col = 0; col < C; ++col) {
        real sum = 0;
        for (std::size_t t = 0; t < z.n; ++t) {
          const std::size_t at = keys ? r * z.as + t : t * z.as + r;
          if (mp::isinf(c[at]) && c[at] < 0) continue;
          sum += a[at] * b[t * z.bs + col];
        }
        out[r * C + col] = sum;
      }
    return 0;
  }
  // kinds 40-45, 53, 54 and 57 (flat_steps.hpp's extended_step): sizes as extended_step reads them; an id that is
  // not an integer in range has no truth (the step itself fails on it)
  const auto id_at = [](const real& v, std::size_t limit, std::size_t& out_id) {
    if (!(v >= 0) || !(v < real(limit)) || mp::floor(v) != v) return false;
    out_id = v.convert_to<std::size_t>();
    return true;
  };
  if (k == flat::cast_kind || k == flat::sgd_kind) {  // cast: the same number; sgd: w - lr g
    for (std::size_t q = 0; q < R * C; ++q)
      out[q] = k == flat::cast_kind ? a[q] : real(a[q] - real(scalar) * b[q]);
    return 0;
  }
  if (k == flat::column_sums_kind) {  // C (1, cols) = the column sums of A (n rows)
    for (std::size_t j = 0; j < C; ++j) {
      real sum = 0;
      for (std::size_t i = 0; i < z.n; ++i) sum += a[i * C + j];
      out[j] = sum;
    }
    return 0;
  }
  if (k == flat::cross_entropy_kind) {  // C (rows, 1) = log(sum_j e^(A(i, j) - m)) - (A(i, t_i) - m)
    for (std::size_t i = 0; i < R; ++i) {
      std::size_t t = 0;
      if (!id_at(b[i], z.n, t)) return 1;
      real top = a[i * z.n];
      for (std::size_t j = 1; j < z.n; ++j)
        if (a[i * z.n + j] > top) top = a[i * z.n + j];
      real sum = 0;
      for (std::size_t j = 0; j < z.n; ++j) sum += mp::exp(a[i * z.n + j] - top);
      out[i] = mp::log(sum) - (a[i * z.n + t] - top);
    }
    return 0;
  }
  if (k == flat::embedding_kind || k == flat::embedding_backward_kind) {
    // embedding: C (len = rows, cols) = table A's rows ids(k) (n rows); embedding_backward: C
    // (rows, cols) = 0, then row ids(k) += d_out's row k (n of them)
    const bool fwd = k == flat::embedding_kind;
    if (!fwd)
      for (std::size_t q = 0; q < R * C; ++q) out[q] = 0;
    for (std::size_t t = 0; t < (fwd ? R : z.n); ++t) {
      std::size_t r = 0;
      if (!id_at(b[t], fwd ? z.n : R, r)) return 1;
      for (std::size_t j = 0; j < C; ++j) {
        if (fwd)
          out[t * C + j] = a[r * C + j];
        else
          out[r * C + j] += a[t * C + j];
      }
    }
    return 0;
  }
  if (k == flat::key_padding_mask_kind) {  // C (B, N) = 1 where j >= lengths(b), exactly
    for (std::size_t i = 0; i < R; ++i) {
      std::size_t len = 0;
      if (!id_at(a[i], C + 1, len)) return 1;
      for (std::size_t j = 0; j < C; ++j) out[i * C + j] = j >= len ? real(1) : real(0);
    }
    return 0;
  }
  if (k == flat::padded_divide_kind) {  // a / scalar (+ c), -inf where the step masked (its padding too)
    for (std::size_t q = 0; q < R * C; ++q) {
      if (std::isinf(computed[q]) && computed[q] < 0) {
        out[q] = -std::numeric_limits<real>::infinity();
        continue;
      }
      out[q] = real(a[q] / real(scalar));
      if (c != nullptr && !mp::isinf(out[q])) out[q] += c[q];
    }
    return 0;
  }
  if (k == flat::adamw_kind) {
    // AdamW's first step from zero moments with the step's scalars c = [decay, beta1, 1 - beta1,
    // beta2, 1 - beta2, step_size, sqrt(bc2), eps] as given: w decay + step_size m / (sqrt(v) /
    // sqrt(bc2) + eps), m = (1 - beta1) g, v = (1 - beta2) g^2, in 50 digits (Boost's sqrt)
    for (std::size_t q = 0; q < R * C; ++q) {
      const real m = c[2] * b[q];
      const real v = c[4] * b[q] * b[q];
      out[q] = a[q] * c[0] + c[5] * m / (mp::sqrt(v) / c[6] + c[7]);
    }
    return 0;
  }
  return 1;  // RoPE, the online softmax's blocks (but the whole of flash's output), the 16-bit
             // roundings (and a kind this file does not know)
}

/// (value - truth) / ulp(truth) in the type of `digits` significand bits (24: float32, 53:
/// float64) and smallest normal exponent `min_exponent` (-126, -1022): 0 for an infinity the
/// value equals, NaN for an error without a size (a NaN value, an infinite one or truth, a nonzero
/// value against 0)
inline double truth_ulps(double value, const truth_real& t, int digits, int min_exponent) {
  namespace mp = boost::multiprecision;
  if (mp::isinf(t) || std::isinf(value)) return value == t.convert_to<double>() ? 0.0 : NAN;
  if (std::isnan(value) || mp::isnan(t)) return NAN;
  if (t == 0) return value == 0 ? 0.0 : NAN;
  const truth_real err = truth_real(value) - t;
  int e = 0;
  mp::frexp(t, &e);                                // |t| = f 2^e, f in [0.5, 1): ulp = 2^(e - digits)
  if (e - 1 < min_exponent) e = min_exponent + 1;  // subnormal: the ulp stops shrinking
  return truth_real(mp::ldexp(err, digits - e)).convert_to<double>();
}

/// @brief t to `digits` significant decimal digits (1..38), rounded to nearest (a tie to even),
/// as C's %.{digits}g writes a double and Boost's str(digits) writes t: "0.99004983374916805337", "1.25", "-3e-07",
/// "1.2345678901234567891e+20"; "inf", "-inf", "nan". Written here (not Boost's str()) so that the
/// pages' truth module has no iostreams in it.
inline std::string truth_digits(const truth_real& t, int digits = 20) {
  namespace mp = boost::multiprecision;
  if (mp::isnan(t)) return "nan";
  if (mp::isinf(t)) return t < 0 ? "-inf" : "inf";
  if (t == 0) return "0";
  if (digits < 1) digits = 1;
  if (digits > 38) digits = 38;
  std::string sign = t < 0 ? "-" : "";
  const truth_real x = mp::abs(t);
  int e2 = 0;
  mp::frexp(x, &e2);  // x in [2^(e2 - 1), 2^e2)
  int e10 = static_cast<int>(std::floor((e2 - 1) * 0.30102999566398119521));
  // the digits: n = round(x 10^(digits - 1 - e10)), between 10^(digits - 1) and 10^digits
  const auto pow10 = [](int p) {
    truth_real r = 1, ten = 10;
    for (int q = 0; q < (p < 0 ? -p : p); ++q) r *= ten;
    return p < 0 ? truth_real(1 / r) : r;
  };
  const truth_real lo = pow10(digits - 1), hi = pow10(digits);
  truth_real n;
  for (int tries = 0; tries < 3; ++tries) {
    const truth_real y = x * pow10(digits - 1 - e10);
    n = mp::floor(y + truth_real(0.5));
    if (n - y == truth_real(0.5) && mp::fmod(n, truth_real(2)) != 0) n -= 1;  // a tie: to even, as %g
    if (n >= hi)
      ++e10;
    else if (n < lo)
      --e10;
    else
      break;
  }
  if (n >= hi) n = lo, ++e10;  // 9.99...95 rounded up to 10.00...0
  std::string ds;              // the digits, most significant first
  for (int q = 0; q < digits; ++q) {
    const truth_real d = n - mp::floor(n / 10) * 10;
    ds.insert(ds.begin(), static_cast<char>('0' + d.convert_to<int>()));
    n = mp::floor(n / 10);
  }
  if (e10 < -4 || e10 >= digits) {  // scientific, as %g: d.ddd e±XX, trailing zeros dropped
    std::string m = ds.substr(0, 1);
    std::string frac = ds.substr(1);
    while (!frac.empty() && frac.back() == '0') frac.pop_back();
    if (!frac.empty()) m += "." + frac;
    const int ae = e10 < 0 ? -e10 : e10;
    std::string es = std::to_string(ae);
    if (es.size() < 2) es = "0" + es;
    return sign + m + (e10 < 0 ? "e-" : "e+") + es;
  }
  std::string s;
  if (e10 < 0)
    s = "0." + std::string(static_cast<std::size_t>(-e10 - 1), '0') + ds;
  else
    s = ds.substr(0, static_cast<std::size_t>(e10) + 1) + "." + ds.substr(static_cast<std::size_t>(e10) + 1);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return sign + s;
}

}  // namespace qkv::reference
