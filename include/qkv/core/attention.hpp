// attention.hpp: scaled dot-product self- and cross-attention, step by step, every intermediate kept.
//
//   Q = X Wq   K = C Wk   V = C Wv        (C = X for self-attention)
//   scores  = Q Kᵀ                         (T, S): query i against key j
//   scaled  = scores / sqrt(d_k)           (or unscaled, or any divisor / factor):
//             scaled_scores(q, k) does both, d_k from q's width
//   weights = softmax_rows(scaled)         (T, S): each row sums to 1
//   context = weights V                    (T, d_v)
//
// Tokens are rows everywhere in the results. The three weight conventions of the tutorials
// are a tag argument:
//   qkv::out_in   nn.Linear: W is (d_out, d_in), Q = X Wᵀ       (tutorials 003, 004; the
//                 default of project(x, w) when W is not square: square weights fit both
//                 out_in and in_out, so project(x, w) with a square W does not compile and
//                 names the concept square_weights_need_a_layout: say which)
//   qkv::in_out   W is (d_in, d_out), Q = X W                   (tutorial 000)
//   qkv::columns  tokens are the COLUMNS of X (d_in, T), W is (d_out, d_in), q_t = W x_t
//                 (tutorials 001, 002); the products are the same sums in the same order as
//                 out_in on Xᵀ, so the results are bit-identical to it.
#pragma once

#include <cstddef>
#include <limits>
#include <type_traits>

#include "math.hpp"
#include "matrix.hpp"
#include "softmax.hpp"

namespace qkv {

// ---------------------------------------------------------------------------------------------
// conventions

/// @brief how a weight matrix W is stored, as a run-time value: out_in is nn.Linear's
/// (d_out, d_in), y = x Wᵀ (the default); in_out is (d_in, d_out), y = x W (tutorial 000).
/// The one definition: qkv::runtime::weight_layout (runtime/multihead.hpp's linear_weights) is
/// this type. The tags below choose a layout at compile time; each names its W's layout.
enum class weight_layout {
  out_in,  // (d_out, d_in), nn.Linear: y = x Wᵀ + b
  in_out,  // (d_in, d_out): y = x W + b (tutorial 000)
};

/// the layouts as tag types, for overloads chosen at compile time: qkv::out_in, qkv::in_out and
/// qkv::columns (tokens as the columns of x, W out_in); L::layout is W's weight_layout
struct out_in_t {
  static constexpr weight_layout layout = weight_layout::out_in;
};
struct in_out_t {
  static constexpr weight_layout layout = weight_layout::in_out;
};
struct columns_t {
  static constexpr weight_layout layout = weight_layout::out_in;  // W (d_out, d_in); x is (d_in, T)
};
inline constexpr out_in_t out_in{};
inline constexpr in_out_t in_out{};
inline constexpr columns_t columns{};

/// one of the three tag types (it was named weight_layout, which now names the run-time enum)
template <class L>
concept weight_layout_tag =
    std::is_same_v<L, out_in_t> || std::is_same_v<L, in_out_t> || std::is_same_v<L, columns_t>;

/// @brief how the scores are scaled before the softmax.
/// divide_by_sqrt_dk() is the default: scores / sqrt(d_k), a division by sqrt(d_k) rounded to T,
/// as PyTorch does for `scores / d_k**0.5` in float32. none() leaves them (tutorials 000, 002).
template <class T>
struct scaling {
  enum class kind { none, divide_by_sqrt_dk, divide_by, multiply_by };
  kind how = kind::divide_by_sqrt_dk;
  T value = T(1);

  constexpr scaling() = default;
  constexpr scaling(kind k, const T& v) : how(k), value(v) {}
  /// a number is a multiplier, as the runtime's attention_options::scale is:
  /// attention_options<float>{.scale = 0.5f} halves the scores in both
  constexpr scaling(const T& factor)
      : how(kind::multiply_by), value(factor) {}  // NOLINT: implicit on purpose

  [[nodiscard]] static constexpr scaling none() { return {kind::none, T(1)}; }
  [[nodiscard]] static constexpr scaling divide_by_sqrt_dk() { return {kind::divide_by_sqrt_dk, T(1)}; }
  [[nodiscard]] static constexpr scaling divide_by(const T& d) { return {kind::divide_by, d}; }
  [[nodiscard]] static constexpr scaling multiply_by(const T& f) { return {kind::multiply_by, f}; }
};

/// @brief options of an attention call: the scaling and an optional causal mask
template <class T>
struct attention_options {
  scaling<T> scale = scaling<T>::divide_by_sqrt_dk();
  bool causal = false;  // query i may attend to keys 0..i only
};

/// @brief every intermediate of one attention call; T queries, S keys
template <class T, std::size_t Tq, std::size_t S, std::size_t Dk, std::size_t Dv>
struct attention_result {
  matrix<T, Tq, Dk> queries;
  matrix<T, S, Dk> keys;
  matrix<T, S, Dv> values;
  matrix<T, Tq, S> scores;         // q·k, raw: before scaling and masking
  matrix<T, Tq, S> scaled_scores;  // after scaling; a masked score is -inf
  matrix<T, Tq, S> weights;        // softmax of each row of scaled_scores
  matrix<T, Tq, Dv> context;       // weights V: one output row per query
};

// ---------------------------------------------------------------------------------------------
// step 1: projections

/// square weights (d, d) read the same as (d_out, d_in) and as (d_in, d_out): project(x, w)
/// without a layout refuses them rather than guess (pass qkv::out_in or qkv::in_out)
/// (the inner concept's name is the fix, so that both compilers print it among their notes:
/// project(x, w, qkv::in_out) for x W, project(x, w, qkv::out_in) for nn.Linear's x Wᵀ)
template <std::size_t WRows, std::size_t WCols>
concept add_qkv_in_out_or_qkv_out_in_as_the_last_argument = (WRows != WCols);
template <std::size_t WRows, std::size_t WCols>
concept square_weights_need_a_layout = add_qkv_in_out_or_qkv_out_in_as_the_last_argument<WRows, WCols>;

/// X Wᵀ: (T, d_in) with nn.Linear's W (d_out, d_in) -> (T, d_out)
template <class T, std::size_t N, std::size_t Din, std::size_t Dout, std::size_t WDin>
  requires product_shapes<N, Din, WDin, Dout>
[[nodiscard]] constexpr matrix<T, N, Dout> project(const matrix<T, N, Din>& x, const matrix<T, Dout, WDin>& w,
                                                   out_in_t) {
  return matrix_product_transposed(x, w);
}

/// X Wᵀ with W (d_out, d_in), d_out != d_in: the only layout the shapes allow
template <class T, std::size_t N, std::size_t Din, std::size_t Dout, std::size_t WDin>
  requires(product_shapes<N, Din, WDin, Dout> && square_weights_need_a_layout<Dout, WDin>)
[[nodiscard]] constexpr matrix<T, N, Dout> project(const matrix<T, N, Din>& x,
                                                   const matrix<T, Dout, WDin>& w) {
  return matrix_product_transposed(x, w);
}

/// X W: (T, d_in) with W (d_in, d_out) -> (T, d_out)
template <class T, std::size_t N, std::size_t Din, std::size_t WDin, std::size_t Dout>
  requires product_shapes<N, Din, WDin, Dout>
[[nodiscard]] constexpr matrix<T, N, Dout> project(const matrix<T, N, Din>& x, const matrix<T, WDin, Dout>& w,
                                                   in_out_t) {
  return matrix_product(x, w);
}

/// tokens as columns: X (d_in, T) and W (d_out, d_in) -> (W X)ᵀ, (T, d_out), tokens as rows
template <class T, std::size_t Din, std::size_t N, std::size_t Dout, std::size_t WDin>
  requires product_shapes<Dout, WDin, Din, N>
[[nodiscard]] constexpr matrix<T, N, Dout> project(const matrix<T, Din, N>& x, const matrix<T, Dout, WDin>& w,
                                                   columns_t) {
  return matrix_product_transposed(transposed(x), w);
}

/// X Wᵀ + b: nn.Linear with a bias (1, d_out)
template <class T, std::size_t N, std::size_t Din, std::size_t Dout, std::size_t WDin>
  requires product_shapes<N, Din, WDin, Dout>
[[nodiscard]] constexpr matrix<T, N, Dout> project(const matrix<T, N, Din>& x, const matrix<T, Dout, WDin>& w,
                                                   const matrix<T, 1, Dout>& b, out_in_t) {
  return add_row_vector(matrix_product_transposed(x, w), b);
}

/// X Wᵀ + b without a layout: W must not be square (square_weights_need_a_layout)
template <class T, std::size_t N, std::size_t Din, std::size_t Dout, std::size_t WDin>
  requires(product_shapes<N, Din, WDin, Dout> && square_weights_need_a_layout<Dout, WDin>)
[[nodiscard]] constexpr matrix<T, N, Dout> project(const matrix<T, N, Din>& x, const matrix<T, Dout, WDin>& w,
                                                   const matrix<T, 1, Dout>& b) {
  return add_row_vector(matrix_product_transposed(x, w), b);
}

// ---------------------------------------------------------------------------------------------
// steps 2-6

/// a query is compared with every key: queries (T, QueryCols) and keys (S, KeyCols) need the
/// same number of columns (a mismatch names both: "[with QueryCols = 3; KeyCols = 2]")
template <std::size_t QueryCols, std::size_t KeyCols>
concept queries_and_keys_have_the_same_columns = (QueryCols == KeyCols);

/// step 2: scores = Q Kᵀ, (T, d_k) x (S, d_k)ᵀ -> (T, S)
template <class T, std::size_t Tq, std::size_t Dq, std::size_t S, std::size_t Dk>
  requires queries_and_keys_have_the_same_columns<Dq, Dk>
[[nodiscard]] constexpr matrix<T, Tq, S> scores(const matrix<T, Tq, Dq>& queries,
                                                const matrix<T, S, Dk>& keys) {
  return matrix_product_transposed(queries, keys);
}

/// step 3: scale the scores; d_k is the width of a query (for divide_by_sqrt_dk)
template <class T, std::size_t Tq, std::size_t S>
[[nodiscard]] constexpr matrix<T, Tq, S> scale(const matrix<T, Tq, S>& s, const scaling<T>& how,
                                               std::size_t d_k) {
  using kind = typename scaling<T>::kind;
  switch (how.how) {
    case kind::none: return s;
    case kind::divide_by_sqrt_dk: return divided(s, qkv::sqrt(T(d_k)));
    case kind::divide_by: return divided(s, how.value);
    case kind::multiply_by: return scaled(how.value, s);
  }
  return s;
}

/// steps 2 and 3 at once: Q Kᵀ / sqrt(d_k), d_k the width of a query: (T, d_k) x (S, d_k)ᵀ -> (T, S).
/// The same bits as scale(scores(q, k), scaling<T>::divide_by_sqrt_dk(), d_k).
template <class T, std::size_t Tq, std::size_t Dq, std::size_t S, std::size_t Dk>
  requires queries_and_keys_have_the_same_columns<Dq, Dk>
[[nodiscard]] constexpr matrix<T, Tq, S> scaled_scores(const matrix<T, Tq, Dq>& queries,
                                                       const matrix<T, S, Dk>& keys) {
  return divided(matrix_product_transposed(queries, keys), qkv::sqrt(T(Dq)));
}

/// a causal mask: score (i, j) becomes -inf where key j comes after query i (j > i)
template <class T, std::size_t Tq, std::size_t S>
  requires std::numeric_limits<T>::has_infinity
[[nodiscard]] constexpr matrix<T, Tq, S> causal_masked(const matrix<T, Tq, S>& s) {
  matrix<T, Tq, S> out = s;
  for (std::size_t i = 0; i < Tq; ++i)
    for (std::size_t j = i + 1; j < S; ++j) out.v[i * S + j] = -std::numeric_limits<T>::infinity();
  return out;
}

/// a boolean mask: score (i, j) becomes -inf where allowed(i, j) is false
template <class T, std::size_t Tq, std::size_t S, std::size_t MR, std::size_t MC>
  requires(std::numeric_limits<T>::has_infinity && same_shapes<Tq, S, MR, MC>)
[[nodiscard]] constexpr matrix<T, Tq, S> masked(const matrix<T, Tq, S>& s,
                                                const matrix<bool, MR, MC>& allowed) {
  matrix<T, Tq, S> out = s;
  for (std::size_t k = 0; k < Tq * S; ++k)
    if (!allowed.v[k]) out.v[k] = -std::numeric_limits<T>::infinity();
  return out;
}

// step 4 is softmax_rows(scaled) (softmax.hpp), the one name for the softmax of the scores:
// qkv has no function named `weights`, the name of the learner's variable.

/// @brief step 5, as tutorial 000 draws it: every value scaled by every query's weight for it.
/// (T, S) weights and (S, d_v) values -> (S, T, d_v), element [j][i] = weights(i, j) * values[j]
/// (value j weighted for query i; torch: values[:,None] * weights.T[:,:,None]).
template <class T, std::size_t Tq, std::size_t S, std::size_t VS, std::size_t Dv>
  requires product_shapes<Tq, S, VS, Dv>
[[nodiscard]] constexpr stack<T, S, Tq, Dv> weighted_values(const matrix<T, Tq, S>& w,
                                                            const matrix<T, VS, Dv>& values) {
  stack<T, S, Tq, Dv> out;
  for (std::size_t j = 0; j < S; ++j)
    for (std::size_t i = 0; i < Tq; ++i)
      for (std::size_t c = 0; c < Dv; ++c) out(j, i, c) = w.v[i * S + j] * values.v[j * Dv + c];
  return out;
}

/// step 6: context = weights V, (T, S) x (S, d_v) -> (T, d_v); the same sums as adding the
/// weighted values over their first index, in the same order
template <class T, std::size_t Tq, std::size_t S, std::size_t VS, std::size_t Dv>
  requires product_shapes<Tq, S, VS, Dv>
[[nodiscard]] constexpr matrix<T, Tq, Dv> context(const matrix<T, Tq, S>& w,
                                                  const matrix<T, VS, Dv>& values) {
  return matrix_product(w, values);
}

/// @brief step 6 as attention computes it, with qkv's NaN and infinity policy
/// (docs/numerics.md): context = weights V over the keys each query attends to. A key whose
/// scaled score is -inf (masked, or a -inf score) is skipped: its value is never read, so a NaN
/// or an infinity there cannot reach the query (0 * NaN would). A row of NaN weights (a NaN or
/// +inf score) gives a NaN row. A NaN or infinity in an attended value gives that element NaN,
/// or the infinity (NaN when +inf and -inf meet), as a sum with positive weights would; no
/// arithmetic is done on it (clang refuses that in a constant expression). Otherwise the sum is
/// context()'s, in the same order, without the skipped keys (whose terms would be zeros).
/// (T, S) scaled scores and weights, (S, d_v) values -> (T, d_v)
template <class T, std::size_t Tq, std::size_t S, std::size_t VS, std::size_t Dv>
  requires product_shapes<Tq, S, VS, Dv>
[[nodiscard]] constexpr matrix<T, Tq, Dv> attended_context(const matrix<T, Tq, S>& scaled_scores,
                                                           const matrix<T, Tq, S>& w,
                                                           const matrix<T, VS, Dv>& values) {
  constexpr bool inf = std::numeric_limits<T>::has_infinity;
  matrix<T, Tq, Dv> out;
  for (std::size_t i = 0; i < Tq; ++i) {
    const bool nan_row = S > 0 && w.v[i * S] != w.v[i * S];
    for (std::size_t c = 0; c < Dv; ++c) {
      if constexpr (std::numeric_limits<T>::has_quiet_NaN)
        if (nan_row) {
          out.v[i * Dv + c] = std::numeric_limits<T>::quiet_NaN();
          continue;
        }
      T s = T(0);
      bool first = true;
      unsigned seen = 0;  // 1 NaN, 2 +inf, 4 -inf
      for (std::size_t j = 0; j < S; ++j) {
        if (detail::is_minus_infinity(scaled_scores.v[i * S + j])) continue;  // masked: skipped
        const T x = values.v[j * Dv + c];
        if (x != x) {
          seen |= 1;
        } else if (inf && x == std::numeric_limits<T>::infinity()) {
          seen |= 2;
        } else if (inf && x == -std::numeric_limits<T>::infinity()) {
          seen |= 4;
        } else if (first) {
          s = w.v[i * S + j] * x;
          first = false;
        } else {
          s += w.v[i * S + j] * x;
        }
      }
      if constexpr (std::numeric_limits<T>::has_quiet_NaN)
        if ((seen & 1) || seen == 6) s = std::numeric_limits<T>::quiet_NaN();
      if constexpr (inf) {
        if (seen == 2) s = std::numeric_limits<T>::infinity();
        if (seen == 4) s = -std::numeric_limits<T>::infinity();
      }
      out.v[i * Dv + c] = s;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// whole calls

/// @brief attention of the queries of x over the keys and values of c, every step kept.
/// x (T, d) one token per row (per column with qkv::columns); c (S, d_c); weights in the layout L.
template <class T, std::size_t Tq, std::size_t S, std::size_t Dk, std::size_t Dv>
[[nodiscard]] constexpr attention_result<T, Tq, S, Dk, Dv> attend_projected(
    const matrix<T, Tq, Dk>& q, const matrix<T, S, Dk>& k, const matrix<T, S, Dv>& v,
    const attention_options<T>& options) {
  attention_result<T, Tq, S, Dk, Dv> r;
  r.queries = q;
  r.keys = k;
  r.values = v;
  r.scores = scores(q, k);                               // (T, S)
  r.scaled_scores = scale(r.scores, options.scale, Dk);  // (T, S)
  if constexpr (std::numeric_limits<T>::has_infinity)
    if (options.causal) r.scaled_scores = causal_masked(r.scaled_scores);
  r.weights = softmax_rows(r.scaled_scores);                           // (T, S), rows sum to 1
  r.context = attended_context(r.scaled_scores, r.weights, r.values);  // (T, d_v), masked keys skipped
  return r;
}

/// @brief cross-attention: queries from x, keys and values from c (their lengths may differ)
template <weight_layout_tag L, class T, std::size_t XR, std::size_t XC, std::size_t CR, std::size_t CC,
          std::size_t QR, std::size_t QC, std::size_t KR, std::size_t KC, std::size_t VR, std::size_t VC>
[[nodiscard]] constexpr auto cross_attention(const matrix<T, XR, XC>& x, const matrix<T, CR, CC>& c,
                                             const matrix<T, QR, QC>& wq, const matrix<T, KR, KC>& wk,
                                             const matrix<T, VR, VC>& wv, L layout,
                                             const attention_options<T>& options = {}) {
  const auto q = project(x, wq, layout);  // (T, d_k)
  const auto k = project(c, wk, layout);  // (S, d_k)
  const auto v = project(c, wv, layout);  // (S, d_v)
  return attend_projected(q, k, v, options);
}

/// @brief self-attention: queries, keys and values all from x
template <weight_layout_tag L, class T, std::size_t XR, std::size_t XC, std::size_t QR, std::size_t QC,
          std::size_t KR, std::size_t KC, std::size_t VR, std::size_t VC>
[[nodiscard]] constexpr auto self_attention(const matrix<T, XR, XC>& x, const matrix<T, QR, QC>& wq,
                                            const matrix<T, KR, KC>& wk, const matrix<T, VR, VC>& wv,
                                            L layout, const attention_options<T>& options = {}) {
  return cross_attention(x, x, wq, wk, wv, layout, options);
}

}  // namespace qkv
