// 05_statquest_self_attention.cpp: tutorial 004, "Coding Self-Attention in PyTorch" (StatQuest).
//
// The tutorial's SelfAttention module, with row_dim and col_dim, applied to a 3x2 matrix of
// token encodings: q = W_q(x), k = W_k(x), v = W_v(x) (nn.Linear without bias: x Wᵀ),
// sims = q kᵀ, scaled by sqrt(d_model), softmax over col_dim, times v. Every step is a
// static_assert against PyTorch's float64 results with an error bound derived step by step.
#include <iostream>

#include <qkv/core/attention.hpp>
#include <qkv/core/bounds.hpp>
#include <qkv/core/check.hpp>
#include <qkv/core/math.hpp>
#include <qkv/core/matrix.hpp>
#include <qkv/core/softmax.hpp>
#include <qkv/core/torch.hpp>
#include <qkv/io/print.hpp>

namespace qkv::examples::statquest {

namespace check = qkv::check;
using qkv::matrix;

/// @brief the tutorial's module: three nn.Linear(d_model, d_model, bias=False) and a forward pass.
/// row_dim and col_dim say which index of the encodings runs over tokens and which over features.
template <class T, std::size_t d_model, std::size_t row_dim = 0, std::size_t col_dim = 1>
struct SelfAttention {
  static_assert(row_dim + col_dim == 1, "a 2-d input: one of row_dim and col_dim is 0, the other 1");
  matrix<T, d_model, d_model> W_q, W_k, W_v;  // nn.Linear weights, (out, in)

  template <std::size_t n_tokens>
  struct trace {
    matrix<T, n_tokens, d_model> q, k, v;
    matrix<T, n_tokens, n_tokens> sims, scaled_sims, attention_percents;
    matrix<T, n_tokens, d_model> attention_scores;
  };

  template <std::size_t n_tokens>
  [[nodiscard]] constexpr trace<n_tokens> forward(const matrix<T, n_tokens, d_model>& token_encodings) const {
    trace<n_tokens> t;
    // Step 2: queries, keys and values. Create the query, key and values for each token: x Wᵀ
    // (nn.Linear without bias).
    t.q = qkv::project(token_encodings, W_q, qkv::out_in);
    t.k = qkv::project(token_encodings, W_k, qkv::out_in);
    t.v = qkv::project(token_encodings, W_v, qkv::out_in);
    // Step 3: similarities. sims = q kᵀ (k transposed over row_dim and col_dim): each query
    // against each key.
    t.sims = qkv::matrix_product(t.q, qkv::transposed(t.k));
    // Step 4: scaled similarities. Scaled by sqrt(k.size(col_dim)): a division by the float
    // sqrt(d_model), as torch.tensor(2**0.5).
    t.scaled_sims = t.sims / qkv::sqrt(T(col_dim == 1 ? d_model : n_tokens));
    // Step 5: attention percents. Softmax over col_dim: each row when col_dim == 1.
    t.attention_percents = col_dim == 1 ? qkv::softmax_rows(t.scaled_sims) : qkv::softmax_columns(t.scaled_sims);
    // Step 6: attention scores (the output). The percents times the values: each row a
    // weighted sum of the values.
    t.attention_scores = qkv::matrix_product(t.attention_percents, t.v);
    return t;
  }
};

// Step 1: the token encodings and the module's weights. Create a matrix of token encodings
// (float32, as torch.tensor makes them): three tokens of 2 features; then the module's three
// nn.Linear weights, drawn below.
constexpr matrix<float, 3, 2> encodings_matrix{{{1.16f, 0.23f}, {0.57f, 1.36f}, {4.41f, -2.16f}}};

// torch.manual_seed(42), then three nn.Linear(2, 2, bias=False), created in the order W_q, W_k,
// W_v: the compiler runs PyTorch's generator (core/torch.hpp). Each weight is (out, in) =
// uniform(-b, b) with b = float(sqrt(3) sqrt(2 / (1 + 5.000000000000001)) / sqrt(2)) = 0.70710677,
// x (b - -b) + -b with one rounding (PyTorch's fused multiply-add).
constexpr SelfAttention<float, 2> selfAttention = [] {
  qkv::torch::generator gen{42};
  const auto W_q = gen.linear<float, 2, 2>(qkv::torch::bias::none);
  const auto W_k = gen.linear<float, 2, 2>(qkv::torch::bias::none);
  const auto W_v = gen.linear<float, 2, 2>(qkv::torch::bias::none);
  return SelfAttention<float, 2>{W_q.weight, W_k.weight, W_v.weight};
}();

// bit for bit the weights PyTorch drew (tests/data/reference/004, as stored, (out, in)); by hand,
// W_q(0, 0): the first draw's low 24 bits are 0xe1dc66, x = 14802022 / 2^24 = 0.88226926, and
// 0.88226926 x 1.4142135 - 0.70710677 = 0.54061037
static_assert(selfAttention.W_q == matrix<float, 2, 2>{{{0.5406103730201721f, 0.5869042277336121f},
                                                        {-0.16565565764904022f, 0.6495562791824341f}}});
static_assert(selfAttention.W_k == matrix<float, 2, 2>{{{-0.15492962300777435f, 0.14268755912780762f},
                                                        {-0.34425848722457886f, 0.4152715504169464f}}});
static_assert(selfAttention.W_v == matrix<float, 2, 2>{{{0.6233449578285217f, -0.5187534093856812f},
                                                        {0.6146144866943359f, 0.13234160840511322f}}});

// calculate basic attention for the token encodings
constexpr auto t = selfAttention.forward(encodings_matrix);

// The tutorial prints W.weight.transpose(0, 1): W_q^T = [[0.5406, -0.1657], [0.5869, 0.6496]]
static_assert(proven<check::near(qkv::transposed(selfAttention.W_q),
                                 matrix<float, 2, 2>{{{0.5406f, -0.1657f}, {0.5869f, 0.6496f}}}, 5e-5f)>);

// By hand, the first query: [1.16, 0.23] . rows of W_q = [1.16*0.5406 + 0.23*0.5869, 1.16*-0.1657 + 0.23*0.6496]
//   = [0.6271 + 0.1350, -0.1922 + 0.1494] = [0.7621, -0.0428]   (the tutorial: 0.7621, -0.0428)
static_assert(proven<check::near(t.q(0, 0), 0.7621f, 5e-5f) && check::near(t.q(0, 1), -0.0428f, 5e-5f)>);
// sims(0, 0) = q_1 . k_1 = 0.7621 * -0.1469 + -0.0428 * -0.3038 = -0.1120 + 0.0130 = -0.0990
static_assert(proven<check::near(t.sims(0, 0), -0.0990f, 5e-5f)>);
// scaled: -0.0990 / 1.4142 = -0.0700; softmax of row 1 [-0.0700, 0.0458, -0.4612]:
// e^x = [0.9324, 1.0469, 0.6305], sum 2.6098, percents [0.3573, 0.4011, 0.2416]
static_assert(proven<check::near(t.scaled_sims(0, 0), -0.0700f, 5e-5f)>);
static_assert(proven<check::near(t.attention_percents(0, 0), 0.3573f, 5e-5f) &&
                     check::near(t.attention_percents(0, 2), 0.2416f, 5e-5f)>);

// The module's output, as the tutorial prints it (4 decimals: within 5e-5 of the exact value,
// plus float32 rounding, below 2e-5 here: see the bound below)
constexpr matrix<float, 3, 2> printed_output{{{1.0100f, 1.0641f}, {0.2040f, 0.7057f}, {3.4989f, 2.2427f}}};
static_assert(proven<check::near(t.attention_scores, printed_output, 5e-5f + 2e-5f)>);

// ---------------------------------------------------------------------------------------------
// Against PyTorch's float64 results (tests/data/reference/004, float64), within bounds derived
// from the standard model of float32 rounding (core/bounds.hpp). The float64 results carry
// their own rounding, at most gamma_4(double) * 20 = 1e-14 here: counted as 1e-14.
constexpr matrix<double, 3, 2> q_float64{{{0.7620959894860677, -0.04276261042141272},
                                          {1.1063376668681961, 0.7889728253049961},
                                          {1.1163784802493666, -2.1335830437411403}}};
constexpr matrix<double, 3, 3> sims_float64{{{-0.09895961555062059, 0.06482817456247224, -0.6522972481973461},
                                             {-0.4022327875454886, 0.40775950274808564, -3.002373381793473},
                                             {0.48424469381514135, -0.6682632539007769, 4.046130620823258}}};
constexpr matrix<double, 3, 3> percents_float64{{{0.35727210990190017, 0.40114107006649413, 0.2415868200316056},
                                                 {0.34104296175967763, 0.6047163457511381, 0.05424069248918421},
                                                 {0.07217980790531701, 0.03195134102900095, 0.8958688510656819}}};
constexpr matrix<double, 3, 2> output_float64{{{1.0100404377059597, 1.064073509740387},
                                               {0.2040220769212846, 0.7057299868978996},
                                               {3.4989178886221914, 2.2427184815992223}}};

namespace bound {
using qkv::bounds::product_error;
using qkv::matrix_cast;
constexpr double u = qkv::bounds::unit_roundoff<float>();
constexpr double ref = 1e-14;  // the float64 reference's own rounding
constexpr auto x = matrix_cast<double>(encodings_matrix);
// q, k, v = x Wᵀ: inputs exact, 2 products and 1 addition: gamma_2 |x| |W|ᵀ
constexpr auto dq = product_error<float>(x, qkv::transposed(matrix_cast<double>(selfAttention.W_q)));
constexpr auto dk = product_error<float>(x, qkv::transposed(matrix_cast<double>(selfAttention.W_k)));
constexpr auto dv = product_error<float>(x, qkv::transposed(matrix_cast<double>(selfAttention.W_v)));
// sims = q kᵀ with q and k off by dq, dk
constexpr auto dsims = product_error<float>(matrix_cast<double>(t.q), dq,
                                            qkv::transposed(matrix_cast<double>(t.k)), qkv::transposed(dk));
// scaled = sims / fl(sqrt 2): dsims / sqrt 2, plus the division's rounding u and the float
// sqrt(2)'s own relative error u (the float64 run divides by the double sqrt(2))
constexpr auto dscaled = qkv::divided(dsims, 1.41421356) +
                         qkv::scaled(2 * u, qkv::bounds::abs(matrix_cast<double>(t.scaled_sims)));
constexpr auto dpercents = qkv::bounds::softmax_rows_error<float>(
    matrix_cast<double>(t.scaled_sims), matrix_cast<double>(t.attention_percents), dscaled);
constexpr auto doutput = product_error<float>(matrix_cast<double>(t.attention_percents), dpercents,
                                              matrix_cast<double>(t.v), dv);
}  // namespace bound

static_assert(proven<check::within(t.q, q_float64, qkv::map(bound::dq, [](double e) { return e + bound::ref; }))>);
static_assert(proven<check::within(t.sims, sims_float64, qkv::map(bound::dsims, [](double e) { return e + bound::ref; }))>);
static_assert(proven<check::within(t.attention_percents, percents_float64,
                                   qkv::map(bound::dpercents, [](double e) { return e + bound::ref; }))>);
static_assert(proven<check::within(t.attention_scores, output_float64,
                                   qkv::map(bound::doutput, [](double e) { return e + bound::ref; }))>);
// the worst-case bound on the output is below 2e-5, finer than the printed 4 decimals
static_assert(qkv::max_abs_difference(bound::doutput, matrix<double, 3, 2>{}) < 2e-5);

// The module is qkv::self_attention with nn.Linear weights and the default scaling: same bits.
constexpr auto same = qkv::self_attention(encodings_matrix, selfAttention.W_q, selfAttention.W_k,
                                          selfAttention.W_v, qkv::out_in);
static_assert(same.weights == t.attention_percents && same.context == t.attention_scores);

// ---------------------------------------------------------------------------------------------
inline void walkthrough() {
  using qkv::io::torch_str;
  std::cout << "Coding Self-Attention in PyTorch (StatQuest, tutorial 004), proven at compile time\n\n"
            << "encodings_matrix =\n" << torch_str(encodings_matrix) << "\n\n"
            << "selfAttention(encodings_matrix) =\n" << torch_str(t.attention_scores) << "\n\n"
            << "## print out the weight matrix that creates the queries\n"
            << torch_str(qkv::transposed(selfAttention.W_q)) << "\n"
            << "## print out the weight matrix that creates the keys\n"
            << torch_str(qkv::transposed(selfAttention.W_k)) << "\n"
            << "## print out the weight matrix that creates the values\n"
            << torch_str(qkv::transposed(selfAttention.W_v)) << "\n\n"
            << "q =\n" << torch_str(t.q) << "\n"
            << "k =\n" << torch_str(t.k) << "\n"
            << "v =\n" << torch_str(t.v) << "\n\n"
            << "sims = torch.matmul(q, k.transpose(dim0=0, dim1=1))\n" << torch_str(t.sims) << "\n"
            << "scaled_sims = sims / (torch.tensor(2)**0.5)\n" << torch_str(t.scaled_sims) << "\n"
            << "attention_percents = F.softmax(scaled_sims, dim=1)\n" << torch_str(t.attention_percents) << "\n"
            << "torch.matmul(attention_percents, selfAttention.W_v(encodings_matrix))\n"
            << torch_str(t.attention_scores) << "\n\n"
            << "TRIPLE BAM!!! Every number above was checked by the compiler against PyTorch's float64\n"
            << "results, within a bound derived from float32 rounding (at most "
            << qkv::max_abs_difference(bound::doutput, matrix<double, 3, 2>{}) << " on the output).\n";
}

}  // namespace qkv::examples::statquest

// ---------------------------------------------------------------------------------------------
// the learner's page (qkv explain statquest --html FILE): the module's forward pass, each matrix
// with how it was computed; the proofs are this file's static_asserts (scripts/page_notes.py)
namespace qkv::examples::statquest {

template <class Page>
void page(Page& p) {
  using how = typename Page::how;
  p.with_truth();  // its matrices without a how are exact inputs: the page shows the 50-digit truth
  const auto tok = Page::labels("token ", 3), q = Page::labels("q", 3), k = Page::labels("k", 3),
             v = Page::labels("v", 3);
  p.step(1);
  p.matrix("encodings_matrix", encodings_matrix).rows(tok);
  p.matrix("selfAttention.W_q", selfAttention.W_q);
  p.matrix("selfAttention.W_k", selfAttention.W_k);
  p.matrix("selfAttention.W_v", selfAttention.W_v);
  p.step(2);
  p.matrix("t.q", t.q).rows(q).how(how::dot("encodings_matrix", "selfAttention.W_q", 2))
      .proven(q_float64, "q_float64 (PyTorch, float64)", -1);
  p.matrix("t.k", t.k).rows(k).how(how::dot("encodings_matrix", "selfAttention.W_k", 2));
  p.matrix("t.v", t.v).rows(v).how(how::dot("encodings_matrix", "selfAttention.W_v", 2));
  p.step(3);
  p.matrix("t.sims", t.sims).rows(q).cols(k).how(how::dot("t.q", "t.k", 2))
      .proven(sims_float64, "sims_float64 (PyTorch, float64)", -1);
  p.step(4);
  p.matrix("t.scaled_sims", t.scaled_sims).rows(q).cols(k)
      .how(how::divided("t.sims", double(qkv::sqrt(2.0f)), "1/sqrt(2): the tutorial divides by the float sqrt(2)"));
  p.step(5);
  p.matrix("t.attention_percents", t.attention_percents).rows(q).cols(k).how(how::softmax("t.scaled_sims"))
      .proven(percents_float64, "percents_float64 (PyTorch, float64)", -1);
  p.heatmap("attention percents (rows: queries, columns: keys)", {"t.attention_percents"});
  p.step(6);
  p.matrix("t.attention_scores", t.attention_scores).rows(q).how(how::matmul("t.attention_percents", "t.v", 3))
      .proven(output_float64, "output_float64 (PyTorch, float64)", -1);
}

}  // namespace qkv::examples::statquest

#ifndef QKV_EXAMPLE_NO_MAIN
int main() { qkv::examples::statquest::walkthrough(); }
#endif
