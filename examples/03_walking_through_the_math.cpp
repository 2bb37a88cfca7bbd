// 03_walking_through_the_math.cpp: tutorial 002, "Walking through the math behind self-attention".
//
// Column vectors (x_i is d x 1, q_i = W_q x_i), d = 4, t = 4, no scaling, and the softmax
// written out by hand: exp of each score, their sum, each exp divided by the sum. First the
// barebones version with no weights at all, then queries, keys and values, worked for y_2.
// The inputs are the values TensorFlow printed (each read as a float32, as the tutorial's
// tensors are). Every step is a static_assert; the float32 results are checked against
// PyTorch's float64 results with error bounds derived step by step (core/bounds.hpp).
#include <iomanip>
#include <iostream>

#include <qkv/core/attention.hpp>
#include <qkv/core/bounds.hpp>
#include <qkv/core/check.hpp>
#include <qkv/core/math.hpp>
#include <qkv/core/matrix.hpp>
#include <qkv/io/print.hpp>

namespace qkv::examples::the_math {

namespace check = qkv::check;
using qkv::matrix;
using vec = qkv::matrix<float, 4, 1>;  // a d x 1 column vector, d = 4
using mat = qkv::matrix<float, 4, 4>;  // a d x d weight matrix
using scalar = qkv::matrix<float, 1, 1>;

// Step 0: the input vectors x_1 .. x_4 and the weights W_q, W_k, W_v, as printed
constexpr vec x_1{{{-0.20886648f}, {0.5476398f}, {0.72447395f}, {-1.1310507f}}};
constexpr vec x_2{{{0.1870852f}, {-1.3414632f}, {-1.1067361f}, {-1.3406332f}}};
constexpr vec x_3{{{-1.4844604f}, {0.60378075f}, {0.39966342f}, {-0.7903915f}}};
constexpr vec x_4{{{-0.39180905f}, {-1.2203115f}, {1.0298591f}, {-0.23658466f}}};

constexpr mat W_q{{{0.0558263f, -1.7287809f, 0.06325671f, 0.8925434f},
                   {0.44502732f, 2.3946028f, -0.7817421f, -0.5631514f},
                   {0.8664166f, 0.14898889f, -1.2681427f, -1.3942317f},
                   {-0.52701306f, 0.6796619f, 0.95935136f, -0.8240369f}}};
constexpr mat W_k{{{1.4865062f, 0.53539854f, 0.707822f, -0.3496642f},
                   {-0.36981565f, -0.43839103f, 0.06208184f, -0.34790948f},
                   {1.5218863f, -1.1896831f, 0.3180406f, 1.2518362f},
                   {0.4551281f, -1.190138f, 1.8135393f, 0.6393279f}}};
constexpr mat W_v{{{-1.9406502f, 0.35411984f, -0.59085363f, -0.40704426f},
                   {0.8450196f, -0.21295227f, 2.219851f, -0.58515114f},
                   {1.1703489f, 1.7554591f, 1.4085048f, -0.09804194f},
                   {0.40726846f, -0.44613966f, -0.89044726f, 0.1120782f}}};

// the four inputs side by side, one token per column: (d, t) = (4, 4)
constexpr auto X = qkv::hconcat(qkv::hconcat(x_1, x_2), qkv::hconcat(x_3, x_4));
static_assert(X(1, 1) == x_2(1, 0) && X(3, 2) == x_3(3, 0));

// ---------------------------------------------------------------------------------------------
// Barebones: no weights. w'_2j = x_2ᵀ x_j, w_2j = softmax_j(w'_2j), y_2 = sum_j w_2j x_j
namespace barebones {
constexpr auto w_prime_2 = qkv::matrix_product(qkv::transposed(x_2), X);  // (1, 4)
// w'_22 = |x_2|^2 = 0.0350 + 1.7995 + 1.2249 + 1.7973 = 4.8567 (4 decimals)
static_assert(proven<check::near(w_prime_2(0, 1), 4.8567f, 1e-4f)>);
// w'_21 = x_2 . x_1 = -0.0391 - 0.7346 - 0.8018 + 1.5163 = -0.0592; w'_23 = -0.4704, w'_24 = 0.7411
static_assert(proven<check::near(w_prime_2(0, 0), -0.0592f, 1e-4f)>);
static_assert(proven<check::near(w_prime_2(0, 2), -0.4704f, 1e-4f) && check::near(w_prime_2(0, 3), 0.7411f, 1e-4f)>);
constexpr auto w_2 = qkv::softmax_rows(w_prime_2);  // (1, 4), sums to 1
constexpr auto y_2 = qkv::matrix_product(X, qkv::transposed(w_2));  // (4, 1) = sum_j w_2j x_j
// x_2 scores itself highest (4.8567 against at most 0.7411), so y_2 is nearly x_2:
// w_22 = 1 / (1 + e^(-0.0592-4.8567) + e^(-0.4704-4.8567) + e^(0.7411-4.8567))
//      = 1 / (1 + 0.00733 + 0.00486 + 0.01632) = 1 / 1.02851 = 0.9723
static_assert(proven<check::near(w_2(0, 1), 0.9723f, 1e-4f)>);
static_assert(proven<check::near(qkv::sum(w_2), 1.0f, 4.0f / (1 << 24))>);  // 4 roundings of a sum of 1
}  // namespace barebones

// ---------------------------------------------------------------------------------------------
// Enter query, key, value

// Step 1: q_2 = W_q x_2, (4, 4) x (4, 1) = (4, 1)
constexpr vec q_2 = qkv::matrix_product(W_q, x_2);
// Step 2: k_i = W_k x_i
constexpr vec k_1 = qkv::matrix_product(W_k, x_1);
constexpr vec k_2 = qkv::matrix_product(W_k, x_2);
constexpr vec k_3 = qkv::matrix_product(W_k, x_3);
constexpr vec k_4 = qkv::matrix_product(W_k, x_4);
// Step 3: scores w'_2i = q_2ᵀ k_i, (1, 4) x (4, 1) = (1, 1)
constexpr scalar w_T_21 = qkv::matrix_product(qkv::transposed(q_2), k_1);
constexpr scalar w_T_22 = qkv::matrix_product(qkv::transposed(q_2), k_2);
constexpr scalar w_T_23 = qkv::matrix_product(qkv::transposed(q_2), k_3);
constexpr scalar w_T_24 = qkv::matrix_product(qkv::transposed(q_2), k_4);
// Step 4: normalise with the softmax as the tutorial writes it (no maximum subtracted)
constexpr float exp_w_T_21 = qkv::exp(w_T_21(0, 0));
constexpr float exp_w_T_22 = qkv::exp(w_T_22(0, 0));
constexpr float exp_w_T_23 = qkv::exp(w_T_23(0, 0));
constexpr float exp_w_T_24 = qkv::exp(w_T_24(0, 0));
constexpr float exp_sum = exp_w_T_21 + exp_w_T_22 + exp_w_T_23 + exp_w_T_24;
constexpr float w_21 = exp_w_T_21 / exp_sum;
constexpr float w_22 = exp_w_T_22 / exp_sum;
constexpr float w_23 = exp_w_T_23 / exp_sum;
constexpr float w_24 = exp_w_T_24 / exp_sum;
// Step 5: v_i = W_v x_i
constexpr vec v_1 = qkv::matrix_product(W_v, x_1);
constexpr vec v_2 = qkv::matrix_product(W_v, x_2);
constexpr vec v_3 = qkv::matrix_product(W_v, x_3);
constexpr vec v_4 = qkv::matrix_product(W_v, x_4);
// Step 6: y_2 = w_21 v_1 + w_22 v_2 + w_23 v_3 + w_24 v_4
constexpr vec y_2 = w_21 * v_1 + w_22 * v_2 + w_23 * v_3 + w_24 * v_4;

// The tutorial's printed results (TensorFlow, float32)
constexpr vec q_2_printed{{{1.0629584f}, {-1.5088519f}, {3.2348833f}, {-0.9673554f}}};
constexpr vec y_2_printed{{{0.11782318f}, {0.39491105f}, {-2.4440105f}, {0.5687822f}}};
// scores: -6.288555, -1.5252657, -13.573791, -1.7212026; weights w_21 = 0.00466374, w_22 = 0.5462668
// By hand, the sign pattern: q_2 = [1.06, -1.51, 3.23, -0.97] and k_3 = [-1.32, 0.58, -3.84, -1.17]
// point apart (1.06 * -1.32 - 1.51 * 0.58 - 3.23 * 3.84 + 0.97 * 1.17 = -13.57), so x_3 gets
// e^-13.57 / sum = 3.2e-6 of the weight: y_2 is mostly v_2 and v_4 (w_22 = 0.546, w_24 = 0.449).
static_assert(proven<check::near(w_T_23(0, 0), -13.573791f, 2e-5f)>);
static_assert(proven<check::near(w_22 + w_24, 0.99533f, 1e-5f)>);

// y_2 agrees with the tutorial's print to 1e-6 (TensorFlow sums in another order; its print
// has 8 significant digits)
static_assert(proven<check::near(y_2, y_2_printed, 1e-6f)>);
static_assert(proven<check::near(q_2, q_2_printed, 1e-6f)>);

// ---------------------------------------------------------------------------------------------
// The same steps against PyTorch's float64 results, with bounds derived step by step.
// PyTorch's float64 results (tests/data/reference/002, float64) for the same float32 inputs:
constexpr matrix<double, 4, 1> q_2_float64{{{1.0629584768379288}, {-1.5088518643299849},
                                            {3.2348830746142525}, {-0.9673553809137125}}};
constexpr matrix<double, 4, 1> y_2_float64{{{0.11782317849961756}, {0.3949111216442668},
                                            {-2.4440104933181352}, {0.5687821500300984}}};
constexpr double w_23_float64 = 3.1974033965237617e-06;
constexpr double w_24_float64 = 0.44906628521447334;

// The bound, by the standard model (core/bounds.hpp): inputs exact (they are float32 values);
//   q_2, k_i, v_i:  gamma_4 |W| |x|                         (4 products, 3 additions)
//   scores:         gamma_4 (|q|+dq)(|k|+dk) + dq|k| + |q|dk + dq dk
//   exp:            e (e^ds - 1) + 2u e'  <= e (ds (1 + ds) + 2u (1 + ds))  (1 ulp exp)
//   exp_sum:        the 4 errors + gamma_3 sum e
//   w_2i = e/s:     w (de/e + ds/s + u) (1 + ...) to first order, rounded up by 1%
//   y_2:            gamma_4 (|w|+dw)(|v|+dv) + dw|v| + |w|dv + dw dv
// plus gamma_4 of double for PyTorch's own float64 rounding (1e-15: negligible but counted).
namespace bound {
using qkv::bounds::gamma;
using qkv::bounds::product_error;
constexpr double u = qkv::bounds::unit_roundoff<float>();
using dvec = matrix<double, 4, 1>;
constexpr auto Wq = qkv::matrix_cast<double>(W_q), Wk = qkv::matrix_cast<double>(W_k),
               Wv = qkv::matrix_cast<double>(W_v), Xd = qkv::matrix_cast<double>(X);
constexpr auto dq = product_error<float>(Wq, qkv::column(Xd, 1));  // (4, 1)
constexpr auto dK = product_error<float>(Wk, Xd);                   // (4, 4): column i is dk_i
constexpr auto dV = product_error<float>(Wv, Xd);                   // (4, 4): column i is dv_i
constexpr auto ds = product_error<float>(qkv::transposed(qkv::matrix_cast<double>(q_2)),
                                         qkv::transposed(dq), qkv::matrix_product(Wk, Xd), dK);  // (1, 4)
constexpr double e[4] = {exp_w_T_21, exp_w_T_22, exp_w_T_23, exp_w_T_24};
constexpr auto de = [] {
  matrix<double, 1, 4> out;
  for (int i = 0; i < 4; ++i) out(0, i) = e[i] * (ds(0, i) * (1 + ds(0, i)) + 2 * u * (1 + ds(0, i)));
  return out;
}();
constexpr double dsum = qkv::sum(de) + gamma<float>(3) * (e[0] + e[1] + e[2] + e[3]);
constexpr auto dw = [] {
  matrix<double, 4, 1> out;
  for (int i = 0; i < 4; ++i) out(i, 0) = 1.01 * (e[i] / exp_sum) * (de(0, i) / e[i] + dsum / exp_sum + u);
  return out;
}();
constexpr matrix<double, 4, 1> w{{{w_21}, {w_22}, {w_23}, {w_24}}};
constexpr auto dy = product_error<float>(qkv::matrix_product(Wv, Xd), dV, w, dw) +
                    scaled(gamma<double>(8), qkv::filled<double, 4, 1>(10.0));
}  // namespace bound

static_assert(proven<check::within(q_2, q_2_float64, bound::dq + scaled(qkv::bounds::gamma<double>(4),
                                                                         qkv::filled<double, 4, 1>(10.0)))>);
static_assert(proven<check::within(matrix<float, 1, 1>{{{w_23}}}, matrix<double, 1, 1>{{{w_23_float64}}},
                                   matrix<double, 1, 1>{{{bound::dw(2, 0)}}})>);
static_assert(proven<check::within(matrix<float, 1, 1>{{{w_24}}}, matrix<double, 1, 1>{{{w_24_float64}}},
                                   matrix<double, 1, 1>{{{bound::dw(3, 0)}}})>);
static_assert(proven<check::within(y_2, y_2_float64, bound::dy)>);
// A worst-case bound is loose (the actual differences are near 1e-7; the cancellation in the
// scores, |q||k| = 20 for a score of -13.6, dominates it), but it is below 1e-4, finer than the
// tutorial's 4-decimal reasoning, and it is derived, not chosen.
static_assert(qkv::max_abs_difference(bound::dy, matrix<double, 4, 1>{}) < 1e-4);

// ---------------------------------------------------------------------------------------------
// The whole computation in one call: tokens as columns (qkv::columns), unscaled. The library
// subtracts the maximum score before exp (stable); the tutorial does not: same weights up to
// rounding, and y_2 is row 1 of the context.
constexpr auto result = qkv::self_attention(X, W_q, W_k, W_v, qkv::columns,
                                            {qkv::scaling<float>::none()});
static_assert(result.queries == qkv::transposed(qkv::matrix_product(W_q, X)));  // same sums, same bits
static_assert(proven<check::within(qkv::transposed(qkv::row(result.context, 1)), y_2_float64, bound::dy)>);

// ---------------------------------------------------------------------------------------------
inline void walkthrough() {
  using qkv::io::numpy_str;
  auto show = [](const char* name, const auto& m) { std::cout << name << ":\n" << numpy_str(m) << "\n"; };
  std::cout << "Walking through the math behind self-attention (tutorial 002), proven at compile time\n\n"
            << "Barebones (no weights): w'_2j = x_2ᵀ x_j, w_2j = softmax, y_2 = sum_j w_2j x_j\n";
  show("w'_2", barebones::w_prime_2);
  show("w_2", barebones::w_2);
  show("y_2", barebones::y_2);
  std::cout << "\nStep 0: our vectors are:\n";
  show("x_1", x_1); show("x_2", x_2); show("x_3", x_3); show("x_4", x_4);
  std::cout << "Our matrices are:\n";
  show("W_q", W_q); show("W_k", W_k); show("W_v", W_v);
  std::cout << "\nStep 1: q_2 = W_q x_2\n";
  show("q_2", q_2);
  std::cout << "\nStep 2: our key vectors are:\n";
  show("k_1", k_1); show("k_2", k_2); show("k_3", k_3); show("k_4", k_4);
  std::cout << "\nStep 3: our attention scores are:\n";
  show("w_T_21", w_T_21); show("w_T_22", w_T_22); show("w_T_23", w_T_23); show("w_T_24", w_T_24);
  std::cout << "\nStep 4: our normalized attention scores are:\n";
  show("w_21", scalar{{{w_21}}}); show("w_22", scalar{{{w_22}}});
  show("w_23", scalar{{{w_23}}}); show("w_24", scalar{{{w_24}}});
  std::cout << "(The tutorial prints w_T_23 and w_T_24 under the labels w_23 and w_24; these are the\n"
               " normalised weights it meant to print.)\n";
  std::cout << "\nStep 5: our value vectors are:\n";
  show("v_1", v_1); show("v_2", v_2); show("v_3", v_3); show("v_4", v_4);
  std::cout << "\nStep 6: our output vector:\n";
  show("y_2", y_2);
  std::cout << "\nwithin the derived bound (at most " << std::scientific << std::setprecision(1)
            << qkv::max_abs_difference(bound::dy, matrix<double, 4, 1>{}) << std::defaultfloat << std::setprecision(6)
            << ") of PyTorch's float64 y_2, and within 1e-6 of the\ntutorial's print\n";
}

}  // namespace qkv::examples::the_math

// ---------------------------------------------------------------------------------------------
// the learner's page (qkv explain the_math --html FILE): Steps 0 to 6 above for x_2, the vectors
// side by side as matrices (column i is token i); the proofs are this file's static_asserts
namespace qkv::examples::the_math {

template <class Page>
void page(Page& p) {
  using how = typename Page::how;
  p.with_truth();  // its matrices without a how are exact inputs: the page shows the 50-digit truth
  const auto xs = Page::labels("x_", 4), ks = Page::labels("k_", 4), vs = Page::labels("v_", 4);
  const auto K = qkv::hconcat(qkv::hconcat(k_1, k_2), qkv::hconcat(k_3, k_4));  // (4, 4), column i is k_i
  const auto V = qkv::hconcat(qkv::hconcat(v_1, v_2), qkv::hconcat(v_3, v_4));  // (4, 4), column i is v_i
  const auto q_2_row = qkv::transposed(q_2);                                     // (1, 4)
  const qkv::matrix<float, 1, 4> scores{{{w_T_21(0, 0), w_T_22(0, 0), w_T_23(0, 0), w_T_24(0, 0)}}};
  const qkv::matrix<float, 1, 4> weights{{{w_21, w_22, w_23, w_24}}};
  const auto weights_col = qkv::transposed(weights);                             // (4, 1)
  p.step(0);
  p.matrix("X", X).cols(xs);
  p.matrix("W_q", W_q);
  p.matrix("W_k", W_k);
  p.matrix("W_v", W_v);
  p.step(1);
  p.matrix("q_2", q_2).cols({"q_2"}).how(how::matmul("W_q", "X", 4, 0, 0, 1))
      .proven(q_2_float64, "q_2_float64 (PyTorch, float64)", -1);
  p.matrix("q_2 (as a row)", q_2_row).rows({"q_2"}).how(how::transposed("q_2")).hidden();
  p.step(2);
  p.matrix("k_i", K).cols(ks).how(how::matmul("W_k", "X", 4));
  p.step(3);
  p.matrix("w_T_2i", scores).rows({"q_2"}).cols(ks).how(how::matmul("q_2 (as a row)", "k_i", 4));
  p.step(4);
  p.matrix("w_2i", weights).rows({"x_2"}).cols(xs).how(how::naive_softmax("w_T_2i"));
  p.heatmap("the weights of x_2 over x_1 .. x_4", {"w_2i"});
  p.matrix("w_2i (as a column)", weights_col).how(how::transposed("w_2i")).hidden();
  p.step(5);
  p.matrix("v_i", V).cols(vs).how(how::matmul("W_v", "X", 4));
  p.step(6);
  p.matrix("y_2", y_2).cols({"y_2"}).how(how::matmul("v_i", "w_2i (as a column)", 4))
      .proven(y_2_float64, "y_2_float64 (PyTorch, float64)", -1);
}

}  // namespace qkv::examples::the_math

#ifndef QKV_EXAMPLE_NO_MAIN
int main() { qkv::examples::the_math::walkthrough(); }
#endif
