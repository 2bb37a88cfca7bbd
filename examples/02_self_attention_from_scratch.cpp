// 02_self_attention_from_scratch.cpp: tutorial 001, "Self-attention from scratch" (Raschka).
//
// The whole notebook, computed by the compiler: the dictionary of "Life is short, eat dessert
// first", the 6x16 embedding that torch.manual_seed(123) and nn.Embedding(6, 16) draw, the
// torch.rand weights, query 2's unnormalised weights omega_2 (omega_24 = 11.1466), its softmax
// and context vector, the full 6x28 output, three heads (done correctly, and what the notebook's
// code really did) and cross-attention over an 8-token second sequence.
//
// Two kinds of proof. Tensors that come from the generator are bit-exact against PyTorch's own
// (tests/data/torch_reference.hpp, made from tests/data/reference). Everything computed from
// them is within a bound derived from float32 rounding (core/bounds.hpp) of PyTorch's float64
// results (tests/data/reference_001.hpp): PyTorch's float32 BLAS sums in an unspecified order,
// so the float32 digits may differ in the last bits, but neither result can be farther from the
// exact value than the bound. The check-the-docs page is docs/examples/02_self_attention_from_scratch.md.
#include <array>
#include <cstddef>
#include <iostream>
#include <string_view>

#include <qkv/core/attention.hpp>
#include <qkv/core/bounds.hpp>
#include <qkv/core/check.hpp>
#include <qkv/core/math.hpp>
#include <qkv/core/matrix.hpp>
#include <qkv/core/softmax.hpp>
#include <qkv/core/text.hpp>
#include <qkv/core/torch.hpp>
#include <qkv/io/print.hpp>

#include "../tests/data/reference_001.hpp"
#include "../tests/data/torch_reference.hpp"

namespace qkv::examples::from_scratch {

namespace check = qkv::check;
namespace ref64 = qkv_test::reference_001;
namespace drawn = qkv_test::torch_reference;
using qkv::matrix;
using qkv::stack;
using qkv::torch::generator;

// every float of m has the bits PyTorch drew (a mismatch names the index in the error message)
inline void failed_at_index_actual_expected_bits(std::size_t, float, std::uint32_t) {}
template <std::size_t N>
constexpr bool same_bits(const float* m, const std::uint32_t (&pytorch)[N], std::size_t offset = 0,
                         std::size_t count = N) {
  for (std::size_t k = 0; k < count; ++k)
    if (std::bit_cast<std::uint32_t>(m[k]) != pytorch[offset + k])
      failed_at_index_actual_expected_bits(offset + k, m[k], pytorch[offset + k]);
  return true;
}
template <std::size_t H, std::size_t R, std::size_t C, std::size_t N>
constexpr bool same_bits(const stack<float, H, R, C>& s, const std::uint32_t (&pytorch)[N]) {
  for (std::size_t h = 0; h < H; ++h) same_bits(s.m[h].v, pytorch, h * R * C, R * C);
  return true;
}

// =============================================================================================
// Embedding an input sentence

constexpr std::string_view sentence = "Life is short, eat dessert first";

// dc = {s:i for i,s in enumerate(sorted(sentence.replace(',', '').split()))}
// sorted by code point, capitals first: Life < dessert < eat < first < is < short
constexpr qkv::text::dictionary<sentence.size()> dc{sentence};
static_assert(dc.size() == 6 && dc.word(0) == "Life" && dc.word(1) == "dessert" && dc.word(5) == "short");

// sentence_int = torch.tensor([dc[s] for s in sentence.replace(',', '').split()])
// Life=0, is=4, short=5, eat=2, dessert=1, first=3 -> tensor([0, 4, 5, 2, 1, 3])
constexpr auto sentence_int = dc.ids<6>();
static_assert(sentence_int == std::array<std::size_t, 6>{0, 4, 5, 2, 1, 3});

// torch.manual_seed(123); embed = torch.nn.Embedding(6, 16): normal_(0, 1) on the 6x16 weight,
// 96 values = 6 Box-Muller blocks of 16 on PyTorch's AVX2 path, bit for bit
constexpr auto embed_weight = [] {
  generator gen{123};
  return gen.embedding<float, 6, 16>();
}();
static_assert(same_bits(embed_weight.v, drawn::t001_embedding_weight));

// embedded_sentence = embed(sentence_int).detach(): the rows in sentence order, (6, 16)
constexpr auto embedded_sentence = qkv::torch::embedding_lookup(embed_weight, sentence_int);
// the notebook prints row 0 as [0.3374, -0.1778, ...] (word 'Life', id 0) and row 1 (word 'is',
// id 4) as [0.5146, 0.9938, -0.2587, ...]: 4 decimals, so within 5e-5 of the float
static_assert(proven<check::near(embedded_sentence(0, 0), 0.3374f, 5e-5f) &&
                     check::near(embedded_sentence(0, 1), -0.1778f, 5e-5f) &&
                     check::near(embedded_sentence(1, 0), 0.5146f, 5e-5f) &&
                     check::near(embedded_sentence(1, 2), -0.2587f, 5e-5f) &&
                     check::near(embedded_sentence(5, 15), 0.2293f, 5e-5f)>);
static_assert(qkv::row(embedded_sentence, 1) == qkv::row(embed_weight, 4));

// =============================================================================================
// Scaled dot-product self-attention: the weights

constexpr std::size_t d = 16, d_q = 24, d_k = 24, d_v = 28;

// torch.manual_seed(123) again; W_query = rand(d_q, d), W_key = rand(d_k, d), W_value = rand(d_v, d)
struct single_head_weights {
  matrix<float, d_q, d> W_query;
  matrix<float, d_k, d> W_key;
  matrix<float, d_v, d> W_value;
  generator after;  // the generator after the three cells' draws: 384 + 384 + 448 = 1216
};
constexpr single_head_weights weights = [] {
  generator gen{123};
  single_head_weights w{};
  w.W_query = gen.rand<float, d_q, d>();
  w.W_key = gen.rand<float, d_k, d>();
  w.W_value = gen.rand<float, d_v, d>();
  w.after = gen;
  return w;
}();
static_assert(same_bits(weights.W_query.v, drawn::t001_W_query));
static_assert(same_bits(weights.W_key.v, drawn::t001_W_key));
static_assert(same_bits(weights.W_value.v, drawn::t001_W_value));
// W_query[0][0]: the first draw after manual_seed(123) is 0xb24bcdfe; its low 24 bits are
// 0x4bcdfe = 4967934, and 4967934 / 2^24 = 0.29611194
static_assert(weights.W_query(0, 0) == 4967934.0f / 16777216.0f);
static_assert(weights.after.draws() == 1216);

// =============================================================================================
// Every token at once. The tutorial's vectors are columns: query_2 = W_query.matmul(x_2) and
// keys = W_key.matmul(embedded_sentence.T).T. qkv::columns takes the tokens as the columns of
// embedded_sentenceᵀ and gives one token per row, the same sums in the same order.
constexpr auto attn = qkv::self_attention(qkv::transposed(embedded_sentence), weights.W_query, weights.W_key,
                                          weights.W_value, qkv::columns);
// attn.queries (6, 24), keys (6, 24), values (6, 28), scores = omega (6, 6), weights (6, 6),
// context (6, 28); scaled by 1 / sqrt(d_k): PyTorch divides the float32 scores by float32(sqrt(24))
static_assert(qkv::sqrt(24.0f) == 4.898979663848877f);

// ---------------------------------------------------------------------------------------------
// query 2 (index 1): x_2 = embedded_sentence[1]; query_2, key_2 (24) and value_2 (28)
constexpr auto x_2 = qkv::row(embedded_sentence, 1);                                // (1, 16)
constexpr auto query_2 = qkv::transposed(qkv::matrix_product(weights.W_query, qkv::transposed(x_2)));  // (1, 24)
constexpr auto key_2 = qkv::transposed(qkv::matrix_product(weights.W_key, qkv::transposed(x_2)));      // (1, 24)
constexpr auto value_2 = qkv::transposed(qkv::matrix_product(weights.W_value, qkv::transposed(x_2)));  // (1, 28)
// the matrix-vector product and the all-tokens projection sum the same 16 products in the same order
static_assert(query_2 == qkv::row(attn.queries, 1) && key_2 == qkv::row(attn.keys, 1) &&
              value_2 == qkv::row(attn.values, 1));

// omega_24 = query_2.dot(keys[4]): the unnormalised weight of query 2 for token 5 (index 4)
constexpr float omega_24 = qkv::dot(query_2, qkv::row(attn.keys, 4));
static_assert(omega_24 == attn.scores(1, 4));  // the same 24 products, summed in the same order

// omega_2 = query_2.matmul(keys.T) (6), attention_weights_2 = softmax(omega_2 / d_k**0.5) (6),
// context_vector_2 = attention_weights_2.matmul(values) (28): row 1 of the whole computation
constexpr auto omega_2 = qkv::row(attn.scores, 1);
constexpr auto attention_weights_2 = qkv::row(attn.weights, 1);
constexpr auto context_vector_2 = qkv::row(attn.context, 1);

// =============================================================================================
// The tolerances, derived. The standard model (core/bounds.hpp): a float32 sum of K products is
// within gamma_K sum |a_k||b_k| of the exact sum (gamma_K = K u / (1 - K u), u = 2^-24), and
// inputs that are already off by da, db add |da||b| + |a||db| + |da||db|. PyTorch's float64
// results carry the same kind of error with u = 2^-53: at most 2^-29 of ours, so every bound is
// widened by the factor (1 + 2^-28) to cover the reference's own rounding.
namespace bound {
using qkv::matrix_cast;
using qkv::bounds::product_error;
constexpr double u = qkv::bounds::unit_roundoff<float>();
constexpr auto with_reference = [](double e) { return e * (1.0 + 0x1p-28); };

// projections: the inputs are exact (the embedding and the weights are the float32 data)
template <std::size_t N, std::size_t Dout>
constexpr auto projection(const matrix<float, N, 16>& x, const matrix<float, Dout, 16>& w) {
  return product_error<float>(matrix_cast<double>(x), qkv::transposed(matrix_cast<double>(w)));
}
// one attention head from its projections: scores (K = 24 products), the division by the float
// sqrt(24) (its own relative error u and the division's rounding u: 2u |scaled|), the softmax
// (bounds::softmax_rows_error), the context (K = number of keys)
template <std::size_t Tq, std::size_t S, std::size_t Dk, std::size_t Dv>
struct head_bounds {
  matrix<double, Tq, S> scores, weights;
  matrix<double, Tq, Dv> context;
};
template <std::size_t Tq, std::size_t S, std::size_t Dk, std::size_t Dv>
constexpr head_bounds<Tq, S, Dk, Dv> head(const qkv::attention_result<float, Tq, S, Dk, Dv>& a,
                                          const matrix<double, Tq, Dk>& dq, const matrix<double, S, Dk>& dk,
                                          const matrix<double, S, Dv>& dv) {
  head_bounds<Tq, S, Dk, Dv> b;
  b.scores = product_error<float>(matrix_cast<double>(a.queries), dq, qkv::transposed(matrix_cast<double>(a.keys)),
                                  qkv::transposed(dk));
  const auto dscaled = qkv::divided(b.scores, 4.8989794855663558) +  // sqrt(24), rounded down
                       qkv::scaled(2 * u, qkv::bounds::abs(matrix_cast<double>(a.scaled_scores)));
  b.weights = qkv::bounds::softmax_rows_error<float>(matrix_cast<double>(a.scaled_scores),
                                                     matrix_cast<double>(a.weights), dscaled);
  b.context = product_error<float>(matrix_cast<double>(a.weights), b.weights, matrix_cast<double>(a.values), dv);
  b.scores = qkv::map(b.scores, with_reference);
  b.weights = qkv::map(b.weights, with_reference);
  b.context = qkv::map(b.context, with_reference);
  return b;
}

constexpr auto dq = projection(embedded_sentence, weights.W_query);  // (6, 24)
constexpr auto dk = projection(embedded_sentence, weights.W_key);    // (6, 24)
constexpr auto dv = projection(embedded_sentence, weights.W_value);  // (6, 28)
constexpr auto single = head(attn, dq, dk, dv);
}  // namespace bound

// =============================================================================================
// The single head against PyTorch

// the projections of all tokens
static_assert(proven<check::within(attn.queries, matrix<double, 6, 24>{ref64::queries}, qkv::map(bound::dq, bound::with_reference))>);
static_assert(proven<check::within(attn.keys, matrix<double, 6, 24>{ref64::keys}, qkv::map(bound::dk, bound::with_reference))>);
static_assert(proven<check::within(attn.values, matrix<double, 6, 28>{ref64::values}, qkv::map(bound::dv, bound::with_reference))>);

// omega_24 = 11.1466, as the notebook prints it (4 decimals: within 5e-5 of the exact value, and
// ours within the derived bound of it)
static_assert(proven<check::near(double(omega_24), 11.1466, 5e-5 + bound::single.scores(1, 4))>);
static_assert(proven<check::near(double(omega_24), ref64::omega_24[0][0], bound::single.scores(1, 4))>);
// by hand from the 4-decimal prints it is 11.1466: omega_2 = [8.5808, -7.6597, 3.2558, 1.0395, 11.1466, -0.4800]
constexpr matrix<double, 1, 6> printed_omega_2{{{8.5808, -7.6597, 3.2558, 1.0395, 11.1466, -0.4800}}};
static_assert(proven<check::within(omega_2, printed_omega_2, qkv::map(qkv::row(bound::single.scores, 1),
                                                                       [](double e) { return e + 5e-5; }))>);
// softmax(omega_2 / 4.8989797): the largest score 11.1466 / 4.899 = 2.2753 gets e^0 = 1 after the
// maximum is subtracted; 8.5808 / 4.899 = 1.7516 gets e^(1.7516 - 2.2753) = 0.5923; the sum of
// the six terms is 2.0338, so the weights are 0.5923 / 2.0338 = 0.2912 and 1 / 2.0338 = 0.4917
constexpr matrix<double, 1, 6> printed_attention_weights_2{{{0.2912, 0.0106, 0.0982, 0.0625, 0.4917, 0.0458}}};
static_assert(proven<check::within(attention_weights_2, printed_attention_weights_2,
                                   qkv::map(qkv::row(bound::single.weights, 1), [](double e) { return e + 5e-5; }))>);
static_assert(proven<check::near(double(attention_weights_2[0] + attention_weights_2[1] + attention_weights_2[2] +
                                        attention_weights_2[3] + attention_weights_2[4] + attention_weights_2[5]),
                                 1.0, 6 * 6e-8)>);  // a row of the softmax sums to 1 (6 terms, each within ~1 ulp)
// the context vector of the notebook, 28 values at 4 decimals
constexpr matrix<double, 1, 28> printed_context_vector_2{{{-1.5993, 0.0156, 1.2670, 0.0032, -0.6460, -1.1407, -0.4908,
                                                           -1.4632, 0.4747, 1.1926, 0.4506, -0.7110, 0.0602, 0.7125,
                                                           -0.1628, -2.0184, 0.3838, -2.1188, -0.8136, -1.5694, 0.7934,
                                                           -0.2911, -1.3640, -0.2366, -0.9564, -0.5265, 0.0624, 1.7084}}};
static_assert(proven<check::within(context_vector_2, printed_context_vector_2,
                                   qkv::map(qkv::row(bound::single.context, 1), [](double e) { return e + 5e-5; }))>);

// the whole 6x6 omega, the 6x6 weights and the full 6x28 output against PyTorch's float64
static_assert(proven<check::within(attn.scores, matrix<double, 6, 6>{ref64::omega}, bound::single.scores)>);
static_assert(proven<check::within(attn.weights, matrix<double, 6, 6>{ref64::attention_weights}, bound::single.weights)>);
static_assert(proven<check::within(attn.context, matrix<double, 6, 28>{ref64::context}, bound::single.context)>);
// the largest bound on the output, for the record: 2.1e-3. It is a worst case: every rounding
// error taken at its largest and with the same sign, through scores of up to 24 |q||k| ~ 200
// and a softmax that passes a score error on to the weights doubled; the float32 output is in
// fact much closer to PyTorch's float64 one (the walkthrough prints the largest difference)
static_assert(qkv::max_abs_difference(bound::single.context, matrix<double, 6, 28>{}) < 2.2e-3);

// =============================================================================================
// Multi-head attention: three heads, each with its own W_query, W_key, W_value (3, d', 16),
// drawn by the next cell without reseeding: rand(3, 24, 16), rand(3, 24, 16), rand(3, 28, 16)
constexpr std::size_t h = 3;
struct multihead_weights {
  stack<float, h, d_q, d> W_query;
  stack<float, h, d_k, d> W_key;
  stack<float, h, d_v, d> W_value;
  generator after;
};
constexpr auto draw_multihead_weights = [](generator gen) {
  multihead_weights w{};
  w.W_query = gen.rand<float, h, d_q, d>();
  w.W_key = gen.rand<float, h, d_k, d>();
  w.W_value = gen.rand<float, h, d_v, d>();
  w.after = gen;
  return w;
};
constexpr multihead_weights multihead = draw_multihead_weights(weights.after);
static_assert(same_bits(multihead.W_query, drawn::t001_multihead_W_query));
static_assert(same_bits(multihead.W_key, drawn::t001_multihead_W_key));
static_assert(same_bits(multihead.W_value, drawn::t001_multihead_W_value));
// 1216 + 3 (24 + 24 + 28) 16 = 1216 + 3648 = 4864 draws so far
static_assert(multihead.after.draws() == 4864);

// Done correctly: head i attends with its own projections, over the 6 keys of that head, scaled
// by 1 / sqrt(24) (each head's queries are 24 wide); the three contexts side by side are (6, 84)
template <std::size_t I>
constexpr auto head_attention(const multihead_weights& w) {
  return qkv::self_attention(qkv::transposed(embedded_sentence), w.W_query[I], w.W_key[I], w.W_value[I],
                             qkv::columns);
}
constexpr auto head_0 = head_attention<0>(multihead);
constexpr auto head_1 = head_attention<1>(multihead);
constexpr auto head_2 = head_attention<2>(multihead);
constexpr auto multihead_context_concat = qkv::hconcat(qkv::hconcat(head_0.context, head_1.context), head_2.context);

namespace bound {
template <std::size_t I>
constexpr auto multihead_head(const qkv::attention_result<float, 6, 6, 24, 28>& a) {
  return head(a, projection(embedded_sentence, multihead.W_query[I]), projection(embedded_sentence, multihead.W_key[I]),
              projection(embedded_sentence, multihead.W_value[I]));
}
constexpr auto mh0 = multihead_head<0>(head_0);
constexpr auto mh1 = multihead_head<1>(head_1);
constexpr auto mh2 = multihead_head<2>(head_2);
}  // namespace bound

static_assert(proven<check::within(head_0.scores, matrix<double, 6, 6>{ref64::multihead_omega[0]}, bound::mh0.scores)>);
static_assert(proven<check::within(head_1.scores, matrix<double, 6, 6>{ref64::multihead_omega[1]}, bound::mh1.scores)>);
static_assert(proven<check::within(head_2.scores, matrix<double, 6, 6>{ref64::multihead_omega[2]}, bound::mh2.scores)>);
static_assert(proven<check::within(head_0.weights, matrix<double, 6, 6>{ref64::multihead_attention_weights[0]}, bound::mh0.weights)>);
static_assert(proven<check::within(head_1.weights, matrix<double, 6, 6>{ref64::multihead_attention_weights[1]}, bound::mh1.weights)>);
static_assert(proven<check::within(head_2.weights, matrix<double, 6, 6>{ref64::multihead_attention_weights[2]}, bound::mh2.weights)>);
static_assert(proven<check::within(multihead_context_concat, matrix<double, 6, 84>{ref64::multihead_context_concat},
                                   qkv::hconcat(qkv::hconcat(bound::mh0.context, bound::mh1.context), bound::mh2.context))>);

// ---------------------------------------------------------------------------------------------
// What the notebook's code did. multihead_query_2 = multihead_W_query.matmul(x_2) is (3, 24):
// row i is head i's query for token 2. multihead_keys = bmm(multihead_W_key, stacked_inputs) is
// (3, 24, 6): head b's keys as columns. multihead_query_2.matmul(multihead_keys) then broadcasts
// the whole (3, 24) matrix against every head's keys: (3, 3, 6), element [b][i][j] = (query of
// head i) . (key j of head b), mixing heads. F.softmax(..., dim=0) normalises over b, across
// heads, instead of over the 6 keys; and multihead_weights_2.matmul(multihead_values) fails
// ((3, 3, 6) by (3, 28, 6): "Expected size for first two dimensions of batch2 tensor to be:
// [3, 6] but got: [3, 28]").
struct code_result {
  stack<float, h, h, 6> omega_2;    // [b][i][j]
  stack<float, h, h, 6> weights_2;  // softmax over b
};
template <class Heads>
constexpr code_result notebook_code(const Heads& heads) {
  const matrix<float, h, 24> multihead_query_2 =
      qkv::vconcat(qkv::vconcat(qkv::row(heads[0].queries, 1), qkv::row(heads[1].queries, 1)), qkv::row(heads[2].queries, 1));
  code_result r{};
  for (std::size_t b = 0; b < h; ++b) r.omega_2[b] = qkv::matrix_product_transposed(multihead_query_2, heads[b].keys);
  // the softmax over dim 0: a (3, 18) matrix whose columns are the (i, j) pairs, softmax per column
  matrix<float, h, h * 6> by_b;
  for (std::size_t b = 0; b < h; ++b)
    for (std::size_t k = 0; k < h * 6; ++k) by_b.v[b * h * 6 + k] = r.omega_2[b].v[k] / qkv::sqrt(24.0f);
  const auto w = qkv::softmax_columns(by_b);
  for (std::size_t b = 0; b < h; ++b)
    for (std::size_t k = 0; k < h * 6; ++k) r.weights_2[b].v[k] = w.v[b * h * 6 + k];
  return r;
}
struct three_heads {
  qkv::attention_result<float, 6, 6, 24, 28> a[3];
  constexpr const auto& operator[](std::size_t i) const { return a[i]; }
};
constexpr code_result first_run_code = notebook_code(three_heads{{head_0, head_1, head_2}});
// the same numbers as PyTorch's float64 run of the literal code
static_assert(proven<check::near(double(first_run_code.omega_2(0, 0, 0)), ref64::code_multihead_omega_2[0][0][0], 1e-4)>);

// The notebook's printed multi-head numbers are not these. They come from running the weight
// cell a second time: the next 3648 draws (from draw 4864 on) reproduce all 108 printed values.
constexpr multihead_weights second_run = draw_multihead_weights(multihead.after);
static_assert(same_bits(second_run.W_query, drawn::t001_second_run_multihead_W_query));
static_assert(same_bits(second_run.W_key, drawn::t001_second_run_multihead_W_key));
static_assert(same_bits(second_run.W_value, drawn::t001_second_run_multihead_W_value));
constexpr code_result second_run_code = notebook_code(three_heads{
    {head_attention<0>(second_run), head_attention<1>(second_run), head_attention<2>(second_run)}});

// the notebook's print of multihead_omega_2, block 0 row 0, against the literal code's results:
//   printed     [-4.6998, -15.8777, -20.5870, -9.2172, -9.4817, 15.4494]
//   second run  [-4.6998, -15.8777, -20.5870, -9.2172, -9.4817, 15.4494]
//   first run   [-0.9446,  -9.9220,  24.6713,  9.3329, 18.5821, -18.7331]
constexpr matrix<double, 1, 6> printed_code_omega_000{{{-4.6998, -15.8777, -20.5870, -9.2172, -9.4817, 15.4494}}};
constexpr matrix<double, 1, 6> printed_code_weights_000{{{0.0253, 0.0030, 0.1937, 0.5669, 0.2305, 0.3184}}};
// each printed omega is a 24-term float32 dot product of values below 8 in magnitude (|q| |k|
// sums below 60 here): gamma_24 60 = 8.6e-5 at most; the print adds 5e-5
static_assert(proven<check::within(qkv::row(second_run_code.omega_2[0], 0), printed_code_omega_000,
                                   qkv::filled<double, 1, 6>(5e-5 + qkv::bounds::gamma<float>(24) * 60))>);
// the weights (a softmax over the 3 "heads" b of omega / sqrt(24)): a score error ds moves a
// weight by at most 2 w ds <= 2 ds (bounds::softmax_rows_error), ds = the omega bound / 4.89;
// the softmax's own rounding (exp within 2u, a sum of 3, a division) stays below 1e-6
static_assert(proven<check::within(qkv::row(second_run_code.weights_2[0], 0), printed_code_weights_000,
                                   qkv::filled<double, 1, 6>(5e-5 + 2 * qkv::bounds::gamma<float>(24) * 60 / 4.89 + 1e-6))>);
// the notebook's element [2][1][3] is printed -16.5260; the float32 value is -16.526054, and the
// exact (float64) one -16.526050: the print comes from a float32 sum in another order
static_assert(proven<check::near(double(second_run_code.omega_2(2, 1, 3)), ref64::second_run_code_multihead_omega_2[2][1][3],
                                 qkv::bounds::gamma<float>(24) * 60)>);
static_assert(proven<check::near(ref64::second_run_code_multihead_omega_2[2][1][3], -16.5260, 5e-5)>);
// while the first run's values are nowhere near the print
static_assert(qkv::magnitude(first_run_code.omega_2(0, 0, 0) - -4.6998f) > 1.0f);

// the correct per-head computation with the second-run weights, for query 2
constexpr auto second_head_0 = head_attention<0>(second_run);
static_assert(proven<check::near(double(second_head_0.scores(1, 0)), ref64::second_run_multihead_omega_2[0][0],
                                 qkv::bounds::gamma<float>(24) * 60)>);

// =============================================================================================
// Cross-attention: torch.manual_seed(123) again and the same three rand calls (the same weights),
// then embedded_sentence_2 = torch.rand(8, 16), the 8-token second sequence; keys and values come
// from it, the queries from the first sentence
constexpr auto embedded_sentence_2 = [] {
  generator gen = weights.after;  // manual_seed(123) and 1216 draws: the same state
  return gen.rand<float, 8, 16>();
}();
static_assert(same_bits(embedded_sentence_2.v, drawn::t001_embedded_sentence_2));
// the same 128 draws as the first multi-head query weights: rows 0..7 of head 0
static_assert(embedded_sentence_2 == qkv::block<8, 16>(multihead.W_query[0], 0, 0));

constexpr auto cross = qkv::cross_attention(qkv::transposed(embedded_sentence), qkv::transposed(embedded_sentence_2),
                                            weights.W_query, weights.W_key, weights.W_value, qkv::columns);
// cross.keys (8, 24), cross.values (8, 28), cross.scores (6, 8): 6 queries over 8 keys; its
// queries are the self-attention's, bit for bit (the same sentence and W_query)
static_assert(cross.queries == attn.queries);
namespace bound {
constexpr auto cross_keys = projection(embedded_sentence_2, weights.W_key);
constexpr auto cross_values = projection(embedded_sentence_2, weights.W_value);
constexpr auto cross_head = head(cross, dq, cross_keys, cross_values);
}  // namespace bound
static_assert(proven<check::within(cross.keys, matrix<double, 8, 24>{ref64::cross_keys}, qkv::map(bound::cross_keys, bound::with_reference))>);
static_assert(proven<check::within(cross.values, matrix<double, 8, 28>{ref64::cross_values}, qkv::map(bound::cross_values, bound::with_reference))>);
static_assert(proven<check::within(qkv::row(cross.scores, 1), matrix<double, 1, 8>{ref64::cross_omega_2}, qkv::row(bound::cross_head.scores, 1))>);
static_assert(proven<check::within(qkv::row(cross.weights, 1), matrix<double, 1, 8>{ref64::cross_attention_weights_2},
                                   qkv::row(bound::cross_head.weights, 1))>);
static_assert(proven<check::within(qkv::row(cross.context, 1), matrix<double, 1, 28>{ref64::cross_context_vector_2},
                                   qkv::row(bound::cross_head.context, 1))>);

// =============================================================================================
inline void walkthrough() {
  using qkv::io::torch_str;
  std::cout << "Self-attention from scratch (Raschka, tutorial 001), proven at compile time\n\n";
  std::cout << "sentence = '" << sentence << "'\n{";
  for (std::size_t i = 0; i < dc.size(); ++i) std::cout << (i ? ", '" : "'") << dc.word(i) << "': " << i;
  std::cout << "}\n";
  std::cout << "sentence_int = tensor([";
  for (std::size_t i = 0; i < 6; ++i) std::cout << (i ? ", " : "") << sentence_int[i];
  std::cout << "])\n\n"
            << "torch.manual_seed(123); embed = torch.nn.Embedding(6, 16)\n"
            << "embedded_sentence =\n" << torch_str(embedded_sentence) << "\n\n"
            << "torch.manual_seed(123); W_query = rand(24, 16), W_key = rand(24, 16), W_value = rand(28, 16)\n"
            << "W_query[0] = " << torch_str(qkv::row(weights.W_query, 0), true) << "\n\n"
            << "query_2 = W_query.matmul(x_2)\n" << torch_str(query_2, true) << "\n"
            << "omega_24 = query_2.dot(keys[4])\n" << "tensor(" << omega_24 << ")\n"
            << "omega_2 = query_2.matmul(keys.T)\n" << torch_str(omega_2, true) << "\n"
            << "attention_weights_2 = F.softmax(omega_2 / d_k**0.5, dim=0)\n"
            << torch_str(attention_weights_2, true) << "\n"
            << "context_vector_2 = attention_weights_2.matmul(values)\n" << torch_str(context_vector_2, true) << "\n\n"
            << "all six queries: attention_weights =\n" << torch_str(attn.weights) << "\n"
            << "context (6 x 28), first 4 columns =\n" << torch_str(qkv::block<6, 4>(attn.context, 0, 0)) << "\n\n"
            << "Multi-head, 3 heads, each with its own weights (rand(3, 24, 16), rand(3, 24, 16), rand(3, 28, 16)):\n"
            << "per-head attention weights of query 2 =\n"
            << torch_str(qkv::vconcat(qkv::vconcat(qkv::row(head_0.weights, 1), qkv::row(head_1.weights, 1)),
                                      qkv::row(head_2.weights, 1)))
            << "\n"
            << "the heads' contexts side by side: (6, 84); query 2's first 6 columns of each head =\n"
            << torch_str(qkv::vconcat(qkv::vconcat(qkv::block<1, 6>(head_0.context, 1, 0), qkv::block<1, 6>(head_1.context, 1, 0)),
                                      qkv::block<1, 6>(head_2.context, 1, 0)))
            << "\n\n"
            << "The notebook's multihead_query_2.matmul(multihead_keys) mixes heads ([b][i][j] = query of head i . key j\n"
            << "of head b) and its softmax runs over dim 0. Its printed numbers come from running the weight cell twice\n"
            << "(draws 4864 on). With those weights the literal code gives, block 0:\n"
            << torch_str(second_run_code.omega_2[0]) << "\n"
            << "the notebook printed [-4.6998, -15.8777, -20.5870, -9.2172, -9.4817, 15.4494] for row 0;\n"
            << "the first run's weights give " << torch_str(qkv::row(first_run_code.omega_2[0], 0), true) << "\n\n"
            << "Cross-attention: embedded_sentence_2 = torch.rand(8, 16) after reseeding (= the first 128 values of\n"
            << "multihead_W_query); query 2 over the 8 keys:\n"
            << "omega = " << torch_str(qkv::row(cross.scores, 1), true) << "\n"
            << "weights = " << torch_str(qkv::row(cross.weights, 1), true) << "\n\n"
            << "Every generator tensor above is PyTorch's, bit for bit; every computed value is within a derived\n"
            << "float32 bound (at most " << qkv::max_abs_difference(bound::single.context, matrix<double, 6, 28>{})
            << " on the 6x28 output) of PyTorch's float64 result; the largest actual difference on the output is "
            << qkv::max_abs_difference(qkv::matrix_cast<double>(attn.context), matrix<double, 6, 28>{ref64::context})
            << ".\n";
}

}  // namespace qkv::examples::from_scratch

// ---------------------------------------------------------------------------------------------
// the learner's page (qkv explain from_scratch --html FILE): the sections above (their text is
// the comment under each "=====" rule, read by scripts/page_notes.py), the sentence's words on
// the rows and columns, every matrix with how it was computed; the proofs are this file's
// static_asserts
namespace qkv::examples::from_scratch {

template <class Page>
void page(Page& p) {
  using how = typename Page::how;
  p.with_truth();  // its matrices without a how are exact inputs: the page shows the 50-digit truth
  using labels = decltype(Page::labels("", 0));  // std::vector<std::string>, no include needed here
  using text = typename labels::value_type;
  labels words;  // the sentence's words, commas dropped, in order
  for (std::size_t at = 0; at < sentence.size();) {
    const auto end = std::min(sentence.find(' ', at), sentence.size());
    text w(sentence.substr(at, end - at));
    if (!w.empty() && w.back() == ',') w.pop_back();
    words.push_back(w);
    at = end + 1;
  }
  // one head: queries, keys, values, scores, scaled scores, weights, context of `a` under `prefix`
  auto head = [&](const text& prefix, const auto& a, const text& wq, const text& wk, const text& wv) {
    p.matrix(prefix + "queries", a.queries).rows(words).how(how::dot("embedded_sentence", wq, d));
    p.matrix(prefix + "keys", a.keys).rows(words).how(how::dot("embedded_sentence", wk, d));
    p.matrix(prefix + "values", a.values).rows(words).how(how::dot("embedded_sentence", wv, d));
    p.matrix(prefix + "scores", a.scores).rows(words).cols(words).how(how::dot(prefix + "queries", prefix + "keys", d_k));
    p.matrix(prefix + "scaled_scores", a.scaled_scores).rows(words).cols(words)
        .how(how::divided(prefix + "scores", double(qkv::sqrt(24.0f)), "1/sqrt(d_k): PyTorch divides by float32(sqrt(24)) = 4.8989797"));
    p.matrix(prefix + "weights", a.weights).rows(words).cols(words).how(how::softmax(prefix + "scaled_scores"));
    p.matrix(prefix + "context", a.context).rows(words).how(how::matmul(prefix + "weights", prefix + "values", 6));
  };
  p.step(1);
  p.matrix("embedded_sentence", embedded_sentence).rows(words);
  // a learner's own sentence (the editable page): the rows of this table, drawn by qkv's generator
  p.matrix("embed.weight", embed_weight).hidden();
  p.sentence_input("embedded_sentence", "embed.weight",
                   "the tutorial's rule: dc = {s: i for i, s in enumerate(sorted(sentence.replace(',', '').split()))}, "
                   "then the rows of torch.manual_seed(123); nn.Embedding(6, 16), drawn by qkv's generator at compile "
                   "time (a sentence of 6 words, at most 6 different: the table has 6 rows)");
  p.step(2);
  p.matrix("weights.W_query", weights.W_query);
  p.matrix("weights.W_key", weights.W_key);
  p.matrix("weights.W_value", weights.W_value);
  p.step(3);
  head("attn.", attn, "weights.W_query", "weights.W_key", "weights.W_value");
  p.heatmap("the weights of the single head", {"attn.weights"});
  p.step(4);
  p.step(5);
  p.text("omega_24 (row 'is', column 'dessert' of attn.scores above) and the second row of each matrix are the "
         "tutorial's printed query_2, omega_2, attention_weights_2 and context_vector_2.");
  p.step(6);
  const text hw[3] = {"head_0.", "head_1.", "head_2."};
  const std::array heads{&head_0, &head_1, &head_2};
  for (std::size_t k = 0; k < 3; ++k) {
    const text i = "[" + std::to_string(k) + "]";
    p.matrix("multihead.W_query" + i, Page::slice(multihead.W_query, k)).hidden();
    p.matrix("multihead.W_key" + i, Page::slice(multihead.W_key, k)).hidden();
    p.matrix("multihead.W_value" + i, Page::slice(multihead.W_value, k)).hidden();
    head(hw[k], *heads[k], "multihead.W_query" + i, "multihead.W_key" + i, "multihead.W_value" + i);
  }
  p.heatmap("the weights of the three heads", {"head_0.weights", "head_1.weights", "head_2.weights"});
  p.step(7);
  // the second sequence (an input a learner edits), its keys and values, and the scores of the
  // sentence's queries (attn.queries: the same projection, proven above) over its 8 tokens
  const auto toks = Page::labels("k", 8);
  p.matrix("embedded_sentence_2", embedded_sentence_2).rows(toks).caption("embedded_sentence_2: the second sequence, torch.rand(8, 16)");
  p.matrix("cross.keys", cross.keys).rows(toks).how(how::dot("embedded_sentence_2", "weights.W_key", d)).hidden();
  p.matrix("cross.scores", cross.scores).rows(words).cols(toks).how(how::dot("attn.queries", "cross.keys", d_k)).hidden();
  p.matrix("cross.scaled_scores", cross.scaled_scores).rows(words).cols(toks)
      .how(how::divided("cross.scores", double(qkv::sqrt(24.0f)), "1/sqrt(d_k): PyTorch divides by float32(sqrt(24)) = 4.8989797"))
      .hidden();
  p.matrix("cross.weights", cross.weights).rows(words).cols(toks).how(how::softmax("cross.scaled_scores"));
  p.heatmap("cross-attention: the 6 words over the 8 tokens of the second sequence", {"cross.weights"});
}

}  // namespace qkv::examples::from_scratch

#ifndef QKV_EXAMPLE_NO_MAIN
int main() { qkv::examples::from_scratch::walkthrough(); }
#endif
