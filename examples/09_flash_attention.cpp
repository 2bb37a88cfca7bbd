// 09_flash_attention.cpp: flash attention's online softmax, one key block at a time.
//
// The materialised attention of examples 01-08 writes the whole score matrix q kᵀ (T, S), takes
// the maximum of each row, then its sum, then the weights, then weights · v. Flash attention
// (Dao et al. 2022) never writes that matrix: it reads the keys in blocks of B and keeps, for each
// query, three running numbers, updated after every block (the online softmax, Milakov &
// Gimelshein 2018; core/online_softmax.hpp):
// - m: the largest score seen so far
// - l: the sum of e^(s_j - m) over the keys seen so far
// - o: the sum of e^(s_j - m) v_j over the keys seen so far (one row of d_v numbers)
// When a block brings a larger score, everything kept so far was measured against the old
// maximum: l and o are multiplied by the rescale factor e^(m_old - m_new). After the last block,
// o / l is the query's output, in exact arithmetic the same as softmax(q kᵀ) v. The streaming
// path of runtime/attention.hpp does exactly this, with blocks of 128 keys.
//
// The worked case is tutorial 001's (examples/02): "Life is short, eat dessert first", the 6x16
// embedding and the weights that torch.manual_seed(123) draws (bit for bit PyTorch's, proven in
// example 02), query 2 (the word "is") over the six keys in blocks of B = 2. Every step is proven
// below: the running m, l and rescale factor after each block by hand, and the final output equal
// to the materialised softmax(q kᵀ) v within a rounding bound derived here. The page is
// docs/examples/09_flash_attention.md.
#include <array>
#include <cstddef>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include <qkv/core/attention.hpp>
#include <qkv/core/check.hpp>
#include <qkv/core/math.hpp>
#include <qkv/core/matrix.hpp>
#include <qkv/core/online_softmax.hpp>
#include <qkv/core/text.hpp>
#include <qkv/core/torch.hpp>
#include <qkv/io/print.hpp>

#include "../tests/data/reference_001.hpp"

namespace qkv::examples::flash {

namespace check = qkv::check;
namespace ref64 = qkv_test::reference_001;
using qkv::matrix;
using qkv::torch::generator;

// =============================================================================================
// Step 1: tutorial 001's sentence, embedding and weights (example 02 proves them bit for bit)

constexpr std::string_view sentence = "Life is short, eat dessert first";
constexpr qkv::text::dictionary<sentence.size()> dc{sentence};
// sentence_int: Life=0, is=4, short=5, eat=2, dessert=1, first=3 (sorted by code point)
constexpr auto sentence_int = dc.ids<6>();
static_assert(sentence_int == std::array<std::size_t, 6>{0, 4, 5, 2, 1, 3});
/// the six words in sentence order: the labels of the queries and keys
constexpr std::array<std::string_view, 6> tokens{"Life", "is", "short", "eat", "dessert", "first"};

// torch.manual_seed(123); embed = nn.Embedding(6, 16); embedded_sentence = embed(sentence_int)
constexpr auto embedded_sentence = [] {
  generator gen{123};
  return qkv::torch::embedding_lookup(gen.embedding<float, 6, 16>(), sentence_int);
}();
// the notebook prints row 1 ('is') as [0.5146, 0.9938, -0.2587, ...] (4 decimals: within 5e-5)
static_assert(qkv::proven<check::near(embedded_sentence(1, 0), 0.5146f, 5e-5f) && check::near(embedded_sentence(1, 2), -0.2587f, 5e-5f)>);

// torch.manual_seed(123); W_query = rand(24, 16), W_key = rand(24, 16), W_value = rand(28, 16)
constexpr std::size_t d = 16, d_k = 24, d_v = 28, S = 6;
struct single_head_weights {
  matrix<float, d_k, d> W_query, W_key;
  matrix<float, d_v, d> W_value;
};
constexpr single_head_weights weights = [] {
  generator gen{123};
  single_head_weights w{};
  w.W_query = gen.rand<float, d_k, d>();
  w.W_key = gen.rand<float, d_k, d>();
  w.W_value = gen.rand<float, d_v, d>();
  return w;
}();
// W_query[0][0]: the first draw after manual_seed(123) is 0xb24bcdfe; 0x4bcdfe / 2^24 = 0.29611194
static_assert(weights.W_query(0, 0) == 4967934.0f / 16777216.0f);

// the materialised attention of every query (example 02): queries, keys (6, 24), values (6, 28),
// scores q kᵀ (6, 6), scaled_scores = scores / float(sqrt(24)) (6, 6), weights, context (6, 28)
constexpr auto attn = qkv::self_attention(qkv::transposed(embedded_sentence), weights.W_query, weights.W_key,
                                          weights.W_value, qkv::columns);

// =============================================================================================
// Step 2: query 2 ('is', row 1) over the keys in blocks of B = 2. Its six scaled scores
// s_j = q_2 · k_j / sqrt(24) are read two at a time, (Life, is), (short, eat), (dessert, first):
// after each block the running maximum m, the running sum l of e^(s_j - m) and the running output
// o = sum of e^(s_j - m) v_j are all that is kept; the row of weights never exists.

constexpr std::size_t B = 2, query = 1, blocks = qkv::online_blocks<S, B>;
static_assert(blocks == 3);
constexpr auto s = qkv::row(attn.scaled_scores, query);  // (1, 6): q_2 · k_j / sqrt(24)
constexpr auto trace = qkv::online_softmax_blocks<B>(s, attn.values);

// The scaled scores of query 2, by hand from the notebook's omega_2 (4 decimals) / 4.8990:
//   [8.5808, -7.6597, 3.2558, 1.0395, 11.1466, -0.4800] / 4.8990
//   = [1.7515, -1.5635, 0.6646, 0.2122, 2.2753, -0.0980]
// (the float32 values print the same; 4 decimals: within 5e-5)
constexpr matrix<float, 1, 6> s_by_hand{{{1.7515f, -1.5635f, 0.6646f, 0.2122f, 2.2753f, -0.0980f}}};
static_assert(qkv::proven<check::near(s, s_by_hand, 5e-5f)>);

// ---------------------------------------------------------------------------------------------
// Step 3: block 0 (Life, is). Scores [1.7515, -1.5635]; nothing kept yet (m = -inf), so
// - m = max(1.7515, -1.5635) = 1.7515, rescale = 0 (there is nothing to rescale),
// - p = [e^0, e^(-1.5635 - 1.7515)] = [1, e^-3.3150] = [1, 0.03633]
// - l = 1 + 0.03633 = 1.03633,  o = 1 · v_Life + 0.03633 · v_is
// m is a maximum, exact: the float score itself; p_0 = e^0 = 1 exactly, so l = 1 + p_1 in float
static_assert(trace.after[0].m == s(0, 0) && trace.after[0].rescale == 0.0f);
static_assert(trace.after[0].l == 1.0f + qkv::exp(s(0, 1) - s(0, 0)));
// The tolerance of each hand value below: its scores are 4-decimal prints, off by 5e-5 each, so an
// exponent s_j - m is off by at most 1e-4 and its e^(...) by at most 1.0001e-4 of itself; the
// hand value is printed to 5 decimals (5e-6); the float computation's own rounding is below
// 1.5e-6 of l (eta, step 6). Block 0: 0.03633 · 1.0001e-4 + 5e-6 + 1.6e-6 = 1.1e-5
static_assert(qkv::proven<check::near(trace.after[0].l, 1.03633f, 1.1e-5f)>);

// Step 4: block 1 (short, eat). Scores [0.6646, 0.2122], both below m = 1.7515: the maximum stays, so
// - rescale = e^(1.7515 - 1.7515) = e^0 = 1 (exactly: l and o are kept as they are)
// - p = [e^(0.6646 - 1.7515), e^(0.2122 - 1.7515)] = [e^-1.0869, e^-1.5393] = [0.33726, 0.21453]
// - l = 1.03633 + 0.33726 + 0.21453 = 1.58813
static_assert(trace.after[1].m == s(0, 0) && trace.after[1].block_max == s(0, 2) && trace.after[1].rescale == 1.0f);
// (0.03633 + 0.33726 + 0.21453) 1.0001e-4 + 5e-6 + 1.5e-6 · 1.6 = 6.6e-5
static_assert(qkv::proven<check::near(trace.after[1].l, 1.58813f, 6.6e-5f)>);

// Step 5: block 2 (dessert, first). Scores [2.2753, -0.0980]: 2.2753 > 1.7515, a new maximum, so
// - rescale = e^(1.7515 - 2.2753) = e^-0.5238 = 0.59227: l and o shrink to the new maximum
// - p = [e^0, e^(-0.0980 - 2.2753)] = [1, e^-2.3733] = [1, 0.09317]
// - l = 1.58813 · 0.59227 + 1 + 0.09317 = 0.94060 + 1.09317 = 2.03377
// (example 02's softmax sum over the whole row, 2.0338: the same number, reached block by block)
static_assert(trace.after[2].m == s(0, 4) && trace.after[2].rescale == qkv::exp(s(0, 0) - s(0, 4)));
// the rescale: 0.59227 · 1.0001e-4 + 5e-6 + its exp's 2u (1e-7) = 6.5e-5
static_assert(qkv::proven<check::near(trace.after[2].rescale, 0.59227f, 6.5e-5f)>);
// l: 1.58813 (off by 6.6e-5) times 0.59227 (off by 6.5e-5), plus 0.09317 (off by 9.4e-6):
// 6.6e-5 · 0.6 + 1.6 · 6.5e-5 + 9.4e-6 + 5e-6 + 1.5e-6 · 2.04 = 1.6e-4
static_assert(qkv::proven<check::near(trace.after[2].l, 2.03377f, 1.6e-4f)>);

// the weights never existed as a row, yet o / l is the weighted sum: weight of 'dessert' =
// 1 / l = 1 / 2.03377 = 0.49170, example 02's attention_weights_2[4] (0.4917). After block 2,
// p_dessert = e^0 = 1 exactly, so its weight is 1 / l in float: l's 1.6e-4 moves it by at most
// 1.6e-4 / 2.03^2 = 3.9e-5; the print 5e-6, the division 3e-8
static_assert(qkv::proven<check::near(1.0f / trace.after[2].l, 0.49170f, 3.9e-5f + 5e-6f + 3e-8f)>);

// =============================================================================================
// Step 6: flash equals materialised, within a bound derived here. In Higham's standard model
// (as core/bounds.hpp) fl(a op b) = (a op b)(1 + d), |d| <= u = 2^-24 for float, and exp is within
// 1 ulp (2u, math.hpp).
// Both paths start from the same float32 scaled scores s and values v; each is compared with the
// exact softmax(s) v of those inputs:
// - online (core/online_softmax.hpp's online_softmax_error): every term e^(s_j - m) v_jc of the
//   output meets at most K = S + 4 nb + 3 roundings (its exp, its product, the additions after
//   it, and per later block the rescale's exp and multiplication), and the subtractions s_j - m_b,
//   m_old - m_new shift its exponent by at most (m - s_j) u <= range u (they telescope). So o and l
//   are each within eta = (1 + gamma_K)(1 + range u/(1 - range u)) - 1 of their exact values,
//   relative to sum_j e^(s_j - m) (|v_jc|), and o / l within 2 eta/(1 - eta) max_j |v_jc| + the
//   division's u.
// - materialised (core/softmax.hpp then matrix_product): e_k = exp(s_k - m) (exp 2u and the
//   subtraction's range u), the row sum (S - 1 additions), w_k = e_k / sum (1), context =
//   sum_k w_k v_kc left to right (a product and up to S - 1 additions: S). Each term's numerator
//   meets gamma_{S+3} and the range factor, the shared denominator gamma_{S+1} and the range
//   factor: |(1 + a)/(1 + b) - 1| <= (|a| + |b|)/(1 - |b|) of sum_k w_k |v_kc| <= max_k |v_kc|
//   (qkv::materialised_softmax_error).
// Here S = 6, B = 2: nb = 3 and K = 6 + 12 + 3 = 21; gamma_21 = 1.25e-6; the range of query 2's
// scores is 2.2753 + 1.5635 = 3.84, so range u = 2.3e-7.
namespace bound {
/// (Tq, Dv): the bound per output element, for each row's range and each column's max |v|
template <class F, std::size_t Tq, std::size_t Sk, std::size_t Dv, class E>
constexpr matrix<double, Tq, Dv> per_element(const matrix<F, Tq, Sk>& scores, const matrix<F, Sk, Dv>& v, E error) {
  matrix<double, Tq, Dv> out{};
  for (std::size_t i = 0; i < Tq; ++i) {
    double hi = double(scores(i, 0)), lo = hi;
    for (std::size_t j = 1; j < Sk; ++j) {
      hi = double(scores(i, j)) > hi ? double(scores(i, j)) : hi;
      lo = double(scores(i, j)) < lo ? double(scores(i, j)) : lo;
    }
    for (std::size_t c = 0; c < Dv; ++c) {
      double vmax = 0;
      for (std::size_t j = 0; j < Sk; ++j) {
        const double a = v(j, c) < 0 ? -double(v(j, c)) : double(v(j, c));
        vmax = a > vmax ? a : vmax;
      }
      out(i, c) = error(hi - lo, vmax);
    }
  }
  return out;
}
template <class F, std::size_t Bk, std::size_t Tq, std::size_t Sk, std::size_t Dv>
constexpr matrix<double, Tq, Dv> online(const matrix<F, Tq, Sk>& scores, const matrix<F, Sk, Dv>& v) {
  return per_element(scores, v, [](double range, double vmax) { return qkv::online_softmax_error<F>(Sk, Bk, range, vmax); });
}
template <class F, std::size_t Tq, std::size_t Sk, std::size_t Dv>
constexpr matrix<double, Tq, Dv> materialised(const matrix<F, Tq, Sk>& scores, const matrix<F, Sk, Dv>& v) {
  return per_element(scores, v, [](double range, double vmax) { return qkv::materialised_softmax_error<F>(Sk, range, vmax); });
}
}  // namespace bound

// the flash output of every query (6, 28), blocks of 2, and the bounds of both paths
constexpr auto flash_context = qkv::online_attention<B>(attn.scaled_scores, attn.values);
constexpr auto online_bound = bound::online<float, B>(attn.scaled_scores, attn.values);
constexpr auto materialised_bound = bound::materialised<float>(attn.scaled_scores, attn.values);

// the worked query's output is the trace's
static_assert(qkv::row(flash_context, query) == trace.output);
// query 2's bound, by hand: range 3.84, K = 21: eta = 1.25e-6 + 2.3e-7 = 1.48e-6; the largest
// |v| of a column is 5.2343 (column 27, the value of 'first'), so 2 eta 5.2343 + u 5.2343 = 1.58e-5
static_assert(qkv::max_abs_difference(qkv::row(online_bound, query), matrix<double, 1, 28>{}) < 1.6e-5);

// THE PROOF: flash attention (blocks of 2) equals the materialised softmax(q kᵀ) v, for every
// query and every column, within the sum of the two bounds (each path is within its own bound of
// the same exact value)
static_assert(qkv::proven<check::within(flash_context, attn.context, online_bound + materialised_bound)>);

// and both are within their bounds of PyTorch's float64 context? The float64 reference starts
// from float64 scores, not from these float32 ones: that comparison is example 02's (it carries
// the scores' own errors). Here the exact value of the float32 inputs is computed in double (the
// same materialised formula, its own rounding bounded by the same derivation with u = 2^-53)
constexpr auto exact_context = qkv::softmax_rows(qkv::matrix_cast<double>(attn.scaled_scores));
constexpr auto exact_output = qkv::matrix_product(exact_context, qkv::matrix_cast<double>(attn.values));
constexpr auto double_bound =
    bound::materialised<double>(qkv::matrix_cast<double>(attn.scaled_scores), qkv::matrix_cast<double>(attn.values));
static_assert(qkv::proven<check::within(flash_context, exact_output, online_bound + double_bound)>);
static_assert(qkv::proven<check::within(attn.context, exact_output, materialised_bound + double_bound)>);

// the block size changes the rounding, not the result: B = 1 (every key its own block), 3, and
// 6 (one block: a plain two-pass softmax) agree with B = 2 within their two bounds
static_assert(qkv::proven<check::within(qkv::online_attention<1>(attn.scaled_scores, attn.values), flash_context,
                            bound::online<float, 1>(attn.scaled_scores, attn.values) + online_bound)>);
static_assert(qkv::proven<check::within(qkv::online_attention<3>(attn.scaled_scores, attn.values), flash_context,
                            bound::online<float, 3>(attn.scaled_scores, attn.values) + online_bound)>);
static_assert(qkv::proven<check::within(qkv::online_attention<6>(attn.scaled_scores, attn.values), flash_context,
                            bound::online<float, 6>(attn.scaled_scores, attn.values) + online_bound)>);

// the notebook's context_vector_2 (4 decimals), reached block by block: -1.5993 for column 0.
// Its distance from ours is example 02's float32 bound on the context (2.2e-3 at most; it carries
// the projections' and scores' errors) plus the online and materialised bounds (each below 1.6e-5 for query 2) and 5e-5
static_assert(qkv::proven<check::near(double(trace.output(0, 0)), -1.5993, 2.2e-3 + 1.6e-5 + 1.6e-5 + 5e-5)>);
static_assert(qkv::proven<check::near(double(trace.output(0, 0)), ref64::context_vector_2[0][0], 2.2e-3 + 1.6e-5 + 1.6e-5)>);

// =============================================================================================
// The data of the page (docs/examples/09_flash_attention.md; a page steps through the blocks):
// for block b, the keys it reads, the running m, l, the rescale factor, p = e^(s_j - m) of its
// keys, the running unnormalised output o and the partial output o / l (the output if the
// sentence ended after block b)
constexpr std::array<std::size_t, blocks> block_first_key{0, 2, 4};
constexpr auto block_m = [] {
  std::array<float, blocks> a{};
  for (std::size_t b = 0; b < blocks; ++b) a[b] = trace.after[b].m;
  return a;
}();
constexpr auto block_l = [] {
  std::array<float, blocks> a{};
  for (std::size_t b = 0; b < blocks; ++b) a[b] = trace.after[b].l;
  return a;
}();
constexpr auto block_rescale = [] {
  std::array<float, blocks> a{};
  for (std::size_t b = 0; b < blocks; ++b) a[b] = trace.after[b].rescale;
  return a;
}();
/// p_j = e^(s_j - m) for key j against the maximum after its block (the same expression as the step)
constexpr auto key_p = [] {
  std::array<float, S> a{};
  for (std::size_t j = 0; j < S; ++j) a[j] = qkv::exp(float(s(0, j) - block_m[j / B]));
  return a;
}();
constexpr auto block_o = [] {
  std::array<matrix<float, 1, d_v>, blocks> a{};
  for (std::size_t b = 0; b < blocks; ++b) a[b] = trace.after[b].o;
  return a;
}();
constexpr auto block_partial = [] {
  std::array<matrix<float, 1, d_v>, blocks> a{};
  for (std::size_t b = 0; b < blocks; ++b) a[b] = qkv::online_softmax_output(trace.after[b]);
  return a;
}();
// block 0's p are the ones the step used: l = p_0 + p_1
static_assert(key_p[0] == 1.0f && block_l[0] == key_p[0] + key_p[1]);
// after the last block, the partial output is the output
static_assert(block_partial[blocks - 1] == trace.output);

// =============================================================================================
inline void walkthrough() {
  using qkv::io::torch_str;
  std::cout << "Flash attention's online softmax, step by step (tutorial 001's sentence), proven at compile time\n\n"
            << "sentence = '" << sentence << "', 6 tokens, embedding (6, 16), W_query/W_key (24, 16), W_value (28, 16)\n"
            << "(torch.manual_seed(123), as example 02; bit for bit PyTorch's)\n\n"
            << "query 2 ('is'), its scaled scores s = q_2 · k_j / sqrt(24) over the keys:\n";
  for (std::size_t j = 0; j < S; ++j) std::cout << "  " << tokens[j] << " " << s(0, j) << "\n";
  std::cout << "\nThe materialised softmax needs the whole row first (its maximum, then its sum). The online softmax reads\n"
            << "the keys in blocks of B = " << B << " and keeps m (running maximum), l (running sum of e^(s - m))\n"
            << "and o (running sum of e^(s - m) v); a larger maximum rescales l and o by e^(m_old - m_new).\n\n";
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::size_t j0 = block_first_key[b];
    std::cout << "block " << b << " (" << tokens[j0] << ", " << tokens[j0 + 1] << "): scores [" << s(0, j0) << ", "
              << s(0, j0 + 1) << "]\n"
              << "  m = " << block_m[b] << (b > 0 && block_m[b] != block_m[b - 1] ? " (a new maximum)" : "")
              << "   rescale e^(m_old - m_new) = " << block_rescale[b]
              << (b == 0 ? " (nothing kept yet)" : block_rescale[b] == 1.0f ? " (maximum unchanged)" : "") << "\n"
              << "  p = e^(s - m) = [" << key_p[j0] << ", " << key_p[j0 + 1] << "]   l = " << block_l[b] << "\n"
              << "  o (first 4 of 28) = " << torch_str(qkv::block<1, 4>(block_o[b], 0, 0), true) << "\n"
              << "  o / l, the output so far (first 4) = " << torch_str(qkv::block<1, 4>(block_partial[b], 0, 0), true)
              << "\n";
  }
  std::cout << "\nflash output of query 2 = o / l =\n" << torch_str(trace.output, true) << "\n"
            << "materialised softmax(q kᵀ) v, row 2 =\n" << torch_str(qkv::row(attn.context, query), true) << "\n"
            << "largest difference over all 6 queries and 28 columns: "
            << qkv::max_abs_difference(qkv::matrix_cast<double>(flash_context), qkv::matrix_cast<double>(attn.context))
            << "; proven bound (online + materialised, derived in the standard model): at most "
            << qkv::max_abs_difference(online_bound + materialised_bound, matrix<double, 6, 28>{}) << "\n";
}

// ---------------------------------------------------------------------------------------------
// the learner's page (qkv explain flash --html FILE, with the page framework of io/page.hpp):
// steps 1 to 6 above, their prose the Step comments (read by scripts/page_notes.py); one step per
// key block, with the block's scores, p = e^(s - m), the running m, l and rescale factor, the
// running o and the output so far o / l, so a reader steps through the blocks
template <class Page>
void page(Page& p) {
  using how = typename Page::how;
  const std::vector<std::string> words(tokens.begin(), tokens.end());
  const std::vector<std::string> is{std::string(tokens[query])};
  auto row_of = [](const auto& m, std::size_t i) { return qkv::row(m, i); };
  p.with_truth();  // its matrices without a how are exact inputs, or marked derived()
  p.step(1);
  p.matrix("embedded_sentence", embedded_sentence).rows(words);
  p.matrix("attn.queries", attn.queries).rows(words).caption("attn.queries = x W_queryᵀ");
  p.matrix("attn.keys", attn.keys).rows(words).caption("attn.keys = x W_keyᵀ");
  p.matrix("attn.values", attn.values).rows(words).caption("attn.values = x W_valueᵀ");
  p.step(2);
  p.matrix("q_2", row_of(attn.queries, query)).rows(is).how(how::block("attn.queries", query));
  p.matrix("omega_2", row_of(attn.scores, query)).rows(is).cols(words).how(how::dot("q_2", "attn.keys", d_k));
  p.matrix("s", s).rows(is).cols(words).how(how::divided("omega_2", double(qkv::sqrt(24.0f)), "1 / sqrt(24), as a division by float(sqrt(24)) = 4.8989797"));
  // each block: its scores, the running state after it (a working row [block max, m, rescale,
  // l, o], data only; the state and o shown are its columns), p = e^(s - m), o / l: the page's
  // steps compute them as online_softmax_step does (core/flat_steps.hpp's online_state)
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::size_t j0 = block_first_key[b];
    const std::string id = "block" + std::to_string(b);
    const std::vector<std::string> keys{std::string(tokens[j0]), std::string(tokens[j0 + 1])};
    p.step(int(3 + b));
    p.matrix(id + ".s", matrix<float, 1, 2>{{{s(0, j0), s(0, j0 + 1)}}}).rows(is).cols(keys).caption(id + ".s: the block's scores")
        .how(how::block("s", 0, j0));
    matrix<float, 1, 4 + d_v> run{};
    run(0, 0) = trace.after[b].block_max, run(0, 1) = block_m[b], run(0, 2) = block_rescale[b], run(0, 3) = block_l[b];
    for (std::size_t c = 0; c < d_v; ++c) run(0, 4 + c) = block_o[b](0, c);
    p.matrix(id + ".run", run)
        .rows(is)
        .caption(id + ": the running state [block max, m, rescale, l, o] after the block")
        .how(how::online_state(id + ".s", "attn.values", b == 0 ? std::string() : "block" + std::to_string(b - 1) + ".run", 2, 0, j0))
        .hidden();
    p.matrix(id + ".state", matrix<float, 1, 4>{{{trace.after[b].block_max, block_m[b], block_rescale[b], block_l[b]}}})
        .rows(is)
        .cols({"block max", "m = max(m_old, block max)", "rescale e^(m_old - m)", "l = l_old rescale + sum p"})
        .caption(id + ".state: the running state after the block")
        .how(how::block(id + ".run", 0, 0));
    p.matrix(id + ".p", matrix<float, 1, 2>{{{key_p[j0], key_p[j0 + 1]}}}).rows(is).cols(keys).caption(id + ".p = e^(s - m)")
        .how(how::online_p(id + ".s", id + ".state"));
    p.matrix(id + ".o", block_o[b]).rows(is).caption(id + ".o = o_old rescale + p_1 v_1 + p_2 v_2").how(how::block(id + ".run", 0, 4));
    auto partial = p.matrix(id + ".output", block_partial[b]);
    partial.rows(is).caption(id + ".output = o / l: the output if the keys ended here").how(how::online_output(id + ".o", id + ".state"));
    if (b + 1 == blocks)
      partial.proven(row_of(attn.context, query), "attn.context, row 'is' (the materialised softmax(q kᵀ) v)",
                     qkv::max_abs_difference(row_of(online_bound, query) + row_of(materialised_bound, query),
                                             matrix<double, 1, d_v>{}),
                     "online + materialised bound (step 6)");
  }
  p.step(6);
  p.matrix("attn.scores", attn.scores).rows(words).cols(words).how(how::dot("attn.queries", "attn.keys", d_k)).hidden();
  p.matrix("attn.scaled_scores", attn.scaled_scores).rows(words).cols(words).caption("attn.scaled_scores: every query's")
      .how(how::divided("attn.scores", double(qkv::sqrt(24.0f)), "1 / sqrt(24), as a division by float(sqrt(24)) = 4.8989797"));
  p.matrix("attn.weights", attn.weights).rows(words).cols(words).how(how::softmax("attn.scaled_scores"));
  p.heatmap("the materialised weights (flash never writes them)", {"attn.weights"});
  p.matrix("attn.context", attn.context).rows(words).how(how::matmul("attn.weights", "attn.values", S));
  p.matrix("flash_context", flash_context).rows(words).caption("flash_context: flash attention, blocks of 2")
      .how(how::online_attention("attn.scaled_scores", "attn.values", B))
      .proven(attn.context, "attn.context", qkv::max_abs_difference(online_bound + materialised_bound, matrix<double, S, d_v>{}),
              "online + materialised bound, at most");
  p.matrix("bound", online_bound + materialised_bound).rows(words).caption("the derived bound per element: online + materialised")
      .derived_because("it is the bound the example proves for its own inputs (a check, not a step: the error "
               "analysis of step 6 over these scores' range and values' magnitudes)");
}

}  // namespace qkv::examples::flash

#ifndef QKV_EXAMPLE_NO_MAIN
int main() { qkv::examples::flash::walkthrough(); }
#endif
