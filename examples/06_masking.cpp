// 06_masking.cpp: causal and padding masks, and what a fully masked row gives and why.
//
// Tutorial 000's three inputs and integer weights (examples/01), now with masks. A mask says
// which keys each query may attend to; a disallowed score becomes -inf before the softmax, so
// its weight is exactly 0:
//   causal   query i sees keys 0..i (from 0): a decoder (or a language model) must not read the future
//   padding  no query sees a padding key: a batch pads its sequences to one length, and the
//            filler must not change the real tokens' outputs (PyTorch's key_padding_mask)
// A query with NO allowed key has nothing to normalise: softmax of all -inf is 0/0. qkv gives
// weights 0 and output 0 for it (docs/design.md, "Semantics"); PyTorch's math path gives NaN, which then spreads
// through every later layer. Every number below is proven at compile time; the walkthrough then
// runs the same masks at a realistic size (512 tokens, 64 features) at run time.
#include <cstddef>
#include <iostream>
#include <limits>
#include <memory>
#include <random>

#include <qkv/core/attention.hpp>
#include <qkv/core/check.hpp>
#include <qkv/core/masks.hpp>
#include <qkv/core/matrix.hpp>
#include <qkv/core/sequence.hpp>
#include <qkv/core/softmax.hpp>
#include <qkv/io/print.hpp>

namespace qkv::examples::masking {

namespace check = qkv::check;
using qkv::matrix;

// tutorial 000: three inputs of size 4, weights (in, out): keys = x @ w_key
constexpr matrix<double, 3, 4> x{{{1, 0, 1, 0}, {0, 2, 0, 2}, {1, 1, 1, 1}}};
constexpr matrix<double, 4, 3> w_key{{{0, 0, 1}, {1, 1, 0}, {0, 1, 0}, {1, 1, 0}}};
constexpr matrix<double, 4, 3> w_query{{{1, 0, 1}, {1, 0, 0}, {0, 0, 1}, {0, 1, 1}}};
constexpr matrix<double, 4, 3> w_value{{{0, 2, 0}, {0, 3, 0}, {1, 0, 3}, {1, 1, 0}}};

constexpr auto keys = qkv::project(x, w_key, qkv::in_out);      // [[0, 1, 1], [4, 4, 0], [2, 3, 1]]
constexpr auto querys = qkv::project(x, w_query, qkv::in_out);  // [[1, 0, 2], [2, 2, 2], [2, 1, 3]]
constexpr auto values = qkv::project(x, w_value, qkv::in_out);  // [[1, 2, 3], [2, 8, 0], [2, 6, 3]]
constexpr auto scores = qkv::scores(querys, keys);              // q . k, unscaled as in the tutorial

// [1, 0, 2] . [0, 1, 1] = 2, . [4, 4, 0] = 4, . [2, 3, 1] = 4; likewise rows 2 and 3
static_assert(scores == matrix<double, 3, 3>{{{2, 4, 4}, {4, 16, 12}, {4, 12, 10}}});

/// @brief masked attention, step by step: -inf where not allowed, softmax of each row, times the values
struct masked_attention {
  matrix<bool, 3, 3> allowed;
  matrix<double, 3, 3> masked_scores, weights;
  matrix<double, 3, 3> outputs;
};

constexpr masked_attention attend(const matrix<bool, 3, 3>& allowed) {
  masked_attention a{allowed, {}, {}, {}};
  a.masked_scores = qkv::masked(scores, allowed);
  a.weights = qkv::softmax_rows(a.masked_scores);
  a.outputs = qkv::matrix_product(a.weights, values);
  return a;
}

constexpr double minus_inf = -std::numeric_limits<double>::infinity();

// ---------------------------------------------------------------------------------------------
// 1. the causal mask: query i sees keys 1..i (counting from 1, as below: query 1 sees key 1)

constexpr auto causal = attend(qkv::causal_mask<3>());
static_assert(causal.masked_scores == matrix<double, 3, 3>{{{2, minus_inf, minus_inf},
                                                            {4, 16, minus_inf},
                                                            {4, 12, 10}}});
// row 1: only itself, weight 1, output = value 1 = [1, 2, 3], exactly
static_assert(qkv::row(causal.weights, 0) == matrix<double, 1, 3>{{{1, 0, 0}}});
static_assert(qkv::row(causal.outputs, 0) == qkv::row(values, 0));
// row 2: softmax([4, 16]) = [e^-12, 1] / (1 + e^-12) = [6.1441746022147182e-06, 0.99999385582539779]
// (numpy, float64), and a masked weight is exactly 0 (e^-inf = 0), not merely small.
// Tolerance: the softmax's rounding bound (core/bounds.hpp), (2 (2 + range) + n) u relative with
// range 12, n 2: 30 u = 3.4e-15 of each weight
static_assert(proven<check::near(causal.weights(1, 0), 6.1441746022147182e-06, 3.4e-15 * 6.2e-06) &&
                     check::near(causal.weights(1, 1), 0.99999385582539779, 3.4e-15) && causal.weights(1, 2) == 0>);
// output 2 = w0 [1, 2, 3] + w1 [2, 8, 0] = [1.9999938558253978, 7.9999631349523872, 1.8432523806644153e-05]
// within the weights' error times |v| <= 8, plus gamma(2) 8 for the sum: 3.4e-15 * 8 + 2.3e-16 * 8 < 3e-14
static_assert(proven<check::near(qkv::row(causal.outputs, 1),
                                 matrix<double, 1, 3>{{{1.9999938558253978, 7.9999631349523872, 1.8432523806644153e-05}}}, 3e-14)>);
// row 3 sees everything: the same as no mask
static_assert(qkv::row(causal.outputs, 2) == qkv::row(attend(qkv::all_allowed<3, 3>()).outputs, 2));

// causal means "the future cannot change the past": change input 3, and outputs 1 and 2 stay,
// to the bit (the masked terms are exact zeros: 0 * v = 0 and s + 0 = s)
constexpr matrix<double, 3, 4> x_other_future{{{1, 0, 1, 0}, {0, 2, 0, 2}, {9, -7, 5, 3}}};
constexpr auto future = [] {
  const auto q = qkv::project(x_other_future, w_query, qkv::in_out);
  const auto k = qkv::project(x_other_future, w_key, qkv::in_out);
  const auto v = qkv::project(x_other_future, w_value, qkv::in_out);
  const auto w = qkv::softmax_rows(qkv::masked(qkv::scores(q, k), qkv::causal_mask<3>()));
  return qkv::matrix_product(w, v);
}();
static_assert(qkv::block<2, 3>(future, 0, 0) == qkv::block<2, 3>(causal.outputs, 0, 0));
static_assert(qkv::row(future, 2) != qkv::row(causal.outputs, 2));

// ---------------------------------------------------------------------------------------------
// 2. the padding mask: input 3 is padding (a sequence of 2 tokens padded to 3)

constexpr auto sequence = qkv::fit_to_length<3>(matrix<int, 1, 2>{{{7, 4}}}, 0);  // ids [7, 4, 0]
static_assert(sequence.padding == matrix<bool, 1, 3>{{{false, false, true}}});
constexpr auto padded = attend(qkv::key_padding_allowed<3, 3>(sequence.padding));
// row 1: softmax([2, 4]) = [1, e^2] / (1 + e^2) = [0.11920292202211755, 0.88079707797788254, 0]
// (numpy), within the softmax's rounding bound (2 (2 + 2) + 2) u = 10 u = 1.2e-15 relative
static_assert(proven<check::near(qkv::row(padded.weights, 0),
                                 matrix<double, 1, 3>{{{0.11920292202211755, 0.88079707797788254, 0}}}, 1.2e-15)>);
// output 1 = 0.1192 [1, 2, 3] + 0.8808 [2, 8, 0] = [1.8807970779778826, 7.2847824678672950, 0.35760876606635261]
// within 1.2e-15 * 8 + gamma(2) * 8 < 1.2e-14
static_assert(proven<check::near(qkv::row(padded.outputs, 0),
                                 matrix<double, 1, 3>{{{1.8807970779778826, 7.2847824678672950, 0.35760876606635261}}}, 1.2e-14)>);
// every row's weights still sum to 1 (each weight within 10 u relative, plus 2 additions: 12 u),
// and no query puts weight on the padding key
static_assert(proven<check::near(qkv::row_sums(padded.weights), matrix<double, 3, 1>{{{1}, {1}, {1}}}, 1.4e-15)>);
static_assert(qkv::column(padded.weights, 2) == matrix<double, 3, 1>{});
// the real tokens' outputs are those of the 2-token sequence alone, to the bit
constexpr auto alone = qkv::matrix_product(qkv::softmax_rows(qkv::block<2, 2>(scores, 0, 0)), qkv::block<2, 3>(values, 0, 0));
static_assert(qkv::block<2, 3>(padded.outputs, 0, 0) == alone);
// the padding position still gets an output (PyTorch computes it too); it is ignored downstream

// ---------------------------------------------------------------------------------------------
// 3. a fully masked row: causal AND padding with the padding in FRONT (left padding)

constexpr auto left_padding = matrix<bool, 1, 3>{{{true, false, false}}};
constexpr auto both = qkv::both(qkv::causal_mask<3>(), qkv::key_padding_allowed<3, 3>(left_padding));
// query 1 may see only key 1 (causal), and key 1 is padding: nothing is left
static_assert(qkv::fully_masked_rows(both) == matrix<bool, 3, 1>{{{true}, {false}, {false}}});
constexpr auto empty_row = attend(both);
// its scores are all -inf; softmax would be e^-inf / sum e^-inf = 0 / 0 = NaN. qkv returns
// weights 0 (no distribution, no weight on anything) and so output 0
static_assert(qkv::row(empty_row.masked_scores, 0) == matrix<double, 1, 3>{{{minus_inf, minus_inf, minus_inf}}});
static_assert(qkv::row(empty_row.weights, 0) == matrix<double, 1, 3>{});
static_assert(qkv::row(empty_row.outputs, 0) == matrix<double, 1, 3>{});
// the other rows are unaffected: row 2 sees key 2 only (weight 1), output [2, 8, 0]
static_assert(qkv::row(empty_row.outputs, 1) == qkv::row(values, 1));

// ---------------------------------------------------------------------------------------------
// the same at a realistic size, at run time: 512 tokens of 64 features, the last 112 padding,
// causal and padding masks together. The core functions are constexpr, and run at run time too.

namespace realistic {

constexpr std::size_t T = 512, D = 64, real = 400;

struct inputs {
  matrix<float, T, D> x;
  matrix<float, D, D> wq, wk, wv;
};

struct results {  // on the heap: a 512 x 512 matrix of float is 1 MB
  matrix<float, T, D> q, k, v;
  matrix<bool, T, T> allowed;
  matrix<float, T, T> scores, weights;
  matrix<float, T, D> outputs;
};

inline void run(const inputs& in, results& r, const matrix<bool, 1, T>& padding) {
  // (not qkv::causal_mask<T>(): g++ -O2 tries to fold a constexpr call whose arguments are all
  // constants, and spends a minute on 512 x 512 before giving up; a run-time argument avoids it)
  r.allowed = qkv::key_padding_allowed<T, T>(padding);
  for (std::size_t i = 0; i < T; ++i)
    for (std::size_t j = i + 1; j < T; ++j) r.allowed(i, j) = false;
  r.q = qkv::project(in.x, in.wq, qkv::out_in);  // nn.Linear's (out, in): x Wᵀ
  r.k = qkv::project(in.x, in.wk, qkv::out_in);
  r.v = qkv::project(in.x, in.wv, qkv::out_in);
  r.scores = qkv::scaled_scores(r.q, r.k);  // q kᵀ / sqrt(d_k), d_k = D from q's width
  r.scores = qkv::masked(r.scores, r.allowed);
  r.weights = qkv::softmax_rows(r.scores);
  r.outputs = qkv::matrix_product(r.weights, r.v);
}

inline void walkthrough() {
  std::mt19937 gen(6);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto in = std::make_unique<inputs>();
  for (auto& e : in->x.v) e = normal(gen);
  for (auto* w : {&in->wq, &in->wk, &in->wv})
    for (auto& e : w->v) e = normal(gen) / 8.0f;  // std 1/sqrt(64)
  matrix<bool, 1, T> padding;
  for (std::size_t j = real; j < T; ++j) padding.v[j] = true;

  auto r = std::make_unique<results>();
  run(*in, *r, padding);
  // checks: masked weights are exactly 0; every row sums to 1 within T u; the padding's
  // content does not reach the real tokens; the future does not reach the past
  std::size_t masked_nonzero = 0;
  double worst_sum = 0;
  for (std::size_t i = 0; i < T; ++i) {
    double s = 0;
    for (std::size_t j = 0; j < T; ++j) {
      if (!r->allowed(i, j) && r->weights(i, j) != 0) ++masked_nonzero;
      s += r->weights(i, j);
    }
    worst_sum = std::max(worst_sum, std::abs(s - 1));
  }
  auto changed = std::make_unique<inputs>(*in);
  for (std::size_t i = real; i < T; ++i)
    for (std::size_t j = 0; j < D; ++j) changed->x(i, j) = 1000.0f;  // other padding content
  for (std::size_t j = 0; j < D; ++j) changed->x(real - 1, j) = -5.0f;  // another last real token
  auto r2 = std::make_unique<results>();
  run(*changed, *r2, padding);
  std::size_t past_changed = 0;
  for (std::size_t i = 0; i + 1 < real; ++i)
    for (std::size_t j = 0; j < D; ++j) past_changed += r->outputs(i, j) != r2->outputs(i, j);

  std::cout << "At run time: " << T << " tokens (" << real << " real, " << T - real << " padding), " << D
            << " features, scaled by 1/sqrt(" << D << "), causal and padding masks\n"
            << "  masked weights that are not exactly 0: " << masked_nonzero << "\n"
            << "  largest |row sum - 1|: " << worst_sum << " (float32 softmax rounding, below T u = "
            << double(T) * 0x1p-24 << ")\n"
            << "  outputs of tokens 1.." << real - 1 << " changed by other padding and a new token " << real
            << ": " << past_changed << " of " << (real - 1) * D << "\n";
  if (masked_nonzero != 0 || past_changed != 0 || worst_sum > double(T) * 0x1p-24)
    throw std::runtime_error("06_masking: a mask let something through");
}

}  // namespace realistic

inline void walkthrough() {
  using qkv::io::torch_str;
  std::cout << "Masking (tutorial 000's inputs and weights), proven at compile time\n\n"
            << "scores = querys @ keys.T\n" << torch_str(scores) << "\n\n"
            << "1. causal mask (query i sees keys 1..i)\n" << torch_str(causal.allowed) << "\n"
            << "masked scores\n" << torch_str(causal.masked_scores) << "\n"
            << "weights = softmax(masked scores)\n" << torch_str(causal.weights) << "\n"
            << "outputs = weights @ values\n" << torch_str(causal.outputs) << "\n"
            << "(change input 3: outputs 1 and 2 stay the same, to the bit)\n\n"
            << "2. padding mask (input 3 is padding: ids [7, 4] padded to [7, 4, 0])\n"
            << torch_str(padded.allowed) << "\n"
            << "weights\n" << torch_str(padded.weights) << "\n"
            << "outputs (rows 1 and 2 equal those of the 2-token sequence alone)\n" << torch_str(padded.outputs) << "\n\n"
            << "3. causal + LEFT padding: query 1 may see only key 1, which is padding\n"
            << torch_str(both) << "\n"
            << "masked scores\n" << torch_str(empty_row.masked_scores) << "\n"
            << "weights: row 1 has nothing to normalise (0/0); qkv gives 0, PyTorch gives nan\n"
            << torch_str(empty_row.weights) << "\n"
            << "outputs\n" << torch_str(empty_row.outputs) << "\n\n";
  realistic::walkthrough();
}

}  // namespace qkv::examples::masking

// ---------------------------------------------------------------------------------------------
// the learner's page (qkv explain masking --html FILE): sections 1 to 3 above (their text is the
// numbered comments, read by scripts/page_notes.py), each mask with its masked scores, weights
// (masked keys hatched in the heatmap, unlike a weight of 0) and outputs
namespace qkv::examples::masking {

template <class Page>
void page(Page& p) {
  using how = typename Page::how;
  p.with_truth();  // its matrices without a how are exact inputs: the page shows the 50-digit truth
  const auto q = Page::labels("q", 3), k = Page::labels("k", 3), v = Page::labels("v", 3);
  auto masked_of = [](const matrix<bool, 3, 3>& allowed) {
    std::vector<bool> m;
    for (std::size_t i = 0; i < 3; ++i)
      for (std::size_t j = 0; j < 3; ++j) m.push_back(!allowed(i, j));
    return m;
  };
  auto show = [&](const std::string& id, const masked_attention& a, const std::string& why) {
    p.matrix(id + ".allowed", a.allowed).rows(q).cols(k).caption(id + ".allowed (1: may attend)");
    p.matrix(id + ".masked_scores", a.masked_scores).rows(q).cols(k).how(how::scaled("scores", 1.0, "1 (unscaled)", why));
    p.matrix(id + ".weights", a.weights).rows(q).cols(k).how(how::softmax(id + ".masked_scores"));
    p.heatmap(id + ": the weights (hatched: masked)", {id + ".weights"}).heatmap_mask(masked_of(a.allowed));
    p.matrix(id + ".outputs", a.outputs).rows(q).how(how::matmul(id + ".weights", "values", 3));
  };
  p.step(1);
  p.matrix("x", x).rows(Page::labels("input ", 3));
  p.matrix("w_key", w_key);
  p.matrix("w_query", w_query);
  p.matrix("w_value", w_value);
  p.matrix("querys", querys).rows(q).how(how::matmul("x", "w_query", 4));
  p.matrix("keys", keys).rows(k).how(how::matmul("x", "w_key", 4));
  p.matrix("values", values).rows(v).how(how::matmul("x", "w_value", 4));
  p.matrix("scores", scores).rows(q).cols(k).how(how::dot("querys", "keys", 3));
  show("causal", causal, "the key comes after the query (causal)");
  p.step(2);
  show("padded", padded, "key 3 is padding");
  p.step(3);
  show("empty_row", empty_row, "causal, and key 1 is padding");
}

}  // namespace qkv::examples::masking

#ifndef QKV_EXAMPLE_NO_MAIN
int main() { qkv::examples::masking::walkthrough(); }
#endif
