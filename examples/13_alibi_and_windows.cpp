// 13_alibi_and_windows.cpp: ALiBi's linear biases and sliding-window attention.
//
// Two more ways decoders handle position and length, on tutorial 000's three inputs and integer
// weights (examples 01 and 06: scores [[2, 4, 4], [4, 16, 12], [4, 12, 10]], unscaled as in the
// tutorial), causal, every number by hand:
//   - ALiBi (Press, Smith & Lewis 2022; BLOOM, MPT): no positional encoding at all; head h adds
//     m_h (j - i) to the score of query i for key j, a penalty growing with the distance to a past
//     key, the slopes m_h a geometric sequence (core/alibi.hpp);
//   - a sliding window (Longformer's local attention; Mistral): query i sees only the w most
//     recent keys, i - w < j <= i, so a decoder's cache never needs more than w keys
//     (core/masks.hpp's sliding_window_mask, and attend_cache's window).
// The slopes are compared with the paper's own get_slopes (scripts/fixtures/torch_chapter2.py) within a
// derived bound. The page is docs/examples/13_alibi_and_windows.md.
#include <array>
#include <cstddef>
#include <iostream>
#include <string>
#include <vector>

#include <qkv/core/alibi.hpp>
#include <qkv/core/attention.hpp>
#include <qkv/core/bounds.hpp>
#include <qkv/core/check.hpp>
#include <qkv/core/kv_cache.hpp>
#include <qkv/core/masks.hpp>
#include <qkv/core/matrix.hpp>
#include <qkv/core/softmax.hpp>
#include <qkv/io/print.hpp>

#include "../tests/data/chapter2/torch_chapter2.hpp"

namespace qkv::examples::alibi {

namespace check = qkv::check;
namespace paper = qkv_test::torch_chapter2::alibi;
using qkv::causal_alignment;
using qkv::matrix;

// tutorial 000: three inputs of size 4, weights (in, out): keys = x @ w_key
constexpr matrix<double, 3, 4> x{{{1, 0, 1, 0}, {0, 2, 0, 2}, {1, 1, 1, 1}}};
constexpr matrix<double, 4, 3> w_key{{{0, 0, 1}, {1, 1, 0}, {0, 1, 0}, {1, 1, 0}}};
constexpr matrix<double, 4, 3> w_query{{{1, 0, 1}, {1, 0, 0}, {0, 0, 1}, {0, 1, 1}}};
constexpr matrix<double, 4, 3> w_value{{{0, 2, 0}, {0, 3, 0}, {1, 0, 3}, {1, 1, 0}}};
constexpr auto keys = qkv::project(x, w_key, qkv::in_out);      // [[0, 1, 1], [4, 4, 0], [2, 3, 1]]
constexpr auto querys = qkv::project(x, w_query, qkv::in_out);  // [[1, 0, 2], [2, 2, 2], [2, 1, 3]]
constexpr auto values = qkv::project(x, w_value, qkv::in_out);  // [[1, 2, 3], [2, 8, 0], [2, 6, 3]]
constexpr auto scores = qkv::scores(querys, keys);
static_assert(scores == matrix<double, 3, 3>{{{2, 4, 4}, {4, 16, 12}, {4, 12, 10}}});

/// causal attention of the scores plus an additive bias: -inf above the diagonal, softmax of each
/// row, context over the keys attended
struct biased {
  matrix<double, 3, 3> biased_scores, weights;
  matrix<double, 3, 3> outputs;
};
constexpr biased attend(const matrix<double, 3, 3>& bias, const matrix<bool, 3, 3>& allowed) {
  biased a{};
  a.biased_scores = qkv::masked(scores + bias, allowed);
  a.weights = qkv::softmax_rows(a.biased_scores);
  a.outputs = qkv::attended_context(a.biased_scores, a.weights, values);
  return a;
}

// =============================================================================================
// Step 1: the slopes. For H a power of two, m_h = 2^(-8 (h + 1) / H): H = 8 gives 1/2, 1/4, ...,
// 1/256, exactly; H = 4 gives 2^-2, 2^-4, 2^-6, 2^-8. For H = 6 the paper takes the 4 slopes of
// H = 4, then every other slope of H = 8 (2^-1, 2^-3) for the remaining 2 heads.
static_assert(qkv::alibi_slopes<8>() == std::array<double, 8>{0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625});
static_assert(qkv::alibi_slopes<4>() == std::array<double, 4>{0.25, 0.0625, 0.015625, 0.00390625});
static_assert(qkv::alibi_slopes<6>() == std::array<double, 6>{0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125});

// the paper's get_slopes (its Python, scripts/fixtures/torch_chapter2.py) computes start * ratio^i with
// start = ratio = 2^(-8/H) from pow: for H = 16 its second slope prints 0.5000000000000001, where
// qkv's is 2^-1 exactly. The bound: qkv's slope exp(-(8k/H) ln 2) is within (3.01 x 5.55 + 2) u
// = 19 u of itself (ln 2 rounded, the quotient and the product: an argument up to 8 ln 2 = 5.55
// off by 3.01 u of itself; exp within 1 ulp); the paper's within (2i + 5) u for its slope i
// (pow within 1 ulp, ratio^i carrying i times ratio's 2 u, the product), i < 2H: together
// (4H + 24) u of the slope
template <std::size_t H>
constexpr check::verdict agrees_with_the_paper(const double (&slopes)[1][H]) {
  const auto ours = qkv::alibi_slopes<H>();
  matrix<double, 1, H> mine{}, theirs{slopes}, bound{};
  for (std::size_t h = 0; h < H; ++h) {
    mine(0, h) = ours[h];
    bound(0, h) = double(4 * H + 24) * qkv::bounds::unit_roundoff<double>() * ours[h];
  }
  return check::within(mine, theirs, bound);
}
static_assert(qkv::proven<agrees_with_the_paper<6>(paper::slopes_6) && agrees_with_the_paper<8>(paper::slopes_8) &&
                          agrees_with_the_paper<12>(paper::slopes_12) && agrees_with_the_paper<16>(paper::slopes_16) &&
                          agrees_with_the_paper<32>(paper::slopes_32)>);

// =============================================================================================
// Step 2: ALiBi's bias for a head of slope 1/2: 1/2 (j - i), 0 on the diagonal, -1/2 per step
// into the past (the future entries are masked anyway)
constexpr auto bias = qkv::alibi_bias<double, 3, 3>(0.5);
static_assert(bias == matrix<double, 3, 3>{{{0, 0.5, 1}, {-0.5, 0, 0.5}, {-1, -0.5, 0}}});
constexpr auto with_alibi = attend(bias, qkv::causal_mask<3>());
// row 3: [4, 12, 10] + [-1, -0.5, 0] = [3, 11.5, 10] (exact: halves of small integers), so
// softmax = [e^-8.5, 1, e^-1.5] / (e^-8.5 + 1 + e^-1.5)
//         = [0.00016632287731452926, 0.8174384948543442, 0.18239518226834123]   (Python, float64)
// within the softmax's rounding bound (2 (2 + range) + n) u relative: range 8.5, n 3: 24 u = 2.7e-15
static_assert(qkv::row(with_alibi.biased_scores, 2) == matrix<double, 1, 3>{{{3, 11.5, 10}}});
static_assert(qkv::proven<check::near(qkv::row(with_alibi.weights, 2),
                                      matrix<double, 1, 3>{{{0.00016632287731452926, 0.8174384948543442, 0.18239518226834123}}},
                                      2.7e-15)>);
// output 3 = w_0 [1, 2, 3] + w_1 [2, 8, 0] + w_2 [2, 6, 3]
//          = [1.9998336771226852, 7.6342116981994295, 0.5476845154369673]
// within the weights' 2.7e-15 times |v| <= 8 summed over 3 keys, plus gamma(3) 8: 7e-14
static_assert(qkv::proven<check::near(qkv::row(with_alibi.outputs, 2),
                                      matrix<double, 1, 3>{{{1.9998336771226852, 7.6342116981994295, 0.5476845154369673}}}, 7e-14)>);
// what the bias does: it multiplies each weight by e^(m (j - i)) before normalising, so key 0
// (two steps back) loses e^-1 relative to key 2 (the query itself), key 1 e^-0.5. Without ALiBi
// w_0 / w_2 = e^(4 - 10) = e^-6, with it e^(3 - 10) = e^-7: the ratio shrinks by e^-1 =
// 0.36787944117144233. Tolerance: each weight within 24 u relative (23 u without the bias), a
// ratio of two within 2 x 24 u + 2 x 23 u, the divisions and the product 3 u: 97 u = 1.1e-14 of
// e^-7 = 9.2e-4
constexpr auto plain = attend(matrix<double, 3, 3>{}, qkv::causal_mask<3>());
static_assert(qkv::proven<check::near(with_alibi.weights(2, 0) / with_alibi.weights(2, 2),
                                      plain.weights(2, 0) / plain.weights(2, 2) * 0.36787944117144233, 1.1e-14 * 9.2e-4)>);

// =============================================================================================
// Step 3: a sliding window of w = 2: query i sees keys i - 1 and i only. By hand, 5 tokens:
//   [1 0 0 0 0]
//   [1 1 0 0 0]
//   [0 1 1 0 0]
//   [0 0 1 1 0]
//   [0 0 0 1 1]
static_assert(qkv::sliding_window_mask<5, 5>(2) == matrix<bool, 5, 5>{{{true, false, false, false, false},
                                                                      {true, true, false, false, false},
                                                                      {false, true, true, false, false},
                                                                      {false, false, true, true, false},
                                                                      {false, false, false, true, true}}});
// one new token against a cache of 5 (lower right): it sees the last two keys
static_assert(qkv::sliding_window_mask<1, 5>(2) == matrix<bool, 1, 5>{{{false, false, false, true, true}}});
// a window as wide as the sequence, or window 0, is the causal mask
static_assert(qkv::sliding_window_mask<5, 5>(5) == qkv::causal_mask<5>() && qkv::sliding_window_mask<5, 5>(0) == qkv::causal_mask<5>());

// on tutorial 000's inputs: row 3 sees keys 2 and 3 only: softmax([12, 10]) = [1, e^-2] / (1 + e^-2)
// = [0.8807970779778823, 0.11920292202211755]; output 0.8808 [2, 8, 0] + 0.1192 [2, 6, 3]
// = [1.9999999999999998, 7.7615941559557635, 0.3576087660663526] (Python; the first is 2 in exact
// arithmetic). Weights within (2 (2 + 2) + 2) u = 10 u = 1.2e-15 relative, outputs 1.2e-15 x 8 x 2
// + gamma(2) 8 < 2.2e-14
constexpr auto windowed = attend(matrix<double, 3, 3>{}, qkv::sliding_window_mask<3, 3>(2));
static_assert(qkv::proven<check::near(qkv::row(windowed.weights, 2), matrix<double, 1, 3>{{{0, 0.8807970779778823, 0.11920292202211755}}},
                                      1.2e-15)>);
static_assert(windowed.weights(2, 0) == 0);  // masked: exactly 0
static_assert(qkv::proven<check::near(qkv::row(windowed.outputs, 2),
                                      matrix<double, 1, 3>{{{2, 7.7615941559557635, 0.3576087660663526}}}, 2.2e-14)>);
// rows 1 and 2 see at most 2 keys anyway: the same as causal attention, bit for bit
static_assert(qkv::block<2, 3>(windowed.outputs, 0, 0) == qkv::block<2, 3>(plain.outputs, 0, 0));

// decoding with a window: the KV cache's attend_cache(.., window = 2) for token 3 against the
// three cached keys gives row 3 of the windowed attention, bit for bit (example 10's argument)
constexpr auto decoded_3 = [] {
  qkv::kv_cache<double, 3, 3, 3> cache;
  cache.append(keys, values);
  qkv::attention_options<double> o{};
  o.scale = qkv::scaling<double>::none();  // tutorial 000's scores are unscaled
  o.causal = true;
  return qkv::attend_cache(qkv::row(querys, 2), cache, o, causal_alignment::lower_right, 2);
}();
static_assert(decoded_3.weights == qkv::row(windowed.weights, 2) && decoded_3.context == qkv::row(windowed.outputs, 2));

// =============================================================================================
inline void walkthrough() {
  using qkv::io::torch_str;
  std::cout << "ALiBi and sliding windows on tutorial 000's inputs, proven at compile time\n\n"
            << "scores = q kᵀ (unscaled, as the tutorial) =\n" << torch_str(scores) << "\n\n"
            << "ALiBi slopes for 8 heads: ";
  for (double m : qkv::alibi_slopes<8>()) std::cout << m << " ";
  std::cout << "\nALiBi slopes for 6 heads: ";
  for (double m : qkv::alibi_slopes<6>()) std::cout << m << " ";
  std::cout << "\n\nALiBi bias of the head with slope 1/2, m (j - i) =\n" << torch_str(bias)
            << "\ncausal scores + bias =\n" << torch_str(with_alibi.biased_scores) << "\nweights =\n"
            << torch_str(with_alibi.weights) << "\noutputs =\n" << torch_str(with_alibi.outputs)
            << "\n\nwithout ALiBi, weights =\n" << torch_str(plain.weights) << "\n\n"
            << "sliding window of 2 (query i sees keys i-1, i), scores =\n" << torch_str(windowed.biased_scores)
            << "\nweights =\n" << torch_str(windowed.weights) << "\noutputs =\n" << torch_str(windowed.outputs) << "\n";
}

// ---------------------------------------------------------------------------------------------
// the learner's page (qkv explain alibi --html FILE, io/page.hpp): the slopes, a head's bias and
// its causal attention, the sliding window's attention
template <class Page>
void page(Page& p) {
  using how = typename Page::how;
  const std::vector<std::string> in{"input 1", "input 2", "input 3"};
  const auto slopes = qkv::alibi_slopes<8>();
  matrix<double, 1, 8> slope_row{};
  for (std::size_t h = 0; h < 8; ++h) slope_row(0, h) = slopes[h];
  p.with_truth();  // its matrices without a how are exact inputs, or marked derived()
  p.step(1);
  p.matrix("slopes_8", slope_row).cols({"head 0", "head 1", "head 2", "head 3", "head 4", "head 5", "head 6", "head 7"})
      .caption("ALiBi slopes for 8 heads: 2^(-8 (h + 1) / 8)");
  p.step(2);
  p.matrix("querys", querys).rows(in);
  p.matrix("keys", keys).rows(in);
  p.matrix("values", values).rows(in);
  p.matrix("scores", scores).rows(in).cols(in).how(how::dot("querys", "keys", 3));
  p.matrix("bias", bias).rows(in).cols(in).caption("bias = 1/2 (j - i): ALiBi for the head of slope 1/2");
  p.matrix("with_alibi.biased_scores", with_alibi.biased_scores).rows(in).cols(in).caption("scores + bias, -inf after the query")
      .how(how::scaled("scores", 1, "1 (unscaled)", "causal: a key after its query", "bias"));
  p.matrix("with_alibi.weights", with_alibi.weights).rows(in).cols(in).how(how::softmax("with_alibi.biased_scores"));
  p.matrix("with_alibi.outputs", with_alibi.outputs).rows(in).how(how::matmul("with_alibi.weights", "values", 3));
  p.matrix("plain.biased_scores", plain.biased_scores).rows(in).cols(in).caption("scores, -inf after the query (no bias)")
      .how(how::scaled("scores", 1, "1 (unscaled)", "causal: a key after its query"))
      .hidden();
  p.matrix("plain.weights", plain.weights).rows(in).cols(in).caption("the weights without ALiBi")
      .how(how::softmax("plain.biased_scores"));
  p.heatmap("weights with ALiBi (slope 1/2) and without", {"with_alibi.weights", "plain.weights"}, {"ALiBi", "no bias"});
  p.step(3);
  p.matrix("windowed.biased_scores", windowed.biased_scores).rows(in).cols(in).caption("scores in a sliding window of 2 (-inf outside)")
      .how(how::scaled("scores", 1, "1 (unscaled)", "outside the window of 2 (and after the query)"));
  p.matrix("windowed.weights", windowed.weights).rows(in).cols(in).how(how::softmax("windowed.biased_scores"));
  p.matrix("windowed.outputs", windowed.outputs).rows(in).how(how::matmul("windowed.weights", "values", 3))
      .proven(matrix<double, 3, 3>{{{plain.outputs(0, 0), plain.outputs(0, 1), plain.outputs(0, 2)},
                                    {plain.outputs(1, 0), plain.outputs(1, 1), plain.outputs(1, 2)},
                                    {2, 7.7615941559557635, 0.3576087660663526}}},
              "rows 1, 2: causal attention's (bit for bit); row 3 by hand", 2.2e-14);
}

}  // namespace qkv::examples::alibi

#ifndef QKV_EXAMPLE_NO_MAIN
int main() { qkv::examples::alibi::walkthrough(); }
#endif
