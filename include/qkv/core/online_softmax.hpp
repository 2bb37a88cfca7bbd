// online_softmax.hpp: the online softmax of flash attention, one key block at a time, constexpr.
//
//   out = softmax(s) v = sum_j e^(s_j - m) v_j / sum_j e^(s_j - m)    s: (1, S)  v: (S, Dv)
//
// The materialised softmax needs the whole score row first (its maximum m, then its sum). The
// online softmax (Milakov & Gimelshein 2018; Dao et al. 2022, "FlashAttention") reads the keys
// in blocks of B and keeps three things per query, after each block:
//   m  the running maximum of the scores seen so far
//   l  the running sum  sum_j e^(s_j - m) over the keys seen so far
//   o  the running unnormalised output  sum_j e^(s_j - m) v_j   (1, Dv)
// When a block raises the maximum from m_old to m_new, every term kept so far was computed
// against m_old: multiplying l and o by the rescale factor e^(m_old - m_new) moves them to m_new,
// since e^(s - m_old) e^(m_old - m_new) = e^(s - m_new). After the last block m is the row's
// maximum and out = o / l, in exact arithmetic the materialised softmax(s) v. The score row
// never exists as a whole: this is how runtime/attention.hpp's streaming path visits its keys
// (with blocks of runtime::key_block keys and many queries at once).
//
// One step, in the order runtime/attention.hpp's streaming path uses:
//   m_new   = max(m, max of the block's scores)
//   p_j     = e^(s_j - m_new)                 for the block's keys (a masked -inf score: 0)
//   rescale = e^(m - m_new)                   (0 on the first block with a finite score: m = -inf)
//   l       = l rescale + sum_j p_j           (left to right; l + sum when the rescale is 1)
//   o       = o rescale + p_1 v_1 + p_2 v_2 + ...   (column by column, left to right)
// Masked keys (-inf scores) add nothing; a row whose every key is masked keeps l = 0 and gives
// out = 0, as the materialised softmax_rows does (softmax.hpp). A NaN score makes the state NaN
// and the output row NaN (without arithmetic on the NaN, which clang refuses in a constant
// expression).
//
// The error, derived (online_softmax_error): Higham's standard model, as in bounds.hpp.
#pragma once

#include <array>
#include <cstddef>
#include <limits>

#include "math.hpp"
#include "matrix.hpp"

namespace qkv {

/// @brief one query's online-softmax state after some keys: m, l, o (1, Dv), and what the last
/// step did (its block's maximum, its rescale factor e^(m_old - m_new))
template <class T, std::size_t Dv>
struct online_softmax_state {
  T m = -std::numeric_limits<T>::infinity();          // running maximum (-inf: no finite score yet)
  T l = T(0);                                         // running sum of e^(s_j - m)
  matrix<T, 1, Dv> o{};                               // running unnormalised output
  T block_max = -std::numeric_limits<T>::infinity();  // the last block's own maximum
  T rescale = T(0);                                   // e^(m_old - m_new) of the last step
};

namespace detail {
template <class T>
constexpr bool online_is_nan(const T& x) {
  return x != x;
}
template <class T, std::size_t Dv>
constexpr online_softmax_state<T, Dv> online_nan_state(const T& nan) {
  online_softmax_state<T, Dv> s;
  s.m = s.l = s.block_max = s.rescale = nan;
  for (std::size_t c = 0; c < Dv; ++c) s.o.v[c] = nan;
  return s;
}
}  // namespace detail

/// @brief one online-softmax step: the block of n <= B scores s[0..n) and their value rows
/// v(j0 + 0 .. j0 + n, :) (v: (S, Dv)) folded into the state. (1, Dv) state -> (1, Dv) state
template <class T, std::size_t S, std::size_t Dv>
[[nodiscard]] constexpr online_softmax_state<T, Dv> online_softmax_step(online_softmax_state<T, Dv> st,
                                                                        const T* s, std::size_t n,
                                                                        const matrix<T, S, Dv>& v,
                                                                        std::size_t j0) {
  if (detail::online_is_nan(st.m)) return st;  // NaN stays NaN
  T block_max = -std::numeric_limits<T>::infinity();
  for (std::size_t j = 0; j < n; ++j) {
    if (detail::online_is_nan(s[j])) return detail::online_nan_state<T, Dv>(s[j]);
    if (block_max < s[j]) block_max = s[j];
  }
  st.block_max = block_max;
  const T m_new = st.m < block_max ? block_max : st.m;
  if (m_new == -std::numeric_limits<T>::infinity()) {  // every key so far masked: nothing to add
    st.rescale = T(1);
    return st;
  }
  // p_j = e^(s_j - m_new); a masked key (-inf) gives exactly 0
  std::array<T, S> p{};
  T row_sum = T(0);
  for (std::size_t j = 0; j < n; ++j) {
    p[j] = s[j] == -std::numeric_limits<T>::infinity() ? T(0) : qkv::exp(T(s[j] - m_new));
    row_sum += p[j];
  }
  // e^(m_old - m_new): 0 when nothing was kept yet (m_old = -inf), 1 when the maximum stayed
  const T alpha = st.m == -std::numeric_limits<T>::infinity() ? T(0) : qkv::exp(T(st.m - m_new));
  st.l = alpha == T(1) ? T(st.l + row_sum) : T(st.l * alpha + row_sum);
  for (std::size_t c = 0; c < Dv; ++c) {
    T acc = alpha == T(1) ? st.o.v[c] : T(st.o.v[c] * alpha);
    for (std::size_t j = 0; j < n; ++j) acc = acc + p[j] * v(j0 + j, c);
    st.o.v[c] = acc;
  }
  st.m = m_new;
  st.rescale = alpha;
  return st;
}

/// @brief the output of a state: o / l, the softmax-weighted values of the keys seen so far
/// (0 while every key seen is masked; NaN for a NaN state). (1, Dv)
template <class T, std::size_t Dv>
[[nodiscard]] constexpr matrix<T, 1, Dv> online_softmax_output(const online_softmax_state<T, Dv>& st) {
  matrix<T, 1, Dv> out{};
  if (detail::online_is_nan(st.l)) return st.o;  // every element NaN already
  if (st.l == T(0)) return out;
  for (std::size_t c = 0; c < Dv; ++c) out.v[c] = st.o.v[c] / st.l;
  return out;
}

/// the number of blocks of B keys that cover S keys (the last may be shorter)
template <std::size_t S, std::size_t B>
inline constexpr std::size_t online_blocks = (S + B - 1) / B;

/// @brief one query over S keys in blocks of B: the state after each block and the output
template <class T, std::size_t S, std::size_t Dv, std::size_t B>
struct online_softmax_trace {
  std::array<online_softmax_state<T, Dv>, online_blocks<S, B>> after;  // after block 0, 1, ...
  matrix<T, 1, Dv> output;                                             // o / l after the last
};

/// @brief softmax(s) v for one score row s (1, S) and the values v (S, Dv), read in blocks of B
/// keys, with every block's state kept. B >= 1.
template <std::size_t B, class T, std::size_t S, std::size_t Dv>
[[nodiscard]] constexpr online_softmax_trace<T, S, Dv, B> online_softmax_blocks(const matrix<T, 1, S>& s,
                                                                                const matrix<T, S, Dv>& v) {
  static_assert(B >= 1, "online_softmax_blocks: the block size B must be at least 1");
  online_softmax_trace<T, S, Dv, B> t{};
  online_softmax_state<T, Dv> st{};
  for (std::size_t b = 0; b < online_blocks<S, B>; ++b) {
    const std::size_t j0 = b * B, n = S - j0 < B ? S - j0 : B;
    st = online_softmax_step(st, s.v + j0, n, v, j0);
    t.after[b] = st;
  }
  t.output = online_softmax_output(st);
  return t;
}

/// @brief flash attention's output for every query: softmax of each row of the (scaled, masked)
/// scores (T, S) times v (S, Dv), each row streamed over key blocks of B. (T, Dv)
template <std::size_t B, class T, std::size_t Tq, std::size_t S, std::size_t Dv>
[[nodiscard]] constexpr matrix<T, Tq, Dv> online_attention(const matrix<T, Tq, S>& scores,
                                                           const matrix<T, S, Dv>& v) {
  matrix<T, Tq, Dv> out{};
  for (std::size_t i = 0; i < Tq; ++i) {
    online_softmax_state<T, Dv> st{};
    for (std::size_t j0 = 0; j0 < S; j0 += B)
      st = online_softmax_step(st, scores.v + i * S + j0, S - j0 < B ? S - j0 : B, v, j0);
    const auto row = online_softmax_output(st);
    for (std::size_t c = 0; c < Dv; ++c) out(i, c) = row.v[c];
  }
  return out;
}

/// @brief a bound on |online output - softmax(s) v| for one output column, computed in F, when
/// the scores s and the values v are exact (the F numbers the step is given).
///   keys       S, the number of keys (masked ones included)
///   block      B, the block size: nb = ceil(S / B) blocks
///   range      max_j s_j - min_j s_j over the finite scores
///   max_abs_v  max_j |v_jc| over the keys of the column
///   exp_units  how many u an exp may be off, relative (2: within 1 ulp, as math.hpp's and
///              runtime::vexp's measured errors are)
/// The derivation, in the standard model fl(a op b) = (a op b)(1 + d), |d| <= u:
/// - the rounded subtractions s_j - m_b and m_old - m_new change the exponents by at most u times
///   their size; for a key j these sizes telescope, (m_b - s_j) + (m_b+1 - m_b) + ... = m - s_j
///   <= range, so they scale its term by at most e^(range u), i.e. relative rho = range u / (1 - range u);
/// - every other rounding a term meets is a factor (1 + d): its exp (exp_units), the additions
///   of its block's sum and of l (at most B), the product p_j v_jc and every later addition of
///   o (at most S + 1), and per later block the rescale's exp, its multiplication and l's
///   addition (at most exp_units + 2 each): K = S + (exp_units + 2) nb + exp_units + 1 factors
///   cover all, |prod - 1| <= gamma_K (Higham, Lemma 3.1);
/// - so l = L (1 + e), |e| <= eta = (1 + gamma_K)(1 + rho) - 1 with L = sum_j e^(s_j - m) (every
///   term is positive), and o_c = O_c + do, |do| <= eta sum_j e^(s_j - m) |v_jc| <= eta L max|v_c|;
/// - o/l - O/L = (do - e O)/(L (1 + e)), at most 2 eta / (1 - eta) max|v_c| (|O_c| <= L max|v_c|),
///   and the final division rounds once more: u (max|v_c| + that);
/// - a term below the smallest normal F rounds absolutely, by at most half the smallest
///   subnormal per operation: S K of them at most, against L >= 1, added to eta.
[[nodiscard]] constexpr double online_softmax_error_units(std::size_t keys, std::size_t block,
                                                          double exp_units) {
  const double nb = double((keys + block - 1) / block);
  return double(keys) + (exp_units + 2) * nb + exp_units + 1;
}
template <class F>
[[nodiscard]] constexpr double online_softmax_error(std::size_t keys, std::size_t block, double range,
                                                    double max_abs_v, double exp_units = 2) {
  const double u = std::numeric_limits<F>::epsilon() / 2.0;
  const double K = online_softmax_error_units(keys, block, exp_units);
  const double gamma = K * u / (1 - K * u);
  const double rho = range * u / (1 - range * u);
  const double tiny = double(keys) * K * double(std::numeric_limits<F>::denorm_min());
  const double eta = (1 + gamma) * (1 + rho) - 1 + tiny;
  const double e = 2 * eta / (1 - eta) * max_abs_v;
  return e + u * (max_abs_v + e);
}

/// @brief the same bound for the materialised path the online one is compared with: the weights
/// softmax_rows(s) (softmax.hpp: e_k = exp(s_k - m), their sum left to right, e_k / sum), then
/// sum_k w_k v_kc left to right (matrix_product). Each term's numerator meets its exp
/// (exp_units), the division and the product (1 each) and at most S - 1 additions: gamma_{S+3}
/// with the subtraction's rho; the shared denominator (the sum) gamma_{S+1} with rho. So the term
/// is w_k v_kc (1 + a)/(1 + b), |(1 + a)/(1 + b) - 1| <= (|a| + |b|)/(1 - |b|), summed against
/// sum_k w_k |v_kc| <= max_k |v_kc|; plus the underflow term as above.
template <class F>
[[nodiscard]] constexpr double materialised_softmax_error(std::size_t keys, double range, double max_abs_v,
                                                          double exp_units = 2) {
  const double u = std::numeric_limits<F>::epsilon() / 2.0;
  auto gamma = [u](double k) { return k * u / (1 - k * u); };
  const double rho = range * u / (1 - range * u);
  const double tiny =
      double(keys) * (double(keys) + exp_units + 1) * double(std::numeric_limits<F>::denorm_min());
  const double a = (1 + gamma(double(keys) + exp_units + 1)) * (1 + rho) - 1 + tiny;
  const double b = (1 + gamma(double(keys) + exp_units - 1)) * (1 + rho) - 1 + tiny;
  return (a + b) / (1 - b) * max_abs_v;
}

}  // namespace qkv
