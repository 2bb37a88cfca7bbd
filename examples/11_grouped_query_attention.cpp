// 11_grouped_query_attention.cpp: grouped-query and multi-query attention.
//
// A decoder's KV cache (example 10) holds, for every token, a key and a value per head: with
// H = 32 heads of 128 that is 8192 numbers per token and per layer. Grouped-query attention
// (GQA; Ainslie et al. 2023, used by LLaMA 2 70B, LLaMA 3, Mistral) keeps only H_kv key/value
// heads and lets each group of G = H / H_kv query heads share one (core/grouped.hpp); H_kv = 1 is
// multi-query attention (MQA; Shazeer 2019). The cache shrinks by G; the queries keep all heads.
//
// The worked case is small enough to check by hand: T = 4 tokens, H = 4 query heads of width
// d_k = 2, H_kv = 2 key/value heads (values of width 3), causal, the inputs drawn by
// torch.manual_seed(11); torch.rand(4, 8), torch.rand(4, 4), torch.rand(4, 6) (qkv's generator
// draws the same bits). Proven below: query heads 0 and 1 use key/value head 0, heads 2 and 3
// head 1; GQA is multi-head attention with each K/V head repeated G times (LLaMA's repeat_kv)
// BIT FOR BIT, and so is MQA; PyTorch's float64 GQA (scripts/fixtures/torch_chapter2.py) agrees within a
// derived bound. The page is docs/examples/11_grouped_query_attention.md.
#include <cstddef>
#include <iostream>
#include <string>
#include <vector>

#include <qkv/core/attention.hpp>
#include <qkv/core/check.hpp>
#include <qkv/core/grouped.hpp>
#include <qkv/core/matrix.hpp>
#include <qkv/core/multihead.hpp>
#include <qkv/core/torch.hpp>
#include <qkv/io/print.hpp>

#include "../tests/data/chapter2/torch_chapter2.hpp"
#include "chapter2_bounds.hpp"

namespace qkv::examples::grouped_query {

namespace check = qkv::check;
namespace torch64 = qkv_test::torch_chapter2::grouped;
using qkv::matrix;

// =============================================================================================
// Step 1: the inputs, already projected: queries (4, H d_k) = (4, 8), keys (4, H_kv d_k) = (4, 4),
// values (4, H_kv d_v) = (4, 6). Query head h is columns 2h, 2h + 1 of q; key/value head g is
// columns 2g, 2g + 1 of k and 3g .. 3g + 2 of v.
constexpr std::size_t T = 4, H = 4, H_kv = 2, G = H / H_kv, d_k = 2, d_v = 3;
template <class F>
struct inputs {
  matrix<F, T, H * d_k> q;
  matrix<F, T, H_kv * d_k> k;
  matrix<F, T, H_kv * d_v> v;
};
constexpr inputs<float> in = [] {
  qkv::torch::generator gen{11};  // torch.manual_seed(11)
  inputs<float> x{};
  x.q = gen.rand<float, T, H * d_k>();     // torch.rand(4, 8)
  x.k = gen.rand<float, T, H_kv * d_k>();  // torch.rand(4, 4)
  x.v = gen.rand<float, T, H_kv * d_v>();  // torch.rand(4, 6)
  return x;
}();
// the first draws, printed to 6 decimals: q row 1 = [0.572123, 0.924839, 0.269338, 0.782457, ...],
// k rows 0 and 1 = [0.243804, 0.338174, ...], [0.990031, 0.194419, ...]
static_assert(qkv::proven<check::near(in.q(1, 0), 0.572123f, 5e-7f) && check::near(in.k(1, 0), 0.990031f, 5e-7f)>);

template <class F>
constexpr qkv::attention_options<F> causal_options() {
  qkv::attention_options<F> o{};
  o.causal = true;
  return o;
}
constexpr auto gqa = qkv::grouped_query_attend_projected<H, H_kv>(in.q, in.k, in.v, causal_options<float>());

// =============================================================================================
// Step 2: two query heads, one key/value head. Query 1 ('token 1') of heads 0 and 1, both
// against key/value head 0: keys k_0 = [0.243804, 0.338174], k_1 = [0.990031, 0.194419].
// Head 0: q = [0.572123, 0.924839]:
//   q·k_0 = 0.139486 + 0.312757 = 0.452243, / sqrt(2) = 0.319784
//   q·k_1 = 0.566421 + 0.179806 = 0.746227, / sqrt(2) = 0.527661
// Head 1: q = [0.269338, 0.782457] (columns 2, 3), the SAME keys:
//   q·k_0 = 0.065665 + 0.264607 = 0.330272, / sqrt(2) = 0.233538
// Tolerance: the 6-decimal inputs are off by 5e-7, so a 2-term dot product of numbers below 1
// by 2e-6, over sqrt(2) 1.4e-6; the 6-decimal results 5e-7; float rounding below 1e-7: 2e-6
static_assert(qkv::proven<check::near(gqa.scaled_scores(0, 1, 0), 0.319784f, 2e-6f) &&
                          check::near(gqa.scaled_scores(0, 1, 1), 0.527661f, 2e-6f) &&
                          check::near(gqa.scaled_scores(1, 1, 0), 0.233538f, 2e-6f)>);
// head 0's weights for query 1: e^(0.319784 - 0.527661) = e^-0.207877 = 0.812289, so
// [0.812289, 1] / 1.812289 = [0.448217, 0.551783]; the scores' 2e-6 moves a two-way softmax by at
// most w_0 w_1 (2 x 2e-6) = 1e-6, the 6-decimal prints 5e-7: 1.5e-6
static_assert(qkv::proven<check::near(gqa.weights(0, 1, 0), 0.448217f, 1.5e-6f) &&
                          check::near(gqa.weights(0, 1, 1), 0.551783f, 1.5e-6f)>);
// causal: query 0 sees key 0 alone, weight 1, so every head's first output row is its
// key/value head's first value, exactly: heads 0, 1 get v[0][0..2], heads 2, 3 get v[0][3..5]
static_assert(qkv::row(gqa.context[0], 0) == qkv::block<1, 3>(in.v, 0, 0) &&
              qkv::row(gqa.context[1], 0) == qkv::block<1, 3>(in.v, 0, 0) &&
              qkv::row(gqa.context[2], 0) == qkv::block<1, 3>(in.v, 0, 3) &&
              qkv::row(gqa.context[3], 0) == qkv::block<1, 3>(in.v, 0, 3));

// =============================================================================================
// Step 3: THE PROOF. GQA is multi-head attention (core/multihead.hpp) with each key/value head
// repeated G = 2 times: repeat_kv turns k (4, 4) = [K_0 K_1] into (4, 8) = [K_0 K_0 K_1 K_1]
// and v likewise, and then every head meets the same numbers in the same order: bit for bit,
// every score, weight and output.
constexpr auto k_repeated = qkv::repeat_kv<H_kv, G>(in.k);  // (4, 8)
constexpr auto v_repeated = qkv::repeat_kv<H_kv, G>(in.v);  // (4, 12)
static_assert(qkv::row(k_repeated, 0) ==
              matrix<float, 1, 8>{{{in.k(0, 0), in.k(0, 1), in.k(0, 0), in.k(0, 1), in.k(0, 2), in.k(0, 3), in.k(0, 2), in.k(0, 3)}}});
constexpr auto mha = qkv::multihead_attend_projected<H>(in.q, k_repeated, v_repeated, causal_options<float>());
static_assert(gqa.scores == mha.scores && gqa.weights == mha.weights);
static_assert(gqa.context == mha.context && gqa.concat == mha.concat);

// multi-query attention, H_kv = 1: all four query heads share key/value head 0
constexpr auto k0 = qkv::block<T, d_k>(in.k, 0, 0);  // (4, 2)
constexpr auto v0 = qkv::block<T, d_v>(in.v, 0, 0);  // (4, 3)
constexpr auto mqa = qkv::grouped_query_attend_projected<H, 1>(in.q, k0, v0, causal_options<float>());
constexpr auto mha_of_mqa = qkv::multihead_attend_projected<H>(in.q, qkv::repeat_kv<1, H>(k0), qkv::repeat_kv<1, H>(v0),
                                                               causal_options<float>());
static_assert(mqa.weights == mha_of_mqa.weights && mqa.concat == mha_of_mqa.concat);
// its query heads 0 and 1 meet key/value head 0 as in GQA: the same outputs, bit for bit (the
// page's mqa.concat starts from GQA's head0.context and head1.context)
static_assert(mqa.context[0] == gqa.context[0] && mqa.context[1] == gqa.context[1]);
// with H_kv = H it is plain multi-head attention
static_assert(qkv::grouped_query_attend_projected<H, H>(in.q, k_repeated, v_repeated, causal_options<float>()).concat == mha.concat);

// the cache it saves: per token and layer, a LLaMA-style 32 query heads of 128 keep 2 x 32 x 128
// = 8192 numbers with MHA, 2 x 8 x 128 = 2048 with 8 key/value heads (GQA, 4x less), 256 with one (MQA)
static_assert(2 * 32 * 128 == 8192 && 2 * 8 * 128 == 2048 && 2 * 1 * 128 == 256);

// =============================================================================================
// Step 4: PyTorch. scripts/fixtures/torch_chapter2.py computes GQA as LLaMA's code does (repeat_kv, i.e.
// repeat_interleave on the head axis, then each head's softmax(q kᵀ / sqrt(d_k)) v with the
// causal mask) in float64 on the same float32 draws. qkv's GQA in double agrees within twice the
// bound of examples/chapter2_bounds.hpp (the inputs are exact: no projection error).
constexpr inputs<double> in64{qkv::matrix_cast<double>(in.q), qkv::matrix_cast<double>(in.k), qkv::matrix_cast<double>(in.v)};
constexpr auto gqa64 = qkv::grouped_query_attend_projected<H, H_kv>(in64.q, in64.k, in64.v, causal_options<double>());
constexpr auto mqa64 = qkv::grouped_query_attend_projected<H, 1>(in64.q, qkv::block<T, d_k>(in64.k, 0, 0),
                                                                 qkv::block<T, d_v>(in64.v, 0, 0), causal_options<double>());
/// the bound of each head's context side by side (T, H d_v), for H_kv key/value heads
template <std::size_t Hkv, std::size_t DK, std::size_t DV>
constexpr matrix<double, T, H * d_v> gqa_bound(const matrix<double, T, H * d_k>& q, const matrix<double, T, DK>& k,
                                               const matrix<double, T, DV>& v) {
  const auto qh = qkv::split_heads<H>(q);
  const auto kh = qkv::split_heads<Hkv>(k);
  const auto vh = qkv::split_heads<Hkv>(v);
  qkv::stack<double, H, T, d_v> b{};
  for (std::size_t h = 0; h < H; ++h) {
    const auto a = qkv::attend_projected(qh[h], kh[h / (H / Hkv)], vh[h / (H / Hkv)], causal_options<double>());
    b[h] = qkv::examples::chapter2::context_error(a, matrix<double, T, d_k>{}, matrix<double, T, d_k>{}, matrix<double, T, d_v>{});
  }
  return qkv::hconcat(b);
}
constexpr auto bound_gqa = gqa_bound<H_kv>(in64.q, in64.k, in64.v);
constexpr auto bound_mqa = gqa_bound<1>(in64.q, qkv::block<T, d_k>(in64.k, 0, 0), qkv::block<T, d_v>(in64.v, 0, 0));
// by hand: scores below 2 (q, k < 1, 2 terms) within gamma_2 2 = 4.4e-16; weights within
// 2 (4.4e-16 / 1.41 + 2u 1.4) + (2 (2 + 1) + 4) u, about 2e-15 of themselves; values below 1:
// each output within about 3e-15
static_assert(qkv::max_abs_difference(bound_gqa, matrix<double, T, H * d_v>{}) < 5e-15);
static_assert(qkv::proven<check::within(gqa64.concat, matrix<double, T, H * d_v>{torch64::gqa}, bound_gqa + bound_gqa)>);
static_assert(qkv::proven<check::within(mqa64.concat, matrix<double, T, H * d_v>{torch64::mqa}, bound_mqa + bound_mqa)>);

// =============================================================================================
inline void walkthrough() {
  using qkv::io::torch_str;
  std::cout << "Grouped-query attention, proven at compile time: T = 4 tokens, H = 4 query heads of width 2,\n"
            << "H_kv = 2 key/value heads (values of width 3), causal; torch.manual_seed(11) draws.\n\n"
            << "q (4, 8) =\n" << torch_str(in.q) << "\nk (4, 4) =\n" << torch_str(in.k)
            << "\nv (4, 6) =\n" << torch_str(in.v) << "\n\n";
  for (std::size_t h = 0; h < H; ++h)
    std::cout << "query head " << h << " uses key/value head " << h / G << ": weights =\n"
              << torch_str(gqa.weights[h]) << "\n";
  std::cout << "\nGQA output (4, 12), the heads side by side =\n" << torch_str(gqa.concat) << "\n\n"
            << "= multi-head attention with each K/V head repeated (repeat_kv), bit for bit (proven);\n"
            << "MQA (one K/V head for all four) likewise. PyTorch float64 (LLaMA's repeat_kv) vs qkv double: "
            << qkv::max_abs_difference(gqa64.concat, matrix<double, T, H * d_v>{torch64::gqa}) << " (bound "
            << 2 * qkv::max_abs_difference(bound_gqa, matrix<double, T, H * d_v>{}) << ")\n";
}

// ---------------------------------------------------------------------------------------------
// the learner's page (qkv explain grouped_query --html FILE, io/page.hpp): the inputs, each query
// head's scores against its group's keys (hover a cell: which columns of q and k it sums), the
// weights of the four heads side by side, and the proofs
template <class Page>
void page(Page& p) {
  using how = typename Page::how;
  const std::vector<std::string> toks{"token 0", "token 1", "token 2", "token 3"};
  using V = std::remove_cvref_t<decltype(in.q(0, 0))>;
  p.with_truth();  // its matrices without a how are exact inputs, or marked derived()
  p.step(1);
  p.matrix("in.q", in.q).rows(toks).caption("in.q: 4 query heads of width 2 side by side");
  p.matrix("in.k", in.k).rows(toks).caption("in.k: 2 key heads of width 2");
  p.matrix("in.v", in.v).rows(toks).caption("in.v: 2 value heads of width 3");
  std::vector<std::string> weight_ids, head_names;
  p.step(2);
  for (std::size_t h = 0; h < H; ++h) {
    const std::string id = "head" + std::to_string(h);
    const std::string group = " (key/value head " + std::to_string(h / G) + ")";
    p.matrix(id + ".scores", gqa.scores[h]).rows(toks).cols(toks).how(how::dot("in.q", "in.k", d_k, h * d_k, (h / G) * d_k));
    p.matrix(id + ".scaled_scores", gqa.scaled_scores[h])
        .rows(toks)
        .cols(toks)
        .how(how::divided(id + ".scores", double(qkv::sqrt(V(2))), "1 / sqrt(2), as a division by sqrt(2)",
                          "causal: a key after its query"));
    p.matrix(id + ".weights", gqa.weights[h]).rows(toks).cols(toks).how(how::softmax(id + ".scaled_scores")).caption(id + ".weights" + group);
    p.matrix(id + ".context", gqa.context[h]).rows(toks).how(how::matmul(id + ".weights", "in.v", T, 0, 0, (h / G) * d_v));
    weight_ids.push_back(id + ".weights");
    head_names.push_back("query head " + std::to_string(h) + group);
  }
  p.heatmap("the weights of the four query heads (heads 0, 1 share keys; so do 2, 3)", weight_ids, head_names);
  p.step(3);
  // MQA's heads 2 and 3 on key/value head 0 (its heads 0 and 1 are GQA's: the same keys): data
  // only, the steps the page's module recomputes mqa.concat with
  for (std::size_t h = 2; h < H; ++h) {
    const std::string id = "mqa.head" + std::to_string(h);
    p.matrix(id + ".scores", mqa.scores[h]).rows(toks).cols(toks).how(how::dot("in.q", "in.k", d_k, h * d_k, 0)).hidden();
    p.matrix(id + ".scaled_scores", mqa.scaled_scores[h])
        .rows(toks)
        .cols(toks)
        .how(how::divided(id + ".scores", double(qkv::sqrt(V(2))), "1 / sqrt(2), as a division by sqrt(2)",
                          "causal: a key after its query"))
        .hidden();
    p.matrix(id + ".weights", mqa.weights[h]).rows(toks).cols(toks).how(how::softmax(id + ".scaled_scores")).hidden();
    p.matrix(id + ".context", mqa.context[h]).rows(toks).how(how::matmul(id + ".weights", "in.v", T, 0, 0, 0)).hidden();
  }
  // the heads side by side, two at a time: concat[0..1] and concat[0..2] are working matrices of
  // the page's module (scratch: not embedded), the concatenation the last step
  const auto side_by_side = [&](const std::string& name, const auto& concat, const std::string& prefix,
                                const std::string& head_2, const std::string& head_3) {
    p.matrix(name + "[0..1]", qkv::block<T, 2 * d_v>(concat, 0, 0))
        .how(how::hconcat(prefix + "head0.context", prefix + "head1.context"))
        .scratch();
    p.matrix(name + "[0..2]", qkv::block<T, 3 * d_v>(concat, 0, 0)).how(how::hconcat(name + "[0..1]", head_2)).scratch();
    return p.matrix(name, concat).rows(toks).how(how::hconcat(name + "[0..2]", head_3));
  };
  side_by_side("gqa.concat", gqa.concat, "", "head2.context", "head3.context")
      .caption("gqa.concat: the heads' outputs side by side")
      .proven(mha.concat, "multi-head attention with repeat_kv(k), repeat_kv(v)", 0.0, "bit for bit");
  side_by_side("mqa.concat", mqa.concat, "", "mqa.head2.context", "mqa.head3.context")
      .caption("mqa.concat: all four heads on key/value head 0")
      .proven(mha_of_mqa.concat, "multi-head attention with k and v head 0 repeated 4 times", 0.0, "bit for bit");
  p.step(4);
  // the same attention in double: the inputs cast to double (exact), then every step in double,
  // data only (the page's module recomputes gqa64.concat with these steps)
  p.matrix("in64.q", in64.q).rows(toks).hidden().how(how::cast("in.q"));
  p.matrix("in64.k", in64.k).rows(toks).hidden().how(how::cast("in.k"));
  p.matrix("in64.v", in64.v).rows(toks).hidden().how(how::cast("in.v"));
  for (std::size_t h = 0; h < H; ++h) {
    const std::string id = "gqa64.head" + std::to_string(h);
    p.matrix(id + ".scores", gqa64.scores[h]).how(how::dot("in64.q", "in64.k", d_k, h * d_k, (h / G) * d_k)).hidden();
    p.matrix(id + ".scaled_scores", gqa64.scaled_scores[h])
        .how(how::divided(id + ".scores", qkv::sqrt(2.0), "1 / sqrt(2), as a division by sqrt(2)",
                          "causal: a key after its query"))
        .hidden();
    p.matrix(id + ".weights", gqa64.weights[h]).how(how::softmax(id + ".scaled_scores")).hidden();
    p.matrix(id + ".context", gqa64.context[h]).how(how::matmul(id + ".weights", "in64.v", T, 0, 0, (h / G) * d_v)).hidden();
  }
  side_by_side("gqa64.concat", gqa64.concat, "gqa64.", "gqa64.head2.context", "gqa64.head3.context")
      .caption("qkv's GQA in double")
      .proven(matrix<double, T, H * d_v>{torch64::gqa}, "PyTorch float64 (LLaMA's repeat_kv)",
              2 * qkv::max_abs_difference(bound_gqa, matrix<double, T, H * d_v>{}), "twice the derived bound, at most");
}

}  // namespace qkv::examples::grouped_query

#ifndef QKV_EXAMPLE_NO_MAIN
int main() { qkv::examples::grouped_query::walkthrough(); }
#endif
