// 01_illustrated_self_attention.cpp: tutorial 000, "Illustrated: Self-Attention", proven at compile time.
//
// Three inputs of size 4, integer 4x3 weights in the row-vector convention (keys = x @ w_key),
// unscaled scores, a softmax over each row, the 3x3x3 "weighted values" and their sum.
// Every step below is a static_assert: if this file compiles, the numbers are right.
// Running it prints the tutorial's trace.
#include <iomanip>
#include <iostream>

#include <qkv/core/attention.hpp>
#include <qkv/core/check.hpp>
#include <qkv/core/matrix.hpp>
#include <qkv/core/softmax.hpp>
#include <qkv/io/print.hpp>

namespace qkv::examples::illustrated {

namespace check = qkv::check;
using qkv::matrix;

// ---------------------------------------------------------------------------------------------
// Step 1: prepare inputs. 3 inputs, each of dimension 4 (float32, as the tutorial's tensors)
constexpr matrix<float, 3, 4> x{{
    {1, 0, 1, 0},  // Input 1
    {0, 2, 0, 2},  // Input 2
    {1, 1, 1, 1},  // Input 3
}};

// Step 2: initialise weights, (in, out) = (4, 3)
constexpr matrix<float, 4, 3> w_key{{{0, 0, 1}, {1, 1, 0}, {0, 1, 0}, {1, 1, 0}}};
constexpr matrix<float, 4, 3> w_query{{{1, 0, 1}, {1, 0, 0}, {0, 0, 1}, {0, 1, 1}}};
constexpr matrix<float, 4, 3> w_value{{{0, 2, 0}, {0, 3, 0}, {1, 0, 3}, {1, 1, 0}}};

// Step 3: derive key, query and value, x @ w: (3, 4) x (4, 3) = (3, 3)
constexpr auto keys = qkv::project(x, w_key, qkv::in_out);
constexpr auto querys = qkv::project(x, w_query, qkv::in_out);
constexpr auto values = qkv::project(x, w_value, qkv::in_out);

// [1, 0, 1, 0] x w_key = [0+0+0+0, 0+0+1+0, 1+0+0+0] = [0, 1, 1]
// [0, 2, 0, 2] x w_key = [0+2+0+2, 0+2+0+2, 0+0+0+0] = [4, 4, 0]
// [1, 1, 1, 1] x w_key = [0+1+0+1, 0+1+1+1, 1+0+0+0] = [2, 3, 1]
static_assert(proven<check::equal(keys, matrix<float, 3, 3>{{{0, 1, 1}, {4, 4, 0}, {2, 3, 1}}})>);
// [1, 0, 1, 0] x w_query = [1+0+0+0, 0+0+0+0, 1+0+1+0] = [1, 0, 2]
// [0, 2, 0, 2] x w_query = [0+2+0+0, 0+0+0+2, 0+0+0+2] = [2, 2, 2]
// [1, 1, 1, 1] x w_query = [1+1+0+0, 0+0+0+1, 1+0+1+1] = [2, 1, 3]
static_assert(proven<check::equal(querys, matrix<float, 3, 3>{{{1, 0, 2}, {2, 2, 2}, {2, 1, 3}}})>);
// [1, 0, 1, 0] x w_value = [0+0+1+0, 2+0+0+0, 0+0+3+0] = [1, 2, 3]
// [0, 2, 0, 2] x w_value = [0+0+0+2, 0+6+0+2, 0+0+0+0] = [2, 8, 0]
// [1, 1, 1, 1] x w_value = [0+0+1+1, 2+3+0+1, 0+0+3+0] = [2, 6, 3]
static_assert(proven<check::equal(values, matrix<float, 3, 3>{{{1, 2, 3}, {2, 8, 0}, {2, 6, 3}}})>);

// Step 4: attention scores, querys @ keys.T: (3, 3) x (3, 3) = (3, 3), no scaling
constexpr auto attn_scores = qkv::scores(querys, keys);
// query 1 [1, 0, 2] . keys [0, 1, 1], [4, 4, 0], [2, 3, 1] = [0+0+2, 4+0+0, 2+0+2]    = [2, 4, 4]
// query 2 [2, 2, 2] . ...                                  = [0+2+2, 8+8+0, 4+6+2]    = [4, 16, 12]
// query 3 [2, 1, 3] . ...                                  = [0+1+3, 8+4+0, 4+3+3]    = [4, 12, 10]
static_assert(proven<check::equal(attn_scores, matrix<float, 3, 3>{{{2, 4, 4}, {4, 16, 12}, {4, 12, 10}}})>);

// Step 5: softmax across each row of the scores
constexpr auto attn_scores_softmax = qkv::softmax_rows(attn_scores);

// By hand, row 1: softmax([2, 4, 4]) = [1, e^2, e^2] / (1 + 2 e^2), e^2 = 7.3890561
//   = [1 / 15.7781122, 7.3890561 / 15.7781122, ...] = [0.0633789, 0.4683105, 0.4683105]
// PyTorch's float64 values (tests/data/reference/000, float64.attn_scores_softmax):
constexpr matrix<double, 3, 3> softmax_float64{{
    {0.06337893833303762, 0.4683105308334812, 0.4683105308334812},
    {6.033664854558336e-06, 0.9820078648958167, 0.01798610143932864},
    {0.00029538722303456454, 0.8805369017749616, 0.11916771100200384},
}};
// Tolerance for float32: exp is within 1 ulp (2u relative, u = 2^-24), the 2 additions of the
// row sum add u each, the division u: a weight is within 7u relative of the exact one, and a
// weight is <= 1, so 8u = 2^-21 = 4.8e-7 absolute bounds it.
constexpr float softmax_tolerance_f32 = 1.0f / (1 << 21);
static_assert(proven<check::near(qkv::matrix_cast<double>(attn_scores_softmax), softmax_float64,
                                 double(softmax_tolerance_f32))>);
// The same computation in double is within 1e-12 of PyTorch's float64.
constexpr auto attn_scores_softmax_f64 = qkv::softmax_rows(qkv::matrix_cast<double>(attn_scores));
static_assert(proven<check::near(attn_scores_softmax_f64, softmax_float64, 1e-12)>);
// Each row sums to 1: sum_i e_i / s is 1 up to the 2 roundings of s (2u), each division adds u
// and summing the 3 weights 2 more roundings: within 5u = 3.0e-7.
static_assert(proven<check::near(qkv::row_sums(attn_scores_softmax),
                                 matrix<float, 3, 1>{{{1}, {1}, {1}}}, 5.0f / (1 << 24))>);

// The tutorial rounds the weights by hand "for readability"
constexpr matrix<float, 3, 3> attn_scores_softmax_rounded{{
    {0.0f, 0.5f, 0.5f},
    {0.0f, 1.0f, 0.0f},
    {0.0f, 0.9f, 0.1f},
}};

// The pitfall of the tutorial's numpy cell: np.exp(s) / np.sum(np.exp(s)) normalises over all
// nine scores, so query 1's weights depend on query 2's scores. Its row 1 sums to
// (e^2 + 2 e^4) / (e^2 + 4 e^4 + 2 e^12 + e^16 + e^10) = 1.26e-5, not 1.
constexpr auto whole_matrix_softmax = qkv::softmax_all(qkv::matrix_cast<double>(attn_scores));
constexpr matrix<double, 3, 3> numpy_whole_matrix_softmax{{
    {8.002120690235606e-07, 5.912811869056454e-06, 5.912811869056454e-06},
    {5.912811869056454e-06, 0.962338462448094, 0.017625843766938966},
    {5.912811869056454e-06, 0.017625843766938966, 0.00238539855848297},
}};
static_assert(proven<check::near(whole_matrix_softmax, numpy_whole_matrix_softmax, 1e-12)>);
static_assert(proven<check::near(qkv::sum(whole_matrix_softmax), 1.0, 1e-15)>);
static_assert(proven<check::near(qkv::row_sums(whole_matrix_softmax)(0, 0), 1.2625835807136469e-05, 1e-16)>);

// Step 6: multiply scores with values. weighted_values[i][j] = softmax[j][i] * values[i]
// (value i weighted for query j), (3, 3, 3)
constexpr auto weighted_values = qkv::weighted_values(attn_scores_softmax_rounded, values);
// value 1 [1, 2, 3] times the weights of value 1 for queries 1..3 [0.0, 0.0, 0.0] -> all 0
// value 2 [2, 8, 0] times [0.5, 1.0, 0.9] -> [1, 4, 0], [2, 8, 0], [1.8, 7.2, 0]
// value 3 [2, 6, 3] times [0.5, 0.0, 0.1] -> [1, 3, 1.5], [0, 0, 0], [0.2, 0.6, 0.3]
// 0.9f * 2 = 1.8f exactly? 0.9f = 0.89999997615814208984375, times 2 is exact: 1.7999999523...,
// which is the float nearest 1.8 (1.8f): so the weighted values equal the float literals.
static_assert(proven<check::equal(weighted_values,
                                  qkv::stack<float, 3, 3, 3>{{
                                      matrix<float, 3, 3>{{{0, 0, 0}, {0, 0, 0}, {0, 0, 0}}},
                                      matrix<float, 3, 3>{{{1, 4, 0}, {2, 8, 0}, {1.8f, 7.2f, 0}}},
                                      matrix<float, 3, 3>{{{1, 3, 1.5f}, {0, 0, 0}, {0.2f, 0.6f, 0.3f}}},
                                  }})>);

// Step 7: sum the weighted values (over the first index) to get the outputs
constexpr auto outputs = qkv::sum(weighted_values);
// Output 1 = [0, 0, 0] + [1, 4, 0] + [1, 3, 1.5] = [2, 7, 1.5]
// Output 2 = [0, 0, 0] + [2, 8, 0] + [0, 0, 0]   = [2, 8, 0]
// Output 3 = [0, 0, 0] + [1.8, 7.2, 0] + [0.2, 0.6, 0.3] = [2, 7.8, 0.3]
// In float32, 7.2f + 0.6f rounds to 7.7999997 (the TensorFlow print): 7.2f = 7.19999980926...,
// 0.6f = 0.60000002384..., their sum 7.79999983310... rounds to the float 7.79999971389...,
// one ulp (4.8e-7) below 7.8f = 7.80000019073...
static_assert(proven<check::equal(outputs(0, 0), 2.0f) && check::equal(outputs(0, 1), 7.0f) &&
                     check::equal(outputs(0, 2), 1.5f)>);
static_assert(proven<check::equal(outputs(1, 0), 2.0f) && check::equal(outputs(1, 1), 8.0f) &&
                     check::equal(outputs(1, 2), 0.0f)>);
static_assert(proven<check::equal(outputs(2, 1), 7.79999971389770507812f) && outputs(2, 1) != 7.8f>);
static_assert(proven<check::near(outputs, matrix<float, 3, 3>{{{2, 7, 1.5f}, {2, 8, 0}, {2, 7.8f, 0.3f}}},
                                 1.0f / (1 << 21))>);
// The sum of the weighted values and the product softmax @ values are the same sums in the
// same order, so they agree to the bit.
static_assert(qkv::context(attn_scores_softmax_rounded, values) == outputs);

// The same steps with the exact softmax: PyTorch's float64 outputs, within float32 rounding.
constexpr auto outputs_exact_softmax = qkv::context(attn_scores_softmax, values);
constexpr matrix<double, 3, 3> outputs_exact_float64{{
    {1.9366210616669624, 6.683105308334811, 1.5950684074995565},
    {1.9999939663351454, 7.963991595132215, 0.053976405312549595},
    {1.9997046127769653, 7.759892254657784, 0.3583892946751152},
}};
// Tolerance: each output is sum_i w_i v_i with |v_i| <= 8 and sum_i w_i = 1; each weight is
// off by at most 2^-21 (above) and the 3 products and 2 additions round once each (at most
// 5 half-ulps of a value below 8, i.e. 5 * 2^-21): 8 * 3 * 2^-21 + 5 * 2^-21 < 2^-16 = 1.5e-5.
static_assert(proven<check::near(qkv::matrix_cast<double>(outputs_exact_softmax), outputs_exact_float64,
                                 1.0 / (1 << 16))>);
// and the whole pipeline in one call gives the same bits as the steps above
constexpr auto result = qkv::self_attention(x, w_query, w_key, w_value, qkv::in_out,
                                            {qkv::scaling<float>::none()});
static_assert(result.scores == attn_scores && result.weights == attn_scores_softmax &&
              result.context == outputs_exact_softmax);

// ---------------------------------------------------------------------------------------------
// the trace, cell by cell as in the tutorial

inline void walkthrough() {
  using qkv::io::torch_str;
  std::cout << "Illustrated: Self-Attention (tutorial 000), every number proven at compile time\n\n"
            << "Step 1: prepare inputs\n"
            << "x =\n" << torch_str(x) << "\n\n"
            << "Step 2: initialise weights\n"
            << "Weights for key: \n " << torch_str(w_key) << "\n"
            << "Weights for query: \n " << torch_str(w_query) << "\n"
            << "Weights for value: \n " << torch_str(w_value) << "\n\n"
            << "Step 3: derive key, query and value (x @ w)\n"
            << "Keys: \n " << torch_str(keys) << "\n"
            << "Querys: \n " << torch_str(querys) << "\n"
            << "Values: \n " << torch_str(values) << "\n\n"
            << "Step 4: attention scores (querys @ keys.T)\n"
            << torch_str(attn_scores) << "\n\n"
            << "Step 5: softmax of each row\n"
            << torch_str(attn_scores_softmax) << "\n"
            << "For readability, the tutorial rounds it to\n"
            << torch_str(attn_scores_softmax_rounded) << "\n"
            << "The numpy cell's softmax over all nine scores (a pitfall: row 1 sums to "
            << qkv::row_sums(whole_matrix_softmax)(0, 0) << ", not 1):\n"
            << torch_str(whole_matrix_softmax) << "\n\n"
            << "Step 6: multiply scores with values (weighted_values[i][j] = softmax[j][i] * values[i])\n"
            << torch_str(weighted_values) << "\n\n"
            << "Step 7: sum the weighted values\n"
            << torch_str(outputs) << "\n";
  // through std::cout, like every other line: qkv explain captures std::cout
  std::cout << "In float32 the 7.8 is " << std::fixed << std::setprecision(7) << outputs(2, 1)
            << std::defaultfloat << std::setprecision(6) << " (the TensorFlow print: 7.7999997).\n";
  std::cout << "\nWith the exact softmax instead of the rounded one:\n"
            << torch_str(outputs_exact_softmax) << "\n";
}

}  // namespace qkv::examples::illustrated

// ---------------------------------------------------------------------------------------------
// the learner's page (qkv explain illustrated --html FILE): the steps above in order, their text
// taken from the Step comments and the proofs from the static_asserts of this file
// (scripts/page_notes.py); here, only which matrix each step shows and how it was computed.
namespace qkv::examples::illustrated {

template <class Page>
void page(Page& p) {
  using how = typename Page::how;
  p.with_truth();  // its matrices without a how are exact inputs: the page shows the 50-digit truth
  const auto in = Page::labels("input ", 3), q = Page::labels("q", 3), k = Page::labels("k", 3),
             v = Page::labels("v", 3);
  p.step(1);
  p.matrix("x", x).rows(in);
  p.step(2);
  p.matrix("w_key", w_key);
  p.matrix("w_query", w_query);
  p.matrix("w_value", w_value);
  p.step(3);
  p.matrix("keys", keys).rows(k).how(how::matmul("x", "w_key", 4));
  p.matrix("querys", querys).rows(q).how(how::matmul("x", "w_query", 4));
  p.matrix("values", values).rows(v).how(how::matmul("x", "w_value", 4));
  p.step(4);
  p.matrix("attn_scores", attn_scores).rows(q).cols(k).how(how::dot("querys", "keys", 3));
  p.step(5);
  p.matrix("attn_scores_softmax", attn_scores_softmax)
      .rows(q).cols(k).how(how::softmax("attn_scores"))
      .proven(softmax_float64, "softmax_float64 (PyTorch, float64)", double(softmax_tolerance_f32), "2^-21, derived above");
  p.heatmap("the weights: softmax of each row of the scores", {"attn_scores_softmax"});
  p.text("For readability, the tutorial rounds the weights by hand; steps 6 and 7 use the rounded ones.");
  p.matrix("attn_scores_softmax_rounded", attn_scores_softmax_rounded).rows(q).cols(k);
  p.text("The numpy cell's pitfall: a softmax over all nine scores, so each row no longer sums to 1.");
  // the numpy cell computes in double: the scores as double (a cast, exact), then one softmax
  // over all nine
  p.matrix("attn_scores (float64)", qkv::matrix_cast<double>(attn_scores)).rows(q).cols(k).hidden()
      .how(how::cast("attn_scores"));
  p.matrix("whole_matrix_softmax", whole_matrix_softmax).rows(q).cols(k).how(how::softmax_all("attn_scores (float64)"));
  p.step(6);
  for (std::size_t n = 0; n < 3; ++n)
    p.matrix("weighted_values[" + std::to_string(n) + "]", Page::slice(weighted_values, n))
        .rows(q).how(how::matmul("attn_scores_softmax_rounded", "values", 1, n, n));
  p.step(7);
  p.matrix("outputs", outputs).rows(q).how(how::matmul("attn_scores_softmax_rounded", "values", 3));
  p.text("With the exact softmax instead of the rounded one:");
  p.matrix("outputs_exact_softmax", outputs_exact_softmax)
      .rows(q).how(how::matmul("attn_scores_softmax", "values", 3))
      .proven(outputs_exact_float64, "outputs_exact_float64 (PyTorch, float64)", 1.0 / (1 << 16), "2^-16, derived above");
}

}  // namespace qkv::examples::illustrated

#ifndef QKV_EXAMPLE_NO_MAIN
int main() { qkv::examples::illustrated::walkthrough(); }
#endif
