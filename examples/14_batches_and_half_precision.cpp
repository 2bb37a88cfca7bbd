// 14_batches_and_half_precision.cpp: a padded batch of sentences of different lengths, and the
// same batch from bfloat16 and float16 inputs with float32 accumulation.
//
// A model runs many sentences at once: a batch. Tensors are rectangular, so the shorter sentences
// are padded to the longest one's length N, and a key padding mask (PyTorch's key_padding_mask,
// true = padding) keeps every query away from the padding keys (core/batch.hpp). Models also keep
// their numbers in 16 bits, bfloat16 or float16 (core/half.hpp), and compute in float32. The
// worked case is a batch of three: tutorial 001's sentence "Life is short, eat dessert first"
// (6 tokens), the shorter "eat dessert first" (3 tokens, padded with 3 zero rows) and an empty
// sequence (6 padding rows), with 001's embedding and weights (torch.manual_seed(123), as
// examples 02 and 10).
//
// Proven below: each sentence's rows of the batch are its attention alone BIT FOR BIT, and why
// (step 3); padding keys get weight exactly 0, padded query rows and the empty sequence have a
// stated result (step 4); with q, k, v rounded to bfloat16 or float16 the result stays within a
// bound derived here of the float32 one (step 6); PyTorch's float64 batch with its
// key_padding_mask and its own bfloat16 rounding agree (step 7, scripts/fixtures/torch_chapter2.py); the
// same for H = 2 heads with an output projection, PyTorch's nn.MultiheadAttention itself (step 8),
// and for cross-attention over a padded memory (step 9). The page is
// docs/examples/14_batches_and_half_precision.md.
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <qkv/core/attention.hpp>
#include <qkv/core/batch.hpp>
#include <qkv/core/bounds.hpp>
#include <qkv/core/check.hpp>
#include <qkv/core/half.hpp>
#include <qkv/core/matrix.hpp>
#include <qkv/core/multihead.hpp>
#include <qkv/core/text.hpp>
#include <qkv/core/torch.hpp>
#include <qkv/io/print.hpp>

#include "../tests/data/chapter2/torch_chapter2.hpp"
#include "chapter2_bounds.hpp"

namespace qkv::examples::batches {

namespace check = qkv::check;
namespace torch64 = qkv_test::torch_chapter2::batch;
using qkv::matrix;
using qkv::stack;
using qkv::torch::generator;

// =============================================================================================
// Step 1: the batch. Tutorial 001's dictionary (Life 0, dessert 1, eat 2, first 3, is 4, short
// 5), its embedding (6, 16) and its weights W_query, W_key (24, 16), W_value (28, 16). Sentence
// 0 is 001's, 6 tokens; sentence 1 is "eat dessert first", ids [2, 1, 3], 3 tokens, padded to
// N = 6 with zero rows (an embedding's padding_idx row is zeros); sentence 2 is empty, 6 zero rows.
//   x (3, 6, 16): sentence b's token i at (b, i, :);  lengths [6, 3, 0]
//   key_padding_mask (3, 6): [[0 0 0 0 0 0], [0 0 0 1 1 1], [1 1 1 1 1 1]]   (1 = padding)

constexpr std::string_view sentence = "Life is short, eat dessert first";
constexpr qkv::text::dictionary<sentence.size()> dc{sentence};
constexpr auto sentence_int = dc.ids<6>();
static_assert(sentence_int == std::array<std::size_t, 6>{0, 4, 5, 2, 1, 3});
constexpr std::array<std::size_t, 3> short_int{2, 1, 3};  // eat dessert first
constexpr std::array<std::string_view, 6> tokens{"Life", "is", "short", "eat", "dessert", "first"};
constexpr std::size_t B = 3, N = 6, d = 16, d_k = 24, d_v = 28;
constexpr std::array<std::size_t, B> lengths{6, 3, 0};

// torch.manual_seed(123); embed = nn.Embedding(6, 16); the two sentences' rows   (6, 16), (3, 16)
constexpr auto embedding = [] {
  generator gen{123};
  return gen.embedding<float, 6, 16>();
}();
constexpr auto embedded_sentence = qkv::torch::embedding_lookup(embedding, sentence_int);  // (6, 16)
constexpr auto embedded_short = qkv::torch::embedding_lookup(embedding, short_int);        // (3, 16)
struct single_head_weights {
  matrix<float, d_k, d> W_query, W_key;
  matrix<float, d_v, d> W_value;
};
// torch.manual_seed(123); W_query = rand(24, 16); W_key = rand(24, 16); W_value = rand(28, 16)
constexpr single_head_weights weights = [] {
  generator gen{123};
  single_head_weights w{};
  w.W_query = gen.rand<float, d_k, d>();
  w.W_key = gen.rand<float, d_k, d>();
  w.W_value = gen.rand<float, d_v, d>();
  return w;
}();
constexpr stack<float, B, N, d> x = [] {
  stack<float, B, N, d> s{};
  s[0] = embedded_sentence;
  s[1] = qkv::padded<N>(embedded_short);  // rows 3..5: zeros
  return s;                               // s[2]: all zeros
}();
static_assert(qkv::key_padding_mask<B, N>(lengths) ==
              matrix<bool, B, N>{{{false, false, false, false, false, false},
                                  {false, false, false, true, true, true},
                                  {true, true, true, true, true, true}}});

// =============================================================================================
// Step 2: the batch's attention in one call: each sentence projected (its padding rows too),
// scores (6, 6) per sentence, scaled by 1/sqrt(24), padding keys set to -inf, softmax, context.
//   batch.sequence[b]: queries, keys (6, 24), values (6, 28), scores, weights (6, 6), context (6, 28)
constexpr auto batch = qkv::batch_self_attention(x, lengths, weights.W_query, weights.W_key, weights.W_value, qkv::out_in);

// each sentence alone, no padding: 001's sentence (6 tokens) and "eat dessert first" (3 tokens)
constexpr auto alone0 = qkv::self_attention(embedded_sentence, weights.W_query, weights.W_key, weights.W_value, qkv::out_in);
constexpr auto alone1 = qkv::self_attention(embedded_short, weights.W_query, weights.W_key, weights.W_value, qkv::out_in);

/// whether two float (or double) matrices hold the same bits (== alone would take -0 for +0)
template <class F, std::size_t R, std::size_t C>
  requires(std::is_same_v<F, float> || std::is_same_v<F, double>)
constexpr bool same_bits(const matrix<F, R, C>& a, const matrix<F, R, C>& b) {
  using U = std::conditional_t<std::is_same_v<F, float>, std::uint32_t, std::uint64_t>;
  for (std::size_t k = 0; k < R * C; ++k)
    if (std::bit_cast<U>(a.v[k]) != std::bit_cast<U>(b.v[k])) return false;
  return true;
}

// Step 3: THE PROOF. Each sentence's rows of the batch are its attention alone, bit for bit.
// Why exactly: row i of x Wᵀ is the same 16 products summed in the same order whatever rows lie
// below it, so q, k, v of a real token are the same; a score q_i · k_j (j real) is the same 24
// terms; the padding keys' scores become -inf, so the softmax's maximum is over the same real
// scores, e^(-inf - max) = 0 adds nothing to the sum (s + 0 = s exactly, s >= 1) and 0 / s = 0;
// the context skips -inf keys, so it sums the same terms in the same order. Sentence 0 has no
// padding: it is plain self-attention.
static_assert(same_bits(batch.sequence[0].context, alone0.context) && same_bits(batch.sequence[0].weights, alone0.weights));
static_assert(same_bits(qkv::block<3, d_k>(batch.sequence[1].queries, 0, 0), alone1.queries));
static_assert(same_bits(qkv::block<3, 3>(batch.sequence[1].weights, 0, 0), alone1.weights));
static_assert(same_bits(qkv::block<3, d_v>(batch.sequence[1].context, 0, 0), alone1.context));
static_assert(qkv::proven<check::equal(qkv::block<3, d_v>(batch.sequence[1].context, 0, 0), alone1.context)>);

// =============================================================================================
// Step 4: the padding. (a) A padding key gets weight exactly 0 (+0) in every row of sentence 1,
// and every weight of the empty sentence is 0 (no key to attend to: qkv's rule for a fully
// masked row; its context is 0; PyTorch 1.13 gives NaN there; the runtime's batch_attention the
// same 0, and its output projection b_o).
static_assert(same_bits(qkv::block<N, 3>(batch.sequence[1].weights, 0, 3), matrix<float, N, 3>{}));
static_assert(same_bits(batch.sequence[2].weights, matrix<float, N, N>{}) && same_bits(batch.sequence[2].context, matrix<float, N, d_v>{}));
// (b) Padded QUERY rows are computed like the others (PyTorch and the runtime mask keys, not
// queries): sentence 1's rows 3..5 are zero embeddings, so q = 0 W_queryᵀ = 0 exactly (0 x w =
// +0 for w >= 0, torch.rand's range), every score 0 / sqrt(24) = 0, and the softmax over the 3
// real keys is e^0 / (1 + 1 + 1) = 1/3 each, float(1/3) = 0.3333333432674408 exactly:
// weights [1/3, 1/3, 1/3, 0, 0, 0], and the context the mean of v_eat, v_dessert, v_first
// computed as (w v_0 + w v_1) + w v_2 in float.
static_assert(same_bits(qkv::block<3, d_k>(batch.sequence[1].queries, 3, 0), matrix<float, 3, d_k>{}));
static_assert(qkv::row(batch.sequence[1].weights, 4) == matrix<float, 1, 6>{{{1.0f / 3, 1.0f / 3, 1.0f / 3, 0, 0, 0}}});
static_assert(1.0f / 3 == 0.3333333432674408);
constexpr auto padded_row_context = [] {
  const auto& v = batch.sequence[1].values;
  matrix<float, 1, d_v> c;
  for (std::size_t j = 0; j < d_v; ++j) c.v[j] = (1.0f / 3 * v(0, j) + 1.0f / 3 * v(1, j)) + 1.0f / 3 * v(2, j);
  return c;
}();
static_assert(same_bits(qkv::row(batch.sequence[1].context, 5), padded_row_context));

// Step 5: sentence 1 by hand. Its scores are the (3..5, 3..5) block of sentence 0's, bit for bit
// (the same q and k rows): only the softmax changes, over 3 keys instead of 6.
static_assert(same_bits(qkv::block<3, 3>(batch.sequence[1].scores, 0, 0), qkv::block<3, 3>(batch.sequence[0].scores, 3, 3)));
// 'eat' (query 0) over [eat, dessert, first]: scaled scores [6.2655, 7.2959, -15.0503], the last
// three of its row in sentence 0, [-1.0650, -0.9576, 15.2930, 6.2655, 7.2959, -15.0503], where
// 'short' (15.2930) takes 0.99954 of the weight (5 decimals: within 5e-6). Alone, the largest
// is 'dessert' (7.2959): e^(6.2655 - 7.2959) = e^-1.0304 = 0.356864, e^(-15.0503 - 7.2959) =
// e^-22.3462 = 1.97e-10, sum 1.356864: weights [0.263007, 0.736993, 1.45e-10, 0, 0, 0].
// Tolerance: the 4-decimal scores are off by 5e-5 each, their difference by 1e-4, which moves a
// two-way softmax by at most w_0 w_1 1e-4 = 1.9e-5; the 6-decimal hand values 5e-7; float32
// rounding below 1e-6: 2.5e-5 in all
static_assert(qkv::proven<check::near(qkv::row(batch.sequence[1].weights, 0),
                                      matrix<float, 1, 6>{{{0.263007f, 0.736993f, 1.45e-10f, 0, 0, 0}}}, 2.5e-5f)>);
static_assert(qkv::proven<check::near(batch.sequence[0].weights(3, 2), 0.99954f, 5e-6f)>);

// =============================================================================================
// Step 6: 16-bit inputs. A model that keeps q, k and v in bfloat16 (a 16-bit KV cache) rounds
// each one once (u = 2^-8: 8 significant bits) and computes in float32: core/batch.hpp's 16-bit
// batch_attend_projected converts them to float exactly and runs the same float steps.
//   q16, k16 (3, 6, 24) bfloat16,  v16 (3, 6, 28);  result: float, as in step 2
template <class S>
struct sixteen_bit_case {
  stack<S, B, N, d_k> q, k;
  stack<S, B, N, d_v> v;
  qkv::batch_result<float, B, N, d_k, d_v> r;
};
template <class S>
constexpr sixteen_bit_case<S> in_16_bits() {
  stack<float, B, N, d_k> q, k;
  stack<float, B, N, d_v> v;
  for (std::size_t b = 0; b < B; ++b) {
    q[b] = batch.sequence[b].queries;
    k[b] = batch.sequence[b].keys;
    v[b] = batch.sequence[b].values;
  }
  sixteen_bit_case<S> c{qkv::rounded_to<S>(q), qkv::rounded_to<S>(k), qkv::rounded_to<S>(v), {}};
  c.r = qkv::batch_attend_projected(c.q, c.k, c.v, lengths);
  return c;
}
constexpr auto bf16 = in_16_bits<qkv::bfloat16>();
constexpr auto fp16 = in_16_bits<qkv::float16>();

/// |float(q16) - q| elementwise, exactly (two floats' difference is a double)
template <class S, std::size_t R, std::size_t C>
constexpr matrix<double, R, C> rounding_error(const matrix<S, R, C>& rounded, const matrix<float, R, C>& exact) {
  matrix<double, R, C> e;
  for (std::size_t k = 0; k < R * C; ++k) {
    const double diff = double(static_cast<float>(rounded.v[k])) - double(exact.v[k]);
    e.v[k] = diff < 0 ? -diff : diff;
  }
  return e;
}
/// u |x| elementwise: the rounding's bound
template <std::size_t R, std::size_t C>
constexpr matrix<double, R, C> relative(double u, const matrix<float, R, C>& m) {
  matrix<double, R, C> e;
  for (std::size_t k = 0; k < R * C; ++k) e.v[k] = u * (m.v[k] < 0 ? -double(m.v[k]) : double(m.v[k]));
  return e;
}
// every rounding is within u |x| (none of these numbers is near float16's subnormals or its 65504)
static_assert(qkv::proven<check::within(qkv::as_float(bf16.q[0]), batch.sequence[0].queries,
                                        relative(0x1p-8, batch.sequence[0].queries))>);
static_assert(qkv::proven<check::within(qkv::as_float(fp16.v[1]), batch.sequence[1].values,
                                        relative(0x1p-11, batch.sequence[1].values))>);
// step 3's proof holds in bfloat16 too (sentence 1 against its 3 bfloat16 rows alone: the same
// argument on the converted values), and the padding keys still weigh exactly 0
constexpr auto bf16_alone1 = qkv::attend_projected(qkv::block<3, d_k>(bf16.q[1], 0, 0), qkv::block<3, d_k>(bf16.k[1], 0, 0),
                                                   qkv::block<3, d_v>(bf16.v[1], 0, 0), qkv::attention_options<float>{});
static_assert(same_bits(qkv::block<3, d_v>(bf16.r.sequence[1].context, 0, 0), bf16_alone1.context));
static_assert(same_bits(qkv::block<N, 3>(bf16.r.sequence[1].weights, 0, 3), matrix<float, N, 3>{}));

// THE BOUND. Reference: the exact attention of the float32 q, k, v of step 2 (as given). The
// 16-bit run computes in float (u = 2^-24) from inputs off by dq = |q16 - q| <= 2^-8 |q|
// (float16: 2^-11), dk, dv (rounding_error above, exact). Through the steps:
//   scores: |fl(q16 · k16) - q · k| <= gamma_24 (|q16| + dq)(|k16| + dk) + dq |k16| + |q16| dk + dq dk
//           (core/bounds.hpp's product_error with the computed operands: the exact expansion)
//   scaled: / D, D = float(sqrt(24)) on both sides, one rounding more: delta_ij = ds_ij / D + 2u |s_ij|
//   weights: a score moved by delta_j moves the exact softmax w_j by a factor within e^(+-2 delta)
//           (delta = the row's largest), and by the mean value theorem (dw_j/ds_k = w_j (1[j=k] -
//           w_k)) by at most e^(4 delta) w_j sum_{k != j} w_k (delta_j + delta_k): the smaller of
//           the two, which is small for a dominant weight; plus the float softmax's own rounding
//           rho = (2 (2 + range) + n) u relative (core/bounds.hpp), w taken as w16 / (1 - rho)
//   context: product_error(w16, dw, v16, dv) over the real keys (padding keys: weight exactly 0
//           on both sides, never read)
// The float32 run is the same with dq = dk = dv = 0. Each run is within its bound of the
// reference, so the two within the sum of the bounds. The 1.01 covers the double arithmetic of
// the bound itself (a few ulps of 1e-16). F: the type the run computed in (u = 2^-24 float,
// 2^-53 double).
template <class F, std::size_t Dk, std::size_t Dv>
constexpr matrix<double, N, Dv> context_bound(const qkv::attention_result<F, N, N, Dk, Dv>& r,
                                              const matrix<double, N, Dk>& dq, const matrix<double, N, Dk>& dk,
                                              const matrix<double, N, Dv>& dv) {
  constexpr double u = qkv::bounds::unit_roundoff<F>();
  const auto q = qkv::matrix_cast<double>(r.queries), k = qkv::matrix_cast<double>(r.keys);
  const auto s = qkv::matrix_cast<double>(r.scaled_scores), w = qkv::matrix_cast<double>(r.weights);
  const auto ds = qkv::bounds::product_error<F>(q, dq, qkv::transposed(k), qkv::transposed(dk));  // (N, N)
  const double divisor = double(qkv::sqrt(F(Dk)));
  matrix<double, N, N> dw{};
  for (std::size_t i = 0; i < N; ++i) {
    double delta[N]{}, worst = 0, hi = 0, lo = 0;
    std::size_t n = 0;
    for (std::size_t j = 0; j < N; ++j) {
      if (qkv::detail::is_minus_infinity(s(i, j))) continue;  // padding: weight exactly 0 on both sides
      delta[j] = ds(i, j) / divisor + 2 * u * (s(i, j) < 0 ? -s(i, j) : s(i, j));
      worst = delta[j] > worst ? delta[j] : worst;
      hi = n == 0 || s(i, j) > hi ? s(i, j) : hi;
      lo = n == 0 || s(i, j) < lo ? s(i, j) : lo;
      ++n;
    }
    if (n == 0) continue;  // no key: weights 0 and context 0 on both sides
    const double rho = (2 * (2 + (hi - lo)) + double(n)) * u;
    const double grow2 = qkv::exp(2 * worst), grow4 = qkv::exp(4 * worst);
    for (std::size_t j = 0; j < N; ++j) {
      if (qkv::detail::is_minus_infinity(s(i, j))) continue;
      const double wj = w(i, j) / (1 - rho);
      double others = 0;
      for (std::size_t m = 0; m < N; ++m)
        if (m != j && !qkv::detail::is_minus_infinity(s(i, m))) others += w(i, m) / (1 - rho) * (delta[j] + delta[m]);
      const double simple = wj * (grow2 - 1), mean_value = grow4 * wj * others;
      dw(i, j) = 1.01 * (rho * wj + (simple < mean_value ? simple : mean_value));
    }
  }
  return qkv::bounds::product_error<F>(w, dw, qkv::matrix_cast<double>(r.values), dv);
}
template <class S>
constexpr stack<double, B, N, d_v> bound_16(const sixteen_bit_case<S>& c) {
  stack<double, B, N, d_v> out;
  for (std::size_t b = 0; b < B; ++b)
    out[b] = context_bound(c.r.sequence[b], rounding_error(c.q[b], batch.sequence[b].queries),
                           rounding_error(c.k[b], batch.sequence[b].keys), rounding_error(c.v[b], batch.sequence[b].values));
  return out;
}
constexpr stack<double, B, N, d_v> bound_32 = [] {
  stack<double, B, N, d_v> out;
  for (std::size_t b = 0; b < B; ++b)
    out[b] = context_bound(batch.sequence[b], matrix<double, N, d_k>{}, matrix<double, N, d_k>{}, matrix<double, N, d_v>{});
  return out;
}();
constexpr auto bound_bf16 = bound_16(bf16), bound_fp16 = bound_16(fp16);
constexpr auto context_stack(const qkv::batch_result<float, B, N, d_k, d_v>& r) {
  stack<float, B, N, d_v> s;
  for (std::size_t b = 0; b < B; ++b) s[b] = r.sequence[b].context;
  return s;
}
constexpr auto context32 = context_stack(batch);
constexpr auto context_bf16 = context_stack(bf16.r), context_fp16 = context_stack(fp16.r);
template <std::size_t R, std::size_t C>
constexpr auto plus(const stack<double, B, R, C>& a, const stack<double, B, R, C>& b) {
  stack<double, B, R, C> out;
  for (std::size_t n = 0; n < B; ++n) out[n] = a[n] + b[n];
  return out;
}
static_assert(qkv::proven<check::within(context_bf16, context32, plus(bound_bf16, bound_32))>);
static_assert(qkv::proven<check::within(context_fp16, context32, plus(bound_fp16, bound_32))>);


// =============================================================================================
// Step 7: PyTorch. scripts/fixtures/torch_chapter2.py builds the same padded batch, x (3, 6, 16), and
// applies key_padding_mask as nn.MultiheadAttention does (the scores masked_fill'ed with -inf
// before the softmax), in float64 from the same float32 inputs. Sentence 2 is NaN there (0/0),
// 0 here: the stated difference. Sentences 0 and 1, every row (padded query rows included):
// qkv's batch in double within twice the bound of examples/chapter2_bounds.hpp (each side within
// the bound of the exact value, whatever the order of its sums), at most 1e-11 (by hand as in
// example 10: q, k within 1.4e-14, scores within 1.2e-12, /4.9, weights and context about 3e-12).
constexpr auto x64 = [] {
  stack<double, B, N, d> s;
  for (std::size_t b = 0; b < B; ++b) s[b] = qkv::matrix_cast<double>(x[b]);
  return s;
}();
constexpr auto W_query64 = qkv::matrix_cast<double>(weights.W_query), W_key64 = qkv::matrix_cast<double>(weights.W_key);
constexpr auto W_value64 = qkv::matrix_cast<double>(weights.W_value);
constexpr auto batch64 = qkv::batch_self_attention(x64, lengths, W_query64, W_key64, W_value64, qkv::out_in);
template <std::size_t b>
constexpr auto bound64 = [] {
  namespace c2 = qkv::examples::chapter2;
  return c2::context_error(batch64.sequence[b], c2::projection_error(x64[b], W_query64),
                           c2::projection_error(x64[b], W_key64), c2::projection_error(x64[b], W_value64));
}();
static_assert(qkv::max_abs_difference(bound64<0>, matrix<double, N, d_v>{}) < 1e-11 &&
              qkv::max_abs_difference(bound64<1>, matrix<double, N, d_v>{}) < 1e-11);
static_assert(qkv::proven<check::within(batch64.sequence[0].context, matrix<double, N, d_v>{torch64::context_0}, bound64<0> + bound64<0>)>);
static_assert(qkv::proven<check::within(batch64.sequence[1].context, matrix<double, N, d_v>{torch64::context_1}, bound64<1> + bound64<1>)>);
// The 16-bit roundings are PyTorch's: the script sums x W_queryᵀ in qkv's order in float32 (its q
// is qkv's bit for bit, proven first), then .to(torch.bfloat16) and .to(torch.float16); qkv's
// rounding of the same floats gives the same bits, every one of q, k, v of sentences 0 and 1.
static_assert(qkv::matrix_cast<float>(matrix<double, N, d_k>{torch64::q32_0}) == batch.sequence[0].queries);
template <class S, std::size_t R, std::size_t C>
constexpr matrix<unsigned, R, C> bits_of(const matrix<S, R, C>& m) {
  matrix<unsigned, R, C> out;
  for (std::size_t k = 0; k < R * C; ++k) out.v[k] = m.v[k].bits;
  return out;
}
template <std::size_t R, std::size_t C>
constexpr matrix<unsigned, R, C> torch_bits(const unsigned short (&t)[R][C]) {
  matrix<unsigned, R, C> out;
  for (std::size_t i = 0; i < R; ++i)
    for (std::size_t j = 0; j < C; ++j) out.v[i * C + j] = t[i][j];
  return out;
}
static_assert(qkv::proven<check::equal(bits_of(bf16.q[0]), torch_bits(torch64::q_bf16_0)) &&
                          check::equal(bits_of(bf16.k[0]), torch_bits(torch64::k_bf16_0)) &&
                          check::equal(bits_of(bf16.v[0]), torch_bits(torch64::v_bf16_0)) &&
                          check::equal(bits_of(bf16.q[1]), torch_bits(torch64::q_bf16_1)) &&
                          check::equal(bits_of(bf16.k[1]), torch_bits(torch64::k_bf16_1)) &&
                          check::equal(bits_of(bf16.v[1]), torch_bits(torch64::v_bf16_1))>);
static_assert(qkv::proven<check::equal(bits_of(fp16.q[0]), torch_bits(torch64::q_fp16_0)) &&
                          check::equal(bits_of(fp16.k[0]), torch_bits(torch64::k_fp16_0)) &&
                          check::equal(bits_of(fp16.v[0]), torch_bits(torch64::v_fp16_0)) &&
                          check::equal(bits_of(fp16.q[1]), torch_bits(torch64::q_fp16_1)) &&
                          check::equal(bits_of(fp16.k[1]), torch_bits(torch64::k_fp16_1)) &&
                          check::equal(bits_of(fp16.v[1]), torch_bits(torch64::v_fp16_1))>);
// PyTorch's float64 attention on those bfloat16 values vs qkv's float32 one: both from the same
// inputs now, so no input error: qkv's run within context_bound<float> (dq = dk = dv = 0) of the
// exact value, PyTorch's within context_bound<double> (computed on qkv's double run of the same
// values; twice it, as in example 10, for PyTorch's own intermediates)
constexpr auto bf16_64 = [] {
  stack<double, B, N, d_k> q, k;
  stack<double, B, N, d_v> v;
  for (std::size_t b = 0; b < B; ++b) {
    q[b] = qkv::matrix_cast<double>(qkv::as_float(bf16.q[b]));
    k[b] = qkv::matrix_cast<double>(qkv::as_float(bf16.k[b]));
    v[b] = qkv::matrix_cast<double>(qkv::as_float(bf16.v[b]));
  }
  return qkv::batch_attend_projected(q, k, v, lengths);
}();
template <std::size_t b>
constexpr auto bound_bf16_torch = [] {
  constexpr matrix<double, N, d_k> none_k{};
  constexpr matrix<double, N, d_v> none_v{};
  const auto own = context_bound(bf16.r.sequence[b], none_k, none_k, none_v);
  const auto torch = context_bound(bf16_64.sequence[b], none_k, none_k, none_v);
  return own + torch + torch;
}();
static_assert(qkv::proven<check::within(bf16.r.sequence[0].context, matrix<double, N, d_v>{torch64::context_bf16_0}, bound_bf16_torch<0>)>);
static_assert(qkv::proven<check::within(bf16.r.sequence[1].context, matrix<double, N, d_v>{torch64::context_bf16_1}, bound_bf16_torch<1>)>);

// =============================================================================================
// Step 8: H heads. nn.MultiheadAttention(8, 2 heads, batch_first=True) with its own weights
// (scripts/fixtures/torch_chapter2.py: PyTorch's initialisation after manual_seed(15), in_proj_bias 0, an
// output bias bo drawn), in double: a batch of three sequences of 5 tokens of width 8, lengths
// 5, 3 and 0 (sequence 1's rows 3, 4 are zero rows; sequence 2 has no real token at all). Every
// sequence is core/multihead.hpp's computation (two heads of width 4, scale 1/sqrt(4) = 1/2, the
// heads side by side, concat Woᵀ + bo) with its padding keys masked in both heads.
//   mh_x (3, 5, 8), Wq Wk Wv Wo (8, 8), bo (1, 8);  per sequence: weights (2, 5, 5), output (5, 8)
namespace mh = qkv_test::torch_chapter2::multihead_batch;
constexpr std::size_t H = 2, T5 = 5, E = 8;
constexpr std::array<std::size_t, B> mh_lengths{5, 3, 0};
constexpr stack<double, B, T5, E> mh_x{{matrix<double, T5, E>{mh::x_0}, matrix<double, T5, E>{mh::x_1},
                                         matrix<double, T5, E>{mh::x_2}}};
constexpr matrix<double, E, E> mh_wq{mh::wq}, mh_wk{mh::wk}, mh_wv{mh::wv}, mh_wo{mh::wo};
constexpr matrix<double, 1, E> mh_bo{mh::bo};
constexpr auto mh_batch = qkv::batch_multihead_self_attention<H>(mh_x, mh_lengths, mh_wq, mh_wk, mh_wv, qkv::out_in);
constexpr auto mh_output = qkv::output_projection(mh_batch, mh_wo, mh_bo);  // (3, 5, 8)
// each sequence alone through core/multihead.hpp: 5 tokens and 3 tokens, no padding
constexpr auto mh_alone0 = qkv::multihead_self_attention<H>(mh_x[0], mh_wq, mh_wk, mh_wv, qkv::out_in);
constexpr auto mh_alone1 = qkv::multihead_self_attention<H>(qkv::block<3, E>(mh_x[1], 0, 0), mh_wq, mh_wk, mh_wv, qkv::out_in);
// THE PROOF, H heads: the real rows are the sequence alone bit for bit, weights of both heads and
// the output after Wo and bo. Why: step 3's argument in each head (a head is one attend call on
// its 4 columns of q, k, v; the real keys come first in every row, so the softmax's left-to-right
// sum meets the same terms in the same order and then adds +0s), and the concat and concat Woᵀ +
// bo are row-wise: row i sees only row i of the concat.
static_assert(same_bits(mh_output[0], qkv::output_projection(mh_alone0, mh_wo, mh_bo)));
static_assert(same_bits(qkv::block<3, E>(mh_output[1], 0, 0), qkv::output_projection(mh_alone1, mh_wo, mh_bo)));
static_assert(same_bits(qkv::block<3, 3>(mh_batch.sequence[1].weights[0], 0, 0), mh_alone1.weights[0]) &&
              same_bits(qkv::block<3, 3>(mh_batch.sequence[1].weights[1], 0, 0), mh_alone1.weights[1]));
// Padding keys weigh exactly +0 in both heads (every row of sequence 1, padded rows included).
static_assert(same_bits(qkv::block<T5, 2>(mh_batch.sequence[1].weights[0], 0, 3), matrix<double, T5, 2>{}) &&
              same_bits(qkv::block<T5, 2>(mh_batch.sequence[1].weights[1], 0, 3), matrix<double, T5, 2>{}));
// Padded query rows by hand: sequence 1's rows 3, 4 are zero rows, so q = 0 Wqᵀ = 0 exactly (no
// in-projection bias: PyTorch's is 0), both heads' scores are 0 / 2 = 0 against the 3 real keys,
// and each head's weights are e^0 / (1 + 1 + 1) = 1/3 in double: [1/3, 1/3, 1/3, 0, 0]. The concat
// row is then (w v_0 + w v_1) + w v_2 over all 8 columns of V (both heads' columns), w = double(1/3),
// the output that row's concat Woᵀ + bo: rows 3 and 4 are the same bits, and the same row as
// sequence 1's context averaged by hand: concat = [0.1396, 0.1188, 0.3056, -0.0764, -0.0820,
// 0.2681, 0.3843, -0.0755], output [-0.3552, 0.5809, -0.1893, 0.4380, 0.3019, -0.1611, 0.1587,
// 0.6016] (4 decimals, PyTorch's own rows 3, 4 below say the same within the bound).
static_assert(qkv::row(mh_batch.sequence[1].weights[0], 3) == matrix<double, 1, T5>{{{1.0 / 3, 1.0 / 3, 1.0 / 3, 0, 0}}} &&
              qkv::row(mh_batch.sequence[1].weights[1], 4) == matrix<double, 1, T5>{{{1.0 / 3, 1.0 / 3, 1.0 / 3, 0, 0}}});
constexpr auto mh_padded_concat = [] {
  const auto& v = mh_batch.sequence[1].values;  // (5, 8): both heads' value columns
  matrix<double, 1, E> c;
  for (std::size_t j = 0; j < E; ++j) c.v[j] = (1.0 / 3 * v(0, j) + 1.0 / 3 * v(1, j)) + 1.0 / 3 * v(2, j);
  return c;
}();
static_assert(same_bits(qkv::row(mh_batch.sequence[1].concat, 3), mh_padded_concat) &&
              same_bits(qkv::row(mh_output[1], 3), qkv::row(mh_output[1], 4)));
static_assert(qkv::proven<check::near(mh_padded_concat, matrix<double, 1, E>{{{0.1396, 0.1188, 0.3056, -0.0764, -0.0820, 0.2681, 0.3843, -0.0755}}}, 5e-5)>);
static_assert(qkv::proven<check::near(qkv::row(mh_output[1], 3), matrix<double, 1, E>{{{-0.3552, 0.5809, -0.1893, 0.4380, 0.3019, -0.1611, 0.1587, 0.6016}}}, 5e-5)>);
// Sequence 2 has no real key: both heads' weights 0, concat 0, so every output row is 0 Woᵀ + bo:
// the products are ±0, their sum ±0, and ±0 + bo = bo exactly (PyTorch 1.13: NaN).
static_assert(same_bits(mh_batch.sequence[2].weights[0], matrix<double, T5, T5>{}) &&
              same_bits(mh_batch.sequence[2].concat, matrix<double, T5, E>{}));
static_assert(same_bits(qkv::row(mh_output[2], 0), mh_bo) && same_bits(qkv::row(mh_output[2], 4), mh_bo));
// PyTorch: nn.MultiheadAttention's float64 output with key_padding_mask, sequences 0 and 1, every
// row (padded query rows included), within twice the bound of examples/chapter2_bounds.hpp for H
// heads (multihead_output_error: each head's bound from the projections' (8 products each), the
// heads side by side, through concat Woᵀ (8 products) and + bo). Each side is within the bound of
// the exact value whatever the order of its sums. By hand, crudely (every term at its largest):
// |x| < 2.1, |Wq|, |Wk|, |Wv| < 0.44, so q, k, v within gamma_8 x 8 x 2.1 x 0.44 = 6.6e-15; a
// score (4 terms, |q| < 2.2, |k| < 1.5) within gamma_4 x 13.2 + 4 (6.6e-15 x 1.5 + 2.2 x 6.6e-15)
// = 1e-13, halved by the scale; the weights within 2 x 5e-14 relative, the context (|v| < 1.5)
// within ~2e-13; the output (8 terms, |Wo| < 0.35) within 8 x 0.35 x 2e-13 = 5.6e-13 < 1e-12.
// The elementwise bound computed here is far smaller (1.7e-14 at most).
template <std::size_t b>
constexpr auto mh_bound = [] {
  namespace c2 = qkv::examples::chapter2;
  const auto dq = c2::projection_error(mh_x[b], mh_wq), dk = c2::projection_error(mh_x[b], mh_wk);
  const auto dv = c2::projection_error(mh_x[b], mh_wv);
  return c2::multihead_output_error(mh_batch.sequence[b], dq, dk, dv, mh_wo, mh_output[b]);
}();
static_assert(qkv::max_abs_difference(mh_bound<0>, matrix<double, T5, E>{}) < 1e-12 &&
              qkv::max_abs_difference(mh_bound<1>, matrix<double, T5, E>{}) < 1e-12);
static_assert(qkv::proven<check::within(mh_output[0], matrix<double, T5, E>{mh::output_0}, mh_bound<0> + mh_bound<0>)>);
static_assert(qkv::proven<check::within(mh_output[1], matrix<double, T5, E>{mh::output_1}, mh_bound<1> + mh_bound<1>)>);

// =============================================================================================
// Step 9: cross-attention over a padded memory. The queries come from one padded batch and the
// keys and values from another, with its own lengths: a decoder reading an encoder's output (the
// memory). nn.MultiheadAttention(8, 2 heads, kdim = vdim = 6) after manual_seed(16): queries
// (3, 4, 8) with query lengths 4, 2, 3 (padded query rows zero), memory (3, 5, 6) with memory
// lengths 5, 2, 1 (its padded rows are random numbers: masked, they must change nothing).
//   Wq (8, 8), Wk Wv (8, 6): q (4, 8) from the queries, k v (5, 8) from the memory; output (4, 8)
constexpr std::array<std::size_t, B> cross_query_lengths{4, 2, 3}, cross_memory_lengths{5, 2, 1};
constexpr std::size_t Tc = 4, Sc = 5, Dc = 6;
constexpr stack<double, B, Tc, E> cross_x{{matrix<double, Tc, E>{mh::cross_x_0}, matrix<double, Tc, E>{mh::cross_x_1},
                                           matrix<double, Tc, E>{mh::cross_x_2}}};
constexpr stack<double, B, Sc, Dc> cross_memory{{matrix<double, Sc, Dc>{mh::cross_memory_0},
                                                 matrix<double, Sc, Dc>{mh::cross_memory_1},
                                                 matrix<double, Sc, Dc>{mh::cross_memory_2}}};
constexpr matrix<double, E, E> cross_wq{mh::cross_wq}, cross_wo{mh::cross_wo};
constexpr matrix<double, E, Dc> cross_wk{mh::cross_wk}, cross_wv{mh::cross_wv};
constexpr matrix<double, 1, E> cross_bo{mh::cross_bo};
constexpr auto cross = qkv::batch_multihead_cross_attention<H>(cross_x, cross_memory, cross_memory_lengths, cross_wq,
                                                               cross_wk, cross_wv, qkv::out_in);
constexpr auto cross_output = qkv::output_projection(cross, cross_wo, cross_bo);  // (3, 4, 8)
// THE PROOF, cross-attention: each sequence's real queries against its real memory rows alone
// (2 queries and 2 memory rows for sequence 1), through multihead_attend_projected, are its rows
// of the batch bit for bit, for the same reasons as step 8 (the random padded memory rows are
// never read: their keys are -inf).
template <std::size_t b>
constexpr auto cross_alone = [] {
  constexpr std::size_t t = cross_query_lengths[b], m = cross_memory_lengths[b];
  const auto xb = qkv::block<t, E>(cross_x[b], 0, 0);
  const auto mb = qkv::block<m, Dc>(cross_memory[b], 0, 0);
  const auto r = qkv::multihead_attend_projected<H>(qkv::project(xb, cross_wq, qkv::out_in), qkv::project(mb, cross_wk),
                                                    qkv::project(mb, cross_wv));
  return qkv::output_projection(r, cross_wo, cross_bo);  // (t, 8)
}();
static_assert(same_bits(qkv::block<4, E>(cross_output[0], 0, 0), cross_alone<0>) &&
              same_bits(qkv::block<2, E>(cross_output[1], 0, 0), cross_alone<1>) &&
              same_bits(qkv::block<3, E>(cross_output[2], 0, 0), cross_alone<2>));
// Sequence 1's padded query rows 2, 3 are zero rows: q = 0, each head's weights e^0 / (1 + 1) =
// [1/2, 1/2, 0, 0, 0] exactly, and the concat 0.5 v_0 + 0.5 v_1 (each product exact: a halving).
static_assert(qkv::row(cross.sequence[1].weights[0], 2) == matrix<double, 1, Sc>{{{0.5, 0.5, 0, 0, 0}}} &&
              qkv::row(cross.sequence[1].weights[1], 3) == matrix<double, 1, Sc>{{{0.5, 0.5, 0, 0, 0}}});
static_assert(same_bits(qkv::row(cross.sequence[1].concat, 3),
                        qkv::scaled(0.5, qkv::row(cross.sequence[1].values, 0)) + qkv::scaled(0.5, qkv::row(cross.sequence[1].values, 1))));
// Memory 2 has one real row: every query's weight on it is e^0 / 1 = 1 exactly, in both heads, the
// others +0; so each head's context is 1 x v_0 = v_0, every concat row is the memory's first value
// row v_0 = m_0 Wvᵀ = [-0.6139, -0.3724, -1.0254, -0.8466, -0.4262, -0.2024, -1.0678, 0.0676] bit
// for bit, whatever the query, and so every output row is the same.
static_assert(same_bits(qkv::block<Tc, 1>(cross.sequence[2].weights[0], 0, 0), qkv::filled<double, Tc, 1>(1.0)) &&
              same_bits(qkv::block<Tc, 4>(cross.sequence[2].weights[1], 0, 1), matrix<double, Tc, 4>{}));
static_assert(same_bits(qkv::row(cross.sequence[2].concat, 0), qkv::row(cross.sequence[2].values, 0)) &&
              same_bits(qkv::row(cross.sequence[2].concat, 3), qkv::row(cross.sequence[2].values, 0)));
static_assert(qkv::proven<check::near(qkv::row(cross.sequence[2].values, 0),
                                      matrix<double, 1, E>{{{-0.6139, -0.3724, -1.0254, -0.8466, -0.4262, -0.2024, -1.0678, 0.0676}}}, 5e-5)>);
// PyTorch's float64 cross-attention, every sequence and row, within twice the bound (as step 8;
// q from the queries with 8 products, k and v from the memory with 6)
template <std::size_t b>
constexpr auto cross_bound = [] {
  namespace c2 = qkv::examples::chapter2;
  const auto dq = c2::projection_error(cross_x[b], cross_wq);
  const auto dk = c2::projection_error(cross_memory[b], cross_wk);
  const auto dv = c2::projection_error(cross_memory[b], cross_wv);
  return c2::multihead_output_error(cross.sequence[b], dq, dk, dv, cross_wo, cross_output[b]);
}();
static_assert(qkv::max_abs_difference(cross_bound<0>, matrix<double, Tc, E>{}) < 1e-12);
static_assert(qkv::proven<check::within(cross_output[0], matrix<double, Tc, E>{mh::cross_output_0}, cross_bound<0> + cross_bound<0>)>);
static_assert(qkv::proven<check::within(cross_output[1], matrix<double, Tc, E>{mh::cross_output_1}, cross_bound<1> + cross_bound<1>)>);
static_assert(qkv::proven<check::within(cross_output[2], matrix<double, Tc, E>{mh::cross_output_2}, cross_bound<2> + cross_bound<2>)>);

// =============================================================================================
inline void walkthrough() {
  using qkv::io::torch_str;
  auto max_of = [](const stack<double, B, N, d_v>& s) {
    double m = 0;
    for (std::size_t b = 0; b < B; ++b) m = qkv::max_abs_difference(s[b], matrix<double, N, d_v>{}) > m ? qkv::max_abs_difference(s[b], matrix<double, N, d_v>{}) : m;
    return m;
  };
  auto max_diff = [](const stack<float, B, N, d_v>& a, const stack<float, B, N, d_v>& b) {
    double m = 0;
    for (std::size_t n = 0; n < B; ++n) {
      const double e = qkv::max_abs_difference(qkv::matrix_cast<double>(a[n]), qkv::matrix_cast<double>(b[n]));
      m = e > m ? e : m;
    }
    return m;
  };
  std::cout << "A padded batch and 16-bit inputs, proven at compile time\n\n"
            << "batch of 3, padded to N = 6: '" << sentence << "' (6 tokens), 'eat dessert first' (3), an empty one (0)\n"
            << "key_padding_mask (1 = padding) =\n" << torch_str(qkv::matrix_cast<int>(qkv::key_padding_mask<B, N>(lengths))) << "\n\n"
            << "sentence 1's scaled scores =\n" << torch_str(batch.sequence[1].scaled_scores) << "\n"
            << "sentence 1's weights =\n" << torch_str(batch.sequence[1].weights) << "\n\n"
            << "Each sentence's rows are its attention alone, bit for bit (proven); padding keys weigh exactly 0;\n"
            << "padded query rows see the real keys (weights 1/3 here: their queries are 0); the empty sentence gets weights 0.\n\n"
            << "q, k, v in bfloat16, float32 accumulation: max |context - float32 context| = " << max_diff(context_bf16, context32)
            << " (proven bound " << max_of(plus(bound_bf16, bound_32)) << ")\n"
            << "q, k, v in float16,  float32 accumulation: max |context - float32 context| = " << max_diff(context_fp16, context32)
            << " (proven bound " << max_of(plus(bound_fp16, bound_32)) << ")\n\n"
            << "PyTorch (scripts/fixtures/torch_chapter2.py): its float64 batch with key_padding_mask and qkv's double one differ by at most "
            << qkv::max_abs_difference(batch64.sequence[1].context, matrix<double, N, d_v>{torch64::context_1}) << " on sentence 1\n"
            << "(proven bound " << 2 * qkv::max_abs_difference(bound64<1>, matrix<double, N, d_v>{})
            << "); its .to(torch.bfloat16) and .to(torch.float16) give qkv's bits for every q, k, v (proven);\n"
            << "it gives NaN for the empty sentence, qkv 0.\n\n";
  double mh_diff = 0, mh_b = 0, cross_diff = 0, cross_b = 0;
  auto track = [](double& m, double x) { m = x > m ? x : m; };
  track(mh_diff, qkv::max_abs_difference(mh_output[0], matrix<double, T5, E>{mh::output_0}));
  track(mh_diff, qkv::max_abs_difference(mh_output[1], matrix<double, T5, E>{mh::output_1}));
  track(mh_b, 2 * qkv::max_abs_difference(mh_bound<0>, matrix<double, T5, E>{}));
  track(mh_b, 2 * qkv::max_abs_difference(mh_bound<1>, matrix<double, T5, E>{}));
  track(cross_diff, qkv::max_abs_difference(cross_output[0], matrix<double, Tc, E>{mh::cross_output_0}));
  track(cross_diff, qkv::max_abs_difference(cross_output[1], matrix<double, Tc, E>{mh::cross_output_1}));
  track(cross_diff, qkv::max_abs_difference(cross_output[2], matrix<double, Tc, E>{mh::cross_output_2}));
  track(cross_b, 2 * qkv::max_abs_difference(cross_bound<0>, matrix<double, Tc, E>{}));
  track(cross_b, 2 * qkv::max_abs_difference(cross_bound<1>, matrix<double, Tc, E>{}));
  track(cross_b, 2 * qkv::max_abs_difference(cross_bound<2>, matrix<double, Tc, E>{}));
  std::cout << "H = 2 heads, nn.MultiheadAttention's weights and output projection, lengths 5, 3, 0:\n"
            << "sequence 1's head 0 weights =\n" << torch_str(mh_batch.sequence[1].weights[0]) << "\n"
            << "sequence 1's output =\n" << torch_str(mh_output[1]) << "\n"
            << "Each sequence's rows are the sequence alone through core/multihead.hpp, bit for bit (proven);\n"
            << "padded query rows weigh the 3 real keys 1/3 each in both heads; no real key: every output row is bo.\n"
            << "PyTorch's nn.MultiheadAttention (float64, key_padding_mask): max |difference| = " << mh_diff
            << " (proven bound " << mh_b << ")\n\n"
            << "Cross-attention: queries (lengths 4, 2, 3) over a padded memory (lengths 5, 2, 1), kdim = vdim = 6:\n"
            << "memory 2's head 0 weights (one real row: weight 1) =\n" << torch_str(cross.sequence[2].weights[0]) << "\n"
            << "Each sequence's real rows are it alone, bit for bit (proven); random padded memory rows change nothing.\n"
            << "PyTorch's cross-attention: max |difference| = " << cross_diff << " (proven bound " << cross_b << ")\n";
}


// ---------------------------------------------------------------------------------------------
// the learner's page (qkv explain batches --html FILE, io/page.hpp): steps 1 to 9 above, their
// prose the Step comments; sentence 1's attention inside the batch (hover a cell: its sum), the
// three sentences' weights side by side, and the proofs
template <class Page>
void page(Page& p) {
  using how = typename Page::how;
  const std::vector<std::string> words(tokens.begin(), tokens.end());
  const std::vector<std::string> short_rows{"eat", "dessert", "first", "pad", "pad", "pad"};
  const std::vector<std::string> pads{"pad", "pad", "pad", "pad", "pad", "pad"};
  const auto rows_of = [&](std::size_t b) { return b == 0 ? words : b == 1 ? short_rows : pads; };
  // its matrices without a how are exact inputs, or marked derived(): the sentences' embeddings
  // and the weights are the inputs every sentence's steps start from
  p.with_truth();
  p.step(1);
  p.matrix("x[0]", x[0]).rows(words).caption("x[0]: tutorial 001's sentence, 6 tokens");
  p.matrix("x[1]", x[1]).rows(short_rows).caption("x[1]: 'eat dessert first', padded with 3 zero rows");
  // the lengths are an input (a whole number from 0 to 6 each); the mask follows them, and every
  // sentence's scaled scores follow the mask (page_how::padded_divided)
  const std::vector<std::string> sentences{"sentence 0", "sentence 1", "sentence 2"};
  p.matrix("lengths", matrix<float, 1, B>{{{float(lengths[0]), float(lengths[1]), float(lengths[2])}}})
      .cols(sentences);  // each sentence's real tokens (the rest is padding)
  p.matrix("key_padding_mask", qkv::matrix_cast<float>(qkv::key_padding_mask<B, N>(lengths)))
      .rows(sentences)
      .caption("key_padding_mask (1 = padding): lengths 6, 3, 0")
      .how(how::key_padding_mask("lengths"));
  p.step(2);
  p.matrix("W_query", weights.W_query).caption("W_query (24, 16): torch.rand after manual_seed(123)");
  p.matrix("W_key", weights.W_key).caption("W_key (24, 16)");
  p.matrix("W_value", weights.W_value).caption("W_value (28, 16)");
  // sentences 0 and 2 (all padding: zero rows, every key masked), data only: the heatmap's
  // weights of sentence 0 and 2, and step 4's, from their own steps
  p.matrix("x[2]", x[2]).rows(pads).caption("x[2]: the empty sentence, 6 zero rows").hidden();
  for (std::size_t b : {std::size_t(0), std::size_t(2)}) {
    const std::string id = "s" + std::to_string(b), xb = "x[" + std::to_string(b) + "]";
    const auto& r = batch.sequence[b];
    p.matrix(id + ".queries", r.queries).rows(rows_of(b)).how(how::dot(xb, "W_query", d)).hidden();
    p.matrix(id + ".keys", r.keys).rows(rows_of(b)).how(how::dot(xb, "W_key", d)).hidden();
    p.matrix(id + ".values", r.values).rows(rows_of(b)).how(how::dot(xb, "W_value", d)).hidden();
    p.matrix(id + ".scores", r.scores).rows(rows_of(b)).cols(rows_of(b)).how(how::dot(id + ".queries", id + ".keys", d_k)).hidden();
    p.matrix(id + ".scaled_scores", r.scaled_scores)
        .rows(rows_of(b))
        .cols(rows_of(b))
        .how(how::padded_divided(id + ".scores", double(qkv::sqrt(24.0f)),
                                 "1 / sqrt(24), as a division by float(sqrt(24)) = 4.8989797", "a padding key",
                                 "key_padding_mask", b))
        .hidden();
  }
  const auto& s1 = batch.sequence[1];
  p.matrix("s1.queries", s1.queries).rows(short_rows).caption("sentence 1's queries = x[1] W_queryᵀ (padding rows: 0)")
      .how(how::dot("x[1]", "W_query", d));
  p.matrix("s1.keys", s1.keys).rows(short_rows).caption("sentence 1's keys = x[1] W_keyᵀ").how(how::dot("x[1]", "W_key", d));
  p.matrix("s1.values", s1.values).rows(short_rows).caption("sentence 1's values = x[1] W_valueᵀ").how(how::dot("x[1]", "W_value", d));
  p.matrix("s1.scores", s1.scores).rows(short_rows).cols(short_rows).how(how::dot("s1.queries", "s1.keys", d_k));
  p.matrix("s1.scaled_scores", s1.scaled_scores)
      .rows(short_rows)
      .cols(short_rows)
      .how(how::padded_divided("s1.scores", double(qkv::sqrt(24.0f)),
                               "1 / sqrt(24), as a division by float(sqrt(24)) = 4.8989797", "a padding key",
                               "key_padding_mask", 1));
  p.matrix("s1.weights", s1.weights).rows(short_rows).cols(short_rows).how(how::softmax("s1.scaled_scores"));
  p.matrix("s1.context", s1.context).rows(short_rows).how(how::matmul("s1.weights", "s1.values", N));
  std::vector<std::string> ids, names;
  for (std::size_t b = 0; b < B; ++b) {
    const std::string id = "weights of sentence " + std::to_string(b);
    if (b != 1)
      p.matrix(id, batch.sequence[b].weights)
          .rows(rows_of(b))
          .cols(rows_of(b))
          .how(how::softmax("s" + std::to_string(b) + ".scaled_scores"))
          .hidden();
    ids.push_back(b == 1 ? "s1.weights" : id);
    names.push_back("sentence " + std::to_string(b) + " (length " + std::to_string(lengths[b]) + ")");
  }
  p.heatmap("the weights of the three sentences (padding keys: 0)", ids, names);
  p.step(3);
  p.matrix("sentence 1 rows 0..2", qkv::block<3, d_v>(s1.context, 0, 0))
      .rows({"eat", "dessert", "first"})
      .how(how::block("s1.context", 0))
      .proven(alone1.context, "alone1.context: 'eat dessert first' alone", 0.0, "bit for bit");
  p.step(4);
  p.matrix("sentence 2 weights", batch.sequence[2].weights)
      .rows(pads)
      .cols(pads)
      .how(how::block("weights of sentence 2", 0))
      .proven(matrix<float, N, N>{}, "zeros: no key to attend to", 0.0, "exactly");
  p.step(5);
  p.matrix("eat's weights", qkv::row(s1.weights, 0))
      .rows({"eat"})
      .cols(short_rows)
      .how(how::block("s1.weights", 0))
      .proven(matrix<float, 1, 6>{{{0.263007f, 0.736993f, 1.45e-10f, 0, 0, 0}}}, "by hand: [0.263007, 0.736993, 1.45e-10, 0, 0, 0]", 2.5e-5);
  p.step(6);
  // sentence 1's q, k, v rounded to bfloat16 and read back as floats (as_float: exactly), then
  // step 2's float32 steps on them (data only)
  const auto& r16 = bf16.r.sequence[1];
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(r16.queries)>, matrix<float, N, d_k>>);
  p.matrix("bf16.q", r16.queries).rows(short_rows).how(how::rounded16("s1.queries", "bfloat16")).hidden();
  p.matrix("bf16.k", r16.keys).rows(short_rows).how(how::rounded16("s1.keys", "bfloat16")).hidden();
  p.matrix("bf16.v", r16.values).rows(short_rows).how(how::rounded16("s1.values", "bfloat16")).hidden();
  p.matrix("bf16.scores", r16.scores).rows(short_rows).cols(short_rows).how(how::dot("bf16.q", "bf16.k", d_k)).hidden();
  p.matrix("bf16.scaled_scores", r16.scaled_scores)
      .rows(short_rows)
      .cols(short_rows)
      .how(how::padded_divided("bf16.scores", double(qkv::sqrt(24.0f)),
                               "1 / sqrt(24), as a division by float(sqrt(24)) = 4.8989797", "a padding key",
                               "key_padding_mask", 1))
      .hidden();
  p.matrix("bf16.weights", r16.weights).rows(short_rows).cols(short_rows).how(how::softmax("bf16.scaled_scores")).hidden();
  p.matrix("bf16 sentence 1 context", r16.context)
      .rows(short_rows)
      .caption("sentence 1's context from bfloat16 q, k, v, float32 accumulation")
      .how(how::matmul("bf16.weights", "bf16.v", N))
      .proven(s1.context, "the float32 context (step 2)", qkv::max_abs_difference(bound_bf16[1] + bound_32[1], matrix<double, N, d_v>{}),
              "the derived bound, at most");
  p.step(7);
  // sentence 1 in double: x[1] and the weights cast to double (exact), then step 2's steps in
  // double (data only: the page's module recomputes batch64's context with these steps)
  const auto& s64 = batch64.sequence[1];
  p.matrix("x64[1]", x64[1]).rows(short_rows).how(how::cast("x[1]")).hidden();
  p.matrix("key_padding_mask64", qkv::matrix_cast<double>(qkv::key_padding_mask<B, N>(lengths)))
      .how(how::cast("key_padding_mask"))
      .hidden();
  p.matrix("W_query64", W_query64).how(how::cast("W_query")).hidden();
  p.matrix("W_key64", W_key64).how(how::cast("W_key")).hidden();
  p.matrix("W_value64", W_value64).how(how::cast("W_value")).hidden();
  p.matrix("s1_64.queries", s64.queries).rows(short_rows).how(how::dot("x64[1]", "W_query64", d)).hidden();
  p.matrix("s1_64.keys", s64.keys).rows(short_rows).how(how::dot("x64[1]", "W_key64", d)).hidden();
  p.matrix("s1_64.values", s64.values).rows(short_rows).how(how::dot("x64[1]", "W_value64", d)).hidden();
  p.matrix("s1_64.scores", s64.scores).rows(short_rows).cols(short_rows).how(how::dot("s1_64.queries", "s1_64.keys", d_k)).hidden();
  p.matrix("s1_64.scaled_scores", s64.scaled_scores)
      .rows(short_rows)
      .cols(short_rows)
      .how(how::padded_divided("s1_64.scores", qkv::sqrt(24.0), "1 / sqrt(24), as a division by sqrt(24) in double",
                               "a padding key", "key_padding_mask64", 1))
      .hidden();
  p.matrix("s1_64.weights", s64.weights).rows(short_rows).cols(short_rows).how(how::softmax("s1_64.scaled_scores")).hidden();
  p.matrix("batch64 sentence 1 context", s64.context)
      .rows(short_rows)
      .caption("qkv's batch in double")
      .how(how::matmul("s1_64.weights", "s1_64.values", N))
      .proven(matrix<double, N, d_v>{torch64::context_1}, "PyTorch's float64 batch with key_padding_mask",
              2 * qkv::max_abs_difference(bound64<1>, matrix<double, N, d_v>{}), "twice the derived bound, at most");
  // one sequence of a multi-head batch in double, as batch_multihead_cross_attention computes it
  // (data only, but for `shown`): q = xq Wqᵀ, k = xkv Wkᵀ, v = xkv Wvᵀ (no in-projection bias);
  // each head's scores over its 4 columns, divided by sqrt(4) = 2, the padding keys masked; its
  // softmax; its weights times its 4 columns of v; the heads side by side; concat Woᵀ + bo
  const auto heads = [&](const std::string& id, const std::string& xq, const std::string& xkv, const auto& r,
                         const auto& out, const std::string& w, std::size_t b, std::size_t dq, std::size_t dkv,
                         const std::string& shown_weights = {}, std::vector<std::string> wrows = {},
                         std::vector<std::string> wcols = {}, std::string wcaption = {}) {
    constexpr std::size_t dh = E / H;
    p.matrix(id + ".queries", r.queries).how(how::dot(xq, w + "_wq", dq)).hidden();
    p.matrix(id + ".keys", r.keys).how(how::dot(xkv, w + "_wk", dkv)).hidden();
    p.matrix(id + ".values", r.values).how(how::dot(xkv, w + "_wv", dkv)).hidden();
    for (std::size_t h = 0; h < H; ++h) {
      const std::string hid = id + ".head" + std::to_string(h);
      const std::size_t n = r.weights[h].cols();
      p.matrix(hid + ".scores", r.scores[h]).how(how::dot(id + ".queries", id + ".keys", dh, h * dh, h * dh)).hidden();
      p.matrix(hid + ".scaled_scores", r.scaled_scores[h])
          .how(how::padded_divided(hid + ".scores", double(qkv::sqrt(double(dh))),
                                   "1 / sqrt(4), as a division by sqrt(4) = 2", "a padding key", w + "_padding", b))
          .hidden();
      const std::string wid = h == 0 && !shown_weights.empty() ? shown_weights : hid + ".weights";
      auto m = p.matrix(wid, r.weights[h]);
      m.how(how::softmax(hid + ".scaled_scores"));
      if (wid != shown_weights) m.hidden();
      else m.rows(wrows).cols(wcols).caption(wcaption);
      p.matrix(hid + ".context", r.context[h]).how(how::matmul(wid, id + ".values", n, 0, 0, h * dh)).hidden();
    }
    p.matrix(id + ".concat", r.concat).how(how::hconcat(id + ".head0.context", id + ".head1.context")).hidden();
    p.matrix(id + ".output", out).how(how::dot(id + ".concat", w + "_wo", E, 0, 0, w + "_bo")).hidden();
  };
  p.step(8);
  const std::vector<std::string> five{"0", "1", "2", "pad", "pad"};
  p.matrix("mh_x[0]", mh_x[0]).caption("mh_x[0]: sequence 0, 5 tokens of width 8");
  p.matrix("mh_x[1]", mh_x[1]).rows(five).caption("mh_x[1]: sequence 1, 3 tokens, padded with 2 zero rows");
  p.matrix("mh_wq", mh_wq).caption("Wq (8, 8): nn.MultiheadAttention's in_proj_weight[0:8] after manual_seed(15)");
  p.matrix("mh_wk", mh_wk).caption("Wk (8, 8): in_proj_weight[8:16]");
  p.matrix("mh_wv", mh_wv).caption("Wv (8, 8): in_proj_weight[16:24]");
  p.matrix("mh_wo", mh_wo).caption("Wo (8, 8): out_proj.weight");
  p.matrix("mh_bo", mh_bo).caption("bo (1, 8): out_proj.bias");
  p.matrix("mh_lengths", matrix<double, 1, B>{{{double(mh_lengths[0]), double(mh_lengths[1]), double(mh_lengths[2])}}})
      .cols(sentences);  // each sequence's real tokens
  p.matrix("mh_padding", qkv::matrix_cast<double>(qkv::key_padding_mask<B, T5>(mh_lengths)))
      .rows(sentences)
      .caption("the key padding mask of lengths 5, 3, 0 (1 = padding)")
      .how(how::key_padding_mask("mh_lengths"));
  heads("mh1", "mh_x[1]", "mh_x[1]", mh_batch.sequence[1], mh_output[1], "mh", 1, E, E, "mh sequence 1 weights, head 0", five,
        five, "sequence 1 (length 3), head 0's weights: padding keys 0, padded query rows 1/3");
  p.matrix("mh sequence 1 output", qkv::block<3, E>(mh_output[1], 0, 0))
      .rows({"0", "1", "2"})
      .caption("sequence 1's real rows after concat Woᵀ + bo")
      .how(how::block("mh1.output", 0))
      .proven(qkv::output_projection(mh_alone1, mh_wo, mh_bo), "the 3 tokens alone through core/multihead.hpp", 0.0,
              "bit for bit");
  heads("mh0", "mh_x[0]", "mh_x[0]", mh_batch.sequence[0], mh_output[0], "mh", 0, E, E);
  p.matrix("mh sequence 0 output", mh_output[0])
      .caption("sequence 0 (no padding)")
      .how(how::block("mh0.output", 0))
      .proven(matrix<double, T5, E>{mh::output_0}, "PyTorch's nn.MultiheadAttention, float64",
              2 * qkv::max_abs_difference(mh_bound<0>, matrix<double, T5, E>{}), "twice the derived bound, at most");
  p.step(9);
  p.matrix("cross_x[1]", cross_x[1]).rows({"q0", "q1", "pad", "pad"}).caption("cross_x[1]: 2 queries, padded with 2 zero rows");
  p.matrix("cross_memory[1]", cross_memory[1])
      .rows({"m0", "m1", "pad", "pad", "pad"})
      .caption("cross_memory[1]: 2 memory rows, then 3 random padding rows");
  p.matrix("cross_x[2]", cross_x[2]).rows({"q0", "q1", "q2", "pad"}).caption("cross_x[2]: 3 queries, padded with a zero row");
  p.matrix("cross_memory[2]", cross_memory[2])
      .rows({"m0", "pad", "pad", "pad", "pad"})
      .caption("cross_memory[2]: 1 memory row, then 4 random padding rows");
  p.matrix("cross_wq", cross_wq).caption("Wq (8, 8): after manual_seed(16)");
  p.matrix("cross_wk", cross_wk).caption("Wk (8, 6): kdim = 6");
  p.matrix("cross_wv", cross_wv).caption("Wv (8, 6): vdim = 6");
  p.matrix("cross_wo", cross_wo).caption("Wo (8, 8)");
  p.matrix("cross_bo", cross_bo).caption("bo (1, 8)");
  p.matrix("cross_lengths",
           matrix<double, 1, B>{{{double(cross_memory_lengths[0]), double(cross_memory_lengths[1]),
                                  double(cross_memory_lengths[2])}}})
      .cols(sentences);  // each memory's real rows
  p.matrix("cross_padding", qkv::matrix_cast<double>(qkv::key_padding_mask<B, Sc>(cross_memory_lengths)))
      .rows(sentences)
      .caption("the memories' key padding mask, lengths 5, 2, 1 (1 = padding)")
      .how(how::key_padding_mask("cross_lengths"));
  heads("cross1", "cross_x[1]", "cross_memory[1]", cross.sequence[1], cross_output[1], "cross", 1, E, Dc,
        "cross memory 1 weights, head 0", {"q0", "q1", "pad", "pad"}, {"m0", "m1", "pad", "pad", "pad"},
        "queries of sequence 1 over memory 1 (length 2), head 0: padded queries weigh 1/2, 1/2");
  heads("cross2", "cross_x[2]", "cross_memory[2]", cross.sequence[2], cross_output[2], "cross", 2, E, Dc);
  p.matrix("cross output 2", cross_output[2])
      .rows({"q0", "q1", "q2", "pad"})
      .caption("memory 2 has one real row: every query's weight on it is 1, so every output row is the same")
      .how(how::block("cross2.output", 0))
      .proven(matrix<double, Tc, E>{mh::cross_output_2}, "PyTorch's cross-attention, float64",
              2 * qkv::max_abs_difference(cross_bound<2>, matrix<double, Tc, E>{}), "twice the derived bound, at most");
}

}  // namespace qkv::examples::batches

#ifndef QKV_EXAMPLE_NO_MAIN
int main() { qkv::examples::batches::walkthrough(); }
#endif
