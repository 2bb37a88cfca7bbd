// 10_kv_cache_decoding.cpp: causal decoding with a KV cache, one token at a time.
//
// A decoder language model writes token t after tokens 0..t-1, and its causal attention gives
// token t the softmax over keys 0..t only. The keys and values of the earlier tokens never
// change, so a decoder keeps them in a KV cache (core/kv_cache.hpp): each step projects the NEW
// token only, appends its key and value to the cache, and attends with its one query against
// the cache. The worked case is tutorial 001's sentence "Life is short, eat dessert first" with
// the embedding and weights that torch.manual_seed(123) draws (example 02 proves them bit for
// bit PyTorch's), decoded word by word.
//
// Proven below: decoding token by token gives the rows of the full causal attention BIT FOR BIT
// (not merely close: every number meets the same operations on the same operands, see step 3);
// decoding two tokens at once needs the causal mask aligned at the bottom right (PyTorch's
// causal_lower_right), and the top-left alignment (causal_upper_left, is_causal=True on a
// non-square mask) gives a different, wrong answer; PyTorch's float64 decoding loop
// (scripts/fixtures/torch_chapter2.py) agrees with qkv's double one within a bound derived here. The page
// is docs/examples/10_kv_cache_decoding.md.
#include <array>
#include <cstddef>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include <qkv/core/attention.hpp>
#include <qkv/core/check.hpp>
#include <qkv/core/kv_cache.hpp>
#include <qkv/core/masks.hpp>
#include <qkv/core/matrix.hpp>
#include <qkv/core/text.hpp>
#include <qkv/core/torch.hpp>
#include <qkv/io/print.hpp>

#include "../tests/data/chapter2/torch_chapter2.hpp"
#include "chapter2_bounds.hpp"

namespace qkv::examples::kv_cache {

namespace check = qkv::check;
namespace torch64 = qkv_test::torch_chapter2::decode;
using qkv::causal_alignment;
using qkv::matrix;
using qkv::torch::generator;

// =============================================================================================
// Step 1: tutorial 001's sentence, embedding (6, 16) and weights W_query, W_key (24, 16) and
// W_value (28, 16), as in examples 02 and 09. The full causal attention of the six tokens at
// once is the reference: query i sees keys 0..i.

constexpr std::string_view sentence = "Life is short, eat dessert first";
constexpr qkv::text::dictionary<sentence.size()> dc{sentence};
constexpr auto sentence_int = dc.ids<6>();
static_assert(sentence_int == std::array<std::size_t, 6>{0, 4, 5, 2, 1, 3});
constexpr std::array<std::string_view, 6> tokens{"Life", "is", "short", "eat", "dessert", "first"};

// torch.manual_seed(123); embedded_sentence = nn.Embedding(6, 16)(sentence_int)   (6, 16)
constexpr auto embedded_sentence = [] {
  generator gen{123};
  return qkv::torch::embedding_lookup(gen.embedding<float, 6, 16>(), sentence_int);
}();
constexpr std::size_t d = 16, d_k = 24, d_v = 28, S = 6;
template <class T>
struct single_head_weights {
  matrix<T, d_k, d> W_query, W_key;
  matrix<T, d_v, d> W_value;
};
// torch.manual_seed(123); W_query = rand(24, 16); W_key = rand(24, 16); W_value = rand(28, 16)
constexpr single_head_weights<float> weights = [] {
  generator gen{123};
  single_head_weights<float> w{};
  w.W_query = gen.rand<float, d_k, d>();
  w.W_key = gen.rand<float, d_k, d>();
  w.W_value = gen.rand<float, d_v, d>();
  return w;
}();

/// the full causal attention of the sentence: queries (6, 24), keys (6, 24), values (6, 28),
/// scaled scores with -inf above the diagonal, weights (6, 6), context (6, 28)
template <class T>
constexpr auto causal_attention(const matrix<T, S, d>& x, const single_head_weights<T>& w) {
  qkv::attention_options<T> causal{};
  causal.causal = true;
  return qkv::attend_projected(qkv::project(x, w.W_query), qkv::project(x, w.W_key), qkv::project(x, w.W_value), causal);
}
constexpr auto causal = causal_attention(embedded_sentence, weights);

// =============================================================================================
// Step 2: decoding. Token t arrives alone: its embedding row x_t (1, 16) is projected to q_t,
// k_t (1, 24) and v_t (1, 28); k_t and v_t are appended to the cache (which then holds t + 1
// keys), and q_t attends to the cache: scores (1, 6) with the keys not yet there at -inf.
// The new token is the last position of the cache, so the causal mask, aligned at the bottom
// right, lets it see every cached key: j <= 0 + (t + 1) - 1 = t.

/// every decoding step's new row: weights (6, 6) (row t: step t's weights over the 6 cache
/// slots) and context (6, 28) (row t: step t's output), and the cache's length after each step
template <class T>
struct decoded {
  matrix<T, S, S> weights;
  matrix<T, S, d_v> context;
  std::array<std::size_t, S> length;
  matrix<T, S, d_k> queries;
  matrix<T, S, S> scaled_scores;  // row t: step t's scaled scores over the 6 slots (empty: -inf)
};
template <class T>
constexpr decoded<T> decode(const matrix<T, S, d>& x, const single_head_weights<T>& w) {
  qkv::kv_cache<T, S, d_k, d_v> cache;  // one head of one layer: room for 6 tokens
  decoded<T> out{};
  qkv::attention_options<T> causal{};
  causal.causal = true;
  for (std::size_t t = 0; t < S; ++t) {
    const auto x_t = qkv::row(x, t);                        // (1, 16): the new token only
    const auto q_t = qkv::project(x_t, w.W_query);          // (1, 24)
    cache.append(qkv::project(x_t, w.W_key), qkv::project(x_t, w.W_value));  // (1, 24), (1, 28)
    const auto a = qkv::attend_cache(q_t, cache, causal);  // causal_alignment::lower_right
    for (std::size_t j = 0; j < S; ++j) out.weights(t, j) = a.weights(0, j);
    for (std::size_t j = 0; j < S; ++j) out.scaled_scores(t, j) = a.scaled_scores(0, j);
    for (std::size_t c = 0; c < d_v; ++c) out.context(t, c) = a.context(0, c);
    for (std::size_t c = 0; c < d_k; ++c) out.queries(t, c) = q_t(0, c);
    out.length[t] = cache.length;
  }
  return out;
}
constexpr auto decoding = decode(embedded_sentence, weights);
static_assert(decoding.length == std::array<std::size_t, 6>{1, 2, 3, 4, 5, 6});

// Step 3: THE PROOF. Decoding token by token gives full causal attention's rows, bit for bit.
// Why exactly, not merely closely: q_t = x_t W_queryᵀ sums the same 16 products in the same
// order as row t of x W_queryᵀ (and k_t, v_t likewise); a score q_t · k_j is the same 24-term
// sum in the same order; the division by float(sqrt(24)) is the same; the keys not yet in the
// cache and the future keys of the full attention are both -inf, so both softmaxes take the
// same maximum and add e^-inf = 0 for them (s + 0 = s exactly) and divide by the same sum; the
// context skips the masked keys in both. Same operations, same operands, same bits.
static_assert(decoding.queries == causal.queries);
static_assert(decoding.scaled_scores == causal.scaled_scores);  // an empty slot: -inf, as a future key
static_assert(decoding.weights == causal.weights);
static_assert(decoding.context == causal.context);

// Step 4: the first two steps by hand. Step 0 ('Life' alone): one key, softmax([s]) = [1]
// exactly (e^0 / e^0), so the output is v_Life itself, exactly.
static_assert(qkv::row(decoding.weights, 0) == matrix<float, 1, 6>{{{1, 0, 0, 0, 0, 0}}});
static_assert(qkv::row(decoding.context, 0) == qkv::row(causal.values, 0));
// Step 1 ('is', the cache holds Life and is): the notebook's omega_2 = [8.5808, -7.6597, ...]
// over sqrt(24) = 4.8990 gives scores [1.7515, -1.5635]; e^(-1.5635 - 1.7515) = e^-3.3150 =
// 0.036332, weights [1, 0.036332] / 1.036332 = [0.964942, 0.035058], and the 4 future slots 0.
// Tolerance: the 4-decimal scores are off by 5e-5 each, so their difference by 1e-4, which moves
// a two-way softmax by at most w_0 w_1 1e-4 = 3.4e-6; the 6-decimal hand values 5e-7; float32
// rounding (example 02's bound on these weights) below 1e-6: 5e-6 in all
static_assert(qkv::proven<check::near(qkv::row(decoding.weights, 1),
                                      matrix<float, 1, 6>{{{0.964942f, 0.035058f, 0, 0, 0, 0}}}, 5e-6f)>);

// =============================================================================================
// Step 5: two tokens at once, and where the diagonal sits. After a prefill of the first four
// tokens (one call, 4 queries against 4 keys: the causal mask is square, both alignments agree),
// 'dessert' and 'first' arrive together: 2 queries against 6 cached keys, a (2, 6) mask.
//   lower_right (PyTorch's causal_lower_right): query i sees j <= i + 6 - 2:  [1 1 1 1 1 0]
//                                                                               [1 1 1 1 1 1]
//   upper_left  (causal_upper_left, is_causal=True): j <= i:                   [1 0 0 0 0 0]
//                                                                               [1 1 0 0 0 0]
// Only the bottom-right one puts 'dessert' at position 4 and 'first' at position 5.
static_assert(qkv::causal_mask<2, 6>(causal_alignment::lower_right) ==
              matrix<bool, 2, 6>{{{true, true, true, true, true, false}, {true, true, true, true, true, true}}});
static_assert(qkv::causal_mask<2, 6>(causal_alignment::upper_left) ==
              matrix<bool, 2, 6>{{{true, false, false, false, false, false}, {true, true, false, false, false, false}}});
// a square mask is the same in both alignments, and the same as causal_mask<N>()
static_assert(qkv::causal_mask<6, 6>(causal_alignment::lower_right) == qkv::causal_mask<6>() &&
              qkv::causal_mask<6, 6>(causal_alignment::upper_left) == qkv::causal_mask<6>());

template <class T>
struct chunked {
  qkv::attention_result<T, 4, S, d_k, d_v> prefill;
  qkv::attention_result<T, 2, S, d_k, d_v> lower_right, upper_left;
};
template <class T>
constexpr chunked<T> prefill_then_two(const matrix<T, S, d>& x, const single_head_weights<T>& w) {
  const auto q = qkv::project(x, w.W_query);
  const auto k = qkv::project(x, w.W_key);
  const auto v = qkv::project(x, w.W_value);
  qkv::attention_options<T> causal{};
  causal.causal = true;
  qkv::kv_cache<T, S, d_k, d_v> cache;
  cache.append(qkv::block<4, d_k>(k, 0, 0), qkv::block<4, d_v>(v, 0, 0));  // tokens 0..3
  chunked<T> out{};
  out.prefill = qkv::attend_cache(qkv::block<4, d_k>(q, 0, 0), cache, causal);
  cache.append(qkv::block<2, d_k>(k, 4, 0), qkv::block<2, d_v>(v, 4, 0));  // tokens 4, 5
  out.lower_right = qkv::attend_cache(qkv::block<2, d_k>(q, 4, 0), cache, causal, causal_alignment::lower_right);
  out.upper_left = qkv::attend_cache(qkv::block<2, d_k>(q, 4, 0), cache, causal, causal_alignment::upper_left);
  return out;
}
constexpr auto chunk = prefill_then_two(embedded_sentence, weights);
// the prefill's 4 rows are causal attention's first 4 rows, and the bottom-right pair its last
// 2, bit for bit (the same argument as step 3)
static_assert(qkv::block<4, 28>(chunk.prefill.context, 0, 0) == qkv::block<4, 28>(causal.context, 0, 0));
static_assert(chunk.lower_right.context == qkv::block<2, 28>(causal.context, 4, 0));
static_assert(chunk.lower_right.weights == qkv::block<2, 6>(causal.weights, 4, 0));
// the top-left alignment makes 'dessert' (query 0 of the pair) see 'Life' alone: weight 1 on
// key 0, output v_Life exactly; not causal attention's row 4
static_assert(qkv::row(chunk.upper_left.weights, 0) == matrix<float, 1, 6>{{{1, 0, 0, 0, 0, 0}}});
static_assert(qkv::row(chunk.upper_left.context, 0) == qkv::row(causal.values, 0));
static_assert(qkv::row(chunk.upper_left.context, 0) != qkv::row(causal.context, 4));

// =============================================================================================
// Step 6: PyTorch. scripts/fixtures/torch_chapter2.py runs the same decoding loop in float64 (the float32
// embedding and weights converted exactly; a growing cache; masks built as PyTorch 2 builds
// causal_lower_right, tril(ones(Tq, S), diagonal = S - Tq)) -> tests/data/chapter2/. qkv's
// decoding in double from the same inputs agrees with it within twice the bound of
// examples/chapter2_bounds.hpp (each side is within the bound of the exact value: the standard
// model's bound does not depend on the order of the sums, and PyTorch's BLAS sums in its own).
constexpr auto x64 = qkv::matrix_cast<double>(embedded_sentence);
constexpr single_head_weights<double> weights64{qkv::matrix_cast<double>(weights.W_query),
                                                qkv::matrix_cast<double>(weights.W_key),
                                                qkv::matrix_cast<double>(weights.W_value)};
constexpr auto causal64 = causal_attention(x64, weights64);
constexpr auto decoding64 = decode(x64, weights64);
static_assert(decoding64.context == causal64.context);  // step 3's proof holds in double too
// the bound: projections (16 products each), then one head (chapter2_bounds.hpp). By hand for
// 'short' (row 2; 'first', row 5, is about the same): q and k are within gamma_16 sum|x||W| = 1.8e-15 x 8 = 1.4e-14,
// so a score q·k (24 terms of about 2.5 x 2.5) within gamma_24 150 + 1.4e-14 x 60 = 1.2e-12,
// divided by 4.9: 2.5e-13; its weights move by at most 2 x 2.5e-13 of themselves (the range
// 37.7 adds (2 (2 + 37.7) + 3) u = 9e-15), so the context by 5e-13 x max|v| (4.2) = 2.1e-12,
// plus the values' own 5e-13: about 3e-12, below 1e-11
constexpr auto bound64 = [] {
  namespace c2 = qkv::examples::chapter2;
  return c2::context_error(causal64, c2::projection_error(x64, weights64.W_query),
                           c2::projection_error(x64, weights64.W_key), c2::projection_error(x64, weights64.W_value));
}();
static_assert(qkv::max_abs_difference(bound64, matrix<double, 6, 28>{}) < 1e-11);
static_assert(qkv::proven<check::within(decoding64.context, matrix<double, 6, 28>{torch64::context}, bound64 + bound64)>);
// the float32 decoding: within its float32 bound (the same derivation, u = 2^-24) of the exact
// value, so within that plus the double bound of qkv's double decoding (and of PyTorch's)
constexpr auto bound32 = [] {
  namespace c2 = qkv::examples::chapter2;
  return c2::context_error(causal, c2::projection_error(embedded_sentence, weights.W_query),
                           c2::projection_error(embedded_sentence, weights.W_key),
                           c2::projection_error(embedded_sentence, weights.W_value));
}();
static_assert(qkv::proven<check::within(decoding.context, decoding64.context, bound32 + bound64)>);
static_assert(qkv::proven<check::within(decoding.context, matrix<double, 6, 28>{torch64::context}, bound32 + bound64 + bound64)>);
// the two alignments, against PyTorch's causal_lower_right and causal_upper_left
constexpr auto chunk64 = prefill_then_two(x64, weights64);
constexpr auto bound_pair = qkv::block<2, 28>(bound64, 4, 0);
static_assert(qkv::proven<check::within(chunk64.lower_right.context, matrix<double, 2, 28>{torch64::chunk_lower_right},
                                        bound_pair + bound_pair)>);
// the upper-left pair's bound: query 0 is v_Life exactly on both sides (one key: weight 1), query
// 1 two keys; step 6's bound for rows 0 and 1 of causal attention covers the same computations
constexpr auto bound_top = qkv::block<2, 28>(bound64, 0, 0);
static_assert(qkv::proven<check::within(chunk64.upper_left.context, matrix<double, 2, 28>{torch64::chunk_upper_left},
                                        bound_top + bound_top)>);

// =============================================================================================
inline void walkthrough() {
  using qkv::io::torch_str;
  std::cout << "Causal decoding with a KV cache (tutorial 001's sentence), proven at compile time\n\n"
            << "sentence = '" << sentence << "', embedding (6, 16), W_query/W_key (24, 16), W_value (28, 16)\n"
            << "(torch.manual_seed(123), as example 02)\n\n"
            << "Each step projects the new token only, appends its key and value to the cache, and attends\n"
            << "with its one query (the causal mask aligned bottom-right: the new token sees every cached key).\n\n";
  for (std::size_t t = 0; t < S; ++t) {
    std::cout << "step " << t << ": '" << tokens[t] << "' arrives; cache holds " << decoding.length[t] << " key"
              << (decoding.length[t] == 1 ? "" : "s") << "\n  weights over the cache = "
              << torch_str(qkv::row(decoding.weights, t), true) << "\n  output (first 4 of 28) = "
              << torch_str(qkv::block<1, 4>(decoding.context, t, 0), true) << "\n";
  }
  std::cout << "\nThe six outputs are the rows of full causal attention bit for bit (proven: same sums, same order;\n"
            << "the empty cache slots are -inf like the future keys, adding e^-inf = 0 exactly).\n\n"
            << "Two tokens at once ('dessert', 'first') after a prefill of 4, a (2, 6) causal mask:\n"
            << "  causal_lower_right (query i sees j <= i + S - T): output of 'dessert' (first 4) = "
            << torch_str(qkv::block<1, 4>(chunk.lower_right.context, 0, 0), true) << "  (causal attention's row 4)\n"
            << "  causal_upper_left  (query i sees j <= i):         output of 'dessert' (first 4) = "
            << torch_str(qkv::block<1, 4>(chunk.upper_left.context, 0, 0), true) << "  (v_Life: wrong)\n\n"
            << "PyTorch's float64 decoding loop (scripts/fixtures/torch_chapter2.py) and qkv's double one differ by at most "
            << qkv::max_abs_difference(decoding64.context, matrix<double, 6, 28>{torch64::context})
            << " (proven bound: " << 2 * qkv::max_abs_difference(bound64, matrix<double, 6, 28>{}) << ")\n";
}

// ---------------------------------------------------------------------------------------------
// the learner's page (qkv explain kv_cache --html FILE, io/page.hpp): steps 1 to 6 above, their
// prose the Step comments; the full causal attention, then the decoding steps' weights over the
// cache slots and outputs, each proven against causal attention's rows
template <class Page>
void page(Page& p) {
  using how = typename Page::how;
  const std::vector<std::string> words(tokens.begin(), tokens.end());
  std::vector<std::string> steps, slots;
  for (std::size_t t = 0; t < S; ++t) {
    steps.push_back("step " + std::to_string(t) + ": " + std::string(tokens[t]));
    slots.push_back("slot " + std::to_string(t));
  }
  // its matrices without a how are exact inputs, or marked derived(): the 50-digit truth, and the
  // page recomputes what a learner's edit of the queries, keys or values reaches
  p.with_truth();
  p.step(1);
  p.matrix("embedded_sentence", embedded_sentence).rows(words);
  p.matrix("W_query", weights.W_query).caption("W_query (24, 16): torch.rand after manual_seed(123)");
  p.matrix("W_key", weights.W_key).caption("W_key (24, 16)");
  p.matrix("W_value", weights.W_value).caption("W_value (28, 16)");
  p.matrix("causal.queries", causal.queries)
      .rows(words)
      .caption("causal.queries = x W_queryᵀ")
      .how(how::dot("embedded_sentence", "W_query", d));
  p.matrix("causal.keys", causal.keys).rows(words).caption("causal.keys = x W_keyᵀ").how(how::dot("embedded_sentence", "W_key", d));
  p.matrix("causal.values", causal.values)
      .rows(words)
      .caption("causal.values = x W_valueᵀ")
      .how(how::dot("embedded_sentence", "W_value", d));
  p.matrix("causal.scores", causal.scores).rows(words).cols(words).how(how::dot("causal.queries", "causal.keys", d_k));
  p.matrix("causal.scaled_scores", causal.scaled_scores)
      .rows(words)
      .cols(words)
      .how(how::divided("causal.scores", double(qkv::sqrt(24.0f)), "1 / sqrt(24), as a division by float(sqrt(24)) = 4.8989797",
                        "causal: a key after its query"));
  p.matrix("causal.weights", causal.weights).rows(words).cols(words).how(how::softmax("causal.scaled_scores"));
  p.matrix("causal.context", causal.context).rows(words).how(how::matmul("causal.weights", "causal.values", S));
  p.step(2);
  // the loop's arithmetic as the page's steps (step 3 proves it: the same sums in the same
  // order): step t's query is row t of the queries, its scores over the t + 1 cached keys the
  // same dot products, divided by the same float(sqrt(24)), the empty slots -inf
  p.matrix("decoding.queries", decoding.queries)
      .rows(steps)
      .caption("decoding.queries: q_t = x_t W_queryᵀ, one token at a time")
      .how(how::block("causal.queries", 0));
  p.matrix("decoding.scores", causal.scores)
      .rows(steps)
      .cols(slots)
      .caption("decoding.scores: q_t · k_j for the six keys")
      .how(how::dot("decoding.queries", "causal.keys", d_k))
      .hidden();
  p.matrix("decoding.scaled_scores", decoding.scaled_scores)
      .rows(steps)
      .cols(slots)
      .caption("decoding.scaled_scores: step t's scores over the cache's 6 slots")
      .how(how::divided("decoding.scores", double(qkv::sqrt(24.0f)), "1 / sqrt(24), as a division by float(sqrt(24)) = 4.8989797",
                        "an empty slot of the cache: key j arrives at step j"))
      .hidden();
  p.matrix("decoding.weights", decoding.weights)
      .rows(steps)
      .cols(slots)
      .caption("decoding.weights: step t's weights over the cache's 6 slots (empty slots: -inf, weight 0)")
      .how(how::softmax("decoding.scaled_scores"));
  p.heatmap("the weights of each decoding step over the cache", {"decoding.weights"});
  p.step(3);
  p.matrix("decoding.context", decoding.context)
      .rows(steps)
      .caption("decoding.context: each step's output")
      .how(how::matmul("decoding.weights", "causal.values", S))
      .proven(causal.context, "causal.context", 0.0, "bit for bit");
  p.step(4);
  p.matrix("step_1_weights", qkv::row(decoding.weights, 1))
      .rows({steps[1]})
      .how(how::block("decoding.weights", 1))
      .cols(slots)
      .proven(matrix<float, 1, 6>{{{0.964942f, 0.035058f, 0, 0, 0, 0}}}, "by hand: [0.964942, 0.035058, 0, 0, 0, 0]", 5e-6);
  p.step(5);
  // the two new queries against the full cache, masked in each alignment (data only)
  p.matrix("chunk.queries", chunk.lower_right.queries).rows({words[4], words[5]}).how(how::block("causal.queries", 4)).hidden();
  for (const char* align : {"lower_right", "upper_left"}) {
    const std::string id = std::string("chunk.") + align;
    const auto& a = id == "chunk.lower_right" ? chunk.lower_right : chunk.upper_left;
    p.matrix(id + ".scores", a.scores).rows({words[4], words[5]}).cols(words).how(how::dot("chunk.queries", "causal.keys", d_k)).hidden();
    p.matrix(id + ".scaled_scores", a.scaled_scores)
        .rows({words[4], words[5]})
        .cols(words)
        .how(how::divided(id + ".scores", double(qkv::sqrt(24.0f)), "1 / sqrt(24), as a division by float(sqrt(24)) = 4.8989797",
                          std::string("causal_") + align + ": a key after its query, the diagonal at the " +
                              (id == "chunk.lower_right" ? "bottom right" : "top left")))
        .hidden();
    p.matrix(id + ".weights", a.weights).rows({words[4], words[5]}).cols(words).how(how::softmax(id + ".scaled_scores")).hidden();
  }
  p.matrix("chunk.lower_right.context", chunk.lower_right.context)
      .rows({words[4], words[5]})
      .caption("two tokens at once, causal_lower_right")
      .how(how::matmul("chunk.lower_right.weights", "causal.values", S))
      .proven(qkv::block<2, 28>(causal.context, 4, 0), "causal.context rows 4 and 5", 0.0, "bit for bit");
  p.matrix("chunk.upper_left.context", chunk.upper_left.context)
      .rows({words[4], words[5]})
      .caption("two tokens at once, causal_upper_left: 'dessert' sees 'Life' alone (wrong)")
      .how(how::matmul("chunk.upper_left.weights", "causal.values", S));
  p.step(6);
  // the decoding loop in double: the embedding and the weights cast to double (exact), projected
  // in double, then the loop's arithmetic as in step 2 (data only: the page's module recomputes
  // decoding64.context with these steps)
  const double sqrt24 = qkv::sqrt(24.0);
  p.matrix("x64", x64).rows(words).how(how::cast("embedded_sentence")).hidden();
  p.matrix("W_query64", weights64.W_query).how(how::cast("W_query")).hidden();
  p.matrix("W_key64", weights64.W_key).how(how::cast("W_key")).hidden();
  p.matrix("W_value64", weights64.W_value).how(how::cast("W_value")).hidden();
  p.matrix("decoding64.queries", decoding64.queries).rows(steps).how(how::dot("x64", "W_query64", d)).hidden();
  p.matrix("causal64.keys", causal64.keys).rows(words).how(how::dot("x64", "W_key64", d)).hidden();
  p.matrix("causal64.values", causal64.values).rows(words).how(how::dot("x64", "W_value64", d)).hidden();
  p.matrix("decoding64.scores", causal64.scores)
      .rows(steps)
      .cols(slots)
      .how(how::dot("decoding64.queries", "causal64.keys", d_k))
      .hidden();
  p.matrix("decoding64.scaled_scores", decoding64.scaled_scores)
      .rows(steps)
      .cols(slots)
      .how(how::divided("decoding64.scores", sqrt24, "1 / sqrt(24), as a division by sqrt(24) in double",
                        "an empty slot of the cache: key j arrives at step j"))
      .hidden();
  p.matrix("decoding64.weights", decoding64.weights)
      .rows(steps)
      .cols(slots)
      .how(how::softmax("decoding64.scaled_scores"))
      .hidden();
  p.matrix("decoding64.context", decoding64.context)
      .rows(steps)
      .caption("qkv's decoding in double")
      .how(how::matmul("decoding64.weights", "causal64.values", S))
      .proven(matrix<double, 6, 28>{torch64::context}, "PyTorch's float64 decoding loop",
              2 * qkv::max_abs_difference(bound64, matrix<double, 6, 28>{}), "twice the derived bound, at most");
}

}  // namespace qkv::examples::kv_cache

#ifndef QKV_EXAMPLE_NO_MAIN
int main() { qkv::examples::kv_cache::walkthrough(); }
#endif
